//! SumRows, MaxRows and Argmax (`shaders/reduce.comp`), any row length: one workgroup per row, or,
//! for rows longer than [`SEGMENT`], two passes (each row's segments reduced by their own
//! workgroups into partials in a scratch buffer, then one workgroup per row combining them), so
//! that one long row (a batch-1 logits row) keeps a GPU's multiprocessors busy.

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

/// SumRows (shader op code 0).
pub(super) fn sum_rows(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    run(enc, g, id, 0)
}

/// MaxRows (shader op code 1).
pub(super) fn max_rows(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    run(enc, g, id, 1)
}

/// Argmax (shader op code 2).
pub(super) fn argmax(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    run(enc, g, id, 2)
}

/// Elements per workgroup of the first pass over a long row (a multiple of every workgroup size).
pub(crate) const SEGMENT: usize = 8192;

/// The scratch slot of the partials (see `Encoder::scratch`).
const SLOT: usize = 5;

/// `code` is the shader's op code (`P2` in `reduce.comp`).
fn run(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, code: u32) -> Result<()> {
    let n = g.node(id);
    let src = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    let shader = if enc.subgroups() { ShaderId::ReduceSg } else { ShaderId::Reduce };
    let rows = src.layout.ne.nrows();
    let segments = enc.segments(src.layout.ne[0], SEGMENT);
    if segments <= 1 {
        let push = Push::new(ne32(src)).a(&a.arg).d(&d.arg).pu(2, code);
        return enc.dispatch(shader, [&a.buf, &a.buf, &a.buf, &d.buf], &push, grid(rows as u64, 1)?);
    }
    // Pass 1: a workgroup per segment, two words (value, index) per partial.
    let parts = enc.scratch(SLOT, rows * segments * 8)?;
    let parts_arg = crate::push::TensorArg { off: 0, ..d.arg };
    let mut push = Push::new(ne32(src)).a(&a.arg).d(&parts_arg).pu(0, segments as u32).pu(1, 1).pu(2, code);
    push.c_ne[0] = SEGMENT as u32;
    enc.dispatch(shader, [&a.buf, &a.buf, &a.buf, &parts], &push, grid((rows * segments) as u64, 1)?)?;
    // Pass 2: a workgroup per row combines its partials.
    let push = Push::new(ne32(src)).a(&parts_arg).d(&d.arg).pu(0, segments as u32).pu(1, 2).pu(2, code);
    enc.dispatch(shader, [&parts, &parts, &parts, &d.buf], &push, grid(rows as u64, 1)?)
}
