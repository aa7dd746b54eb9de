//! Rope (`shaders/rope.comp`): normal and NeoX pairing.

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, Node, NodeId, RopeMode};

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let x = g.node(n.srcs[0]);
    contiguous(n) && x.dtype == DType::F32 && x.layout.rows_contiguous(x.dtype) && g.node(n.srcs[1]).dtype == DType::I32
}

pub(super) fn rope(
    enc: &mut Encoder<'_>,
    g: &Graph,
    id: NodeId,
    n_dims: u32,
    mode: RopeMode,
    freq_base: f32,
    freq_scale: f32,
) -> Result<()> {
    let n = g.node(id);
    let a = enc.operand(g, n.srcs[0])?;
    let p = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let mut push = Push::new(ne32(n)).a(&a.arg).b(&p.arg).d(&d.arg).pu(0, n_dims).pf(1, freq_base).pf(2, freq_scale);
    push.c_ne[0] = match mode {
        RopeMode::Normal => 0,
        RopeMode::Neox => 1,
    };
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Rope, [&a.buf, &p.buf, &a.buf, &d.buf], &push, groups)
}
