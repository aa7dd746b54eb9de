//! `CpuBackend` as a `sched::Backend`: buffers (alignment, zeroing, bounds errors, host slices,
//! copies), `supports` on every fixture graph and on a misaligned view, correct results when the
//! planner places an op's output over its own input, a whole graph through `sched::Scheduler`
//! matching the harness run, and partial read-back of a logits-like output (`read_rows`).

mod harness;

use cpu::CpuBackend;
use graph::{DType, Graph, NodeId};
use harness::{Harness, Rng, assert_close};
use sched::{Backend, BackendError, Bindings, CopyRegion, MemoryKind, Scheduler, SplitTask, TensorLoc};

#[test]
fn buffers_are_aligned_zeroed_bounds_checked_and_host_visible() {
    let mut be = CpuBackend::with_threads(2);
    assert_eq!(be.name(), "cpu");
    assert_eq!(be.threads(), 2);
    let a = be.alloc(100, MemoryKind::Device).unwrap();
    let b = be.alloc(37, MemoryKind::Host).unwrap();
    for (buf, len) in [(a, 100), (b, 37)] {
        let s = be.host_slice(buf, 0, len).expect("host visible");
        assert_eq!(s.as_ptr() as usize % be.alignment(), 0);
        assert!(s.iter().all(|&x| x == 0));
    }
    be.upload(a, 10, &[1, 2, 3]).unwrap();
    let mut out = [0u8; 5];
    be.download(a, 9, &mut out).unwrap();
    assert_eq!(out, [0, 1, 2, 3, 0]);
    assert!(matches!(be.upload(b, 35, &[0; 3]), Err(BackendError::Other { .. })));
    assert!(matches!(be.download(a, usize::MAX, &mut out), Err(BackendError::Other { .. })));
    assert!(be.host_slice(b, 30, 8).is_none());
    let region = |src_offset, dst_offset, len| CopyRegion { src_offset, dst_offset, len };
    be.copy_regions(a, b, &[region(10, 0, 3), region(11, 5, 2)]).unwrap();
    assert_eq!(be.host_slice(b, 0, 7).unwrap(), &[1, 2, 3, 0, 0, 2, 3]);
    be.copy_regions(a, a, &[region(10, 11, 3)]).unwrap();
    assert_eq!(be.host_slice(a, 10, 4).unwrap(), &[1, 1, 2, 3]);
    assert!(be.copy_regions(a, b, &[region(0, 0, 1), region(0, 30, 8)]).is_err(), "b has 37 bytes");
    be.free(a).unwrap();
    assert!(be.upload(a, 0, &[1]).is_err());
    assert!(be.free(a).is_err());
    // A freed slot is reused.
    let c = be.alloc(8, MemoryKind::Host).unwrap();
    assert_eq!(c, a);
}

#[test]
fn supports_every_fixture_node_but_not_misaligned_views() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/graphs");
    let be = CpuBackend::with_threads(1);
    let mut seen = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "graph") {
            let g = graph::fixture::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for (id, _) in g.nodes() {
                assert!(be.supports(&g, id), "{} node {id}", path.display());
            }
            seen += 1;
        }
    }
    assert!(seen >= 3);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[8, 2]).unwrap();
    let v = g.view(x, &[3, 2], &[4, 32], 2).unwrap();
    let ok = g.view(x, &[3, 2], &[4, 32], 4).unwrap();
    assert!(!be.supports(&g, v));
    assert!(be.supports(&g, ok));
}

#[test]
fn output_placed_over_its_input_is_still_right() {
    // A reuse planner may give an op's output the bytes of a dead input; the kernels must not read
    // what they already overwrote.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[1000, 3]).unwrap();
    let t = g.transpose(x).unwrap();
    let c = g.cont(t).unwrap(); // [3, 1000], overlaps x element-for-element at other positions
    let s = g.soft_max(x, None, 1.0).unwrap();
    let cs = g.cumsum(s).unwrap();
    let mut be = CpuBackend::with_threads(2);
    let buf = be.alloc(12_000, MemoryKind::Host).unwrap();
    let mut bindings = Bindings::new(g.len());
    for id in [x, t, c, s, cs] {
        bindings.bind(id, TensorLoc { buffer: buf, offset: 0 });
    }
    let xv = Rng::new(3).vec(3000, -2.0, 2.0);
    let bytes: Vec<u8> = xv.iter().flat_map(|v| v.to_le_bytes()).collect();
    for (node, want) in [
        (c, (0..3000).map(|i| xv[(i % 3) * 1000 + i / 3]).collect::<Vec<f32>>()),
        (s, xv.chunks(1000).flat_map(softmax_f64).collect()),
    ] {
        be.upload(buf, 0, &bytes).unwrap();
        be.compute(SplitTask { graph: &g, nodes: &[node], bindings: &bindings }).unwrap();
        let got: Vec<f32> = be
            .host_slice(buf, 0, 12_000)
            .unwrap()
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_close(&format!("node {node}"), &got, &want, 1e-7, 1e-5);
    }
    // In place, row-wise: cumsum over its own input.
    let before: Vec<f32> =
        be.host_slice(buf, 0, 12_000).unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    be.compute(SplitTask { graph: &g, nodes: &[cs], bindings: &bindings }).unwrap();
    let got: Vec<f32> =
        be.host_slice(buf, 0, 12_000).unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    let want: Vec<f32> = before
        .chunks(1000)
        .flat_map(|r| {
            let mut acc = 0.0f64;
            r.iter().map(move |&v| {
                acc += f64::from(v);
                acc as f32
            })
        })
        .collect();
    assert_close("cumsum in place", &got, &want, 1e-5, 1e-5);
}

fn softmax_f64(row: &[f32]) -> Vec<f32> {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - f64::from(m)).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|&v| (v / s) as f32).collect()
}

#[test]
fn a_graph_through_the_scheduler_matches_the_harness() {
    let build = || {
        let mut g = Graph::new();
        let w = g.param("w", DType::F16, &[64, 300]).unwrap();
        let x = g.input("x", DType::F32, &[64, 4]).unwrap();
        let keys = g.input("keys", DType::I32, &[4, 4]).unwrap();
        let logits = g.mul_mat(w, x).unwrap();
        let scaled = g.scale(logits, 1.25).unwrap();
        let probs = g.soft_max(scaled, None, 1.0).unwrap();
        let top = g.top_k(probs, 10).unwrap();
        let cum = g.cumsum(probs).unwrap();
        let u = g.random_uniform(keys, 1, 0).unwrap();
        let am = g.argmax(scaled).unwrap();
        for o in [top, cum, u, am] {
            g.set_output(o);
        }
        (g, w, x, keys, [top, am], [cum, u])
    };
    let mut rng = Rng::new(9);
    let wv = rng.vec(64 * 300, -1.0, 1.0);
    let xv = rng.vec(64 * 4, -1.0, 1.0);
    let kv: Vec<i32> = (0..16).map(|i| i * 7 + 1).collect();

    let (g, w, x, keys, ints, floats) = build();
    let mut h = Harness::new(g.clone(), 2);
    h.set_f32(w, &wv);
    h.set_f32(x, &xv);
    h.set_i32(keys, &kv);
    h.run().unwrap();

    let mut s = Scheduler::new(vec![Box::new(CpuBackend::new())]).unwrap();
    s.plan(&g).unwrap();
    s.set_input_f32(w, &wv).unwrap();
    s.set_input_f32(x, &xv).unwrap();
    s.set_input_i32(keys, &kv).unwrap();
    s.compute().unwrap();
    for id in ints {
        assert_eq!(s.read_i32(id).unwrap(), h.i32(id), "node {id}");
    }
    for id in floats {
        let got = s.read_f32(id).unwrap();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            h.f32(id).iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    let _: NodeId = w;
}

#[test]
fn read_rows_reads_outputs_in_place_and_counts_exactly_the_rows() {
    let mut s = Scheduler::new(vec![Box::new(CpuBackend::with_threads(2))]).unwrap();
    let (v, n) = (3000, 5);
    let mut g = Graph::new();
    let x = g.input("logits", DType::F32, &[v, n]).unwrap();
    let y = g.scale(x, -1.0).unwrap();
    let t = g.transpose(y).unwrap();
    let sm = g.soft_max(y, None, 1.0).unwrap();
    for o in [y, t, sm] {
        g.set_output(o);
    }
    let p = s.plan(&g).unwrap();
    // device memory is host memory on the CPU: outputs are read in place, no read-back region
    assert!(p.nodes.iter().all(|np| np.readback.is_none()));
    let mut rng = Rng::new(5);
    let xs = rng.vec(v * n, -3.0, 3.0);
    s.set_input_f32(x, &xs).unwrap();
    s.compute().unwrap();
    for (node, rows, row_len) in [(y, n, v), (t, v, n), (sm, n, v)] {
        let full = s.read_f32(node).unwrap();
        for subset in [vec![], vec![4 % rows], vec![2, 0, 2], (0..rows).rev().collect::<Vec<_>>()] {
            let before = s.stats().bytes_to_host;
            let got = s.read_rows_f32(node, &subset).unwrap();
            let want: Vec<f32> = subset.iter().flat_map(|&r| full[r * row_len..(r + 1) * row_len].to_vec()).collect();
            assert_eq!(got, want, "{}, rows {subset:?}", g.describe(node));
            assert_eq!(s.stats().bytes_to_host - before, (subset.len() * row_len * 4) as u64);
        }
        // read_rows_with: the same bytes, in place for adjacent rows of a contiguous output, gathered
        // otherwise (rows out of order, the transposed view), counted alike.
        for subset in [vec![1usize % rows, 2 % rows], vec![2 % rows, 0], vec![0]] {
            let before = s.stats().bytes_to_host;
            let got = s.read_rows_with(node, &subset, |b| b.to_vec()).unwrap();
            assert_eq!(got, s.read_rows(node, &subset).unwrap(), "{}, rows {subset:?}", g.describe(node));
            assert_eq!(s.stats().bytes_to_host - before, 2 * (subset.len() * row_len * 4) as u64);
        }
    }
}
