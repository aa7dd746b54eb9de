//! `top_p` (nucleus): keeps the smallest prefix of the candidates sorted by probability whose
//! cumulative probability reaches `p`, but at least `min_keep` (llama.cpp's
//! `llama_sampler_init_top_p`).
//!
//! Edge values: `p >= 1` disables it (llama.cpp); `p = 0` keeps the single most likely token (or
//! `min_keep`); `p` outside `[0, 1]` or NaN is an error. The kept candidates carry llama.cpp's
//! probabilities: the softmax over the set *before* truncation.
//!
//! On the vocabulary view the vocabulary is never sorted: one pass, block by block, computes the
//! softmax denominator (online max) and the 128-token sub-block maxima; the best `k` tokens are
//! then selected by rescanning only the sub-blocks that can hold one (`kernels::top_k_from_maxima`),
//! with `k` twice the size of the previous row's kept set (at least 64); only if their mass is not
//! yet `p` (a flatter row) is the selection widened eightfold, up to the whole vocabulary.

use crate::candidates::{Candidates, TokenData, check_list, sort_desc};
use crate::error::{Result, unit};
use crate::kernels::{self, BlockStats};
use crate::sampler::Sampler;

/// Nucleus sampling.
#[derive(Debug, Clone)]
pub struct TopP {
    p: f32,
    min_keep: usize,
    stats: BlockStats,
    /// Size of the last kept set: the next row's first selection asks for twice that.
    hint: usize,
}

const NAME: &str = "top_p";

impl TopP {
    /// Top-p with `p` in `[0, 1]` and `min_keep`.
    pub fn new(p: f32, min_keep: usize) -> Result<Self> {
        unit(NAME, "p", p)?;
        Ok(Self { p, min_keep, stats: BlockStats::default(), hint: 32 })
    }
}

impl Sampler for TopP {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.p >= 1.0 {
            return Ok(());
        }
        if let Some((row, div)) = cur.vocab_row() {
            let s = 1.0 / div;
            let n = row.len();
            let mut k = (2 * self.hint).clamp(64, 4096).max(self.min_keep).min(n);
            let mut buf = Vec::new();
            kernels::block_stats_with_sub_max(row, s, &mut self.stats);
            crate::candidates::check_scan(NAME, row, self.stats.bad, self.stats.row_max)?;
            kernels::top_k_from_maxima(row, &self.stats.sub_max, k, &mut buf);
            let total = self.stats.weights(s);
            let (a, b) = kernels::exp_affine(self.stats.row_max, s);
            let target = f64::from(self.p) * total;
            loop {
                let mut cum = 0.0f64;
                let mut last = None;
                for (i, &(_, x)) in buf.iter().enumerate() {
                    cum += f64::from(kernels::exp_at(x, a, b));
                    if cum >= target && i + 1 >= self.min_keep {
                        last = Some(i + 1);
                        break;
                    }
                }
                if last.is_some() || k == n {
                    let last = last.unwrap_or(k);
                    let inv = (1.0 / total) as f32;
                    let list: Vec<TokenData> = buf[..last]
                        .iter()
                        .map(|&(id, x)| TokenData {
                            id,
                            logit: if div == 1.0 { x } else { x / div },
                            p: kernels::exp_at(x, a, b) * inv,
                        })
                        .collect();
                    self.hint = last;
                    cur.set_list(list, true);
                    return Ok(());
                }
                // The best k do not carry mass p yet (a flat row): widen and select again.
                k = (k * 8).min(n);
                kernels::top_k_from_maxima(row, &self.stats.sub_max, k, &mut buf);
            }
        }
        cur.softmax(NAME, false)?;
        let sorted = cur.is_sorted();
        let list = cur.list_mut(NAME)?;
        check_list(NAME, list)?;
        if !sorted {
            sort_desc(list);
        }
        let mut cum = 0.0f32;
        let mut last = list.len();
        for (i, t) in list.iter().enumerate() {
            cum += t.p;
            if cum >= self.p && i + 1 >= self.min_keep {
                last = i + 1;
                break;
            }
        }
        list.truncate(last);
        cur.set_sorted(true);
        cur.set_selected(None);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}
