//! The graph container: nodes in creation (topological) order, names, flags and the topology hash.
//!
//! Builder methods that add nodes live in `build/` (one file per op family); dumps in `dump.rs`.

use crate::error::GraphError;
use crate::hash::Fnv64;
use crate::node::{Flags, Node, NodeId};

/// A static-shape tensor DAG. Nodes are only ever appended, so their ids are a topological order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    pub(crate) nodes: Vec<Node>,
    /// Name given to the next node created (see [`Graph::name_next`]).
    pub(crate) pending_name: Option<String>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node `id`. Panics on an id from another graph (use [`Graph::get`] to check).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The node `id`, if it exists.
    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// All nodes with their ids, in topological order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = (NodeId, &Node)> + '_ {
        self.nodes.iter().enumerate().map(|(i, n)| (NodeId(i as u32), n))
    }

    /// Ids in topological order (sources before users).
    pub fn topo_order(&self) -> impl ExactSizeIterator<Item = NodeId> + use<> {
        (0..self.nodes.len() as u32).map(NodeId)
    }

    /// The first node with this name.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.nodes().find(|(_, n)| n.name.as_deref() == Some(name)).map(|(id, _)| id)
    }

    /// Runs `build` with `name` pending: the first node it creates gets the name, and any builder error
    /// it returns names the node being built. The pending name is cleared afterwards, whatever happens.
    ///
    /// ```
    /// # use graph::{DType, Graph};
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, &[8])?;
    /// let y = g.named("y", |g| g.exp(x))?;
    /// assert_eq!(g.node(y).name.as_deref(), Some("y"));
    /// # Ok::<(), graph::GraphError>(())
    /// ```
    pub fn named<T>(
        &mut self,
        name: impl Into<String>,
        build: impl FnOnce(&mut Graph) -> Result<T, GraphError>,
    ) -> Result<T, GraphError> {
        self.pending_name = Some(name.into());
        let result = build(self);
        self.pending_name = None;
        result
    }

    /// Names node `id` and returns it.
    pub fn set_name(&mut self, id: NodeId, name: impl Into<String>) -> NodeId {
        self.nodes[id.index()].name = Some(name.into());
        id
    }

    /// Marks node `id` as an output (read back after each run) and returns it.
    pub fn set_output(&mut self, id: NodeId) -> NodeId {
        self.nodes[id.index()].flags.output = true;
        id
    }

    /// The flags of node `id`.
    pub fn flags(&self, id: NodeId) -> Flags {
        self.nodes[id.index()].flags
    }

    /// Nodes flagged as inputs, in order.
    pub fn inputs(&self) -> Vec<NodeId> {
        self.nodes().filter(|(_, n)| n.flags.input).map(|(id, _)| id).collect()
    }

    /// Nodes flagged as parameters (weights), in order.
    pub fn params(&self) -> Vec<NodeId> {
        self.nodes().filter(|(_, n)| n.flags.param).map(|(id, _)| id).collect()
    }

    /// Nodes flagged as outputs, in order.
    pub fn outputs(&self) -> Vec<NodeId> {
        self.nodes().filter(|(_, n)| n.flags.output).map(|(id, _)| id).collect()
    }

    /// For each node, the nodes that use it as a source (in topological order).
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut users = vec![Vec::new(); self.nodes.len()];
        for (id, n) in self.nodes() {
            for &s in &n.srcs {
                if users[s.index()].last() != Some(&id) {
                    users[s.index()].push(id);
                }
            }
        }
        users
    }

    /// The node that owns `id`'s storage: `id` itself unless it is a view or in-place result.
    pub fn storage_of(&self, id: NodeId) -> NodeId {
        self.nodes[id.index()].storage.unwrap_or(id)
    }

    /// A hash of everything that determines how the graph runs (ops, parameters, dtypes, layouts,
    /// edges, flags), and nothing else: not tensor data, not names. Two graphs with the same hash can
    /// reuse one plan and its allocations.
    pub fn topology_hash(&self) -> u64 {
        let mut h = Fnv64::default();
        h.write_u64(self.nodes.len() as u64);
        for n in &self.nodes {
            n.op.hash_into(&mut h);
            h.write_str(n.dtype.name());
            for i in 0..4 {
                h.write_u64(n.layout.ne[i] as u64);
                h.write_u64(n.layout.nb[i] as u64);
            }
            h.write_u64(n.layout.offset as u64);
            h.write_u64(n.storage.map_or(u64::MAX, |s| u64::from(s.0)));
            h.write_u64(n.srcs.len() as u64);
            for s in &n.srcs {
                h.write_u64(u64::from(s.0));
            }
            h.write(&[u8::from(n.flags.input), u8::from(n.flags.output), u8::from(n.flags.param)]);
            if n.flags.state {
                // only when set, so that the hashes of graphs without state are unchanged
                h.write(b"state");
            }
        }
        h.finish()
    }

    /// Checks that `id` belongs to this graph.
    pub(crate) fn check_id(&self, op: &'static str, id: NodeId) -> Result<&Node, GraphError> {
        self.nodes.get(id.index()).ok_or(GraphError::UnknownNode { op, id, len: self.nodes.len() })
    }

    /// Appends a node, taking the pending name.
    pub(crate) fn push(&mut self, mut node: Node) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        if node.name.is_none() {
            node.name = self.pending_name.take();
        }
        self.nodes.push(node);
        id
    }
}
