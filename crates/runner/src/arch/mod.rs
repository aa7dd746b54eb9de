//! Architectures as data: an [`Arch`] says which pieces a decoder block has (QK norms, post-norms,
//! the feed-forward activation, sliding-window layers, the RoPE style and whether it reads RoPE
//! frequency factors, the embedding scale), and
//! `forward.rs`, `weights.rs` and `gguf_model.rs` read it instead of testing architecture names.
//! One file per architecture holds its description; adding one is a new file and a line in
//! [`ALL`] (and, for a piece no architecture has yet, a field here and its step in `forward.rs`).

mod gemma3;
mod llama;
mod qwen3;

pub use gemma3::GEMMA3;
pub use llama::LLAMA;
pub use qwen3::QWEN3;

use graph::RopeMode;

/// The feed-forward block's gate activation: `act(gate(x)) * up(x)`, then `down`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SwiGLU: `x * sigmoid(x)`.
    Silu,
    /// GeGLU: GELU, tanh approximation.
    Gelu,
}

/// Sliding-window attention layers, where an architecture has them: the defaults for what the
/// GGUF file may leave out (the window itself, `{arch}.attention.sliding_window`, must be there).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlidingDefaults {
    /// Layer `il` slides when `il % period < period - 1` (llama.cpp's `set_swa_pattern`: every
    /// `period`-th layer is global), unless `{arch}.attention.sliding_window_pattern` says otherwise.
    pub period: usize,
    /// RoPE base of the sliding layers unless `{arch}.rope.freq_base_swa` says otherwise.
    pub rope_theta: f32,
}

/// A decoder architecture: what each block computes beyond the LLaMA core (RMSNorm, attention
/// with RoPE and grouped-query heads, a gated feed-forward block, residuals).
#[derive(Debug, PartialEq)]
pub struct Arch {
    /// `general.architecture` in GGUF files, and the prefix of its hyper-parameter keys.
    pub name: &'static str,
    /// How RoPE pairs the entries of a head.
    pub rope: RopeMode,
    /// The token embeddings are scaled by `sqrt(n_embd)` before the first block.
    pub embed_scale: bool,
    /// Each head's queries and keys are RMS-normed (`attn_q_norm`, `attn_k_norm`, `[head_dim]`)
    /// before RoPE.
    pub qk_norm: bool,
    /// The attention output and the feed-forward output are RMS-normed before their residual adds
    /// (`post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    /// The feed-forward gate's activation.
    pub ffn: Activation,
    /// RoPE divides its angles by the file's per-pair frequency factors `rope_freqs.weight` when
    /// it has them (llama.cpp loads them for LLaMA: LLaMA 3.1's long-context factors).
    pub rope_freqs: bool,
    /// Sliding-window layers, or `None` (every layer global).
    pub sliding: Option<SlidingDefaults>,
}

/// Every architecture the runner builds.
pub const ALL: [&Arch; 3] = [&LLAMA, &GEMMA3, &QWEN3];

/// The architecture named `name` (`general.architecture`), if the runner builds it.
pub fn by_name(name: &str) -> Option<&'static Arch> {
    ALL.into_iter().find(|a| a.name == name)
}

/// The names of [`ALL`], for error messages.
pub fn names() -> String {
    ALL.iter().map(|a| format!("{:?}", a.name)).collect::<Vec<_>>().join(", ")
}
