//! Element-wise ops of two or three sources with ggml's broadcast: `binary` (add, sub, mul, div),
//! `compare` (ge, gt, eq as an f32 mask; float or i32 operands) and `where`.

use super::{K, for_rows};
use crate::error::CpuError;
use crate::tensor::{TensorRef, gather_f32, gather_i32, store_f32};
use graph::{BinaryOp, CompareOp, DType};

/// True when [`operand`] borrows rows of `t` (no scratch needed).
fn direct(t: &TensorRef, n: usize) -> bool {
    t.dtype == DType::F32 && t.ne[0] == n && t.rows_contiguous()
}

/// Scratch length [`operand`] needs for `t`.
fn need(t: &TensorRef, n: usize) -> usize {
    if direct(t, n) { 0 } else { n }
}

/// Row `r` of `t` paired with a destination row of `n` elements: borrowed when `t` is an f32 tensor
/// with whole contiguous rows, else gathered into `scratch`.
///
/// # Safety
/// `t` must be valid for reads.
unsafe fn operand<'a>(t: &'a TensorRef, r: [usize; 3], n: usize, scratch: &'a mut [f32]) -> &'a [f32] {
    // SAFETY: forwarded from the caller.
    unsafe {
        if direct(t, n) {
            t.row::<f32>([r[0] % t.ne[1], r[1] % t.ne[2], r[2] % t.ne[3]])
        } else {
            gather_f32(t, r, scratch);
            scratch
        }
    }
}

pub(crate) fn binary(k: &K<'_>, op: BinaryOp) -> Result<(), CpuError> {
    let (a, b, d) = (k.srcs[0], k.srcs[1], k.dst);
    let n = d.ne[0];
    let (na, nb, no) = (need(&a, n), need(&b, n), if d.dtype == DType::F32 { 0 } else { n });
    for_rows(&d, n, na + nb + no, |r, scratch| {
        let (sa, rest) = scratch.split_at_mut(na);
        let (sb, so) = rest.split_at_mut(nb);
        // SAFETY: sources valid for reads (detached if overlapping); row `r` of `d` written only here.
        unsafe {
            let x = operand(&a, r, n, sa);
            let y = operand(&b, r, n, sb);
            let out: &mut [f32] = if d.dtype == DType::F32 { d.row_mut::<f32>(r) } else { so };
            let it = out.iter_mut().zip(x.iter().zip(y));
            match op {
                BinaryOp::Add => it.for_each(|(o, (&x, &y))| *o = x + y),
                BinaryOp::Sub => it.for_each(|(o, (&x, &y))| *o = x - y),
                BinaryOp::Mul => it.for_each(|(o, (&x, &y))| *o = x * y),
                BinaryOp::Div => it.for_each(|(o, (&x, &y))| *o = x / y),
            }
            if d.dtype != DType::F32 {
                store_f32(d.dtype, d.row_ptr(r), so);
            }
        }
    });
    Ok(())
}

pub(crate) fn compare(k: &K<'_>, op: CompareOp) -> Result<(), CpuError> {
    let (a, b, d) = (k.srcs[0], k.srcs[1], k.dst);
    let n = d.ne[0];
    if a.dtype == DType::I32 {
        for_rows(&d, n, 0, |r, _| {
            let (mut x, mut y) = (vec![0i32; n], vec![0i32; n]);
            // SAFETY: as in `binary`.
            unsafe {
                gather_i32(&a, r, &mut x);
                gather_i32(&b, r, &mut y);
                let out = d.row_mut::<f32>(r);
                for ((o, &x), &y) in out.iter_mut().zip(&x).zip(&y) {
                    let t = match op {
                        CompareOp::Ge => x >= y,
                        CompareOp::Gt => x > y,
                        CompareOp::Eq => x == y,
                    };
                    *o = if t { 1.0 } else { 0.0 };
                }
            }
        });
        return Ok(());
    }
    let (na, nb) = (need(&a, n), need(&b, n));
    for_rows(&d, n, na + nb, |r, scratch| {
        let (sa, sb) = scratch.split_at_mut(na);
        // SAFETY: as in `binary`.
        unsafe {
            let x = operand(&a, r, n, sa);
            let y = operand(&b, r, n, sb);
            let out = d.row_mut::<f32>(r);
            let it = out.iter_mut().zip(x.iter().zip(y));
            match op {
                CompareOp::Ge => it.for_each(|(o, (&x, &y))| *o = if x >= y { 1.0 } else { 0.0 }),
                CompareOp::Gt => it.for_each(|(o, (&x, &y))| *o = if x > y { 1.0 } else { 0.0 }),
                CompareOp::Eq => it.for_each(|(o, (&x, &y))| *o = if x == y { 1.0 } else { 0.0 }),
            }
        }
    });
    Ok(())
}

pub(crate) fn where_(k: &K<'_>) -> Result<(), CpuError> {
    let (m, a, b, d) = (k.srcs[0], k.srcs[1], k.srcs[2], k.dst);
    let n = d.ne[0];
    if d.dtype == DType::I32 {
        for_rows(&d, n, n, |r, sm| {
            let (mut x, mut y) = (vec![0i32; n], vec![0i32; n]);
            // SAFETY: as in `binary`.
            unsafe {
                gather_f32(&m, r, sm);
                gather_i32(&a, r, &mut x);
                gather_i32(&b, r, &mut y);
                let out = d.row_mut::<i32>(r);
                for (((o, &c), &x), &y) in out.iter_mut().zip(sm.iter()).zip(&x).zip(&y) {
                    *o = if c != 0.0 { x } else { y };
                }
            }
        });
        return Ok(());
    }
    let (nm, na, nb) = (need(&m, n), need(&a, n), need(&b, n));
    let no = if d.dtype == DType::F32 { 0 } else { n };
    for_rows(&d, n, nm + na + nb + no, |r, scratch| {
        let (sm, rest) = scratch.split_at_mut(nm);
        let (sa, rest) = rest.split_at_mut(na);
        let (sb, so) = rest.split_at_mut(nb);
        // SAFETY: as in `binary`. f16/bf16 values round-trip exactly through f32.
        unsafe {
            let c = operand(&m, r, n, sm);
            let x = operand(&a, r, n, sa);
            let y = operand(&b, r, n, sb);
            let out: &mut [f32] = if d.dtype == DType::F32 { d.row_mut::<f32>(r) } else { so };
            for (o, ((&c, &x), &y)) in out.iter_mut().zip(c.iter().zip(x).zip(y)) {
                *o = if c != 0.0 { x } else { y };
            }
            if d.dtype != DType::F32 {
                store_f32(d.dtype, d.row_ptr(r), so);
            }
        }
    });
    Ok(())
}
