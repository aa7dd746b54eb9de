//! The graph crate's error type: every builder error names the op, the node and the offending shapes.

use crate::node::NodeId;

/// What went wrong while building or reading a graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// An op's operands do not satisfy its dtype or shape rules.
    #[error("{op} (node {node}): {msg}")]
    Invalid {
        /// The op being built.
        op: &'static str,
        /// The node being built: `#id` and its name if one was given.
        node: String,
        /// What is wrong, with the offending shapes and dtypes.
        msg: String,
    },
    /// A node id that does not belong to this graph.
    #[error("{op}: unknown node {id} (the graph has {len} nodes)")]
    UnknownNode {
        /// The op being built.
        op: &'static str,
        /// The bad id.
        id: NodeId,
        /// Number of nodes in the graph.
        len: usize,
    },
    /// A fixture file could not be read.
    #[error("line {line}: {msg}")]
    Fixture {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        msg: String,
    },
}
