//! The `Plan` the passes produce and the executor interprets: per-node backend and [`Cause`], the
//! [`Split`]s with their inserted [`TensorCopy`]s, the [`PlanBuffer`]s and every storage's [`Region`], and
//! its text form (printed through `graph::dump::node_line`, with backend, cause and buffer columns).

use crate::backend::MemoryKind;
use graph::{Graph, NodeId};
use std::fmt::{self, Write};

/// Why a node runs (or a leaf lives) on its backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// Pinned by the user (`Scheduler::pin`).
    Pinned,
    /// A supporting backend where this source's storage already lives.
    FollowsInput(NodeId),
    /// A weight (param) source lives on a backend that supports the node.
    Weights(NodeId),
    /// Only one backend supports the node; `refused_by` is the first preferred backend that refused.
    OnlySupporter {
        /// The first backend (in preference order) whose `supports` returned false.
        refused_by: String,
    },
    /// The first backend in preference order, with nothing else deciding.
    Preferred,
    /// A later backend because earlier ones refused (several others support it).
    Fallback {
        /// The first backend (in preference order) whose `supports` returned false.
        refused_by: String,
    },
    /// A leaf (input or param) placed where its first consumer runs.
    FirstUse(NodeId),
    /// A view: it lives with its storage.
    View(NodeId),
    /// An in-place op (set_rows): it runs where the storage it writes lives.
    InPlace(NodeId),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Pinned => f.write_str("pinned by user"),
            Cause::FollowsInput(s) => write!(f, "follows input {s}"),
            Cause::Weights(s) => write!(f, "weights {s} live there"),
            Cause::OnlySupporter { refused_by } => write!(f, "only supporter (unsupported on {refused_by})"),
            Cause::Preferred => f.write_str("preferred"),
            Cause::Fallback { refused_by } => write!(f, "fallback (unsupported on {refused_by})"),
            Cause::FirstUse(c) => write!(f, "first used by {c}"),
            Cause::View(s) => write!(f, "view of {s}"),
            Cause::InPlace(s) => write!(f, "in place on {s}"),
        }
    }
}

/// What a plan buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BufferRole {
    /// One parameter (weight) per buffer: uploaded once, never reused, kept across re-plans. The
    /// buffer is allocated when the param is first written, or is the caller's own memory, read
    /// in place (`Scheduler::set_input_shared`, where the backend can).
    Params,
    /// One state tensor per buffer (KV cache, sampler state): persists across steps and re-plans,
    /// written in place by the graph, never reused.
    State,
    /// Inputs written by the host every step: host-visible, never reused.
    Inputs,
    /// The storages of outputs: device memory, never reused within a step, so a node on the same
    /// device reads an output without crossing the bus.
    Outputs,
    /// The storages of small outputs that no node reads (sampled tokens, candidate lists, at most
    /// [`crate::HOST_OUTPUT_MAX`] bytes): host-visible memory the device writes directly, so the host
    /// reads them in place after the step, with no copy and no second round trip.
    HostOutputs,
    /// Host-visible read-back regions of device-resident outputs: rows are copied here on request
    /// and read by the host.
    ReadBack,
    /// Intermediates and copies, shared by liveness.
    Arena,
    /// A tensor of another plan that a side plan reads in place (`Scheduler::plan_side`): no
    /// buffer of its own, the region is the base plan's.
    Linked,
}

impl BufferRole {
    /// Every role, in the order a backend's buffers are listed.
    pub const ALL: [BufferRole; 8] = [
        BufferRole::Params,
        BufferRole::State,
        BufferRole::Inputs,
        BufferRole::Outputs,
        BufferRole::HostOutputs,
        BufferRole::ReadBack,
        BufferRole::Arena,
        BufferRole::Linked,
    ];

    /// Name used in plan text.
    pub const fn name(self) -> &'static str {
        match self {
            BufferRole::Params => "params",
            BufferRole::State => "state",
            BufferRole::Inputs => "inputs",
            BufferRole::Outputs => "outputs",
            BufferRole::HostOutputs => "host_outputs",
            BufferRole::ReadBack => "readback",
            BufferRole::Arena => "arena",
            BufferRole::Linked => "linked",
        }
    }

    /// Whether each leaf of this role has a buffer of its own (params and state).
    pub const fn per_leaf(self) -> bool {
        matches!(self, BufferRole::Params | BufferRole::State)
    }

    /// `param` or `state`: the middle of a per-leaf buffer's name (`cpu.param.w`).
    pub(crate) const fn leaf_prefix(self) -> &'static str {
        match self {
            BufferRole::State => "state",
            _ => "param",
        }
    }

    /// The memory kind buffers of this role are allocated in.
    pub const fn kind(self) -> MemoryKind {
        match self {
            BufferRole::Params | BufferRole::State | BufferRole::Outputs | BufferRole::Arena | BufferRole::Linked => {
                MemoryKind::Device
            }
            BufferRole::Inputs | BufferRole::HostOutputs | BufferRole::ReadBack => MemoryKind::Host,
        }
    }
}

/// One buffer the executor allocates on a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanBuffer {
    /// Index of the backend (preference order).
    pub backend: usize,
    /// What it holds.
    pub role: BufferRole,
    /// Chunk number within (backend, role), when a role needs several buffers.
    pub chunk: usize,
    /// Size in bytes.
    pub size: usize,
    /// Memory kind.
    pub kind: MemoryKind,
    /// `backend.role`, `backend.roleN` for later chunks, `backend.param.NAME` for a param's buffer
    /// and `backend.state.NAME` for a state tensor's.
    pub name: String,
    /// For a params or state buffer, the leaf it holds (each has a buffer of its own).
    pub leaf: Option<NodeId>,
}

/// Where a storage (or a copy of one) lives: a plan buffer index and a byte range in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Region {
    /// Index into [`Plan::buffers`].
    pub buffer: usize,
    /// Byte offset (a multiple of the backend's alignment).
    pub offset: usize,
    /// Bytes reserved (the storage size rounded up to the alignment).
    pub size: usize,
}

/// A copy inserted before a split: the whole storage of a tensor that lives on another backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorCopy {
    /// The storage copied (the owning node, never a view).
    pub storage: NodeId,
    /// Backend the storage lives on.
    pub from: usize,
    /// Backend of the split that reads it.
    pub to: usize,
    /// `<storage-name or #id>@<backend>`.
    pub name: String,
    /// Bytes copied.
    pub bytes: usize,
    /// Source region (on `from`).
    pub src: Region,
    /// Destination region (on `to`).
    pub dst: Region,
}

/// A maximal run of consecutive compute nodes on one backend, and the copies it needs first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Backend index.
    pub backend: usize,
    /// Compute nodes (no leaves, no views), in topological order.
    pub nodes: Vec<NodeId>,
    /// Copies performed before the split runs, ordered by storage id.
    pub copies: Vec<TensorCopy>,
}

/// The plan of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// Backend index (views and in-place results: their storage's backend).
    pub backend: usize,
    /// Why.
    pub cause: Cause,
    /// The storage region, for nodes that own their storage.
    pub region: Option<Region>,
    /// For an output storage in device memory that the host cannot read in place: its host-visible
    /// read-back region (same size and layout as `region`).
    pub readback: Option<Region>,
}

/// The result of planning a graph: printable with [`Plan::to_text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The graph's topology hash.
    pub topology: u64,
    /// Backend names, preference order.
    pub backends: Vec<String>,
    /// Per node, indexed by `NodeId`.
    pub nodes: Vec<NodePlan>,
    /// Splits, in execution order.
    pub splits: Vec<Split>,
    /// Buffers to allocate.
    pub buffers: Vec<PlanBuffer>,
    /// Sum of the arena buffers' sizes (intermediates and copies, with reuse).
    pub arena_bytes: usize,
    /// What the arenas would need without reuse (every intermediate and copy in its own region).
    pub no_reuse_bytes: usize,
}

impl Plan {
    /// Number of copies per step.
    pub fn n_copies(&self) -> usize {
        self.splits.iter().map(|s| s.copies.len()).sum()
    }

    /// Bytes copied between backends per step.
    pub fn copy_bytes(&self) -> usize {
        self.splits.iter().flat_map(|s| &s.copies).map(|c| c.bytes).sum()
    }

    /// Total bytes of buffers with the given role.
    pub fn role_bytes(&self, role: BufferRole) -> usize {
        self.buffers.iter().filter(|b| b.role == role).map(|b| b.size).sum()
    }

    /// The backend name of node `id`.
    pub fn backend_of(&self, id: NodeId) -> &str {
        &self.backends[self.nodes[id.index()].backend]
    }

    fn region_text(&self, r: Region) -> String {
        format!("{}+{}", self.buffers[r.buffer].name, r.offset)
    }

    /// The plan as text: a header (splits, copies, memory), the buffers, then every node's dump line
    /// with its backend, cause and storage, split headers and their copies in between.
    pub fn to_text(&self, g: &Graph) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "plan: topology {:016x}, {} nodes on [{}]: {} splits, {} copies ({} B between backends per step)",
            self.topology,
            self.nodes.len(),
            self.backends.join(", "),
            self.splits.len(),
            self.n_copies(),
            self.copy_bytes()
        );
        let _ = writeln!(
            out,
            "memory: arena {} B (no reuse {} B), params {} B, state {} B, inputs {} B, outputs {} B, host outputs {} B, readback {} B",
            self.arena_bytes,
            self.no_reuse_bytes,
            self.role_bytes(BufferRole::Params),
            self.role_bytes(BufferRole::State),
            self.role_bytes(BufferRole::Inputs),
            self.role_bytes(BufferRole::Outputs),
            self.role_bytes(BufferRole::HostOutputs),
            self.role_bytes(BufferRole::ReadBack)
        );
        for b in &self.buffers {
            let kind = match b.kind {
                MemoryKind::Device => "device",
                MemoryKind::Host => "host",
            };
            let _ = writeln!(out, "buffer {:<20} {:<6} {:>10} B", b.name, kind, b.size);
        }
        let lines: Vec<String> = g.topo_order().map(|id| graph::dump::node_line(g, id)).collect();
        let width = lines.iter().map(String::len).max().unwrap_or(0);
        let mut split_at = vec![None; self.nodes.len()];
        for (i, s) in self.splits.iter().enumerate() {
            if let Some(first) = s.nodes.first() {
                split_at[first.index()] = Some(i);
            }
        }
        for (id, line) in g.topo_order().zip(&lines) {
            if let Some(i) = split_at[id.index()] {
                let s = &self.splits[i];
                let (first, last) = (s.nodes[0], s.nodes[s.nodes.len() - 1]);
                let _ = writeln!(
                    out,
                    "-- split {i} on {}: {first}..{last}, {} nodes, {} copies",
                    self.backends[s.backend],
                    s.nodes.len(),
                    s.copies.len()
                );
                for c in &s.copies {
                    let _ = writeln!(
                        out,
                        "   copy {} <- {} {} -> {} ({} B)",
                        c.name,
                        c.storage,
                        self.region_text(c.src),
                        self.region_text(c.dst),
                        c.bytes
                    );
                }
            }
            let np = &self.nodes[id.index()];
            let mut place = match np.region {
                Some(r) => self.region_text(r),
                None => format!("-> {}", g.storage_of(id)),
            };
            if let Some(rb) = np.readback {
                let _ = write!(place, " (read back via {})", self.region_text(rb));
            }
            let row = format!("{line:<width$} | {:<8} {:<40} {place}", self.backends[np.backend], np.cause.to_string());
            out.push_str(row.trim_end());
            out.push('\n');
        }
        out
    }

    /// A Graphviz DOT rendering: one cluster per split (labelled with its backend), leaves and views
    /// outside clusters, every node filled with its backend's colour and labelled with its cause;
    /// edges that cross backends (the copies) are dashed and labelled with the copy's name.
    pub fn to_dot(&self, g: &Graph) -> String {
        const COLORS: [&str; 6] = ["lightblue", "lightsalmon", "palegreen", "khaki", "plum", "lightgray"];
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut out =
            String::from("digraph G {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10, style=filled];\n");
        let node = |id: NodeId| {
            let n = g.node(id);
            let np = &self.nodes[id.index()];
            let mut label = format!(
                "{id} {}\\n{} {}\\n{}: {}",
                esc(&n.op.to_string()),
                n.dtype,
                n.layout.ne,
                esc(&self.backends[np.backend]),
                esc(&np.cause.to_string())
            );
            if let Some(name) = &n.name {
                label = format!("{}\\n{label}", esc(name));
            }
            let shape = if n.op == graph::Op::Input { "ellipse" } else { "box" };
            let style = if n.op.is_view() { "filled,dashed" } else { "filled" };
            let pen = if n.flags.output { 3 } else { 1 };
            format!(
                "n{} [label=\"{label}\", shape={shape}, style=\"{style}\", penwidth={pen}, fillcolor={}];\n",
                id.0,
                COLORS[np.backend % COLORS.len()]
            )
        };
        let mut in_split = vec![false; self.nodes.len()];
        for (i, s) in self.splits.iter().enumerate() {
            let _ = writeln!(
                out,
                "  subgraph cluster_split{i} {{\n    label=\"split {i} on {}\";",
                esc(&self.backends[s.backend])
            );
            for &id in &s.nodes {
                in_split[id.index()] = true;
                out.push_str("    ");
                out.push_str(&node(id));
            }
            out.push_str("  }\n");
        }
        for id in g.topo_order() {
            if !in_split[id.index()] {
                out.push_str("  ");
                out.push_str(&node(id));
            }
        }
        for (id, n) in g.nodes() {
            let to = self.nodes[id.index()].backend;
            for (slot, &src) in n.srcs.iter().enumerate() {
                let st = g.storage_of(src);
                let from = self.nodes[st.index()].backend;
                if from == to || n.op.is_view() {
                    let _ = writeln!(out, "  n{} -> n{} [label=\"{slot}\"];", src.0, id.0);
                } else {
                    let label = g.node(st).name.clone().unwrap_or_else(|| st.to_string());
                    let _ = writeln!(
                        out,
                        "  n{} -> n{} [label=\"{slot}: copy {}@{}\", style=dashed];",
                        src.0,
                        id.0,
                        esc(&label),
                        esc(&self.backends[to])
                    );
                }
            }
        }
        out.push_str("}\n");
        out
    }
}
