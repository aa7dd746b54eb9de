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

use crate::backend::prelude::*;
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
        self.rng.commit();
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
        self.rng.restart();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }

    /// The backend drew `token` with original probability `p`: what `apply` records; the
    /// average moves only when the token is accepted.
    fn backend_feedback(&mut self, token: Token, p: f32) {
        self.pending = Some((token, p));
    }
}

impl AdaptiveP {
    /// The adapted target `clamp(2 target - average, 0, 1)` (`target` clamped to `[0, 1]`
    /// where nothing is averaged yet), in f32 as `apply` computes it.
    fn adapted(&self) -> f32 {
        let target = self.target.clamp(0.0, 1.0);
        if self.total_weight == 0.0 { target } else { 2.0 * target - self.weighted_sum / self.total_weight }
            .clamp(0.0, 1.0)
    }
}

const PLAIN: u32 = 0;
const ADAPT: u32 = 1;

/// A selecting stage on any record. `target < 0`: a plain draw from the softmax, as `dist`.
/// Otherwise the softmax `p`, each finite logit replaced by `5 - 10 d^2 / (1 + d)` with
/// `d = |p - adapted| / 0.3` (the adapted target an input the host computes from the average, in
/// the CPU sampler's f32 arithmetic), and the draw on the `DRAW` stream in the record's order; the
/// drawn token's original probability is read back (4 bytes) for the average, which the sampler
/// commits when the token is accepted.
impl BackendStage for AdaptiveP {
    fn key(&self, _form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        let v = if self.target < 0.0 { PLAIN } else { ADAPT };
        Some((StageKey::new::<Self>(NAME, v, 0).clearing_inf(), Form::Token))
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let stream = graph::philox::stream::DRAW;
        if key.variant() == PLAIN {
            return Ok(Record::Token(match rec {
                Record::Vocab { x, pending, unmasked, .. } => {
                    crate::samplers::dist::draw_vocab(cx, x, pending, unmasked.is_some(), false)?
                }
                Record::List { ids, vals, k, .. } => {
                    let vals = cx.contiguous(vals)?;
                    let (pos, valid) = cx.draw_position(vals, k, stream)?;
                    let tok = cx.gather(ids, pos, k, 1)?;
                    cx.fold_token(tok, valid)?
                }
                Record::Token(t) => t,
            }));
        }
        let rec = cx.materialize(rec)?;
        let (vals, width) = match rec {
            Record::Vocab { x, .. } => (cx.contiguous(x)?, cx.n_vocab()),
            Record::List { vals, k, .. } => (cx.contiguous(vals)?, k),
            Record::Token(t) => return Ok(Record::Token(t)),
        };
        let adapted = cx.param::<Self>("adapted", 1, |s, out| out.f32(s.adapted()))?;
        let probs = cx.g.soft_max(vals, None, 1.0)?;
        let diff = cx.g.sub(probs, adapted)?;
        let w = cx.fill(&[1, 1], WIDTH)?;
        let q = cx.g.div(diff, w)?;
        let zero = cx.fill(&[1, 1], 0.0)?;
        let nonneg = cx.g.ge(q, zero)?;
        let nq = cx.g.neg(q)?;
        let d = cx.g.where_(nonneg, q, nq)?;
        let sd = cx.g.scale(d, SHARPNESS)?;
        let sdd = cx.g.mul(sd, d)?;
        let one_d = cx.g.scale_bias(d, 1.0, 1.0)?;
        let frac = cx.g.div(sdd, one_d)?;
        let t = cx.g.scale_bias(frac, -1.0, PEAK)?;
        let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
        let finite = cx.g.gt(vals, ninf)?;
        let t = cx.g.where_(finite, t, ninf)?;
        let (pos, valid) = cx.draw_position(t, width, stream)?;
        let p_sel = cx.gather(probs, pos, width, 1)?;
        cx.feedback(p_sel);
        Ok(Record::Token(match rec {
            Record::List { ids, k, init, .. } => {
                cx.selects_from(Record::List { ids, vals: t, k, init, sorted: false });
                let tok = cx.gather(ids, pos, k, 1)?;
                cx.fold_token(tok, valid)?
            }
            _ => {
                let rec = Record::Vocab { x: t, touched: true, pending: Pending::default(), unmasked: None };
                cx.selects_from(rec);
                cx.fold_token(pos, valid)?
            }
        }))
    }
}
