//! Cont and Cast (`shaders/copy.comp`): strided source, contiguous result, any dtype pair.

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{Graph, Node, NodeId};

pub(super) fn supports(_g: &Graph, n: &Node) -> bool {
    contiguous(n)
}

/// Cont and Cast: `shaders/copy.comp` converts while it copies.
pub(super) fn cont_cast(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let push = Push::new(ne32(n)).a(&a.arg).d(&d.arg);
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Copy, [&a.buf, &a.buf, &a.buf, &d.buf], &push, groups)
}
