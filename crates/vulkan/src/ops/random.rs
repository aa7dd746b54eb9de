//! RandomUniform (`shaders/random.comp`), bit-identical to `graph::philox::uniform`, and
//! Categorical (the same file with `CATEGORICAL`) and SpecVerify (with `CATEGORICAL` and `VERIFY`:
//! the categorical draw with a draft entry): see the shader's header for the algorithm.
//!
//! Categorical keeps its sums as 64-bit fixed point in pairs of 32-bit words (`uaddCarry`,
//! `umulExtended`; no `shaderInt64` or `shaderFloat64`): weights `floor(w 2^40)`, so rows of up to
//! 2^23 entries (checked in `supports_draw`; longer rows fall back to another backend).
//! The index equals the CPU's except where `u W` falls near a bracket end, within the
//! exponentials' last bits (about 1e-7 of a weight) plus under `n 2^-40` of the maximum weight
//! (the floors); a weight below `2^-40` of the maximum is never drawn.

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

/// The longest row the fixed-point sums hold: `2^23` weights of at most `2^40` (plus a rounding
/// margin) stay below `2^64`.
const MAX_CATEGORICAL_ROW: usize = 1 << 23;

/// Categorical and SpecVerify: f32 logits with contiguous rows of at most 2^23 entries, i32 keys
/// (`[4, rows..]`, or `[5, rows..]` with the draft), and the optional third source with contiguous
/// rows: f32 params, or with `ids` the i32 token ids.
pub(super) fn supports_draw(g: &Graph, n: &Node) -> bool {
    let (x, k) = (g.node(n.srcs[0]), g.node(n.srcs[1]));
    let aux_dtype = match n.op {
        graph::Op::SpecVerify { ids: true, .. } | graph::Op::Categorical { ids: true, .. } => DType::I32,
        _ => DType::F32,
    };
    let aux_ok = n.srcs.get(2).is_none_or(|&p| {
        let p = g.node(p);
        p.dtype == aux_dtype && p.layout.rows_contiguous(p.dtype)
    });
    contiguous(n)
        && x.layout.ne[0] <= MAX_CATEGORICAL_ROW
        && x.dtype == DType::F32
        && x.layout.rows_contiguous(x.dtype)
        && k.dtype == DType::I32
        && k.layout.rows_contiguous(k.dtype)
        && aux_ok
}

/// Categorical (`verify` false) or SpecVerify (true): one workgroup per row (`shaders/random.comp`
/// with `CATEGORICAL`, and `VERIFY`), exact 64-bit fixed-point sums. Push word 1: bit 0, a params
/// source; bit 1, an ids source (the result is then the chosen entry's id).
pub(super) fn draw(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, stream: u32, verify: bool, ids: bool) -> Result<()> {
    let n = g.node(id);
    let x = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let k = enc.operand(g, n.srcs[1])?;
    let p = n.srcs.get(2).map(|&p| enc.operand(g, p)).transpose()?;
    let d = enc.operand(g, id)?;
    let mut push = Push::new(ne32(x)).a(&a.arg).b(&k.arg).d(&d.arg).pu(0, stream);
    if let Some(p) = &p {
        push = push.c(&p.arg).pu(1, if ids { 2 } else { 1 });
    }
    let c_buf = p.as_ref().map_or(&k.buf, |p| &p.buf);
    let groups = grid(x.layout.ne.nrows() as u64, 1)?;
    let shader = if verify { ShaderId::SpecVerify } else { ShaderId::Categorical };
    enc.dispatch(shader, [&a.buf, &k.buf, c_buf, &d.buf], &push, groups)
}

/// SpecVerifySampled (a draft drawn from a distribution `q`): not on Vulkan in this commit; the
/// scheduler runs it on another backend, and a sampling tail finishes such rows' `dist` on the CPU.
pub(super) fn supports_verify_sampled(_g: &Graph, _n: &Node) -> bool {
    false
}

/// See [`supports_verify_sampled`]: always the unsupported-op error.
pub(super) fn verify_sampled(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, _stream: u32, _ids: bool) -> Result<()> {
    Err(enc.fail(g, crate::error::NodeError::Unsupported { description: g.describe(id) }))
}
