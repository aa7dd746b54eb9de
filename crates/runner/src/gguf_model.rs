//! Loading a model from a GGUF file: its architecture ([`crate::arch`]), the hyper-parameters from
//! the `{arch}.*` keys (with llama.cpp's defaults for the optional ones), every tensor the config
//! needs checked for its shape by the reader (any dtype the graph has), tied embeddings when the
//! file has no `output.weight`, and the tokenizer from `tokenizer.ggml.*`.

use crate::config::{Config, Sliding};
use crate::error::{Result, RunnerError};
use crate::model::Model;
use crate::tokenizer::{Tokenizer, TokenizerSpec};
use crate::weights::{Tensor, Weights, expected};
use gguf::Gguf;
use std::path::Path;

fn opt_u32(g: &Gguf, key: &str) -> Result<Option<u32>> {
    if g.get(key).is_none() { Ok(None) } else { g.get_u32(key).map(Some).map_err(RunnerError::gguf) }
}

fn opt_f32(g: &Gguf, key: &str) -> Result<Option<f32>> {
    if g.get(key).is_none() { Ok(None) } else { g.get_f32(key).map(Some).map_err(RunnerError::gguf) }
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
    if let Some(Some(t)) = g.get(&k("rope.scaling.type")).map(|_| g.get_str(&k("rope.scaling.type")).ok())
        && t != "none"
    {
        return Err(RunnerError::Unsupported {
            file: g.name().to_string(),
            reason: format!("RoPE scaling {t:?} (only unscaled RoPE is implemented)"),
        });
    }
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
            let pattern = k("attention.sliding_window_pattern");
            let period = match g.get(&pattern) {
                None => d.period,
                Some(_) => g.get_u32(&pattern).map_err(|_| RunnerError::Unsupported {
                    file: g.name().to_string(),
                    reason: format!("{pattern} other than one period (a per-layer array is not implemented)"),
                })? as usize,
            };
            let rope_theta = opt_f32(g, &k("rope.freq_base_swa"))?.unwrap_or(d.rope_theta);
            Some(Sliding { window: window as usize, period, rope_theta })
        }
        _ => None,
    };
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
        n_ctx_train: opt_u32(g, &k("context_length"))?.map(|v| v as usize),
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
