//! `typical`: locally typical sampling (llama.cpp's `llama_sampler_init_typical`): orders the
//! candidates by `|-ln p - H|` (distance of their surprise from the entropy `H`) and keeps the
//! shortest prefix of that order whose cumulative probability exceeds `p`, but at least
//! `min_keep`. The result is in that order and marked unsorted.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_typical` and
//! `llama_sampler_typical_apply`):
//! * `p >= 1`, `+inf` included: disabled (`init_typical` returns the empty sampler);
//! * `p < 0`, `-inf` included: the first token of the typical order already has `cum_sum > p`,
//!   so the single most typical token, or the first `min_keep`; `p = 0` the same here (the most
//!   typical token has a nonzero probability, see below);
//! * `min_keep` 0 and 1 are the same; `min_keep >= n` keeps all `n` in typical order;
//! * NaN `p` is an error: llama.cpp would keep everything only because `cum_sum > NaN` is false.
//!
//! Zero-probability candidates add nothing to the entropy (llama.cpp computes `-0 * ln 0 = NaN`
//! there, which makes every score NaN and its sort order undefined); they have an infinite score
//! and come last.

use crate::candidates::Candidates;
use crate::error::{Result, not_nan};
use crate::sampler::Sampler;

/// Locally typical sampling.
#[derive(Debug, Clone)]
pub struct Typical {
    p: f32,
    min_keep: usize,
}

const NAME: &str = "typical";

impl Typical {
    /// Typical sampling with mass `p` and `min_keep` (`p >= 1`: disabled; `p <= 0`: the most
    /// typical `max(min_keep, 1)`; NaN: error).
    pub fn new(p: f32, min_keep: usize) -> Result<Self> {
        not_nan(NAME, "p", p)?;
        Ok(Self { p, min_keep })
    }
}

impl Sampler for Typical {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.p >= 1.0 {
            return Ok(());
        }
        cur.softmax(NAME, true)?;
        let list = cur.list_mut(NAME)?;
        let mut entropy = 0.0f32;
        for t in list.iter() {
            if t.p > 0.0 {
                entropy += -t.p * t.p.ln();
            }
        }
        let shifted: Vec<f32> = list.iter().map(|t| (-t.p.ln() - entropy).abs()).collect();
        let mut idx: Vec<usize> = (0..list.len()).collect();
        idx.sort_by(|&a, &b| shifted[a].total_cmp(&shifted[b]));
        let mut cum = 0.0f32;
        let mut last = idx.len();
        for (i, &j) in idx.iter().enumerate() {
            cum += list[j].p;
            if cum > self.p && (self.min_keep == 0 || i + 1 >= self.min_keep) {
                last = i + 1;
                break;
            }
        }
        let new: Vec<_> = idx[..last].iter().map(|&j| list[j]).collect();
        cur.set_list(new, false);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    /// Disabled for `p >= 1`; otherwise on a list (see [`crate::backend`]).
    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        Some(if self.p >= 1.0 {
            crate::backend::BackendStage::Disabled("typical")
        } else {
            crate::backend::BackendStage::Typical { p: self.p, min_keep: self.min_keep }
        })
    }
}
