//! Vectorised f32 row kernels shared by the CPU backend (`cpu`) and the CPU sampler chain
//! (`sampling`), so that both compute the same exponential, the same order and the same selections
//! the same way. This crate depends on nothing.
//!
//! - [`exp`]: the exponential (`2^y` by range reduction and a degree-5 polynomial), scalar and as an
//!   8-lane AVX2 function, bit-identical to each other on FMA machines.
//! - [`exp64`]: the f64 exponential (`random_sample`), only `+ - *` so that a shader computes it
//!   bit for bit alike.
//! - [`row`]: whole-row scans built on it: max with a NaN/+inf flag (of the row or of each block),
//!   sums of exponentials with and without storing them.
//! - [`key`]: the one order of floats ([`key::order_key`]: -0.0 ties +0.0, every NaN above +inf),
//!   its inverse, the largest key of a row, and the composite keys that selections sort on.
//! - [`stats`]: per-block statistics of a logits row in one pass (block maxima, 128-token sub-block
//!   maxima, block sums of exponentials).
//! - [`quant`]: ggml's block-quantized formats: dequantizing rows, quantizing an activation row to
//!   8-bit blocks, and the weight-activation dot product (ggml's x86 arithmetic).
//! - [`select`]: selections straight from a raw row: argmax, threshold gathers, top-k (by value for
//!   the samplers, by index for the `top_k` op).
//! - [`nucleus`]: top-p's selection straight from a raw row (the CPU sampler chain's `top_p` and
//!   the CPU backend's `top_p_mask` op), deciding boundaries in llama.cpp's `f32` arithmetic
//!   ([`llama_f32`]).
//! - [`list`]: the top-p and min-p cuts on a sorted candidate list, as the chain's list stages
//!   decide them (the CPU backend's `list_filter` op).
//! - [`token_mask`]: allowed-token bitmasks (bit `t % 32` of word `t / 32` allows token `t`) and
//!   the ban they apply, `x + -inf` (the CPU backend's `token_mask` op).
//!
//! Every hot kernel exists twice: an AVX2+FMA version (explicit `std::arch` intrinsics, or a generic
//! body compiled with those features enabled) and a portable one that LLVM vectorises for the
//! baseline target. [`dispatch!`] defines the function that picks one at run time, by the
//! feature probe [`has_avx2_fma`]. One kernel has a third, AVX-512 VNNI form: the quantized
//! register tile ([`quant::dot_tile`], probe [`has_avx512_vnni`]), bit-identical to the others.

pub mod draw;
pub mod exp;
pub mod exp64;
pub mod key;
pub mod list;
pub mod llama_f32;
pub mod nucleus;
pub mod penalize;
pub mod quant;
pub mod row;
pub mod select;
pub mod stats;
pub mod token_mask;

#[cfg(test)]
mod tests;

/// True when the CPU has AVX2, FMA and F16C (checked once; `std` caches the answer). Every x86 CPU
/// with AVX2 and FMA also has F16C (Haswell, Piledriver and later); the check keeps the f16
/// conversions of the CPU backend's multiversioned loops safe. [`dispatch!`] and the explicit AVX2
/// callers of `cpu` ask it.
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True when the CPU has AVX-512 F, BW, VL, DQ and VNNI besides [`has_avx2_fma`]'s features, and
/// the environment does not set `KERNELS_NO_AVX512` (to any value: the AVX2 forms then run, which
/// give the same bits; benchmarks compare the two in one run that way). Read once per process.
/// Only the quantized register tile ([`quant::dot_tile`]) has an AVX-512 form.
pub fn has_avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            has_avx2_fma()
                && std::env::var_os("KERNELS_NO_AVX512").is_none()
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512vnni")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The one run-time dispatch: defines `fn $name(args) -> ret` that runs an AVX2+FMA build when
/// [`has_avx2_fma`] says the CPU has it, else a portable one. Two forms:
///
/// - `fn name(args) -> ret => x86_fn | portable_fn`: two hand-written functions; `x86_fn` is a
///   `#[target_feature(enable = "avx2,fma")]` function (explicit intrinsics), `portable_fn` a plain
///   one. The defined function is `#[inline]`.
/// - `fn name(args) -> ret => body`: one `#[inline(always)]` body generic over `const FMA: bool`,
///   compiled twice: `body::<true>` inside a function with AVX2, FMA and F16C enabled, and
///   `body::<false>` for the baseline (so LLVM vectorises the same source for both).
#[macro_export]
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident : $t:ty),* $(,)?) $(-> $r:ty)? => $x86:path | $portable:path) => {
        $(#[$m])*
        #[inline]
        $vis fn $name($($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                if $crate::has_avx2_fma() {
                    // SAFETY: the CPU has AVX2 and FMA, all that the x86 version requires.
                    return unsafe { $x86($($a),*) };
                }
            }
            $portable($($a),*)
        }
    };
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident : $t:ty),* $(,)?) $(-> $r:ty)? => $body:ident) => {
        $(#[$m])*
        $vis fn $name($($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma,f16c")]
                fn fast($($a: $t),*) $(-> $r)? {
                    $body::<true>($($a),*)
                }
                if $crate::has_avx2_fma() {
                    // SAFETY: the CPU has the features `fast` was compiled for.
                    return unsafe { fast($($a),*) };
                }
            }
            $body::<false>($($a),*)
        }
    };
}
