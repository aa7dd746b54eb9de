//! Scheduling graphs onto backends: the [`Backend`] trait, planning as named passes into a printable
//! `Plan`, and the executor that runs it.

pub mod backend;

pub use backend::{Backend, BackendError, BackendResult, Bindings, BufferId, MemoryKind, SplitTask, TensorLoc};
