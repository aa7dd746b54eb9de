//! The closed set of operations a node can compute, with their typed parameters and exact semantics.
//!
//! Every backend implements these semantics; the builder (`build/`) checks shapes and dtypes. All
//! row-wise operations work along `ne[0]`. "Float" inputs may be f32, f16 or bf16 and are computed in
//! f32. Broadcasting follows ggml's repeat rule: a source `b` broadcasts to `a` when every `b.ne[i]`
//! divides `a.ne[i]`, element `i` of `a` pairing with element `i % b.ne` of `b`.

use std::fmt;

/// Element-wise operations of one float source; output has the source's shape and dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// natural logarithm (`log(0) = -inf`, negative gives NaN)
    Log,
    /// `x^2`
    Sqr,
    /// `sqrt(x)`
    Sqrt,
    /// `x * sigmoid(x)`
    Silu,
    /// GELU, tanh approximation (as ggml): `0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))`
    Gelu,
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 7] =
        [UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqr, UnaryOp::Sqrt, UnaryOp::Silu, UnaryOp::Gelu];

    /// Name in dumps and fixtures.
    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqr => "sqr",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Silu => "silu",
            UnaryOp::Gelu => "gelu",
        }
    }
}

/// Element-wise arithmetic of `a` with `b` broadcast to `a`; output has `a`'s shape and dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (IEEE: division by zero gives ±inf or NaN)
    Div,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

    /// Name in dumps and fixtures.
    pub const fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
        }
    }
}

/// Comparisons of `a` with `b` broadcast to `a`, producing an f32 mask of 1.0 (true) and 0.0 (false).
/// NaN compares false (IEEE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `a >= b`
    Ge,
    /// `a > b`
    Gt,
    /// `a == b`
    Eq,
}

impl CompareOp {
    /// Every comparison.
    pub const ALL: [CompareOp; 3] = [CompareOp::Ge, CompareOp::Gt, CompareOp::Eq];

    /// Name in dumps and fixtures.
    pub const fn name(self) -> &'static str {
        match self {
            CompareOp::Ge => "ge",
            CompareOp::Gt => "gt",
            CompareOp::Eq => "eq",
        }
    }
}

/// Sort direction of `argsort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SortOrder {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

impl SortOrder {
    /// Name in dumps and fixtures.
    pub const fn name(self) -> &'static str {
        match self {
            SortOrder::Asc => "asc",
            SortOrder::Desc => "desc",
        }
    }
}

/// Rotary embedding variant, as ggml's `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// GPT-J / LLaMA style: rotates adjacent pairs `(x[2i], x[2i+1])` (ggml mode 0).
    Normal,
    /// GPT-NeoX style: rotates `(x[i], x[i + n_dims/2])` (ggml mode 2).
    Neox,
}

impl RopeMode {
    /// Name in dumps and fixtures.
    pub const fn name(self) -> &'static str {
        match self {
            RopeMode::Normal => "normal",
            RopeMode::Neox => "neox",
        }
    }
}

/// The parameters of a [`Op::Rope`], as ggml's `ggml_rope_ext` takes them (its `mode`, `n_dims`,
/// `freq_base`, `freq_scale` and YaRN's `ext_factor`, `attn_factor`, `beta_fast`, `beta_slow`,
/// `n_ctx_orig`). [`RopeParams::new`] gives plain (unscaled, non-YaRN) RoPE.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    /// Rotated entries per head (even, at most `head_dim`).
    pub n_dims: u32,
    /// Pairing of rotated entries.
    pub mode: RopeMode,
    /// Base of the frequencies (10000 for LLaMA).
    pub freq_base: f32,
    /// Linear position scaling (`1 / factor` for linear RoPE scaling; YaRN's interpolation scale).
    pub freq_scale: f32,
    /// YaRN's extrapolation mix: 0 turns YaRN off (then `beta_*` and `n_ctx_orig` do nothing).
    pub ext_factor: f32,
    /// Magnitude multiplier of every rotated pair's cos and sin (YaRN's attention factor; 1 for
    /// plain RoPE).
    pub attn_factor: f32,
    /// YaRN: rotations per original context below which a pair is interpolated fully.
    pub beta_fast: f32,
    /// YaRN: rotations per original context above which a pair is extrapolated fully.
    pub beta_slow: f32,
    /// YaRN: the context the model was trained for.
    pub n_ctx_orig: u32,
}

impl RopeParams {
    /// Plain RoPE: no YaRN (`ext_factor` 0, `attn_factor` 1, and ggml's defaults `beta_fast` 32,
    /// `beta_slow` 1, `n_ctx_orig` 0 for the unused rest).
    pub const fn new(n_dims: u32, mode: RopeMode, freq_base: f32, freq_scale: f32) -> RopeParams {
        RopeParams {
            n_dims,
            mode,
            freq_base,
            freq_scale,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
            n_ctx_orig: 0,
        }
    }

    /// Whether any YaRN parameter differs from [`RopeParams::new`]'s.
    pub fn has_yarn(&self) -> bool {
        let d = RopeParams::new(self.n_dims, self.mode, self.freq_base, self.freq_scale);
        (self.ext_factor, self.attn_factor, self.beta_fast, self.beta_slow, self.n_ctx_orig)
            != (d.ext_factor, d.attn_factor, d.beta_fast, d.beta_slow, d.n_ctx_orig)
    }

    /// YaRN's correction range `[low, high]` of pair indices, in f32 as ggml's
    /// `ggml_rope_yarn_corr_dims` computes it: `corr(b) = n_dims * ln(n_ctx_orig / (2 pi b)) /
    /// (2 ln freq_base)`, `low = max(0, floor(corr(beta_fast)))`, `high = min(n_dims - 1,
    /// ceil(corr(beta_slow)))`.
    pub fn corr_dims(&self) -> [f32; 2] {
        let nd = self.n_dims as f32;
        let corr = |beta: f32| {
            nd * (self.n_ctx_orig as f32 / (beta * 2.0 * std::f32::consts::PI)).ln() / (2.0 * self.freq_base.ln())
        };
        [corr(self.beta_fast).floor().max(0.0), corr(self.beta_slow).ceil().min(nd - 1.0)]
    }

    /// The cos and sin of pair `i` at position `pos` with frequency factor `ff`, as ggml's
    /// `rope_yarn` computes them: `theta_extrap = pos * freq_base^(-2i/n_dims) / ff`, `theta =
    /// freq_scale * theta_extrap`, and with YaRN (`ext_factor != 0`) mixed towards `theta_extrap`
    /// by `ramp(i) * ext_factor` (`ramp` falls from 1 to 0 over [`RopeParams::corr_dims`]) and the
    /// magnitude scaled by `1 + 0.1 ln(1 / freq_scale)`; both times `attn_factor`. `inv_freq` is
    /// `freq_base^(-2i/n_dims)` (computed once per op by the caller).
    pub fn cos_sin(&self, i: usize, pos: f32, inv_freq: f32, ff: f32, corr: [f32; 2]) -> (f32, f32) {
        let theta_extrap = pos * inv_freq / ff;
        let theta_interp = self.freq_scale * theta_extrap;
        let mut theta = theta_interp;
        let mut mscale = self.attn_factor;
        if self.ext_factor != 0.0 {
            let y = (i as f32 - corr[0]) / (corr[1] - corr[0]).max(0.001);
            let ramp_mix = (1.0 - y.clamp(0.0, 1.0)) * self.ext_factor;
            theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= 1.0 + 0.1 * (1.0 / self.freq_scale).ln();
        }
        let (s, c) = theta.sin_cos();
        (c * mscale, s * mscale)
    }
}

/// An operation and its parameters. Sources are stored on the node, in the order documented here.
#[derive(Debug, Clone, Copy, PartialEq, strum::EnumCount)]
pub enum Op {
    /// A leaf whose data comes from outside the graph (an input, or a parameter/weight; see the flags).
    Input,

    // ----- views: no computation, the node's layout addresses its source's storage -----
    /// `view(src)`: an arbitrary strided window (the node's layout gives ne, nb and byte offset).
    View,
    /// `reshape(src)`: same elements, new shape; the source must be contiguous.
    Reshape,
    /// `permute(src)`: source dimension `i` becomes dimension `axes[i]` of the result (ggml semantics).
    Permute {
        /// Destination axis of each source axis.
        axes: [u8; 4],
    },
    /// `transpose(src)`: swaps dimensions 0 and 1.
    Transpose,

    // ----- copies and element-wise -----
    /// `cont(src)`: a contiguous copy, same dtype.
    Cont,
    /// `cast(src)`: a contiguous copy converted to the node's dtype (floats round to nearest even;
    /// float to i32 truncates toward zero, saturating, NaN to 0; i32 to float rounds to nearest).
    Cast,
    /// `unary(src)`, see [`UnaryOp`].
    Unary(UnaryOp),
    /// `a (op) b`, see [`BinaryOp`].
    Binary(BinaryOp),
    /// `src * scale + bias`.
    Scale {
        /// Multiplier.
        scale: f32,
        /// Added after the multiplication.
        bias: f32,
    },
    /// `min(max(src, min), max)`.
    Clamp {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// `a (cmp) b` as an f32 mask, see [`CompareOp`].
    Compare(CompareOp),
    /// `where(mask, a, b)`: `a` where `mask != 0`, else `b`; `mask` and `b` broadcast to `a`.
    Where,
    /// A tensor of the node's dtype and shape with every element `value` (no sources).
    Fill {
        /// The value (may be `-inf`).
        value: f32,
    },
    /// `start + step * i0` along `ne[0]`, the same for every row (no sources; f32 or i32).
    Arange {
        /// Value at `i0 = 0`.
        start: f32,
        /// Increment per element.
        step: f32,
    },

    // ----- indexing -----
    /// `get_rows(a, ids)`: `a [ne0, ne1, ne2, ne3]`, `ids i32 [m, ne2, ne3]` gives `[ne0, m, ne2, ne3]`,
    /// row `j` being row `ids[j]` of `a` (f32 for float or quantized `a`, dequantized; i32 for i32
    /// `a`). Out-of-range ids are a run-time error on the CPU backend.
    GetRows,
    /// `set_rows(dst, values, ids)`: writes row `j` of `values [ne0, m, ne2, ne3]` into row `ids[j]`
    /// of `dst [ne0, ne1, ne2, ne3]` (converting to `dst`'s dtype), in place; the node is a view of
    /// `dst` that is ordered after the write. `ids i32 [m, ne2, ne3]`.
    SetRows,
    /// `scatter_add(base, ids, values)`: `base [n, rows..]` plus, for each `(j, row)`,
    /// `values[j, row]` added at `[ids[j, row], row]`. `ids i32 [m, rows..]`; `values` f32 of the
    /// same shape as `ids` or `[1]` (a constant). Ids outside `[0, n)` contribute nothing (-1 is the
    /// padding value). Used for token counts (penalties).
    ScatterAdd,

    // ----- linear algebra and normalisation -----
    /// `mul_mat(a, b)`: `a [k, m, ne2, ne3]` (f32/f16/bf16 or quantized: q8_0/q4_0/q4_1, usually
    /// weights), `b [k, n, ne2', ne3']` f32
    /// gives f32 `[m, n, ne2', ne3']` with `out[i, j] = sum_k a[k, i] * b[k, j]`; `a` broadcasts over
    /// the outer dimensions of `b` (ggml's rule: `ne2'` a multiple of `ne2`).
    MulMat,
    /// `rms_norm(src)`: `x / sqrt(mean(x^2) + eps)` along `ne[0]`.
    RmsNorm {
        /// Added to the mean square.
        eps: f32,
    },
    /// `rope(x, pos [, freq_factors])`: rotary position embedding of
    /// `x [head_dim, n_head, n_tokens, 1]` (f32) by `pos i32 [n_tokens]`, on the first `n_dims`
    /// entries of each head (the rest pass through), as ggml's `ggml_rope_ext`: pair `i` rotates by
    /// `theta_i = freq_scale * pos * freq_base^(-2i/n_dims) / freq_factors[i]` (the optional f32
    /// `freq_factors [>= n_dims/2]`, LLaMA 3's `rope_freqs.weight`; 1 without it), with YaRN's
    /// correction where `ext_factor != 0`, and cos/sin scaled by `attn_factor`
    /// ([`RopeParams::cos_sin`]).
    Rope(RopeParams),
    /// `soft_max(x [, mask])`: `softmax(x * scale + mask)` along `ne[0]`. The optional f32/f16 mask
    /// has `ne[0]` equal to x's, at least as many rows (`ne[1]`, extra rows unused, as ggml pads them),
    /// and broadcasts over `ne[2]`, `ne[3]`. A row that is all `-inf` gives NaN.
    SoftMax {
        /// Multiplier applied before the mask is added.
        scale: f32,
    },

    // ----- row reductions and orderings (along ne[0]) -----
    /// Sum of each row: `[1, ne1, ne2, ne3]` f32.
    SumRows,
    /// Maximum of each row: `[1, ne1, ne2, ne3]` f32 (NaN propagates).
    MaxRows,
    /// Index of the maximum of each row: `[1, ne1, ne2, ne3]` i32; ties pick the lowest index. A NaN
    /// (of either sign) ranks above `+inf` (so a row holding one gives its first NaN), and -0.0 ties
    /// +0.0; the same order as `Argsort` and `TopK`.
    Argmax,
    /// Indices that sort each row: i32 of the source's shape; ties keep index order (stable). Every
    /// NaN ranks above `+inf` (NaNs tie), -0.0 ties +0.0.
    Argsort {
        /// Direction.
        order: SortOrder,
    },
    /// Indices of the `k` largest entries of each row, ordered by value descending (ties: lower index
    /// first; every NaN ranks above `+inf`, so a row holding a NaN lists it first): i32
    /// `[k, ne1, ne2, ne3]`.
    ///
    /// `masked` (sources `x f32, bits i32 [w, rows..]`): of each row of `x` as `TokenMask` bans it
    /// (entry `t` kept where bit `t % 32` of word `t / 32` is set, else `x + -inf`), exactly
    /// `top_k(token_mask(x, bits))`, without the masked row having to exist (a grammar's mask
    /// before a top-k, fused).
    TopK {
        /// How many; `1 <= k <= ne[0]`.
        k: u32,
        /// The second source is a packed allowed-token mask the row is seen through.
        masked: bool,
    },
    /// Inclusive prefix sum of each row, f32.
    Cumsum,

    // ----- randomness -----
    /// `random_uniform(keys)`: f32 `[n, rows..]` of uniforms in `[0, 1)`; element `[i0, row]` is
    /// `philox::uniform(seed, step, philox::stream::element(stream, i0))` where `keys i32 [4, rows..]`
    /// holds, per row, the bits of `seed` (low word, high word) and `step` (low, high). See
    /// [`crate::philox`] for the exact generator.
    RandomUniform {
        /// The stream (see [`crate::philox::stream`]).
        stream: u32,
    },
    /// `categorical(logits, keys [, params | ids])`: one index per row drawn from the softmax of
    /// `logits`, i32 `[1, rows..]`. `logits` f32 `[n, rows..]`, `keys` as for
    /// [`Op::RandomUniform`]; the optional third source is either `params` f32 `[2, rows..]`,
    /// holding per row a scale `s` (an inverse temperature) and a threshold offset `off` (a min-p
    /// cut: `ln p`), as the sampler chain's `temp` and `min_p` leave a row (without `params`:
    /// `s = 1`, `off = -inf`), or with `ids` the token id of each entry, i32 `[n, rows..]` (a
    /// candidate list). With `ids` the result is the drawn entry's token id `ids[i]`, whatever it
    /// holds (an entry holding -1 gives -1, as does a bad row; a list marks an entry without a
    /// token by a `-inf` logit, which is never drawn), instead of the entry index `i`: the draw
    /// itself is the same.
    ///
    /// Per row: `m` is the row's maximum; `w_i = exp((logits_i - m) s)` (computed in f32) where
    /// `logits_i >= m + off` (that sum in f32), else 0 (a `-inf` logit has weight exactly 0); `u`
    /// is the 53-bit uniform [`crate::philox::uniform_f64`]`(seed, step,
    /// philox::stream::element(stream, 0))` and `W = sum w_i`. The result is the first index with
    /// `w_i > 0` whose inclusive running sum exceeds `u * W`; if rounding leaves none, the last
    /// index with `w_i > 0`. Sums are kept to at least 40 significant bits (f64 on the CPU, 64-bit
    /// fixed point on Vulkan, which takes rows of at most 2^23 entries so that its sums cannot
    /// overflow), so a token of probability 1e-9 is drawn with its probability: an
    /// f32 running sum over a vocabulary would lose every weight below 2^-24 of the total. A row
    /// holding a NaN or `+inf`, or no finite logit, or whose `s` is not positive (or is NaN) or
    /// whose `off` is NaN, gives -1 (a value, not an error, so one bad row does not fail a batch).
    /// `s = +inf` is the zero-temperature limit: the first index of the row maximum (float
    /// equality, so -0.0 ties +0.0), without a random number; greedy sampling with the bad-row
    /// check fused into its one pass.
    Categorical {
        /// The stream (see [`crate::philox::stream`]).
        stream: u32,
        /// The third source holds each entry's token id, and the result is the drawn entry's id.
        ids: bool,
    },

    // ----- fused sampling (family `sample`; see `docs/FUSED.md`) -----
    /// `top_k_top_p_sample(logits, top_k, params [, q])`: Ascend's `npu_top_k_top_p_sample`, with
    /// the rules of `shared/contracts/fused-ops-spec-digest.md`. `logits [V, B]` (f32, f16, bf16),
    /// `top_k i32 [1, B]`, `params f32 [2, B]` (per row `top_p`, `min_p`; `min_p = 0` is the spec's
    /// `min_ps = None`), and per the post stage `q`: qSample f32 `[V, B]`, multinomial i32 `[4, R]`
    /// (per pair seed lo, seed hi, offset lo, offset hi; row `b` uses pair `min(b, R - 1)`), none
    /// for [`crate::fused::PostSample::None`]. Per row, in the order value descending, index
    /// ascending: top-K runs iff `1 <= k <= min(V, ks)` and keeps the first `k`; the row is
    /// *sorted* iff top-K runs or `top_p < 1`; probabilities are the softmax over the top-K
    /// survivors (logits mode) or the values as stored (probability mode, never renormalised);
    /// top-P (`0 < p < 1`) keeps position `j` iff the exclusive prefix sum `<= p`, `p <= 0` keeps
    /// the first token; min-P keeps `prob >= max_prob * m` (`0 < m < 1`) or the first token
    /// (`m >= 1`). Selection: none, the first survivor in the order; qSample, the first argmax of
    /// `prob / (q[col] + eps)` with `col` the survivor's sorted position (sorted rows) or token
    /// index; multinomial, the first survivor in index order whose f64 running sum of `prob`
    /// exceeds `u * total`, `u` = [`crate::fused::multinomial_uniform`]`(seed, offset)`. Output
    /// ([`crate::fused::FusedOutput`]): the index, i32 `[1, B]`, or the filtered logits, f32
    /// `[V, B]`. A row with a NaN or `+inf` value or parameter, all `-inf` in logits mode, or a
    /// value outside `[0, 1]` in probability mode gives index -1 and an all-NaN logits row (a
    /// value, not an error, as `categorical`).
    TopKTopPSample(crate::fused::TopKTopP),
    /// `random_sample(x, params, topk)`: InfiniCore's `random_sample` on each row. `x [n, rows]`
    /// f32/f16/bf16, or with `f64_rows` i32 `[2n, rows]` holding each f64's bits (low word
    /// first); `params f32 [3, rows]` (`random`, `topp`, `temperature`), `topk i32 [1, rows]`.
    /// Result i32 `[1, rows]`. Argmax (first maximum) iff `random == 0 || topp == 0 || topk == 1
    /// || temperature == 0`; otherwise, over the order value descending, index ascending,
    /// `e_i = exp((x_(i) - x_(0)) / temperature)` and inclusive sums `c_i` (in f64), `kk = n` if
    /// `topk <= 0 || topk >= n` else `topk`, and the token at the first rank with
    /// `c_i >= random * min(topp * c_{n-1}, c_{kk-1})`. `n - 1` must fit `index` (checked when
    /// built). A row with a NaN (value or parameter), `random` outside `[0, 1)`, `topp < 0` or
    /// `temperature < 0` gives -1, as does a `+inf` or all-`-inf` row on the full path.
    RandomSample {
        /// The caller's index dtype (bounds `n`).
        index: crate::fused::IndexDType,
        /// `x` holds f64 values as i32 bit pairs.
        f64_rows: bool,
    },

    // ----- orderings (family `sort`), continued -----
    /// `top_p_mask(x, params)`: the nucleus of each row, the sampler chain's `top_p` on a whole
    /// vocabulary (llama.cpp's `top_p`) as a mask. `x` f32 `[n, rows..]`, `params` f32
    /// `[3, rows..]` holding per row a temperature `t`, the mass `p` and `min_keep`; the result
    /// has `x`'s shape: `x_i / t` for the tokens of the nucleus, `-inf` for the others.
    ///
    /// The nucleus of `l = x / t` is the shortest prefix of the row in the order value
    /// descending, index ascending whose softmax probabilities sum to at least `p`, and at least
    /// `min_keep` entries long (0 and 1 alike); the whole row if the sum never reaches `p`; `p <= 0`
    /// keeps `max(min_keep, 1)`, `p >= 1` everything. The decision at the boundary follows
    /// llama.cpp's `f32` arithmetic (`expf(l - max)` summed in array order, then the sorted
    /// probabilities added in `f32`): rows of at most 4096 entries are decided in it, longer ones
    /// in `f64` unless within 1e-5 of the mass from `p`, where they are replayed in it
    /// (`kernels::nucleus` on the CPU). A row holding a NaN or `+inf`, or no finite value, is
    /// passed through as `x / t` (its consumer's check sees it); a row whose `t` is not positive
    /// and finite, or whose `p` or `min_keep` is NaN, or `min_keep < 0`, comes out all NaN.
    TopPMask,

    // ----- randomness (family `random`), continued -----
    /// `spec_verify(logits, keys [, aux])`: speculative verification of one draft token per row,
    /// as [`Op::Categorical`] draws but with a draft. `logits` f32 `[n, rows..]`; `keys` i32
    /// `[5, rows..]` holding per row the seed and step of [`Op::RandomUniform`]'s keys, then the
    /// draft token `d`; `aux`: without `ids`, the optional `params` f32 `[2, rows..]` of
    /// `categorical` (scale `s`, threshold offset `off`); with `ids`, i32 `[n, rows..]`, the token
    /// each entry holds (a candidate list; -1 for none). Result i32 `[1, rows..]`: the chosen entry
    /// index, or with `ids` the chosen entry's token id (`ids[e]`, as [`Op::Categorical`] with
    /// `ids`; -1 for a bad row).
    ///
    /// Per row, with `categorical`'s weights `w_i` and total `W`: the draft entry `e` is `d`
    /// (without `ids`; none if `d` is outside `[0, n)`) or the first entry whose id is `d`. No
    /// draft entry: exactly `categorical`'s draw on `stream`. Otherwise, with the 53-bit uniforms
    /// `a` of [`crate::philox::stream::SPECULATIVE`] and `u` of `stream` (both element 0 of the
    /// row's key): `e` if `a W < w_e` (the draft token is accepted with probability
    /// `min(1, p(e) / q(e))` for a draft drawn deterministically, `q(e) = 1`); else the draw from
    /// the residual `max(0, p - q)`, i.e. `categorical`'s draw with `w_e` set to 0 and target
    /// `u (W - w_e)` (`e` itself if nothing else has weight). The result is distributed as `p`
    /// whatever the draft. `s = +inf`: the first maximum (greedy verification: the draft is
    /// accepted iff it is the target's greedy token). Bad rows give -1 as in `categorical`.
    SpecVerify {
        /// The stream of the draw (see [`crate::philox::stream`]).
        stream: u32,
        /// `aux` holds each entry's token id.
        ids: bool,
    },

    // ----- randomness (family `random`), continued -----
    /// `spec_verify_sampled(logits, keys, q_ids, q_probs [, aux])`: [`Op::SpecVerify`] for a
    /// draft token drawn from a distribution `q` (a sampled draft), given per row as `m` pairs:
    /// `q_ids` i32 `[m, rows..]` (token ids; an id outside the row's tokens, e.g. -1 padding, has
    /// no entry) and `q_probs` f32 `[m, rows..]` (weights, normalised here: `q_j / Q` with `Q`
    /// their f64 sum in list order, as `sampling::speculative::verify` normalises
    /// `DraftProbs::Sampled`; a token listed twice has the sum of its entries). `logits`, `keys`
    /// (the fifth word the draft token `d`, -1 for none) and `aux` are as for
    /// [`Op::SpecVerify`]; without `ids` token `t` is entry `t`, with `ids` the first entry
    /// holding `t`. Result i32 `[1, rows..]` as [`Op::SpecVerify`].
    ///
    /// Per row, with `categorical`'s weights `w_i` and total `W`, and `q(i)` the normalised
    /// draft probability of entry `i`'s token: `d < 0` is exactly `categorical`'s draw on
    /// `stream`, `q` unread. Otherwise `q` is checked (every `q_j` finite and `>= 0`, `Q > 0`, else
    /// the row gives -1), and with the uniforms `a` ([`crate::philox::stream::SPECULATIVE`]) and
    /// `u` (`stream`), both element 0 of the row's key: the draft entry `e` (if `d` has one) is
    /// the result if `a q(d) W < w_e` (accepted with probability `min(1, p(d) / q(d))`; the host
    /// refuses `q(d) = 0`, as the CPU verifier does, and the op then accepts any `w_e > 0`, the
    /// limit of the ratio); else the draw from the residual `r_i = max(0, w_i - q(i) W)` in entry
    /// order: the first entry with `r_i > 0` whose running sum exceeds `u R`, `R = sum r_i` (the
    /// last entry with `r_i > 0` if rounding leaves none). A draft token without an entry (outside
    /// the vocabulary or the list, or masked to weight 0) is rejected, and the residual still
    /// takes `q` off the other entries. Where `R` is 0 (`q` covers `p`, so that a rejection cannot
    /// happen in exact arithmetic) the draw is `categorical`'s from `p`, as the CPU verifier's.
    /// `s = +inf` (greedy) gives the first maximum, as [`Op::SpecVerify`]. Bad logits rows give -1.
    SpecVerifySampled {
        /// The stream of the draw (see [`crate::philox::stream`]).
        stream: u32,
        /// `aux` holds each entry's token id.
        ids: bool,
    },
    // ----- list stages (family `list_filter`) -----
    /// `list_filter(vals, params)`: the sampler chain's list stages `top_p`, `min_p` and `temp`
    /// (llama.cpp's, as the CPU chain applies them to a candidate list) in one node, in the order
    /// of the attribute. `vals` f32 `[k, rows..]` (contiguous rows, `k <=`
    /// [`crate::ListStages::MAX_LEN`]): each row a candidate list in list order, as `top_k` leaves
    /// it (value descending); `params` f32 `[2 s, rows..]`: per row, stage `j` reads rows `2 j`
    /// and `2 j + 1`. Result f32 `[k, rows..]`: the list after the stages, an entry a stage removed
    /// `-inf`, the temperatures divided in. Stage by stage, on the row `v` as the previous stage
    /// left it (entries removed earlier are `-inf`, so they add nothing to a sum):
    ///
    /// * `top_p(p, min_keep)`: nothing if `p >= 1`; else llama.cpp's `f32` arithmetic:
    ///   `max = max v`, `sum = sum expf(v_i - max)` added in list order, `q_i = expf(v_i - max) / sum`,
    ///   and the running `f32` sum of `q` in list order: entries after the first `i` with
    ///   `sum_{j <= i} q_j >= p` and `i + 1 >= min_keep` become `-inf` (none if it never holds);
    /// * `min_p(ln_p, min_keep)`: `thr = v_0 + ln_p` (`f32`); walking from position 1, the first
    ///   position `i >= min_keep` with `v_i < thr` and every entry after it become `-inf`;
    /// * `temp(t, _)`: every entry divided by `t` (`f32`, IEEE: `-inf / t` stays `-inf` for `t > 0`).
    ///
    /// `min_keep` counts entries (0 and 1 alike; a fraction rounds down). The cuts are prefixes of
    /// the list order, so on a sorted list they are the chain's truncations. A row whose `vals` or
    /// parameters hold a NaN comes out all NaN (a bad row: `top_k`'s check makes a NaN or `+inf`
    /// logits row's list NaN, and a draw from it gives -1). On the CPU these are the sampler
    /// chain's own operations (`kernels::llama_f32`), bit for bit; a backend with another `exp`
    /// may place a top-p cut differently where the running sum at the cut lies within its
    /// rounding of `p` (the conformance suite's `Cmp::ListFilter` allows it only there).
    ListFilter(crate::list_filter::ListStages),
    // ----- penalties on whole rows (family `penalize`) -----
    /// `penalize(x, counts, params)`: llama.cpp's repetition, frequency and presence penalties on
    /// whole rows, one pass. `x` and `counts` f32 `[n, rows..]` (the same shape; `counts` holds each
    /// token's count), `params` f32 `[3, rows..]` holding per row `repeat`, `freq` and `present`;
    /// gives f32 `[n, rows..]`: where `counts > 0`, `(x > 0 ? x / repeat : x * repeat) - (counts *
    /// freq + present)`, each operation rounded to f32 as the CPU sampler does; elsewhere `x`.
    Penalize,
    // ----- allowed-token masks (family `token_mask`) -----
    /// `token_mask(x, bits [, ids])`: bans every token a packed per-row bitmask does not allow
    /// (a grammar's or a schema's allowed set), one pass. `x` f32 `[m, rows..]`: per row `m`
    /// entries, the logits in vocabulary order (entry `i` is token `i`) or, with `ids`, a candidate
    /// list's values whose token ids are `ids` i32 `[m, rows..]` (the shape of `x`; -1 pads and no
    /// negative id is a token). `bits` i32 `[w, rows..]`, any `w >= 1`, each word read as the 32
    /// bits of a `u32`: token `t` is allowed iff `0 <= t < 32 w` and bit `t % 32` (bit 0 the least
    /// significant) of word `t / 32` of the row is set; so tokens at or past `32 w` are banned and
    /// words past the last token are not read. Gives f32 `[m, rows..]`: `x` where the entry's token
    /// is allowed, else `x + -inf` in f32 (a finite value or `-inf` becomes `-inf`; a NaN or `+inf`
    /// becomes NaN, so that a bad row stays detectable, as the CPU constraint samplers' bans in
    /// `sampling` leave it). Allowed entries are copied bit for bit.
    TokenMask {
        /// A third source holds each entry's token id.
        ids: bool,
    },
}

impl Op {
    /// The op's name in dumps and fixtures.
    pub const fn name(&self) -> &'static str {
        match self {
            Op::Input => "leaf",
            Op::View => "view",
            Op::Reshape => "reshape",
            Op::Permute { .. } => "permute",
            Op::Transpose => "transpose",
            Op::Cont => "cont",
            Op::Cast => "cast",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Scale { .. } => "scale",
            Op::Clamp { .. } => "clamp",
            Op::Compare(c) => c.name(),
            Op::Where => "where",
            Op::Fill { .. } => "fill",
            Op::Arange { .. } => "arange",
            Op::GetRows => "get_rows",
            Op::SetRows => "set_rows",
            Op::ScatterAdd => "scatter_add",
            Op::MulMat => "mul_mat",
            Op::RmsNorm { .. } => "rms_norm",
            Op::Rope(_) => "rope",
            Op::SoftMax { .. } => "soft_max",
            Op::SumRows => "sum_rows",
            Op::MaxRows => "max_rows",
            Op::Argmax => "argmax",
            Op::Argsort { .. } => "argsort",
            Op::TopK { .. } => "top_k",
            Op::Cumsum => "cumsum",
            Op::RandomUniform { .. } => "random_uniform",
            Op::Categorical { .. } => "categorical",
            Op::TopKTopPSample(_) => "top_k_top_p_sample",
            Op::RandomSample { .. } => "random_sample",
            Op::TopPMask => "top_p_mask",
            Op::SpecVerify { .. } => "spec_verify",
            Op::SpecVerifySampled { .. } => "spec_verify_sampled",
            Op::ListFilter(_) => "list_filter",
            Op::Penalize => "penalize",
            Op::TokenMask { .. } => "token_mask",
        }
    }

    /// True for ops that compute nothing: their node addresses (part of) a source's storage.
    pub const fn is_view(&self) -> bool {
        matches!(self, Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose)
    }

    /// For ops that write into a source's storage, the index of that source (its storage is the
    /// node's storage).
    pub const fn inplace_src(&self) -> Option<usize> {
        match self {
            Op::SetRows => Some(0),
            _ => None,
        }
    }

    /// True for ops whose node owns no data of its own (views and in-place ops).
    pub const fn aliases_src(&self) -> bool {
        self.is_view() || self.inplace_src().is_some()
    }

    /// The parameters as `key=value` pairs, in a fixed order (used by dumps and the fixture format).
    pub fn params(&self) -> Vec<(&'static str, String)> {
        fn f(x: f32) -> String {
            format_f32(x)
        }
        match *self {
            Op::Permute { axes } => vec![("axes", format!("[{}, {}, {}, {}]", axes[0], axes[1], axes[2], axes[3]))],
            Op::Scale { scale, bias } => vec![("scale", f(scale)), ("bias", f(bias))],
            Op::Clamp { min, max } => vec![("min", f(min)), ("max", f(max))],
            Op::Fill { value } => vec![("value", f(value))],
            Op::Arange { start, step } => vec![("start", f(start)), ("step", f(step))],
            Op::RmsNorm { eps } => vec![("eps", f(eps))],
            // YaRN's words only when set, so that dumps of plain RoPE read as before they existed.
            Op::Rope(p) => {
                let mut v = vec![
                    ("n_dims", p.n_dims.to_string()),
                    ("mode", p.mode.name().to_string()),
                    ("freq_base", f(p.freq_base)),
                    ("freq_scale", f(p.freq_scale)),
                ];
                if p.has_yarn() {
                    v.extend([
                        ("ext_factor", f(p.ext_factor)),
                        ("attn_factor", f(p.attn_factor)),
                        ("beta_fast", f(p.beta_fast)),
                        ("beta_slow", f(p.beta_slow)),
                        ("n_ctx_orig", p.n_ctx_orig.to_string()),
                    ]);
                }
                v
            }
            Op::SoftMax { scale } => vec![("scale", f(scale))],
            Op::Argsort { order } => vec![("order", order.name().to_string())],
            Op::TopK { k, masked: false } => vec![("k", k.to_string())],
            Op::TopK { k, masked: true } => vec![("k", k.to_string()), ("masked", "true".to_string())],
            Op::RandomUniform { stream } => vec![("stream", stream.to_string())],
            // `ids` only when set, so that dumps of plain draws read as before the mode existed.
            Op::Categorical { stream, ids: false } => vec![("stream", stream.to_string())],
            Op::Categorical { stream, ids: true } => vec![("stream", stream.to_string()), ("ids", "true".to_string())],
            Op::TopKTopPSample(a) => vec![
                ("eps", f(a.eps)),
                ("ks_max", a.ks_max.to_string()),
                ("top_k_guess", a.top_k_guess.to_string()),
                ("input_is_logits", a.input_is_logits.to_string()),
                ("post", a.post.name().to_string()),
                ("output", a.output.name().to_string()),
            ],
            Op::RandomSample { index, f64_rows } => {
                vec![("index", index.name().to_string()), ("f64_rows", f64_rows.to_string())]
            }
            Op::SpecVerify { stream, ids } | Op::SpecVerifySampled { stream, ids } => {
                vec![("stream", stream.to_string()), ("ids", ids.to_string())]
            }
            Op::ListFilter(stages) => vec![("stages", stages.to_string())],
            // `ids` only when set, as for `categorical`.
            Op::TokenMask { ids: false } => vec![],
            Op::TokenMask { ids: true } => vec![("ids", "true".to_string())],
            Op::Input
            | Op::TopPMask
            | Op::Penalize
            | Op::View
            | Op::Reshape
            | Op::Transpose
            | Op::Cont
            | Op::Cast
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Where
            | Op::GetRows
            | Op::SetRows
            | Op::ScatterAdd
            | Op::MulMat
            | Op::SumRows
            | Op::MaxRows
            | Op::Argmax
            | Op::Cumsum => vec![],
        }
    }

    /// Feeds the op's identity (variant and parameter bits) to a hasher.
    pub(crate) fn hash_into(&self, h: &mut crate::hash::Fnv64) {
        h.write_str(self.name());
        for (k, v) in self.params() {
            h.write_str(k);
            h.write_str(&v);
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        let params = self.params();
        if !params.is_empty() {
            f.write_str("{")?;
            for (i, (k, v)) in params.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{k}={v}")?;
            }
            f.write_str("}")?;
        }
        Ok(())
    }
}

/// Formats an f32 so that it parses back to the same bits (`inf`, `-inf`, `nan` spelled out).
pub fn format_f32(x: f32) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x == f32::INFINITY {
        "inf".into()
    } else if x == f32::NEG_INFINITY {
        "-inf".into()
    } else {
        // Rust's Display for f32 is the shortest string that round-trips.
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_includes_params() {
        assert_eq!(Op::TopK { k: 40, masked: false }.to_string(), "top_k{k=40}");
        assert_eq!(Op::TopK { k: 40, masked: true }.to_string(), "top_k{k=40, masked=true}");
        assert_eq!(Op::Binary(BinaryOp::Add).to_string(), "add");
        assert_eq!(Op::Scale { scale: 0.5, bias: f32::NEG_INFINITY }.to_string(), "scale{scale=0.5, bias=-inf}");
        assert_eq!(format_f32(1e-6), "0.000001");
        assert_eq!(format_f32(0.1).parse::<f32>().unwrap(), 0.1);
    }

    #[test]
    fn view_and_inplace_classification() {
        assert!(Op::Transpose.is_view() && Op::Reshape.is_view());
        assert!(!Op::Cont.is_view());
        assert_eq!(Op::SetRows.inplace_src(), Some(0));
        assert!(Op::SetRows.aliases_src() && !Op::Cumsum.aliases_src());
    }
}
