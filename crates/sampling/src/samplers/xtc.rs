//! `xtc`: "exclude top choices" (llama.cpp's `llama_sampler_init_xtc`). With probability `p` per
//! step (coin from the Philox `XTC` stream), removes every token whose probability is at least
//! `t` except the least likely of them, provided at least `min_keep` tokens remain. The step
//! advances on every apply (the coin is drawn even when unused), so the coin of step k does not
//! depend on earlier rows.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_xtc` and
//! `llama_sample_xtc_apply`):
//! * `p <= 0`, `-inf` included, or `t > 0.5`, `+inf` included: disabled (`init_xtc` returns the
//!   empty sampler), as are fewer than two candidates;
//! * `p >= 1`, `+inf` included: applies at every step (the coin, in `[0, 1)`, is never `> p`);
//! * `t <= 0`, `-inf` included: every probability is `>= t`, so all but the least likely
//!   candidate are removed (if `min_keep <= 1`);
//! * `min_keep` 0 and 1 are the same; `min_keep > n - (number >= t) + 1` leaves them all;
//! * NaN `p` or `t` is an error: llama.cpp would always apply (`chance > NaN` is false) or never
//!   remove (`p >= NaN` is false), accidents of the comparisons.
//!
//! On the vocabulary view the stage never sorts: it removes the same tokens (all of `p >= t` but
//! the least likely, the highest id among its ties) and leaves the rest, the `-inf` entries
//! included, in token-id order (llama.cpp leaves them sorted), as min-p and top-p leave their
//! survivors: the same distribution, but a later `dist` walks them in token order, as the
//! backend's draw walks the masked vocabulary row (docs/SAMPLING.md, "Deliberate differences").
//! An enabled stage turns the view into that token-order list at every step, also where nothing
//! is removed (the coin, `min_keep`, fewer than two above `t`): the same tokens in the same
//! order, but a later `dist` then draws from a list at every step, the draw whose arithmetic the
//! backend's `categorical` on the masked row follows (a draw from the view sums by blocks, and
//! would differ from the backend's at more boundaries).
//!
//! After a cut on the vocabulary (the CPU chain's token-order list that stands for the masked row,
//! `Candidates::cut_len`) the vocabulary view's form runs on the list's finite entries, its
//! `min_keep` against their count.

use crate::candidates::Candidates;
use crate::error::{Result, not_nan};
use crate::sampler::{Rng, Sampler, rng_methods};
use graph::philox::stream;

/// Exclude-top-choices.
#[derive(Debug, Clone)]
pub struct Xtc {
    p: f32,
    t: f32,
    min_keep: usize,
    rng: Rng,
}

const NAME: &str = "xtc";

impl Xtc {
    /// XTC with probability `p`, threshold `t`, `min_keep` and `seed` (`p <= 0` or `t > 0.5`:
    /// disabled; NaN: error).
    pub fn new(p: f32, t: f32, min_keep: usize, seed: u64) -> Result<Self> {
        not_nan(NAME, "p", p)?;
        not_nan(NAME, "t", t)?;
        Ok(Self { p, t, min_keep, rng: Rng::new(seed, stream::XTC) })
    }
}

impl Xtc {
    /// The enabled stage on the vocabulary view, never sorting: the tokens of `p >= t` are the
    /// sorted list's prefix, and its last entry the least likely of them (the lowest logit, the
    /// highest id among its ties: sorted ties come lower id first); where the coin (`apply`) and
    /// the list's rule say so, all the others go, and the rest (the `-inf` entries too) stay in
    /// token-id order. The view becomes that list at every step, also where nothing is removed
    /// (same tokens, same order): a later draw then walks a list as after a removal, the draw the
    /// backend's masked-row `categorical` reproduces (see the module documentation).
    fn on_vocab(&self, cur: &mut Candidates<'_>, apply: bool) -> Result<()> {
        cur.softmax(NAME, false)?;
        cur.mark_cut();
        if !apply {
            return Ok(());
        }
        let list = cur.list(NAME)?;
        let mut cnt = 0usize;
        let mut last: Option<(f32, u32)> = None;
        for e in list.iter().filter(|e| e.p >= self.t) {
            cnt += 1;
            if last.is_none_or(|(l, _)| e.logit <= l) {
                last = Some((e.logit, e.id));
            }
        }
        let Some((_, last_id)) = last else { return Ok(()) };
        if cnt < 2 || list.len() - (cnt - 1) < self.min_keep {
            return Ok(());
        }
        let kept = list.iter().copied().filter(|e| e.p < self.t || e.id == last_id).collect();
        cur.set_cut_list(kept);
        Ok(())
    }
}

impl Sampler for Xtc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let chance = self.rng.next_uniform();
        if self.p <= 0.0 || self.t > 0.5 {
            return Ok(());
        }
        // After a cut on the vocabulary (its finite entries in token order) as on the view.
        let cut = cur.cut_len().is_some();
        if cur.len() < 2 {
            return Ok(());
        }
        if cur.is_vocab_view() || cut {
            return self.on_vocab(cur, chance <= self.p);
        }
        if chance > self.p {
            return Ok(());
        }
        cur.softmax(NAME, true)?;
        let list = cur.list_mut(NAME)?;
        let mut pos_last = 0;
        for (i, e) in list.iter().enumerate() {
            if e.p >= self.t {
                pos_last = i;
            } else {
                break;
            }
        }
        if list.len() - pos_last >= self.min_keep && pos_last > 0 {
            list.drain(..pos_last);
            cur.set_selected(None);
        }
        Ok(())
    }

    fn reset(&mut self) {
        self.rng.step = 0;
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();

    /// Disabled (`p <= 0` or `t > 0.5`): nothing to append. Otherwise the stage on a sorted list,
    /// with this step's coin decided on the host (it depends only on the seed and the step).
    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        if self.p <= 0.0 || self.t > 0.5 {
            return Some(crate::backend::BackendStage::Disabled(NAME));
        }
        Some(crate::backend::BackendStage::Xtc { p: self.p, t: self.t, min_keep: self.min_keep, seed: self.rng.seed })
    }
}
