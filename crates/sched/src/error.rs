//! The scheduler's error type: every variant names the node (id, name, dtype, shape), the op and the
//! backend involved, so a failed plan or step says what to fix.

use crate::backend::BackendError;
use graph::{GraphError, NodeId};

/// What went wrong while planning or running a graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchedError {
    /// A backend call failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// A graph error surfaced while planning.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// `Scheduler::new` was given no backends.
    #[error("no backends given to the scheduler")]
    NoBackends,
    /// Two backends share a name (names identify backends in pins and plans).
    #[error("two backends are named '{0}'")]
    DuplicateBackend(String),
    /// A backend name that is not one of the scheduler's.
    #[error("unknown backend '{name}' (the scheduler has {known})")]
    UnknownBackend {
        /// The name asked for.
        name: String,
        /// The scheduler's backends, comma separated.
        known: String,
    },
    /// A node id that is not in the graph.
    #[error("{what}: unknown node {node} (the graph has {len} nodes)")]
    UnknownNode {
        /// The call or pass that met it.
        what: &'static str,
        /// The bad id.
        node: NodeId,
        /// Number of nodes in the graph.
        len: usize,
    },
    /// No backend supports a node.
    #[error("node {node}: {op} (sources: {srcs}) is not supported by any backend ({backends})")]
    Unsupported {
        /// The node (`#id 'name' dtype [shape]`).
        node: String,
        /// The op with its parameters.
        op: String,
        /// The sources' dtypes and shapes.
        srcs: String,
        /// Backends that refused it.
        backends: String,
    },
    /// A node is pinned to a backend that does not support it.
    #[error("node {node}: {op} is pinned to {backend}, which does not support it")]
    PinUnsupported {
        /// The node.
        node: String,
        /// The op.
        op: String,
        /// The pinned backend.
        backend: String,
    },
    /// A view was pinned; views always live with their storage.
    #[error("node {node}: {op} is a view of {storage}; views live with their storage and cannot be pinned")]
    PinnedView {
        /// The view.
        node: String,
        /// Its op.
        op: &'static str,
        /// Its storage.
        storage: String,
    },
    /// An in-place op (set_rows) cannot run where its destination lives.
    #[error(
        "node {node}: {op} writes in place into {storage}, which lives on {backend}, but {reason}; \
         place the storage elsewhere (pin it) or compute it on a backend that supports {op}"
    )]
    InPlace {
        /// The in-place node.
        node: String,
        /// Its op.
        op: &'static str,
        /// The storage it writes.
        storage: String,
        /// Where the storage lives.
        backend: String,
        /// Why it cannot run there.
        reason: String,
    },
    /// A tensor is larger than a backend's largest buffer.
    #[error("{backend}: {what} needs {bytes} bytes, more than the backend's largest buffer ({max} bytes)")]
    TooLarge {
        /// The backend.
        backend: String,
        /// The tensor, described.
        what: String,
        /// Its size.
        bytes: usize,
        /// The backend's maximum buffer size.
        max: usize,
    },
    /// A call that needs a plan came before `plan`.
    #[error("{what} called before plan(): plan a graph first")]
    NotPlanned {
        /// The call.
        what: &'static str,
    },
    /// `set_input` on a node that is neither an input nor a parameter.
    #[error("set_input: node {node} ({op}) is not an input, parameter or state leaf")]
    NotAnInput {
        /// The node.
        node: String,
        /// Its op.
        op: String,
    },
    /// `set_input_shared` on a leaf that is not a param (only weights are bound to shared bytes).
    #[error("node {node} is not a param (only params can be bound to shared bytes or read back)")]
    NotAParam {
        /// The node.
        node: String,
    },
    /// `set_input` with the wrong number of bytes.
    #[error("set_input: node {node} needs {expected} bytes, got {got} bytes")]
    InputSize {
        /// The node (its dtype and shape give the expected size).
        node: String,
        /// Bytes the tensor holds.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A typed setter or reader used on a tensor of another dtype.
    #[error("{what}: node {node} has dtype {dtype}, not {wanted}")]
    DType {
        /// The call.
        what: &'static str,
        /// The node.
        node: String,
        /// Its dtype.
        dtype: graph::DType,
        /// What the call handles.
        wanted: &'static str,
    },
    /// `compute` before every input and parameter was written since the last plan.
    #[error("compute: {kind} {node} has not been set since the graph was planned (call set_input)")]
    InputNotSet {
        /// `input` or `param`.
        kind: &'static str,
        /// The node.
        node: String,
    },
    /// `read` of a node that is neither flagged as an output nor a state tensor.
    #[error("read: node {node} is not an output (mark it with Graph::set_output before planning)")]
    NotAnOutput {
        /// The node.
        node: String,
    },
    /// `read` before any `compute` of the current plan.
    #[error("read: node {node} has not been computed yet (call compute first)")]
    NotComputed {
        /// The node.
        node: String,
    },
    /// A row index past the tensor's rows (`read_rows`, `set_input_rows`).
    #[error("{what}: row {row} of node {node} is out of range (it has {rows} rows of ne[0] elements)")]
    RowOutOfRange {
        /// The call.
        what: &'static str,
        /// The node.
        node: String,
        /// The bad row.
        row: usize,
        /// Rows the tensor has (`ne[1] * ne[2] * ne[3]`).
        rows: usize,
    },
    /// A side plan's link that cannot be made (`Scheduler::plan_side`).
    #[error("plan_side: linked leaf {leaf} cannot stand for the base plan's {node}: {reason}")]
    BadLink {
        /// The side plan's leaf.
        leaf: String,
        /// The base plan's tensor.
        node: String,
        /// Why.
        reason: &'static str,
    },
    /// A write to a side plan's linked leaf (it is the base plan's tensor, read in place).
    #[error(
        "{what}: node {node} is a side plan's linked leaf (the base plan's tensor, read in place); it is never written"
    )]
    LinkedLeaf {
        /// The call.
        what: &'static str,
        /// The leaf.
        node: String,
    },
    /// A state tensor pinned to a backend other than the one its contents live on.
    #[error(
        "node {node} is state that lives on {lives}; it cannot be pinned to {pinned} (state stays where it was \
         first placed; reset the scheduler to move it)"
    )]
    StatePinned {
        /// The state leaf.
        node: String,
        /// Where its buffer is.
        lives: String,
        /// Where the pin asked for it.
        pinned: String,
    },
}
