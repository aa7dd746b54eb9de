//! Indexing by rows: `get_rows`, `set_rows` (in place), `scatter_add`.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::node::{Flags, Node, NodeId};
use crate::op::Op;
use crate::shape::Shape;
use smallvec::SmallVec;

use super::R;

impl Graph {
    /// `get_rows(a, ids)`, see [`Op::GetRows`].
    pub fn get_rows(&mut self, a: NodeId, ids: NodeId) -> R {
        const OP: &str = "get_rows";
        let na = self.quant_src(OP, "a", a)?.clone();
        let ni = self.src(OP, ids)?.clone();
        if ni.dtype != DType::I32 {
            return Err(self.err(OP, format!("ids {} must be i32", self.describe(ids))));
        }
        if ni.layout.ne[1] != na.layout.ne[2] || ni.layout.ne[2] != na.layout.ne[3] || ni.layout.ne[3] != 1 {
            return Err(self.err(
                OP,
                format!(
                    "ids {} must be [m, {}, {}] for a {}",
                    self.describe(ids),
                    na.layout.ne[2],
                    na.layout.ne[3],
                    self.describe(a)
                ),
            ));
        }
        let dtype = if na.dtype == DType::I32 { DType::I32 } else { DType::F32 };
        let ne = Shape([na.layout.ne[0], ni.layout.ne[0], na.layout.ne[2], na.layout.ne[3]]);
        self.new_node(Op::GetRows, &[a, ids], dtype, ne)
    }

    /// `set_rows(dst, values, ids)`, in place, see [`Op::SetRows`].
    pub fn set_rows(&mut self, dst: NodeId, values: NodeId, ids: NodeId) -> R {
        const OP: &str = "set_rows";
        let nd = self.rows_src(OP, "dst", dst)?.clone();
        let nv = self.rows_src(OP, "values", values)?.clone();
        let ni = self.src(OP, ids)?.clone();
        if ni.dtype != DType::I32 {
            return Err(self.err(OP, format!("ids {} must be i32", self.describe(ids))));
        }
        if nd.dtype.is_float() != nv.dtype.is_float() {
            return Err(self.err(
                OP,
                format!("values {} cannot be stored into dst {}", self.describe(values), self.describe(dst)),
            ));
        }
        let (d, v, i) = (nd.layout.ne, nv.layout.ne, ni.layout.ne);
        if v[0] != d[0] || v[2] != d[2] || v[3] != d[3] || i[0] != v[1] || i[1] != v[2] || i[2] != v[3] || i[3] != 1 {
            return Err(self.err(
                OP,
                format!(
                    "values must be [{}, m, {}, {}] and ids [m, {}, {}] for dst {}; got values {} and ids {}",
                    d[0],
                    d[2],
                    d[3],
                    d[2],
                    d[3],
                    self.describe(dst),
                    self.describe(values),
                    self.describe(ids)
                ),
            ));
        }
        let storage = Some(self.storage_of(dst));
        Ok(self.push(Node {
            op: Op::SetRows,
            srcs: SmallVec::from_slice(&[dst, values, ids]),
            dtype: nd.dtype,
            layout: nd.layout,
            storage,
            name: None,
            flags: Flags::default(),
        }))
    }

    /// `scatter_add(base, ids, values)`, see [`Op::ScatterAdd`].
    pub fn scatter_add(&mut self, base: NodeId, ids: NodeId, values: NodeId) -> R {
        const OP: &str = "scatter_add";
        let nb = self.rows_src(OP, "base", base)?.clone();
        let ni = self.rows_src(OP, "ids", ids)?.clone();
        let nv = self.rows_src(OP, "values", values)?.clone();
        if nb.dtype != DType::F32 || nv.dtype != DType::F32 {
            return Err(
                self.err(OP, format!("base {} and values {} must be f32", self.describe(base), self.describe(values)))
            );
        }
        if ni.dtype != DType::I32 {
            return Err(self.err(OP, format!("ids {} must be i32", self.describe(ids))));
        }
        if ni.layout.ne.0[1..] != nb.layout.ne.0[1..] {
            return Err(
                self.err(OP, format!("ids {} must have the rows of base {}", self.describe(ids), self.describe(base)))
            );
        }
        if nv.layout.ne != ni.layout.ne && nv.layout.ne.numel() != 1 {
            return Err(self.err(
                OP,
                format!("values {} must be shaped like ids {} or be [1]", self.describe(values), self.describe(ids)),
            ));
        }
        let ne = nb.layout.ne;
        self.new_node(Op::ScatterAdd, &[base, ids, values], DType::F32, ne)
    }
}
