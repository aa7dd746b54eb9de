//! The CPU backend: every [`graph::Op`] for every dtype combination the builder accepts, multi-threaded
//! over rows and blocks on one thread team created with the backend (`team`), with
//! vectorisation-friendly inner loops (and AVX2/FMA versions of the hot kernels chosen at run time).
//! It is the oracle every other backend is compared with.
//!
//! ```
//! use cpu::CpuBackend;
//! use sched::Backend;
//! let be = CpuBackend::with_threads(1);
//! assert_eq!(be.name(), "cpu");
//! ```

mod backend;
mod buffer;
mod dispatch;
mod error;
pub mod math;
mod ops;
mod par;
mod team;
mod tensor;

pub use crate::backend::CpuBackend;
pub use crate::error::CpuError;
