//! What the CPU backend promises beyond the op docs; the op cases themselves (every op, dtype,
//! layout and edge size against the f64 reference) live in the conformance suite
//! (`crates/conformance`, run on the CPU by its `tests/cpu.rs`). Here: an out-of-range id is a
//! compute error naming the node and op, raised before anything is written; `set_rows` keeps the
//! last row of a repeated id (a serial write in id order; the op leaves repeated ids unspecified and
//! the Vulkan backend writes them in parallel); results do not depend on the thread count.
#![allow(clippy::needless_range_loop)]

mod harness;

use graph::{DType, Graph, NodeId};
use harness::{Harness, Rng, assert_close, round_to};
use sched::BackendError;

fn input(g: &mut Graph, name: &str, dt: DType, ne: &[usize]) -> NodeId {
    g.input(name, dt, ne).unwrap()
}

/// Values as the input tensor holds them (rounded to its dtype).
fn fill_input(h: &mut Harness, id: NodeId, v: &[f32]) -> Vec<f32> {
    h.set_f32(id, v);
    let dt = h.g.node(id).dtype;
    v.iter().map(|&x| round_to(dt, x)).collect()
}

fn flat(ne: [usize; 4], i: [usize; 4]) -> usize {
    i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))
}

fn expect_compute_err(r: Result<(), BackendError>, op: &str, node: NodeId) {
    match r {
        Err(BackendError::Compute { op: o, node: n, msg, .. }) => {
            assert_eq!(o, op);
            assert_eq!(n, node);
            assert!(msg.contains("out of range"), "{msg}");
        }
        other => panic!("expected a compute error from {op}, got {other:?}"),
    }
}

#[test]
fn out_of_range_ids_are_errors_naming_node_and_op() {
    let mut g = Graph::new();
    let a = input(&mut g, "a", DType::F32, &[4, 6]);
    let ids = input(&mut g, "ids", DType::I32, &[2]);
    let r = g.get_rows(a, ids).unwrap();
    let mut h = Harness::new(g, 1);
    for bad in [6, -1, i32::MAX] {
        h.set_i32(ids, &[0, bad]);
        expect_compute_err(h.run(), "get_rows", r);
    }
    let mut g = Graph::new();
    let dst = input(&mut g, "dst", DType::F32, &[4, 6]);
    let vals = input(&mut g, "vals", DType::F32, &[4, 2]);
    let ids = input(&mut g, "ids", DType::I32, &[2]);
    let s = g.set_rows(dst, vals, ids).unwrap();
    let mut h = Harness::new(g, 1);
    h.set_f32(dst, &[1.0; 24]);
    h.set_i32(ids, &[1, 6]);
    expect_compute_err(h.run(), "set_rows", s);
    // Nothing was written before the error.
    assert_eq!(h.f32(dst), vec![1.0; 24]);
}

#[test]
fn set_rows_converts_and_last_duplicate_wins() {
    for (dd, vd) in
        [(DType::F32, DType::F32), (DType::F16, DType::F32), (DType::F32, DType::BF16), (DType::I32, DType::I32)]
    {
        let mut g = Graph::new();
        let dst = input(&mut g, "dst", dd, &[3, 5, 2]);
        let vals = input(&mut g, "vals", vd, &[3, 2, 2]);
        let ids = input(&mut g, "ids", DType::I32, &[2, 2]);
        let s = g.set_rows(dst, vals, ids).unwrap();
        let after = g.scale(s, 1.0);
        let mut h = Harness::new(g, 2);
        let d0: Vec<f32> = (0..30).map(|i| i as f32).collect();
        let xd = fill_input(&mut h, dst, &d0);
        let v: Vec<f32> = (0..12).map(|i| 100.0 + i as f32 * 0.3).collect();
        let xv: Vec<f32> = if vd == DType::I32 {
            let iv: Vec<i32> = v.iter().map(|&x| x as i32).collect();
            h.set_i32(vals, &iv);
            iv.iter().map(|&x| x as f32).collect()
        } else {
            fill_input(&mut h, vals, &v)
        };
        let idv = vec![4, 4, 0, 2];
        h.set_i32(ids, &idv);
        h.run().unwrap();
        let mut want = xd.clone();
        for i2 in 0..2 {
            for j in 0..2 {
                let row = idv[j + 2 * i2] as usize;
                for i0 in 0..3 {
                    want[flat([3, 5, 2, 1], [i0, row, i2, 0])] = round_to(dd, xv[flat([3, 2, 2, 1], [i0, j, i2, 0])]);
                }
            }
        }
        assert_close(&format!("set_rows {vd}->{dd}"), &h.f32(s), &want, 0.0, 0.0);
        assert_close("storage", &h.f32(dst), &want, 0.0, 0.0);
        if let Ok(after) = after {
            assert_close("reader after set_rows", &h.f32(after), &want, 0.0, 0.0);
        }
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let build = || {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[5000, 9]).unwrap();
        let w = g.input("w", DType::F16, &[5000, 33]).unwrap();
        let s = g.soft_max(x, None, 0.7).unwrap();
        let c = g.cumsum(s).unwrap();
        let t = g.top_k(x, 17).unwrap();
        let a = g.argmax(c).unwrap();
        let m = g.mul_mat(w, x).unwrap();
        (g, [s, c, m], [t, a])
    };
    let mut rng = Rng::new(10);
    let xv = rng.vec(45_000, -5.0, 5.0);
    let wv = rng.vec(165_000, -1.0, 1.0);
    let mut results = Vec::new();
    for threads in [1, 4] {
        let (g, fl, ints) = build();
        let mut h = Harness::new(g, threads);
        h.set_f32(NodeId(0), &xv);
        h.set_f32(NodeId(1), &wv);
        h.run().unwrap();
        let f: Vec<Vec<u32>> = fl.iter().map(|&id| h.f32(id).iter().map(|v| v.to_bits()).collect()).collect();
        let i: Vec<Vec<i32>> = ints.iter().map(|&id| h.i32(id)).collect();
        results.push((f, i));
    }
    assert!(results[0] == results[1]);
}
