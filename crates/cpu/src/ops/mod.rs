//! The kernels, one module per op family (the same names as the Vulkan host code and shaders), and
//! the `Op` -> kernel map.

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

use crate::error::CpuError;
use crate::tensor::TensorRef;
use graph::{Node, NodeId, Op};

/// One node's compute context: the node, its destination and its sources (in `Op` order).
#[derive(Debug)]
pub(crate) struct K<'a> {
    /// The node's id (for errors).
    #[allow(dead_code)]
    pub id: NodeId,
    /// The node.
    pub node: &'a Node,
    /// Where it writes.
    pub dst: TensorRef,
    /// What it reads.
    pub srcs: &'a [TensorRef],
}

/// Runs the kernel for `k.node.op`.
pub(crate) fn dispatch(k: &K<'_>) -> Result<(), CpuError> {
    match k.node.op {
        Op::Input | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => Ok(()),
        Op::Cont | Op::Cast => copy::cont_cast(k),
        Op::Unary(u) => unary::unary(k, u),
        Op::Scale { scale, bias } => unary::scale(k, scale, bias),
        Op::Clamp { min, max } => unary::clamp(k, min, max),
        Op::Binary(b) => binary::binary(k, b),
        Op::Compare(c) => binary::compare(k, c),
        Op::Where => binary::where_(k),
        Op::Fill { value } => fill::fill(k, value),
        Op::Arange { start, step } => fill::arange(k, start, step),
        Op::GetRows if k.srcs[0].dtype.is_quantized() => quant::get_rows(k),
        Op::GetRows => rows::get_rows(k),
        Op::SetRows => rows::set_rows(k),
        Op::ScatterAdd => scatter::scatter_add(k),
        Op::MulMat if k.srcs[0].dtype.is_quantized() => quant::mul_mat(k),
        Op::MulMat => mul_mat::mul_mat(k),
        Op::RmsNorm { eps } => norm::rms_norm(k, eps),
        Op::Rope(ref p) => rope::rope(k, p),
        Op::SoftMax { scale } => softmax::soft_max(k, scale),
        Op::SumRows => reduce::sum_rows(k),
        Op::MaxRows => reduce::max_rows(k),
        Op::Argmax => reduce::argmax(k),
        Op::Argsort { order } => sort::argsort(k, order),
        Op::TopK { k: n, masked } => sort::top_k(k, n as usize, masked),
        Op::TopPMask => sort::top_p_mask(k),
        Op::SpecVerify { stream, ids } => random::spec_verify(k, stream, ids),
        Op::Cumsum => cumsum::cumsum(k),
        Op::RandomUniform { stream } => random::random_uniform(k, stream),
        Op::Categorical { stream, ids } => random::categorical(k, stream, ids),
        Op::TopKTopPSample(a) => sample::top_k_top_p_sample(k, a),
        Op::RandomSample { f64_rows, .. } => sample::random_sample(k, f64_rows),
        Op::SpecVerifySampled { stream, ids } => random::spec_verify_sampled(k, stream, ids),
        Op::ListFilter(stages) => list_filter::list_filter(k, stages),
        Op::Penalize => penalize::penalize(k),
        Op::TokenMask { ids } => token_mask::token_mask(k, ids),
    }
}

/// Calls `f(row_index, scratch)` for every row of `dst` in parallel blocks, with per-block scratch
/// of `scratch_len` f32 values; `work` is the cost of one row.
pub(crate) fn for_rows(
    dst: &TensorRef,
    work: usize,
    scratch_len: usize,
    f: impl Fn([usize; 3], &mut [f32]) + Sync + Send,
) {
    let d = *dst;
    crate::par::for_blocks(d.nrows(), work, |range| {
        // The thread's kept buffer (zeroed to the length asked for, as a fresh one would be): a
        // tail of small ops would otherwise allocate per node. Taken, so a nested call gets its own.
        let mut scratch = ROW_SCRATCH.take();
        scratch.clear();
        scratch.resize(scratch_len, 0.0);
        for r in range {
            f(d.row_index(r), &mut scratch);
        }
        if scratch.capacity() <= MAX_KEPT_SCRATCH {
            ROW_SCRATCH.set(scratch);
        }
    });
}

/// Largest scratch (f32 values) a thread keeps between [`for_rows`] calls (1 MiB).
const MAX_KEPT_SCRATCH: usize = 1 << 18;

thread_local! {
    /// Each thread's [`for_rows`] scratch, kept from call to call.
    static ROW_SCRATCH: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Runs `f(row, input_row_f32, output_row_f32)` for each row of an element-wise or row-wise op whose
/// first source has the destination's shape (any dtype, any strides) and whose destination is a float
/// tensor; conversions and gathers go through scratch only when needed.
pub(crate) fn map_rows(k: &K<'_>, f: impl Fn([usize; 3], &[f32], &mut [f32]) + Sync + Send) {
    let (s, d) = (k.srcs[0], k.dst);
    let n = d.ne[0];
    let direct_in = s.dtype == graph::DType::F32 && s.ne[0] == n && s.rows_contiguous();
    let direct_out = d.dtype == graph::DType::F32;
    // Scratch only for what needs converting or gathering (a fresh zeroed row per block costs page
    // faults on long rows).
    let need = if direct_in { 0 } else { n } + if direct_out { 0 } else { n };
    for_rows(&d, n, need, |r, scratch| {
        let (a, b) = scratch.split_at_mut(if direct_in { 0 } else { n });
        // SAFETY: rows of `s` are valid for reads; row `r` of `d` is written by this call only.
        unsafe {
            let x: &[f32] = if direct_in {
                s.row::<f32>([r[0] % s.ne[1], r[1] % s.ne[2], r[2] % s.ne[3]])
            } else {
                crate::tensor::gather_f32(&s, r, a);
                a
            };
            if direct_out {
                f(r, x, d.row_mut::<f32>(r));
            } else {
                f(r, x, b);
                crate::tensor::store_f32(d.dtype, d.row_ptr(r), b);
            }
        }
    });
}
