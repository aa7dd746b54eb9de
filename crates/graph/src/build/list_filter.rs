//! The fused list stages (`list_filter`; family `list_filter`): top-p, min-p and temperature on a
//! candidate list in one node.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::list_filter::ListStages;
use crate::node::NodeId;
use crate::op::Op;

use super::R;

impl Graph {
    /// The list stages `stages` on each row of `vals f32 [k, rows..]` (a candidate list in list
    /// order), with `params f32 [2 s, rows..]` holding two parameters per stage and row: see
    /// [`Op::ListFilter`]. `k` is at most [`ListStages::MAX_LEN`].
    pub fn list_filter(&mut self, vals: NodeId, params: NodeId, stages: ListStages) -> R {
        const OP: &str = "list_filter";
        let nv = self.rows_src(OP, "vals", vals)?;
        if nv.dtype != DType::F32 {
            return Err(self.err(OP, format!("vals {} must be f32", self.describe(vals))));
        }
        let ne = nv.layout.ne;
        if ne[0] > ListStages::MAX_LEN {
            return Err(self.err(
                OP,
                format!("vals {} has lists longer than {} entries", self.describe(vals), ListStages::MAX_LEN),
            ));
        }
        self.per_row_src(
            OP,
            &format!("params ({stages}: 2 per stage)"),
            params,
            DType::F32,
            stages.param_rows(),
            vals,
        )?;
        self.new_node(Op::ListFilter(stages), &[vals, params], DType::F32, ne)
    }
}
