//! `Config`: the hyper-parameters of a decoder (its [`Arch`] and the `{arch}.*` keys of a GGUF
//! file), their consistency checks, and the built-in configurations (the seeded demo model).

use crate::arch::{Arch, LLAMA};
use crate::error::{Result, RunnerError};
use graph::RopeParams;

/// Which layers attend through the sliding window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwaPattern {
    /// Layer `il` slides when `il % period < period - 1` (llama.cpp's `set_swa_pattern`: every
    /// `period`-th layer is global).
    Period(usize),
    /// Layer `il` slides when entry `il` is true; layers past the list's end are global (llama.cpp
    /// reads `{arch}.attention.sliding_window_pattern` as such a list when it is an array).
    Layers(Vec<bool>),
}

impl SwaPattern {
    /// Whether layer `il` slides.
    pub fn slides(&self, il: usize) -> bool {
        match self {
            SwaPattern::Period(p) => *p > 0 && il % p < p - 1,
            SwaPattern::Layers(v) => v.get(il).copied().unwrap_or(false),
        }
    }
}

/// Sliding-window attention: which layers use it, their window and RoPE base.
#[derive(Debug, Clone, PartialEq)]
pub struct Sliding {
    /// A token at position `p` attends to the positions `p - window + 1 ..= p` in sliding layers
    /// (llama.cpp's standard SWA: a key is hidden when `p - p_key >= window`).
    pub window: usize,
    /// Which layers slide.
    pub pattern: SwaPattern,
    /// RoPE frequency base of the sliding layers.
    pub rope_theta: f32,
}

/// YaRN's parameters, as llama.cpp passes them to `ggml_rope_ext` (see [`graph::RopeParams`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// The extrapolation mix (1 for `{arch}.rope.scaling.type = yarn`).
    pub ext_factor: f32,
    /// Magnitude multiplier of cos and sin (ggml multiplies it by `1 + 0.1 ln(factor)` again).
    pub attn_factor: f32,
    /// Rotations below which a pair is interpolated fully (32).
    pub beta_fast: f32,
    /// Rotations above which a pair is extrapolated fully (1).
    pub beta_slow: f32,
    /// The context the model was trained for before scaling
    /// (`{arch}.rope.scaling.original_context_length`, else `{arch}.context_length`).
    pub n_ctx_orig: u32,
}

/// RoPE beyond its base frequency: position scaling, YaRN and per-pair frequency factors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeScaling {
    /// Multiplies every angle: `1 / {arch}.rope.scaling.factor` for linear or YaRN scaling, 1
    /// otherwise. Sliding-window layers keep 1 (llama.cpp's `rope_freq_scale_train_swa`).
    pub freq_scale: f32,
    /// Multiplies every rotated pair's cos and sin (`{arch}.rope.scaling.attn_factor`, 1 unless
    /// the file says; under YaRN, llama.cpp's corrected factor).
    pub attn_factor: f32,
    /// YaRN, where the file asks for it.
    pub yarn: Option<Yarn>,
    /// The angles are divided per pair by `rope_freqs.weight` (`[rope_dims / 2]`, LLaMA 3's
    /// long-context factors): the file has the tensor and the architecture reads it.
    pub freq_factors: bool,
}

impl RopeScaling {
    /// Plain RoPE.
    pub const NONE: RopeScaling = RopeScaling { freq_scale: 1.0, attn_factor: 1.0, yarn: None, freq_factors: false };
}

/// Name of the per-pair RoPE frequency factors tensor.
pub const ROPE_FREQS: &str = "rope_freqs.weight";

/// Hyper-parameters of a decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The architecture: which pieces each block has.
    pub arch: &'static Arch,
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
    /// Sliding-window layers, where the architecture has them.
    pub sliding: Option<Sliding>,
    /// RoPE scaling (linear, YaRN, frequency factors).
    pub rope_scaling: RopeScaling,
}

impl Config {
    /// The seeded demo model: Qwen2's 151936-token vocabulary (so sampling sees a realistic row),
    /// a small body (4 blocks of width 256, 4 query heads over 2 key/value heads) so that a CPU
    /// decodes a batch of sequences quickly, tied embeddings.
    pub fn demo() -> Config {
        Config {
            arch: &LLAMA,
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
            sliding: None,
            rope_scaling: RopeScaling::NONE,
        }
    }

    /// A tiny configuration for tests: `n_vocab` tokens, 2 blocks of width 64, 4 query heads over
    /// 2 key/value heads of width 16, an untied LM head.
    pub fn tiny(n_vocab: usize) -> Config {
        Config {
            arch: &LLAMA,
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
            sliding: None,
            rope_scaling: RopeScaling::NONE,
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

    /// Whether layer `il` attends through the sliding window.
    pub fn is_sliding(&self, il: usize) -> bool {
        self.sliding.as_ref().is_some_and(|s| s.pattern.slides(il))
    }

    /// RoPE frequency base of layer `il`.
    pub fn rope_theta_of(&self, il: usize) -> f32 {
        match &self.sliding {
            Some(s) if self.is_sliding(il) => s.rope_theta,
            _ => self.rope_theta,
        }
    }

    /// The RoPE of layer `il` as `ggml_rope_ext` takes it (the architecture's mode, the layer's
    /// base, the scaling; sliding-window layers unscaled, as llama.cpp).
    pub fn rope_params(&self, il: usize) -> RopeParams {
        let r = &self.rope_scaling;
        let freq_scale = if self.is_sliding(il) { 1.0 } else { r.freq_scale };
        let plain = RopeParams::new(self.rope_dims as u32, self.arch.rope, self.rope_theta_of(il), freq_scale);
        let plain = RopeParams { attn_factor: r.attn_factor, ..plain };
        match r.yarn {
            None => plain,
            Some(y) => RopeParams {
                ext_factor: y.ext_factor,
                attn_factor: y.attn_factor,
                beta_fast: y.beta_fast,
                beta_slow: y.beta_slow,
                n_ctx_orig: y.n_ctx_orig,
                ..plain
            },
        }
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
        let r = &self.rope_scaling;
        if !(r.freq_scale.is_finite() && r.freq_scale > 0.0) {
            return bad("rope_scaling.freq_scale", r.freq_scale.to_string(), "must be finite and positive");
        }
        if !r.attn_factor.is_finite() {
            return bad("rope_scaling.attn_factor", r.attn_factor.to_string(), "must be finite");
        }
        if let Some(y) = r.yarn
            && ![y.ext_factor, y.attn_factor, y.beta_fast, y.beta_slow].iter().all(|v| v.is_finite())
        {
            return bad("rope_scaling.yarn", format!("{y:?}"), "every factor must be finite");
        }
        if let Some(s) = &self.sliding {
            if s.window == 0 || s.pattern == SwaPattern::Period(0) {
                return bad("sliding", format!("{s:?}"), "window and period must be positive");
            }
            if !(s.rope_theta.is_finite() && s.rope_theta > 0.0) {
                return bad("sliding.rope_theta", s.rope_theta.to_string(), "must be finite and positive");
            }
            if self.arch.sliding.is_none() {
                return bad("sliding", format!("{s:?}"), "the architecture has no sliding-window layers");
            }
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
        let c = Config {
            sliding: Some(Sliding { window: 4, pattern: SwaPattern::Period(2), rope_theta: 1e4 }),
            ..Config::tiny(10)
        };
        assert!(c.validate().unwrap_err().to_string().contains("no sliding-window layers"));
    }

    #[test]
    fn every_period_th_layer_is_global() {
        let c = Config {
            arch: &crate::arch::GEMMA3,
            n_layer: 12,
            sliding: Some(Sliding { window: 4, pattern: SwaPattern::Period(6), rope_theta: 1e4 }),
            ..Config::tiny(10)
        };
        c.validate().unwrap();
        let slides: Vec<bool> = (0..12).map(|il| c.is_sliding(il)).collect();
        assert_eq!(slides, [true, true, true, true, true, false, true, true, true, true, true, false]);
        assert_eq!((c.rope_theta_of(0), c.rope_theta_of(5)), (1e4, c.rope_theta));
    }

    #[test]
    fn a_per_layer_pattern_slides_the_layers_it_names() {
        let pattern = SwaPattern::Layers(vec![false, true, true, false, true]);
        let c = Config {
            arch: &crate::arch::GEMMA3,
            n_layer: 6,
            sliding: Some(Sliding { window: 4, pattern, rope_theta: 1e4 }),
            ..Config::tiny(10)
        };
        c.validate().unwrap();
        // layer 5 is past the list: global, as llama.cpp leaves it
        let slides: Vec<bool> = (0..6).map(|il| c.is_sliding(il)).collect();
        assert_eq!(slides, [false, true, true, false, true, false]);
        assert_eq!((c.rope_theta_of(0), c.rope_theta_of(1)), (c.rope_theta, 1e4));
        assert_eq!((c.rope_params(0).freq_base, c.rope_params(2).freq_base), (c.rope_theta, 1e4));
    }
}
