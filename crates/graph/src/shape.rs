//! Static shapes in ggml order (`ne[0]` innermost, up to four dimensions) and byte-strided layouts.

use crate::dtype::DType;
use std::fmt;

/// Maximum number of dimensions.
pub const MAX_DIMS: usize = 4;

/// Element counts per dimension, ggml order: `ne[0]` is the contiguous (innermost) dimension.
/// Unused trailing dimensions are 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape(pub [usize; MAX_DIMS]);

impl Shape {
    /// A shape from up to four dimensions; missing trailing dimensions are 1.
    ///
    /// Panics if more than four are given (a programming error; builders validate user input first).
    pub fn new(dims: &[usize]) -> Shape {
        assert!(dims.len() <= MAX_DIMS, "at most {MAX_DIMS} dimensions");
        let mut ne = [1; MAX_DIMS];
        ne[..dims.len()].copy_from_slice(dims);
        Shape(ne)
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Number of rows: the product of every dimension but `ne[0]`.
    pub fn nrows(&self) -> usize {
        self.0[1..].iter().product()
    }

    /// Number of meaningful dimensions (trailing 1s dropped; at least 1).
    pub fn ndims(&self) -> usize {
        self.0.iter().rposition(|&n| n != 1).map_or(1, |i| i + 1)
    }

    /// The row-major (ggml) contiguous byte strides for `dtype`. As in ggml, a quantized dtype's
    /// `nb[0]` is its block size in bytes and `nb[1]` its row size ([`DType::row_bytes`]).
    pub fn contiguous_strides(&self, dtype: DType) -> [usize; MAX_DIMS] {
        let mut nb = [0; MAX_DIMS];
        nb[0] = dtype.size();
        nb[1] = dtype.row_bytes(self.0[0]);
        for i in 2..MAX_DIMS {
            nb[i] = nb[i - 1] * self.0[i - 1];
        }
        nb
    }

    /// Bytes of a contiguous tensor of this shape in `dtype`, `None` where the count overflows.
    pub fn checked_bytes(&self, dtype: DType) -> Option<usize> {
        let row = (self.0[0] / dtype.block_size()).checked_mul(dtype.size())?;
        self.0[1..].iter().try_fold(row, |b, &n| b.checked_mul(n))
    }

    /// True when `other` can be broadcast (repeated) to this shape: each of its dimensions divides ours.
    pub fn can_repeat_from(&self, other: &Shape) -> bool {
        (0..MAX_DIMS).all(|i| other.0[i] != 0 && self.0[i].is_multiple_of(other.0[i]))
    }
}

impl std::ops::Index<usize> for Shape {
    type Output = usize;
    fn index(&self, i: usize) -> &usize {
        &self.0[i]
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, n) in self.0[..self.ndims()].iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n}")?;
        }
        f.write_str("]")
    }
}

/// Where a tensor's elements are: its shape, byte strides and byte offset into its storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Element counts.
    pub ne: Shape,
    /// Byte strides per dimension.
    pub nb: [usize; MAX_DIMS],
    /// Byte offset from the start of the storage the tensor lives in (non-zero only for views).
    pub offset: usize,
}

impl Layout {
    /// A contiguous layout at offset 0.
    pub fn contiguous(ne: Shape, dtype: DType) -> Layout {
        Layout { ne, nb: ne.contiguous_strides(dtype), offset: 0 }
    }

    /// True when the elements are densely packed in ggml order (dimensions of size 1 are ignored).
    pub fn is_contiguous(&self, dtype: DType) -> bool {
        if self.ne[0] != 1 && self.nb[0] != dtype.size() {
            return false;
        }
        let mut expect = dtype.row_bytes(self.ne[0]);
        for i in 1..MAX_DIMS {
            if self.ne[i] != 1 && self.nb[i] != expect {
                return false;
            }
            expect *= self.ne[i];
        }
        true
    }

    /// True when each row (`ne[0]` elements) is contiguous, whatever the outer strides.
    pub fn rows_contiguous(&self, dtype: DType) -> bool {
        self.ne[0] == 1 || self.nb[0] == dtype.size()
    }

    /// One byte past the last element, relative to the storage start (0 for an empty tensor). A
    /// quantized dtype's rows are whole ([`DType::row_bytes`]), as in ggml's `ggml_nbytes`.
    pub fn extent(&self, dtype: DType) -> usize {
        if self.ne.numel() == 0 {
            return self.offset;
        }
        let outer: usize = (1..MAX_DIMS).map(|i| (self.ne[i] - 1) * self.nb[i]).sum();
        let row = if dtype.is_quantized() {
            dtype.row_bytes(self.ne[0])
        } else {
            (self.ne[0] - 1) * self.nb[0] + dtype.size()
        };
        self.offset + outer + row
    }

    /// Byte offset of element `idx` (ggml order), including the layout's own offset.
    pub fn byte_offset(&self, idx: [usize; MAX_DIMS]) -> usize {
        self.offset + (0..MAX_DIMS).map(|i| idx[i] * self.nb[i]).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_basics() {
        let s = Shape::new(&[4096, 32]);
        assert_eq!(s.0, [4096, 32, 1, 1]);
        assert_eq!(s.numel(), 4096 * 32);
        assert_eq!(s.nrows(), 32);
        assert_eq!(s.ndims(), 2);
        assert_eq!(s.to_string(), "[4096, 32]");
        assert_eq!(Shape::new(&[]).to_string(), "[1]");
        assert_eq!(Shape::new(&[1, 1, 3]).to_string(), "[1, 1, 3]");
        assert_eq!(s.contiguous_strides(DType::F16), [2, 8192, 262144, 262144]);
        assert_eq!(Shape::new(&[64, 3]).contiguous_strides(DType::Q4_1), [20, 40, 120, 120]);
    }

    #[test]
    fn broadcast_rule() {
        let a = Shape::new(&[8, 6]);
        assert!(a.can_repeat_from(&Shape::new(&[8, 1])));
        assert!(a.can_repeat_from(&Shape::new(&[1, 3])));
        assert!(!a.can_repeat_from(&Shape::new(&[3, 6])));
        assert!(!a.can_repeat_from(&Shape::new(&[0])));
    }

    #[test]
    fn layout_contiguity_and_extent() {
        let l = Layout::contiguous(Shape::new(&[4, 3]), DType::F32);
        assert!(l.is_contiguous(DType::F32));
        assert_eq!(l.extent(DType::F32), 48);
        let t = Layout { ne: Shape::new(&[3, 4]), nb: [16, 4, 48, 48], offset: 0 };
        assert!(!t.is_contiguous(DType::F32));
        assert!(!t.rows_contiguous(DType::F32));
        assert_eq!(t.extent(DType::F32), 2 * 16 + 3 * 4 + 4);
        let row = Layout { ne: Shape::new(&[4, 2]), nb: [4, 32, 64, 64], offset: 8 };
        assert!(row.rows_contiguous(DType::F32) && !row.is_contiguous(DType::F32));
        assert_eq!(row.byte_offset([1, 1, 0, 0]), 8 + 4 + 32);
        let q = Layout::contiguous(Shape::new(&[64, 3]), DType::Q8_0);
        assert!(q.is_contiguous(DType::Q8_0) && q.rows_contiguous(DType::Q8_0));
        assert_eq!(q.extent(DType::Q8_0), 3 * 68);
    }
}
