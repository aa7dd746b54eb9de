//! Typed access to a tensor's bytes during compute: a raw view (`TensorRef`: first element, dtype,
//! shape, strides) with row addressing, contiguous-row slices and the f32/i32 loaders and storers the
//! kernels share (f16/bf16 convert through `half`'s slice conversions, which use F16C when present).
//!
//! Safety model: the dispatcher builds one `TensorRef` per operand from the split's bindings, after
//! checking alignment and copying any source that overlaps the destination, so a kernel may hold
//! shared slices of sources and exclusive slices of *distinct rows* of its destination at the same time.

use graph::{DType, Shape, bf16, f16};
use half::slice::HalfFloatSliceExt;

/// A tensor during compute: `data` points at element `[0, 0, 0, 0]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TensorRef {
    pub data: *mut u8,
    pub dtype: DType,
    pub ne: Shape,
    pub nb: [usize; 4],
}

// SAFETY: a TensorRef is a plain address; the dispatcher guarantees that concurrent kernels write
// disjoint rows and never write what they read.
unsafe impl Send for TensorRef {}
// SAFETY: as above.
unsafe impl Sync for TensorRef {}

impl TensorRef {
    /// Number of rows (`ne1 * ne2 * ne3`).
    pub fn nrows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// `[i1, i2, i3]` of flat row `r` (ggml order).
    pub fn row_index(&self, r: usize) -> [usize; 3] {
        let (n1, n2) = (self.ne[1], self.ne[2]);
        [r % n1, (r / n1) % n2, r / (n1 * n2)]
    }

    /// Address of element `[i0, i1, i2, i3]`.
    #[inline]
    pub fn ptr(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        let off = i0 * self.nb[0] + i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3];
        self.data.wrapping_add(off)
    }

    /// Address of the first element of row `[i1, i2, i3]`.
    #[inline]
    pub fn row_ptr(&self, r: [usize; 3]) -> *mut u8 {
        self.ptr(0, r[0], r[1], r[2])
    }

    /// True when each row is contiguous.
    pub fn rows_contiguous(&self) -> bool {
        self.ne[0] == 1 || self.nb[0] == self.dtype.size()
    }

    /// True when all elements are densely packed in ggml order.
    pub fn is_contiguous(&self) -> bool {
        if self.ne[0] != 1 && self.nb[0] != self.dtype.size() {
            return false;
        }
        let mut expect = self.dtype.row_bytes(self.ne[0]);
        for i in 1..4 {
            if self.ne[i] != 1 && self.nb[i] != expect {
                return false;
            }
            expect *= self.ne[i];
        }
        true
    }

    /// Bytes from the first element to one past the last (whole rows for a quantized dtype).
    pub fn extent(&self) -> usize {
        let outer = (1..4).map(|i| (self.ne[i] - 1) * self.nb[i]).sum::<usize>();
        if self.dtype.is_quantized() {
            return outer + self.dtype.row_bytes(self.ne[0]);
        }
        outer + (self.ne[0] - 1) * self.nb[0] + self.dtype.size()
    }

    /// Row `r` as a slice of `T` (`T` must match the dtype's size; rows must be contiguous).
    ///
    /// # Safety
    /// The row must be valid for reads and not written while the slice lives.
    #[inline]
    pub unsafe fn row<T>(&self, r: [usize; 3]) -> &[T] {
        debug_assert!(self.rows_contiguous() && std::mem::size_of::<T>() == self.dtype.size());
        // SAFETY: the caller guarantees validity; the dispatcher checked alignment.
        unsafe { std::slice::from_raw_parts(self.row_ptr(r) as *const T, self.ne[0]) }
    }

    /// Row `r` as a mutable slice of `T`.
    ///
    /// # Safety
    /// The row must be valid for writes and accessed by no one else while the slice lives.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn row_mut<T>(&self, r: [usize; 3]) -> &mut [T] {
        debug_assert!(self.rows_contiguous() && std::mem::size_of::<T>() == self.dtype.size());
        // SAFETY: the caller guarantees validity and exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.row_ptr(r) as *mut T, self.ne[0]) }
    }

    /// Reads element at `p` (an address inside this tensor) as f32 (i32 converts).
    ///
    /// # Safety
    /// `p` must be a valid element address of this tensor.
    #[inline]
    pub unsafe fn read_f32_at(&self, p: *const u8) -> f32 {
        // SAFETY: caller guarantees `p` is a valid element; alignment was checked by the dispatcher.
        unsafe {
            match self.dtype {
                DType::F32 => *(p as *const f32),
                DType::F16 => (*(p as *const f16)).to_f32(),
                DType::BF16 => (*(p as *const bf16)).to_f32(),
                DType::I32 => *(p as *const i32) as f32,
                _ => unreachable!("{QUANT_ONLY}"),
            }
        }
    }

    /// Reads element at `p` as i32 (the tensor must be i32).
    ///
    /// # Safety
    /// `p` must be a valid element address of this tensor.
    #[inline]
    pub unsafe fn read_i32_at(&self, p: *const u8) -> i32 {
        // SAFETY: as `read_f32_at`.
        unsafe { *(p as *const i32) }
    }
}

/// The invariant behind the quantized arms of the element-wise helpers: the graph builder lets a
/// quantized tensor reach only `mul_mat` (as `a`) and `get_rows` (as the table), whose kernels
/// (`ops/quant.rs`) read blocks, never elements.
pub(crate) const QUANT_ONLY: &str = "a quantized tensor reaches only mul_mat and get_rows, which read it by blocks";

/// Converts a contiguous float row to f32 into `out` (`src` points at `out.len()` elements of `dtype`).
///
/// # Safety
/// `src` must be valid for `out.len()` elements of `dtype`, aligned.
pub(crate) unsafe fn load_f32(dtype: DType, src: *const u8, out: &mut [f32]) {
    let n = out.len();
    // SAFETY: caller guarantees validity of `n` elements.
    unsafe {
        match dtype {
            DType::F32 => out.copy_from_slice(std::slice::from_raw_parts(src as *const f32, n)),
            DType::F16 => std::slice::from_raw_parts(src as *const f16, n).convert_to_f32_slice(out),
            DType::BF16 => std::slice::from_raw_parts(src as *const bf16, n).convert_to_f32_slice(out),
            DType::I32 => {
                for (o, &x) in out.iter_mut().zip(std::slice::from_raw_parts(src as *const i32, n)) {
                    *o = x as f32;
                }
            }
            _ => unreachable!("{QUANT_ONLY}"),
        }
    }
}

/// Converts f32 values into a contiguous row of a float `dtype` at `dst` (i32 truncates, saturating).
///
/// # Safety
/// `dst` must be valid for writes of `vals.len()` elements of `dtype`, aligned, and not aliased.
pub(crate) unsafe fn store_f32(dtype: DType, dst: *mut u8, vals: &[f32]) {
    let n = vals.len();
    // SAFETY: caller guarantees validity and exclusivity.
    unsafe {
        match dtype {
            DType::F32 => std::slice::from_raw_parts_mut(dst as *mut f32, n).copy_from_slice(vals),
            DType::F16 => std::slice::from_raw_parts_mut(dst as *mut f16, n).convert_from_f32_slice(vals),
            DType::BF16 => std::slice::from_raw_parts_mut(dst as *mut bf16, n).convert_from_f32_slice(vals),
            DType::I32 => {
                for (o, &x) in std::slice::from_raw_parts_mut(dst as *mut i32, n).iter_mut().zip(vals) {
                    *o = x as i32;
                }
            }
            _ => unreachable!("{QUANT_ONLY}"),
        }
    }
}

/// Row `r` of a rows-contiguous float tensor as f32: borrowed when the tensor is f32, else converted
/// into `scratch` (which must hold `ne0` values).
///
/// # Safety
/// As [`TensorRef::row`].
#[inline]
pub(crate) unsafe fn row_f32<'a>(t: &'a TensorRef, r: [usize; 3], scratch: &'a mut [f32]) -> &'a [f32] {
    // SAFETY: caller guarantees validity.
    unsafe {
        if t.dtype == DType::F32 {
            t.row::<f32>(r)
        } else {
            let s = &mut scratch[..t.ne[0]];
            load_f32(t.dtype, t.row_ptr(r), s);
            s
        }
    }
}

/// Fills `out` with source values paired (by the repeat rule) with destination row `r` (of a
/// destination whose `ne0` is `out.len()`), as f32. Handles any strides and dtypes.
///
/// # Safety
/// `src` must be valid for reads.
pub(crate) unsafe fn gather_f32(src: &TensorRef, r: [usize; 3], out: &mut [f32]) {
    let n = out.len();
    let (s1, s2, s3) = (r[0] % src.ne[1], r[1] % src.ne[2], r[2] % src.ne[3]);
    let base = src.ptr(0, s1, s2, s3);
    // SAFETY: every address formed below is an element of `src`.
    unsafe {
        if src.ne[0] == n && src.nb[0] == src.dtype.size() {
            load_f32(src.dtype, base, out);
        } else if src.ne[0] == 1 {
            out.fill(src.read_f32_at(base));
        } else {
            let ne0 = src.ne[0];
            for (i, o) in out.iter_mut().enumerate() {
                *o = src.read_f32_at(base.wrapping_add((i % ne0) * src.nb[0]));
            }
        }
    }
}

/// As [`gather_f32`] for an i32 source, exactly.
///
/// # Safety
/// `src` must be valid for reads and i32.
pub(crate) unsafe fn gather_i32(src: &TensorRef, r: [usize; 3], out: &mut [i32]) {
    let (s1, s2, s3) = (r[0] % src.ne[1], r[1] % src.ne[2], r[2] % src.ne[3]);
    let base = src.ptr(0, s1, s2, s3);
    let ne0 = src.ne[0];
    // SAFETY: every address formed below is an element of `src`.
    unsafe {
        for (i, o) in out.iter_mut().enumerate() {
            *o = src.read_i32_at(base.wrapping_add((i % ne0) * src.nb[0]));
        }
    }
}
