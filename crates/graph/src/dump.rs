//! Text and Graphviz DOT dumps of a graph.
//!
//! The text form has one line per node:
//! `  #id  op{params}  dtype [shape]  <- #src, #src  name  (flags)`, then, for views, the strides and
//! storage (`view of #s +offset nb=[..]`). `sched` prints its plans through [`node_line`] so the two
//! read alike.

use crate::graph::Graph;
use crate::node::NodeId;
use std::fmt::Write;

/// One node's line of the text dump (no trailing newline).
pub fn node_line(g: &Graph, id: NodeId) -> String {
    let n = g.node(id);
    let mut s =
        format!("{:>5} {:<28} {:<4} {:<22}", id.to_string(), n.op.to_string(), n.dtype.name(), n.layout.ne.to_string());
    if !n.srcs.is_empty() {
        let srcs: Vec<String> = n.srcs.iter().map(|s| s.to_string()).collect();
        let _ = write!(s, " <- {:<14}", srcs.join(", "));
    } else {
        let _ = write!(s, "    {:<14}", "");
    }
    if let Some(name) = &n.name {
        let _ = write!(s, " {name}");
    }
    let flags = n.flags.describe();
    if !flags.is_empty() {
        let _ = write!(s, " ({flags})");
    }
    if let Some(st) = n.storage {
        let contiguous = n.layout.is_contiguous(n.dtype);
        let _ = write!(s, " [storage {st} +{}", n.layout.offset);
        if !contiguous {
            let _ = write!(s, " nb={:?}", n.layout.nb);
        }
        s.push(']');
    }
    s.trim_end().to_string()
}

/// The compact text dump: a header with counts and the topology hash, then one line per node.
pub fn to_text(g: &Graph) -> String {
    let mut out = format!(
        "graph: {} nodes, {} inputs, {} params, {} outputs, topology {:016x}\n",
        g.len(),
        g.inputs().len(),
        g.params().len(),
        g.outputs().len(),
        g.topology_hash()
    );
    for id in g.topo_order() {
        out.push_str(&node_line(g, id));
        out.push('\n');
    }
    out
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A Graphviz DOT rendering: one box per node (op, dtype, shape, name), inputs and params as
/// ellipses, outputs bold, views dashed; edges from sources to users labelled with the source slot.
pub fn to_dot(g: &Graph) -> String {
    let mut out = String::from("digraph G {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n");
    for (id, n) in g.nodes() {
        let mut label = format!("{id} {}\\n{} {}", dot_escape(&n.op.to_string()), n.dtype, n.layout.ne);
        if let Some(name) = &n.name {
            label = format!("{}\\n{label}", dot_escape(name));
        }
        let shape = if n.flags.input || n.flags.param || n.flags.state { "ellipse" } else { "box" };
        let mut style = vec![];
        if n.op.is_view() {
            style.push("dashed");
        }
        if n.flags.output {
            style.push("bold");
        }
        if n.flags.param {
            style.push("filled");
        }
        if n.flags.state {
            style.push("diagonals");
        }
        let _ = writeln!(out, "  n{} [label=\"{label}\", shape={shape}, style=\"{}\"];", id.0, style.join(","));
    }
    for (id, n) in g.nodes() {
        for (slot, s) in n.srcs.iter().enumerate() {
            let _ = writeln!(out, "  n{} -> n{} [label=\"{slot}\"];", s.0, id.0);
        }
    }
    out.push_str("}\n");
    out
}
