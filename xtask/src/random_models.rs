//! Seeded random models with the shapes and quantization types of real checkpoints, for benchmarks
//! on machines that model files cannot reach (the GPU machine has no network): the architecture,
//! the sizes and the types of each tensor those of the checkpoint named. Weights are uniform with the scale of
//! `runner::Weights::random`, then quantized with ggml's reference quantizers
//! (`conformance::quant`), so a step reads as many bytes, in the same blocks, as the real file's.
//!
//! Shapes (`--model random:NAME`):
//! - `smollm2-135m`: SmolLM2-135M-Instruct as in its Q4_1 GGUF (what `cargo xtask fetch-model`
//!   fetches): 30 blocks of width 576, 9 heads / 3 KV heads of 64, SwiGLU 1536, vocabulary 49,152
//!   tied; `token_embd` q8_0, every block matrix q4_1.
//! - `gemma3-270m`: Gemma 3 270M's architecture and sizes (`runner::arch::GEMMA3`: QK norms,
//!   post-norms, GELU, five sliding-window layers of 512 in six): 18 blocks of width 640, 4 heads /
//!   1 KV head of 256, feed-forward 2048, vocabulary 262,144 tied, every matrix q8_0 (the real
//!   `Q4_K_M` file mixes q5_0, q4_K, q6_K and q8_0).
//! - `demo`: the runner's demo model (`Config::demo`, f16).
//! - `tiny`: `Config::tiny(4096)` in f16, for smoke runs on a software device.

use anyhow::{Context, Result, bail};
use graph::DType;
use runner::{Config, Model, Tensor, Weights};

/// The names `random:NAME` accepts.
pub const NAMES: &[&str] = &["demo", "tiny", "smollm2-135m", "gemma3-270m"];

/// The model `random:NAME` names, seeded with `seed`.
pub fn make(name: &str, seed: u64) -> Result<Model> {
    let (config, embd, blocks) = match name {
        "demo" => return Ok(Model::random(Config::demo(), DType::F16, seed)?),
        "tiny" => return Ok(Model::random(Config::tiny(4096), DType::F16, seed)?),
        "smollm2-135m" => (
            Config {
                arch: &runner::arch::LLAMA,
                sliding: None,
                n_vocab: 49_152,
                n_embd: 576,
                n_layer: 30,
                n_head: 9,
                n_head_kv: 3,
                head_dim: 64,
                n_ff: 1536,
                rope_theta: 100_000.0,
                rope_dims: 64,
                rms_eps: 1e-5,
                tied_embeddings: true,
                n_ctx_train: Some(8192),
                rope_scaling: runner::config::RopeScaling::NONE,
            },
            DType::Q8_0,
            DType::Q4_1,
        ),
        "gemma3-270m" => (
            Config {
                arch: &runner::arch::GEMMA3,
                sliding: Some(runner::config::Sliding {
                    window: 512,
                    pattern: runner::config::SwaPattern::Period(6),
                    rope_theta: 10_000.0,
                }),
                n_vocab: 262_144,
                n_embd: 640,
                n_layer: 18,
                n_head: 4,
                n_head_kv: 1,
                head_dim: 256,
                n_ff: 2048,
                rope_theta: 1_000_000.0,
                rope_dims: 256,
                rms_eps: 1e-6,
                tied_embeddings: true,
                n_ctx_train: Some(32_768),
                rope_scaling: runner::config::RopeScaling::NONE,
            },
            DType::Q8_0,
            DType::Q8_0,
        ),
        other => bail!("random model `{other}`: one of {}", NAMES.join(", ")),
    };
    let f32s = Weights::random(&config, DType::F32, seed)?;
    let mut weights = Weights::new();
    for n in f32s.names() {
        let t = f32s.get(n)?;
        let dtype = match t.ne.len() {
            1 => DType::F32,
            _ if n == "token_embd.weight" || n == "output.weight" => embd,
            _ => blocks,
        };
        let data = if dtype == DType::F32 {
            t.data.clone()
        } else {
            let values: Vec<f64> =
                t.data.chunks_exact(4).map(|b| f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes")))).collect();
            conformance::quant::quantize(dtype, &values).into()
        };
        weights.insert(n, Tensor { dtype, ne: t.ne.clone(), data });
    }
    let name = format!(
        "random model shaped as {name} (seed {seed}; {embd} embeddings, {blocks} blocks): {} blocks of width {}, {} heads / {} KV heads of {}, vocabulary {}",
        config.n_layer, config.n_embd, config.n_head, config.n_head_kv, config.head_dim, config.n_vocab
    );
    Model::new(name, config, weights, None).context("the random model")
}
