//! Op families, one module per family (same names as `crates/cpu/src/ops/` and `shaders/`): each
//! says exactly which nodes it runs (`supports`) and records their dispatches (`encode`).

mod binary;
mod copy;
mod cumsum;
mod fill;
mod mul_mat;
mod norm;
mod random;
mod reduce;
mod rope;
mod rows;
mod scatter;
mod softmax;
mod sort;
mod unary;

use crate::encoder::Encoder;
use graph::{DType, Graph, Node, NodeId, Op};
use sched::BackendResult;

/// Largest element count one tensor may have (32-bit indexing in the shaders).
pub(crate) const MAX_ELEMS: usize = u32::MAX as usize / 4;

/// True when every byte offset and stride of `n` is a multiple of its element size and its
/// element count fits the shaders' 32-bit indexing.
pub(crate) fn addressable(n: &Node) -> bool {
    let es = n.dtype.size();
    n.layout.ne.numel() <= MAX_ELEMS
        && n.layout.offset.is_multiple_of(es)
        && n.layout.nb.iter().all(|b| b.is_multiple_of(es))
}

/// True when `n` is contiguous.
pub(crate) fn contiguous(n: &Node) -> bool {
    n.layout.is_contiguous(n.dtype)
}

/// The `[u32; 4]` shape of `n` (callers checked [`addressable`]).
pub(crate) fn ne32(n: &Node) -> [u32; 4] {
    n.layout.ne.0.map(|x| x as u32)
}

/// Float dtypes the shaders load and store.
pub(crate) fn float(d: DType) -> bool {
    d.is_float()
}

/// Whether the Vulkan backend runs `id` (exact: only what is implemented and tested).
pub(crate) fn supports(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    if n.op.is_view() || matches!(n.op, Op::Input) {
        return true;
    }
    if !addressable(n) || n.srcs.iter().any(|&s| !addressable(g.node(s))) {
        return false;
    }
    match n.op {
        Op::Input | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => true,
        Op::Cont | Op::Cast => copy::supports(g, n),
        Op::Unary(_) | Op::Scale { .. } | Op::Clamp { .. } => unary::supports(g, n),
        Op::Binary(_) | Op::Compare(_) | Op::Where => binary::supports(g, n),
        Op::Fill { .. } | Op::Arange { .. } => fill::supports(g, n),
        Op::GetRows | Op::SetRows => rows::supports(g, n),
        Op::ScatterAdd => scatter::supports(g, n),
        Op::MulMat => mul_mat::supports(g, n),
        Op::RmsNorm { .. } => norm::supports(g, n),
        Op::Rope { .. } => rope::supports(g, n),
        Op::SoftMax { .. } => softmax::supports(g, n),
        Op::SumRows | Op::MaxRows | Op::Argmax => reduce::supports(g, n),
        Op::Argsort { .. } | Op::TopK { .. } => sort::supports(g, n),
        Op::Cumsum => cumsum::supports(g, n),
        Op::RandomUniform { .. } => random::supports(g, n),
    }
}

/// Records node `id`'s dispatches.
pub(crate) fn encode(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> BackendResult<()> {
    enc.at(id);
    let n = g.node(id);
    if !supports(g, id) {
        return Err(enc.fail(g, format!("not supported by the Vulkan backend: {}", g.describe(id))));
    }
    let _span = tracing::trace_span!("vulkan_node", node = %id, op = n.op.name()).entered();
    match n.op {
        Op::Input | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => Ok(()),
        Op::Cont | Op::Cast => copy::encode(enc, g, id),
        Op::Unary(_) | Op::Scale { .. } | Op::Clamp { .. } => unary::encode(enc, g, id),
        Op::Binary(_) | Op::Compare(_) | Op::Where => binary::encode(enc, g, id),
        Op::Fill { .. } | Op::Arange { .. } => fill::encode(enc, g, id),
        Op::GetRows | Op::SetRows => rows::encode(enc, g, id),
        Op::ScatterAdd => scatter::encode(enc, g, id),
        Op::MulMat => mul_mat::encode(enc, g, id),
        Op::RmsNorm { .. } => norm::encode(enc, g, id),
        Op::Rope { .. } => rope::encode(enc, g, id),
        Op::SoftMax { .. } => softmax::encode(enc, g, id),
        Op::SumRows | Op::MaxRows | Op::Argmax => reduce::encode(enc, g, id),
        Op::Argsort { .. } | Op::TopK { .. } => sort::encode(enc, g, id),
        Op::Cumsum => cumsum::encode(enc, g, id),
        Op::RandomUniform { .. } => random::encode(enc, g, id),
    }
}
