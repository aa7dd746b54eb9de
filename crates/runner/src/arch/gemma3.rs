//! Gemma 3 (`general.architecture = "gemma3"`), as llama.cpp's `src/models/gemma3.cpp` builds it:
//! the embeddings scaled by `sqrt(n_embd)`; per block an RMS pre-norm, Q/K/V projections, each
//! head's queries and keys RMS-normed then rotated (NeoX RoPE), attention, an RMS post-norm of its
//! output before the residual add; then an RMS pre-norm, a GELU-gated feed-forward block and an RMS
//! post-norm before the second residual add. Five of every six layers attend through a sliding
//! window (`gemma3.attention.sliding_window`, 512 for the 270M model) with RoPE base 10,000; every
//! sixth is global with `gemma3.rope.freq_base` (1,000,000). The LM head is the token embedding
//! when the file has no `output.weight`. (The GGUF converter stores the norm weights with Gemma's
//! `1 +` already added, so they multiply as LLaMA's do.)

use super::{Activation, Arch, SlidingDefaults};
use graph::RopeMode;

/// Gemma 3.
pub const GEMMA3: Arch = Arch {
    name: "gemma3",
    rope: RopeMode::Neox,
    embed_scale: true,
    qk_norm: true,
    post_norms: true,
    rope_freqs: false,
    ffn: Activation::Gelu,
    sliding: Some(SlidingDefaults { period: 6, rope_theta: 10_000.0 }),
};
