//! Cumsum (`shaders/cumsum.comp`): one workgroup per row, chunked scan with a carried total.

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

pub(super) fn cumsum(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let src = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let push = Push::new(ne32(src)).a(&a.arg).d(&d.arg);
    let groups = grid(src.layout.ne.nrows() as u64, 1)?;
    enc.dispatch(ShaderId::Cumsum, [&a.buf, &a.buf, &a.buf, &d.buf], &push, groups)
}
