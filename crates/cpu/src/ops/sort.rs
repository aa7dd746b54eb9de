//! Orderings along `ne[0]`: `argsort` (stable, ascending or descending) and `top_k` (the `k` largest,
//! by value descending, ties lower index first). Values compare through `math::order_key` (IEEE total
//! order with -0.0 = +0.0). Both work on one `u64` per entry, `key << 32 | index-part`, which makes
//! every entry distinct and encodes the tie rule, so unstable sorts and selections are exact.
//!
//! `top_k` never sorts the row. Short rows: one scan in chunks, skipping any chunk whose largest key
//! is not above the running threshold, keeping candidates in a small buffer and, when that fills,
//! keeping the best `k` with `select_nth_unstable` (raising the threshold). Long rows: block maxima
//! give a threshold first, then only the blocks that reach it are scanned (see `top_k_blocks`).
//! The final `k` candidates are then sorted.

use super::{K, for_rows};
use crate::error::CpuError;
use crate::math::{block_max_key, from_order_key, multiversion, order_key};
use crate::tensor::row_f32;
use graph::{DType, SortOrder};
use kernels::row::block_max_bad;

pub(crate) fn argsort(k: &K<'_>, order: SortOrder) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    let n = s.ne[0];
    for_rows(&d, n * 16, if s.dtype == DType::F32 { 0 } else { n }, |r, scratch| {
        let mut v: Vec<u64> = Vec::with_capacity(n);
        // SAFETY: valid source rows; row `r` of `d` written only here.
        unsafe {
            let x = row_f32(&s, r, scratch);
            match order {
                SortOrder::Asc => {
                    v.extend(x.iter().enumerate().map(|(i, &x)| u64::from(order_key(x)) << 32 | i as u64))
                }
                SortOrder::Desc => {
                    v.extend(x.iter().enumerate().map(|(i, &x)| u64::from(!order_key(x)) << 32 | i as u64))
                }
            }
            v.sort_unstable();
            for (o, &c) in d.row_mut::<i32>(r).iter_mut().zip(&v) {
                *o = c as u32 as i32;
            }
        }
    });
    Ok(())
}

/// Composite of a key and an index: larger is better (higher key, then lower index).
#[inline(always)]
fn composite(key: u32, i: usize) -> u64 {
    u64::from(key) << 32 | u64::from(u32::MAX - i as u32)
}

/// Keeps the best `k` of `buf` (unordered) and returns the smallest key among them.
fn flush(buf: &mut Vec<u64>, k: usize) -> u32 {
    if buf.len() > k {
        buf.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        buf.truncate(k);
    }
    (buf.iter().copied().min().expect("k >= 1") >> 32) as u32
}

const CHUNK: usize = 32;

#[inline(always)]
fn top_k_body<const FMA: bool>(x: &[f32], k: usize, buf: &mut Vec<u64>) {
    let cap = (2 * k).max(k + 64);
    buf.clear();
    // Until the buffer first fills every entry is a candidate.
    let mut thr: Option<u32> = None;
    let consider = |buf: &mut Vec<u64>, thr: &mut Option<u32>, i: usize, key: u32| {
        if thr.is_none_or(|t| key > t) {
            buf.push(composite(key, i));
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
multiversion!(
    /// Leaves in `buf` at least the best `k` candidates of `x` (as composites), possibly more.
    fn top_k_scan(x: &[f32], k: usize, buf: &mut Vec<u64>) => top_k_body
);

/// Long rows: a first pass takes the maximum key of each of about `16k` blocks; the `k`-th largest
/// of those maxima, `t0`, is a lower bound of the `k`-th largest entry (`k` blocks each hold an entry
/// at or above it). A second pass visits only the blocks whose maximum reaches `t0` (about `k` of
/// them, a sixteenth of the row) and collects every entry with key `>= t0`. Block maxima come from
/// the float max scan (`kernels::row::block_max_bad`; with a NaN in the row, the integer keys of
/// `math::block_max_key`); without NaN, `key >= t0` is the float
/// comparison `x >= from_order_key(t0)`, tested 8 entries per vector compare.
fn top_k_blocks(x: &[f32], k: usize, buf: &mut Vec<u64>) {
    let block = x.len().div_ceil(16 * k).next_multiple_of(32).max(64);
    let mut float_max = vec![0.0f32; x.len().div_ceil(block)];
    let nan = block_max_bad(x, block, &mut float_max) && x.iter().any(|v| v.is_nan());
    let maxima: Vec<u32> = if nan {
        x.chunks(block).map(|b| block_max_key(b).0).collect()
    } else {
        float_max.iter().map(|&m| order_key(m)).collect()
    };
    let mut sorted = maxima.clone();
    let t0 = if sorted.len() > k { *sorted.select_nth_unstable_by(k - 1, |a, b| b.cmp(a)).1 } else { 0 };
    let thr = from_order_key(t0);
    buf.clear();
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
                    buf.push(composite(key, base + j));
                }
            }
            continue;
        }
        collect_ge(blk, base, thr, buf);
    }
}

/// Asks for the cache lines of `x` (a hint; nothing happens where unsupported).
fn prefetch(x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in x.chunks(16) {
        // SAFETY: a prefetch is only a hint, and the address lies inside `x`.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast()) };
    }
}

/// Pushes the composite of every entry `x[j] >= thr` (float comparison; `x` holds no NaN), index
/// `base + j`, in index order.
fn collect_ge(x: &[f32], base: usize, thr: f32, buf: &mut Vec<u64>) {
    #[cfg(target_arch = "x86_64")]
    if crate::math::has_avx2() {
        // SAFETY: the CPU has AVX2.
        return unsafe { collect_ge_avx2(x, base, thr, buf) };
    }
    for (j, &v) in x.iter().enumerate() {
        if v >= thr {
            buf.push(composite(order_key(v), base + j));
        }
    }
}

/// [`collect_ge`] testing 8 entries per compare and visiting only the set bits of its mask.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn collect_ge_avx2(x: &[f32], base: usize, thr: f32, buf: &mut Vec<u64>) {
    use std::arch::x86_64::*;
    let t = _mm256_set1_ps(thr);
    let (chunks, rest) = x.as_chunks::<8>();
    for (ci, c) in chunks.iter().enumerate() {
        // SAFETY: `c` holds 8 f32.
        let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        let mut mask = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(v, t)) as u32;
        while mask != 0 {
            let j = mask.trailing_zeros() as usize;
            buf.push(composite(order_key(c[j]), base + 8 * ci + j));
            mask &= mask - 1;
        }
    }
    let start = 8 * chunks.len();
    for (j, &v) in rest.iter().enumerate() {
        if v >= thr {
            buf.push(composite(order_key(v), base + start + j));
        }
    }
}

/// Indices of the `k` largest entries of `x`, by value descending, ties lower index first.
pub(crate) fn top_k_row(x: &[f32], k: usize, buf: &mut Vec<u64>, out: &mut [i32]) {
    if x.len() >= 8192 && x.len() >= 64 * k {
        top_k_blocks(x, k, buf);
    } else {
        top_k_scan(x, k, buf);
    }
    flush(buf, k);
    buf.sort_unstable_by(|a, b| b.cmp(a));
    for (o, &c) in out.iter_mut().zip(buf.iter()) {
        *o = (u32::MAX - c as u32) as i32;
    }
}

pub(crate) fn top_k(k: &K<'_>, n_top: usize) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    let n = s.ne[0];
    for_rows(&d, n, if s.dtype == DType::F32 { 0 } else { n }, |r, scratch| {
        let mut buf = Vec::with_capacity((2 * n_top).max(n_top + 1024));
        // SAFETY: valid source rows; row `r` of `d` written only here.
        unsafe {
            let x = row_f32(&s, r, scratch);
            top_k_row(x, n_top, &mut buf, d.row_mut::<i32>(r));
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(x: &[f32], k: usize) -> Vec<i32> {
        let mut idx: Vec<usize> = (0..x.len()).collect();
        idx.sort_by(|&a, &b| order_key(x[b]).cmp(&order_key(x[a])).then(a.cmp(&b)));
        idx[..k].iter().map(|&i| i as i32).collect()
    }

    #[test]
    fn top_k_matches_full_sort_including_ties_and_adversarial_orders() {
        let mut seed = 12345u64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for &n in &[1usize, 5, 31, 32, 33, 1000, 5000, 8192, 70_000] {
            let cases: Vec<Vec<f32>> = vec![
                (0..n).map(|_| (rnd() % 1000) as f32 / 7.0).collect(),
                (0..n).map(|_| (rnd() % 5) as f32).collect(),
                (0..n).map(|i| i as f32).collect(),
                (0..n).map(|i| -(i as f32)).collect(),
                (0..n).map(|i| if i % 3 == 0 { -0.0 } else { 0.0 }).collect(),
            ];
            for x in cases {
                for k in [1, 2, 40, n.min(100), n] {
                    if k == 0 || k > n {
                        continue;
                    }
                    let mut out = vec![0; k];
                    top_k_row(&x, k, &mut Vec::new(), &mut out);
                    assert_eq!(out, reference(&x, k), "n = {n}, k = {k}");
                }
            }
        }
    }
}
