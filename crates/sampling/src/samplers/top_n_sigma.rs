//! `top_n_sigma`: keeps the tokens whose logit is at least `max - n * sigma`, where `sigma` is the
//! standard deviation of the finite logits (llama.cpp's `llama_sampler_init_top_n_sigma`), then
//! computes the softmax, sorted. Masked tokens are removed rather than set to `-inf`.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_top_n_sigma` and
//! `llama_sampler_top_n_sigma_apply`):
//! * `n <= 0`, `-inf` included: disabled (`init_top_n_sigma` returns the empty sampler), as is a
//!   single candidate;
//! * `n = +inf`: nothing is masked: the threshold is `max - inf = -inf` where `sigma > 0`, and
//!   `max - inf * 0 = NaN` where `sigma = 0` (every finite logit equal), which llama.cpp's
//!   `logit < threshold` test never meets; the stage still sorts and computes the softmax. The
//!   test here is llama.cpp's (`logit < threshold` masks), not its complement, so a NaN
//!   threshold keeps everything as there;
//! * NaN `n` is an error: llama.cpp would mask nothing only because `logit < NaN` is false.
//!
//! On the vocabulary view the survivors are left in token-id order, unsorted (llama.cpp sorts
//! them), as min-p and top-p leave theirs: the same tokens and distribution, but a later `dist`
//! walks them in token order, as the backend's draw walks the masked vocabulary row
//! (docs/SAMPLING.md, "Deliberate differences"). With `n = +inf` the view is left as it is (every
//! token kept, `-inf` ones too). A finite `n` whose `n * sigma` overflows to `+inf` (beyond about
//! 1e37) makes the threshold `-inf` and keeps the `-inf` entries as llama.cpp does; a backend
//! prefix that ends there reads only the finite entries back (docs/SAMPLING.md).
//!
//! After a cut on the vocabulary (the CPU chain's token-order list that stands for the masked row,
//! `Candidates::cut_len`) it runs as on the view: the survivors stay in token order.

use crate::backend::prelude::*;
use crate::candidates::{Candidates, check_list, check_scan};
use crate::error::{Result, not_nan};
use crate::sampler::Sampler;

/// Top-n-sigma truncation.
#[derive(Debug, Clone)]
pub struct TopNSigma {
    n: f32,
}

const NAME: &str = "top_n_sigma";

impl TopNSigma {
    /// Top-n-sigma with `n` (`n <= 0`: disabled; `+inf`: nothing masked; NaN: error).
    pub fn new(n: f32) -> Result<Self> {
        not_nan(NAME, "n", n)?;
        Ok(Self { n })
    }
}

impl Sampler for TopNSigma {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.n <= 0.0 {
            return Ok(());
        }
        // After a cut on the vocabulary (its finite entries in token order) as on the view.
        let cut = cur.cut_len().is_some();
        if cur.len() <= 1 {
            return Ok(());
        }
        let vocab = cur.is_vocab_view() || cut;
        if let Some((row, _)) = cur.vocab_row()
            && self.n == f32::INFINITY
        {
            // Everything kept (`-inf` entries included), in token-id order: the vocabulary view
            // itself, checked as the list would be.
            let (max, bad) = crate::kernels::max_bad(row);
            return check_scan(NAME, row, bad, max);
        }
        let list = cur.list_mut(NAME)?;
        check_list(NAME, list)?;
        let mut max = f32::NEG_INFINITY;
        let mut sum = 0.0f64;
        let mut count = 0usize;
        for t in list.iter().filter(|t| t.logit != f32::NEG_INFINITY) {
            max = max.max(t.logit);
            sum += f64::from(t.logit);
            count += 1;
        }
        let mean = sum / count as f64;
        let var = list
            .iter()
            .filter(|t| t.logit != f32::NEG_INFINITY)
            .map(|t| (f64::from(t.logit) - mean).powi(2))
            .sum::<f64>()
            / count as f64;
        let std = var.sqrt() as f32;
        let thr = max - self.n * std;
        // llama.cpp masks `logit < thr`; a NaN threshold (n = inf, sigma = 0) masks nothing.
        list.retain(|t| thr.is_nan() || t.logit >= thr);
        cur.set_sorted(false);
        cur.set_selected(None);
        // On the vocabulary view the survivors stay in token-id order (see the module doc).
        cur.softmax(NAME, !vocab)?;
        if vocab {
            // A cut on the vocabulary: the survivors in token order (the backend's masked row).
            cur.mark_cut();
        }
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

const LIST: u32 = 0;
const VOCAB: u32 = 1;

/// On a sorted list, on the vocabulary or after a cut on it (the survivors in token order):
/// [`top_n_sigma`], the mask of the entries below `max - n sigma`.
impl BackendStage for TopNSigma {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        Some(match form {
            _ if self.n <= 0.0 => (StageKey::nothing(), form),
            Form::List(_) => (StageKey::new::<Self>(NAME, LIST, 0), form),
            _ if self.n == f32::INFINITY || n_vocab < 2 => (StageKey::nothing(), form),
            _ => (StageKey::new::<Self>(NAME, VOCAB, 0), Form::Masked),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
        Ok(match cx.sorted(rec)? {
            Record::List { ids, vals, k, init, .. } => {
                Record::List { ids, vals: top_n_sigma(cx, vals, false)?, k, init, sorted: true }
            }
            // A NaN or `+inf` logit makes the threshold NaN, which masks nothing: the row keeps
            // its bad value and fails as a bad row.
            Record::Vocab { x, unmasked, .. } => {
                let x = cx.contiguous(x)?;
                let kept = top_n_sigma(cx, x, true)?;
                Record::Vocab {
                    x: kept,
                    touched: true,
                    pending: Pending::default(),
                    unmasked: Some(unmasked.unwrap_or(x)),
                }
            }
            r => r,
        })
    }
}

/// `x [k, n]` with the entries below `max - n sigma` masked (sigma over the finite entries,
/// llama.cpp's `logit < threshold` test: a NaN threshold masks nothing). With `vocab` (`x` the
/// contiguous `[n_vocab, n]` row) the sums are two-level ([`Ctx::row_sum`]).
fn top_n_sigma(cx: &mut Lowering<'_>, x: NodeId, vocab: bool) -> R<NodeId> {
    let nn = cx.param::<TopNSigma>("n", 1, |s, out| out.f32(s.n))?;
    let sum = |c: &mut Lowering<'_>, v: NodeId| if vocab { c.row_sum(v) } else { c.g.sum_rows(v) };
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    let zero = cx.fill(&[1, 1], 0.0)?;
    let finite = cx.g.gt(x, ninf)?;
    let count = sum(cx, finite)?;
    let xs = cx.g.where_(finite, x, zero)?;
    let sum_x = sum(cx, xs)?;
    let mean = cx.g.div(sum_x, count)?;
    let dev = cx.g.sub(xs, mean)?;
    let dev = cx.g.mul(dev, finite)?;
    let sq = cx.g.sqr(dev)?;
    let var = sum(cx, sq)?;
    let var = cx.g.div(var, count)?;
    let std = cx.g.sqrt(var)?;
    let m = cx.g.max_rows(x)?;
    let spread = cx.g.mul(std, nn)?;
    let thr = cx.g.sub(m, spread)?;
    let keep = cx.g.ge(x, thr)?;
    let same = cx.g.equal(thr, thr)?;
    let nan_thr = cx.g.scale_bias(same, -1.0, 1.0)?;
    let keep = cx.g.add(keep, nan_thr)?;
    let ninf2 = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    cx.g.where_(keep, x, ninf2)
}
