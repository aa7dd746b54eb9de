//! Scheduling graphs onto backends: the [`Backend`] trait, planning as named passes into a printable
//! [`Plan`], and the [`Scheduler`] that executes it.
//!
//! Planning passes, in order: assignment (a backend and a recorded [`Cause`] per node), splits
//! (maximal runs of consecutive nodes on one backend) with inserted copies, and buffer allocation (dedicated host-visible regions for inputs and outputs, dedicated params, and a
//! liveness-shared arena for everything else). The executor replays the plan every step; a graph
//! with an unchanged topology hash is neither re-planned nor re-allocated. A param's storage comes
//! when it is given data: a buffer the backend allocates (`set_input`), or the caller's own
//! read-only memory ([`SharedBytes`], `set_input_shared`) where the backend can compute on it in
//! place (`Backend::import_host`; the CPU backend and a mapped model file), so a model's weights
//! are not copied out of the file.
//!
//! A sketch of the flow (`gpu`, `cpu` are boxed backends; `x`, `w`, `out` node ids):
//!
//! ```text
//! let mut sched = sched::Scheduler::new(vec![gpu, cpu])?;   // preference order
//! sched.plan(&g)?;                                          // once per topology
//! sched.set_input_f32(w, &weights)?;                        // params: once (a copy)
//! sched.set_input_shared(w2, &mapped)?;                     // or read in place where they lie
//! for step in 0..n {
//!     sched.set_input_f32(x, &inputs[step])?;
//!     sched.compute()?;
//!     let y = sched.read_f32(out)?;                         // outputs (and state) only
//!     let row = sched.read_rows_f32(out, &[3])?;            // or only some rows
//! }
//! let text = sched.plan_text();                            // splits, causes, copies, buffers
//! ```

mod alloc;
mod arena;
mod assign;
pub mod backend;
mod bind;
pub mod error;
pub mod plan;
mod planner;
mod pool;
pub mod scheduler;
mod shared;
mod split;
pub mod testing;
mod transfer;

pub use alloc::HOST_OUTPUT_MAX;
pub use backend::{
    Backend, BackendError, BackendResult, Bindings, BufferId, CopyRegion, MemoryKind, SplitTask, TensorLoc, WorkCounts,
};
pub use error::SchedError;
pub use plan::{BufferRole, Cause, NodePlan, Plan, PlanBuffer, Region, Split, TensorCopy};
pub use planner::plan_graph;
pub use scheduler::{PLAN_CACHE, SIDE_CACHE, Scheduler, Stats};
pub use shared::{SharedBytes, SharedOwner};
