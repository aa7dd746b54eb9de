//! Work splitting on the backend's thread team (`crate::team`): rows (or any index range) cut into
//! contiguous blocks sized so each task has enough work to amortise scheduling, and enough tasks to
//! feed every thread.

use crate::team::Team;
use std::cell::Cell;
use std::ops::Range;

thread_local! {
    /// The team the kernels may use, set by the backend around each `compute` (null: run inline
    /// on the calling thread). Unset while a team's task runs, so nested splits run inline.
    static TEAM: Cell<*const Team> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` on the calling thread with the kernels' splits going to `team` (a team of one thread:
/// every split inline).
pub(crate) fn with_threads<R>(team: &Team, f: impl FnOnce() -> R) -> R {
    /// Puts back the previous team, also when `f` unwinds.
    struct Restore(*const Team);
    impl Drop for Restore {
        fn drop(&mut self) {
            TEAM.with(|t| t.set(self.0));
        }
    }
    let prev = TEAM.with(|t| t.replace(if team.threads() > 1 { team } else { std::ptr::null() }));
    let _restore = Restore(prev);
    f()
}

/// Below this many element-operations a range runs on the calling thread.
const MIN_WORK: usize = 16 * 1024;

/// Calls `f` on disjoint blocks covering `0..n` (in parallel on the current pool), where each index
/// costs about `work_per_item` element-operations.
pub(crate) fn for_blocks(n: usize, work_per_item: usize, f: impl Fn(Range<usize>) + Sync + Send) {
    if n == 0 {
        return;
    }
    let team = TEAM.with(Cell::get);
    let total = n.saturating_mul(work_per_item.max(1));
    if team.is_null() || total <= MIN_WORK || n == 1 {
        f(0..n);
        return;
    }
    // SAFETY: `TEAM` is set only by `with_threads`, around a call that borrows the team.
    let team = unsafe { &*team };
    let min_items = MIN_WORK.div_ceil(work_per_item.max(1)).max(1);
    let tasks = (team.threads() * 4).min(n.div_ceil(min_items)).max(1);
    let block = n.div_ceil(tasks);
    let run = |t: usize| {
        let start = t * block;
        // nested splits run inline (on a helper `TEAM` is never set)
        let prev = TEAM.with(|c| c.replace(std::ptr::null()));
        f(start..(start + block).min(n));
        TEAM.with(|c| c.set(prev));
    };
    team.run(n.div_ceil(block), &run);
}
