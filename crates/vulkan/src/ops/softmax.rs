//! SoftMax with scale and optional mask (`shaders/softmax.comp`): one workgroup per row.

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{Graph, Node, NodeId};

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let s = g.node(n.srcs[0]);
    contiguous(n)
        && float(s.dtype)
        && s.layout.rows_contiguous(s.dtype)
        && n.srcs.get(1).is_none_or(|&m| {
            let m = g.node(m);
            float(m.dtype) && m.layout.rows_contiguous(m.dtype)
        })
}

pub(super) fn soft_max(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, scale: f32) -> Result<()> {
    let n = g.node(id);
    let src = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let mask = match n.srcs.get(1) {
        Some(&m) => Some(enc.operand(g, m)?),
        None => None,
    };
    let mut push = Push::new(ne32(src)).a(&a.arg).d(&d.arg).pf(0, scale);
    if let Some(m) = &mask {
        push = push.b(&m.arg).pu(1, 1);
    }
    let mb = mask.as_ref().map_or(&a.buf, |m| &m.buf);
    let shader = if enc.subgroups() { ShaderId::SoftmaxSg } else { ShaderId::Softmax };
    let groups = grid(src.layout.ne.nrows() as u64, 1)?;
    enc.dispatch(shader, [&a.buf, mb, &a.buf, &d.buf], &push, groups)
}
