//! The op-conformance suite, written once and run against every backend.
//!
//! * [`reference`]: an f64 interpreter of a `graph::Graph` that follows the op docs exactly; the oracle
//!   for the CPU backend.
//! * [`cases`]: the list of cases (graph builder, seeded input generators, per-output comparator).
//! * [`compare`]: comparators and tolerances (exact, abs/rel scaled by dtype, indices by value, masks).
//! * [`runner`]: runs cases on a target backend through `sched::Scheduler`, checks them against an
//!   oracle and reports pass / fail / skipped per case.

pub mod cases;
pub mod compare;
pub mod error;
pub mod generate;
pub mod reference;
pub mod runner;
pub mod values;

pub use crate::cases::Case;
pub use crate::compare::{Cmp, Tol};
pub use crate::error::ConformanceError;
pub use crate::reference::Reference;
