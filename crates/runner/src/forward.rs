//! The forward pass as a static graph: a decoder built only from `graph` ops, its blocks as its
//! [`crate::arch::Arch`] describes them.
//!
//! Per step the graph takes `t` tokens for each of the cache's `n_seq` slots (see [`crate::kv`];
//! or, [`build_ragged`], each slot its own count, attention per run of equal counts):
//! embedding (`get_rows`, scaled by `sqrt(n_embd)` where the architecture says), per block RMSNorm,
//! Q/K/V projections, each head's Q and K RMS-normed where the architecture has QK norms, RoPE
//! (the architecture's mode; ggml mode 0 for LLaMA, whose GGUF converter permutes Q and K rows so
//! that adjacent pairs rotate; the layer's base; the model's scaling and frequency factors,
//! [`Config::rope_params`]), keys and values written into the state tensors
//! with `set_rows`, grouped-query attention of each slot's tokens over its own cells (`mul_mat`
//! broadcasting key/value heads over query heads, a causal mask input to `soft_max`: `mask_swa`,
//! which also hides keys a window or more behind, in sliding-window layers), the output projection,
//! its post-norm where the architecture has one, and the residual; RMSNorm, the gated feed-forward
//! block (SiLU or GELU), its post-norm, and the residual; then the output rows (`n_out` per slot,
//! chosen by the `out_rows` input through a
//! `get_rows` when `t > 1`: the slot's last real token for plain decoding, the last token and each
//! draft token for speculative verification), the output norm and the LM head (the token embedding
//! when tied): logits `[n_vocab, n_seq * n_out]`.

use crate::arch::Activation;
use crate::config::Config;
use crate::error::{Result, RunnerError};
use crate::kv::CacheSpec;
use crate::weights::{Weights, blk};
use graph::{DType, Graph, NodeId};

/// The input and output nodes of a built forward graph.
#[derive(Debug, Clone)]
pub struct Forward {
    /// Tokens per slot.
    pub t: usize,
    /// `tokens` i32 `[n_seq * t]`.
    pub tokens: NodeId,
    /// `pos` i32 `[n_seq * t]`.
    pub pos: NodeId,
    /// `k_rows` i32 `[n_seq * t]`.
    pub k_rows: NodeId,
    /// `v_rows` i32 `[n_seq * t * n_embd_kv]`.
    pub v_rows: NodeId,
    /// `mask` f32 `[cells, 1, 1, n_seq * t]` (one row per token; `cells` the cells attended).
    pub mask: NodeId,
    /// `mask_swa` f32, shaped as `mask`: the sliding-window layers' mask (only where the model has
    /// them).
    pub mask_swa: Option<NodeId>,
    /// Output rows per slot.
    pub n_out: usize,
    /// `out_rows` i32 `[n_seq * n_out]` (only when `t > 1`; a ragged step's: one per slot that
    /// samples, at least one).
    pub out_rows: Option<NodeId>,
    /// Logits f32 `[n_vocab, n_seq * n_out]` (slot-major; a ragged step's: a row per `out_rows`).
    pub logits: NodeId,
    /// Weight leaves and their tensor names.
    pub params: Vec<(NodeId, String)>,
}

/// Name of layer `il`'s key cache state tensor.
pub fn k_cache_name(il: usize) -> String {
    format!("cache.k.{il}")
}

/// Name of layer `il`'s value cache state tensor.
pub fn v_cache_name(il: usize) -> String {
    format!("cache.v.{il}")
}

/// RMSNorm of `x`'s rows scaled by the weight `w` (broadcast over the rows).
fn rms_norm_mul(g: &mut Graph, x: NodeId, w: NodeId, eps: f32, what: String) -> Result<NodeId> {
    let n = g.rms_norm(x, eps).map_err(RunnerError::graph(what.clone()))?;
    g.mul(n, w).map_err(RunnerError::graph(what))
}

struct Builder<'a> {
    g: &'a mut Graph,
    w: &'a Weights,
    params: Vec<(NodeId, String)>,
}

impl Builder<'_> {
    fn param(&mut self, name: &str) -> Result<NodeId> {
        if let Some(&(id, _)) = self.params.iter().find(|(_, n)| n == name) {
            return Ok(id);
        }
        let t = self.w.get(name)?;
        let id = self.g.param(name, t.dtype, &t.ne).map_err(RunnerError::graph(format!("weight {name}")))?;
        self.params.push((id, name.to_string()));
        Ok(id)
    }
}

/// Builds the forward pass of `t` tokens per slot into `g` (which may already hold nodes), one
/// output row per slot.
pub fn build(g: &mut Graph, cfg: &Config, w: &Weights, cache: &CacheSpec, t: usize) -> Result<Forward> {
    build_outputs(g, cfg, w, cache, t, 1)
}

/// [`build`] with `n_out` output rows per slot (`1 <= n_out <= t`; speculative verification).
pub fn build_outputs(
    g: &mut Graph,
    cfg: &Config,
    w: &Weights,
    cache: &CacheSpec,
    t: usize,
    n_out: usize,
) -> Result<Forward> {
    build_slots(g, cfg, w, cache, 0..cache.n_seq, t, n_out, cache.n_ctx)
}

/// [`build_outputs`] for the cache slots `slots` only (a contiguous range; every count and row of
/// the graph is then over `slots.len()` slots, and its slot `s` is the cache's `slots.start + s`):
/// a step in which only some sequences take part (a server's prefill of one request, or a
/// decode step over the slots in use); attention reads each slot's first `cells` cells
/// (`crate::kv::attended_cells`: the cells in use, not the whole context).
#[allow(clippy::too_many_arguments)]
pub fn build_slots(
    g: &mut Graph,
    cfg: &Config,
    w: &Weights,
    cache: &CacheSpec,
    slots: std::ops::Range<usize>,
    t: usize,
    n_out: usize,
    cells: usize,
) -> Result<Forward> {
    let widths = vec![t; slots.len()];
    let rows = if t > 1 { Some(slots.len() * n_out) } else { None };
    build_widths(g, cfg, w, cache, slots, &widths, n_out, rows, cells)
}

/// [`build_slots`] for a ragged step ([`crate::kv::StepInputs::ragged`]): slot `s` of `slots`
/// evaluates `widths[s]` tokens (token rows `widths[..s].sum()..`; 0: it takes no part), and
/// `n_rows` output rows are chosen by `out_rows` (the last token of each slot that samples).
/// The slots of each run of equal widths attend together, as [`build_slots`]'s do; the runs'
/// results are then put in token order (`set_rows` into one tensor). Every token's attention is
/// still a matrix-vector product over its own slot's `cells` cells, so a token gets the same
/// bits in a ragged step as in a uniform one.
#[allow(clippy::too_many_arguments)]
pub fn build_ragged(
    g: &mut Graph,
    cfg: &Config,
    w: &Weights,
    cache: &CacheSpec,
    slots: std::ops::Range<usize>,
    widths: &[usize],
    n_rows: usize,
    cells: usize,
) -> Result<Forward> {
    let n_tok: usize = widths.iter().sum();
    if widths.len() != slots.len() || n_rows == 0 || n_rows > n_tok {
        return Err(RunnerError::Session {
            what: format!("a ragged step over slots {slots:?} with widths {widths:?} and {n_rows} output rows"),
            reason: "needs one width per slot, a token, and between 1 and one output row per token".into(),
        });
    }
    build_widths(g, cfg, w, cache, slots, widths, 1, Some(n_rows), cells)
}

/// The runs of equal non-zero widths: `(first slot, slots, width, first token row)`.
fn runs(widths: &[usize]) -> Vec<(usize, usize, usize, usize)> {
    let mut out: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut row = 0;
    for (s, &w) in widths.iter().enumerate() {
        match out.last_mut() {
            _ if w == 0 => {}
            Some(r) if r.2 == w && r.0 + r.1 == s => r.1 += 1,
            _ => out.push((s, 1, w, row)),
        }
        row += w;
    }
    out
}

/// The forward pass of `widths[s]` tokens for slot `s` of `slots`, with `out_rows` choosing
/// `n_rows` output rows where given (`n_out` a slot, or a ragged step's), else every token one.
#[allow(clippy::too_many_arguments)]
fn build_widths(
    g: &mut Graph,
    cfg: &Config,
    w: &Weights,
    cache: &CacheSpec,
    slots: std::ops::Range<usize>,
    widths: &[usize],
    n_out: usize,
    n_rows: Option<usize>,
    cells: usize,
) -> Result<Forward> {
    cfg.validate()?;
    let t = widths.iter().copied().max().unwrap_or(0);
    let ragged = widths.iter().any(|&w| w != t);
    if ragged && n_out != 1 {
        return Err(RunnerError::Session {
            what: format!("a step of widths {widths:?} with {n_out} outputs per slot"),
            reason: "a ragged step has one output per slot at most".into(),
        });
    }
    if slots.is_empty() || slots.end > cache.n_seq {
        return Err(RunnerError::Session {
            what: format!("a step over slots {slots:?}"),
            reason: format!("the cache has slots 0..{}", cache.n_seq),
        });
    }
    if t == 0 || cache.n_seq == 0 || cache.n_ctx == 0 || n_out == 0 || n_out > t || cells == 0 || cells > cache.n_ctx {
        return Err(RunnerError::Session {
            what: format!(
                "a step of {t} tokens and {n_out} outputs for {} sequences of {} cells",
                cache.n_seq, cache.n_ctx
            ),
            reason: "every count must be positive, and the outputs at most the tokens".into(),
        });
    }
    if !matches!(cache.dtype, DType::F32 | DType::F16) {
        return Err(RunnerError::Session {
            what: format!("KV cache dtype {}", cache.dtype),
            reason: "must be f32 or f16".into(),
        });
    }
    // The runs address the slots of this step; the state tensors keep the whole cache's.
    let n_ctx = cache.n_ctx;
    let n_tok: usize = widths.iter().sum();
    let runs = runs(widths);
    let (hd, n_head, n_head_kv) = (cfg.head_dim, cfg.n_head, cfg.n_head_kv);
    let n_kv = cfg.n_embd_kv();
    let e = |s: &str| RunnerError::graph(s.to_string());
    let mut b = Builder { g, w, params: Vec::new() };

    let tokens = b.g.input("tokens", DType::I32, &[n_tok]).map_err(e("inputs"))?;
    let pos = b.g.input("pos", DType::I32, &[n_tok]).map_err(e("inputs"))?;
    let k_rows = b.g.input("k_rows", DType::I32, &[n_tok]).map_err(e("inputs"))?;
    let v_rows = b.g.input("v_rows", DType::I32, &[n_tok * n_kv]).map_err(e("inputs"))?;
    let mask = b.g.input("mask", DType::F32, &[cells, 1, 1, n_tok]).map_err(e("inputs"))?;
    let mask_swa = if cfg.sliding.is_some() {
        Some(b.g.input("mask_swa", DType::F32, &[cells, 1, 1, n_tok]).map_err(e("inputs"))?)
    } else {
        None
    };
    let out_rows = match n_rows {
        Some(n) => Some(b.g.input("out_rows", DType::I32, &[n]).map_err(e("inputs"))?),
        None => None,
    };

    let embd = b.param("token_embd.weight")?;
    let mut x = b.g.get_rows(embd, tokens).map_err(e("embedding"))?;
    if cfg.arch.embed_scale {
        x = b.g.scale(x, (cfg.n_embd as f32).sqrt()).map_err(e("embedding scale"))?;
    }
    let kq_scale = 1.0 / (hd as f32).sqrt();
    let es = cache.dtype.size();
    for il in 0..cfg.n_layer {
        let what = |s: &str| format!("block {il}: {s}");
        // Attention.
        let norm_w = b.param(&blk(il, "attn_norm"))?;
        let cur = rms_norm_mul(b.g, x, norm_w, cfg.rms_eps, what("attn_norm"))?;
        let (wq, wk, wv, wo) = (
            b.param(&blk(il, "attn_q"))?,
            b.param(&blk(il, "attn_k"))?,
            b.param(&blk(il, "attn_v"))?,
            b.param(&blk(il, "attn_output"))?,
        );
        let qk_norms = if cfg.arch.qk_norm {
            Some((b.param(&blk(il, "attn_q_norm"))?, b.param(&blk(il, "attn_k_norm"))?))
        } else {
            None
        };
        let post_norms = if cfg.arch.post_norms {
            Some((b.param(&blk(il, "post_attention_norm"))?, b.param(&blk(il, "post_ffw_norm"))?))
        } else {
            None
        };
        let rope_params = cfg.rope_params(il);
        let freq_factors = if cfg.rope_scaling.freq_factors { Some(b.param(crate::config::ROPE_FREQS)?) } else { None };
        let layer_mask = if cfg.is_sliding(il) { mask_swa.unwrap_or(mask) } else { mask };
        let g = &mut *b.g;
        let q = g.mul_mat(wq, cur).map_err(e(&what("q")))?;
        let k = g.mul_mat(wk, cur).map_err(e(&what("k")))?;
        let v = g.mul_mat(wv, cur).map_err(e(&what("v")))?;
        let q = g.reshape(q, &[hd, n_head, n_tok]).map_err(e(&what("q")))?;
        let k = g.reshape(k, &[hd, n_head_kv, n_tok]).map_err(e(&what("k")))?;
        let (q, k) = match qk_norms {
            // each head's row of head_dim entries normed, then scaled by the weight (broadcast)
            Some((qn, kn)) => (
                rms_norm_mul(g, q, qn, cfg.rms_eps, what("q norm"))?,
                rms_norm_mul(g, k, kn, cfg.rms_eps, what("k norm"))?,
            ),
            None => (q, k),
        };
        let rope = |g: &mut Graph, x| g.rope_ext(x, pos, freq_factors, rope_params).map_err(e(&what("rope")));
        let q = rope(g, q)?;
        let k = rope(g, k)?;
        let k = g.reshape(k, &[n_kv, n_tok]).map_err(e(&what("k")))?;
        let v = g.reshape(v, &[1, n_tok * n_kv]).map_err(e(&what("v")))?;
        let k_cache =
            g.state(&k_cache_name(il), cache.dtype, &[n_kv, cache.n_seq * n_ctx]).map_err(e(&what("k cache")))?;
        let v_cache =
            g.state(&v_cache_name(il), cache.dtype, &[1, cache.n_seq * n_kv * n_ctx]).map_err(e(&what("v cache")))?;
        let k_all = g.set_rows(k_cache, k, k_rows).map_err(e(&what("k store")))?;
        let v_all = g.set_rows(v_cache, v, v_rows).map_err(e(&what("v store")))?;
        // Each run of slots with equal widths attends together; one run unless the step is
        // ragged, whose runs' results are then written into one tensor in token order.
        let mut kqv = None;
        for &(first, n_run, width, row) in &runs {
            let run_tok = n_run * width;
            // The run's keys: [head_dim, cells, n_head_kv, n_run], from its first slot on (a
            // slot's keys and its values take the same bytes in their tensors).
            let slot0 = (slots.start + first) * n_ctx * n_kv * es;
            let kv_ = g
                .view(k_all, &[hd, cells, n_head_kv, n_run], &[es, n_kv * es, hd * es, n_ctx * n_kv * es], slot0)
                .map_err(e(&what("k view")))?;
            // Its values, transposed: [cells, head_dim, n_head_kv, n_run].
            let vv = g
                .view(
                    v_all,
                    &[cells, hd, n_head_kv, n_run],
                    &[es, n_ctx * es, hd * n_ctx * es, n_kv * n_ctx * es],
                    slot0,
                )
                .map_err(e(&what("v view")))?;
            // Each token's queries as its own batch entry, [head_dim, 1, n_head, run_tok] over q
            // [head_dim, n_head, n_tok]: token j of the run's slot s is entry s * width + j, which
            // `mul_mat`'s broadcast maps to slot s's keys and values. Every attention product is
            // then a matrix-vector product, so a token's attention is computed the same way
            // whatever the step's widths (a prefill, a decode step, a speculative step and a
            // ragged step agree bit for bit).
            let f = 4;
            let qv = g
                .view(q, &[hd, 1, n_head, run_tok], &[f, hd * f, hd * f, n_head * hd * f], row * n_head * hd * f)
                .map_err(e(&what("q view")))?;
            let run_mask = if runs.len() == 1 {
                layer_mask
            } else {
                g.view(layer_mask, &[cells, 1, 1, run_tok], &[f, cells * f, cells * f, cells * f], row * cells * f)
                    .map_err(e(&what("mask view")))?
            };
            let kq = g.mul_mat(kv_, qv).map_err(e(&what("kq")))?; // [cells, 1, n_head, run_tok]
            let kq = g.soft_max(kq, Some(run_mask), kq_scale).map_err(e(&what("softmax")))?;
            let out = g.mul_mat(vv, kq).map_err(e(&what("kqv")))?; // [head_dim, 1, n_head, run_tok]
            let out = g.reshape(out, &[n_head * hd, run_tok]).map_err(e(&what("kqv")))?;
            kqv = Some(match (kqv, runs.len()) {
                (None, 1) => out,
                (prev, _) => {
                    let dst = match prev {
                        Some(d) => d,
                        None => g.fill(DType::F32, &[n_head * hd, n_tok], 0.0).map_err(e(&what("kqv")))?,
                    };
                    let ids = g.arange(DType::I32, &[run_tok], row as f32, 1.0).map_err(e(&what("kqv rows")))?;
                    g.set_rows(dst, out, ids).map_err(e(&what("kqv rows")))?
                }
            });
        }
        let kqv = kqv.expect("a step has a run");
        let mut attn = g.mul_mat(wo, kqv).map_err(e(&what("attn_output")))?;
        if let Some((pn, _)) = post_norms {
            attn = rms_norm_mul(g, attn, pn, cfg.rms_eps, what("post_attention_norm"))?;
        }
        x = g.add(x, attn).map_err(e(&what("residual")))?;
        // Feed-forward.
        let norm_w = b.param(&blk(il, "ffn_norm"))?;
        let (wg, wu, wd) =
            (b.param(&blk(il, "ffn_gate"))?, b.param(&blk(il, "ffn_up"))?, b.param(&blk(il, "ffn_down"))?);
        let g = &mut *b.g;
        let cur = rms_norm_mul(g, x, norm_w, cfg.rms_eps, what("ffn_norm"))?;
        let gate = g.mul_mat(wg, cur).map_err(e(&what("ffn_gate")))?;
        let up = g.mul_mat(wu, cur).map_err(e(&what("ffn_up")))?;
        let gate = match cfg.arch.ffn {
            Activation::Silu => g.silu(gate),
            Activation::Gelu => g.gelu(gate),
        }
        .map_err(e(&what("ffn_gate")))?;
        let h = g.mul(gate, up).map_err(e(&what("gated ffn")))?;
        let mut down = g.mul_mat(wd, h).map_err(e(&what("ffn_down")))?;
        if let Some((_, pn)) = post_norms {
            down = rms_norm_mul(g, down, pn, cfg.rms_eps, what("post_ffw_norm"))?;
        }
        x = g.add(x, down).map_err(e(&what("residual")))?;
    }
    if let Some(rows) = out_rows {
        x = b.g.get_rows(x, rows).map_err(e("output rows"))?;
    }
    let norm_w = b.param("output_norm.weight")?;
    let head = if cfg.tied_embeddings { embd } else { b.param("output.weight")? };
    let g = &mut *b.g;
    let x = rms_norm_mul(g, x, norm_w, cfg.rms_eps, "output_norm".into())?;
    let logits = g.mul_mat(head, x).map_err(e("lm head"))?;
    g.set_name(logits, "logits");
    Ok(Forward { t, tokens, pos, k_rows, v_rows, mask, mask_swa, n_out, out_rows, logits, params: b.params })
}
