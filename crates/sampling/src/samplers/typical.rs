//! `typical`: locally typical sampling (llama.cpp's `llama_sampler_init_typical`): orders the
//! candidates by `|-ln p - H|` (distance of their surprise from the entropy `H`) and keeps the
//! shortest prefix of that order whose cumulative probability exceeds `p`, but at least
//! `min_keep`. The result is in that order and marked unsorted.
//!
//! Edge values: `p >= 1` disables it (llama.cpp); `p = 0` keeps the single most typical token;
//! outside `[0, 1]` or NaN: error. Zero-probability candidates add nothing to the entropy
//! (llama.cpp would compute `0 * ln 0 = NaN` there).

use crate::candidates::Candidates;
use crate::error::{Result, unit};
use crate::sampler::Sampler;

/// Locally typical sampling.
#[derive(Debug, Clone)]
pub struct Typical {
    p: f32,
    min_keep: usize,
}

const NAME: &str = "typical";

impl Typical {
    /// Typical sampling with mass `p` in `[0, 1]` and `min_keep`.
    pub fn new(p: f32, min_keep: usize) -> Result<Self> {
        unit(NAME, "p", p)?;
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
}
