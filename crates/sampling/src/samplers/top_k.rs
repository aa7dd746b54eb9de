//! `top_k`: keeps the `k` highest logits (llama.cpp's `llama_sampler_init_top_k`).
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_top_k` and
//! `llama_sampler_top_k_impl`): `k <= 0` disables the sampler (`init_top_k` returns the empty
//! sampler, `top_k_impl` returns at `k <= 0`); `k > n` keeps all `n` (`k = min(k, size)`).
//! `k` is llama.cpp's `int32_t`: a SPEC value outside it, or not an integer, does not parse.
//!
//! On the vocabulary view it is one pass computing the max of every 128-token sub-block, then a rescan of
//! the about `k` sub-blocks that can hold a top-k token (see `kernels::top_k`); only the `k`
//! survivors are sorted.

use crate::backend::prelude::*;
use crate::candidates::{Candidates, TokenData, check_list, check_scan, sort_desc};
use crate::error::Result;
use crate::kernels;
use crate::sampler::Sampler;

/// Keeps the `k` highest logits.
#[derive(Debug, Clone)]
pub struct TopK {
    k: i32,
}

const NAME: &str = "top_k";

impl TopK {
    /// Top-k with `k` (`k <= 0`: disabled, as in llama.cpp).
    pub fn new(k: i32) -> Self {
        Self { k }
    }
}

/// The top `k` of a list, sorted (ties: lower id first).
pub(crate) fn top_k_list(list: &mut Vec<TokenData>, k: usize) {
    let k = k.min(list.len());
    if k < list.len() {
        list.select_nth_unstable_by(k - 1, crate::candidates::desc);
        list.truncate(k);
    }
    sort_desc(list);
}

/// The top `k` of a raw row (logits divided by `div`), sorted; checks the row.
pub(crate) fn top_k_row(stage: &'static str, row: &[f32], div: f32, k: usize) -> Result<Vec<TokenData>> {
    let k = k.clamp(1, row.len());
    let mut buf = Vec::with_capacity(2 * k + 64);
    let bad = kernels::top_k(row, k, &mut buf);
    let max = buf.first().map_or(f32::NEG_INFINITY, |e| e.1);
    check_scan(stage, row, bad, max)?;
    Ok(buf.into_iter().map(|(id, x)| TokenData { id, logit: if div == 1.0 { x } else { x / div }, p: 0.0 }).collect())
}

impl Sampler for TopK {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.k <= 0 {
            return Ok(());
        }
        let k = self.k as usize;
        if let Some((row, div)) = cur.vocab_row() {
            let list = top_k_row(NAME, row, div, k)?;
            cur.set_list(list, true);
            return Ok(());
        }
        let sorted = cur.is_sorted();
        let list = cur.list_mut(NAME)?;
        check_list(NAME, list)?;
        if sorted {
            list.truncate(k);
        } else {
            top_k_list(list, k);
        }
        cur.set_sorted(true);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// The list of the top-k `ids` of a vocabulary row and their `vals` (`init`: their values at the
/// list's making), the pending transforms applied to the `k` values; the first value is the row's
/// maximum, and a NaN or `+inf` anywhere in the row ranks first (`graph::Op::TopK`), so it alone
/// tells whether the row is usable (a bad row's values become NaN).
fn list_of(
    cx: &mut Lowering<'_>,
    ids: NodeId,
    mut vals: NodeId,
    init: NodeId,
    pending: Pending,
    kk: usize,
) -> R<Record> {
    let m = cx.first_row(vals)?;
    let ok = cx.finite(m)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    if let Some((lnp, _)) = pending.min_p {
        let thr = cx.g.add(m, lnp)?;
        let keep = cx.g.ge(vals, thr)?;
        vals = cx.g.where_(keep, vals, ninf)?;
    }
    if let Some((t, _)) = pending.temp {
        vals = cx.g.div(vals, t)?;
    }
    let nan = cx.fill(&[1, 1], f32::NAN)?;
    let vals = cx.g.where_(ok, vals, nan)?;
    Ok(Record::List { ids, vals, k: kk, init, sorted: true })
}

/// On the vocabulary: `top_k` of the raw row (as the CPU chain's), the pending transforms then
/// applied to the `k` values (see `list_of`); after a grammar's mask, the masked `top_k` reads the
/// row through the mask (the masked row is never written) and the `k` values are the masked ones
/// (`token_mask` on the list). On a list: its first `k` (sorted first).
impl BackendStage for TopK {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        if self.k <= 0 {
            return Some((StageKey::nothing(), form));
        }
        let k = (self.k as usize).min(match form {
            Form::List(k0) => k0,
            _ => n_vocab,
        });
        Some((StageKey::new::<Self>(NAME, 0, k).clearing_inf(), Form::List(k)))
    }

    fn takes_mask(&self, key: StageKey) -> bool {
        !key.is_nothing()
    }

    fn lower_masked(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record, bits: NodeId) -> R<Record> {
        let Record::Vocab { x, pending, unmasked: None, .. } = rec else {
            let rec = cx.mask_tokens(rec, bits)?;
            return self.lower(cx, key, rec);
        };
        let kk = key.size();
        let ids = cx.g.top_k_masked(x, bits, kk)?;
        let raw = cx.gather(x, ids, cx.n_vocab(), kk)?;
        let raw = cx.contiguous(raw)?;
        let vals = cx.g.token_mask(raw, bits, Some(ids))?;
        list_of(cx, ids, vals, vals, pending, kk)
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let kk = key.size();
        Ok(match rec {
            Record::Vocab { x, pending, unmasked, .. } => {
                let (ids, vals, init) = cx.top_k_of_row(x, unmasked, kk)?;
                list_of(cx, ids, vals, init, pending, kk)?
            }
            rec @ Record::List { .. } => match cx.sorted(rec)? {
                Record::List { ids, vals, k, init, .. } if kk < k => cx.list_prefix(ids, vals, init, kk)?,
                r => r,
            },
            r => r,
        })
    }
}
