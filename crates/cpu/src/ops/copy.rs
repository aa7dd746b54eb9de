//! `cont` and `cast`: contiguous copies, with dtype conversion for `cast` (floats round to nearest
//! even; float to i32 truncates toward zero, saturating, NaN to 0; i32 to float rounds to nearest, once).

use super::{K, for_rows};
use crate::error::CpuError;
use crate::tensor::{gather_f32, gather_i32, store_f32};
use graph::{DType, bf16, f16};

pub(crate) fn cont_cast(k: &K<'_>) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    let n = d.ne[0];
    if s.dtype == d.dtype {
        let size = s.dtype.size();
        if s.is_contiguous() {
            let total = d.ne.numel() * size;
            let (sp, dp) = (s.data as usize, d.data as usize);
            crate::par::for_blocks(total.div_ceil(4096), 4096, |blocks| {
                let start = blocks.start * 4096;
                let end = (blocks.end * 4096).min(total);
                // SAFETY: both tensors hold `total` bytes; the dispatcher detached overlapping sources.
                unsafe {
                    std::ptr::copy_nonoverlapping((sp + start) as *const u8, (dp + start) as *mut u8, end - start)
                };
            });
            return Ok(());
        }
        for_rows(&d, n, 0, |r, _| {
            let src = s.ptr(0, r[0], r[1], r[2]);
            let dst = d.row_ptr(r);
            // SAFETY: element addresses of valid tensors; distinct rows per call.
            unsafe {
                if s.rows_contiguous() {
                    std::ptr::copy_nonoverlapping(src, dst, n * size);
                } else {
                    for i in 0..n {
                        std::ptr::copy_nonoverlapping(src.wrapping_add(i * s.nb[0]), dst.add(i * size), size);
                    }
                }
            }
        });
        return Ok(());
    }
    match (s.dtype, d.dtype) {
        (DType::I32, to) => for_rows(&d, n, 0, |r, _| {
            let mut ints = vec![0i32; n];
            // SAFETY: valid tensors, distinct destination rows.
            unsafe {
                gather_i32(&s, r, &mut ints);
                let p = d.row_ptr(r);
                match to {
                    DType::F32 => {
                        let o = std::slice::from_raw_parts_mut(p as *mut f32, n);
                        o.iter_mut().zip(&ints).for_each(|(o, &x)| *o = x as f32);
                    }
                    DType::F16 => {
                        let o = std::slice::from_raw_parts_mut(p as *mut f16, n);
                        o.iter_mut().zip(&ints).for_each(|(o, &x)| *o = f16::from_f64(f64::from(x)));
                    }
                    DType::BF16 => {
                        let o = std::slice::from_raw_parts_mut(p as *mut bf16, n);
                        o.iter_mut().zip(&ints).for_each(|(o, &x)| *o = bf16::from_f64(f64::from(x)));
                    }
                    DType::I32 => unreachable!("same dtype handled above"),
                    _ => unreachable!("{}", crate::tensor::QUANT_ONLY),
                }
            }
        }),
        (_, to) => for_rows(&d, n, n, |r, scratch| {
            // SAFETY: valid tensors, distinct destination rows; `store_f32` to i32 truncates with
            // Rust's saturating `as` (NaN to 0), as the op requires.
            unsafe {
                gather_f32(&s, r, scratch);
                store_f32(to, d.row_ptr(r), scratch);
            }
        }),
    }
    Ok(())
}
