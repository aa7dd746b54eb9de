//! `greedy`: selects the token with the highest logit (llama.cpp's `llama_sampler_init_greedy`;
//! ties go to the lowest index). On the vocabulary view this is one vectorised argmax pass.
//!
//! Edge values: none (no parameters; `llama_sampler_greedy_apply` in llama.cpp's
//! `src/llama-sampler.cpp` keeps the first index with the strictly greatest logit).

use crate::backend::prelude::*;
use crate::candidates::{Candidates, check_list, check_scan};
use crate::error::Result;
use crate::kernels;
use crate::sampler::Sampler;

/// Selects the highest logit.
#[derive(Debug, Clone, Default)]
pub struct Greedy;

impl Greedy {
    /// The greedy sampler.
    pub fn new() -> Self {
        Self
    }
}

const NAME: &str = "greedy";

impl Sampler for Greedy {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if let Some((row, div)) = cur.vocab_row() {
            let (i, m, bad) = kernels::argmax(row);
            check_scan(NAME, row, bad, m)?;
            // With a pending temperature the divided values may tie where the raw ones do not;
            // llama.cpp compares the divided values, so find the first one equal to the max.
            let i = if div == 1.0 {
                i
            } else {
                let md = m / div;
                row.iter().position(|&x| x / div == md).unwrap_or(i)
            };
            cur.set_selected(Some(i));
            return Ok(());
        }
        let list = cur.list(NAME)?;
        check_list(NAME, list)?;
        let mut best = 0;
        for (i, t) in list.iter().enumerate().skip(1) {
            if t.logit > list[best].logit {
                best = i;
            }
        }
        cur.set_selected(Some(best));
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// On the vocabulary: `categorical` at zero temperature (the first maximum, -1 for a bad row,
/// one pass), a pending min-p cut left unapplied (the maximum survives it). On a sorted list: the
/// first entry; on an unsorted one, the first maximum in list order (the CPU greedy's scan).
impl BackendStage for Greedy {
    fn key(&self, _form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        Some((StageKey::new::<Self>(NAME, 0, 0).clearing_inf(), Form::Token))
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
        let n = cx.n();
        let rec = match rec {
            Record::Vocab { pending, .. } if pending.temp.is_some() => cx.materialize(rec)?,
            r => r,
        };
        Ok(Record::Token(match rec {
            Record::Vocab { x, .. } => {
                let keys = cx.input("keys", DType::I32, &[4, n], vec![Field::constant_i32(&[0; 4])])?;
                let greedy = cx.input(
                    "greedy",
                    DType::F32,
                    &[2, n],
                    vec![Field::constant(&[f32::INFINITY, f32::NEG_INFINITY])],
                )?;
                cx.g.categorical(x, keys, Some(greedy), None, graph::philox::stream::DRAW as u32)?
            }
            Record::List { ids, vals, sorted: true, .. } => {
                // Sorted: the first candidate; its logit is NaN for a bad row.
                let first = cx.first_row(ids)?;
                let v0 = cx.first_row(vals)?;
                let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
                let ok = cx.g.gt(v0, ninf)?;
                cx.fold_token(first, ok)?
            }
            Record::List { ids, vals, k, sorted: false, .. } => {
                let vals = cx.contiguous(vals)?;
                let at = cx.g.argmax(vals)?;
                let m = cx.gather(vals, at, k, 1)?;
                let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
                let ok = cx.g.gt(m, ninf)?;
                let tok = cx.gather(ids, at, k, 1)?;
                cx.fold_token(tok, ok)?
            }
            Record::Token(t) => t,
        }))
    }
}
