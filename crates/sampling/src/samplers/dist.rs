//! `dist`: draws a token from the softmax of the candidates' logits (llama.cpp's
//! `llama_sampler_init_dist`), with the uniform number from the Philox generator at
//! `(seed, step, DRAW stream)`.
//!
//! On the vocabulary view it never builds a candidate array: one pass computes each 1024-token
//! block's max and sum of exponentials (online softmax), the uniform number picks the block by its
//! mass, and only that block is rescanned to find the token. llama.cpp selects the first index
//! whose running sum reaches `u * sum`; here the first index whose running sum *exceeds* it, so a
//! zero-probability (masked) token is never drawn even when `u = 0`.
//!
//! Edge values: the only parameter is the seed, any `u64` (llama.cpp's `llama_sampler_init_dist`
//! takes a `uint32_t` and treats `LLAMA_DEFAULT_SEED` as "random"; here every seed is a seed).
//! One candidate: selected (llama.cpp's `llama_sampler_dist_apply` returns early with it).

use crate::candidates::{Candidates, check_scan, draw_index};
use crate::error::Result;
use crate::kernels::{self, BLOCK, BlockStats};
use crate::sampler::{Rng, Sampler, rng_methods};
use graph::philox::stream;

/// Draws from the softmax distribution.
#[derive(Debug, Clone)]
pub struct Dist {
    rng: Rng,
    stats: BlockStats,
}

const NAME: &str = "dist";

impl Dist {
    /// A dist sampler with `seed`, at step 0.
    pub fn new(seed: u64) -> Self {
        Self { rng: Rng::new(seed, stream::DRAW), stats: BlockStats::default() }
    }
}

/// Draws an index of a raw row (logits `row[i] * s`) with the uniform `u`, using one pass of
/// block statistics and a rescan of one block.
pub(crate) fn draw_from_row(stage: &'static str, row: &[f32], s: f32, u: f64, st: &mut BlockStats) -> Result<usize> {
    kernels::block_stats(row, s, st);
    check_scan(stage, row, st.bad, st.row_max)?;
    let total = st.weights(s);
    let target = u * total;
    let mut before = 0.0f64;
    let mut block = None;
    let mut last_nonzero = 0;
    for (b, &wb) in st.weight.iter().enumerate() {
        if wb > 0.0 {
            last_nonzero = b;
            if before + wb > target {
                block = Some(b);
                break;
            }
            before += wb;
        }
    }
    let b = block.unwrap_or(last_nonzero);
    let start = b * BLOCK;
    let end = (start + BLOCK).min(row.len());
    let mut e = [0.0f32; BLOCK];
    let e = &mut e[..end - start];
    let (a, c) = kernels::exp_affine(st.row_max, s);
    ::kernels::row::exp2_into(&row[start..end], a, c, e);
    Ok(start + draw_in_block(e, target - before))
}

/// Group length of the in-block draw.
const GROUP: usize = 64;

/// The first index of `e` whose running sum exceeds `rem` (zero weights skipped); the last nonzero
/// one if rounding leaves `rem` just past the total. Running sums in f64, a group of 64 at a time:
/// a group whose sum keeps the running sum at or below `rem` is skipped whole.
fn draw_in_block(e: &[f32], rem: f64) -> usize {
    let mut cum = 0.0f64;
    let mut last_group = None;
    for (g, grp) in e.chunks(GROUP).enumerate() {
        let mut acc = [0.0f64; 8];
        let (chunks, rest) = grp.as_chunks::<8>();
        for c in chunks {
            for (a, &x) in acc.iter_mut().zip(c) {
                *a += f64::from(x);
            }
        }
        let gs = acc.iter().sum::<f64>() + rest.iter().map(|&x| f64::from(x)).sum::<f64>();
        if gs > 0.0 {
            last_group = Some(g);
        }
        if cum + gs <= rem {
            cum += gs;
            continue;
        }
        for (j, &ej) in grp.iter().enumerate() {
            if ej > 0.0 {
                cum += f64::from(ej);
                if cum > rem {
                    return g * GROUP + j;
                }
            }
        }
    }
    // Rounding left the target just past the block's last token: take it.
    last_group.map_or(0, |g| {
        let grp = &e[g * GROUP..(g * GROUP + GROUP).min(e.len())];
        g * GROUP + grp.iter().rposition(|&x| x > 0.0).unwrap_or(0)
    })
}

impl Sampler for Dist {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let u = self.rng.next_draw();
        if let Some((row, div)) = cur.vocab_row() {
            let i = draw_from_row(NAME, row, 1.0 / div, u, &mut self.stats)?;
            cur.set_selected(Some(i));
            return Ok(());
        }
        cur.softmax(NAME, false)?;
        let i = draw_index(cur.list(NAME)?, u);
        cur.set_selected(Some(i));
        Ok(())
    }

    fn reset(&mut self) {
        self.rng.step = 0;
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();

    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        Some(crate::backend::BackendStage::Dist { seed: self.rng.seed })
    }
}

#[cfg(test)]
mod tests {
    use super::draw_in_block;

    /// The token-by-token definition: the first index whose running f64 sum exceeds `rem`, zero
    /// weights skipped; the last nonzero one if none does.
    fn reference(e: &[f32], rem: f64) -> usize {
        let mut cum = 0.0f64;
        let mut last = 0;
        for (j, &x) in e.iter().enumerate() {
            if x > 0.0 {
                cum += f64::from(x);
                last = j;
                if cum > rem {
                    return j;
                }
            }
        }
        last
    }

    #[test]
    fn in_block_draw_matches_token_by_token_scan() {
        for n in [1usize, 2, 63, 64, 65, 127, 1000, 1024] {
            // Weights of very different sizes, with zeros (masked tokens), including whole zero groups.
            let e: Vec<f32> = (0..n as u32)
                .map(|i| {
                    let h = i.wrapping_mul(2_654_435_761) >> 20;
                    if h % 5 == 0 || (64..128).contains(&i) { 0.0 } else { (h % 97) as f32 * 1e-3 * (1 + h % 3) as f32 }
                })
                .collect();
            let total: f64 = e.iter().map(|&x| f64::from(x)).sum();
            for k in 0..=200 {
                let rem = total * f64::from(k) / 200.0;
                assert_eq!(draw_in_block(&e, rem), reference(&e, rem), "n = {n}, rem = {rem}");
            }
            assert_eq!(draw_in_block(&e, total * 2.0), reference(&e, total * 2.0));
        }
        // All zero: index 0, as before.
        assert_eq!(draw_in_block(&[0.0; 10], 0.0), 0);
    }
}
