//! Fill and Arange (`shaders/fill.comp`).

use crate::encoder::{Encoder, grid};
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{Graph, Node, NodeId, Op};
use sched::BackendResult;

pub(super) fn supports(_g: &Graph, n: &Node) -> bool {
    contiguous(n)
}

pub(super) fn encode(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> BackendResult<()> {
    let n = g.node(id);
    let d = enc.operand(g, id)?;
    let push = match n.op {
        Op::Fill { value } => Push::new(ne32(n)).d(&d.arg).pf(0, value),
        Op::Arange { start, step } => Push::new(ne32(n)).d(&d.arg).pf(0, start).pf(1, step).pu(2, 1),
        _ => unreachable!("fill::encode called for {}", n.op),
    };
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Fill, [&d.buf, &d.buf, &d.buf, &d.buf], &push, groups)
}
