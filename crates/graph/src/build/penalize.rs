//! The penalties on whole rows (`penalize`; family `penalize`): llama.cpp's repetition, frequency
//! and presence penalties from per-token counts, one elementwise pass.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::node::NodeId;
use crate::op::Op;

use super::R;

impl Graph {
    /// llama.cpp's repetition, frequency and presence penalties on whole rows of `x` (f32), from
    /// each token's count in `counts` (f32, the shape of `x`) and per row `params f32 [3, rows..]`
    /// (`repeat`, `freq`, `present`): see [`Op::Penalize`].
    pub fn penalize(&mut self, x: NodeId, counts: NodeId, params: NodeId) -> R {
        const OP: &str = "penalize";
        let nx = self.rows_src(OP, "x", x)?;
        if nx.dtype != DType::F32 {
            return Err(self.err(OP, format!("x {} must be f32", self.describe(x))));
        }
        let ne = nx.layout.ne;
        let nc = self.rows_src(OP, "counts", counts)?;
        if nc.dtype != DType::F32 || nc.layout.ne != ne {
            return Err(self.err(
                OP,
                format!("counts {} must be f32 of the shape of x {}", self.describe(counts), self.describe(x)),
            ));
        }
        self.per_row_src(OP, "params (repeat, freq, present)", params, DType::F32, 3, x)?;
        self.new_node(Op::Penalize, &[x, counts, params], DType::F32, ne)
    }
}
