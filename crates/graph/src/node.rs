//! Nodes: one tensor each, with its op, sources, dtype, layout, name and flags.

use crate::dtype::DType;
use crate::op::Op;
use crate::shape::{Layout, Shape};
use smallvec::SmallVec;
use std::fmt;

/// Index of a node in its graph. Nodes are created in topological order, so sources always have
/// smaller ids than the nodes that use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as an index into the graph's node list.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Role flags of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags {
    /// Written from outside before each run.
    pub input: bool,
    /// Read back after a run.
    pub output: bool,
    /// A weight: uploaded once, lives where it was placed, never overwritten.
    pub param: bool,
    /// State that persists across steps and re-plans (a KV cache, penalty counts, mirostat's mu):
    /// zero when first allocated, optionally written from outside, and written in place by the
    /// graph (`set_rows`). See the scheduler's invariants for where it lives.
    pub state: bool,
}

impl Flags {
    /// The set flags' names, comma separated (empty when none).
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if self.input {
            v.push("input");
        }
        if self.param {
            v.push("param");
        }
        if self.state {
            v.push("state");
        }
        if self.output {
            v.push("output");
        }
        v.join(",")
    }
}

/// One tensor of a graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// What computes it.
    pub op: Op,
    /// Its operands, in the order [`Op`] documents.
    pub srcs: SmallVec<[NodeId; 4]>,
    /// Element type.
    pub dtype: DType,
    /// Shape, byte strides and (for views) byte offset into the storage of [`Node::storage`].
    pub layout: Layout,
    /// For views and in-place ops: the node that owns the storage this node addresses (never itself
    /// a view). `None` when the node owns its storage.
    pub storage: Option<NodeId>,
    /// Optional name (unique names are not enforced, but fixtures and lookups expect them).
    pub name: Option<String>,
    /// Role flags.
    pub flags: Flags,
}

impl Node {
    /// The node's shape.
    pub fn shape(&self) -> Shape {
        self.layout.ne
    }

    /// The node's element counts as an array.
    pub fn ne(&self) -> [usize; 4] {
        self.layout.ne.0
    }

    /// Bytes a contiguous copy of this tensor occupies.
    pub fn nbytes(&self) -> usize {
        self.dtype.row_bytes(self.layout.ne[0]) * self.layout.ne.nrows()
    }
}
