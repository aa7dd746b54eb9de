//! The checking builder: one method per op, each validating dtypes and shapes and returning an error
//! that names the op, the node being built and the offending operands.
//!
//! Layout rules every backend may rely on: element-wise ops (`cont`, `cast`, unary, binary, scale,
//! clamp, compare, `where`) accept any strided source; row-wise ops (reductions, orderings, `soft_max`,
//! `cumsum`, `rms_norm`, `rope`, `get_rows`, `set_rows`, `scatter_add`, `mul_mat`, `random_uniform`)
//! need contiguous rows (`nb[0]` = element size) and accept any outer strides. Results of non-view
//! ops are always contiguous.

use crate::dtype::DType;
use crate::error::GraphError;
use crate::graph::Graph;
use crate::node::{Flags, Node, NodeId};
use crate::op::{BinaryOp, CompareOp, Op, RopeMode, SortOrder, UnaryOp};
use crate::shape::{Layout, MAX_DIMS, Shape};
use smallvec::SmallVec;

type R = Result<NodeId, GraphError>;

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

    fn src(&self, op: &'static str, id: NodeId) -> Result<&Node, GraphError> {
        self.check_id(op, id)
    }

    fn float_src(&self, op: &'static str, role: &str, id: NodeId) -> Result<&Node, GraphError> {
        let n = self.src(op, id)?;
        if !n.dtype.is_float() {
            return Err(self.err(op, format!("{role} {} must be f32, f16 or bf16", self.describe(id))));
        }
        Ok(n)
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
        Ok(Shape::new(dims))
    }

    fn new_node(&mut self, op: Op, srcs: &[NodeId], dtype: DType, ne: Shape) -> NodeId {
        self.push(Node {
            op,
            srcs: SmallVec::from_slice(srcs),
            dtype,
            layout: Layout::contiguous(ne, dtype),
            storage: None,
            name: None,
            flags: Flags::default(),
        })
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

    // ----- leaves -----

    /// An input tensor, written before each run.
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize]) -> R {
        self.leaf(name, dtype, shape, Flags { input: true, ..Flags::default() })
    }

    /// A parameter (weight) tensor, uploaded once.
    pub fn param(&mut self, name: &str, dtype: DType, shape: &[usize]) -> R {
        self.leaf(name, dtype, shape, Flags { param: true, ..Flags::default() })
    }

    /// A state tensor (KV cache, sampler state): persists across steps and re-plans, starts at zero,
    /// may be set from outside like an input and written in place by the graph (`set_rows`).
    pub fn state(&mut self, name: &str, dtype: DType, shape: &[usize]) -> R {
        self.leaf(name, dtype, shape, Flags { state: true, ..Flags::default() })
    }

    fn leaf(&mut self, name: &str, dtype: DType, shape: &[usize], flags: Flags) -> R {
        let what = if flags.param {
            "param"
        } else if flags.state {
            "state"
        } else {
            "input"
        };
        self.named(name, |g| {
            let ne = g.shape_arg(what, shape)?;
            let id = g.new_node(Op::Input, &[], dtype, ne);
            g.nodes[id.index()].flags = flags;
            Ok(id)
        })
    }

    /// A constant tensor filled with `value`.
    pub fn fill(&mut self, dtype: DType, shape: &[usize], value: f32) -> R {
        let ne = self.shape_arg("fill", shape)?;
        if dtype == DType::I32 && (value.fract() != 0.0 || !value.is_finite()) {
            return Err(self.err("fill", format!("value {value} is not an integer, the dtype is i32")));
        }
        Ok(self.new_node(Op::Fill { value }, &[], dtype, ne))
    }

    /// `start + step * i0` along `ne[0]`, repeated for every row.
    pub fn arange(&mut self, dtype: DType, shape: &[usize], start: f32, step: f32) -> R {
        let ne = self.shape_arg("arange", shape)?;
        if !matches!(dtype, DType::F32 | DType::I32) {
            return Err(self.err("arange", format!("dtype must be f32 or i32, got {dtype}")));
        }
        if !start.is_finite() || !step.is_finite() {
            return Err(self.err("arange", format!("start {start} and step {step} must be finite")));
        }
        if dtype == DType::I32 && (start.fract() != 0.0 || step.fract() != 0.0) {
            return Err(self.err("arange", format!("start {start} and step {step} must be integers for i32")));
        }
        Ok(self.new_node(Op::Arange { start, step }, &[], dtype, ne))
    }

    // ----- views -----

    /// A strided window into `src`'s storage: element counts `ne`, byte strides `nb` (one per
    /// dimension of `ne`; `nb[0]` must be the element size) and a byte `offset` relative to `src`.
    pub fn view(&mut self, src: NodeId, ne: &[usize], nb: &[usize], offset: usize) -> R {
        const OP: &str = "view";
        let shape = self.shape_arg(OP, ne)?;
        let s = self.src(OP, src)?.clone();
        if nb.len() != ne.len() {
            return Err(self.err(OP, format!("{} strides given for {} dimensions", nb.len(), ne.len())));
        }
        if nb[0] != s.dtype.size() {
            return Err(self.err(
                OP,
                format!("nb[0] = {} must be the element size {} of {}", nb[0], s.dtype.size(), self.describe(src)),
            ));
        }
        let mut strides = [0; MAX_DIMS];
        strides[..nb.len()].copy_from_slice(nb);
        for i in nb.len()..MAX_DIMS {
            strides[i] = strides[i - 1] * shape[i - 1];
        }
        let layout = Layout { ne: shape, nb: strides, offset: s.layout.offset + offset };
        let storage = self.node(self.storage_of(src));
        let have = storage.layout.extent(storage.dtype);
        let need = layout.extent(s.dtype);
        if need > have {
            return Err(self.err(
                OP,
                format!(
                    "view {shape} with strides {nb:?} at offset {offset} of {} needs {need} bytes, its storage has {have}",
                    self.describe(src)
                ),
            ));
        }
        Ok(self.new_view(Op::View, src, layout))
    }

    /// The same elements with a new shape; `src` must be contiguous.
    pub fn reshape(&mut self, src: NodeId, ne: &[usize]) -> R {
        const OP: &str = "reshape";
        let shape = self.shape_arg(OP, ne)?;
        let s = self.src(OP, src)?;
        if !s.layout.is_contiguous(s.dtype) {
            return Err(self.err(OP, format!("{} is not contiguous; insert cont()", self.describe(src))));
        }
        if s.layout.ne.numel() != shape.numel() {
            return Err(self.err(
                OP,
                format!("{} has {} elements, {shape} has {}", self.describe(src), s.layout.ne.numel(), shape.numel()),
            ));
        }
        let layout = Layout { offset: s.layout.offset, ..Layout::contiguous(shape, s.dtype) };
        Ok(self.new_view(Op::Reshape, src, layout))
    }

    /// Moves source dimension `i` to result dimension `axes[i]` (ggml's `permute`).
    pub fn permute(&mut self, src: NodeId, axes: [usize; 4]) -> R {
        const OP: &str = "permute";
        let s = self.src(OP, src)?;
        let mut seen = [false; MAX_DIMS];
        for &a in &axes {
            if a >= MAX_DIMS || seen[a] {
                return Err(self.err(OP, format!("axes {axes:?} are not a permutation of 0..4")));
            }
            seen[a] = true;
        }
        let mut ne = [1; MAX_DIMS];
        let mut nb = [0; MAX_DIMS];
        for i in 0..MAX_DIMS {
            ne[axes[i]] = s.layout.ne[i];
            nb[axes[i]] = s.layout.nb[i];
        }
        let layout = Layout { ne: Shape(ne), nb, offset: s.layout.offset };
        let axes = axes.map(|a| a as u8);
        Ok(self.new_view(Op::Permute { axes }, src, layout))
    }

    /// Swaps dimensions 0 and 1.
    pub fn transpose(&mut self, src: NodeId) -> R {
        let s = self.src("transpose", src)?;
        let mut layout = s.layout;
        layout.ne.0.swap(0, 1);
        layout.nb.swap(0, 1);
        Ok(self.new_view(Op::Transpose, src, layout))
    }

    // ----- copies and element-wise -----

    /// A contiguous copy.
    pub fn cont(&mut self, src: NodeId) -> R {
        let s = self.src("cont", src)?;
        let (dtype, ne) = (s.dtype, s.layout.ne);
        Ok(self.new_node(Op::Cont, &[src], dtype, ne))
    }

    /// A contiguous copy converted to `dtype` (see [`Op::Cast`] for the conversion rules).
    pub fn cast(&mut self, src: NodeId, dtype: DType) -> R {
        let s = self.src("cast", src)?;
        let ne = s.layout.ne;
        Ok(self.new_node(Op::Cast, &[src], dtype, ne))
    }

    /// An element-wise op of a float tensor.
    pub fn unary(&mut self, op: UnaryOp, src: NodeId) -> R {
        let s = self.float_src(op.name(), "source", src)?;
        let (dtype, ne) = (s.dtype, s.layout.ne);
        Ok(self.new_node(Op::Unary(op), &[src], dtype, ne))
    }

    /// `-x`.
    pub fn neg(&mut self, src: NodeId) -> R {
        self.unary(UnaryOp::Neg, src)
    }
    /// `e^x`.
    pub fn exp(&mut self, src: NodeId) -> R {
        self.unary(UnaryOp::Exp, src)
    }
    /// `ln x`.
    pub fn log(&mut self, src: NodeId) -> R {
        self.unary(UnaryOp::Log, src)
    }
    /// `x^2`.
    pub fn sqr(&mut self, src: NodeId) -> R {
        self.unary(UnaryOp::Sqr, src)
    }
    /// `sqrt x`.
    pub fn sqrt(&mut self, src: NodeId) -> R {
        self.unary(UnaryOp::Sqrt, src)
    }
    /// `x * sigmoid(x)`.
    pub fn silu(&mut self, src: NodeId) -> R {
        self.unary(UnaryOp::Silu, src)
    }
    /// GELU (tanh approximation).
    pub fn gelu(&mut self, src: NodeId) -> R {
        self.unary(UnaryOp::Gelu, src)
    }

    fn broadcast_check(&self, op: &'static str, a: NodeId, b: NodeId, role: &str) -> Result<(), GraphError> {
        let (na, nb) = (self.node(a), self.node(b));
        if !na.layout.ne.can_repeat_from(&nb.layout.ne) {
            let dim = (0..MAX_DIMS).find(|&i| !na.layout.ne[i].is_multiple_of(nb.layout.ne[i])).unwrap_or(0);
            return Err(self.err(
                op,
                format!(
                    "{role} {} does not broadcast to a {}: ne[{dim}] = {} does not divide {}",
                    self.describe(b),
                    self.describe(a),
                    nb.layout.ne[dim],
                    na.layout.ne[dim]
                ),
            ));
        }
        Ok(())
    }

    /// `a (op) b` with `b` broadcast to `a`; both float; the result has `a`'s dtype and shape.
    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> R {
        let name = op.name();
        self.float_src(name, "a", a)?;
        self.float_src(name, "b", b)?;
        self.broadcast_check(name, a, b, "b")?;
        let n = self.node(a);
        let (dtype, ne) = (n.dtype, n.layout.ne);
        Ok(self.new_node(Op::Binary(op), &[a, b], dtype, ne))
    }

    /// `a + b` (broadcast).
    pub fn add(&mut self, a: NodeId, b: NodeId) -> R {
        self.binary(BinaryOp::Add, a, b)
    }
    /// `a - b` (broadcast).
    pub fn sub(&mut self, a: NodeId, b: NodeId) -> R {
        self.binary(BinaryOp::Sub, a, b)
    }
    /// `a * b` (broadcast).
    pub fn mul(&mut self, a: NodeId, b: NodeId) -> R {
        self.binary(BinaryOp::Mul, a, b)
    }
    /// `a / b` (broadcast).
    pub fn div(&mut self, a: NodeId, b: NodeId) -> R {
        self.binary(BinaryOp::Div, a, b)
    }

    /// `x * scale`.
    pub fn scale(&mut self, src: NodeId, scale: f32) -> R {
        self.scale_bias(src, scale, 0.0)
    }

    /// `x * scale + bias`.
    pub fn scale_bias(&mut self, src: NodeId, scale: f32, bias: f32) -> R {
        let s = self.float_src("scale", "source", src)?;
        let (dtype, ne) = (s.dtype, s.layout.ne);
        if scale.is_nan() || bias.is_nan() {
            return Err(self.err("scale", format!("scale {scale} and bias {bias} must not be NaN")));
        }
        Ok(self.new_node(Op::Scale { scale, bias }, &[src], dtype, ne))
    }

    /// `min(max(x, min), max)`.
    pub fn clamp(&mut self, src: NodeId, min: f32, max: f32) -> R {
        let s = self.float_src("clamp", "source", src)?;
        let (dtype, ne) = (s.dtype, s.layout.ne);
        if min.is_nan() || max.is_nan() || min > max {
            return Err(self.err("clamp", format!("bounds [{min}, {max}] are not an interval")));
        }
        Ok(self.new_node(Op::Clamp { min, max }, &[src], dtype, ne))
    }

    /// `a (cmp) b` as an f32 mask; `b` broadcasts to `a`; both float, or both i32.
    pub fn compare(&mut self, op: CompareOp, a: NodeId, b: NodeId) -> R {
        let name = op.name();
        let (da, db) = (self.src(name, a)?.dtype, self.src(name, b)?.dtype);
        if da.is_float() != db.is_float() {
            return Err(self.err(
                name,
                format!("cannot compare {} with {}: both float or both i32", self.describe(a), self.describe(b)),
            ));
        }
        self.broadcast_check(name, a, b, "b")?;
        let ne = self.node(a).layout.ne;
        Ok(self.new_node(Op::Compare(op), &[a, b], DType::F32, ne))
    }

    /// `a >= b` mask.
    pub fn ge(&mut self, a: NodeId, b: NodeId) -> R {
        self.compare(CompareOp::Ge, a, b)
    }
    /// `a > b` mask.
    pub fn gt(&mut self, a: NodeId, b: NodeId) -> R {
        self.compare(CompareOp::Gt, a, b)
    }
    /// `a == b` mask (named `equal` because `eq` is `PartialEq`'s).
    pub fn equal(&mut self, a: NodeId, b: NodeId) -> R {
        self.compare(CompareOp::Eq, a, b)
    }

    /// `where(mask, a, b)`: `a` where `mask != 0`, else `b`. `mask` (float) and `b` broadcast to `a`;
    /// `a` and `b` have the same dtype, which the result has.
    pub fn where_(&mut self, mask: NodeId, a: NodeId, b: NodeId) -> R {
        const OP: &str = "where";
        self.float_src(OP, "mask", mask)?;
        let (da, db) = (self.src(OP, a)?.dtype, self.src(OP, b)?.dtype);
        if da != db {
            return Err(
                self.err(OP, format!("a {} and b {} must have the same dtype", self.describe(a), self.describe(b)))
            );
        }
        self.broadcast_check(OP, a, mask, "mask")?;
        self.broadcast_check(OP, a, b, "b")?;
        let ne = self.node(a).layout.ne;
        Ok(self.new_node(Op::Where, &[mask, a, b], da, ne))
    }

    // ----- indexing -----

    /// `get_rows(a, ids)`, see [`Op::GetRows`].
    pub fn get_rows(&mut self, a: NodeId, ids: NodeId) -> R {
        const OP: &str = "get_rows";
        let na = self.rows_src(OP, "a", a)?.clone();
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
        Ok(self.new_node(Op::GetRows, &[a, ids], dtype, ne))
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
        Ok(self.new_node(Op::ScatterAdd, &[base, ids, values], DType::F32, ne))
    }

    // ----- linear algebra and normalisation -----

    /// `mul_mat(a, b)`, see [`Op::MulMat`].
    pub fn mul_mat(&mut self, a: NodeId, b: NodeId) -> R {
        const OP: &str = "mul_mat";
        let na = self.float_src(OP, "a", a)?.clone();
        let nb = self.float_src(OP, "b", b)?.clone();
        self.rows_src(OP, "a", a)?;
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
        Ok(self.new_node(Op::MulMat, &[a, b], DType::F32, Shape([x[1], y[1], y[2], y[3]])))
    }

    /// `x / sqrt(mean(x^2) + eps)` along `ne[0]`.
    pub fn rms_norm(&mut self, src: NodeId, eps: f32) -> R {
        const OP: &str = "rms_norm";
        self.float_src(OP, "source", src)?;
        let ne = self.rows_src(OP, "source", src)?.layout.ne;
        if !(eps >= 0.0 && eps.is_finite()) {
            return Err(self.err(OP, format!("eps {eps} must be finite and >= 0")));
        }
        Ok(self.new_node(Op::RmsNorm { eps }, &[src], DType::F32, ne))
    }

    /// Rotary position embedding, see [`Op::Rope`].
    pub fn rope(&mut self, x: NodeId, pos: NodeId, n_dims: u32, mode: RopeMode, freq_base: f32, freq_scale: f32) -> R {
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
        if n_dims == 0 || !n_dims.is_multiple_of(2) || n_dims as usize > nx.layout.ne[0] {
            return Err(self
                .err(OP, format!("n_dims {n_dims} must be even, positive and at most head_dim {}", nx.layout.ne[0])));
        }
        if !(freq_base > 0.0 && freq_base.is_finite() && freq_scale.is_finite() && freq_scale > 0.0) {
            return Err(
                self.err(OP, format!("freq_base {freq_base} and freq_scale {freq_scale} must be finite and positive"))
            );
        }
        let ne = nx.layout.ne;
        Ok(self.new_node(Op::Rope { n_dims, mode, freq_base, freq_scale }, &[x, pos], DType::F32, ne))
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
        Ok(self.new_node(Op::SoftMax { scale }, &srcs, DType::F32, ne))
    }

    // ----- row reductions and orderings -----

    fn row_op(&mut self, op: Op, src: NodeId, dtype: DType, ne0: usize) -> R {
        let name = op.name();
        self.float_src(name, "source", src)?;
        self.rows_src(name, "source", src)?;
        let mut ne = self.node(src).layout.ne;
        ne.0[0] = ne0;
        Ok(self.new_node(op, &[src], dtype, ne))
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
        self.row_op(Op::TopK { k: k as u32 }, src, DType::I32, k)
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
        Ok(self.new_node(Op::RandomUniform { stream }, &[keys], DType::F32, ne))
    }
}
