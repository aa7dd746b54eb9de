//! Argsort and TopK (`shaders/sort.comp`) in `1 + ceil(log2(ceil(n / SORT_BLOCK)))` dispatches:
//! a shared-memory bitonic sort of each block of [`SORT_BLOCK`] entries keeping its first
//! `min(SORT_BLOCK, k)`, then merge passes that pair runs by rank (binary search) and keep the first
//! `k`. No pass sorts a whole row in one workgroup and no workgroup waits on another.
//!
//! TopK on rows longer than a block selects instead. With `k <= 512` (and at least `k` blocks) in
//! 2 dispatches: the smallest key of each block of 64 or more entries (many workgroups), then one
//! workgroup per row takes T, the k-th smallest block minimum (a radix select in shared memory),
//! and finds the winners among the fewer than k blocks below T (a radix select among their entries
//! when they hold k or more) and the blocks at T (ties, in index order, stopping once enough are
//! found): on a 151,936 vocabulary it reads the row once and about 40 blocks again, where one
//! workgroup reading the whole row took 785 µs on an H100. With `k <= SORT_BLOCK` otherwise (6
//! dispatches): four radix-select histogram passes over the row find the k-th key exactly, a
//! compaction pass lists the `k` winners in index order, and one block pass sorts them.
//!
//! TopPMask on rows of at most 8192 entries is one dispatch, a workgroup per row (`TOP_P_PASS`):
//! the nucleus by bisection over the order key on exact 64-bit fixed-point weights, the
//! categorical draw's (see the shader's header). Longer rows take 12 dispatches over segments of
//! 8192 entries (`TOPP_SEG`, `shaders/top_p_segmented.glsl`): the same two keys by a radix select
//! of four 8-bit levels, each a histogram pass over the segments and a selection pass per row,
//! then the ties' counts per segment and the mask, bit for bit the one-workgroup result (on an H100
//! the one-workgroup pass took 4.4 ms at V = 151936: 32 bisection passes over the row).

use crate::encoder::{Encoder, Operand, grid};
use crate::error::{Result, VulkanError};
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::{SORT_BLOCK, ShaderId};
use graph::{DType, Graph, Node, NodeId, SortOrder};

/// Longest row handled (merge-pass grids stay within 65535 x 256 invocations).
const MAX_ROW: usize = 1 << 24;

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let s = g.node(n.srcs[0]);
    contiguous(n)
        && float(s.dtype)
        && s.layout.rows_contiguous(s.dtype)
        && s.layout.ne[0] <= MAX_ROW
        && s.layout.ne.nrows() <= 65_535
}

/// The longest row TopPMask handles: `2^23` weights of at most `2^40` stay below `2^64`.
const MAX_TOP_P_ROW: usize = 1 << 23;

/// TopPMask: f32 values with contiguous rows of at most 2^23 entries, f32 params `[3, rows..]`
/// with contiguous rows, a contiguous result.
pub(super) fn supports_top_p_mask(g: &Graph, n: &Node) -> bool {
    let (x, p) = (g.node(n.srcs[0]), g.node(n.srcs[1]));
    contiguous(n)
        && x.dtype == DType::F32
        && x.layout.rows_contiguous(x.dtype)
        && x.layout.ne[0] <= MAX_TOP_P_ROW
        && p.dtype == DType::F32
        && p.layout.rows_contiguous(p.dtype)
}

/// Entries per segment of the segmented top-p mask.
const TOP_P_SEGMENT: usize = 8192;

/// TopPMask: rows longer than a segment over many workgroups (12 dispatches, see
/// `shaders/top_p_segmented.glsl`), shorter ones (or every row with `Options::whole_rows`) on one
/// workgroup each.
pub(super) fn top_p_mask(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let x = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let p = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let (ne0, rows) = (x.layout.ne[0], x.layout.ne.nrows());
    let push = Push::new(ne32(x)).a(&a.arg).b(&p.arg).d(&d.arg);
    if ne0 > TOP_P_SEGMENT && rows <= 65_535 && !enc.whole_rows() {
        return top_p_mask_segmented(enc, push, [&a.buf, &p.buf, &d.buf], ne0, rows);
    }
    let groups = grid(rows as u64, 1)?;
    enc.dispatch(ShaderId::TopPMask, [&a.buf, &p.buf, &p.buf, &d.buf], &push, groups)
}

/// The segmented top-p mask's dispatches: the segments' maxima, the rows' state, four levels of
/// (histograms per segment, selection per row), the segments' tie counts, the mask.
fn top_p_mask_segmented(
    enc: &mut Encoder<'_>,
    push: Push,
    [a, p, d]: [&vulkano::buffer::Subbuffer<[u8]>; 3],
    ne0: usize,
    rows: usize,
) -> Result<()> {
    let segs = ne0.div_ceil(TOP_P_SEGMENT);
    // Scratch words: 16 of state per row, 2 per (row, segment), 1028 per (row, segment), 1 per
    // (row, segment).
    let maxima = rows * 16;
    let hists = maxima + rows * segs * 2;
    let ties = hists + rows * segs * 1028;
    let words = ties + rows * segs;
    let word = |w: usize| u32::try_from(w).map_err(|_| VulkanError::SortRowTooLong { stride: w });
    let scratch = enc.scratch(0, words * 4)?;
    let mut base = push.pu(0, TOP_P_SEGMENT as u32);
    base.c_off = 0;
    base.c_ne = [word(segs)?, word(maxima)?, word(hists)?, word(ties)?];
    let bufs = [a, p, &scratch, d];
    let per_segment = [word(segs)?, rows as u32, 1];
    let per_row = grid(rows as u64, 1)?;
    let stage = |s: u32, level: u32| base.pu(1, level).pu(2, s);
    enc.dispatch(ShaderId::TopPMaskSeg, bufs, &stage(0, 0), per_segment)?;
    enc.dispatch(ShaderId::TopPMaskSeg, bufs, &stage(1, 0), per_row)?;
    for level in 0..4 {
        enc.dispatch(ShaderId::TopPMaskSeg, bufs, &stage(2, level), per_segment)?;
        enc.dispatch(ShaderId::TopPMaskSeg, bufs, &stage(3, level), per_row)?;
    }
    enc.dispatch(ShaderId::TopPMaskSeg, bufs, &stage(4, 0), per_segment)?;
    enc.dispatch(ShaderId::TopPMaskSeg, bufs, &stage(5, 0), per_segment)
}

/// The passes for a row of `ne0` entries keeping `k`: (runs, run capacity) after each pass.
pub(crate) fn passes(ne0: usize, k: usize) -> Vec<(usize, usize)> {
    let mut runs = ne0.div_ceil(SORT_BLOCK);
    let mut cap = SORT_BLOCK.min(k);
    let mut v = vec![(runs, cap)];
    while runs > 1 {
        runs = runs.div_ceil(2);
        cap = (2 * cap).min(k);
        v.push((runs, cap));
    }
    v
}

/// Argsort: every index of each row, in `order`.
pub(super) fn argsort(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, order: SortOrder) -> Result<()> {
    let ne0 = g.node(g.node(id).srcs[0]).layout.ne[0];
    sort(enc, g, id, ne0, order == SortOrder::Desc)
}

/// Most block minima the threshold pass holds (`NB_MAX` in `sort.comp`).
const THRESH_BLOCKS: usize = 4096;
/// Largest `k` the threshold pass selects (`K_MAX` in `sort.comp`).
const THRESH_K: usize = 512;

/// Entries per block of the threshold path for rows of `ne0`: at least 64, and few enough blocks
/// for one workgroup's shared memory.
fn thresh_block(ne0: usize) -> usize {
    ne0.div_ceil(THRESH_BLOCKS).max(64)
}

/// TopK: the indices of each row's `k` largest entries, largest first. On rows longer than a sort
/// block: by block minima and a threshold when `k` is small (two dispatches), else by radix
/// select when `k` fits one block.
pub(super) fn top_k(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, k: usize) -> Result<()> {
    let src = g.node(g.node(id).srcs[0]);
    let ne0 = src.layout.ne[0];
    if ne0 > SORT_BLOCK && k <= THRESH_K && k <= ne0.div_ceil(thresh_block(ne0)) && !enc.whole_rows() {
        let a = enc.operand(g, g.node(id).srcs[0])?;
        let d = enc.operand(g, id)?;
        return select_by_blocks(enc, src, &a, &d, k, src.layout.ne.nrows());
    }
    if k <= SORT_BLOCK && src.layout.ne[0] > SORT_BLOCK {
        let a = enc.operand(g, g.node(id).srcs[0])?;
        let d = enc.operand(g, id)?;
        return select(enc, src, &a, &d, k, src.layout.ne.nrows());
    }
    sort(enc, g, id, k, true)
}

/// The block pass and merge passes keeping the first `k` of each row (descending when `desc`).
fn sort(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, k: usize, desc: bool) -> Result<()> {
    let n = g.node(id);
    let src = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let d = enc.operand(g, id)?;
    sort_rows(enc, src, &a, &d, k, desc)
}

/// The block pass and merge passes keeping the first `k` indices of each row of `src` (operand
/// `a`, contiguous rows) into `d` (i32, `k` per row from `d.arg.off`); also used by the fused
/// sampling ops (`ops::sample`) to order their rows.
pub(super) fn sort_rows(
    enc: &mut Encoder<'_>,
    src: &Node,
    a: &Operand,
    d: &Operand,
    k: usize,
    desc: bool,
) -> Result<()> {
    sort_rows_by(enc, ne32(src), src.layout.ne.nrows(), a, d, k, desc, false)
}

/// [`sort_rows`] on rows of shape `ne` (`rows` of them); with `key64` the rows hold f64 values as
/// word pairs (`ne[0]` counts values; `random_sample`'s f64 rows), ordered by their 64-bit key.
#[allow(clippy::too_many_arguments)]
pub(super) fn sort_rows_by(
    enc: &mut Encoder<'_>,
    ne: [u32; 4],
    rows: usize,
    a: &Operand,
    d: &Operand,
    k: usize,
    desc: bool,
    key64: bool,
) -> Result<()> {
    let ne0 = ne[0] as usize;
    let (block_id, merge_id) =
        if key64 { (ShaderId::SortBlock64, ShaderId::SortMerge64) } else { (ShaderId::SortBlock, ShaderId::SortMerge) };
    let plan = passes(ne0, k);
    let stride = plan.iter().map(|&(r, c)| r * c).max().unwrap_or(1);
    let bytes = rows * stride * 4;
    let (s0, s1) =
        if plan.len() > 1 { (enc.scratch(0, bytes)?, enc.scratch(1, bytes)?) } else { (d.buf.clone(), d.buf.clone()) };
    let stride32 = u32::try_from(stride).map_err(|_| VulkanError::SortRowTooLong { stride })?;
    let flags = |last: bool| u32::from(desc) | (u32::from(last) << 1);
    let base = Push::new(ne).a(&a.arg).d(&d.arg).pu(0, k as u32);

    let (runs0, cap0) = plan[0];
    let mut push = base.pu(1, flags(plan.len() == 1));
    push.c_ne = [stride32, cap0 as u32, 0, 0];
    enc.dispatch(block_id, [&a.buf, &s0, &s0, &d.buf], &push, [runs0 as u32, rows as u32, 1])?;

    let (mut cur, mut next) = (s0, s1);
    let mut span = SORT_BLOCK;
    for (i, w) in plan.windows(2).enumerate() {
        let ((runs_in, cap_in), (_, cap_out)) = (w[0], w[1]);
        let last = i + 2 == plan.len();
        let mut push = base.pu(1, flags(last));
        push.b_ne = [stride32, cap_in as u32, span as u32, 0];
        push.c_ne = [stride32, cap_out as u32, 0, 0];
        let [x, _, _] = grid((runs_in * cap_in) as u64, 256)?;
        enc.dispatch(merge_id, [&a.buf, &cur, &next, &d.buf], &push, [x, rows as u32, 1])?;
        std::mem::swap(&mut cur, &mut next);
        span *= 2;
    }
    Ok(())
}

/// TopK by block minima (see the module documentation): each block's smallest key (keys ascend
/// from the largest value), then one workgroup per row takes T, the k-th smallest block minimum,
/// and selects the k winners among the few blocks at or below T.
fn select_by_blocks(enc: &mut Encoder<'_>, src: &Node, a: &Operand, d: &Operand, k: usize, rows: usize) -> Result<()> {
    let ne0 = src.layout.ne[0];
    let bs = thresh_block(ne0);
    let nb = ne0.div_ceil(bs);
    let mins = enc.scratch(2, rows * nb * 4)?;
    let base = Push::new(ne32(src)).a(&a.arg).d(&d.arg).pu(0, k as u32).pu(1, 1).pu(2, bs as u32);
    let mut push = base;
    push.c_off = 0;
    push.c_ne = [nb as u32, 0, 0, 0];
    let [x, _, _] = grid(nb as u64, 256)?;
    enc.dispatch(ShaderId::SortBlockMin, [&a.buf, &mins, &mins, &d.buf], &push, [x, rows as u32, 1])?;
    let mut push = base;
    push.b_off = 0;
    push.b_ne = [nb as u32, 0, 0, 0];
    enc.dispatch(ShaderId::SortThresh, [&a.buf, &mins, &mins, &d.buf], &push, grid(rows as u64, 1)?)
}

/// TopK by radix select (see the module documentation).
fn select(enc: &mut Encoder<'_>, src: &Node, a: &Operand, d: &Operand, k: usize, rows: usize) -> Result<()> {
    let state = enc.scratch(2, rows * 16)?;
    let cand = enc.scratch(0, rows * k * 4)?;
    let base = Push::new(ne32(src)).a(&a.arg).d(&d.arg).pu(0, k as u32);
    let rows32 = rows as u32;
    for shift in [24u32, 16, 8, 0] {
        let push = base.pu(1, 1).pu(2, shift);
        enc.dispatch(ShaderId::SortHist, [&a.buf, &state, &state, &d.buf], &push, [rows32, 1, 1])?;
    }
    let mut push = base.pu(1, 1);
    push.c_ne = [k as u32, 0, 0, 0];
    enc.dispatch(ShaderId::SortCompact, [&a.buf, &state, &cand, &d.buf], &push, [rows32, 1, 1])?;
    let mut push = base.pu(1, 1 | 2 | 4);
    push.b_ne = [k as u32, 0, 0, 0];
    push.c_ne = [k as u32, k as u32, 0, 0];
    enc.dispatch(ShaderId::SortBlock, [&a.buf, &cand, &cand, &d.buf], &push, [1, rows32, 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_counts_are_logarithmic() {
        assert_eq!(passes(100, 10), vec![(1, 10)]);
        assert_eq!(passes(262_144, 40).len(), 1 + 7);
        assert_eq!(passes(262_144, 262_144).last(), Some(&(1, 262_144)));
        assert_eq!(passes(151_936, 40).last(), Some(&(1, 40)));
        assert_eq!(passes(4097, 4097), vec![(3, 2048), (2, 4096), (1, 4097)]);
    }
}
