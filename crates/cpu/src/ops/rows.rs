//! Row indexing: `get_rows` (gather rows by id, to f32 or i32) and `set_rows` (scatter rows by id
//! into the destination in place, converting to its dtype). Ids are validated before anything is
//! written; an out-of-range id is a `CpuError::IdOutOfRange`.

use super::{K, for_rows};
use crate::error::CpuError;
use crate::tensor::{TensorRef, load_f32, store_f32};
use graph::DType;
use half::slice::HalfFloatSliceExt;

/// Reads every id of `ids [m, a, b]`, checking `0 <= id < rows`.
pub(super) fn check_ids(ids: &TensorRef, rows: usize, of: &TensorRef) -> Result<(), CpuError> {
    for i2 in 0..ids.ne[2] {
        for i1 in 0..ids.ne[1] {
            for j in 0..ids.ne[0] {
                // SAFETY: an element of the i32 tensor `ids`.
                let id = unsafe { ids.read_i32_at(ids.ptr(j, i1, i2, 0)) };
                if id < 0 || id as usize >= rows {
                    return Err(CpuError::IdOutOfRange {
                        id,
                        pos: [j, i1, i2],
                        ids_shape: ids.ne.to_string(),
                        rows,
                        of: of.ne.to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn get_rows(k: &K<'_>) -> Result<(), CpuError> {
    let (a, ids, d) = (k.srcs[0], k.srcs[1], k.dst);
    check_ids(&ids, a.ne[1], &a)?;
    let n = d.ne[0];
    for_rows(&d, n, 0, |r, _| {
        // SAFETY: ids checked above; row `r` of `d` written only here.
        unsafe {
            let id = ids.read_i32_at(ids.ptr(r[0], r[1], r[2], 0)) as usize;
            let src = a.ptr(0, id, r[1], r[2]);
            if a.dtype == DType::I32 || a.dtype == DType::F32 {
                std::ptr::copy_nonoverlapping(src, d.row_ptr(r), n * 4);
            } else {
                load_f32(a.dtype, src, d.row_mut::<f32>(r));
            }
        }
    });
    Ok(())
}

/// `set_rows` of one-element rows from f32 into f16 (the transposed V cache: a row per channel
/// and position): each plane's values converted at once, then stored one by one in id order.
fn set_elements_f16(v: &TensorRef, ids: &TensorRef, d: &TensorRef) -> Result<(), CpuError> {
    let m = v.ne[1];
    let mut vals = vec![0.0f32; m];
    let mut halves = vec![half::f16::ZERO; m];
    for i3 in 0..v.ne[3] {
        for i2 in 0..v.ne[2] {
            // SAFETY: ids checked by the caller; `v` does not overlap `d` (detached by the
            // dispatcher); every element read is inside `v`, every id a row of `d`.
            unsafe {
                for (j, x) in vals.iter_mut().enumerate() {
                    *x = v.read_f32_at(v.ptr(0, j, i2, i3));
                }
                halves.convert_from_f32_slice(&vals);
                for (j, h) in halves.iter().enumerate() {
                    let id = ids.read_i32_at(ids.ptr(j, i2, i3, 0)) as usize;
                    *(d.ptr(0, id, i2, i3) as *mut half::f16) = *h;
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn set_rows(k: &K<'_>) -> Result<(), CpuError> {
    let (v, ids, d) = (k.srcs[1], k.srcs[2], k.dst);
    check_ids(&ids, d.ne[1], &d)?;
    let n = d.ne[0];
    // Serial in id order so that a repeated id keeps its last row, as a sequential loop would.
    if n == 1 && v.dtype == DType::F32 && d.dtype == DType::F16 {
        return set_elements_f16(&v, &ids, &d);
    }
    let mut scratch = vec![0.0f32; n];
    for i3 in 0..v.ne[3] {
        for i2 in 0..v.ne[2] {
            for j in 0..v.ne[1] {
                // SAFETY: ids checked above; `v` does not overlap `d` (detached by the dispatcher).
                unsafe {
                    let id = ids.read_i32_at(ids.ptr(j, i2, i3, 0)) as usize;
                    let (src, dst) = (v.ptr(0, j, i2, i3), d.ptr(0, id, i2, i3));
                    if v.dtype == d.dtype {
                        std::ptr::copy_nonoverlapping(src, dst, n * d.dtype.size());
                    } else {
                        load_f32(v.dtype, src, &mut scratch);
                        store_f32(d.dtype, dst, &scratch);
                    }
                }
            }
        }
    }
    Ok(())
}
