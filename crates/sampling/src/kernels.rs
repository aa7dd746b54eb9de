//! The row kernels of the fast paths, all from the shared `kernels` crate (where they are
//! documented and tested), gathered under one name for the samplers: block statistics
//! ([`kernels::stats`]: block maxima, 128-token sub-block maxima and block sums of exponentials in
//! one pass), argmax, threshold gathers and top-k straight from a raw logits row
//! ([`kernels::select`]), the exponential ([`kernels::exp`]) and the max scan with its NaN/+inf
//! flag ([`kernels::row`]). Top-p's selection is `kernels::nucleus`, which `samplers/top_p.rs`
//! calls directly.

pub use ::kernels::exp::exp_neg;
pub use ::kernels::row::{first_bad, is_bad, max_bad};
pub use ::kernels::select::{argmax, desc, gather_ge, min_p_gather, top_k};
pub use ::kernels::stats::{BLOCK, BlockStats, SUB, block_stats};
