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

use crate::backend::prelude::*;
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

    /// The step moves on here, not when drawing (see [`crate::sampler::Rng`]).
    fn accept(&mut self, _token: crate::Token) {
        self.rng.commit();
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
        self.rng.restart();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

const LIST: u32 = 0;
const VOCAB: u32 = 1;
const MASKED: u32 = 2;

/// On a sorted list ([`on_list`]), on the vocabulary or after a cut on it ([`lower_vocab`]): the
/// removal as a mask; the step's coin (the Philox `XTC` stream at the row's step) is drawn on
/// the host and passed as a flag. On the vocabulary the record keeps the `-inf` entries the CPU
/// chain's list holds, which a read-back of the masked row cannot tell from removed ones: a
/// prefix never ends with it read back for the CPU (`StageKey::keeping_inf`).
impl BackendStage for Xtc {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        let key = |v| StageKey::new::<Self>(NAME, v, 0);
        Some(match form {
            _ if self.p <= 0.0 || self.t > 0.5 => (StageKey::nothing(), form),
            Form::List(_) => (key(LIST), form),
            Form::Vocab if n_vocab < 2 => (StageKey::nothing(), form),
            Form::Vocab => (key(VOCAB).keeping_inf(), Form::Masked),
            _ => (key(MASKED), Form::Masked),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        match cx.sorted(rec)? {
            Record::Vocab { x, unmasked, .. } => lower_vocab(cx, x, unmasked, key.variant() == MASKED),
            Record::List { ids, vals, k, init, .. } => on_list(cx, ids, vals, k, init),
            r => Ok(r),
        }
    }
}

/// `f32 [4, n]` rows: `t`, `-min_keep`, this step's flag (1: the coin says apply; the CPU sampler
/// draws its coin at every apply: stream XTC at the row's step), 0 (padding).
fn params(cx: &mut Lowering<'_>) -> R<[NodeId; 4]> {
    let stage = cx.stage();
    let f = Field::new(move |row, out| {
        let s = row.stage::<Xtc>(stage)?;
        let coin = graph::philox::uniform(s.rng.seed, row.step(), graph::philox::stream::element(stream::XTC, 0));
        out.f32(s.t);
        out.f32(-(s.min_keep as f32));
        out.f32(if coin > s.p { 0.0 } else { 1.0 });
        out.f32(0.0);
        Ok(())
    });
    let par = cx.input(&format!("s{stage}.xtc"), DType::F32, &[4, cx.n()], vec![f])?;
    cx.param_rows(par)
}

/// Xtc on a sorted list: the tokens with `p >= t` are a prefix of `cnt`; all but the last of it
/// go, if the step's coin says so, `cnt > 1` and `len - (cnt - 1) >= min_keep`.
fn on_list(cx: &mut Lowering<'_>, ids: NodeId, vals: NodeId, k: usize, init: NodeId) -> R<Record> {
    let n = cx.n();
    let [t, neg_mk, flag, _] = params(cx)?;
    let probs = cx.g.soft_max(vals, None, 1.0)?;
    let big = cx.g.ge(probs, t)?;
    let cnt = cx.g.sum_rows(big)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    let alive = cx.g.gt(vals, ninf)?;
    let len = cx.g.sum_rows(alive)?;
    let last = cx.g.scale_bias(cnt, 1.0, -1.0)?;
    // len - last >= min_keep  <=>  last - len <= -min_keep  <=>  -min_keep >= last - len
    let d = cx.g.sub(last, len)?;
    let room = cx.g.ge(neg_mk, d)?;
    let zero = cx.fill(&[1, 1], 0.0)?;
    let several = cx.g.gt(last, zero)?;
    let on = cx.g.mul(room, several)?;
    let on = cx.g.mul(on, flag)?;
    // Position i < last  <=>  -i > -last.
    let neg_last = cx.g.scale(last, -1.0)?;
    let pos = cx.neg_positions(k)?;
    let before = cx.g.gt(pos, neg_last)?;
    let drop = cx.g.mul(before, on)?;
    let ninf_full = cx.fill(&[k, n], f32::NEG_INFINITY)?;
    Ok(Record::List { ids, vals: cx.g.where_(drop, ninf_full, vals)?, k, init, sorted: true })
}

/// Xtc on the vocabulary row `x`: the softmax, the tokens of `p >= t` (the
/// sorted list's prefix), the least likely of them (lowest logit, highest id among its ties:
/// the prefix's last entry); where the step's coin (a host input), `cnt > 1` and
/// `n_vocab - (cnt - 1) >= min_keep` say so, all the others become `-inf`. The record keeps
/// the row before (a later top-k tells removed entries from `-inf` ones). `masked` (after a
/// cut on the vocabulary, the masked variant): the row's finite entries in place of
/// `n_vocab` (the CPU chain's list holds only those).
fn lower_vocab(cx: &mut Lowering<'_>, x: NodeId, unmasked: Option<NodeId>, masked: bool) -> R<Record> {
    let (n, nv) = (cx.n, cx.n_vocab);
    let [t, neg_mk, flag, _] = params(cx)?;
    let x = cx.contiguous(x)?;
    let probs = cx.g.soft_max(x, None, 1.0)?;
    let big = cx.g.ge(probs, t)?;
    let cnt = cx.g.sum_rows(big)?;
    // The lowest logit among them: -max(-x) over the big entries.
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    let negx = cx.g.neg(x)?;
    let negx = cx.g.where_(big, negx, ninf)?;
    let neg_low = cx.g.max_rows(negx)?;
    let low = cx.g.neg(neg_low)?;
    let at_low = cx.g.equal(x, low)?;
    let at_low = cx.g.mul(at_low, big)?;
    // The highest id among those.
    let ids = cx.g.arange(DType::F32, &[nv, n], 0.0, 1.0)?;
    let minus = cx.fill(&[1, 1], -1.0)?;
    let cand = cx.g.where_(at_low, ids, minus)?;
    let last_id = cx.g.max_rows(cand)?;
    let is_last = cx.g.equal(ids, last_id)?;
    let not_last = cx.g.scale_bias(is_last, -1.0, 1.0)?;
    let drop = cx.g.mul(big, not_last)?;
    // On: the flag, cnt > 1, and n_vocab - (cnt - 1) >= min_keep  <=>  -min_keep >= cnt - 1 - n_vocab.
    let last = cx.g.scale_bias(cnt, 1.0, -1.0)?;
    let d = if masked {
        let alive = cx.g.gt(x, ninf)?;
        let len = cx.g.sum_rows(alive)?;
        cx.g.sub(last, len)?
    } else {
        cx.g.scale_bias(last, 1.0, -(nv as f32))?
    };
    let room = cx.g.ge(neg_mk, d)?;
    let zero = cx.fill(&[1, 1], 0.0)?;
    let several = cx.g.gt(last, zero)?;
    let on = cx.g.mul(room, several)?;
    let on = cx.g.mul(on, flag)?;
    let drop = cx.g.mul(drop, on)?;
    let ninf_full = cx.fill(&[nv, n], f32::NEG_INFINITY)?;
    let kept = cx.g.where_(drop, ninf_full, x)?;
    Ok(Record::Vocab { x: kept, touched: true, pending: Pending::default(), unmasked: Some(unmasked.unwrap_or(x)) })
}
