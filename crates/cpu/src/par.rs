//! Work splitting on the backend's rayon pool: rows (or any index range) cut into contiguous blocks
//! sized so each task has enough work to amortise scheduling, and enough tasks to feed every thread.

use rayon::prelude::*;
use std::cell::Cell;
use std::ops::Range;

thread_local! {
    /// Threads the kernels may use, set by the backend around each `compute` (1: run inline on the
    /// calling thread, without entering the pool).
    static THREADS: Cell<usize> = const { Cell::new(1) };
}

/// Runs `f` with the kernels limited to `threads` threads: inline on the calling thread for 1
/// (entering a pool costs a cross-thread hand-off, tens of microseconds), else inside `pool`.
pub(crate) fn with_threads<R: Send>(pool: &rayon::ThreadPool, threads: usize, f: impl FnOnce() -> R + Send) -> R {
    if threads <= 1 {
        let prev = THREADS.with(|t| t.replace(1));
        let r = f();
        THREADS.with(|t| t.set(prev));
        r
    } else {
        pool.install(|| {
            let prev = THREADS.with(|t| t.replace(threads));
            let r = f();
            THREADS.with(|t| t.set(prev));
            r
        })
    }
}

/// Below this many element-operations a range runs on the calling thread.
const MIN_WORK: usize = 16 * 1024;

/// Calls `f` on disjoint blocks covering `0..n` (in parallel on the current pool), where each index
/// costs about `work_per_item` element-operations.
pub(crate) fn for_blocks(n: usize, work_per_item: usize, f: impl Fn(Range<usize>) + Sync + Send) {
    if n == 0 {
        return;
    }
    let threads = THREADS.with(Cell::get);
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
