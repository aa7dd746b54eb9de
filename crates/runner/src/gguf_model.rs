//! Loading a model from a GGUF file: its architecture ([`crate::arch`]), the hyper-parameters from
//! the `{arch}.*` keys (with llama.cpp's defaults for the optional ones; its RoPE scaling and its
//! sliding-window pattern, a period or a per-layer list, read as llama.cpp reads them), every tensor the config
//! needs checked for its shape by the reader (any dtype the graph has), tied embeddings when the
//! file has no `output.weight`, and the tokenizer from `tokenizer.ggml.*`.

use crate::config::{Config, ROPE_FREQS, RopeScaling, Sliding, SwaPattern, Yarn};
use crate::error::{Result, RunnerError};
use crate::model::Model;
use crate::tokenizer::{Tokenizer, TokenizerSpec};
use crate::weights::{Tensor, Weights, expected};
use gguf::{Gguf, Value};
use std::path::Path;

fn opt_u32(g: &Gguf, key: &str) -> Result<Option<u32>> {
    if g.get(key).is_none() { Ok(None) } else { g.get_u32(key).map(Some).map_err(RunnerError::gguf) }
}

fn opt_f32(g: &Gguf, key: &str) -> Result<Option<f32>> {
    if g.get(key).is_none() { Ok(None) } else { g.get_f32(key).map(Some).map_err(RunnerError::gguf) }
}

/// `{arch}.attention.sliding_window_pattern` as llama.cpp's `load_swa_pattern` reads it: an array
/// (of bools, or of u32/i32 read as "nonzero") is the per-layer list, layers past its end global;
/// otherwise a period (the architecture's default when the key is absent).
fn swa_pattern(g: &Gguf, key: &str, default_period: usize) -> Result<SwaPattern> {
    let bad = |what: String| RunnerError::Unsupported { file: g.name().to_string(), reason: format!("{key} {what}") };
    match g.get(key) {
        None => Ok(SwaPattern::Period(default_period)),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::Bool(b) => Ok(*b),
                Value::U32(x) => Ok(*x != 0),
                Value::I32(x) => Ok(*x != 0),
                other => Err(bad(format!("holds {other:?}: a per-layer list must be of bools (or u32/i32)"))),
            })
            .collect::<Result<Vec<bool>>>()
            .map(SwaPattern::Layers),
        Some(_) => Ok(SwaPattern::Period(g.get_u32(key).map_err(RunnerError::gguf)? as usize)),
    }
}

/// The RoPE scaling of a GGUF file, as llama.cpp reads it (`llama_model_loader` and
/// `llama_context`'s constructor): `{arch}.rope.scaling.type` (default `linear`; `none` forces
/// `freq_scale` 1), `freq_scale = 1 / {arch}.rope.scaling.factor` (or the older
/// `{arch}.rope.scale_linear`; no factor or 0 is 1), `{arch}.rope.scaling.attn_factor` (default 1);
/// for `yarn`, `ext_factor` 1, `beta_fast` 32, `beta_slow` 1, `n_ctx_orig` from
/// `{arch}.rope.scaling.original_context_length` or `{arch}.context_length`, and the attention
/// factor `mscale(factor) / (1 + 0.1 ln factor) * attn_factor` (`mscale(f) = 1 + 0.1 ln f` for
/// `f > 1`, else 1; ggml multiplies by `1 + 0.1 ln factor` again). `rope_freqs.weight` divides the
/// angles where the architecture reads it. `longrope` (Phi-3's long/short factor tables) is refused.
fn rope_scaling(g: &Gguf, arch: &crate::arch::Arch, n_ctx_train: Option<u32>) -> Result<RopeScaling> {
    let k = |s: &str| format!("{}.{s}", arch.name);
    let unsupported = |reason: String| RunnerError::Unsupported { file: g.name().to_string(), reason };
    let type_key = k("rope.scaling.type");
    let kind = if g.get(&type_key).is_some() { g.get_str(&type_key).map_err(RunnerError::gguf)? } else { "linear" };
    let factor = match opt_f32(g, &k("rope.scaling.factor"))? {
        Some(f) => f,
        None => opt_f32(g, &k("rope.scale_linear"))?.unwrap_or(0.0),
    };
    let scale = if factor == 0.0 { 1.0 } else { 1.0 / factor };
    let attn_factor = opt_f32(g, &k("rope.scaling.attn_factor"))?.unwrap_or(1.0);
    let freq_factors = arch.rope_freqs && g.tensor(ROPE_FREQS).is_ok();
    let base = RopeScaling { freq_scale: scale, attn_factor, yarn: None, freq_factors };
    match kind {
        "none" => Ok(RopeScaling { freq_scale: 1.0, ..base }),
        "linear" => Ok(base),
        "yarn" => {
            let orig_key = k("rope.scaling.original_context_length");
            let n_ctx_orig = match opt_u32(g, &orig_key)?.or(n_ctx_train) {
                Some(n) if n > 0 => n,
                _ => {
                    return Err(unsupported(format!(
                        "YaRN RoPE scaling without {orig_key} or {} (the original context it corrects for)",
                        k("context_length")
                    )));
                }
            };
            let factor = 1.0 / scale;
            let mscale = if factor <= 1.0 { 1.0 } else { 0.1 * factor.ln() + 1.0 };
            let yarn_attn = mscale * (1.0 / (1.0 + 0.1 * factor.ln())) * attn_factor;
            let yarn = Yarn { ext_factor: 1.0, attn_factor: yarn_attn, beta_fast: 32.0, beta_slow: 1.0, n_ctx_orig };
            Ok(RopeScaling { yarn: Some(yarn), ..base })
        }
        other => Err(unsupported(format!(
            "RoPE scaling {other:?} (this runner implements none, linear, yarn and rope_freqs.weight factors)"
        ))),
    }
}

/// The hyper-parameters of a GGUF file's model (an architecture of [`crate::arch::ALL`]).
pub fn config(g: &Gguf) -> Result<Config> {
    let name = g.get_str("general.architecture").map_err(RunnerError::gguf)?;
    let arch = crate::arch::by_name(name).ok_or_else(|| RunnerError::Unsupported {
        file: g.name().to_string(),
        reason: format!("architecture {name:?} (this runner runs {})", crate::arch::names()),
    })?;
    let k = |s: &str| format!("{name}.{s}");
    let u = |s: &str| g.get_u32(&k(s)).map(|v| v as usize).map_err(RunnerError::gguf);
    let n_embd = u("embedding_length")?;
    let n_head = u("attention.head_count")?;
    let n_head_kv = opt_u32(g, &k("attention.head_count_kv"))?.map_or(n_head, |v| v as usize);
    let head_dim = match opt_u32(g, &k("attention.key_length"))? {
        Some(v) => v as usize,
        None if n_head > 0 => n_embd / n_head,
        None => 0,
    };
    let (embd, _) = g.tensor("token_embd.weight").map_err(RunnerError::gguf)?;
    let n_vocab = embd.ne.get(1).copied().unwrap_or(0);
    let sliding = match (arch.sliding, opt_u32(g, &k("attention.sliding_window"))?) {
        (Some(d), Some(window)) if window > 0 => {
            let pattern = swa_pattern(g, &k("attention.sliding_window_pattern"), d.period)?;
            let rope_theta = opt_f32(g, &k("rope.freq_base_swa"))?.unwrap_or(d.rope_theta);
            Some(Sliding { window: window as usize, pattern, rope_theta })
        }
        _ => None,
    };
    let n_ctx_train = opt_u32(g, &k("context_length"))?;
    let rope_scaling = rope_scaling(g, arch, n_ctx_train)?;
    let cfg = Config {
        arch,
        sliding,
        n_vocab,
        n_embd,
        n_layer: u("block_count")?,
        n_head,
        n_head_kv,
        head_dim,
        n_ff: u("feed_forward_length")?,
        rope_theta: opt_f32(g, &k("rope.freq_base"))?.unwrap_or(10_000.0),
        rope_dims: opt_u32(g, &k("rope.dimension_count"))?.map_or(head_dim, |v| v as usize),
        rms_eps: g.get_f32(&k("attention.layer_norm_rms_epsilon")).map_err(RunnerError::gguf)?,
        tied_embeddings: g.tensor("output.weight").is_err(),
        n_ctx_train: n_ctx_train.map(|v| v as usize),
        rope_scaling,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// The tokenizer of a GGUF file.
pub fn tokenizer(g: &Gguf) -> Result<Tokenizer> {
    let s = |key: &str| g.get_str(key).map(str::to_string).map_err(RunnerError::gguf);
    let strings = |key: &str| -> Result<Vec<String>> {
        Ok(g.get_str_array(key).map_err(RunnerError::gguf)?.into_iter().map(str::to_string).collect())
    };
    let pre = if g.get("tokenizer.ggml.pre").is_some() { s("tokenizer.ggml.pre")? } else { "default".to_string() };
    let token_types = if g.get("tokenizer.ggml.token_type").is_some() {
        g.get_i32_array("tokenizer.ggml.token_type").map_err(RunnerError::gguf)?
    } else {
        Vec::new()
    };
    let merges = if g.get("tokenizer.ggml.merges").is_some() { strings("tokenizer.ggml.merges")? } else { Vec::new() };
    let opt_bool = |key: &str| -> Result<Option<bool>> {
        if g.get(key).is_none() { Ok(None) } else { g.get_bool(key).map(Some).map_err(RunnerError::gguf) }
    };
    let add_bos = opt_bool("tokenizer.ggml.add_bos_token")?.unwrap_or(false);
    // Scores are f32, or integers in older conversions (llama.cpp reads both).
    let scores = match g.get("tokenizer.ggml.scores") {
        None => Vec::new(),
        Some(_) => match g.get_f32_array("tokenizer.ggml.scores") {
            Ok(v) => v,
            Err(e) => match g.get_i32_array("tokenizer.ggml.scores") {
                Ok(v) => v.into_iter().map(|x| x as f32).collect(),
                Err(_) => return Err(RunnerError::gguf(e)),
            },
        },
    };
    Tokenizer::new(&TokenizerSpec {
        model: s("tokenizer.ggml.model")?,
        pre,
        tokens: strings("tokenizer.ggml.tokens")?,
        merges,
        scores,
        token_types,
        bos: opt_u32(g, "tokenizer.ggml.bos_token_id")?,
        eos: opt_u32(g, "tokenizer.ggml.eos_token_id")?,
        eot: opt_u32(g, "tokenizer.ggml.eot_token_id")?,
        add_bos,
        unk: opt_u32(g, "tokenizer.ggml.unknown_token_id")?,
        add_space_prefix: opt_bool("tokenizer.ggml.add_space_prefix")?,
    })
}

impl Model {
    /// Loads a model and its tokenizer from a GGUF file.
    pub fn from_gguf(path: &Path) -> Result<Model> {
        let g = Gguf::open(path).map_err(RunnerError::gguf)?;
        let config = config(&g)?;
        let mut weights = Weights::new();
        for (name, ne) in expected(&config) {
            let (info, _) = g.tensor_expect(&name, &ne).map_err(RunnerError::gguf)?;
            weights.insert(name, Tensor { dtype: info.dtype, ne, data: g.data_of(info) });
        }
        let tokenizer = tokenizer(&g)?;
        if tokenizer.n_vocab() != config.n_vocab {
            return Err(RunnerError::Unsupported {
                file: g.name().to_string(),
                reason: format!(
                    "the tokenizer has {} tokens, token_embd.weight {} rows",
                    tokenizer.n_vocab(),
                    config.n_vocab
                ),
            });
        }
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let mut model = Model::new(name, config, weights, Some(tokenizer))?;
        if g.get("tokenizer.chat_template").is_some() {
            model.chat_template = Some(g.get_str("tokenizer.chat_template").map_err(RunnerError::gguf)?.to_string());
        }
        model.sampling = crate::sampling_defaults::ModelSampling::from_gguf(&g);
        model.path = Some(path.to_path_buf());
        Ok(model)
    }
}
