//! `greedy`: selects the token with the highest logit (llama.cpp's `llama_sampler_init_greedy`;
//! ties go to the lowest index). On the vocabulary view this is one vectorised argmax pass.
//!
//! Edge values: none (no parameters; `llama_sampler_greedy_apply` in llama.cpp's
//! `src/llama-sampler.cpp` keeps the first index with the strictly greatest logit).

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

    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        Some(crate::backend::BackendStage::Greedy)
    }
}
