//! Unary(*), Scale and Clamp (`shaders/unary.comp`).

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{Graph, Node, NodeId, UnaryOp};

/// The shader's op codes (`P2` in `unary.comp`) for scale and clamp; the unary ops come before.
const SCALE: u32 = 7;
const CLAMP: u32 = 8;

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    contiguous(n) && float(n.dtype) && float(g.node(n.srcs[0]).dtype)
}

/// An element-wise function without parameters.
pub(super) fn unary(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, op: UnaryOp) -> Result<()> {
    let code = match op {
        UnaryOp::Neg => 0,
        UnaryOp::Exp => 1,
        UnaryOp::Log => 2,
        UnaryOp::Sqr => 3,
        UnaryOp::Sqrt => 4,
        UnaryOp::Silu => 5,
        UnaryOp::Gelu => 6,
    };
    run(enc, g, id, code, 0.0, 0.0)
}

/// `x * scale + bias`.
pub(super) fn scale(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, scale: f32, bias: f32) -> Result<()> {
    run(enc, g, id, SCALE, scale, bias)
}

/// `x` clamped to `[min, max]`.
pub(super) fn clamp(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, min: f32, max: f32) -> Result<()> {
    run(enc, g, id, CLAMP, min, max)
}

/// One dispatch of op `code` with float parameters `p0`, `p1`.
fn run(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, code: u32, p0: f32, p1: f32) -> Result<()> {
    let n = g.node(id);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let push = Push::new(ne32(n)).a(&a.arg).d(&d.arg).pf(0, p0).pf(1, p1).pu(2, code);
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Unary, [&a.buf, &a.buf, &a.buf, &d.buf], &push, groups)
}
