//! Element types: the four plain dtypes and ggml's block-quantized ones (`q8_0`, `q4_0`, `q4_1`,
//! `q5_0`, `q5_1` and the K-quants `q4_K`, `q5_K`, `q6_K`), their block sizes, byte sizes and names.
//!
//! A quantized tensor stores its rows as blocks in ggml's layouts (all little-endian, `d` and `m`
//! are IEEE f16); the 32-element blocks ([`QK`]):
//! - `q8_0` (34 bytes): `d`, then 32 `i8` quants `q`; element `j` is `d * q[j]`.
//! - `q4_0` (18 bytes): `d`, then 16 bytes of nibbles; byte `j` holds element `j` in its low nibble
//!   and element `j + 16` in its high nibble; an element is `d * (nibble - 8)`.
//! - `q4_1` (20 bytes): `d`, `m`, then 16 bytes of nibbles as in `q4_0`; an element is
//!   `d * nibble + m`.
//! - `q5_0` (22 bytes): `d`, 4 bytes of fifth bits (bit `j` for element `j`), 16 nibble bytes; an
//!   element is `d * ((nibble | bit << 4) - 16)`.
//! - `q5_1` (24 bytes): `d`, `m`, the fifth bits, 16 nibble bytes; `d * (nibble | bit << 4) + m`.
//!
//! and the 256-element K-quant blocks ([`QK_K`], `kernels::quant::kquants` describes them):
//! `q4_K` (144 bytes), `q5_K` (176), `q6_K` (210).
//!
//! As in ggml, a quantized tensor's `ne[0]` is a multiple of its block size
//! ([`DType::block_size`]), `nb[0]` is the block's byte size ([`DType::size`]) and a row takes
//! `ne[0] / block_size * size` bytes ([`DType::row_bytes`]).

use std::fmt;
use std::str::FromStr;

/// The 16-bit brain float, re-exported from `half`.
pub use half::bf16;
/// The 16-bit IEEE half float, re-exported from `half`.
pub use half::f16;

/// A tensor's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float ([`f16`]); computed in f32.
    F16,
    /// 16-bit brain float ([`bf16`]); computed in f32.
    BF16,
    /// 32-bit signed integer (token ids, indices, counters).
    I32,
    /// ggml's `q8_0`: blocks of 32 elements, an f16 scale and 32 `i8` (34 bytes).
    Q8_0,
    /// ggml's `q4_0`: blocks of 32 elements, an f16 scale and 32 4-bit quants offset by 8 (18 bytes).
    Q4_0,
    /// ggml's `q4_1`: blocks of 32 elements, an f16 scale, an f16 minimum and 32 4-bit quants (20 bytes).
    Q4_1,
    /// ggml's `q5_0`: blocks of 32 elements, an f16 scale and 32 5-bit quants offset by 16 (22 bytes).
    Q5_0,
    /// ggml's `q5_1`: blocks of 32 elements, an f16 scale, an f16 minimum and 32 5-bit quants (24 bytes).
    Q5_1,
    /// ggml's `q4_K`: blocks of 256 elements, 4-bit quants in 8 sub-blocks with 6-bit scales and mins
    /// (144 bytes).
    #[allow(non_camel_case_types)]
    Q4_K,
    /// ggml's `q5_K`: blocks of 256 elements, 5-bit quants in 8 sub-blocks with 6-bit scales and mins
    /// (176 bytes).
    #[allow(non_camel_case_types)]
    Q5_K,
    /// ggml's `q6_K`: blocks of 256 elements, 6-bit quants in 16 groups with 8-bit scales (210 bytes).
    #[allow(non_camel_case_types)]
    Q6_K,
}

/// Elements per block of the 32-element quantized dtypes (ggml's `QK8_0`, `QK4_0`, `QK5_1` ...).
pub const QK: usize = 32;

/// Elements per block of the K-quants (ggml's `QK_K`).
pub const QK_K: usize = 256;

impl DType {
    /// The plain (element-addressable) dtypes, in declaration order: the ones every op computes on.
    pub const ALL: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::I32];

    /// The block-quantized dtypes, in declaration order.
    pub const QUANTIZED: [DType; 8] =
        [DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K];

    /// Every dtype, in declaration order: [`DType::ALL`] then [`DType::QUANTIZED`].
    pub const EVERY: [DType; 12] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
    ];

    /// Bytes of one element, or of one block of [`DType::block_size`] elements for a quantized
    /// dtype (ggml's `ggml_type_size`; a quantized tensor's `nb[0]`).
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Q8_0 => 34,
            DType::Q4_0 => 18,
            DType::Q4_1 => 20,
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::Q4_K => 144,
            DType::Q5_K => 176,
            DType::Q6_K => 210,
        }
    }

    /// Elements per block: [`QK_K`] for the K-quants, [`QK`] for the other quantized dtypes, 1 for
    /// the plain ones.
    pub const fn block_size(self) -> usize {
        match self {
            DType::Q4_K | DType::Q5_K | DType::Q6_K => QK_K,
            _ if self.is_quantized() => QK,
            _ => 1,
        }
    }

    /// Bytes of a contiguous row of `ne0` elements (`ne0` a multiple of [`DType::block_size`]).
    pub const fn row_bytes(self, ne0: usize) -> usize {
        ne0 / self.block_size() * self.size()
    }

    /// The short name used in dumps and fixtures (`f32`, `f16`, `bf16`, `i32`, `q8_0`, `q4_0`, `q4_1`,
    /// `q5_0`, `q5_1`, `q4_K`, `q5_K`, `q6_K`: ggml's names).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::Q8_0 => "q8_0",
            DType::Q4_0 => "q4_0",
            DType::Q4_1 => "q4_1",
            DType::Q5_0 => "q5_0",
            DType::Q5_1 => "q5_1",
            DType::Q4_K => "q4_K",
            DType::Q5_K => "q5_K",
            DType::Q6_K => "q6_K",
        }
    }

    /// True for the plain floating-point dtypes (f32, f16, bf16), the ones element-wise float ops take.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// True for the block-quantized dtypes ([`DType::QUANTIZED`]).
    pub const fn is_quantized(self) -> bool {
        !matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::I32)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a dtype name that is not one of [`DType::EVERY`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}` (expected f32, f16, bf16, i32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K or q6_K)")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::EVERY.into_iter().find(|d| d.name() == s).ok_or_else(|| UnknownDType(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names_round_trip() {
        for d in DType::EVERY {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
        assert_eq!(DType::Q8_0.row_bytes(64), 68);
        assert_eq!(DType::Q4_0.row_bytes(576), 18 * 18);
        assert_eq!(DType::Q4_1.row_bytes(32), 20);
        assert_eq!(DType::F16.row_bytes(5), 10);
        assert!(DType::QUANTIZED.iter().all(|d| d.is_quantized() && !d.is_float() && d.row_bytes(256) > 0));
        assert_eq!(DType::Q5_0.row_bytes(64), 44);
        assert_eq!(DType::Q4_K.row_bytes(512), 288);
        assert_eq!(DType::Q6_K.block_size(), 256);
        assert_eq!(DType::Q5_1.block_size(), 32);
        assert_eq!("q4_K".parse::<DType>().unwrap(), DType::Q4_K);
        assert_eq!(DType::F32.size(), 4);
        assert_eq!(DType::F16.size(), std::mem::size_of::<f16>());
        assert_eq!(DType::BF16.size(), std::mem::size_of::<bf16>());
        assert_eq!(DType::I32.size(), 4);
        assert!(!DType::I32.is_float() && DType::BF16.is_float());
        assert_eq!(
            "f64".parse::<DType>().unwrap_err().to_string(),
            "unknown dtype `f64` (expected f32, f16, bf16, i32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K or q6_K)"
        );
    }
}
