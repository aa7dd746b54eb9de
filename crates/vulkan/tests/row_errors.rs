//! Out-of-range row ids on the Vulkan backend: `get_rows` and `set_rows` report a compute error
//! naming the node and op (the shader flags a status word the host reads back), negative ids too,
//! and the next run with in-range ids is clean (the status is reset). The op cases themselves run in
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
