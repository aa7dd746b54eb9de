//! LLaMA (`general.architecture = "llama"`; SmolLM2 and the seeded demo models): the core block
//! and nothing more. Pre-norm attention with RoPE in ggml's normal mode (the GGUF converter
//! permutes Q and K so that adjacent pairs rotate), a SwiGLU feed-forward block, every layer global.

use super::{Activation, Arch};
use graph::RopeMode;

/// LLaMA.
pub const LLAMA: Arch = Arch {
    name: "llama",
    rope: RopeMode::Normal,
    embed_scale: false,
    qk_norm: false,
    post_norms: false,
    rope_freqs: true,
    ffn: Activation::Silu,
    sliding: None,
};
