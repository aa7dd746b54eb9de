//! Penalize (`shaders/penalize.comp`): llama.cpp's repetition, frequency and presence penalties on
//! whole rows from per-token counts, one invocation per element.

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, Node, NodeId};

/// f32 logits, counts and params (the builder checked their shapes), a contiguous result.
pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    contiguous(n) && n.srcs.iter().all(|&s| g.node(s).dtype == DType::F32)
}

pub(super) fn penalize(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let x = enc.operand(g, n.srcs[0])?;
    let c = enc.operand(g, n.srcs[1])?;
    let p = enc.operand(g, n.srcs[2])?;
    let d = enc.operand(g, id)?;
    let push = Push::new(ne32(n)).a(&x.arg).b(&c.arg).c(&p.arg).d(&d.arg);
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Penalize, [&x.buf, &c.buf, &p.buf, &d.buf], &push, groups)
}
