//! The dispatcher: checks a node's operands against the split's bindings (bounds, alignment, overlap
//! with the destination, a destination in an imported read-only buffer), builds `TensorRef`s and maps the `Op` to its kernel in `ops/`. Also the
//! single `supports` predicate.

use crate::buffer::Buffer;
use crate::error::CpuError;
use crate::ops::{self, K};
use crate::tensor::TensorRef;
use graph::{Graph, Node, NodeId, Op};
use sched::{BackendError, Bindings};

/// Whether the CPU kernels implement `node`: every op and dtype combination the builder accepts,
/// provided each operand's byte offset and strides are multiples of its element size (views with odd
/// byte offsets are the only thing the builder allows that the kernels do not).
pub(crate) fn supports(graph: &Graph, id: NodeId) -> bool {
    let Some(node) = graph.get(id) else { return false };
    let aligned = |n: &Node| {
        let s = align(n.dtype);
        n.layout.offset.is_multiple_of(s) && n.layout.nb.iter().all(|&b| b.is_multiple_of(s))
    };
    aligned(node) && node.srcs.iter().all(|&s| graph.get(s).is_some_and(aligned))
}

/// The alignment the kernels need: the element size, or 1 for a quantized dtype (its kernels read
/// blocks byte-wise).
pub(crate) fn align(d: graph::DType) -> usize {
    if d.is_quantized() { 1 } else { d.size() }
}

fn other(msg: String) -> BackendError {
    BackendError::Other { backend: "cpu".into(), msg }
}

/// Builds the `TensorRef` of `id` (bound in `bindings`), checking bounds and alignment.
fn tensor_ref(
    graph: &Graph,
    user: NodeId,
    id: NodeId,
    role: &'static str,
    bindings: &Bindings,
    buffers: &[Option<Buffer>],
) -> Result<TensorRef, BackendError> {
    let n = graph.node(id);
    let loc = bindings
        .get(id)
        .ok_or_else(|| other(format!("node {user} ({}): no storage bound for its {role} {id}", graph.node(user).op)))?;
    let buf = buffers
        .get(loc.buffer.0 as usize)
        .and_then(Option::as_ref)
        .ok_or_else(|| other(format!("node {user}: {role} {id} is bound to unknown buffer {}", loc.buffer.0)))?;
    if role == "destination" && !buf.writable() {
        return Err(other(format!(
            "node {user} ({}): its destination {id} lies in imported, read-only buffer {}",
            graph.node(user).op,
            loc.buffer.0
        )));
    }
    let start = loc.offset + n.layout.offset;
    let extent = n.layout.extent(n.dtype) - n.layout.offset;
    if start + extent > buf.len() {
        return Err(other(format!(
            "node {user}: {role} {id} needs bytes {start}..{} of buffer {} ({} bytes)",
            start + extent,
            loc.buffer.0,
            buf.len()
        )));
    }
    let t = TensorRef { data: buf.ptr().wrapping_add(start), dtype: n.dtype, ne: n.layout.ne, nb: n.layout.nb };
    let size = align(n.dtype);
    if !(t.data as usize).is_multiple_of(size) || t.nb.iter().any(|&b| !b.is_multiple_of(size)) {
        let err = CpuError::Misaligned { role, offset: start, nb: t.nb, size };
        return Err(compute_err(user, &graph.node(user).op, err));
    }
    Ok(t)
}

pub(crate) fn compute_err(id: NodeId, op: &Op, e: CpuError) -> BackendError {
    BackendError::Compute { backend: "cpu".into(), node: id, op: op.name(), msg: e.to_string() }
}

/// A private aligned copy of a source that overlaps the destination.
fn detach(t: &TensorRef, keep: &mut Vec<Vec<u64>>) -> TensorRef {
    let len = t.extent();
    let mut v = vec![0u64; len.div_ceil(8)];
    // SAFETY: `t` is valid for `len` bytes from `data` (bounds-checked in `tensor_ref`); `v` is a
    // fresh allocation of at least `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(t.data, v.as_mut_ptr() as *mut u8, len) };
    let data = v.as_mut_ptr() as *mut u8;
    keep.push(v);
    TensorRef { data, ..*t }
}

fn overlaps(a: &TensorRef, b: &TensorRef) -> bool {
    let (a0, b0) = (a.data as usize, b.data as usize);
    a0 < b0 + b.extent() && b0 < a0 + a.extent()
}

/// Sources a node's kernel context holds without allocating.
const INLINE_SRCS: usize = 4;

/// Computes node `id`.
pub(crate) fn run(
    graph: &Graph,
    id: NodeId,
    bindings: &Bindings,
    buffers: &[Option<Buffer>],
) -> Result<(), BackendError> {
    let node = graph.node(id);
    if node.op.is_view() || matches!(node.op, Op::Input) {
        return Ok(());
    }
    let _span = tracing::trace_span!("cpu_node", node = %id, op = node.op.name()).entered();
    let dst = tensor_ref(graph, id, id, "destination", bindings, buffers)?;
    let mut keep = Vec::new();
    // Up to `INLINE_SRCS` sources on the stack (every op but a few): no allocation per node.
    let mut inline = [dst; INLINE_SRCS];
    let mut spill = Vec::new();
    let many = node.srcs.len() > INLINE_SRCS;
    for (i, &s) in node.srcs.iter().enumerate() {
        let t = if node.op.inplace_src() == Some(i) {
            // The destination itself (set_rows writes into it); never read through this operand.
            dst
        } else {
            let t = tensor_ref(graph, id, s, "source", bindings, buffers)?;
            if overlaps(&t, &dst) { detach(&t, &mut keep) } else { t }
        };
        if many {
            spill.push(t);
        } else {
            inline[i] = t;
        }
    }
    let srcs = if many { &spill[..] } else { &inline[..node.srcs.len()] };
    let k = K { id, node, dst, srcs };
    ops::dispatch(&k).map_err(|e| compute_err(id, &node.op, e))
}
