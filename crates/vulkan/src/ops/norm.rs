//! RmsNorm (`shaders/norm.comp`): one workgroup per row.

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

pub(super) fn rms_norm(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, eps: f32) -> Result<()> {
    let n = g.node(id);
    let src = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let push = Push::new(ne32(src)).a(&a.arg).d(&d.arg).pf(0, eps);
    let shader = if enc.subgroups() { ShaderId::NormSg } else { ShaderId::Norm };
    let groups = grid(src.layout.ne.nrows() as u64, 1)?;
    enc.dispatch(shader, [&a.buf, &a.buf, &a.buf, &d.buf], &push, groups)
}
