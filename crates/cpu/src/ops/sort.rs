//! Orderings along `ne[0]`: `argsort` (stable, ascending or descending) and `top_k` (the `k` largest,
//! by value descending, ties lower index first). Values compare through `kernels::key::order_key`
//! (-0.0 ties +0.0, every NaN above +inf). `argsort` sorts one `u64` per entry, `key << 32 | index`,
//! which makes every entry distinct and encodes the tie rule, so an unstable sort is exact; `top_k`
//! never sorts the row: its row kernel is `kernels::select::top_k_indices` (a chunked scan for short
//! rows, block maxima and a rescan of the blocks that reach their threshold for long ones).

use super::{K, for_rows};
use crate::error::CpuError;
use crate::tensor::row_f32;
use graph::{DType, SortOrder};
use kernels::key::order_key;
use kernels::select::top_k_indices;

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

pub(crate) fn top_k(k: &K<'_>, n_top: usize) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    let n = s.ne[0];
    for_rows(&d, n, if s.dtype == DType::F32 { 0 } else { n }, |r, scratch| {
        let mut buf = Vec::with_capacity((2 * n_top).max(n_top + 1024));
        // SAFETY: valid source rows; row `r` of `d` written only here.
        unsafe {
            let x = row_f32(&s, r, scratch);
            top_k_indices(x, n_top, &mut buf, d.row_mut::<i32>(r));
        }
    });
    Ok(())
}
