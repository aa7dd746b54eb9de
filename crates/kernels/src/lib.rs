//! Vectorised f32 row kernels shared by the CPU backend (`cpu`) and the CPU sampler chain
//! (`sampling`), so that both compute the same exponential the same way.
//!
//! - [`exp`]: the exponential (`2^y` by range reduction and a degree-5 polynomial), scalar and as an
//!   8-lane AVX2 function, bit-identical to each other on FMA machines.
//! - [`row`]: whole-row kernels built on it: max with a NaN/+inf flag, sums of exponentials with and
//!   without storing them.
//!
//! Every row kernel exists twice: an explicit AVX2+FMA version (`std::arch` intrinsics, chosen at run
//! time by [`has_avx2_fma`]) and a portable version that LLVM vectorises for the baseline target.

pub mod exp;
pub mod row;

/// True when the CPU has AVX2 and FMA (checked once; `std` caches the answer).
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
