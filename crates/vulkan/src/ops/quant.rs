//! The ops that read ggml's block-quantized formats (`q8_0`, `q4_0`, `q4_1`; `shaders/quant.comp`),
//! the counterpart of the CPU's `ops/quant.rs`: `get_rows` from a quantized table (rows
//! dequantized to f32, exactly as ggml's `dequantize_row_*`) and `mul_mat` with a quantized weight
//! times f32 `b` (tiled as `mul_mat.rs`: a workgroup per 4 x 4 tile of the result, the weights
//! dequantized as they are read, never expanded in memory). An id outside the table reads zeros and sets the node's status word (as
//! `rows.rs`).
//!
//! The products are summed in f32 over the dequantized weights, where the CPU (like ggml) first
//! rounds `b`'s columns to 8-bit blocks: the two agree within that rounding (`amax_block / 254`
//! per element of `b`), exactly when `b` is representable in those blocks.

use crate::encoder::{Encoder, grid};
use crate::error::{NodeError, Result};
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::{ShaderId, variant};
use graph::{DType, Graph, Node, NodeId};

/// The shader's mode word (`P2`).
const GET_ROWS: u32 = 0;
const MUL_MAT: u32 = 1;

/// A quantized operand as the shader reads it: a contiguous leaf (the builder's rule for
/// quantized tensors) whose rows start at even bytes (its f16 scales are read as half words).
fn readable(q: &Node) -> bool {
    q.dtype.is_quantized() && contiguous(q) && q.layout.offset.is_multiple_of(2)
}

/// GetRows from a quantized table: f32 result, contiguous, i32 ids.
pub(super) fn supports_get_rows(g: &Graph, n: &Node) -> bool {
    readable(g.node(n.srcs[0])) && n.dtype == DType::F32 && contiguous(n) && g.node(n.srcs[1]).dtype == DType::I32
}

/// MulMat with a quantized weight: f32 `b` with contiguous rows, f32 contiguous result, `b`'s batch
/// dimensions multiples of the weight's (ggml's broadcast).
pub(super) fn supports_mul_mat(g: &Graph, n: &Node) -> bool {
    let (a, b) = (g.node(n.srcs[0]), g.node(n.srcs[1]));
    readable(a)
        && b.dtype == DType::F32
        && b.layout.rows_contiguous(b.dtype)
        && n.dtype == DType::F32
        && contiguous(n)
        && n.layout.ne[2].is_multiple_of(a.layout.ne[2])
        && n.layout.ne[3].is_multiple_of(a.layout.ne[3])
}

/// The operand of quantized source `src` of node `id`, refused if its bound offset is odd (the
/// shader reads the scales as half words).
fn quantized_operand(enc: &Encoder<'_>, g: &Graph, id: NodeId, src: NodeId) -> Result<crate::encoder::Operand> {
    let a = enc.operand(g, src)?;
    if !a.arg.off.is_multiple_of(2) {
        return Err(enc.fail(g, NodeError::Unsupported { description: g.describe(id) }));
    }
    Ok(a)
}

/// GetRows: rows of the quantized table named by the ids, dequantized.
pub(super) fn get_rows(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let src = g.node(n.srcs[0]);
    let a = quantized_operand(enc, g, id, n.srcs[0])?;
    let ids = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let (status, word) = enc.status_word(g)?;
    let push =
        Push::new(ne32(n)).a(&a.arg).b(&ids.arg).d(&d.arg).pu(0, src.layout.ne[1] as u32).pu(1, word).pu(2, GET_ROWS);
    let groups = grid(n.layout.ne.numel() as u64, u64::from(variant(ShaderId::Quant).wg))?;
    enc.dispatch(ShaderId::Quant, [&a.buf, &ids.buf, &status, &d.buf], &push, groups)
}

/// MulMat: quantized weights times f32 `b`.
pub(super) fn mul_mat(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let an = g.node(n.srcs[0]);
    let a = quantized_operand(enc, g, id, n.srcs[0])?;
    let b = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let mut push = Push::new(ne32(n)).a(&a.arg).b(&b.arg).d(&d.arg).pu(0, an.layout.ne[0] as u32).pu(2, MUL_MAT);
    push.c_ne = ne32(an);
    let shader = if enc.subgroups() { ShaderId::QuantSg } else { ShaderId::Quant };
    enc.dispatch(shader, [&a.buf, &b.buf, &a.buf, &d.buf], &push, super::mul_mat::tile_grid(n)?)
}
