//! Kernels that read quantized tensors (`q8_0`, `q4_0`, `q4_1`): `mul_mat` with a quantized
//! weight and `get_rows` from a quantized table.
//!
//! Not implemented yet on this commit: `supported` turns every node with a quantized source down,
//! so the scheduler reports it as unsupported rather than running it.

use graph::{Graph, Node};

/// Whether the CPU runs `node` as far as quantized operands go: true when no source is quantized.
pub(crate) fn supported(graph: &Graph, node: &Node) -> bool {
    node.srcs.iter().all(|&s| graph.get(s).is_some_and(|n| !n.dtype.is_quantized()))
}
