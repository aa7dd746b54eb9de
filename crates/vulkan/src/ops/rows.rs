//! GetRows and SetRows (`shaders/rows.comp`). An id outside the indexed tensor reads zeros
//! (get_rows) or is skipped (set_rows) and sets the node's status word, which the backend reports
//! as a `BackendError::Compute` at the next synchronisation point (as the CPU backend's error).

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, Node, NodeId};

/// GetRows: a contiguous result and i32 ids.
pub(super) fn supports_get_rows(g: &Graph, n: &Node) -> bool {
    contiguous(n) && g.node(n.srcs[1]).dtype == DType::I32
}

/// SetRows: i32 ids (the result is the destination, in place, in its own layout).
pub(super) fn supports_set_rows(g: &Graph, n: &Node) -> bool {
    g.node(n.srcs[2]).dtype == DType::I32
}

/// GetRows: the rows of `src` named by `ids`.
pub(super) fn get_rows(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let src = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let ids = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let (status, word) = enc.status_word(g)?;
    let push = Push::new(ne32(n)).a(&a.arg).b(&ids.arg).d(&d.arg).pu(0, src.layout.ne[1] as u32).pu(1, word);
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Rows, [&a.buf, &ids.buf, &status, &d.buf], &push, groups)
}

/// SetRows: writes the rows of `vals` into the rows of the destination named by `ids`. The
/// destination is the node itself (its layout is dst's, its storage dst's).
pub(super) fn set_rows(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let dst = enc.operand(g, n.srcs[0])?;
    let vals = g.node(n.srcs[1]);
    let v = enc.operand(g, n.srcs[1])?;
    let ids = enc.operand(g, n.srcs[2])?;
    let (status, word) = enc.status_word(g)?;
    let push =
        Push::new(ne32(vals)).a(&dst.arg).b(&v.arg).c(&ids.arg).pu(0, n.layout.ne[1] as u32).pu(1, word).pu(2, 1);
    let groups = grid(vals.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::Rows, [&dst.buf, &v.buf, &ids.buf, &status], &push, groups)
}
