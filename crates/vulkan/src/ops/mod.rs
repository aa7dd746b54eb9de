//! Op families, one module per family (same names as `crates/cpu/src/ops/` and `shaders/`): each
//! says exactly which nodes it runs (`supports*`) and records their dispatches. The exhaustive
//! `match`es on [`Op`] are here (`supports` and `encode`, after a short one that sends quantized
//! operands to the `quant` family): they hand each family function the op's typed parameters, so
//! no family matches on `Op` again (`sample::needs_float64` only asks which op a node is).

mod binary;
mod copy;
mod cumsum;
mod fill;
mod list_filter;
mod mul_mat;
mod norm;
mod penalize;
mod quant;
mod random;
mod reduce;
mod rope;
mod rows;
mod sample;
mod scatter;
mod softmax;
mod sort;
mod token_mask;
mod unary;

use crate::encoder::Encoder;
use crate::error::{NodeError, Result};
use graph::{DType, Graph, Node, NodeId, Op};

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
    // Quantized tensors (weights, leaves) are read by the `quant` family only: get_rows and mul_mat.
    if n.srcs.iter().any(|&s| g.node(s).dtype.is_quantized()) {
        if !addressable(n) || n.srcs.iter().any(|&s| !addressable(g.node(s))) {
            return false;
        }
        return match n.op {
            Op::GetRows => quant::supports_get_rows(g, n),
            Op::MulMat => quant::supports_mul_mat(g, n),
            _ => false,
        };
    }
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
        Op::Binary(_) => binary::supports_binary(g, n),
        Op::Compare(_) => binary::supports_compare(g, n),
        Op::Where => binary::supports_where(g, n),
        Op::Fill { .. } | Op::Arange { .. } => fill::supports(g, n),
        Op::GetRows => rows::supports_get_rows(g, n),
        Op::SetRows => rows::supports_set_rows(g, n),
        Op::ScatterAdd => scatter::supports(g, n),
        Op::MulMat => mul_mat::supports(g, n),
        Op::RmsNorm { .. } => norm::supports(g, n),
        Op::Rope(_) => rope::supports(g, n),
        Op::SoftMax { .. } => softmax::supports(g, n),
        Op::SumRows | Op::MaxRows | Op::Argmax => reduce::supports(g, n),
        // (The masked form, a grammar's mask fused into the top-k, runs on the CPU only: a
        // sampling tail lowers the mask and the top-k apart where it is refused.)
        Op::TopK { masked: true, .. } => false,
        Op::Argsort { .. } | Op::TopK { .. } => sort::supports(g, n),
        Op::Cumsum => cumsum::supports(g, n),
        Op::RandomUniform { .. } => random::supports(g, n),
        Op::Categorical { .. } | Op::SpecVerify { .. } => random::supports_draw(g, n),
        Op::TopKTopPSample(_) => sample::supports_top_k_top_p(g, n),
        Op::RandomSample { f64_rows, .. } => sample::supports_random(g, n, f64_rows),
        Op::TopPMask => sort::supports_top_p_mask(g, n),
        Op::SpecVerifySampled { .. } => random::supports_verify_sampled(g, n),
        Op::ListFilter(_) => list_filter::supports(g, n),
        Op::Penalize => penalize::supports(g, n),
        Op::TokenMask { .. } => token_mask::supports(g, n),
    }
}

/// True when `n`'s first source is quantized (its get_rows or mul_mat belongs to the `quant` family).
fn quantized_a(g: &Graph, n: &Node) -> bool {
    n.srcs.first().is_some_and(|&s| g.node(s).dtype.is_quantized())
}

/// Whether node `id` needs the device feature `shaderFloat64` (the backend declines it without).
pub(crate) fn needs_float64(g: &Graph, id: NodeId) -> bool {
    sample::needs_float64(g, id)
}

/// Records node `id`'s dispatches: the one map from [`Op`] to the family function, which gets the
/// op's parameters typed.
pub(crate) fn encode(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    enc.at(id);
    let n = g.node(id);
    if !supports(g, id) {
        return Err(enc.fail(g, NodeError::Unsupported { description: g.describe(id) }));
    }
    let _span = tracing::trace_span!("vulkan_node", node = %id, op = n.op.name()).entered();
    match n.op {
        Op::Input | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => Ok(()),
        Op::Cont | Op::Cast => copy::cont_cast(enc, g, id),
        Op::Unary(u) => unary::unary(enc, g, id, u),
        Op::Scale { scale, bias } => unary::scale(enc, g, id, scale, bias),
        Op::Clamp { min, max } => unary::clamp(enc, g, id, min, max),
        Op::Binary(b) => binary::binary(enc, g, id, b),
        Op::Compare(c) => binary::compare(enc, g, id, c),
        Op::Where => binary::where_(enc, g, id),
        Op::Fill { value } => fill::fill(enc, g, id, value),
        Op::Arange { start, step } => fill::arange(enc, g, id, start, step),
        Op::GetRows if quantized_a(g, n) => quant::get_rows(enc, g, id),
        Op::GetRows => rows::get_rows(enc, g, id),
        Op::SetRows => rows::set_rows(enc, g, id),
        Op::ScatterAdd => scatter::scatter_add(enc, g, id),
        Op::MulMat if quantized_a(g, n) => quant::mul_mat(enc, g, id),
        Op::MulMat => mul_mat::mul_mat(enc, g, id),
        Op::RmsNorm { eps } => norm::rms_norm(enc, g, id, eps),
        Op::Rope(ref p) => rope::rope(enc, g, id, p),
        Op::SoftMax { scale } => softmax::soft_max(enc, g, id, scale),
        Op::SumRows => reduce::sum_rows(enc, g, id),
        Op::MaxRows => reduce::max_rows(enc, g, id),
        Op::Argmax => reduce::argmax(enc, g, id),
        Op::Argsort { order } => sort::argsort(enc, g, id, order),
        Op::TopK { k, .. } => sort::top_k(enc, g, id, k as usize),
        Op::Cumsum => cumsum::cumsum(enc, g, id),
        Op::RandomUniform { stream } => random::random_uniform(enc, g, id, stream),
        Op::Categorical { stream, ids } => random::draw(enc, g, id, stream, false, ids),
        Op::SpecVerify { stream, ids } => random::draw(enc, g, id, stream, true, ids),
        Op::TopPMask => sort::top_p_mask(enc, g, id),
        Op::TopKTopPSample(a) => sample::top_k_top_p_sample(enc, g, id, a),
        Op::RandomSample { f64_rows, .. } => sample::random_sample(enc, g, id, f64_rows),
        Op::SpecVerifySampled { stream, ids } => random::verify_sampled(enc, g, id, stream, ids),
        Op::ListFilter(stages) => list_filter::list_filter(enc, g, id, stages),
        Op::Penalize => penalize::penalize(enc, g, id),
        Op::TokenMask { ids } => token_mask::token_mask(enc, g, id, ids),
    }
}
