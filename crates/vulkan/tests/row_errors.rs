//! Out-of-range row ids on the Vulkan backend: `get_rows` and `set_rows` report a compute error
//! naming the node and op (the shader flags a status word the host reads back), negative ids too,
//! and the next run with in-range ids is clean (the status is reset), also when a split goes to
//! the device in several pieces with pooled status buffers. The op cases themselves run in
//! the conformance suite (`tests/conformance.rs`); the CPU's own error rules are in
//! `crates/cpu/tests/rules.rs`.

mod common;

use common::*;
use graph::{DType, Graph};
use sched::Backend;
use vulkan::VulkanBackend;

#[test]
fn out_of_range_row_ids_are_compute_errors() {
    use sched::{Bindings, MemoryKind, SplitTask, TensorLoc};
    let Some(mut vk) = vulkan("out_of_range_row_ids_are_compute_errors") else { return };
    for set in [false, true] {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[4, 3]).unwrap();
        let ids = g.input("ids", DType::I32, &[2]).unwrap();
        let o = if set {
            let v = g.input("v", DType::F32, &[4, 2]).unwrap();
            g.set_rows(a, v, ids).unwrap()
        } else {
            g.get_rows(a, ids).unwrap()
        };
        g.set_output(o);
        let mut b = Bindings::new(g.len());
        for (id, _) in g.nodes() {
            if g.storage_of(id) == id {
                let buf = vk.alloc(64, MemoryKind::Device).unwrap();
                b.bind(id, TensorLoc { buffer: buf, offset: 0 });
            }
        }
        for (id, _) in g.nodes() {
            b.bind(id, b.loc(g.storage_of(id)));
        }
        let run = |vk: &mut VulkanBackend, idv: [i32; 2]| {
            let loc = b.loc(ids);
            vk.upload(loc.buffer, loc.offset, &i32_bytes(&idv)).unwrap();
            vk.compute(SplitTask { graph: &g, nodes: &[o], bindings: &b }).unwrap();
            vk.synchronize()
        };
        match run(&mut vk, [1, 3]) {
            Err(sched::BackendError::Compute { node, op, .. }) => {
                assert_eq!((node, op), (o, if set { "set_rows" } else { "get_rows" }));
            }
            other => panic!("id 3 of 3 rows should be a compute error, got {other:?}"),
        }
        assert!(run(&mut vk, [-1, 0]).is_err(), "negative ids are errors");
        assert!(run(&mut vk, [2, 0]).is_ok(), "in-range ids after an error run cleanly");
    }
    assert_clean(&vk);
}

#[test]
fn a_row_error_in_a_later_piece_of_a_split_names_its_node() {
    use sched::{Bindings, MemoryKind, SplitTask, TensorLoc};
    let Some(mut vk) = vulkan("a_row_error_in_a_later_piece_of_a_split_names_its_node") else { return };
    // 150 dispatches: the backend submits them in pieces (8, then every 64), each piece with its
    // own status words (pooled buffers, reused after the piece retires).
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[4, 3]).unwrap();
    let early_ids = g.input("early_ids", DType::I32, &[2]).unwrap();
    let late_ids = g.input("late_ids", DType::I32, &[2]).unwrap();
    let early = g.get_rows(a, early_ids).unwrap();
    let mut x = early;
    for _ in 0..100 {
        x = g.scale(x, 1.0).unwrap();
    }
    let late = g.get_rows(a, late_ids).unwrap();
    let mut y = g.add(x, late).unwrap();
    for _ in 0..47 {
        y = g.scale(y, 1.0).unwrap();
    }
    g.set_output(y);
    let mut b = Bindings::new(g.len());
    for (id, _) in g.nodes() {
        if g.storage_of(id) == id {
            let buf = vk.alloc(64, MemoryKind::Device).unwrap();
            b.bind(id, TensorLoc { buffer: buf, offset: 0 });
        }
    }
    let nodes: Vec<graph::NodeId> = g.nodes().map(|(id, _)| id).collect();
    let run = |vk: &mut VulkanBackend, e: [i32; 2], l: [i32; 2]| {
        for (node, v) in [(early_ids, e), (late_ids, l)] {
            let loc = b.loc(node);
            vk.upload(loc.buffer, loc.offset, &i32_bytes(&v)).unwrap();
        }
        let before = vk.work_counts();
        vk.compute(SplitTask { graph: &g, nodes: &nodes, bindings: &b }).unwrap();
        let r = vk.synchronize();
        (r, vk.work_counts().since(before).submissions)
    };
    let (r, submissions) = run(&mut vk, [0, 1], [2, 0]);
    assert!(r.is_ok(), "{r:?}");
    assert!(submissions >= 3, "150 dispatches went into {submissions} submission(s)");
    for (e, l, want) in
        [([0, 1], [2, 3], late), ([5, 1], [2, 0], early), ([0, 1], [2, 0], y), ([0, -1], [-2, 0], early)]
    {
        match run(&mut vk, e, l).0 {
            Ok(()) => assert_eq!(want, y, "ids {e:?} {l:?} ran without an error"),
            Err(sched::BackendError::Compute { node, op, .. }) => {
                assert_eq!((node, op), (want, "get_rows"), "ids {e:?} {l:?}");
            }
            Err(other) => panic!("ids {e:?} {l:?}: {other:?}"),
        }
    }
    assert_clean(&vk);
}
