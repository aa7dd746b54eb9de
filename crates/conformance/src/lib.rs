//! The op-conformance suite, written once and run against every backend.
//!
//! * [`reference`]: an f64 interpreter of a `graph::Graph` that follows the op docs exactly; the oracle
//!   for the CPU backend.
//! * [`cases`]: the list of cases (graph builder, seeded input generators, per-output comparator).
//! * [`compare`]: comparators and tolerances (exact, abs/rel scaled by dtype, indices by value, masks,
//!   draws by their CDF brackets).
//! * [`runner`]: runs cases on a target backend through `sched::Scheduler`, checks them against an
//!   oracle and reports pass / fail / skipped per case.
//!
//! Running the suite on a backend, with the CPU backend as the oracle (what a GPU backend's test does;
//! `crates/vulkan/tests/conformance.rs` is the compiled version of this sketch, which cannot be a
//! doctest here because this crate does not depend on `vulkan`):
//!
//! ```text
//! use conformance::runner::{Oracle, run_suite_on};
//! let target = Box::new(|| Ok(Box::new(vulkan::VulkanBackend::new()?) as Box<dyn sched::Backend>));
//! let oracle = Oracle::Backend(Box::new(|| Ok(Box::new(cpu::CpuBackend::new()) as Box<dyn sched::Backend>)));
//! match run_suite_on(target, oracle) {
//!     // No device: skip loudly (or fail where a device is required).
//!     Err(conformance::ConformanceError::Backend(sched::BackendError::Unavailable { reason, .. })) => {}
//!     Err(e) => panic!("{e}"),
//!     // Skipped cases (unsupported, with the node named) are allowed; failures are not.
//!     Ok(report) => assert!(report.ok(), "{report}\n{}", report.table()),
//! }
//! ```
//!
//! A few cases checked by the reference against itself (any [`runner::Target`] works the same way):
//!
//! ```
//! use conformance::runner::{ReferenceTarget, run_cases};
//! let cases = conformance::cases::matching(Some("rows/set_rows/f16"));
//! assert!(!cases.is_empty());
//! let report = run_cases(&cases, &mut ReferenceTarget, &mut ReferenceTarget);
//! assert!(report.ok(), "{report}");
//! assert_eq!(report.passed().len(), cases.len());
//! ```

pub mod cases;
pub mod compare;
pub mod error;
pub mod generate;
pub mod ops;
pub mod quant;
pub mod reference;
pub mod runner;
pub mod values;

pub use crate::cases::Case;
pub use crate::compare::{Cmp, Tol};
pub use crate::error::ConformanceError;
pub use crate::reference::Reference;
