//! Fill and Arange (`shaders/fill.comp`).

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{Graph, Node, NodeId};

pub(super) fn supports(_g: &Graph, n: &Node) -> bool {
    contiguous(n)
}

/// Fill: every element is `value`.
pub(super) fn fill(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, value: f32) -> Result<()> {
    run(enc, g, id, |p| p.pf(0, value))
}

/// Arange: element `i` (in row-major order) is `start + i * step`.
pub(super) fn arange(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, start: f32, step: f32) -> Result<()> {
    run(enc, g, id, |p| p.pf(0, start).pf(1, step).pu(2, 1))
}

/// One dispatch over every element of `id`; `params` sets the op's parameter words.
fn run(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, params: impl FnOnce(Push) -> Push) -> Result<()> {
    let n = g.node(id);
    let d = enc.operand(g, id)?;
    let push = params(Push::new(ne32(n)).d(&d.arg));
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Fill, [&d.buf, &d.buf, &d.buf, &d.buf], &push, groups)
}
