//! The fused sampling ops (family `sample`, `shaders/sample.comp`): `top_k_top_p_sample` in
//! `3 + ceil(log2(ceil(V / 2048)))` dispatches: one copying each row's parameters into a scratch
//! buffer, the argsort of every row (value descending, index ascending: `sort.comp`'s block and
//! merge passes, into the same scratch), and one workgroup per row computing the CPU kernel's
//! result bit for bit (see the shader's header). It needs `shaderFloat64` (its sums and ratios are
//! the CPU's f64 ones): without it the backend declines the op and the scheduler places it on the
//! CPU. `random_sample` likewise in `3 + ceil(log2(ceil(n / 2048)))` dispatches: the parameters,
//! the argsort, and one workgroup per row (the shader's `RANDOM` variant) computing the CPU
//! kernel's f64 arithmetic bit for bit (`kernels::exp64`, lane sums and chunked running sums);
//! rows of f64 values (`f64_rows`) are argsorted on their 64-bit order key (`sort.comp`'s `KEY64`
//! passes), see `docs/FUSED.md`.

use crate::encoder::{Encoder, Operand, grid};
use crate::error::{Result, VulkanError};
use crate::ops::{contiguous, float, ne32, sort};
use crate::push::{Push, TensorArg, dtype_code};
use crate::shaders::ShaderId;
use graph::fused::{FusedOutput, PostSample, TopKTopP};
use graph::{DType, Graph, Node, NodeId};

/// Scratch slot of the parameters, sorted indices and ranks (the sort uses slots 0 to 2).
const SLOT: usize = 3;

/// Longest row (the spec's largest vocabulary, 262,144): llvmpipe (lavapipe) stops a SIMD chunk's
/// loops after 65535 iterations in one dispatch, and the shader's chunk of invocations 0-7 walks
/// at most five ordered passes of `V / 32` entries, two strided loops of `V / 256` and 2048 top-K
/// steps (about 45,000 at this bound).
const MAX_ROW: usize = 1 << 18;

/// Whether the op needs the device's `shaderFloat64` (every node this module runs does).
pub(crate) fn needs_float64(g: &Graph, id: NodeId) -> bool {
    matches!(g.node(id).op, graph::Op::TopKTopPSample(_) | graph::Op::RandomSample { .. })
}

/// `top_k_top_p_sample` with 2-D contiguous float logits and a scratch that 32-bit word offsets
/// address.
pub(super) fn supports_top_k_top_p(g: &Graph, n: &Node) -> bool {
    let x = g.node(n.srcs[0]);
    let (v, rows) = (x.layout.ne[0], x.layout.ne.nrows());
    contiguous(n) && float(x.dtype) && x.layout.rows_contiguous(x.dtype) && fits(g, n, v, rows, 2)
}

/// What both ops need of their sources and sizes: rows-contiguous sources, rows of at most
/// [`MAX_ROW`] entries, at most 65,535 rows (one workgroup each), and a scratch of 4 words per row
/// plus `per_entry` words per entry that 32-bit word offsets address.
fn fits(g: &Graph, n: &Node, v: usize, rows: usize, per_entry: usize) -> bool {
    let words = rows.checked_mul(v).and_then(|rv| rv.checked_mul(per_entry)).and_then(|w| w.checked_add(4 * rows));
    n.srcs.iter().all(|&s| g.node(s).layout.rows_contiguous(g.node(s).dtype))
        && v <= MAX_ROW
        && rows <= 65_535
        && words.is_some_and(|w| w <= u32::MAX as usize / 4)
}

/// Records the dispatches (see the module documentation).
pub(super) fn top_k_top_p_sample(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, attrs: TopKTopP) -> Result<()> {
    let n = g.node(id);
    let x = g.node(n.srcs[0]);
    let (v, rows) = (x.layout.ne[0], x.layout.ne.nrows());
    let a = enc.operand(g, n.srcs[0])?;
    let topk = enc.operand(g, n.srcs[1])?;
    let params = enc.operand(g, n.srcs[2])?;
    let q = n.srcs.get(3).map(|&q| enc.operand(g, q)).transpose()?;
    let d = enc.operand(g, id)?;

    // Scratch words: 4 per row of parameters, then the sorted indices, then the ranks.
    let (idx_word, rank_word) = (4 * rows, 4 * rows + rows * v);
    let scratch = pack_and_sort(enc, &topk, &params, &a, ne32(x), rank_word + rows * v, false, false)?;

    let post = match attrs.post {
        PostSample::None => 0,
        PostSample::QSample => 1,
        PostSample::Multinomial => 2,
    };
    let flags = u32::from(attrs.input_is_logits)
        | (u32::from(kernels::has_avx2_fma()) << 1)
        | (post << 2)
        | (u32::from(attrs.output == FusedOutput::Logits) << 4);
    let mut push = Push::new(ne32(x)).a(&a.arg).d(&d.arg).pu(0, flags).pu(1, attrs.ks()).pf(2, attrs.eps);
    if let Some(q) = &q {
        push = push.c(&q.arg);
    }
    push.b_off = 0;
    push.b_ne = [word(idx_word)?, word(rank_word)?, 0, 0];
    let c_buf = q.as_ref().map_or(&scratch, |q| &q.buf);
    enc.dispatch(ShaderId::SampleTopKTopP, [&a.buf, &scratch, c_buf, &d.buf], &push, grid(rows as u64, 1)?)
}

/// `w` as a shader word (offsets and counts), or the error for a row too long to address.
fn word(w: usize) -> Result<u32> {
    u32::try_from(w).map_err(|_| VulkanError::SortRowTooLong { stride: w })
}

/// The first dispatches both fused ops record: the per-row parameters packed into the first
/// `4 rows` words of a scratch buffer of `words` words (`PACK`; `third`: also `random_sample`'s
/// third parameter), then every row of `a` (shape `ne`: `ne[0]` values a row) argsorted, value
/// descending, into the scratch from word `4 rows` on (`key64`: f64 rows as word pairs). Returns
/// the scratch buffer.
#[allow(clippy::too_many_arguments)]
fn pack_and_sort(
    enc: &mut Encoder<'_>,
    topk: &Operand,
    params: &Operand,
    a: &Operand,
    ne: [u32; 4],
    words: usize,
    third: bool,
    key64: bool,
) -> Result<vulkano::buffer::Subbuffer<[u8]>> {
    let (v, rows) = (ne[0] as usize, (ne[1] * ne[2] * ne[3]) as usize);
    let scratch = enc.scratch(SLOT, words * 4)?;
    let pack = Push::new([1, word(rows)?, 1, 1]).a(&topk.arg).b(&params.arg).pu(0, u32::from(third));
    enc.dispatch(
        ShaderId::SamplePack,
        [&topk.buf, &params.buf, &params.buf, &scratch],
        &pack,
        grid(rows as u64, 256)?,
    )?;
    let sorted = Operand {
        buf: scratch.clone(),
        arg: TensorArg {
            off: word(4 * rows * 4)?,
            ne: [word(v)?, word(rows)?, 1, 1],
            nb: [4, word(v * 4)?, word(v * 4 * rows)?, word(v * 4 * rows)?],
            dt: dtype_code(DType::I32),
        },
    };
    sort::sort_rows_by(enc, ne, rows, a, &sorted, v, true, key64)?;
    Ok(scratch)
}

/// `random_sample` with contiguous f32/f16/bf16 rows, or f64 rows as i32 word pairs, of at most
/// [`MAX_ROW`] entries (the shader keeps 1024 chunk totals of 256 ranks in shared memory).
pub(super) fn supports_random(g: &Graph, n: &Node, f64_rows: bool) -> bool {
    let x = g.node(n.srcs[0]);
    let v = if f64_rows { x.layout.ne[0] / 2 } else { x.layout.ne[0] };
    let rows = x.layout.ne.nrows();
    let dtype_ok = if f64_rows { x.dtype == DType::I32 } else { float(x.dtype) };
    contiguous(n) && dtype_ok && x.layout.is_contiguous(x.dtype) && fits(g, n, v, rows, 1)
}

/// Records `random_sample`'s dispatches (see the module documentation).
pub(super) fn random_sample(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, f64_rows: bool) -> Result<()> {
    let n = g.node(id);
    let x = g.node(n.srcs[0]);
    let v = if f64_rows { x.layout.ne[0] / 2 } else { x.layout.ne[0] };
    let rows = x.layout.ne.nrows();
    let a = enc.operand(g, n.srcs[0])?;
    let params = enc.operand(g, n.srcs[1])?;
    let topk = enc.operand(g, n.srcs[2])?;
    let d = enc.operand(g, id)?;

    // Scratch words: 4 per row of parameters (topk, random, topp, temperature), then the sorted
    // indices. Rows as [v, rows] (contiguous: row r starts r row strides in).
    let idx_word = 4 * rows;
    let ne = [word(v)?, word(rows)?, 1, 1];
    let scratch = pack_and_sort(enc, &topk, &params, &a, ne, idx_word + rows * v, true, f64_rows)?;

    let mut push = Push::new(ne).a(&a.arg).d(&d.arg).pu(0, u32::from(f64_rows));
    push.b_off = 0;
    push.b_ne = [word(idx_word)?, 0, 0, 0];
    enc.dispatch(ShaderId::SampleRandom, [&a.buf, &scratch, &scratch, &d.buf], &push, grid(rows as u64, 1)?)
}
