//! `Weights`: the model's tensors by GGUF name (dtype, ggml shape, raw little-endian bytes, shared
//! with the mapped model file), the
//! list of tensors a [`Config`] needs with their shapes, and seeded random weights for the demo
//! model (no download needed).

use crate::config::Config;
use crate::error::{Result, RunnerError};
use graph::DType;
use std::collections::BTreeMap;

/// One weight tensor: ggml shape (`ne[0]` innermost) and raw bytes in the dtype's layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Element type (quantized types store blocks).
    pub dtype: DType,
    /// Shape, ggml order.
    pub ne: Vec<usize>,
    /// Raw bytes: a range of the mapped model file for a loaded model (never copied out of it), or
    /// owned bytes (`Vec<u8>::into()`).
    pub data: gguf::Bytes,
}

/// The model's tensors by name.
#[derive(Debug, Clone, Default)]
pub struct Weights {
    tensors: BTreeMap<String, Tensor>,
}

/// Name of block `i`'s tensor `what` (GGUF naming: `blk.3.attn_q.weight`).
pub fn blk(i: usize, what: &str) -> String {
    format!("blk.{i}.{what}.weight")
}

/// Every tensor `cfg` needs, with its shape (ggml order), in a fixed order: the token embedding,
/// the RoPE frequency factors where the config has them, each block's tensors (as its architecture has them), the output norm and (untied) the LM head.
pub fn expected(cfg: &Config) -> Vec<(String, Vec<usize>)> {
    let (e, q, kv, ff) = (cfg.n_embd, cfg.n_embd_q(), cfg.n_embd_kv(), cfg.n_ff);
    let mut v = vec![("token_embd.weight".to_string(), vec![e, cfg.n_vocab])];
    if cfg.rope_scaling.freq_factors {
        v.push((crate::config::ROPE_FREQS.to_string(), vec![cfg.rope_dims / 2]));
    }
    for i in 0..cfg.n_layer {
        v.push((blk(i, "attn_norm"), vec![e]));
        v.push((blk(i, "attn_q"), vec![e, q]));
        v.push((blk(i, "attn_k"), vec![e, kv]));
        v.push((blk(i, "attn_v"), vec![e, kv]));
        v.push((blk(i, "attn_output"), vec![q, e]));
        if cfg.arch.qk_norm {
            v.push((blk(i, "attn_q_norm"), vec![cfg.head_dim]));
            v.push((blk(i, "attn_k_norm"), vec![cfg.head_dim]));
        }
        if cfg.arch.post_norms {
            v.push((blk(i, "post_attention_norm"), vec![e]));
            v.push((blk(i, "post_ffw_norm"), vec![e]));
        }
        v.push((blk(i, "ffn_norm"), vec![e]));
        v.push((blk(i, "ffn_gate"), vec![e, ff]));
        v.push((blk(i, "ffn_up"), vec![e, ff]));
        v.push((blk(i, "ffn_down"), vec![ff, e]));
    }
    v.push(("output_norm.weight".to_string(), vec![e]));
    if !cfg.tied_embeddings {
        v.push(("output.weight".to_string(), vec![e, cfg.n_vocab]));
    }
    v
}

impl Weights {
    /// No tensors.
    pub fn new() -> Weights {
        Weights::default()
    }

    /// Adds (or replaces) a tensor.
    pub fn insert(&mut self, name: impl Into<String>, t: Tensor) {
        self.tensors.insert(name.into(), t);
    }

    /// A tensor by name.
    pub fn get(&self, name: &str) -> Result<&Tensor> {
        self.tensors.get(name).ok_or_else(|| RunnerError::Weight { name: name.to_string(), reason: "missing".into() })
    }

    /// Tensor names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// Total bytes of all tensors.
    pub fn bytes(&self) -> usize {
        self.tensors.values().map(|t| t.data.len()).sum()
    }

    /// Checks that every tensor `cfg` needs is present with its shape (norms must be f32, the
    /// others any float or quantized type the graph accepts).
    pub fn check(&self, cfg: &Config) -> Result<()> {
        for (name, ne) in expected(cfg) {
            let t = self.get(&name)?;
            if t.ne != ne {
                return Err(RunnerError::Weight {
                    name,
                    reason: format!("shape {:?}, the config needs {:?}", t.ne, ne),
                });
            }
            if ne.len() == 1 && t.dtype != DType::F32 {
                return Err(RunnerError::Weight {
                    name,
                    reason: format!("dtype {}, a norm weight must be f32", t.dtype),
                });
            }
        }
        Ok(())
    }

    /// Seeded random weights for `cfg`, matrices in `dtype` (f32, f16 or bf16), norms f32.
    ///
    /// Values are uniform (Philox, keyed by `seed`, the tensor's index and the element) with the
    /// standard deviation that keeps activations near unit scale: `1/sqrt(fan_in)` for the
    /// projections, 0.15 for the embedding (so tied logits spread over a few units), and norm
    /// weights `1 +- 0.1`.
    pub fn random(cfg: &Config, dtype: DType, seed: u64) -> Result<Weights> {
        cfg.validate()?;
        if !dtype.is_float() {
            return Err(RunnerError::Config {
                field: "weight dtype",
                value: dtype.to_string(),
                reason: "random weights are f32, f16 or bf16",
            });
        }
        let mut w = Weights::new();
        for (i, (name, ne)) in expected(cfg).into_iter().enumerate() {
            let n: usize = ne.iter().product();
            let (center, std) = match ne.len() {
                1 => (1.0, 0.1 / 3f32.sqrt()),
                _ if name.ends_with("embd.weight") => (0.0, 0.15),
                _ => (0.0, 1.0 / (ne[0] as f32).sqrt()),
            };
            let half_width = std * 3f32.sqrt();
            let t_dtype = if ne.len() == 1 { DType::F32 } else { dtype };
            let mut data = Vec::with_capacity(n * t_dtype.size());
            let mut push = |x: f32| match t_dtype {
                DType::F16 => data.extend_from_slice(&half::f16::from_f32(x).to_le_bytes()),
                DType::BF16 => data.extend_from_slice(&half::bf16::from_f32(x).to_le_bytes()),
                _ => data.extend_from_slice(&x.to_le_bytes()),
            };
            for block in 0..n.div_ceil(4) {
                let bits = graph::philox::bits(seed, i as u64, block as u64);
                for (j, b) in bits.iter().enumerate() {
                    if block * 4 + j < n {
                        let u = graph::philox::u32_to_unit_f32(*b);
                        push(center + (2.0 * u - 1.0) * half_width);
                    }
                }
            }
            w.insert(name, Tensor { dtype: t_dtype, ne, data: data.into() });
        }
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_weights_match_the_config_and_the_seed() {
        let cfg = Config::tiny(50);
        let a = Weights::random(&cfg, DType::F16, 7).unwrap();
        a.check(&cfg).unwrap();
        assert_eq!(a.get("token_embd.weight").unwrap().data.len(), 64 * 50 * 2);
        assert_eq!(a.get("output_norm.weight").unwrap().dtype, DType::F32);
        let b = Weights::random(&cfg, DType::F16, 7).unwrap();
        let c = Weights::random(&cfg, DType::F16, 8).unwrap();
        assert_eq!(a.get("blk.1.ffn_up.weight").unwrap(), b.get("blk.1.ffn_up.weight").unwrap());
        assert_ne!(a.get("blk.1.ffn_up.weight").unwrap(), c.get("blk.1.ffn_up.weight").unwrap());
    }

    #[test]
    fn check_names_the_bad_tensor() {
        let cfg = Config::tiny(50);
        let mut w = Weights::random(&cfg, DType::F32, 1).unwrap();
        let mut t = w.get("blk.0.attn_k.weight").unwrap().clone();
        t.ne = vec![64, 64];
        w.insert("blk.0.attn_k.weight", t);
        let e = w.check(&cfg).unwrap_err().to_string();
        assert!(e.contains("'blk.0.attn_k.weight'") && e.contains("[64, 64]") && e.contains("[64, 32]"), "{e}");
        let e = Weights::new().check(&cfg).unwrap_err().to_string();
        assert!(e.contains("'token_embd.weight': missing"), "{e}");
    }
}
