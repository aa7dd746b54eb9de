//! Qwen 3 (`general.architecture = "qwen3"`), as llama.cpp's `src/models/qwen3.cpp` builds it: the
//! LLaMA block with each head's queries and keys RMS-normed (`attn_q_norm`, `attn_k_norm`) before
//! NeoX RoPE, no attention biases, a SwiGLU feed-forward block, every layer global. The head width
//! comes from `qwen3.attention.key_length` (128 for the released models, whose query width is then
//! not the residual width); the LM head is the token embedding when the file has no
//! `output.weight`.

use super::{Activation, Arch};
use graph::RopeMode;

/// Qwen 3.
pub const QWEN3: Arch = Arch {
    name: "qwen3",
    rope: RopeMode::Neox,
    embed_scale: false,
    qk_norm: true,
    post_norms: false,
    rope_freqs: false,
    ffn: Activation::Silu,
    sliding: None,
};
