//! Element types: the four dtypes a tensor can have, their sizes and names.

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
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::I32];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// The short name used in dumps and fixtures (`f32`, `f16`, `bf16`, `i32`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
        }
    }

    /// True for the floating-point dtypes.
    pub const fn is_float(self) -> bool {
        !matches!(self, DType::I32)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a dtype name that is not one of [`DType::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}` (expected f32, f16, bf16 or i32)")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| UnknownDType(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
        assert_eq!(DType::F32.size(), 4);
        assert_eq!(DType::F16.size(), std::mem::size_of::<f16>());
        assert_eq!(DType::BF16.size(), std::mem::size_of::<bf16>());
        assert_eq!(DType::I32.size(), 4);
        assert!(!DType::I32.is_float() && DType::BF16.is_float());
        assert_eq!(
            "f64".parse::<DType>().unwrap_err().to_string(),
            "unknown dtype `f64` (expected f32, f16, bf16 or i32)"
        );
    }
}
