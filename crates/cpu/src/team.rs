//! The CPU backend's worker threads: a team of `threads - 1` helpers that live as long as the
//! backend, and the thread calling `compute` as the team's first member, as ggml's CPU thread pool
//! is built. A job is a number of tasks and a function of the task index; each member runs its
//! own contiguous share of the tasks, then helps with what is left of the others' shares.
//!
//! Why not a work-stealing pool (rayon, before): a decode step runs hundreds of small parallel ops
//! one after another (a batch-4 step of SmolLM2: 7 matrix products per layer, 30 layers), each a
//! fork and a join, and rayon's idle workers yield and sleep between them (a sixth of a batch-4
//! step's samples were the scheduler under `perf`: `sched_yield`, futex wake-ups). Here the
//! helpers spin on the job counter for a while ([`SPIN`]) before they sleep, so the next op finds
//! them awake; the caller never hands its work to another thread and never waits for a helper
//! that has not started (a helper that comes late finds its share taken). Measured against rayon
//! over byte-identical kernels (`docs/BENCHMARKS.md`, medians of alternated series on a 2-core
//! Zen 4): a batch-4 SmolLM2 decode step 6-10% faster, batch 1 4-10%, batch 16 0-11%.
//!
//! A task's panic is caught where it ran, the job is finished (no helper may still read the
//! caller's borrowed function when the caller unwinds), and the panic is resumed on the caller.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a helper spins for the next job before it sleeps: longer than the gaps between two
/// parallel ops of a step (the small ops between them run on the caller alone), short enough to
/// leave the cores to other threads soon after a step (a server's HTTP threads). 20, 50, 200 and
/// 1000 µs gave the same batch-4 step.
const SPIN: Duration = Duration::from_micros(50);

/// The job being run: a borrowed function of the task index. It is shared as a
/// `*mut Job<'static>` (its lifetime erased): valid while published, and the publisher waits for
/// every helper inside it before returning.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    tasks: usize,
}

/// A per-member counter on a cache line of its own.
#[repr(align(64))]
struct Slot(AtomicUsize);

/// What the members share.
struct Shared {
    /// The published job, or null.
    job: AtomicPtr<Job<'static>>,
    /// Incremented per published job; helpers wait for it to change.
    epoch: AtomicU64,
    /// Per member, the next task index to take of its share (see [`take_tasks`]).
    next: Box<[Slot]>,
    /// Helpers that hold the job's pointer (taking or running its tasks).
    inside: AtomicUsize,
    /// The first panic of the job's tasks, resumed by the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Helpers asleep, and where they sleep.
    sleepers: Mutex<usize>,
    wake: Condvar,
    stop: AtomicBool,
}

/// The team: `threads - 1` helper threads, joined when it is dropped.
pub(crate) struct Team {
    shared: Arc<Shared>,
    helpers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team").field("helpers", &self.helpers.len()).finish()
    }
}

impl Team {
    /// A team of `threads` members (at least 1): `threads - 1` helpers started now. Panics only if
    /// the operating system refuses to start a thread.
    pub(crate) fn new(threads: usize) -> Team {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            job: AtomicPtr::new(std::ptr::null_mut()),
            epoch: AtomicU64::new(0),
            next: (0..threads).map(|_| Slot(AtomicUsize::new(0))).collect(),
            inside: AtomicUsize::new(0),
            panic: Mutex::new(None),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let helpers = (1..threads)
            .map(|m| {
                let s = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("cpu-backend-{m}"))
                    .spawn(move || helper(&s, m))
                    .expect("starting the CPU backend's worker threads")
            })
            .collect();
        Team { shared, helpers }
    }

    /// Members, the caller included.
    pub(crate) fn threads(&self) -> usize {
        self.helpers.len() + 1
    }

    /// Runs `f(0)`, ..., `f(tasks - 1)` on the team, the calling thread taking tasks too; returns
    /// when all have run (resuming the first task's panic, if one panicked). Calls from two
    /// threads at once must not share a team (the backend's `compute` takes `&mut self`).
    pub(crate) fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        let s = &*self.shared;
        if self.helpers.is_empty() || tasks <= 1 {
            (0..tasks).for_each(f);
            return;
        }
        let job = Job { f, tasks };
        for (m, slot) in s.next.iter().enumerate() {
            slot.0.store(share(tasks, s.next.len(), m).start, Ordering::SeqCst);
        }
        // The lifetime is erased here: the pointer is retracted below, and `run` returns only
        // after every helper that loaded it has left (`inside` back to 0).
        s.job.store((&raw const job).cast::<Job<'static>>().cast_mut(), Ordering::SeqCst);
        s.epoch.fetch_add(1, Ordering::SeqCst);
        if *s.sleepers.lock().unwrap_or_else(|p| p.into_inner()) > 0 {
            s.wake.notify_all();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| take_tasks(s, &job, 0)));
        s.job.store(std::ptr::null_mut(), Ordering::SeqCst);
        let mut spins = 0u32;
        while s.inside.load(Ordering::SeqCst) != 0 {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let theirs = s.panic.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if let Some(p) = theirs {
            resume_unwind(p);
        }
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _sleepers = self.shared.sleepers.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.wake.notify_all();
        }
        for h in self.helpers.drain(..) {
            // tasks' panics are caught, so a helper does not panic; nothing to report
            let _ = h.join();
        }
    }
}

/// Member `m`'s share of `tasks`: the `m`-th of `members` contiguous, nearly equal ranges.
fn share(tasks: usize, members: usize, m: usize) -> std::ops::Range<usize> {
    tasks * m / members..tasks * (m + 1) / members
}

/// Runs the job's tasks as member `m`: its own share first, in order, then what is left of the
/// others' shares (each share's counter taken from the front). Each member thus reads contiguous
/// rows, and a member that comes late, or not at all, leaves its share to the others.
fn take_tasks(s: &Shared, job: &Job<'_>, m: usize) {
    let members = s.next.len();
    for k in 0..members {
        let owner = (m + k) % members;
        let end = share(job.tasks, members, owner).end;
        loop {
            let i = s.next[owner].0.fetch_add(1, Ordering::Relaxed);
            if i >= end {
                break;
            }
            (job.f)(i);
        }
    }
}

/// A helper's life (member `m`): wait for a job (spinning, then asleep), take its tasks, again.
fn helper(s: &Shared, m: usize) {
    let mut seen = 0u64;
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if s.stop.load(Ordering::Relaxed) {
                return;
            }
            if s.epoch.load(Ordering::SeqCst) != seen {
                break;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(256) {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() < SPIN {
                continue;
            }
            let mut sleepers = s.sleepers.lock().unwrap_or_else(|p| p.into_inner());
            *sleepers += 1;
            while s.epoch.load(Ordering::SeqCst) == seen && !s.stop.load(Ordering::SeqCst) {
                sleepers = s.wake.wait(sleepers).unwrap_or_else(|p| p.into_inner());
            }
            *sleepers -= 1;
        }
        seen = s.epoch.load(Ordering::SeqCst);
        s.inside.fetch_add(1, Ordering::SeqCst);
        let job = s.job.load(Ordering::SeqCst);
        if !job.is_null() {
            // SAFETY: a non-null pointer loaded while `inside` counts this helper stays valid until
            // the helper leaves (the publisher waits for `inside` to reach 0 after retracting it).
            let job = unsafe { &*job };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| take_tasks(s, job, m))) {
                let mut first = s.panic.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert(p);
            }
        }
        s.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::Team;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_task_runs_once() {
        for threads in 1..=4 {
            let team = Team::new(threads);
            assert_eq!(team.threads(), threads);
            for tasks in [0, 1, 2, 3, 7, 100] {
                // back to back, as a step's ops are
                for _ in 0..200 {
                    let runs: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                    team.run(tasks, &|i| {
                        runs[i].fetch_add(1, Ordering::Relaxed);
                    });
                    assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1), "{threads} threads, {tasks} tasks");
                }
            }
        }
    }

    #[test]
    fn a_tasks_panic_reaches_the_caller_and_the_team_goes_on() {
        let team = Team::new(2);
        // each task in turn panics: on the caller's share (tasks 0-3) or the helper's (4-7); the
        // tasks take a while, so that the helper, awake from the previous job, takes its share
        for bad in 0..8 {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                team.run(8, &|i| {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    if i == bad {
                        panic!("task {i}");
                    }
                })
            }));
            let msg = r.expect_err("the panic is resumed").downcast::<String>().expect("a formatted message");
            assert_eq!(*msg, format!("task {bad}"));
            let done = AtomicUsize::new(0);
            team.run(8, &|_| {
                done.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(done.load(Ordering::Relaxed), 8);
        }
    }

    #[test]
    fn teams_are_dropped_with_their_helpers_asleep_or_not() {
        for threads in 1..=3 {
            let team = Team::new(threads);
            team.run(4, &|_| ());
            drop(team);
            let team = Team::new(threads);
            // past the spin: the helpers sleep
            std::thread::sleep(super::SPIN * 4);
            team.run(4, &|_| ());
            std::thread::sleep(super::SPIN * 4);
        }
    }
}
