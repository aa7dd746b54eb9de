//! Binary(*), Compare(*) and Where with broadcasting (`shaders/binary.comp`).

use crate::encoder::{Encoder, grid};
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{BinaryOp, CompareOp, DType, Graph, Node, NodeId, Op};
use sched::BackendResult;

/// The shader's op code (`P2` in `binary.comp`).
fn code(op: &Op) -> u32 {
    match op {
        Op::Binary(BinaryOp::Add) => 0,
        Op::Binary(BinaryOp::Sub) => 1,
        Op::Binary(BinaryOp::Mul) => 2,
        Op::Binary(BinaryOp::Div) => 3,
        Op::Compare(CompareOp::Ge) => 4,
        Op::Compare(CompareOp::Gt) => 5,
        Op::Compare(CompareOp::Eq) => 6,
        _ => 7,
    }
}

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let s = |i: usize| g.node(n.srcs[i]).dtype;
    contiguous(n)
        && match n.op {
            Op::Binary(_) => float(s(0)) && float(s(1)),
            Op::Compare(_) => (float(s(0)) && float(s(1))) || (s(0) == DType::I32 && s(1) == DType::I32),
            _ => float(s(0)),
        }
}

pub(super) fn encode(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> BackendResult<()> {
    let n = g.node(id);
    let d = enc.operand(g, id)?;
    let (a, b, c) = if matches!(n.op, Op::Where) {
        // A = the full-shape operand, B = the mask, C = the "else" operand.
        let (m, a, b) = (enc.operand(g, n.srcs[0])?, enc.operand(g, n.srcs[1])?, enc.operand(g, n.srcs[2])?);
        (a, m, b)
    } else {
        let (a, b) = (enc.operand(g, n.srcs[0])?, enc.operand(g, n.srcs[1])?);
        (a, b.clone(), b)
    };
    let push = Push::new(ne32(n)).a(&a.arg).b(&b.arg).c(&c.arg).d(&d.arg).pu(2, code(&n.op));
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Binary, [&a.buf, &b.buf, &c.buf, &d.buf], &push, groups)
}
