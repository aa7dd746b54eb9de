//! RandomUniform (`shaders/random.comp`), bit-identical to `graph::philox::uniform`, and
//! Categorical (the same file with `CATEGORICAL`): see the shader's header for the algorithm.

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

/// Categorical: f32 logits with contiguous rows, i32 keys `[4, rows..]`, optional f32 params
/// `[2, rows..]` with contiguous rows.
pub(super) fn supports_categorical(g: &Graph, n: &Node) -> bool {
    let (x, k) = (g.node(n.srcs[0]), g.node(n.srcs[1]));
    let params_ok = n.srcs.get(2).is_none_or(|&p| {
        let p = g.node(p);
        p.dtype == DType::F32 && p.layout.rows_contiguous(p.dtype)
    });
    contiguous(n)
        && x.dtype == DType::F32
        && x.layout.rows_contiguous(x.dtype)
        && k.dtype == DType::I32
        && k.layout.rows_contiguous(k.dtype)
        && params_ok
}

/// One workgroup per row (`shaders/random.comp` with `CATEGORICAL`): exact 64-bit fixed-point sums.
pub(super) fn categorical(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, stream: u32) -> Result<()> {
    let n = g.node(id);
    let x = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let k = enc.operand(g, n.srcs[1])?;
    let p = n.srcs.get(2).map(|&p| enc.operand(g, p)).transpose()?;
    let d = enc.operand(g, id)?;
    let mut push = Push::new(ne32(x)).a(&a.arg).b(&k.arg).d(&d.arg).pu(0, stream);
    if let Some(p) = &p {
        push = push.c(&p.arg).pu(1, 1);
    }
    let c_buf = p.as_ref().map_or(&k.buf, |p| &p.buf);
    let groups = grid(x.layout.ne.nrows() as u64, 1)?;
    enc.dispatch(ShaderId::Categorical, [&a.buf, &k.buf, c_buf, &d.buf], &push, groups)
}
