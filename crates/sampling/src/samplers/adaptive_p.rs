//! `adaptive_p`: adaptive-probability sampling (llama.cpp's `llama_sampler_init_adaptive_p`, PR
//! 17927). A selecting sampler: it keeps an exponential moving average of the *original*
//! probability of the tokens it selected, aims at `target` by computing the adapted target
//! `clamp(2 * target - ema, 0, 1)`, replaces each finite logit by
//! `5 - 10 * d^2 / (1 + d)` with `d = |p - adapted| / 0.3`, and draws from the softmax of that
//! (Philox `DRAW` stream).
//!
//! The average is updated in `accept` when the accepted token is the one it selected:
//! `weighted_sum = p_orig + decay * weighted_sum`, `total_weight = 1 + decay * total_weight`,
//! primed (and reset) to `target / (1 - decay)` and `1 / (1 - decay)`.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_adaptive_p`,
//! `llama_sampler_adaptive_p_apply` and `_accept`):
//! * `target < 0`, `-inf` included: no transform, a plain draw from the softmax;
//! * `target > 1`: clamped to 1 where the adapted target is computed, but the average is primed
//!   (and reset) with the *unclamped* `target / (1 - decay)`, as in llama.cpp; so e.g.
//!   `target = 1.5` starts with an average of 1.5 and an adapted target `clamp(2 - 1.5) = 0.5`,
//!   not 1. `target = +inf` (with `decay > 0`) keeps the average infinite and the adapted target
//!   0; with `decay = 0` the first update gives `p + 0 * inf = NaN`, an error;
//! * `decay` is clamped to `[0, 0.99]` (`-inf` and `+inf` included), as `init_adaptive_p` does;
//! * NaN `target` or `decay`: error (`std::clamp` passes NaN through, every logit would be NaN).

use crate::candidates::{Candidates, draw_index};
use crate::error::{Result, invalid, not_nan};
use crate::sampler::{Rng, Sampler, Token, rng_methods};
use graph::philox::stream;

const WIDTH: f32 = 0.3;
const PEAK: f32 = 5.0;
const SHARPNESS: f32 = 10.0;

/// Adaptive-p.
#[derive(Debug, Clone)]
pub struct AdaptiveP {
    target: f32,
    decay: f32,
    weighted_sum: f32,
    total_weight: f32,
    pending: Option<(Token, f32)>,
    rng: Rng,
}

const NAME: &str = "adaptive_p";

impl AdaptiveP {
    /// Adaptive-p with `target` (`< 0`: disabled), `decay` (clamped to `[0, 0.99]`) and `seed`.
    pub fn new(target: f32, decay: f32, seed: u64) -> Result<Self> {
        not_nan(NAME, "target", target)?;
        not_nan(NAME, "decay", decay)?;
        let decay = decay.clamp(0.0, 0.99);
        if target == f32::INFINITY && decay == 0.0 {
            return Err(invalid(
                NAME,
                "target",
                target,
                "target = inf needs decay > 0: with decay 0 the first update computes p + 0 * inf = NaN",
            ));
        }
        Ok(Self {
            target,
            decay,
            weighted_sum: target / (1.0 - decay),
            total_weight: 1.0 / (1.0 - decay),
            pending: None,
            rng: Rng::new(seed, stream::DRAW),
        })
    }

    /// The running average of selected tokens' original probabilities.
    pub fn average(&self) -> f32 {
        self.weighted_sum / self.total_weight
    }
}

impl Sampler for AdaptiveP {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let u = self.rng.next_draw();
        cur.softmax(NAME, false)?;
        if self.target < 0.0 {
            let idx = draw_index(cur.list(NAME)?, u);
            cur.set_selected(Some(idx));
            return Ok(());
        }
        let target = self.target.clamp(0.0, 1.0);
        let adapted =
            if self.total_weight == 0.0 { target } else { 2.0 * target - self.weighted_sum / self.total_weight }
                .clamp(0.0, 1.0);
        let list = cur.list_mut(NAME)?;
        let original: Vec<f32> = list.iter().map(|t| t.p).collect();
        for t in list.iter_mut() {
            if t.logit == f32::NEG_INFINITY {
                continue;
            }
            let d = ((t.p - adapted) / WIDTH).abs();
            t.logit = PEAK - SHARPNESS * d * d / (1.0 + d);
        }
        cur.set_sorted(false);
        cur.softmax(NAME, false)?;
        let list = cur.list(NAME)?;
        let idx = draw_index(list, u);
        self.pending = Some((list[idx].id, original[idx]));
        cur.set_selected(Some(idx));
        Ok(())
    }

    fn accept(&mut self, token: Token) {
        if let Some((t, p)) = self.pending.take()
            && t == token
        {
            self.weighted_sum = p + self.decay * self.weighted_sum;
            self.total_weight = 1.0 + self.decay * self.total_weight;
        }
    }

    fn reset(&mut self) {
        self.weighted_sum = self.target / (1.0 - self.decay);
        self.total_weight = 1.0 / (1.0 - self.decay);
        self.pending = None;
        self.rng.step = 0;
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();
}
