//! RandomUniform (`shaders/random.comp`), bit-identical to `graph::philox::uniform`.

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, Node, NodeId};

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let k = g.node(n.srcs[0]);
    contiguous(n) && k.dtype == DType::I32 && k.layout.rows_contiguous(k.dtype)
}

pub(super) fn random_uniform(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, stream: u32) -> Result<()> {
    let n = g.node(id);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let push = Push::new(ne32(n)).a(&a.arg).d(&d.arg).pu(0, stream);
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Random, [&a.buf, &a.buf, &a.buf, &d.buf], &push, groups)
}

/// Categorical draws: not yet implemented on Vulkan (the planner keeps the node on the CPU).
pub(super) fn supports_categorical(_g: &Graph, _n: &Node) -> bool {
    false
}

pub(super) fn categorical(_enc: &mut Encoder<'_>, _g: &Graph, _id: NodeId, _stream: u32) -> Result<()> {
    unreachable!("encode checks supports first")
}
