//! `Config`: the hyper-parameters of a LLaMA-architecture decoder (the `llama.*` keys of a GGUF
//! file), their consistency checks, and the built-in configurations (the seeded demo model).

use crate::error::{Result, RunnerError};

/// Hyper-parameters of a LLaMA-architecture decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Vocabulary size (rows of the embedding and of the LM head).
    pub n_vocab: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
    /// Decoder blocks.
    pub n_layer: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention: `n_head` is a multiple).
    pub n_head_kv: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Hidden width of the SwiGLU feed-forward block.
    pub n_ff: usize,
    /// RoPE frequency base (`llama.rope.freq_base`).
    pub rope_theta: f32,
    /// Rotated entries per head (`llama.rope.dimension_count`; usually `head_dim`).
    pub rope_dims: usize,
    /// RMSNorm epsilon (`llama.attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// The LM head is the token embedding (no `output.weight`).
    pub tied_embeddings: bool,
    /// The context the model was trained for (`llama.context_length`), where the file says:
    /// positions past it are outside what the model has seen.
    pub n_ctx_train: Option<usize>,
}

impl Config {
    /// The seeded demo model: Qwen2's 151936-token vocabulary (so sampling sees a realistic row),
    /// a small body (4 blocks of width 256, 4 query heads over 2 key/value heads) so that a CPU
    /// decodes a batch of sequences quickly, tied embeddings.
    pub fn demo() -> Config {
        Config {
            n_vocab: 151_936,
            n_embd: 256,
            n_layer: 4,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 64,
            n_ff: 768,
            rope_theta: 1_000_000.0,
            rope_dims: 64,
            rms_eps: 1e-6,
            tied_embeddings: true,
            n_ctx_train: None,
        }
    }

    /// A tiny configuration for tests: `n_vocab` tokens, 2 blocks of width 64, 4 query heads over
    /// 2 key/value heads of width 16, an untied LM head.
    pub fn tiny(n_vocab: usize) -> Config {
        Config {
            n_vocab,
            n_embd: 64,
            n_layer: 2,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 16,
            n_ff: 96,
            rope_theta: 10_000.0,
            rope_dims: 16,
            rms_eps: 1e-5,
            tied_embeddings: false,
            n_ctx_train: None,
        }
    }

    /// Query width: `n_head * head_dim`.
    pub fn n_embd_q(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Key/value width: `n_head_kv * head_dim`.
    pub fn n_embd_kv(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Checks that the values are positive and consistent.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, value: String, reason: &'static str| {
            Err(RunnerError::Config { field, value, reason })
        };
        for (field, v) in [
            ("n_vocab", self.n_vocab),
            ("n_embd", self.n_embd),
            ("n_layer", self.n_layer),
            ("n_head", self.n_head),
            ("n_head_kv", self.n_head_kv),
            ("head_dim", self.head_dim),
            ("n_ff", self.n_ff),
        ] {
            if v == 0 {
                return bad(field, v.to_string(), "must be positive");
            }
        }
        if self.n_vocab > i32::MAX as usize {
            return bad("n_vocab", self.n_vocab.to_string(), "token ids must fit in i32");
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return bad("n_head", self.n_head.to_string(), "must be a multiple of n_head_kv (grouped-query attention)");
        }
        if self.rope_dims == 0 || !self.rope_dims.is_multiple_of(2) || self.rope_dims > self.head_dim {
            return bad("rope_dims", self.rope_dims.to_string(), "must be even, positive and at most head_dim");
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return bad("rope_theta", self.rope_theta.to_string(), "must be finite and positive");
        }
        if !(self.rms_eps.is_finite() && self.rms_eps >= 0.0) {
            return bad("rms_eps", self.rms_eps.to_string(), "must be finite and >= 0");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_configs_are_valid() {
        Config::demo().validate().unwrap();
        Config::tiny(100).validate().unwrap();
        assert_eq!(Config::demo().n_vocab, 151_936);
    }

    #[test]
    fn inconsistent_heads_are_rejected() {
        let c = Config { n_head_kv: 3, ..Config::tiny(10) };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("n_head = 4") && e.contains("multiple of n_head_kv"), "{e}");
        let c = Config { rope_dims: 15, ..Config::tiny(10) };
        assert!(c.validate().unwrap_err().to_string().contains("rope_dims = 15"));
    }
}
