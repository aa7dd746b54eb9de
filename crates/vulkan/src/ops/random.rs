//! RandomUniform (`shaders/random.comp`), bit-identical to `graph::philox::uniform`, and
//! Categorical (the same file with `CATEGORICAL`), SpecVerify (with `CATEGORICAL` and `VERIFY`:
//! the categorical draw with a draft entry) and SpecVerifySampled (with `CATEGORICAL` and
//! `SAMPLED`: a draft drawn from a distribution `q`, its acceptance test and residual draw): see
//! the shader's header for the algorithm.
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
use crate::push::{Push, TensorArg, dtype_code};
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
    let ids = matches!(n.op, graph::Op::SpecVerify { ids: true, .. } | graph::Op::Categorical { ids: true, .. });
    draw_sources_ok(g, n, 2, ids)
}

/// What every draw needs (a contiguous result; f32 logits with contiguous rows of at most 2^23
/// entries; i32 keys with contiguous rows) and its optional source `srcs[aux]` with contiguous
/// rows: f32 params, or with `ids` the i32 token ids.
fn draw_sources_ok(g: &Graph, n: &Node, aux: usize, ids: bool) -> bool {
    let (x, k) = (g.node(n.srcs[0]), g.node(n.srcs[1]));
    let aux_dtype = if ids { DType::I32 } else { DType::F32 };
    let aux_ok = n.srcs.get(aux).is_none_or(|&p| {
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
/// with `CATEGORICAL`, and `VERIFY`), exact 64-bit fixed-point sums; a Categorical row longer than
/// [`SEGMENT`] is spread over many workgroups ([`draw_segmented`], the same result). Push word 1: bit 0, a params
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
    let rows = x.layout.ne.nrows();
    let segments = enc.segments(x.layout.ne[0], SEGMENT);
    if !verify && segments > 1 {
        return draw_segmented(enc, push, [&a.buf, &k.buf, c_buf, &d.buf], rows, segments);
    }
    let groups = grid(rows as u64, 1)?;
    let shader = if verify { ShaderId::SpecVerify } else { ShaderId::Categorical };
    enc.dispatch(shader, [&a.buf, &k.buf, c_buf, &d.buf], &push, groups)
}

/// Entries per workgroup of the segmented draw (`SEG` in `shaders/random_segmented.glsl`).
const SEGMENT: usize = 8192;

/// The scratch slot of the segmented draw's per-segment entries and per-row records.
const SEGMENTED_SLOT: usize = 6;

/// Categorical over rows longer than [`SEGMENT`]: four dispatches of `CategoricalSeg` (segment
/// maxima, segment sums or first maxima, each row's target segment, the rescan), a scratch of four
/// words per segment and per row between them. `push` is the one-workgroup draw's.
fn draw_segmented(
    enc: &mut Encoder<'_>,
    push: Push,
    [a, k, c, d]: [&vulkano::buffer::Subbuffer<[u8]>; 4],
    rows: usize,
    segments: usize,
) -> Result<()> {
    let scratch = enc.scratch(SEGMENTED_SLOT, (rows * segments + rows) * 16)?;
    let at_zero = |mut p: Push| {
        p.d_off = 0;
        p
    };
    let pass = |p: Push, pass: u32| p.pu(2, pass | (segments as u32) << 2);
    let per_segment = grid((rows * segments) as u64, 1)?;
    let per_row = grid(rows as u64, 1)?;
    let sh = ShaderId::CategoricalSeg;
    enc.dispatch(sh, [a, k, c, &scratch], &pass(at_zero(push), 0), per_segment)?;
    enc.dispatch(sh, [a, k, c, &scratch], &pass(at_zero(push), 1), per_segment)?;
    enc.dispatch(sh, [a, k, c, &scratch], &pass(at_zero(push), 2), per_row)?;
    let mut last = pass(push, 3);
    last.b_off = 0;
    enc.dispatch(sh, [a, &scratch, c, d], &last, per_row)
}

/// The most `(token, weight)` pairs of a sampled draft's distribution the shader holds per row.
const MAX_Q: usize = 512;

/// The scratch slot of SpecVerifySampled's packed keys and `q`.
const SAMPLED_SLOT: usize = 4;

/// SpecVerifySampled: [`supports_draw`]'s logits, keys and aux (here the fifth source), contiguous
/// i32 `q_ids` and f32 `q_probs` rows of at most [`MAX_Q`] pairs, and a scratch addressable by
/// 32-bit offsets.
pub(super) fn supports_verify_sampled(g: &Graph, n: &Node) -> bool {
    let (x, qi, qp) = (g.node(n.srcs[0]), g.node(n.srcs[2]), g.node(n.srcs[3]));
    let ids = matches!(n.op, graph::Op::SpecVerifySampled { ids: true, .. });
    let m = qi.layout.ne[0];
    let rows = x.layout.ne.nrows();
    draw_sources_ok(g, n, 4, ids)
        && qi.dtype == DType::I32
        && qi.layout.rows_contiguous(qi.dtype)
        && qp.dtype == DType::F32
        && qp.layout.rows_contiguous(qp.dtype)
        && (1..=MAX_Q).contains(&m)
        && (5 + 2 * m).checked_mul(rows).and_then(|w| w.checked_mul(4)).is_some_and(|b| u32::try_from(b).is_ok())
}

/// SpecVerifySampled: three copies (`shaders/copy.comp`) pack the keys, the `q` ids and the `q`
/// weights into one scratch (the draw's shader has four bindings), then one workgroup per row
/// (`shaders/random.comp` with `CATEGORICAL` and `SAMPLED`). Push word 1 as for [`draw`]
/// (bit 0 params, bit 1 ids, in the fifth source), word 2 the pairs per row.
pub(super) fn verify_sampled(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, stream: u32, ids: bool) -> Result<()> {
    let n = g.node(id);
    let x = g.node(n.srcs[0]);
    let rows = x.layout.ne.nrows();
    let m = g.node(n.srcs[2]).layout.ne[0];
    // `supports_verify_sampled` checked that the scratch's bytes fit 32 bits.
    let (Ok(rows32), Ok(m32), Ok(_)) = (u32::try_from(rows), u32::try_from(m), u32::try_from((5 + 2 * m) * rows * 4))
    else {
        return Err(enc.fail(g, crate::error::NodeError::Unsupported { description: g.describe(id) }));
    };
    let scratch = enc.scratch(SAMPLED_SLOT, (5 + 2 * m) * rows * 4)?;
    let mut at = 0u32;
    for &src in &n.srcs[1..4] {
        let s = g.node(src);
        let op = enc.operand(g, src)?;
        let ne = ne32(s);
        let len = ne[0] * rows32;
        let nb = [4, ne[0] * 4, len * 4, len * 4];
        let dst = TensorArg { off: at * 4, ne, nb, dt: op.arg.dt };
        let push = Push::new(ne).a(&op.arg).d(&dst);
        enc.dispatch(ShaderId::Copy, [&op.buf, &op.buf, &op.buf, &scratch], &push, grid(u64::from(len), 256)?)?;
        at += len;
    }
    let a = enc.operand(g, n.srcs[0])?;
    let p = n.srcs.get(4).map(|&p| enc.operand(g, p)).transpose()?;
    let d = enc.operand(g, id)?;
    let b_arg =
        TensorArg { off: 0, ne: [5, rows32, 1, 1], nb: [4, 20, 20 * rows32, 20 * rows32], dt: dtype_code(DType::I32) };
    let mut push = Push::new(ne32(x)).a(&a.arg).b(&b_arg).d(&d.arg).pu(0, stream).pu(2, m32);
    if let Some(p) = &p {
        push = push.c(&p.arg).pu(1, if ids { 2 } else { 1 });
    }
    let c_buf = p.as_ref().map_or(&scratch, |p| &p.buf);
    let groups = grid(rows as u64, 1)?;
    enc.dispatch(ShaderId::SpecVerifySampled, [&a.buf, &scratch, c_buf, &d.buf], &push, groups)
}
