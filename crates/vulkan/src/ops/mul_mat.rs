//! MulMat (`shaders/mul_mat.comp`): f32/f16/bf16 weights times f32 activations, one workgroup per
//! output element (a dot product split across the workgroup).

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, Node, NodeId};

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let (a, b) = (g.node(n.srcs[0]), g.node(n.srcs[1]));
    contiguous(n)
        && float(a.dtype)
        && b.dtype == DType::F32
        && a.layout.rows_contiguous(a.dtype)
        && b.layout.rows_contiguous(b.dtype)
        && n.layout.ne[2].is_multiple_of(a.layout.ne[2])
        && n.layout.ne[3].is_multiple_of(a.layout.ne[3])
}

pub(super) fn mul_mat(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let an = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let b = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let mut push = Push::new(ne32(n)).a(&a.arg).b(&b.arg).d(&d.arg).pu(0, an.layout.ne[0] as u32);
    push.c_ne = ne32(an);
    let shader = if enc.subgroups() { ShaderId::MulMatSg } else { ShaderId::MulMat };
    let groups = grid(n.layout.ne.numel() as u64, 1)?;
    enc.dispatch(shader, [&a.buf, &b.buf, &a.buf, &d.buf], &push, groups)
}
