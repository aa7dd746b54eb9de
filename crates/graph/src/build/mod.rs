//! The checking builder: one method per op, each validating dtypes and shapes and returning an error
//! that names the op, the node being built and the offending operands.
//!
//! Quantized dtypes (`q8_0`, `q4_0`, `q4_1`) are storage formats for weights: a leaf may have one
//! (`ne[0]` a multiple of 32), and only `mul_mat` (as `a`, the weight) and `get_rows` (as the
//! table) read them, producing f32; every other op, views included, rejects a quantized source.
//!
//! Layout rules every backend may rely on: element-wise ops (`cont`, `cast`, unary, binary, scale,
//! clamp, compare, `where`) accept any strided source; row-wise ops (reductions, orderings, `soft_max`,
//! `cumsum`, `rms_norm`, `rope`, `get_rows`, `set_rows`, `scatter_add`, `mul_mat`, `random_uniform`)
//! need contiguous rows (`nb[0]` = element size) and accept any outer strides. Results of non-view
//! ops are always contiguous.
//!
//! One file per op family: [`leaves`], [`views`], [`elementwise`], [`rows`], [`linalg`], [`reduce`], [`sample`]; this file holds the
//! helpers they share (error construction, source checks, node creation).

mod elementwise;
mod leaves;
mod linalg;
mod list_filter;
mod penalize;
mod reduce;
mod rows;
mod sample;
mod token_mask;
mod views;

pub use reduce::SpecAux;

use crate::dtype::DType;
use crate::error::GraphError;
use crate::graph::Graph;
use crate::node::{Flags, Node, NodeId};
use crate::op::Op;
use crate::shape::{Layout, MAX_DIMS, Shape};
use smallvec::SmallVec;

pub(crate) type R = Result<NodeId, GraphError>;

impl Graph {
    // ----- error helpers -----

    /// `#id 'name' dtype [shape]` of an existing node, for error messages.
    pub fn describe(&self, id: NodeId) -> String {
        let n = self.node(id);
        match &n.name {
            Some(name) => format!("{id} '{name}' {} {}", n.dtype, n.layout.ne),
            None => format!("{id} {} {}", n.dtype, n.layout.ne),
        }
    }

    fn err(&self, op: &'static str, msg: impl Into<String>) -> GraphError {
        let id = NodeId(self.nodes.len() as u32);
        let node = match &self.pending_name {
            Some(name) => format!("{id} '{name}'"),
            None => id.to_string(),
        };
        GraphError::Invalid { op, node, msg: msg.into() }
    }

    /// A source of any plain dtype: a quantized one is an error (see [`Graph::quant_src`]).
    fn src(&self, op: &'static str, id: NodeId) -> Result<&Node, GraphError> {
        let n = self.check_id(op, id)?;
        if n.dtype.is_quantized() {
            return Err(self.err(
                op,
                format!(
                    "{} is quantized: only mul_mat (as a) and get_rows (as the table) read {} tensors",
                    self.describe(id),
                    n.dtype
                ),
            ));
        }
        Ok(n)
    }

    /// A source that may also be quantized (the weight of `mul_mat`, the table of `get_rows`), with
    /// contiguous rows.
    fn quant_src(&self, op: &'static str, role: &str, id: NodeId) -> Result<&Node, GraphError> {
        let n = self.check_id(op, id)?;
        if !n.dtype.is_quantized() {
            return self.rows_src(op, role, id);
        }
        if !n.layout.rows_contiguous(n.dtype) {
            return Err(self.err(op, format!("{role} {} needs contiguous rows", self.describe(id))));
        }
        Ok(n)
    }

    fn float_src(&self, op: &'static str, role: &str, id: NodeId) -> Result<&Node, GraphError> {
        let n = self.src(op, id)?;
        if !n.dtype.is_float() {
            return Err(self.err(op, format!("{role} {} must be f32, f16 or bf16", self.describe(id))));
        }
        Ok(n)
    }

    /// Checks that `id` is `dtype [ne0, rows..]` with contiguous rows and the row dims of `like`.
    pub(super) fn per_row_src(
        &self,
        op: &'static str,
        role: &str,
        id: NodeId,
        dtype: DType,
        ne0: usize,
        like: NodeId,
    ) -> Result<(), GraphError> {
        let n = self.rows_src(op, role, id)?;
        let mut want = self.node(like).layout.ne;
        want.0[0] = ne0;
        if n.dtype != dtype || n.layout.ne != want {
            return Err(self.err(
                op,
                format!(
                    "{role} {} must be {dtype} [{ne0}, rows..] with the rows of {}",
                    self.describe(id),
                    self.describe(like)
                ),
            ));
        }
        Ok(())
    }

    fn rows_src(&self, op: &'static str, role: &str, id: NodeId) -> Result<&Node, GraphError> {
        let n = self.src(op, id)?;
        if !n.layout.rows_contiguous(n.dtype) {
            return Err(self.err(
                op,
                format!(
                    "{role} {} needs contiguous rows (nb[0] = {} is not the element size; insert cont())",
                    self.describe(id),
                    n.layout.nb[0]
                ),
            ));
        }
        Ok(n)
    }

    fn shape_arg(&self, op: &'static str, dims: &[usize]) -> Result<Shape, GraphError> {
        if dims.is_empty() || dims.len() > MAX_DIMS {
            return Err(self.err(op, format!("a shape has 1 to 4 dimensions, got {}: {dims:?}", dims.len())));
        }
        if dims.contains(&0) {
            return Err(self.err(op, format!("shape {dims:?} has a zero dimension (empty tensors are not supported)")));
        }
        if dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_none() {
            return Err(self.err(op, format!("shape {dims:?} has more elements than can be counted")));
        }
        Ok(Shape::new(dims))
    }

    /// A new node with a contiguous result of shape `ne`; an error when its bytes could not be
    /// addressed (a shape whose size overflows, from a fixture or derived from huge operands).
    fn new_node(&mut self, op: Op, srcs: &[NodeId], dtype: DType, ne: Shape) -> Result<NodeId, GraphError> {
        if ne.checked_bytes(dtype).is_none_or(|b| b > isize::MAX as usize) {
            return Err(self.err(op.name(), format!("{dtype} {ne}: more bytes than memory can address")));
        }
        Ok(self.push(Node {
            op,
            srcs: SmallVec::from_slice(srcs),
            dtype,
            layout: Layout::contiguous(ne, dtype),
            storage: None,
            name: None,
            flags: Flags::default(),
        }))
    }

    fn new_view(&mut self, op: Op, src: NodeId, layout: Layout) -> NodeId {
        let s = self.node(src);
        let dtype = s.dtype;
        let storage = Some(self.storage_of(src));
        self.push(Node {
            op,
            srcs: SmallVec::from_slice(&[src]),
            dtype,
            layout,
            storage,
            name: None,
            flags: Flags::default(),
        })
    }
}
