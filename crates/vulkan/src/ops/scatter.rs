//! ScatterAdd (`shaders/copy.comp` then `shaders/scatter.comp`): copy `base` into the result, then
//! one invocation per row adds its values in order (deterministic, no float atomics), in
//! segments of [`SEGMENT`] values, one dispatch each.

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{Graph, Node, NodeId};

/// Values per row and dispatch: lavapipe silently ends a loop after 65,535 iterations in one
/// dispatch (found with a 151,936-entry row), so a longer row is added in consecutive dispatches
/// (ordered by the encoder's barriers: the same sums in the same order).
const SEGMENT: usize = 16_384;

pub(super) fn supports(_g: &Graph, n: &Node) -> bool {
    contiguous(n)
}

pub(super) fn scatter_add(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let base = enc.operand(g, n.srcs[0])?;
    let idn = g.node(n.srcs[1]);
    let ids = enc.operand(g, n.srcs[1])?;
    let vn = g.node(n.srcs[2]);
    let vals = enc.operand(g, n.srcs[2])?;
    let d = enc.operand(g, id)?;
    let copy = Push::new(ne32(n)).a(&base.arg).d(&d.arg);
    enc.dispatch(
        ShaderId::Copy,
        [&base.buf, &base.buf, &base.buf, &d.buf],
        &copy,
        grid(n.layout.ne.numel() as u64, 256)?,
    )?;
    let constant = vn.layout.ne.numel() == 1 && idn.layout.ne.numel() != 1;
    let groups = grid(n.layout.ne.nrows() as u64, 64)?;
    let m = idn.layout.ne[0];
    for start in (0..m).step_by(SEGMENT) {
        let end = (start + SEGMENT).min(m);
        let push = Push::new(ne32(n))
            .b(&ids.arg)
            .c(&vals.arg)
            .d(&d.arg)
            .pu(0, end as u32)
            .pu(1, u32::from(constant))
            .pu(2, start as u32);
        enc.dispatch(ShaderId::Scatter, [&d.buf, &ids.buf, &vals.buf, &d.buf], &push, groups)?;
    }
    Ok(())
}
