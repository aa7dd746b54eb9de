//! Work splitting on the backend's rayon pool: rows (or any index range) cut into contiguous blocks
//! sized so each task has enough work to amortise scheduling, and enough tasks to feed every thread.

use rayon::prelude::*;
use std::ops::Range;

/// Below this many element-operations a range runs on the calling thread.
const MIN_WORK: usize = 16 * 1024;

/// Calls `f` on disjoint blocks covering `0..n` (in parallel on the current pool), where each index
/// costs about `work_per_item` element-operations.
pub(crate) fn for_blocks(n: usize, work_per_item: usize, f: impl Fn(Range<usize>) + Sync + Send) {
    if n == 0 {
        return;
    }
    let threads = rayon::current_num_threads();
    let total = n.saturating_mul(work_per_item.max(1));
    if threads <= 1 || total <= MIN_WORK || n == 1 {
        f(0..n);
        return;
    }
    let min_items = MIN_WORK.div_ceil(work_per_item.max(1)).max(1);
    let tasks = (threads * 4).min(n.div_ceil(min_items)).max(1);
    let block = n.div_ceil(tasks);
    (0..n.div_ceil(block)).into_par_iter().for_each(|t| {
        let start = t * block;
        f(start..(start + block).min(n));
    });
}
