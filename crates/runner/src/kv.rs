//! The KV cache layout and each step's host-side inputs.
//!
//! Per layer the cache holds `n_seq` sequence slots of `n_ctx` cells. Keys are a state tensor
//! `[n_embd_kv, n_seq * n_ctx]` (one row per cell, cell `s * n_ctx + pos`), written with
//! `set_rows`; attention reads slot `s` through a view `[head_dim, n_ctx, n_head_kv, n_seq]`.
//! Values are stored transposed, as llama.cpp's `v_trans`: a state tensor of single-element rows
//! `[1, n_seq * n_embd_kv * n_ctx]` where channel `c` of the token at `(s, pos)` is row
//! `(s * n_embd_kv + c) * n_ctx + pos`, so the view `[n_ctx, head_dim, n_head_kv, n_seq]` has
//! contiguous rows along positions and `mul_mat` takes it as its `a` operand directly.
//!
//! A step runs `t` tokens for every slot of a contiguous range of slots (all of them, or those a
//! server's step uses: [`StepInputs::for_slots`]; a batch of sequences in lockstep, each at its
//! own position); a slot with fewer tokens is padded at its end. Padding tokens take the
//! positions after the slot's real tokens, inside its own slot, so they only write cells that its
//! real tokens do not read yet (the causal mask hides them) and that later steps overwrite before
//! reading. A ragged step ([`StepInputs::ragged`]) gives each slot of the range its own count
//! instead, unpadded (none for a slot that takes no part), and output rows only to the slots that
//! sample: a server's prompt chunks in the same step as the others' one decode token.
//!
//! Rolling back (speculative decoding's rejected drafts) is only a position: a slot's next step
//! writes its cells from its position on, and a token at position `p` attends to cells `0..=p`
//! only (sliding-window layers to `p - window + 1 ..= p`: every position keeps its own cell, the
//! window only masks), each either accepted earlier or written in the same step, so the cells of
//! rejected tokens are never read again before they are overwritten.

use crate::config::Config;
use crate::error::{Result, RunnerError};
use graph::DType;

/// Shape and dtype of the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSpec {
    /// Sequence slots.
    pub n_seq: usize,
    /// Cells (positions) per slot.
    pub n_ctx: usize,
    /// Element type of the cache (f32 or f16).
    pub dtype: DType,
}

/// One step's inputs, as the graph built by [`crate::forward`] takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct StepInputs {
    /// Tokens per slot in this step (the longest slot's count).
    pub t: usize,
    /// Each slot's tokens in this step (padding included): all `t`, except in a ragged step.
    /// Slot `s`'s tokens are rows `widths[..s].sum()..` of every per-token input; below, `n_seq
    /// * t` stands for their sum.
    pub widths: Vec<usize>,
    /// Token ids, `[n_seq * t]` (slot-major).
    pub tokens: Vec<i32>,
    /// Positions, `[n_seq * t]`.
    pub pos: Vec<i32>,
    /// Key cache rows written, `[n_seq * t]`.
    pub k_rows: Vec<i32>,
    /// Value cache elements written, `[n_seq * t * n_embd_kv]` (token-major).
    pub v_rows: Vec<i32>,
    /// The cells each slot's attention reads: its first `cells` (every position of the step's
    /// tokens is below it; [`attended_cells`]).
    pub cells: usize,
    /// Causal mask `[cells, 1, 1, n_seq * t]` (a row per token): 0 where it may attend, `-inf`
    /// elsewhere.
    pub mask: Vec<f32>,
    /// The sliding-window layers' mask, shaped as `mask` (models with such layers only): a token at
    /// position `p` also hides the cells at `window` or more positions behind it.
    pub mask_swa: Option<Vec<f32>>,
    /// The output rows, `n_out` per slot (`[n_seq * n_out]`): its last real token, or for
    /// [`StepInputs::with_outputs`] its last `outs[s]` real tokens then repeats of the last.
    pub out_rows: Vec<i32>,
}

/// A step's slots for [`StepInputs::fill`]: each one's token count after padding (`widths`), its
/// real tokens, and the position they start at.
struct Rows<'a> {
    widths: Vec<usize>,
    tokens: &'a [&'a [u32]],
    start: &'a [usize],
}

/// A mask of rows of `from` cells as rows of `to` cells (`to >= from`), the new cells hidden.
fn widen_mask(m: &[f32], from: usize, to: usize) -> Vec<f32> {
    let mut out = vec![f32::NEG_INFINITY; m.len() / from * to];
    for (r, row) in m.chunks(from).enumerate() {
        out[r * to..r * to + from].copy_from_slice(row);
    }
    out
}

/// The least number of cells a step's attention reads ([`attended_cells`]).
pub const MIN_CELLS: usize = 32;

/// How many cells of each slot a step attends to when its tokens' positions end at `needed`
/// (the largest position plus one): `needed` rounded up to a power of two, at least
/// [`MIN_CELLS`], at most the slot's `n_ctx`. Attention then reads the cells in use rather than the
/// whole context (a server's slots of 2048 cells hold a few hundred tokens), with few graph
/// shapes; the cells past `needed` are masked, and masked cells add exact zeros to every sum, so
/// a token's attention is the same whatever the bucket.
pub fn attended_cells(needed: usize, n_ctx: usize) -> usize {
    needed.next_power_of_two().max(MIN_CELLS).min(n_ctx)
}

impl StepInputs {
    /// The inputs for `tokens[s]` appended to slot `s` at position `start[s]` onwards.
    pub fn new(cfg: &Config, cache: &CacheSpec, tokens: &[&[u32]], start: &[usize]) -> Result<StepInputs> {
        let ones = vec![1; tokens.len()];
        Self::with_outputs(cfg, cache, tokens, start, 0, 1, &ones)
    }

    /// The inputs for `tokens[s]` appended to slot `s` at position `start[s]` onwards, padded to
    /// at least `t_min` tokens per slot, with `n_out` output rows per slot: output `j` of slot `s`
    /// is its real token `len - outs[s] + j` for `j < outs[s]` (its last `outs[s]` tokens), and a
    /// repeat of its last token after that (a padding output whose result is not used).
    pub fn with_outputs(
        cfg: &Config,
        cache: &CacheSpec,
        tokens: &[&[u32]],
        start: &[usize],
        t_min: usize,
        n_out: usize,
        outs: &[usize],
    ) -> Result<StepInputs> {
        if tokens.len() != cache.n_seq {
            return Err(RunnerError::Session {
                what: format!("a step with {} token lists", tokens.len()),
                reason: format!("the session has {} sequences; every sequence takes part in every step", cache.n_seq),
            });
        }
        let mut si = Self::for_slots(cfg, cache, 0, tokens, start, t_min, n_out, outs)?;
        // The whole slot (the graphs of `forward::build` and `build_outputs`).
        si.widen(cache.n_ctx);
        Ok(si)
    }

    /// Makes the mask cover `cells` cells per token (at least the current count).
    fn widen(&mut self, cells: usize) {
        if cells <= self.cells {
            return;
        }
        let (from, to) = (self.cells, cells);
        self.mask = widen_mask(&self.mask, from, to);
        self.mask_swa = self.mask_swa.as_deref().map(|m| widen_mask(m, from, to));
        self.cells = cells;
    }

    /// [`StepInputs::with_outputs`] for the slots `lo..lo + tokens.len()` only (the graph of
    /// [`crate::forward::build_slots`]): `tokens[s]`, `start[s]` and `outs[s]` are slot `lo + s`'s;
    /// attention reads [`attended_cells`] cells per slot.
    #[allow(clippy::too_many_arguments)]
    pub fn for_slots(
        cfg: &Config,
        cache: &CacheSpec,
        lo: usize,
        tokens: &[&[u32]],
        start: &[usize],
        t_min: usize,
        n_out: usize,
        outs: &[usize],
    ) -> Result<StepInputs> {
        let t = tokens.iter().map(|x| x.len()).max().unwrap_or(0).max(t_min);
        Self::check(cfg, cache, lo, tokens, start, t, n_out, outs, |_| t)?;
        let mut si = Self::fill(cfg, cache, lo, Rows { widths: vec![t; tokens.len()], tokens, start }, n_out);
        for (s, toks) in tokens.iter().enumerate() {
            let first = toks.len() - outs[s];
            si.out_rows.extend((0..n_out).map(|j| (s * t + first + j.min(outs[s] - 1)) as i32));
        }
        Ok(si)
    }

    /// A ragged step of the slots `lo..lo + tokens.len()`: each slot evaluates exactly its own
    /// `tokens[s]` at `start[s]` onwards, unpadded (none: the slot takes no part), and the slots
    /// with `sample[s]` have one output row, their last token, in slot order (where none has, the
    /// step's last token is the one output row, unused): the graph of
    /// [`crate::forward::build_ragged`]. Attention reads [`attended_cells`] cells per slot.
    pub fn ragged(
        cfg: &Config,
        cache: &CacheSpec,
        lo: usize,
        tokens: &[&[u32]],
        start: &[usize],
        sample: &[bool],
    ) -> Result<StepInputs> {
        let outs: Vec<usize> = tokens.iter().map(|t| usize::from(!t.is_empty())).collect();
        let t = tokens.iter().map(|x| x.len()).max().unwrap_or(0);
        Self::check(cfg, cache, lo, tokens, start, t, 1, &outs, |s| tokens[s].len())?;
        if sample.len() != tokens.len() || tokens.iter().zip(sample).any(|(t, &s)| s && t.is_empty()) {
            return Err(RunnerError::Session {
                what: format!("a step from slot {lo} with {} sampling flags", sample.len()),
                reason: "one per slot, and a slot that samples has tokens".into(),
            });
        }
        let widths: Vec<usize> = tokens.iter().map(|t| t.len()).collect();
        let mut si = Self::fill(cfg, cache, lo, Rows { widths, tokens, start }, 1);
        let mut end = 0;
        for (w, &s) in si.widths.iter().zip(sample) {
            end += w;
            if s {
                si.out_rows.push((end - 1) as i32);
            }
        }
        if si.out_rows.is_empty() {
            si.out_rows.push((end - 1) as i32);
        }
        Ok(si)
    }

    /// Checks a step's arguments: one token list (ids in the vocabulary; empty only with no
    /// output, and not every one), position and output count (`1..=min(tokens, n_out)`) per
    /// slot of `lo..` within the cache, and `width(s)` tokens from slot `s`'s position within its
    /// context; `t` the longest width.
    #[allow(clippy::too_many_arguments)]
    fn check(
        cfg: &Config,
        cache: &CacheSpec,
        lo: usize,
        tokens: &[&[u32]],
        start: &[usize],
        t: usize,
        n_out: usize,
        outs: &[usize],
        width: impl Fn(usize) -> usize,
    ) -> Result<()> {
        if tokens.is_empty()
            || lo + tokens.len() > cache.n_seq
            || start.len() != tokens.len()
            || outs.len() != tokens.len()
        {
            return Err(RunnerError::Session {
                what: format!(
                    "a step from slot {lo} with {} token lists, {} positions and {} output counts",
                    tokens.len(),
                    start.len(),
                    outs.len()
                ),
                reason: format!("one of each per slot, within the session's {} slots", cache.n_seq),
            });
        }
        for (i, toks) in tokens.iter().enumerate() {
            let s = lo + i;
            if toks.is_empty() {
                // A slot without tokens takes no part (a ragged step's idle slot, no output).
                if outs[i] == 0 && t > 0 {
                    continue;
                }
                return Err(RunnerError::Session {
                    what: format!("sequence {s}"),
                    reason: "has no token in this step".into(),
                });
            }
            if outs[i] == 0 || outs[i] > n_out || outs[i] > toks.len() {
                return Err(RunnerError::Session {
                    what: format!("sequence {s}: {} outputs of its {} tokens", outs[i], toks.len()),
                    reason: format!("must be between 1 and min(tokens, {n_out})"),
                });
            }
            if start[i] + width(i) > cache.n_ctx {
                return Err(RunnerError::ContextFull { seq: s, needed: start[i] + width(i), n_ctx: cache.n_ctx });
            }
            if let Some(&bad) = toks.iter().find(|&&x| x as usize >= cfg.n_vocab) {
                return Err(RunnerError::Token { seq: s, token: bad, n_vocab: cfg.n_vocab });
            }
        }
        if n_out == 0 || n_out > t {
            return Err(RunnerError::Session {
                what: format!("a step of {t} tokens per sequence with {n_out} outputs each"),
                reason: "needs at least one output and at most one per token".into(),
            });
        }
        Ok(())
    }

    /// The per-token inputs of `rows` (slot `s` of them is cache slot `lo + s`), `out_rows` left
    /// empty with room for `n_out` a slot. A slot's tokens past its real ones repeat its last
    /// (padding).
    fn fill(cfg: &Config, cache: &CacheSpec, lo: usize, rows: Rows<'_>, n_out: usize) -> StepInputs {
        let Rows { widths, tokens, start } = rows;
        let (n_seq, n_ctx, kv) = (tokens.len(), cache.n_ctx, cfg.n_embd_kv());
        let n: usize = widths.iter().sum();
        let t = widths.iter().copied().max().unwrap_or(1);
        let needed = start.iter().zip(&widths).filter(|(_, w)| **w > 0).map(|(&p, &w)| p + w).max().unwrap_or(1);
        let cells = attended_cells(needed, n_ctx);
        let mut si = StepInputs {
            t,
            widths: Vec::new(),
            tokens: Vec::with_capacity(n),
            pos: Vec::with_capacity(n),
            k_rows: Vec::with_capacity(n),
            v_rows: Vec::with_capacity(n * kv),
            cells,
            mask: vec![f32::NEG_INFINITY; cells * n],
            mask_swa: cfg.sliding.as_ref().map(|_| vec![f32::NEG_INFINITY; cells * n]),
            out_rows: Vec::with_capacity(n_seq * n_out),
        };
        for (s, toks) in tokens.iter().enumerate() {
            for j in 0..widths[s] {
                let tok = toks.get(j).copied().unwrap_or(*toks.last().expect("non-empty"));
                let pos = start[s] + j;
                let row = si.tokens.len() * cells;
                si.tokens.push(tok as i32);
                si.pos.push(pos as i32);
                let slot = lo + s;
                si.k_rows.push((slot * n_ctx + pos) as i32);
                si.v_rows.extend((0..kv).map(|c| ((slot * kv + c) * n_ctx + pos) as i32));
                si.mask[row..=row + pos].fill(0.0);
                if let (Some(m), Some(sw)) = (si.mask_swa.as_mut(), &cfg.sliding) {
                    m[row + (pos + 1).saturating_sub(sw.window)..=row + pos].fill(0.0);
                }
            }
        }
        si.widths = widths;
        si
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_slots_at_different_positions() {
        let cfg = Config { n_head_kv: 1, head_dim: 2, rope_dims: 2, n_head: 1, ..Config::tiny(10) };
        let cache = CacheSpec { n_seq: 2, n_ctx: 4, dtype: DType::F32 };
        let si = StepInputs::new(&cfg, &cache, &[&[5, 6], &[7]], &[1, 0]).unwrap();
        assert_eq!(si.t, 2);
        assert_eq!(si.tokens, [5, 6, 7, 7]);
        assert_eq!(si.pos, [1, 2, 0, 1]);
        assert_eq!(si.k_rows, [1, 2, 4, 5]);
        // channel c of (s, pos) is (s * 2 + c) * 4 + pos
        assert_eq!(si.v_rows, [1, 5, 2, 6, 8, 12, 9, 13]);
        let ninf = f32::NEG_INFINITY;
        assert_eq!(si.mask[0..4], [0.0, 0.0, ninf, ninf]);
        assert_eq!(si.mask[4..8], [0.0, 0.0, 0.0, ninf]);
        assert_eq!(si.mask[8..12], [0.0, ninf, ninf, ninf]);
        assert_eq!(si.mask[12..16], [0.0, 0.0, ninf, ninf]);
        assert_eq!(si.out_rows, [1, 2]);
    }

    #[test]
    fn sliding_layers_get_a_mask_that_also_hides_the_window_behind() {
        let cfg = Config {
            arch: &crate::arch::GEMMA3,
            sliding: Some(crate::config::Sliding {
                window: 2,
                pattern: crate::config::SwaPattern::Period(2),
                rope_theta: 1e4,
            }),
            n_head_kv: 1,
            head_dim: 2,
            rope_dims: 2,
            n_head: 1,
            ..Config::tiny(10)
        };
        let cache = CacheSpec { n_seq: 1, n_ctx: 8, dtype: DType::F32 };
        // three tokens at positions 3, 4, 5 over 8 cells: globally each sees 0..=pos, in the
        // sliding layers only pos - 1 ..= pos
        let si = StepInputs::new(&cfg, &cache, &[&[1, 2, 3]], &[3]).unwrap();
        let (o, x) = (0.0, f32::NEG_INFINITY);
        assert_eq!(si.mask[..8], [o, o, o, o, x, x, x, x]);
        let swa = si.mask_swa.as_ref().unwrap();
        assert_eq!(swa[..8], [x, x, o, o, x, x, x, x]);
        assert_eq!(swa[8..16], [x, x, x, o, o, x, x, x]);
        assert_eq!(swa[16..24], [x, x, x, x, o, o, x, x]);
        assert!(StepInputs::new(&Config::tiny(10), &cache, &[&[1]], &[0]).unwrap().mask_swa.is_none());
    }

    #[test]
    fn speculative_outputs_are_the_last_tokens_then_padding() {
        let cfg = Config { n_head_kv: 1, head_dim: 2, rope_dims: 2, n_head: 1, ..Config::tiny(10) };
        let cache = CacheSpec { n_seq: 2, n_ctx: 8, dtype: DType::F32 };
        // Slot 0: last token 5 and drafts 6, 7 (3 outputs); slot 1: one token without drafts.
        let si = StepInputs::with_outputs(&cfg, &cache, &[&[5, 6, 7], &[8]], &[2, 4], 4, 4, &[3, 1]).unwrap();
        assert_eq!(si.t, 4);
        assert_eq!(si.tokens, [5, 6, 7, 7, 8, 8, 8, 8]);
        assert_eq!(si.pos, [2, 3, 4, 5, 4, 5, 6, 7]);
        assert_eq!(si.out_rows, [0, 1, 2, 2, 4, 4, 4, 4]);
        let e = StepInputs::with_outputs(&cfg, &cache, &[&[5], &[8]], &[0, 0], 2, 2, &[2, 1]).unwrap_err();
        assert!(e.to_string().contains("2 outputs of its 1 tokens"), "{e}");
        let e = StepInputs::with_outputs(&cfg, &cache, &[&[5], &[8]], &[0, 0], 2, 3, &[1, 1]).unwrap_err();
        assert!(e.to_string().contains("at most one per token"), "{e}");
    }

    #[test]
    fn a_range_of_slots_writes_its_own_cells() {
        let cfg = Config { n_head_kv: 1, head_dim: 2, rope_dims: 2, n_head: 1, ..Config::tiny(10) };
        let cache = CacheSpec { n_seq: 3, n_ctx: 4, dtype: DType::F32 };
        // Slots 1 and 2 only: cells of slot 1 start at 4, of slot 2 at 8.
        let si = StepInputs::for_slots(&cfg, &cache, 1, &[&[5], &[7]], &[2, 0], 1, 1, &[1, 1]).unwrap();
        assert_eq!(si.tokens, [5, 7]);
        assert_eq!(si.pos, [2, 0]);
        assert_eq!(si.k_rows, [6, 8]);
        assert_eq!(si.v_rows, [10, 14, 16, 20]);
        assert_eq!((si.cells, si.mask.len()), (4, 2 * 4), "at most the slot's 4 cells");
        assert_eq!(si.out_rows, [0, 1]);
        let e = StepInputs::for_slots(&cfg, &cache, 2, &[&[5], &[7]], &[0, 0], 1, 1, &[1, 1]).unwrap_err();
        assert!(e.to_string().contains("within the session's 3 slots"), "{e}");
        let e = StepInputs::for_slots(&cfg, &cache, 2, &[&[5, 6, 7]], &[2], 1, 1, &[1]).unwrap_err();
        assert!(e.to_string().contains("sequence 2: 5 positions needed"), "{e}");
    }

    #[test]
    fn a_ragged_step_gives_each_slot_its_own_tokens_unpadded() {
        let cfg = Config { n_head_kv: 1, head_dim: 2, rope_dims: 2, n_head: 1, ..Config::tiny(10) };
        let cache = CacheSpec { n_seq: 3, n_ctx: 8, dtype: DType::F32 };
        // Slot 1: one decode token at position 5; slot 2: a chunk of three at 0.
        let si = StepInputs::ragged(&cfg, &cache, 1, &[&[4], &[1, 2, 3]], &[5, 0], &[true, true]).unwrap();
        assert_eq!((si.t, si.widths.clone()), (3, vec![1, 3]));
        assert_eq!(si.tokens, [4, 1, 2, 3]);
        assert_eq!(si.pos, [5, 0, 1, 2]);
        assert_eq!(si.k_rows, [13, 16, 17, 18]);
        assert_eq!(si.v_rows, [21, 29, 32, 40, 33, 41, 34, 42]);
        assert_eq!(si.out_rows, [0, 3], "each slot's last token");
        assert_eq!((si.cells, si.mask.len()), (8, 4 * 8));
        let (o, x) = (0.0, f32::NEG_INFINITY);
        assert_eq!(si.mask[..8], [o, o, o, o, o, o, x, x]);
        assert_eq!(si.mask[8..16], [o, x, x, x, x, x, x, x]);
        assert_eq!(si.mask[24..32], [o, o, o, x, x, x, x, x]);
        // Slot 0 takes no part; slot 1 feeds without output, slot 2 samples: one output row.
        let si = StepInputs::ragged(&cfg, &cache, 0, &[&[], &[4, 5], &[6]], &[3, 5, 2], &[false, false, true]).unwrap();
        assert_eq!(si.widths, [0, 2, 1]);
        assert_eq!((si.tokens.clone(), si.pos.clone()), (vec![4, 5, 6], vec![5, 6, 2]));
        assert_eq!(si.out_rows, [2]);
        // None samples: the last token is the one (unused) output.
        let si = StepInputs::ragged(&cfg, &cache, 0, &[&[4, 5], &[], &[]], &[0, 0, 0], &[false; 3]).unwrap();
        assert_eq!(si.out_rows, [1]);
        let e = StepInputs::ragged(&cfg, &cache, 1, &[&[4, 5, 6], &[1]], &[6, 0], &[true; 2]).unwrap_err();
        assert!(e.to_string().contains("sequence 1: 9 positions needed"), "{e}");
        let e = StepInputs::ragged(&cfg, &cache, 1, &[&[], &[]], &[0, 0], &[false; 2]).unwrap_err();
        assert!(e.to_string().contains("no token"), "{e}");
        let e = StepInputs::ragged(&cfg, &cache, 1, &[&[4], &[]], &[0, 0], &[true; 2]).unwrap_err();
        assert!(e.to_string().contains("a slot that samples has tokens"), "{e}");
    }

    #[test]
    fn attention_reads_the_cells_in_use_in_few_shapes() {
        assert_eq!(attended_cells(1, 2048), 32);
        assert_eq!(attended_cells(33, 2048), 64);
        assert_eq!(attended_cells(300, 2048), 512);
        assert_eq!(attended_cells(1500, 2048), 2048);
        assert_eq!(attended_cells(90, 100), 100);
        let cfg = Config { n_head_kv: 1, head_dim: 2, rope_dims: 2, n_head: 1, ..Config::tiny(10) };
        let cache = CacheSpec { n_seq: 2, n_ctx: 256, dtype: DType::F32 };
        // Slot 1 at position 40: 64 cells for both slots' rows.
        let si = StepInputs::for_slots(&cfg, &cache, 0, &[&[5], &[7]], &[3, 40], 1, 1, &[1, 1]).unwrap();
        assert_eq!(si.cells, 64);
        assert_eq!(si.mask.len(), 2 * 64);
        assert!(si.mask[..4].iter().all(|&m| m == 0.0) && si.mask[4] == f32::NEG_INFINITY);
        assert!(si.mask[64..64 + 41].iter().all(|&m| m == 0.0) && si.mask[64 + 41] == f32::NEG_INFINITY);
        // The whole-cache form keeps every cell.
        let si = StepInputs::new(&cfg, &cache, &[&[5], &[7]], &[3, 40]).unwrap();
        assert_eq!((si.cells, si.mask.len()), (256, 2 * 256));
        assert!(si.mask[256..256 + 41].iter().all(|&m| m == 0.0) && si.mask[256 + 41] == f32::NEG_INFINITY);
    }

    #[test]
    fn bad_steps_are_errors() {
        let cfg = Config::tiny(10);
        let cache = CacheSpec { n_seq: 1, n_ctx: 4, dtype: DType::F32 };
        let e = StepInputs::new(&cfg, &cache, &[&[1, 2, 3]], &[2]).unwrap_err().to_string();
        assert!(e.contains("sequence 0: 5 positions needed") && e.contains("holds 4"), "{e}");
        let e = StepInputs::new(&cfg, &cache, &[&[10]], &[0]).unwrap_err().to_string();
        assert!(e.contains("token 10 of sequence 0"), "{e}");
        let e = StepInputs::new(&cfg, &cache, &[&[]], &[0]).unwrap_err().to_string();
        assert!(e.contains("no token"), "{e}");
        let e = StepInputs::new(&cfg, &cache, &[&[1], &[1]], &[0, 0]).unwrap_err().to_string();
        assert!(e.contains("2 token lists"), "{e}");
    }
}
