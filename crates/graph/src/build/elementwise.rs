//! Copies and element-wise ops: `cont`, `cast`, unary, binary (with broadcasting), `scale`, `clamp`, compare, `where`.

use crate::dtype::DType;
use crate::error::GraphError;
use crate::graph::Graph;
use crate::node::NodeId;
use crate::op::{BinaryOp, CompareOp, Op, UnaryOp};
use crate::shape::MAX_DIMS;

use super::R;

impl Graph {
    /// A contiguous copy.
    pub fn cont(&mut self, src: NodeId) -> R {
        let s = self.src("cont", src)?;
        let (dtype, ne) = (s.dtype, s.layout.ne);
        self.new_node(Op::Cont, &[src], dtype, ne)
    }

    /// A contiguous copy converted to `dtype` (see [`Op::Cast`] for the conversion rules).
    pub fn cast(&mut self, src: NodeId, dtype: DType) -> R {
        let s = self.src("cast", src)?;
        let ne = s.layout.ne;
        if dtype.is_quantized() {
            return Err(self.err("cast", format!("cannot cast {} to the quantized dtype {dtype}", self.describe(src))));
        }
        self.new_node(Op::Cast, &[src], dtype, ne)
    }

    /// An element-wise op of a float tensor.
    pub fn unary(&mut self, op: UnaryOp, src: NodeId) -> R {
        let s = self.float_src(op.name(), "source", src)?;
        let (dtype, ne) = (s.dtype, s.layout.ne);
        self.new_node(Op::Unary(op), &[src], dtype, ne)
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
        self.new_node(Op::Binary(op), &[a, b], dtype, ne)
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
        self.new_node(Op::Scale { scale, bias }, &[src], dtype, ne)
    }

    /// `min(max(x, min), max)`.
    pub fn clamp(&mut self, src: NodeId, min: f32, max: f32) -> R {
        let s = self.float_src("clamp", "source", src)?;
        let (dtype, ne) = (s.dtype, s.layout.ne);
        if min.is_nan() || max.is_nan() || min > max {
            return Err(self.err("clamp", format!("bounds [{min}, {max}] are not an interval")));
        }
        self.new_node(Op::Clamp { min, max }, &[src], dtype, ne)
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
        self.new_node(Op::Compare(op), &[a, b], DType::F32, ne)
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
        self.new_node(Op::Where, &[mask, a, b], da, ne)
    }
}
