//! Unary(*), Scale and Clamp (`shaders/unary.comp`).

use crate::encoder::{Encoder, grid};
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{Graph, Node, NodeId, Op, UnaryOp};
use sched::BackendResult;

/// The shader's op code (`P2` in `unary.comp`).
fn code(op: &Op) -> u32 {
    match op {
        Op::Unary(UnaryOp::Neg) => 0,
        Op::Unary(UnaryOp::Exp) => 1,
        Op::Unary(UnaryOp::Log) => 2,
        Op::Unary(UnaryOp::Sqr) => 3,
        Op::Unary(UnaryOp::Sqrt) => 4,
        Op::Unary(UnaryOp::Silu) => 5,
        Op::Unary(UnaryOp::Gelu) => 6,
        Op::Scale { .. } => 7,
        _ => 8,
    }
}

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    contiguous(n) && float(n.dtype) && float(g.node(n.srcs[0]).dtype)
}

pub(super) fn encode(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> BackendResult<()> {
    let n = g.node(id);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let (p0, p1) = match n.op {
        Op::Scale { scale, bias } => (scale, bias),
        Op::Clamp { min, max } => (min, max),
        _ => (0.0, 0.0),
    };
    let push = Push::new(ne32(n)).a(&a.arg).d(&d.arg).pf(0, p0).pf(1, p1).pu(2, code(&n.op));
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Unary, [&a.buf, &a.buf, &a.buf, &d.buf], &push, groups)
}
