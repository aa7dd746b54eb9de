//! Row reductions and orderings along `ne[0]` (`sum_rows`, `max_rows`, `argmax`, `argsort`, `top_k`,
//! `top_p_mask`, `cumsum`) and randomness (`random_uniform`, `categorical`).

use crate::dtype::DType;
use crate::graph::Graph;
use crate::node::NodeId;
use crate::op::{Op, SortOrder};

use super::R;

impl Graph {
    fn row_op(&mut self, op: Op, src: NodeId, dtype: DType, ne0: usize) -> R {
        let name = op.name();
        self.float_src(name, "source", src)?;
        self.rows_src(name, "source", src)?;
        let mut ne = self.node(src).layout.ne;
        ne.0[0] = ne0;
        self.new_node(op, &[src], dtype, ne)
    }

    /// Row sums `[1, ne1, ne2, ne3]`.
    pub fn sum_rows(&mut self, src: NodeId) -> R {
        self.row_op(Op::SumRows, src, DType::F32, 1)
    }

    /// Row maxima `[1, ne1, ne2, ne3]`.
    pub fn max_rows(&mut self, src: NodeId) -> R {
        self.row_op(Op::MaxRows, src, DType::F32, 1)
    }

    /// Index of each row's maximum, i32 `[1, ne1, ne2, ne3]`.
    pub fn argmax(&mut self, src: NodeId) -> R {
        self.row_op(Op::Argmax, src, DType::I32, 1)
    }

    /// Sorting permutation of each row, i32, stable.
    pub fn argsort(&mut self, src: NodeId, order: SortOrder) -> R {
        let ne0 = self.src("argsort", src)?.layout.ne[0];
        self.row_op(Op::Argsort { order }, src, DType::I32, ne0)
    }

    /// Indices of the `k` largest of each row, by value descending, i32 `[k, ...]`.
    pub fn top_k(&mut self, src: NodeId, k: usize) -> R {
        let ne0 = self.src("top_k", src)?.layout.ne[0];
        if k == 0 || k > ne0 {
            return Err(self.err("top_k", format!("k = {k} must be in 1..={ne0} for {}", self.describe(src))));
        }
        self.row_op(Op::TopK { k: k as u32, masked: false }, src, DType::I32, k)
    }

    /// Indices of the `k` largest of each row of `x` (f32) seen through the packed allowed-token
    /// mask `bits i32 [w, rows..]` (as [`Graph::token_mask`] bans: exactly
    /// `top_k(token_mask(x, bits), k)`), i32 `[k, ...]`: see [`Op::TopK`].
    pub fn top_k_masked(&mut self, x: NodeId, bits: NodeId, k: usize) -> R {
        const OP: &str = "top_k";
        let nx = self.rows_src(OP, "x", x)?;
        if nx.dtype != DType::F32 {
            return Err(self.err(OP, format!("x {} must be f32 (masked)", self.describe(x))));
        }
        let mut ne = nx.layout.ne;
        let ne0 = ne.0[0];
        if k == 0 || k > ne0 {
            return Err(self.err(OP, format!("k = {k} must be in 1..={ne0} for {}", self.describe(x))));
        }
        let w = self.rows_src(OP, "bits", bits)?.layout.ne[0];
        self.per_row_src(OP, "bits (32 tokens a word)", bits, DType::I32, w, x)?;
        ne.0[0] = k;
        self.new_node(Op::TopK { k: k as u32, masked: true }, &[x, bits], DType::I32, ne)
    }

    /// The nucleus of each row of `x` (f32) as a mask, with `params f32 [3, rows..]` holding per
    /// row the temperature, `p` and `min_keep`: see [`Op::TopPMask`].
    pub fn top_p_mask(&mut self, x: NodeId, params: NodeId) -> R {
        const OP: &str = "top_p_mask";
        let nx = self.rows_src(OP, "x", x)?;
        if nx.dtype != DType::F32 {
            return Err(self.err(OP, format!("x {} must be f32", self.describe(x))));
        }
        let ne = nx.layout.ne;
        self.per_row_src(OP, "params (t, p, min_keep)", params, DType::F32, 3, x)?;
        self.new_node(Op::TopPMask, &[x, params], DType::F32, ne)
    }

    /// Inclusive prefix sums along `ne[0]`.
    pub fn cumsum(&mut self, src: NodeId) -> R {
        let ne0 = self.src("cumsum", src)?.layout.ne[0];
        self.row_op(Op::Cumsum, src, DType::F32, ne0)
    }

    // ----- randomness -----

    /// `n` uniforms per row keyed by `keys i32 [4, rows..]`, see [`Op::RandomUniform`].
    pub fn random_uniform(&mut self, keys: NodeId, n: usize, stream: u32) -> R {
        const OP: &str = "random_uniform";
        let nk = self.rows_src(OP, "keys", keys)?.clone();
        if nk.dtype != DType::I32 || nk.layout.ne[0] != 4 {
            return Err(self.err(
                OP,
                format!("keys {} must be i32 [4, rows..] (seed lo, seed hi, step lo, step hi)", self.describe(keys)),
            ));
        }
        if n == 0 || n as u64 > u64::from(u32::MAX) {
            return Err(self.err(OP, format!("n = {n} must be in 1..2^32")));
        }
        let mut ne = nk.layout.ne;
        ne.0[0] = n;
        self.new_node(Op::RandomUniform { stream }, &[keys], DType::F32, ne)
    }

    /// One index per row drawn from the softmax of `logits` with the random stream `stream` keyed by
    /// `keys i32 [4, rows..]`, optionally scaled and cut by `params f32 [2, rows..]`, i32
    /// `[1, rows..]`; with `ids i32 [n, rows..]` (a candidate list's token ids; not together with
    /// `params`) the drawn entry's token id instead of its index. See [`Op::Categorical`].
    pub fn categorical(
        &mut self,
        logits: NodeId,
        keys: NodeId,
        params: Option<NodeId>,
        ids: Option<NodeId>,
        stream: u32,
    ) -> R {
        const OP: &str = "categorical";
        if let (Some(p), Some(i)) = (params, ids) {
            return Err(self.err(
                OP,
                format!(
                    "takes params {} or ids {}, not both (a list is drawn at scale 1 without a cut)",
                    self.describe(p),
                    self.describe(i)
                ),
            ));
        }
        let ne = self.draw_checks(OP, logits, keys, "seed lo, seed hi, step lo, step hi", params)?;
        if let Some(i) = ids {
            self.per_row_src(OP, "ids", i, DType::I32, self.node(logits).layout.ne[0], logits)?;
        }
        let srcs: Vec<NodeId> = [logits, keys].into_iter().chain(params).chain(ids).collect();
        self.new_node(Op::Categorical { stream, ids: ids.is_some() }, &srcs, DType::I32, ne)
    }

    /// Speculative verification of one draft token per row: `logits f32 [n, rows..]`, `keys i32
    /// [5, rows..]` (seed lo, seed hi, step lo, step hi, draft token), and either the optional
    /// `params f32 [2, rows..]` of [`Graph::categorical`] or, with `ids`, the token ids `i32 [n,
    /// rows..]` of a candidate list; i32 `[1, rows..]`, see [`Op::SpecVerify`].
    pub fn spec_verify(&mut self, logits: NodeId, keys: NodeId, aux: SpecAux, stream: u32) -> R {
        const OP: &str = "spec_verify";
        let (ne, params, ids) = self.spec_checks(OP, logits, keys, aux)?;
        let srcs: Vec<NodeId> = [logits, keys].into_iter().chain(params).chain(ids).collect();
        self.new_node(Op::SpecVerify { stream, ids: ids.is_some() }, &srcs, DType::I32, ne)
    }

    /// Speculative verification of one draft token per row drawn from a distribution `q`:
    /// [`Graph::spec_verify`]'s `logits`, `keys` and `aux`, and the draft's distribution per row
    /// as `q_ids i32 [m, rows..]` (token ids) and `q_probs f32 [m, rows..]` (their weights), any
    /// `m >= 1`; i32 `[1, rows..]`, see [`Op::SpecVerifySampled`].
    pub fn spec_verify_sampled(
        &mut self,
        logits: NodeId,
        keys: NodeId,
        q_ids: NodeId,
        q_probs: NodeId,
        aux: SpecAux,
        stream: u32,
    ) -> R {
        const OP: &str = "spec_verify_sampled";
        let (ne, params, ids) = self.spec_checks(OP, logits, keys, aux)?;
        let m = self.src(OP, q_ids)?.layout.ne[0];
        if m == 0 {
            return Err(self.err(OP, format!("q_ids {} must have at least one entry per row", self.describe(q_ids))));
        }
        self.per_row_src(OP, "q_ids", q_ids, DType::I32, m, logits)?;
        self.per_row_src(OP, "q_probs", q_probs, DType::F32, m, logits)?;
        let srcs: Vec<NodeId> = [logits, keys, q_ids, q_probs].into_iter().chain(params).chain(ids).collect();
        self.new_node(Op::SpecVerifySampled { stream, ids: ids.is_some() }, &srcs, DType::I32, ne)
    }

    /// The checks of a speculative verification's `logits`, `keys` and `aux` (see
    /// [`Graph::spec_verify`]): the result's shape, the optional `params` and `ids`.
    fn spec_checks(
        &self,
        op: &'static str,
        logits: NodeId,
        keys: NodeId,
        aux: SpecAux,
    ) -> Result<(crate::shape::Shape, Option<NodeId>, Option<NodeId>), crate::GraphError> {
        let words = "seed lo, seed hi, step lo, step hi, draft token";
        let (params, ids) = match aux {
            SpecAux::None => (None, None),
            SpecAux::Params(p) => (Some(p), None),
            SpecAux::Ids(i) => (None, Some(i)),
        };
        let ne = self.draw_checks(op, logits, keys, words, params)?;
        if let Some(i) = ids {
            self.per_row_src(op, "ids", i, DType::I32, self.node(logits).layout.ne[0], logits)?;
        }
        Ok((ne, params, ids))
    }

    /// The checks of a draw (`categorical`, `spec_verify`): f32 `logits` rows, i32 `keys` holding
    /// the named words per row, the optional f32 `params [2, rows..]`; the result's shape.
    fn draw_checks(
        &self,
        op: &'static str,
        logits: NodeId,
        keys: NodeId,
        words: &str,
        params: Option<NodeId>,
    ) -> Result<crate::shape::Shape, crate::GraphError> {
        let nl = self.rows_src(op, "logits", logits)?;
        if nl.dtype != DType::F32 {
            return Err(self.err(op, format!("logits {} must be f32", self.describe(logits))));
        }
        let mut ne = nl.layout.ne;
        let n_words = words.split(", ").count();
        if self.src(op, keys)?.layout.ne[0] != n_words {
            return Err(
                self.err(op, format!("keys {} must have {n_words} entries per row ({words})", self.describe(keys)))
            );
        }
        self.per_row_src(op, "keys", keys, DType::I32, n_words, logits)?;
        if let Some(p) = params {
            if self.src(op, p)?.layout.ne[0] != 2 {
                return Err(
                    self.err(op, format!("params {} must have 2 entries per row (scale, offset)", self.describe(p)))
                );
            }
            self.per_row_src(op, "params", p, DType::F32, 2, logits)?;
        }
        ne.0[0] = 1;
        Ok(ne)
    }
}

/// The third source of [`Graph::spec_verify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecAux {
    /// None: scale 1, no cut, entry `i` is token `i`.
    None,
    /// `categorical`'s per-row scale and threshold offset, f32 `[2, rows..]`.
    Params(NodeId),
    /// The token id of each entry, i32 `[n, rows..]` (a candidate list).
    Ids(NodeId),
}
