//! `softmax` as a chain stage (llama.cpp's `llama_sampler_init_softmax`, before that
//! `llama_sample_softmax`; removed from later llama.cpp, whose stages take their own softmax): sorts
//! the candidates by logit descending, unless they are sorted, and fills their probabilities
//! (llama.cpp's `llama_sampler_softmax_impl(cur_p)` / `llama_sample_softmax`). It has no
//! parameters and removes nothing; what follows sees the same candidates in llama.cpp's sorted
//! order, each with its `p`.
//!
//! * On a list (after `top_k`, `typical`, `logit_bias` ...): sorted (logit descending, ties by lower
//!   id, as every list here) unless it is, and `p` the softmax over it (`Candidates::softmax`:
//!   the shared exponential and an `f64` sum, as every stage's probabilities here).
//! * On the vocabulary view the row is only checked (NaN, `+inf`, all `-inf`: an error naming
//!   this stage) and left as it is: the whole vocabulary in token-id order, unsorted, its
//!   probabilities computed where they are needed (the draw, the output). llama.cpp sorts the whole
//!   vocabulary here; the same candidates and distribution, but a later `dist` walks them in
//!   token-id order, as it walks the survivors of top-p, min-p and typical on the vocabulary
//!   (docs/SAMPLING.md, "Deliberate differences"). Sorting would turn the view into a
//!   vocabulary-sized list (on the backend a `top_k` of the whole row, read back as `8 n_vocab`
//!   bytes for a CPU suffix), and every later stage into its list form over 151936 entries, to
//!   reorder a distribution that no later stage reads in order but `dist`, whose numbers are not
//!   llama.cpp's anyway.
//! * After a cut on the vocabulary (the token-order list that stands for the masked row,
//!   `Candidates::cut_len`) `p` is filled and the token order kept, as on the vocabulary.
//!
//! Backend form: the record between stages carries values, never probabilities (they are computed
//! where they are needed: `categorical` computes the weights of its draw, the candidates read back
//! are the record before the selecting stage with `p` taken from its values). So the stage
//! appends nothing on the vocabulary and on the masked row ([`StageKey::nothing`]: it does not end
//! the backend prefix), and on a list it sorts a list a stage left unsorted (`Lowering::sorted`:
//! an `argsort` and three gathers), nothing on a sorted one: what follows, and the candidates' read-back, see
//! the CPU chain's order and the probabilities of those values.

use crate::backend::prelude::*;
use crate::candidates::{Candidates, check_scan};
use crate::error::Result;
use crate::kernels;
use crate::sampler::Sampler;

/// The softmax stage: sorts (on a list) and fills the probabilities.
#[derive(Debug, Clone, Default)]
pub struct Softmax;

const NAME: &str = "softmax";

impl Softmax {
    /// The softmax stage.
    pub fn new() -> Self {
        Self
    }
}

impl Sampler for Softmax {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if let Some((row, _)) = cur.vocab_row() {
            let (max, bad) = kernels::max_bad(row);
            return check_scan(NAME, row, bad, max);
        }
        // After a cut on the vocabulary: p in token order; on any other list: sorted, then p.
        let cut = cur.cut_len().is_some();
        cur.softmax(NAME, !cut)
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// On a list: the list sorted where a stage left it unsorted. Elsewhere nothing (see the module
/// doc).
impl BackendStage for Softmax {
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        Some(match form {
            Form::List(_) => (StageKey::new::<Self>(NAME, 0, 0), form),
            _ => (StageKey::nothing(), form),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
        match rec {
            Record::List { .. } => cx.sorted(rec),
            r => Ok(r),
        }
    }
}
