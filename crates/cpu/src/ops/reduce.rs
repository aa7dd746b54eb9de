//! Row reductions: `sum_rows`, `max_rows` (NaN propagates) and `argmax` (ties: lowest index; the
//! order is `math::order_key`'s, the one every ordering op uses, so a NaN (of either sign) ranks highest;
//! blocks of the row are measured by a float max scan, see `argmax_f32`).

use super::{K, for_rows};
use crate::error::CpuError;
use crate::math::{block_max_key, from_order_key, order_key, sum_f32};
use crate::tensor::{load_f32, row_f32};
use graph::DType;
use kernels::row::block_max_bad;

pub(crate) fn sum_rows(k: &K<'_>) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    for_rows(&d, s.ne[0], if s.dtype == DType::F32 { 0 } else { s.ne[0] }, |r, scratch| {
        // SAFETY: valid source rows; element `r` of `d` written only here.
        unsafe { d.row_mut::<f32>(r)[0] = sum_f32(row_f32(&s, r, scratch)) }
    });
    Ok(())
}

pub(crate) fn max_rows(k: &K<'_>) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    for_rows(&d, s.ne[0], if s.dtype == DType::F32 { 0 } else { s.ne[0] }, |r, scratch| {
        // SAFETY: as `sum_rows`.
        unsafe {
            let x = row_f32(&s, r, scratch);
            // One vectorised pass; only a row flagged bad (NaN or +inf) is scanned again for NaN.
            let (m, bad) = kernels::row::max_bad(x);
            d.row_mut::<f32>(r)[0] = if bad && x.iter().any(|v| v.is_nan()) { f32::NAN } else { m };
        }
    });
    Ok(())
}

/// Block length of the two-level argmax (block maxima, then one scan of the winning block).
const BLOCK: usize = 2048;

/// Index of the first entry with the largest `order_key`: the float maximum of every block in one
/// pass (`kernels::row::block_max_bad`), or, when the row holds a NaN (whose place in the order only
/// the integer key knows), each block's largest key (`math::block_max_key`); then one scan of the
/// first block holding the largest.
pub(crate) fn argmax_f32(x: &[f32]) -> usize {
    if x.is_empty() {
        return 0;
    }
    let mut float_max = vec![0.0f32; x.len().div_ceil(BLOCK)];
    let nan = block_max_bad(x, BLOCK, &mut float_max) && x.iter().any(|v| v.is_nan());
    let mut best: Option<(u32, usize)> = None;
    for (b, &m) in float_max.iter().enumerate() {
        let key = if nan { block_max_key(&x[b * BLOCK..(b * BLOCK + BLOCK).min(x.len())]).0 } else { order_key(m) };
        if best.is_none_or(|(k, _)| key > k) {
            best = Some((key, b));
        }
    }
    let Some((key, b)) = best else { return 0 };
    let block = &x[b * BLOCK..(b * BLOCK + BLOCK).min(x.len())];
    b * BLOCK + first_with_key(block, key)
}

/// Position of the first entry of `x` whose `order_key` is `key` (which `x` must hold). Without NaN
/// the key is a float, and 16 entries at a time are tested by float equality (-0.0 == +0.0, as
/// their keys are equal) before the scalar search inside the matching chunk.
fn first_with_key(x: &[f32], key: u32) -> usize {
    let v = from_order_key(key);
    let mut start = 0;
    if !v.is_nan() {
        for c in x.chunks(16) {
            if c.iter().fold(false, |any, &y| any | (y == v)) {
                break;
            }
            start += c.len();
        }
    }
    start + x[start..].iter().position(|&y| order_key(y) == key).expect("the block holds its maximum")
}

pub(crate) fn argmax(k: &K<'_>) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    let n = s.ne[0];
    let convert = s.dtype != DType::F32;
    for_rows(&d, n, if convert { n } else { 0 }, |r, scratch| {
        // SAFETY: as `sum_rows`.
        unsafe {
            let x = if convert {
                load_f32(s.dtype, s.row_ptr(r), scratch);
                &*scratch
            } else {
                s.row::<f32>(r)
            };
            d.row_mut::<i32>(r)[0] = argmax_f32(x) as i32;
        }
    });
    Ok(())
}
