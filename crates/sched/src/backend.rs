//! The `Backend` trait: what the planner and executor need from a device, ggml-backend style.
//!
//! A small required core (name, `supports`, buffers in a memory kind, upload, download, compute a
//! split, synchronize) and optional hooks with defaults. `supports` is the single truth the planner
//! uses; the op-conformance suite checks that everything a backend claims to support runs and matches
//! the oracle.
//!
//! Addressing: a backend owns buffers ([`BufferId`]); a tensor's *storage* (the node that owns the
//! bytes, see `graph::Graph::storage_of`) is placed at a [`TensorLoc`] (buffer + byte offset). A node's
//! element `idx` lives at `loc(storage).offset + node.layout.byte_offset(idx)` in that buffer, which
//! covers views and in-place results without extra bookkeeping.
//!
//! Imported buffers ([`Backend::import_host`]): a backend whose device memory is host memory may
//! wrap [`SharedBytes`] (a param's data owned elsewhere, a mapped model file) as a read-only buffer
//! instead of copying them. Such a buffer keeps its `SharedBytes` (and so the owner's memory) alive
//! until it is freed, and refuses every write (`upload`, a `copy_regions` destination, a node that
//! would write into it) with an error.

use crate::shared::SharedBytes;
use graph::{DType, Graph, NodeId};

/// Errors from a backend. Each names the backend; compute errors also name the node and op.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// The backend cannot be used on this machine (no loader, no device, ...).
    #[error("{backend} backend unavailable: {reason}")]
    Unavailable {
        /// Backend name.
        backend: String,
        /// Why, in words.
        reason: String,
    },
    /// An allocation failed.
    #[error("{backend}: out of memory allocating {bytes} bytes of {kind:?} memory")]
    OutOfMemory {
        /// Backend name.
        backend: String,
        /// Requested size.
        bytes: usize,
        /// Requested memory kind.
        kind: MemoryKind,
    },
    /// A node failed at run time (e.g. an out-of-range row id).
    #[error("{backend}: node {node} ({op}): {msg}")]
    Compute {
        /// Backend name.
        backend: String,
        /// The failing node.
        node: NodeId,
        /// Its op's name.
        op: &'static str,
        /// What went wrong.
        msg: String,
    },
    /// Anything else (bad buffer id, out-of-bounds transfer, device lost, ...).
    #[error("{backend}: {msg}")]
    Other {
        /// Backend name.
        backend: String,
        /// What went wrong.
        msg: String,
    },
}

/// Result alias for backend calls.
pub type BackendResult<T> = Result<T, BackendError>;

/// Where a buffer's memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// The backend's fastest memory for compute (device-local on a GPU).
    Device,
    /// Host-visible (pinned, host-cached where offered) memory: the CPU reads it without a staging
    /// copy. Outputs and inputs written every step live here.
    Host,
}

/// One byte range of a batched copy ([`Backend::copy_regions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopyRegion {
    /// Byte offset in the source buffer.
    pub src_offset: usize,
    /// Byte offset in the destination buffer.
    pub dst_offset: usize,
    /// Length in bytes.
    pub len: usize,
}

/// A backend-local buffer handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u32);

/// Where a tensor's storage starts: a buffer and a byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorLoc {
    /// The buffer.
    pub buffer: BufferId,
    /// Byte offset of the storage's first byte.
    pub offset: usize,
}

/// Storage locations of the tensors one split touches, indexed by `NodeId` (the node's *storage*
/// location; for a node computed by another backend, the location of its copy on this one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bindings {
    locs: Vec<Option<TensorLoc>>,
}

impl Bindings {
    /// Empty bindings for a graph of `n` nodes.
    pub fn new(n: usize) -> Bindings {
        Bindings { locs: vec![None; n] }
    }

    /// Binds the storage of `node` (for views: bind the view itself to its storage's location).
    pub fn bind(&mut self, node: NodeId, loc: TensorLoc) {
        self.locs[node.index()] = Some(loc);
    }

    /// The storage location bound for `node`, if any.
    pub fn get(&self, node: NodeId) -> Option<TensorLoc> {
        self.locs.get(node.index()).copied().flatten()
    }

    /// The storage location bound for `node`; panics if the planner failed to bind it (an internal
    /// invariant of the executor, not a user error).
    pub fn loc(&self, node: NodeId) -> TensorLoc {
        self.get(node).unwrap_or_else(|| panic!("no storage bound for node {node}"))
    }
}

/// One split handed to a backend: the nodes to compute, in order, and where every tensor they read or
/// write lives. View nodes may appear in `nodes`; they compute nothing.
#[derive(Debug, Clone, Copy)]
pub struct SplitTask<'a> {
    /// The whole graph (for shapes, params and sources).
    pub graph: &'a Graph,
    /// Nodes to compute, in topological order.
    pub nodes: &'a [NodeId],
    /// Storage locations for these nodes and all their sources.
    pub bindings: &'a Bindings,
}

/// Work a backend has handed to its device since it was created: what a GPU step costs beyond its
/// arithmetic (each submission and each host wait is a round trip through the driver). Benchmarks
/// report the difference across a step ([`WorkCounts::since`]); the CPU backend counts nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkCounts {
    /// Compute dispatches recorded.
    pub dispatches: u64,
    /// Command buffers submitted to a queue.
    pub submissions: u64,
    /// Times the host blocked on a fence (one per wait, however many submissions it retired).
    pub host_waits: u64,
    /// Nanoseconds the host spent submitting (ending the command buffer, taking a fence and
    /// `vkQueueSubmit`).
    pub submit_ns: u64,
    /// Nanoseconds the host spent blocked in those fence waits.
    pub wait_ns: u64,
    /// Nanoseconds the host spent recording commands (encoding each node's dispatches).
    pub record_ns: u64,
}

impl WorkCounts {
    /// The work done between `earlier` and `self`.
    pub fn since(self, earlier: WorkCounts) -> WorkCounts {
        WorkCounts {
            dispatches: self.dispatches.saturating_sub(earlier.dispatches),
            submissions: self.submissions.saturating_sub(earlier.submissions),
            host_waits: self.host_waits.saturating_sub(earlier.host_waits),
            submit_ns: self.submit_ns.saturating_sub(earlier.submit_ns),
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
            record_ns: self.record_ns.saturating_sub(earlier.record_ns),
        }
    }
}

impl std::ops::Add for WorkCounts {
    type Output = WorkCounts;
    fn add(self, o: WorkCounts) -> WorkCounts {
        WorkCounts {
            dispatches: self.dispatches + o.dispatches,
            submissions: self.submissions + o.submissions,
            host_waits: self.host_waits + o.host_waits,
            submit_ns: self.submit_ns + o.submit_ns,
            wait_ns: self.wait_ns + o.wait_ns,
            record_ns: self.record_ns + o.record_ns,
        }
    }
}

/// A compute device. Object-safe; the scheduler holds `Box<dyn Backend>`.
pub trait Backend: Send + std::fmt::Debug {
    /// Short name used in plans and errors (`cpu`, `vulkan`).
    fn name(&self) -> &str;

    /// The work this backend has handed to its device so far (see [`WorkCounts`]); none by default.
    fn work_counts(&self) -> WorkCounts {
        WorkCounts::default()
    }

    /// Whether this backend can compute `node` of `graph` (op, dtypes, layouts). The planner's only
    /// source of truth.
    fn supports(&self, graph: &Graph, node: NodeId) -> bool;

    /// Allocates a zero-initialised buffer of `bytes` bytes.
    fn alloc(&mut self, bytes: usize, kind: MemoryKind) -> BackendResult<BufferId>;

    /// Frees a buffer.
    fn free(&mut self, buffer: BufferId) -> BackendResult<()>;

    /// Writes `data` at byte `offset` of `buffer`.
    fn upload(&mut self, buffer: BufferId, offset: usize, data: &[u8]) -> BackendResult<()>;

    /// Reads `out.len()` bytes at byte `offset` of `buffer` (waits for pending work on it).
    fn download(&mut self, buffer: BufferId, offset: usize, out: &mut [u8]) -> BackendResult<()>;

    /// Computes a split (may return before the work finishes; see [`Backend::synchronize`]).
    fn compute(&mut self, task: SplitTask<'_>) -> BackendResult<()>;

    /// Waits until all submitted work has finished.
    fn synchronize(&mut self) -> BackendResult<()>;

    // ----- optional hooks -----

    /// Zero-copy read access to host-visible bytes (`None` where the memory is not host-visible).
    /// Callers synchronize first.
    fn host_slice(&self, _buffer: BufferId, _offset: usize, _len: usize) -> Option<&[u8]> {
        None
    }

    /// Copies byte ranges from `src` to `dst` (two buffers of this backend, possibly the same one)
    /// in one batch: one submission on a GPU, which waits only for that batch. The scheduler uses it
    /// to bring the requested rows of a device-resident output into the output's host-visible
    /// read-back region. Ranges are bounds-checked; within one buffer a range must not overlap
    /// another's destination. The default goes through the host, range by range.
    fn copy_regions(&mut self, src: BufferId, dst: BufferId, regions: &[CopyRegion]) -> BackendResult<()> {
        let mut tmp = Vec::new();
        for r in regions {
            tmp.resize(r.len, 0);
            self.download(src, r.src_offset, &mut tmp)?;
            self.upload(dst, r.dst_offset, &tmp)?;
        }
        Ok(())
    }

    /// Whether buffers of [`MemoryKind::Device`] are host memory that [`Backend::host_slice`] reads
    /// directly (the CPU backend). Then outputs need no read-back region: rows are read in place.
    fn device_memory_is_host(&self) -> bool {
        false
    }

    /// Required alignment of tensor offsets inside a buffer, in bytes.
    fn alignment(&self) -> usize {
        64
    }

    /// Wraps `bytes`, the data of a param of `dtype`, as a read-only buffer of `bytes.len()` bytes
    /// without copying them, where this backend computes on host memory and its kernels can read
    /// the bytes where they are (alignment); `None` otherwise (the default), and the scheduler
    /// copies them into a buffer of its own. The buffer holds `bytes` (the owner stays alive) until
    /// it is freed; writes into it are errors.
    fn import_host(&mut self, _bytes: &SharedBytes, _dtype: DType) -> Option<BufferId> {
        None
    }

    /// Bytes of the buffers this backend allocated and still holds (imports are the caller's
    /// memory and do not count), where it keeps count; `None` by default.
    fn allocated_bytes(&self) -> Option<usize> {
        None
    }

    /// Largest single buffer this backend can allocate.
    fn max_buffer_size(&self) -> usize {
        usize::MAX
    }
}
