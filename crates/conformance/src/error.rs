//! The conformance crate's error type: what went wrong evaluating a reference or running a case.

use graph::NodeId;

/// Errors of the reference interpreter and the runner.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConformanceError {
    /// An input or parameter node was given no data.
    #[error("reference: input node {node} ({name}) was given no data")]
    MissingInput {
        /// The input node.
        node: NodeId,
        /// Its name, or `-`.
        name: String,
    },
    /// Input data of the wrong size.
    #[error("reference: input node {node} {dtype} {shape} needs {expected} bytes, got {got}")]
    InputSize {
        /// The input node.
        node: NodeId,
        /// Its dtype name.
        dtype: &'static str,
        /// Its shape.
        shape: String,
        /// Bytes it needs.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// An op failed at run time (e.g. an out-of-range row id) or addressed storage unaligned.
    #[error("reference: node {node} ({op}): {msg}")]
    Compute {
        /// The failing node.
        node: NodeId,
        /// Its op's name.
        op: &'static str,
        /// What went wrong.
        msg: String,
    },
    /// Building a case's graph failed (a bug in the case list).
    #[error("case {case}: building the graph failed: {msg}")]
    Build {
        /// The case.
        case: String,
        /// The graph error.
        msg: String,
    },
    /// A backend could not be made (e.g. `BackendError::Unavailable` when no device exists: callers
    /// match on it to skip a suite loudly instead of failing).
    #[error("making the backend failed: {0}")]
    Backend(#[from] sched::BackendError),
    /// A target or oracle failed to run a case.
    #[error("{target}: {msg}")]
    Target {
        /// Target name.
        target: String,
        /// What went wrong.
        msg: String,
    },
}
