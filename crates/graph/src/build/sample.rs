//! The fused sampling ops (`top_k_top_p_sample`, `random_sample`; family `sample`).

use crate::dtype::DType;
use crate::fused::{FusedOutput, IndexDType, PostSample, TopKTopP};
use crate::graph::Graph;
use crate::node::NodeId;
use crate::op::Op;

use super::R;

/// Rows longer than this cannot be indexed by the i32 results.
const MAX_ROW: usize = i32::MAX as usize;

impl Graph {
    /// Ascend's `npu_top_k_top_p_sample` on each row of `logits [V, B]`: `top_k i32 [1, B]`,
    /// `params f32 [2, B]` (top_p, min_p), and `q` as the post stage needs it (qSample: f32
    /// `[V, B]`; multinomial: i32 `[4, R]` keys; none: absent). See [`Op::TopKTopPSample`].
    pub fn top_k_top_p_sample(
        &mut self,
        logits: NodeId,
        top_k: NodeId,
        params: NodeId,
        q: Option<NodeId>,
        attrs: TopKTopP,
    ) -> R {
        const OP: &str = "top_k_top_p_sample";
        self.float_src(OP, "logits", logits)?;
        let nl = self.rows_src(OP, "logits", logits)?.clone();
        let [v, _, n2, n3] = nl.layout.ne.0;
        if n2 != 1 || n3 != 1 {
            return Err(self.err(OP, format!("logits {} must be 2-D [V, B]", self.describe(logits))));
        }
        if v > MAX_ROW {
            return Err(self.err(OP, format!("logits {} has rows longer than 2^31 - 1", self.describe(logits))));
        }
        if attrs.ks_max == 0 {
            return Err(self.err(OP, "ks_max must be positive"));
        }
        self.per_row_src(OP, "top_k", top_k, DType::I32, 1, logits)?;
        self.per_row_src(OP, "params (top_p, min_p)", params, DType::F32, 2, logits)?;
        let mut srcs = vec![logits, top_k, params];
        match (attrs.post, q) {
            (PostSample::None, None) => {}
            (PostSample::None, Some(q)) => {
                return Err(self.err(OP, format!("post stage none takes no q, got {}", self.describe(q))));
            }
            (post, None) => {
                return Err(self.err(OP, format!("post stage {} needs q (resolve it to none without q)", post.name())));
            }
            (PostSample::QSample, Some(q)) => {
                self.per_row_src(OP, "q (qSample noise)", q, DType::F32, v, logits)?;
                srcs.push(q);
            }
            (PostSample::Multinomial, Some(q)) => {
                let nq = self.rows_src(OP, "q", q)?;
                let ne = nq.layout.ne.0;
                if nq.dtype != DType::I32 || ne[0] != 4 || ne[2] != 1 || ne[3] != 1 {
                    return Err(self.err(
                        OP,
                        format!(
                            "q {} must be i32 [4, R] (seed lo, seed hi, offset lo, offset hi per pair)",
                            self.describe(q)
                        ),
                    ));
                }
                srcs.push(q);
            }
        }
        let (dtype, ne0) = match attrs.output {
            FusedOutput::Index => (DType::I32, 1),
            FusedOutput::Logits => (DType::F32, v),
        };
        let mut ne = nl.layout.ne;
        ne.0[0] = ne0;
        self.new_node(Op::TopKTopPSample(attrs), &srcs, dtype, ne)
    }

    /// InfiniCore's `random_sample` on each row of `x [n, rows..]` (f32, f16, bf16; or with
    /// `f64_rows` i32 `[2n, rows..]` bit pairs of f64 values), `params f32 [3, rows..]` (random,
    /// topp, temperature), `topk i32 [1, rows..]`; i32 `[1, rows..]`. `n - 1` must fit `index`.
    /// See [`Op::RandomSample`].
    pub fn random_sample(&mut self, x: NodeId, params: NodeId, topk: NodeId, index: IndexDType, f64_rows: bool) -> R {
        const OP: &str = "random_sample";
        let nx = self.rows_src(OP, "x", x)?.clone();
        let n = if f64_rows {
            if nx.dtype != DType::I32 || nx.layout.ne[0] % 2 != 0 {
                return Err(self.err(
                    OP,
                    format!("x {} must be i32 [2n, rows..] (f64 bit pairs) with f64_rows", self.describe(x)),
                ));
            }
            nx.layout.ne[0] / 2
        } else {
            self.float_src(OP, "x", x)?;
            nx.layout.ne[0]
        };
        if n > MAX_ROW {
            return Err(self.err(OP, format!("x {} has rows longer than 2^31 - 1", self.describe(x))));
        }
        if (n - 1) as u64 > index.max() {
            return Err(self.err(
                OP,
                format!(
                    "index overflow: {n} entries need indices up to {}, above the {index} maximum {}",
                    n - 1,
                    index.max()
                ),
            ));
        }
        self.per_row_src(OP, "params (random, topp, temperature)", params, DType::F32, 3, x)?;
        self.per_row_src(OP, "topk", topk, DType::I32, 1, x)?;
        let mut ne = nx.layout.ne;
        ne.0[0] = 1;
        self.new_node(Op::RandomSample { index, f64_rows }, &[x, params, topk], DType::I32, ne)
    }
}
