//! `min_p`: keeps the tokens whose probability is at least `p` times the largest one, i.e. whose
//! logit is at least `max + ln p`, but at least `min_keep` (llama.cpp's `llama_sampler_init_min_p`).
//! Like llama.cpp's unsorted path, the kept tokens stay in their current (vocabulary) order and
//! the array is marked unsorted; when none or fewer than `min_keep` pass, llama.cpp's sorted
//! fallback runs: sorted, the first token always kept, then every token `>= max + ln p` and at
//! least `min_keep`, which is the top `max(min_keep, 1)` (all that pass were fewer).
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_min_p` and
//! `llama_sampler_min_p_apply`):
//! * `p <= 0`, `-inf` included: disabled (`init_min_p` returns the empty sampler);
//! * `p = 1`: the tokens tied with the max;
//! * `p > 1`, `+inf` included: the threshold `max + logf(p)` lies above the max, the unsorted
//!   path keeps nothing and the sorted fallback keeps the first token: the top `max(min_keep, 1)`,
//!   sorted. (The threshold is computed in `f32` as llama.cpp does, so a `p` just above 1 whose
//!   `ln p` is lost against a large max keeps the ties of the max, as there.)
//! * `min_keep` 0 and 1 are the same; `min_keep >= n` keeps all `n`, sorted;
//! * NaN `p` is an error: llama.cpp would keep everything (sorted) only because `logit < NaN` is
//!   false for every token, an accident of the comparison.
//!
//! On the vocabulary view: one pass, block by block, tracks the running max and gathers every
//! token above `running max + ln p`; the final max then trims the gathered set. Where fewer than
//! `max(min_keep, 1)` pass (`p > 1` included), the fallback's top `max(min_keep, 1)` are left in
//! token-id order, unsorted, not sorted as llama.cpp leaves them: the same tokens and
//! distribution, but a later `dist` walks them in token order, as it walks the masked vocabulary
//! row the backend draws from (docs/SAMPLING.md, "Deliberate differences"). On a list the
//! fallback stays sorted, as llama.cpp's.
//!
//! After a cut on the vocabulary (the CPU chain's token-order list that stands for the masked row,
//! `Candidates::cut_len`) the vocabulary view's rule runs on the list: its fallback's top
//! `max(min_keep, 1)` are left in token order too (docs/SAMPLING.md, "Deliberate differences").

use crate::backend::prelude::*;
use crate::candidates::{Candidates, TokenData, check_list, check_scan};
use crate::error::{Result, not_nan};
use crate::kernels;
use crate::sampler::Sampler;
use crate::samplers::top_k::{top_k_list, top_k_row};

/// Min-p truncation.
#[derive(Debug, Clone)]
pub struct MinP {
    p: f32,
    min_keep: usize,
}

const NAME: &str = "min_p";

impl MinP {
    /// Min-p with ratio `p` and `min_keep` (`p <= 0`: disabled; `p > 1`: the top
    /// `max(min_keep, 1)`; NaN: error).
    pub fn new(p: f32, min_keep: usize) -> Result<Self> {
        not_nan(NAME, "p", p)?;
        Ok(Self { p, min_keep })
    }
}

impl MinP {
    /// After a cut on the vocabulary (a token-order list of finite entries): the vocabulary
    /// view's rule on it, the passing tokens where at least `max(min_keep, 1)` pass, else the top
    /// `max(min_keep, 1)` (all, where the list is shorter), left in token-id order.
    fn apply_cut(&self, cur: &mut Candidates<'_>, ln_p: f32) -> Result<()> {
        let min_keep = self.min_keep;
        let list = cur.list_mut(NAME)?;
        check_list(NAME, list)?;
        let max = list.iter().fold(f32::NEG_INFINITY, |m, t| m.max(t.logit));
        let thr = max + ln_p;
        let n_pass = list.iter().filter(|t| t.logit >= thr).count();
        if n_pass > 0 && n_pass >= min_keep {
            list.retain(|t| t.logit >= thr);
        } else {
            let mut top = list.clone();
            top_k_list(&mut top, min_keep.max(1));
            let mut ids: Vec<u32> = top.iter().map(|t| t.id).collect();
            ids.sort_unstable();
            list.retain(|t| ids.binary_search(&t.id).is_ok());
        }
        cur.set_selected(None);
        Ok(())
    }
}

impl Sampler for MinP {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.p <= 0.0 {
            return Ok(());
        }
        let ln_p = self.p.ln();
        if cur.vocab_row().is_some() {
            cur.flush_div();
            let (row, _) = cur.vocab_row().expect("vocab view");
            let mut buf = Vec::new();
            let (max, bad) = kernels::min_p_gather(row, ln_p, &mut buf);
            check_scan(NAME, row, bad, max)?;
            let thr = max + ln_p;
            buf.retain(|&(_, x)| x >= thr);
            if !buf.is_empty() && buf.len() >= self.min_keep {
                let list = buf.into_iter().map(|(id, logit)| TokenData { id, logit, p: 0.0 }).collect();
                cur.set_cut_list(list);
            } else {
                // The top max(min_keep, 1), in token-id order (see the module documentation).
                let mut list = top_k_row(NAME, row, 1.0, self.min_keep.max(1))?;
                list.sort_unstable_by_key(|t| t.id);
                cur.set_cut_list(list);
            }
            return Ok(());
        }
        if cur.cut_len().is_some() {
            return self.apply_cut(cur, ln_p);
        }
        let sorted = cur.is_sorted();
        let min_keep = self.min_keep;
        let list = cur.list_mut(NAME)?;
        check_list(NAME, list)?;
        if !sorted {
            let max = list.iter().fold(f32::NEG_INFINITY, |m, t| m.max(t.logit));
            let thr = max + ln_p;
            let n_pass = list.iter().filter(|t| t.logit >= thr).count();
            if n_pass > 0 && n_pass >= min_keep {
                list.retain(|t| t.logit >= thr);
                cur.set_selected(None);
                return Ok(());
            }
            top_k_list(list, list.len());
        }
        let kept = ::kernels::list::min_p_kept(list.len(), |i| list[i].logit, ln_p, min_keep);
        list.truncate(kept);
        cur.set_sorted(true);
        cur.set_selected(None);
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
const KEEP: u32 = 2;

/// On the vocabulary: a pending cut (`max + ln p`) folded into the stage that consumes the row
/// (the draw's parameters, top-k's `k` values), or with `min_keep > 1` or `p > 1` the passing
/// tokens with the top `max(min_keep, 1)` written back over them ([`keep_top`]). On a list: the
/// threshold against the first (largest) value, at least `min_keep`, or fused into one
/// `list_filter`.
impl BackendStage for MinP {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        let key = |v, size| StageKey::new::<Self>(NAME, v, size).clearing_inf();
        Some(match form {
            _ if self.p <= 0.0 => (StageKey::nothing(), form),
            Form::List(_) => (key(LIST, 0), form),
            _ if self.p > 1.0 || self.min_keep > 1 => (key(KEEP, self.min_keep.clamp(1, n_vocab)), Form::Masked),
            _ => (key(VOCAB, 0), Form::Masked),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let ln_p = |cx: &mut Lowering<'_>| cx.param::<Self>("ln_p", 1, |s, out| out.f32(s.p.ln()));
        Ok(match (key.variant(), rec) {
            (VOCAB, Record::Vocab { x, touched, pending, unmasked }) if pending.is_empty() => {
                let lnp = ln_p(cx)?;
                let p = Scalar::new(cx.stage(), NAME, |s| s.downcast_ref::<Self>().map(|m| m.p));
                Record::Vocab { x, touched, pending: Pending { min_p: Some((lnp, p)), ..pending }, unmasked }
            }
            (VOCAB, rec @ Record::Vocab { .. }) => {
                let rec = cx.materialize(rec)?;
                return self.lower(cx, key, rec);
            }
            (KEEP, rec @ Record::Vocab { .. }) => match cx.materialize(rec)? {
                Record::Vocab { x, unmasked, .. } => keep_top(cx, x, unmasked, key.size())?,
                r => r,
            },
            (_, rec @ Record::List { .. }) => match cx.sorted(rec)? {
                Record::List { ids, vals, k, init, .. } => {
                    let lnp = ln_p(cx)?;
                    let mk = cx.param::<Self>("neg_min_keep", 1, |s, out| out.f32(-(s.min_keep.max(1) as f32)))?;
                    let m = cx.first_row(vals)?;
                    let thr = cx.g.add(m, lnp)?;
                    let pass = cx.g.ge(vals, thr)?;
                    let pos = cx.neg_positions(k)?;
                    let first = cx.g.gt(pos, mk)?;
                    let keep = cx.g.add(pass, first)?;
                    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
                    Record::List { ids, vals: cx.g.where_(keep, vals, ninf)?, k, init, sorted: true }
                }
                r => r,
            },
            (_, r) => r,
        })
    }

    fn list_stage(&self, key: StageKey, stage: usize) -> Option<(graph::ListStage, Field)> {
        (key.variant() == LIST).then(|| {
            // `ln p` in f32, as the CPU sampler takes it.
            let f = Field::of::<Self>(stage, |s, out| {
                out.f32(s.p.ln());
                out.f32(s.min_keep as f32);
            });
            (graph::ListStage::MinP, f)
        })
    }
}

/// Min-p with `min_keep > 1` or `p > 1` on the vocabulary row `x` (the CPU
/// sampler's vocabulary-view path): the tokens `>= max + ln p` where at least
/// `k = max(min_keep, 1)` pass, else the top `k`, in token order; the rest `-inf`
/// (`Form::Masked`). Both are the passing tokens with the top `k` written back over them: where
/// `k` or more pass, the top `k` are among them (the `k`-th largest passes); where fewer pass,
/// they are all among the top `k` (the `k`-th largest does not). No count, no branch, no
/// vocabulary-sized mask of the top `k`; the threshold is the CPU sampler's own f32 sum, and
/// top-k's ties go to the lower id as the CPU's, so the decision is exact.
fn keep_top(cx: &mut Lowering<'_>, x: NodeId, unmasked: Option<NodeId>, k: usize) -> R<Record> {
    let n = cx.n;
    let nv = cx.n_vocab;
    let lnp = cx.param::<MinP>("ln_p", 1, |s, out| out.f32(s.p.ln()))?;
    let x = cx.contiguous(x)?;
    let m = cx.g.max_rows(x)?;
    let thr = cx.g.add(m, lnp)?;
    let pass = cx.g.ge(x, thr)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    let masked = cx.g.where_(pass, x, ninf)?;
    let top = cx.g.top_k(x, k)?;
    let vals = cx.gather(x, top, nv, k)?;
    let vals = cx.g.reshape(vals, &[1, k * n])?;
    let at = cx.flat_index(top, nv, k)?;
    let flat = cx.g.reshape(masked, &[1, nv * n])?;
    let written = cx.g.set_rows(flat, vals, at)?;
    let kept = cx.g.reshape(written, &[nv, n])?;
    Ok(Record::Vocab { x: kept, touched: true, pending: Pending::default(), unmasked: Some(unmasked.unwrap_or(x)) })
}
