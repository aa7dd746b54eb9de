//! ListFilter (`shaders/list_filter.comp`): the list stages (top-p, min-p, temperature) on each
//! row's candidate list, one invocation per row walking the row in order, the stage kinds in the
//! push constants (2 bits each in `P0`, their count in `P1`).

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, ListStages, Node, NodeId};

/// Invocations per workgroup (a row each).
const WG: u64 = 64;

/// f32 lists with contiguous rows of at most [`ListStages::MAX_LEN`] entries (the builder's
/// bound, which keeps a row's passes within lavapipe's loop limit), f32 params with contiguous
/// rows, a contiguous result.
pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let (x, p) = (g.node(n.srcs[0]), g.node(n.srcs[1]));
    contiguous(n)
        && x.dtype == DType::F32
        && x.layout.rows_contiguous(x.dtype)
        && x.layout.ne[0] <= ListStages::MAX_LEN
        && p.dtype == DType::F32
        && p.layout.rows_contiguous(p.dtype)
}

pub(super) fn list_filter(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, stages: ListStages) -> Result<()> {
    let n = g.node(id);
    let x = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let p = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let kinds = stages.as_slice().iter().enumerate().fold(0u32, |w, (i, s)| w | s.code() << (2 * i));
    let push = Push::new(ne32(x)).a(&a.arg).b(&p.arg).d(&d.arg).pu(0, kinds).pu(1, stages.len() as u32);
    let groups = grid(x.layout.ne.nrows() as u64, WG)?;
    enc.dispatch(ShaderId::ListFilter, [&a.buf, &p.buf, &p.buf, &d.buf], &push, groups)
}
