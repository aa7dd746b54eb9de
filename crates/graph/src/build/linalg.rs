//! Linear algebra and normalisation: `mul_mat`, `rms_norm`, `rope`, `soft_max`.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::node::NodeId;
use crate::op::{Op, RopeMode, RopeParams};
use crate::shape::Shape;

use super::R;

impl Graph {
    /// `mul_mat(a, b)`, see [`Op::MulMat`].
    pub fn mul_mat(&mut self, a: NodeId, b: NodeId) -> R {
        const OP: &str = "mul_mat";
        let na = self.quant_src(OP, "a", a)?.clone();
        if !na.dtype.is_float() && !na.dtype.is_quantized() {
            return Err(self.err(OP, format!("a {} must be f32, f16, bf16 or quantized", self.describe(a))));
        }
        let nb = self.float_src(OP, "b", b)?.clone();
        self.rows_src(OP, "b", b)?;
        if nb.dtype != DType::F32 {
            return Err(self.err(OP, format!("b {} must be f32", self.describe(b))));
        }
        let (x, y) = (na.layout.ne, nb.layout.ne);
        if x[0] != y[0] {
            return Err(self.err(
                OP,
                format!(
                    "inner dimensions differ: a {} has ne[0] = {}, b {} has ne[0] = {}",
                    self.describe(a),
                    x[0],
                    self.describe(b),
                    y[0]
                ),
            ));
        }
        if !y[2].is_multiple_of(x[2]) || !y[3].is_multiple_of(x[3]) {
            return Err(self.err(
                OP,
                format!(
                    "a {} does not broadcast over the batch dimensions of b {}",
                    self.describe(a),
                    self.describe(b)
                ),
            ));
        }
        self.new_node(Op::MulMat, &[a, b], DType::F32, Shape([x[1], y[1], y[2], y[3]]))
    }

    /// `x / sqrt(mean(x^2) + eps)` along `ne[0]`.
    pub fn rms_norm(&mut self, src: NodeId, eps: f32) -> R {
        const OP: &str = "rms_norm";
        self.float_src(OP, "source", src)?;
        let ne = self.rows_src(OP, "source", src)?.layout.ne;
        if !(eps >= 0.0 && eps.is_finite()) {
            return Err(self.err(OP, format!("eps {eps} must be finite and >= 0")));
        }
        self.new_node(Op::RmsNorm { eps }, &[src], DType::F32, ne)
    }

    /// Plain rotary position embedding (no frequency factors, no YaRN), see [`Op::Rope`].
    pub fn rope(&mut self, x: NodeId, pos: NodeId, n_dims: u32, mode: RopeMode, freq_base: f32, freq_scale: f32) -> R {
        self.rope_ext(x, pos, None, RopeParams::new(n_dims, mode, freq_base, freq_scale))
    }

    /// Rotary position embedding with ggml's `ggml_rope_ext` parameters and optional per-pair
    /// frequency factors (f32, `ne[0] >= n_dims / 2`, one row), see [`Op::Rope`].
    pub fn rope_ext(&mut self, x: NodeId, pos: NodeId, freq_factors: Option<NodeId>, p: RopeParams) -> R {
        const OP: &str = "rope";
        let nx = self.rows_src(OP, "x", x)?.clone();
        let np = self.src(OP, pos)?.clone();
        if nx.dtype != DType::F32 {
            return Err(self.err(OP, format!("x {} must be f32", self.describe(x))));
        }
        if np.dtype != DType::I32
            || np.layout.ne.0[1..] != [1, 1, 1]
            || np.layout.ne[0] != nx.layout.ne[2]
            || nx.layout.ne[3] != 1
        {
            return Err(self.err(
                OP,
                format!(
                    "pos {} must be i32 [n_tokens] for x {} ([head_dim, n_head, n_tokens])",
                    self.describe(pos),
                    self.describe(x)
                ),
            ));
        }
        let n_dims = p.n_dims;
        if n_dims == 0 || !n_dims.is_multiple_of(2) || n_dims as usize > nx.layout.ne[0] {
            return Err(self
                .err(OP, format!("n_dims {n_dims} must be even, positive and at most head_dim {}", nx.layout.ne[0])));
        }
        let (freq_base, freq_scale) = (p.freq_base, p.freq_scale);
        if !(freq_base > 0.0 && freq_base.is_finite() && freq_scale.is_finite() && freq_scale > 0.0) {
            return Err(
                self.err(OP, format!("freq_base {freq_base} and freq_scale {freq_scale} must be finite and positive"))
            );
        }
        if ![p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow].iter().all(|v| v.is_finite()) {
            return Err(self.err(
                OP,
                format!(
                    "ext_factor {}, attn_factor {}, beta_fast {} and beta_slow {} must be finite",
                    p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow
                ),
            ));
        }
        let mut srcs = vec![x, pos];
        if let Some(ff) = freq_factors {
            let nf = self.src(OP, ff)?.clone();
            if nf.dtype != DType::F32
                || nf.layout.ne.0[1..] != [1, 1, 1]
                || nf.layout.ne[0] < n_dims as usize / 2
                || !nf.layout.rows_contiguous(nf.dtype)
            {
                return Err(self.err(
                    OP,
                    format!(
                        "freq_factors {} must be f32 [>= n_dims/2 = {}], contiguous",
                        self.describe(ff),
                        n_dims / 2
                    ),
                ));
            }
            srcs.push(ff);
        }
        let ne = nx.layout.ne;
        self.new_node(Op::Rope(p), &srcs, DType::F32, ne)
    }

    /// `softmax(x * scale + mask)` along `ne[0]`, see [`Op::SoftMax`].
    pub fn soft_max(&mut self, x: NodeId, mask: Option<NodeId>, scale: f32) -> R {
        const OP: &str = "soft_max";
        self.float_src(OP, "x", x)?;
        self.rows_src(OP, "x", x)?;
        if !scale.is_finite() {
            return Err(self.err(OP, format!("scale {scale} must be finite")));
        }
        let ne = self.node(x).layout.ne;
        let mut srcs = vec![x];
        if let Some(m) = mask {
            let nm = self.float_src(OP, "mask", m)?.clone();
            self.rows_src(OP, "mask", m)?;
            if nm.dtype == DType::BF16 {
                return Err(self.err(OP, format!("mask {} must be f32 or f16", self.describe(m))));
            }
            let mn = nm.layout.ne;
            if mn[0] != ne[0] || mn[1] < ne[1] || !ne[2].is_multiple_of(mn[2]) || !ne[3].is_multiple_of(mn[3]) {
                return Err(self.err(
                    OP,
                    format!(
                        "mask {} must be [{}, >= {}, dividing {}, dividing {}] for x {}",
                        self.describe(m),
                        ne[0],
                        ne[1],
                        ne[2],
                        ne[3],
                        self.describe(x)
                    ),
                ));
            }
            srcs.push(m);
        }
        self.new_node(Op::SoftMax { scale }, &srcs, DType::F32, ne)
    }
}
