//! SumRows, MaxRows and Argmax (`shaders/reduce.comp`): one workgroup per row, any row length.

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{Graph, Node, NodeId};

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let s = g.node(n.srcs[0]);
    contiguous(n) && float(s.dtype) && s.layout.rows_contiguous(s.dtype)
}

/// SumRows (shader op code 0).
pub(super) fn sum_rows(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    run(enc, g, id, 0)
}

/// MaxRows (shader op code 1).
pub(super) fn max_rows(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    run(enc, g, id, 1)
}

/// Argmax (shader op code 2).
pub(super) fn argmax(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    run(enc, g, id, 2)
}

/// One workgroup per row of the source; `code` is the shader's op code (`P2` in `reduce.comp`).
fn run(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, code: u32) -> Result<()> {
    let n = g.node(id);
    let src = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let shader = if enc.subgroups() { ShaderId::ReduceSg } else { ShaderId::Reduce };
    let push = Push::new(ne32(src)).a(&a.arg).d(&d.arg).pu(2, code);
    let groups = grid(src.layout.ne.nrows() as u64, 1)?;
    enc.dispatch(shader, [&a.buf, &a.buf, &a.buf, &d.buf], &push, groups)
}
