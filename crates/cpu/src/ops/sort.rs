//! Orderings along `ne[0]`: `argsort` (stable, ascending or descending) and `top_k` (the `k` largest,
//! by value descending, ties lower index first; masked: of the row as `token_mask` bans it,
//! selected through the mask without writing the masked row,
//! `kernels::select::top_k_masked_indices`). Values compare through `kernels::key::order_key`
//! (-0.0 ties +0.0, every NaN above +inf). `argsort` sorts one `u64` per entry, `key << 32 | index`,
//! which makes every entry distinct and encodes the tie rule, so an unstable sort is exact; `top_k`
//! never sorts the row: its row kernel is `kernels::select::top_k_indices` (a chunked scan for short
//! rows, block maxima and a rescan of the blocks that reach their threshold for long ones).
//! `top_p_mask` never sorts the row either: its nucleus is `kernels::nucleus::select`, the CPU
//! sampler chain's own top-p selection, so the two keep the same tokens.

use super::{K, for_rows};
use crate::error::CpuError;
use crate::tensor::row_f32;
use graph::{DType, SortOrder};
use kernels::key::order_key;
use kernels::nucleus;
use kernels::select::{top_k_indices, top_k_masked_indices};

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

pub(crate) fn top_k(k: &K<'_>, n_top: usize, masked: bool) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    let n = s.ne[0];
    if masked {
        let bits = k.srcs[1];
        for_rows(&d, n, 0, |r, _| {
            let mut buf = TOP_K_BUF.take();
            buf.reserve((2 * n_top).max(n_top + 1024));
            let mut scratch = MASKED_ROW.take();
            // SAFETY: the builder checked that `x` is f32 and `bits` i32 with `x`'s rows, both with
            // contiguous rows (an i32 word is read as the u32 of its bits); row `r` of `d` is
            // written only here.
            unsafe {
                let (x, w) = (s.row::<f32>(r), bits.row::<u32>(r));
                top_k_masked_indices(x, w, n_top, &mut buf, &mut scratch, d.row_mut::<i32>(r));
            }
            if buf.capacity() <= 1 << 16 {
                TOP_K_BUF.set(buf);
            }
            MASKED_ROW.set(scratch);
        });
        return Ok(());
    }
    for_rows(&d, n, if s.dtype == DType::F32 { 0 } else { n }, |r, scratch| {
        // The thread's kept candidate buffer (the kernel clears it): no allocation per row.
        let mut buf = TOP_K_BUF.take();
        buf.reserve((2 * n_top).max(n_top + 1024));
        // SAFETY: valid source rows; row `r` of `d` written only here.
        unsafe {
            let x = row_f32(&s, r, scratch);
            top_k_indices(x, n_top, &mut buf, d.row_mut::<i32>(r));
        }
        if buf.capacity() <= 1 << 16 {
            TOP_K_BUF.set(buf);
        }
    });
    Ok(())
}

thread_local! {
    /// Each thread's `top_k` candidate buffer, kept from row to row and call to call (up to 512 KiB).
    static TOP_K_BUF: std::cell::Cell<Vec<u64>> = const { std::cell::Cell::new(Vec::new()) };
    /// Each thread's masked row for the masked `top_k` on rows it does not select from in place
    /// (short ones, and those holding NaN or +inf), kept from call to call.
    static MASKED_ROW: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

pub(crate) fn top_p_mask(k: &K<'_>) -> Result<(), CpuError> {
    let (x, params, d) = (k.srcs[0], k.srcs[1], k.dst);
    let n = x.ne[0];
    crate::par::for_blocks(d.nrows(), 4 * n, |range| {
        SCRATCH.with_borrow_mut(|sc| {
            for row in range {
                let r = d.row_index(row);
                // SAFETY: the builder checked that `x` and `params` (3 per row) are f32 with
                // contiguous rows and `d`'s row count; row `r` of `d` is written only here.
                unsafe {
                    let (xr, pr, out) = (x.row::<f32>(r), params.row::<f32>(r), d.row_mut::<f32>(r));
                    mask_row(xr, pr[0], pr[1], pr[2], sc, out);
                }
            }
        });
    });
    Ok(())
}

thread_local! {
    /// Each thread's selection scratch, kept from call to call: its buffers stay allocated and its
    /// size hint (the last nucleus' size, which sizes the first selection) carries over, as the
    /// sampler chain's `top_p` keeps them. The hint changes the work, never the result.
    static SCRATCH: std::cell::RefCell<nucleus::Scratch> = std::cell::RefCell::new(nucleus::Scratch::default());
}

/// One row of `top_p_mask` (see `graph::Op::TopPMask`).
fn mask_row(x: &[f32], t: f32, p: f32, min_keep: f32, sc: &mut nucleus::Scratch, out: &mut [f32]) {
    if !(t > 0.0 && t.is_finite()) || p.is_nan() || min_keep.is_nan() || min_keep < 0.0 {
        out.fill(f32::NAN);
        return;
    }
    let all = |out: &mut [f32]| {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v / t;
        }
    };
    if p >= 1.0 {
        return all(out);
    }
    match nucleus::select(x, t, p.max(0.0), min_keep as usize, sc) {
        // A bad row passes through: its consumer's check reports it.
        Err(_) => all(out),
        Ok(nuc) => {
            out.fill(f32::NEG_INFINITY);
            for &(id, v) in &sc.buf[..nuc.kept] {
                out[id as usize] = v / t;
            }
        }
    }
}
