//! Binary(*), Compare(*) and Where with broadcasting (`shaders/binary.comp`).

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{BinaryOp, CompareOp, DType, Graph, Node, NodeId};

/// The shader's op code for `where` (`P2` in `binary.comp`; the arithmetic and comparison codes
/// come before it).
const WHERE: u32 = 7;

/// Binary arithmetic on two float operands.
pub(super) fn supports_binary(g: &Graph, n: &Node) -> bool {
    contiguous(n) && float(g.node(n.srcs[0]).dtype) && float(g.node(n.srcs[1]).dtype)
}

/// Comparisons of two float or two i32 operands.
pub(super) fn supports_compare(g: &Graph, n: &Node) -> bool {
    let (a, b) = (g.node(n.srcs[0]).dtype, g.node(n.srcs[1]).dtype);
    contiguous(n) && ((float(a) && float(b)) || (a == DType::I32 && b == DType::I32))
}

/// Where with a float mask.
pub(super) fn supports_where(g: &Graph, n: &Node) -> bool {
    contiguous(n) && float(g.node(n.srcs[0]).dtype)
}

/// `a op b`, broadcasting `b`.
pub(super) fn binary(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, op: BinaryOp) -> Result<()> {
    let code = match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
    };
    two_operands(enc, g, id, code)
}

/// `a op b` as a 1.0 / 0.0 mask, broadcasting `b`.
pub(super) fn compare(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, op: CompareOp) -> Result<()> {
    let code = match op {
        CompareOp::Ge => 4,
        CompareOp::Gt => 5,
        CompareOp::Eq => 6,
    };
    two_operands(enc, g, id, code)
}

/// `mask ? a : b`.
pub(super) fn where_(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let d = enc.operand(g, id)?;
    // A = the full-shape operand, B = the mask, C = the "else" operand.
    let (m, a, b) = (enc.operand(g, n.srcs[0])?, enc.operand(g, n.srcs[1])?, enc.operand(g, n.srcs[2])?);
    let push = Push::new(ne32(n)).a(&a.arg).b(&m.arg).c(&b.arg).d(&d.arg).pu(2, WHERE);
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Binary, [&a.buf, &m.buf, &b.buf, &d.buf], &push, groups)
}

/// One dispatch of op `code` on sources A and B (B also bound as C).
fn two_operands(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, code: u32) -> Result<()> {
    let n = g.node(id);
    let d = enc.operand(g, id)?;
    let (a, b) = (enc.operand(g, n.srcs[0])?, enc.operand(g, n.srcs[1])?);
    let push = Push::new(ne32(n)).a(&a.arg).b(&b.arg).c(&b.arg).d(&d.arg).pu(2, code);
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Binary, [&a.buf, &b.buf, &b.buf, &d.buf], &push, groups)
}
