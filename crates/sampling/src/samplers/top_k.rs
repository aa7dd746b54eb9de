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

    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        Some(crate::backend::BackendStage::TopK { k: self.k })
    }
}
