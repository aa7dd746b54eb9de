//! Selections straight from a raw f32 row, without sorting it: [`argmax`] (first maximum, with
//! the NaN/+inf flag), the threshold gathers [`gather_ge`] and [`min_p_gather`], and two top-k
//! selections on the composite keys of [`crate::key`]:
//!
//! - [`top_k`] / [`top_k_from_maxima`]: the samplers' `(id, logit)` pairs, best first by
//!   [`desc`] (zeros tie, then lower id, through [`crate::key::rank_key`]: the op's order); rows
//!   with NaN or +inf are flagged (and rejected by the samplers), their selection is meaningless.
//! - [`top_k_indices`]: the `top_k` op's indices, by [`crate::key::order_key`] (zeros tie, every NaN
//!   above +inf, ties lower index first), exact on every row.
//!
//! Every kernel exists as an explicit AVX2+FMA version and a portable one, picked by
//! [`crate::dispatch!`] (or, for [`top_k_indices`]'s scan, one body compiled twice); both give
//! identical results.

use crate::key::{block_max_key, from_order_key, index_key, key_index, order_key, rank_key_value};
use crate::stats::sub_maxima;
use crate::stats::{BLOCK, SUB};
use crate::token_mask::LANE;

// ---------------------------------------------------------------- argmax and gathers

crate::dispatch!(
    /// Index of the first maximum of `xs` (llama.cpp's greedy tie rule: the lowest index wins),
    /// the maximum, and whether any element is NaN or +inf. One pass over the row plus a rescan of
    /// one block.
    pub fn argmax(xs: &[f32]) -> (usize, f32, bool) => x86::argmax | portable::argmax
);

crate::dispatch!(
    /// Appends `(base + i, x)` for every `x = xs[i] >= thr`, in index order.
    pub fn gather_ge(xs: &[f32], base: usize, thr: f32, out: &mut Vec<(u32, f32)>) -> () => x86::gather_ge | portable::gather_ge
);

crate::dispatch!(
    /// Min-p's single pass: returns the row max and the bad flag, and gathers a superset of
    /// `{i : xs[i] >= max + ln_p}` (in index order) into `out`.
    pub fn min_p_gather(xs: &[f32], ln_p: f32, out: &mut Vec<(u32, f32)>) -> (f32, bool) => x86::min_p_gather | portable::min_p_gather
);

/// The first `BLOCK`-long block of `xs` with the largest maximum, that maximum, and whether any
/// element is NaN or +inf: the first pass of [`argmax`], over the portable or AVX2 `max_bad`.
#[inline(always)]
fn best_block(xs: &[f32], max_bad: impl Fn(&[f32]) -> (f32, bool)) -> (usize, f32, bool) {
    let mut best = f32::NEG_INFINITY;
    let mut best_block = 0;
    let mut bad = false;
    for (b, block) in xs.chunks(BLOCK).enumerate() {
        let (m, bb) = max_bad(block);
        bad |= bb;
        if m > best {
            best = m;
            best_block = b;
        }
    }
    (best_block, best, bad)
}

// ---------------------------------------------------------------- top-k selection

/// Orders `(id, logit)` pairs by logit descending in the one order of floats
/// ([`crate::key::order_key`]: -0.0 ties +0.0), then id ascending: the order of [`top_k`]'s output
/// and of the sampler chain's candidate lists (llama.cpp's `>` leaves ties, the two zeros
/// included, in an unspecified order), the order of [`rank_key`], and the order the graph's
/// `top_k`/`argsort` ops give ties, so the backend's lists are the chain's.
#[inline]
pub fn desc(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    order_key(b.1).cmp(&order_key(a.1)).then(a.0.cmp(&b.0))
}

/// Keeps the `k` best keys of `buf`, sorts them best first and decodes them into `out`.
fn finish_top_k(keys: &mut Vec<u64>, k: usize, out: &mut Vec<(u32, f32)>) {
    if keys.len() > k {
        keys.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        keys.truncate(k);
    }
    keys.sort_unstable_by(|a, b| b.cmp(a));
    out.clear();
    out.extend(keys.iter().map(|&k| rank_key_value(k)));
}

/// The k-th largest of the sub-block `maxima` (in the order of [`order_key`]; a zero comes back as
/// +0.0, the same threshold as -0.0), or `-inf` when there are at most
/// `k` of them. A lower bound `L` comes first at the cost of one read of the maxima: split the
/// first `k g` maxima into `k` groups of `g = len / k`; the `k` group maxima are `k` distinct
/// entries `>= L = min(group maxima)`, so the k-th largest is `>= L`, and only the entries `>= L`
/// (usually a few times `k`) go to the selection. (Float comparisons; the maxima of a row without
/// NaN hold no NaN. With NaN the result is meaningless but the call is safe: the row is rejected.)
#[inline(always)]
fn kth_largest_impl(maxima: &[f32], k: usize, scratch: &mut Vec<u32>) -> f32 {
    if k == 0 || k >= maxima.len() {
        return f32::NEG_INFINITY;
    }
    let g = maxima.len() / k;
    let mut lower = f32::INFINITY;
    for group in maxima[..g * k].chunks_exact(g) {
        let gm = group.iter().fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
        lower = if gm < lower { gm } else { lower };
    }
    // Branch-free filter: store every key, advance past the ones that pass.
    scratch.clear();
    scratch.resize(maxima.len(), 0);
    let mut n = 0;
    for &x in maxima {
        scratch[n] = order_key(x);
        n += usize::from(x >= lower);
    }
    scratch.truncate(n);
    if scratch.len() < k {
        return f32::NEG_INFINITY;
    }
    from_order_key(*scratch.select_nth_unstable_by(k - 1, |a, b| b.cmp(a)).1)
}

crate::dispatch!(
    /// [`kth_largest_impl`], compiled for AVX2 where the CPU has it.
    pub(crate) fn kth_largest(maxima: &[f32], k: usize, scratch: &mut Vec<u32>) -> f32 => x86::kth_largest | portable::kth_largest
);

crate::dispatch!(
    /// Appends `rank_key(i, x)` for every `x = xs[i] >= thr` of every 128-token sub-block whose max (in
    /// `maxima`) is `>= thr`.
    pub(crate) fn rescan(xs: &[f32], maxima: &[f32], thr: f32, keys: &mut Vec<u64>) -> () => x86::rescan | portable::rescan
);

/// The `k` largest entries of `xs` as `(index, logit)`, sorted by [`desc`]: one pass of
/// sub-block maxima, then a rescan of the ~k sub-blocks that can hold a top-k token (see
/// [`top_k_from_maxima`]); also returns whether any element is NaN or +inf. Requires
/// `1 <= k <= xs.len()`.
pub fn top_k(xs: &[f32], k: usize, out: &mut Vec<(u32, f32)>) -> bool {
    let mut maxima = Vec::with_capacity(xs.len().div_ceil(SUB));
    let bad = sub_maxima(xs, &mut maxima);
    top_k_from_maxima(xs, &maxima, k, out);
    bad
}

/// The second half of [`top_k`], given the 128-token sub-block maxima of `xs` (as
/// [`block_stats_with_sub_max`] leaves them in [`BlockStats::sub_max`]). The k-th largest of the
/// maxima, `T`, is a lower bound of the k-th largest token (the k sub-blocks with the largest
/// maxima hold k tokens `>= T`), so every top-k token is `>= T` and lies in a sub-block whose max
/// is `>= T`: only those (about k of them) are rescanned, and only their tokens `>= T` are
/// selected from. Requires `1 <= k <= xs.len()`.
///
/// Where `T` is `-inf` (fewer than `k` sub-blocks hold a finite value: a masked row, or a short
/// one), every entry would pass; so the finite entries are rescanned, and the first `-inf` entries
/// by index (the order's ties) fill what they leave of `k`: the same `k` entries, without
/// ordering the whole row.
pub fn top_k_from_maxima(xs: &[f32], maxima: &[f32], k: usize, out: &mut Vec<(u32, f32)>) {
    let mut scratch = Vec::new();
    let thr = kth_largest(maxima, k, &mut scratch);
    let mut keys = Vec::with_capacity(2 * k + SUB);
    if thr == f32::NEG_INFINITY {
        rescan(xs, maxima, f32::MIN, &mut keys);
        let mut need = k.saturating_sub(keys.len());
        for (i, &x) in xs.iter().enumerate() {
            if need == 0 {
                break;
            }
            if x == f32::NEG_INFINITY {
                keys.push(crate::key::rank_key(i as u32, x));
                need -= 1;
            }
        }
    } else {
        rescan(xs, maxima, thr, &mut keys);
    }
    finish_top_k(&mut keys, k, out);
}

// ---------------------------------------------------------------- the `top_k` op: indices

/// Keeps the best `k` of `buf` (unordered) and returns the smallest key among them.
fn flush(buf: &mut Vec<u64>, k: usize) -> u32 {
    if buf.len() > k {
        buf.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        buf.truncate(k);
    }
    (buf.iter().copied().min().expect("k >= 1") >> 32) as u32
}

/// Entries per chunk of the short-row scan.
const CHUNK: usize = 32;

#[inline(always)]
fn top_k_body<const FMA: bool>(x: &[f32], k: usize, buf: &mut Vec<u64>) {
    let cap = (2 * k).max(k + 64);
    buf.clear();
    // Until the buffer first fills every entry is a candidate.
    let mut thr: Option<u32> = None;
    let consider = |buf: &mut Vec<u64>, thr: &mut Option<u32>, i: usize, key: u32| {
        if thr.is_none_or(|t| key > t) {
            buf.push(index_key(key, i));
            if buf.len() >= cap {
                *thr = Some(flush(buf, k));
            }
        }
    };
    let mut chunks = x.chunks_exact(CHUNK);
    let mut base = 0;
    for c in &mut chunks {
        let mut m = 0u32;
        for &v in c {
            m = m.max(order_key(v));
        }
        if thr.is_none_or(|t| m > t) {
            for (j, &v) in c.iter().enumerate() {
                consider(buf, &mut thr, base + j, order_key(v));
            }
        }
        base += CHUNK;
    }
    for (j, &v) in chunks.remainder().iter().enumerate() {
        consider(buf, &mut thr, base + j, order_key(v));
    }
}
crate::dispatch!(
    /// Short rows: one scan in chunks, skipping any chunk whose largest key is not above the running
    /// threshold, keeping candidates in a buffer and, when that fills, keeping the best `k` with
    /// `select_nth_unstable` (raising the threshold). Leaves in `buf` at least the best `k`
    /// candidates of `x` (as [`index_key`]s), possibly more.
    fn top_k_scan(x: &[f32], k: usize, buf: &mut Vec<u64>) => top_k_body
);

/// Long rows: a first pass takes the maximum key of each of about `16k` blocks; the `k`-th largest
/// of those maxima, `t0`, is a lower bound of the `k`-th largest entry (`k` blocks each hold an entry
/// at or above it). A second pass visits only the blocks whose maximum reaches `t0` (about `k` of
/// them, a sixteenth of the row) and collects every entry with key `>= t0`. Block maxima come from
/// the float max scan ([`crate::row::block_max_bad`]; with a NaN in the row, the integer keys of
/// [`block_max_key`]); without NaN, `key >= t0` is the float comparison `x >= from_order_key(t0)`,
/// tested a vector at a time ([`collect_ge`]).
fn top_k_blocks(x: &[f32], k: usize, buf: &mut Vec<u64>) {
    let block = x.len().div_ceil(16 * k).next_multiple_of(32).max(64);
    let mut float_max = vec![0.0f32; x.len().div_ceil(block)];
    let nan = crate::row::block_max_bad(x, block, &mut float_max) && x.iter().any(|v| v.is_nan());
    let maxima: Vec<u32> = if nan {
        x.chunks(block).map(|b| block_max_key(b).0).collect()
    } else {
        float_max.iter().map(|&m| order_key(m)).collect()
    };
    let mut sorted = maxima.clone();
    let t0 = if sorted.len() > k { *sorted.select_nth_unstable_by(k - 1, |a, b| b.cmp(a)).1 } else { 0 };
    let thr = from_order_key(t0);
    buf.clear();
    if !nan && thr == f32::NEG_INFINITY {
        // A masked row (a grammar's, a ban's): fewer than `k` blocks hold a finite entry, so every
        // entry would pass. Collect the finite entries, then the first `-inf` ones by index (the
        // order's ties) to make `k`: the same candidates, without a selection over the whole row.
        for (b, &m) in maxima.iter().enumerate() {
            if m > t0 {
                collect_ge(&x[b * block..((b + 1) * block).min(x.len())], b * block, f32::MIN, buf);
            }
        }
        let mut need = k.saturating_sub(buf.len());
        for (i, &v) in x.iter().enumerate() {
            if need == 0 {
                break;
            }
            if v == f32::NEG_INFINITY {
                buf.push(index_key(t0, i));
                need -= 1;
            }
        }
        return;
    }
    // The blocks to rescan (about k) lie scattered over the row: ask for all their lines first, so
    // the loads overlap instead of waiting one block at a time.
    let hits: Vec<usize> = (0..maxima.len()).filter(|&b| maxima[b] >= t0).collect();
    for &b in &hits {
        prefetch(&x[b * block..((b + 1) * block).min(x.len())]);
    }
    for &b in &hits {
        let blk = &x[b * block..((b + 1) * block).min(x.len())];
        let base = b * block;
        if nan || t0 == 0 {
            for (j, &v) in blk.iter().enumerate() {
                let key = order_key(v);
                if key >= t0 {
                    buf.push(index_key(key, base + j));
                }
            }
            continue;
        }
        collect_ge(blk, base, thr, buf);
    }
}

/// Asks for the cache lines of `x` (a hint; nothing happens where unsupported).
#[inline]
fn prefetch(x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in x.chunks(16) {
        // SAFETY: a prefetch is only a hint, and the address lies inside `x`.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast()) };
    }
}

fn collect_ge_portable(x: &[f32], base: usize, thr: f32, buf: &mut Vec<u64>) {
    for (j, &v) in x.iter().enumerate() {
        if v >= thr {
            buf.push(index_key(order_key(v), base + j));
        }
    }
}

crate::dispatch!(
    /// Pushes the [`index_key`] of every entry `x[j] >= thr` (float comparison; `x` holds no NaN),
    /// index `base + j`, in index order.
    pub fn collect_ge(x: &[f32], base: usize, thr: f32, buf: &mut Vec<u64>) -> () => x86::collect_ge | collect_ge_portable
);

/// Indices of the `k` largest entries of `x` into `out` (`k` of them, `1 <= k <= x.len()`), by
/// [`order_key`] descending, ties lower index first (the `top_k` op). `buf` is scratch. Short rows
/// are scanned once ([`top_k_scan`]); long ones (`len >= 8192` and `>= 64 k`) go through block
/// maxima ([`top_k_blocks`]); the final `k` candidates are then sorted.
pub fn top_k_indices(x: &[f32], k: usize, buf: &mut Vec<u64>, out: &mut [i32]) {
    if x.len() >= 8192 && x.len() >= 64 * k {
        top_k_blocks(x, k, buf);
    } else {
        top_k_scan(x, k, buf);
    }
    flush(buf, k);
    buf.sort_unstable_by(|a, b| b.cmp(a));
    for (o, &c) in out.iter_mut().zip(buf.iter()) {
        *o = key_index(c) as i32;
    }
}

/// The maximum of each `block`-long block (a multiple of 32) of `x` seen through the mask `bits`
/// (banned entries `-inf`; words past `bits` ban), and whether any entry of `x`, banned or not, is
/// NaN or `+inf` (where the masked row is not `x` or `-inf` and the float maxima do not order it).
#[inline(always)]
fn masked_block_max_body<const FAST: bool>(x: &[f32], bits: &[u32], block: usize, maxima: &mut [f32]) -> bool {
    debug_assert!(block.is_multiple_of(32));
    // Eight lanes (one AVX2 register) of maxima and of "finite or -inf so far" flags.
    let mut fin = [1u32; 8];
    for (b, m) in maxima.iter_mut().enumerate() {
        let xs = &x[b * block..((b + 1) * block).min(x.len())];
        let w0 = b * block / 32;
        let mut acc = [f32::NEG_INFINITY; 8];
        let mut chunks = xs.chunks_exact(32);
        for (j, c) in (&mut chunks).enumerate() {
            let word = bits.get(w0 + j).copied().unwrap_or(0);
            // A word that bans all its entries adds nothing to the maximum, one that allows all
            // adds them as they are: only the flags are taken; else a select per entry.
            match word {
                0 => {
                    for q in 0..4 {
                        for l in 0..8 {
                            fin[l] &= u32::from(c[8 * q + l] < f32::INFINITY);
                        }
                    }
                }
                u32::MAX => {
                    for q in 0..4 {
                        for l in 0..8 {
                            let v = c[8 * q + l];
                            acc[l] = if v > acc[l] { v } else { acc[l] };
                            fin[l] &= u32::from(v < f32::INFINITY);
                        }
                    }
                }
                _ => {
                    for q in 0..4 {
                        for l in 0..8 {
                            let v = c[8 * q + l];
                            let mv = if word & LANE[8 * q + l] != 0 { v } else { f32::NEG_INFINITY };
                            acc[l] = if mv > acc[l] { mv } else { acc[l] };
                            fin[l] &= u32::from(v < f32::INFINITY);
                        }
                    }
                }
            }
        }
        let word = bits.get(w0 + xs.len() / 32).copied().unwrap_or(0);
        for (l, &v) in chunks.remainder().iter().enumerate() {
            let mv = if word & LANE[l] != 0 { v } else { f32::NEG_INFINITY };
            acc[l % 8] = if mv > acc[l % 8] { mv } else { acc[l % 8] };
            fin[l % 8] &= u32::from(v < f32::INFINITY);
        }
        *m = acc.iter().fold(f32::NEG_INFINITY, |a, &v| if v > a { v } else { a });
    }
    fin.contains(&0)
}

crate::dispatch!(
    /// See [`masked_block_max_body`].
    fn masked_block_max(x: &[f32], bits: &[u32], block: usize, maxima: &mut [f32]) -> bool => masked_block_max_body
);

/// Pushes the [`index_key`] of every allowed entry `x[j] >= thr` (a float comparison; `x` holds
/// no NaN) of `x`, the entries `base..` of a row whose mask is `bits` (`base` a multiple of 32).
fn collect_ge_masked(x: &[f32], bits: &[u32], base: usize, thr: f32, buf: &mut Vec<u64>) {
    for (j, c) in x.chunks(32).enumerate() {
        let word = bits.get(base / 32 + j).copied().unwrap_or(0);
        if word == 0 {
            continue;
        }
        for (l, &v) in c.iter().enumerate() {
            if word & LANE[l] != 0 && v >= thr {
                buf.push(index_key(order_key(v), base + 32 * j + l));
            }
        }
    }
}

/// The `top_k` op's indices of `x` seen through the packed allowed-token mask `bits` (the masked
/// `top_k`: exactly [`top_k_indices`] of [`crate::token_mask::mask_vocab`]`(x, bits)`), into `out`
/// (`1 <= k <= x.len()`). A long row without NaN or `+inf` is selected without the masked row ever
/// being written: block maxima through the mask, then a rescan of the blocks that reach their
/// threshold, as [`top_k_blocks`] does on the masked row (the same candidates, so the same `k`);
/// any other row is masked into `scratch` and goes through [`top_k_indices`]. `buf` is scratch.
pub fn top_k_masked_indices(
    x: &[f32],
    bits: &[u32],
    k: usize,
    buf: &mut Vec<u64>,
    scratch: &mut Vec<f32>,
    out: &mut [i32],
) {
    let masked_row = |scratch: &mut Vec<f32>, buf: &mut Vec<u64>, out: &mut [i32]| {
        scratch.resize(x.len(), 0.0);
        crate::token_mask::mask_vocab(x, bits, scratch);
        top_k_indices(scratch, k, buf, out);
    };
    if !(x.len() >= 8192 && x.len() >= 64 * k) {
        return masked_row(scratch, buf, out);
    }
    let block = x.len().div_ceil(16 * k).next_multiple_of(32).max(64);
    let mut maxima = vec![0.0f32; x.len().div_ceil(block)];
    if masked_block_max(x, bits, block, &mut maxima) || maxima.len() <= k {
        return masked_row(scratch, buf, out);
    }
    // Every masked entry is now an entry of `x` (allowed) or -inf: the float maxima order them.
    let mut keys: Vec<u32> = maxima.iter().map(|&m| order_key(m)).collect();
    let t0 = *keys.select_nth_unstable_by(k - 1, |a, b| b.cmp(a)).1;
    let thr = from_order_key(t0);
    buf.clear();
    let blk = |b: usize| b * block..((b + 1) * block).min(x.len());
    if thr == f32::NEG_INFINITY {
        // Fewer than `k` blocks hold a finite allowed entry: those entries, then the first -inf
        // entries of the masked row by index (the order's ties) to make `k`, as `top_k_blocks`.
        for (b, &m) in maxima.iter().enumerate() {
            if m > f32::NEG_INFINITY {
                collect_ge_masked(&x[blk(b)], bits, b * block, f32::MIN, buf);
            }
        }
        let mut need = k.saturating_sub(buf.len());
        for (i, &v) in x.iter().enumerate() {
            if need == 0 {
                break;
            }
            if v == f32::NEG_INFINITY || !crate::token_mask::allowed(bits, i as i64) {
                buf.push(index_key(t0, i));
                need -= 1;
            }
        }
    } else {
        for (b, &m) in maxima.iter().enumerate() {
            if m >= thr {
                collect_ge_masked(&x[blk(b)], bits, b * block, thr, buf);
            }
        }
    }
    flush(buf, k);
    buf.sort_unstable_by(|a, b| b.cmp(a));
    for (o, &c) in out.iter_mut().zip(buf.iter()) {
        *o = key_index(c) as i32;
    }
}

/// The index of the first entry of `x` with the largest [`order_key`] (the `argmax` op: every NaN
/// ranks highest, -0.0 ties +0.0, ties lower index first; 0 for an empty row): [`argmax`], and for a
/// row it flags, the first NaN if there is one (a flagged row without NaN holds +inf, which
/// [`argmax`] already found first).
pub fn argmax_index(x: &[f32]) -> usize {
    let (i, _, bad) = argmax(x);
    if bad && let Some(p) = x.iter().position(|v| v.is_nan()) { p } else { i }
}

// ---------------------------------------------------------------- portable versions

pub(crate) mod portable {
    #![allow(clippy::needless_range_loop)]

    use super::{BLOCK, SUB};
    use crate::key::rank_key;
    use crate::row::max_bad_portable as max_bad;

    const LANES: usize = 16;

    pub fn argmax(xs: &[f32]) -> (usize, f32, bool) {
        let (best_block, best, bad) = super::best_block(xs, max_bad);
        let start = best_block * BLOCK;
        let end = (start + BLOCK).min(xs.len());
        let i = xs[start..end].iter().position(|&x| x == best).unwrap_or(0);
        (start + i, best, bad)
    }

    pub fn gather_ge(xs: &[f32], base: usize, thr: f32, out: &mut Vec<(u32, f32)>) {
        let (chunks, rest) = xs.as_chunks::<LANES>();
        for (ci, c) in chunks.iter().enumerate() {
            let mut any = false;
            for &x in c {
                any |= x >= thr;
            }
            if any {
                for (j, &x) in c.iter().enumerate() {
                    if x >= thr {
                        out.push(((base + ci * LANES + j) as u32, x));
                    }
                }
            }
        }
        let rest_start = xs.len() - rest.len();
        for (j, &x) in rest.iter().enumerate() {
            if x >= thr {
                out.push(((base + rest_start + j) as u32, x));
            }
        }
    }

    pub fn min_p_gather(xs: &[f32], ln_p: f32, out: &mut Vec<(u32, f32)>) -> (f32, bool) {
        // Running max: anything >= running_max + ln p is gathered; the final filter (by the caller)
        // removes what the final max rules out. The buffer is compacted when it grows.
        let mut run_max = f32::NEG_INFINITY;
        let mut bad = false;
        for (b, block) in xs.chunks(BLOCK).enumerate() {
            let (m, bb) = max_bad(block);
            bad |= bb;
            if m > run_max {
                run_max = m;
                let thr = run_max + ln_p;
                if out.len() > 4 * BLOCK {
                    out.retain(|&(_, x)| x >= thr);
                }
            }
            gather_ge(block, b * BLOCK, run_max + ln_p, out);
        }
        (run_max, bad)
    }

    pub fn kth_largest(maxima: &[f32], k: usize, scratch: &mut Vec<u32>) -> f32 {
        super::kth_largest_impl(maxima, k, scratch)
    }

    pub fn rescan(xs: &[f32], maxima: &[f32], thr: f32, keys: &mut Vec<u64>) {
        for (si, &m) in maxima.iter().enumerate() {
            if m >= thr {
                let base = si * SUB;
                let sub = &xs[base..(base + SUB).min(xs.len())];
                for (j, &x) in sub.iter().enumerate() {
                    if x >= thr {
                        keys.push(rank_key((base + j) as u32, x));
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------- AVX2 + FMA versions

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{BLOCK, SUB};
    use crate::key::{index_key, order_key, rank_key};
    use crate::row::x86::{hmax, max_bad};
    use std::arch::x86_64::*;

    /// Calls `f(i)` for every `i` with `xs[i] >= thr` (`cmp` is `_CMP_GE_OQ` or `_CMP_EQ_OQ`), in
    /// index order, until `f` returns false.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn for_each_cmp<const CMP: i32>(xs: &[f32], thr: f32, mut f: impl FnMut(usize, f32) -> bool) {
        let t = _mm256_set1_ps(thr);
        let (chunks, rest) = xs.as_chunks::<16>();
        for (ci, c) in chunks.iter().enumerate() {
            // SAFETY: `c` holds 16 f32.
            let (v0, v1) = unsafe { (_mm256_loadu_ps(c.as_ptr()), _mm256_loadu_ps(c.as_ptr().add(8))) };
            let lo = _mm256_movemask_ps(_mm256_cmp_ps::<CMP>(v0, t)) as u32;
            let hi = _mm256_movemask_ps(_mm256_cmp_ps::<CMP>(v1, t)) as u32;
            let mut mask = lo | (hi << 8);
            while mask != 0 {
                let j = mask.trailing_zeros() as usize;
                if !f(ci * 16 + j, c[j]) {
                    return;
                }
                mask &= mask - 1;
            }
        }
        let rest_start = xs.len() - rest.len();
        for (j, &x) in rest.iter().enumerate() {
            let hit = if CMP == _CMP_EQ_OQ { x == thr } else { x >= thr };
            if hit && !f(rest_start + j, x) {
                return;
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn argmax(xs: &[f32]) -> (usize, f32, bool) {
        let (best_block, best, bad) = super::best_block(xs, |b| max_bad(b));
        let start = best_block * BLOCK;
        let end = (start + BLOCK).min(xs.len());
        let mut first = 0;
        for_each_cmp::<_CMP_EQ_OQ>(&xs[start..end], best, |i, _| {
            first = i;
            false
        });
        (start + first, best, bad)
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn gather_ge(xs: &[f32], base: usize, thr: f32, out: &mut Vec<(u32, f32)>) {
        for_each_cmp::<_CMP_GE_OQ>(xs, thr, |i, x| {
            out.push(((base + i) as u32, x));
            true
        });
    }

    /// Min-p in one read of each block: the maxima of its 64-token groups (kept in registers or
    /// L1), the block max and flag, then a gather that visits only the groups whose max reaches the
    /// threshold.
    #[target_feature(enable = "avx2,fma")]
    pub fn min_p_gather(xs: &[f32], ln_p: f32, out: &mut Vec<(u32, f32)>) -> (f32, bool) {
        let inf = _mm256_set1_ps(f32::INFINITY);
        let mut run_max = f32::NEG_INFINITY;
        let mut bad = false;
        let mut gm = [_mm256_setzero_ps(); BLOCK / 64];
        for (b, block) in xs.chunks(BLOCK).enumerate() {
            let (groups, rest) = block.as_chunks::<64>();
            let mut accm = _mm256_set1_ps(f32::NEG_INFINITY);
            let mut nan = _mm256_setzero_ps();
            for (g, c) in groups.iter().enumerate() {
                let q = c.as_ptr();
                // SAFETY: `c` holds 64 f32: the loads at 0, 8, ..., 56 are in bounds.
                let v: [__m256; 8] = unsafe {
                    [
                        _mm256_loadu_ps(q),
                        _mm256_loadu_ps(q.add(8)),
                        _mm256_loadu_ps(q.add(16)),
                        _mm256_loadu_ps(q.add(24)),
                        _mm256_loadu_ps(q.add(32)),
                        _mm256_loadu_ps(q.add(40)),
                        _mm256_loadu_ps(q.add(48)),
                        _mm256_loadu_ps(q.add(56)),
                    ]
                };
                let m = _mm256_max_ps(
                    _mm256_max_ps(_mm256_max_ps(v[0], v[1]), _mm256_max_ps(v[2], v[3])),
                    _mm256_max_ps(_mm256_max_ps(v[4], v[5]), _mm256_max_ps(v[6], v[7])),
                );
                gm[g] = m;
                accm = _mm256_max_ps(accm, m);
                let n01 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[0], v[1]);
                let n23 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[2], v[3]);
                let n45 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[4], v[5]);
                let n67 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[6], v[7]);
                nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_or_ps(n01, n23), _mm256_or_ps(n45, n67)));
            }
            // +inf shows in the max (or, where a NaN hid it, the NaN is flagged).
            let flags = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_EQ_OQ>(accm, inf));
            let (mut m, mut bb) = (hmax(accm), _mm256_movemask_ps(flags) != 0);
            for &x in rest {
                m = if x > m { x } else { m };
                bb |= crate::row::is_bad(x);
            }
            bad |= bb;
            if m > run_max {
                run_max = m;
                let thr = run_max + ln_p;
                if out.len() > 4 * BLOCK {
                    out.retain(|&(_, x)| x >= thr);
                }
            }
            let thr = run_max + ln_p;
            let tv = _mm256_set1_ps(thr);
            for (g, c) in groups.iter().enumerate() {
                if _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(gm[g], tv)) != 0 {
                    let base = b * BLOCK + g * 64;
                    for_each_cmp::<_CMP_GE_OQ>(c, thr, |i, x| {
                        out.push(((base + i) as u32, x));
                        true
                    });
                }
            }
            let base = b * BLOCK + groups.len() * 64;
            for (i, &x) in rest.iter().enumerate() {
                if x >= thr {
                    out.push(((base + i) as u32, x));
                }
            }
        }
        (run_max, bad)
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn kth_largest(maxima: &[f32], k: usize, scratch: &mut Vec<u32>) -> f32 {
        super::kth_largest_impl(maxima, k, scratch)
    }

    /// The rescan of [`super::top_k_from_maxima`]: the sub-blocks to visit are listed and
    /// prefetched first (they are scattered over a row that is usually out of L2), then scanned.
    #[target_feature(enable = "avx2,fma")]
    pub fn rescan(xs: &[f32], maxima: &[f32], thr: f32, keys: &mut Vec<u64>) {
        let mut visit = Vec::with_capacity(64);
        for_each_cmp::<_CMP_GE_OQ>(maxima, thr, |si, _| {
            visit.push(si);
            super::prefetch(&xs[si * SUB..(si * SUB + SUB).min(xs.len())]);
            true
        });
        for si in visit {
            let base = si * SUB;
            let sub = &xs[base..(base + SUB).min(xs.len())];
            for_each_cmp::<_CMP_GE_OQ>(sub, thr, |j, x| {
                keys.push(rank_key((base + j) as u32, x));
                true
            });
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn collect_ge(x: &[f32], base: usize, thr: f32, buf: &mut Vec<u64>) {
        for_each_cmp::<_CMP_GE_OQ>(x, thr, |j, v| {
            buf.push(index_key(order_key(v), base + j));
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::rank_key;

    /// The `k` best of `xs` by a whole sort of their rank keys.
    fn sorted_top_k(xs: &[f32], k: usize) -> Vec<(u32, f32)> {
        let mut keys: Vec<u64> = xs.iter().enumerate().map(|(i, &x)| rank_key(i as u32, x)).collect();
        keys.sort_unstable_by(|a, b| b.cmp(a));
        keys[..k].iter().map(|&key| rank_key_value(key)).collect()
    }

    /// Rows mostly `-inf` (a masked row): fewer finite entries than `k`, more than `k` in fewer
    /// than `k` sub-blocks, none but one, and short rows; the selection equals the whole sort's.
    #[test]
    fn masked_rows_select_as_the_whole_sort() {
        let n = 20_000;
        let mut rows: Vec<Vec<f32>> = Vec::new();
        let mut few = vec![f32::NEG_INFINITY; n];
        for (j, i) in [5usize, 900, 901, 7000, 19_999].into_iter().enumerate() {
            few[i] = j as f32 * 0.5 - 1.0;
        }
        few[12_000] = 0.0;
        few[12_001] = -0.0;
        rows.push(few);
        let mut clustered = vec![f32::NEG_INFINITY; n];
        for (i, x) in clustered.iter_mut().enumerate().take(3300).skip(3000) {
            *x = ((i * 37) % 101) as f32 * 0.1;
        }
        rows.push(clustered);
        let mut one = vec![f32::NEG_INFINITY; n];
        one[n - 1] = 3.0;
        rows.push(one);
        rows.push(vec![f32::NEG_INFINITY; 300]);
        rows.push((0..100).map(|i| if i % 3 == 0 { f32::NEG_INFINITY } else { (i % 7) as f32 }).collect());
        for (r, xs) in rows.iter().enumerate() {
            for k in [1, 2, 5, 6, 64, 100, 300].into_iter().filter(|&k| k <= xs.len()) {
                let mut out = Vec::new();
                top_k(xs, k, &mut out);
                let want = sorted_top_k(xs, k);
                assert_eq!(out.len(), k, "row {r}, k {k}");
                for (g, w) in out.iter().zip(&want) {
                    assert_eq!((g.0, g.1.to_bits()), (w.0, w.1.to_bits()), "row {r}, k {k}");
                }
            }
        }
    }
}
