//! Planning passes on mock backends: causes, splits, copies, allocation and reuse, plan snapshots of
//! the graph fixtures, and planning errors.

mod common;

use common::{Mock, fixture, log};
use graph::{DType, Graph, NodeId, Op};
use sched::{BufferRole, Cause, Plan, SchedError, Scheduler};

/// x [8, 4], b [8]: a1 = x + b; s1 = 2 a1; n1 = -s1; s2 = n1 / 2; y = s2 + x.
fn chain() -> (Graph, [NodeId; 7]) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[8, 4]).unwrap();
    let b = g.input("b", DType::F32, &[8]).unwrap();
    let a1 = g.named("a1", |g| g.add(x, b)).unwrap();
    let s1 = g.named("s1", |g| g.scale(a1, 2.0)).unwrap();
    let n1 = g.named("n1", |g| g.neg(s1)).unwrap();
    let s2 = g.named("s2", |g| g.scale(n1, 0.5)).unwrap();
    let y = g.named("y", |g| g.add(s2, x)).unwrap();
    g.set_output(y);
    (g, [x, b, a1, s1, n1, s2, y])
}

fn gpu_cpu(gpu_refuses: &[&'static str]) -> Scheduler {
    let l = log();
    Scheduler::new(vec![Mock::new("gpu", &l).refusing(gpu_refuses).boxed(), Mock::new("cpu", &l).boxed()]).unwrap()
}

fn cause(p: &Plan, id: NodeId) -> &Cause {
    &p.nodes[id.index()].cause
}

#[test]
fn causes_splits_and_copies_for_an_op_forced_onto_a_second_backend() {
    let (g, [x, b, a1, s1, n1, s2, y]) = chain();
    let mut s = gpu_cpu(&["neg"]);
    let p = s.plan(&g).unwrap().clone();
    assert_eq!(cause(&p, x), &Cause::FirstUse(a1));
    assert_eq!(cause(&p, b), &Cause::FirstUse(a1));
    assert_eq!(cause(&p, a1), &Cause::Preferred);
    assert_eq!(cause(&p, s1), &Cause::FollowsInput(a1));
    assert_eq!(cause(&p, n1), &Cause::OnlySupporter { refused_by: "gpu".into() });
    assert_eq!(cause(&p, s2), &Cause::FollowsInput(n1));
    assert_eq!(cause(&p, y), &Cause::FollowsInput(x));
    let on: Vec<&str> = [x, a1, s1, n1, s2, y].iter().map(|&n| p.backend_of(n)).collect();
    assert_eq!(on, ["gpu", "gpu", "gpu", "cpu", "cpu", "gpu"]);

    let splits: Vec<(&str, Vec<NodeId>)> =
        p.splits.iter().map(|s| (p.backends[s.backend].as_str(), s.nodes.clone())).collect();
    assert_eq!(splits, vec![("gpu", vec![a1, s1]), ("cpu", vec![n1, s2]), ("gpu", vec![y])]);
    let copies: Vec<Vec<(String, NodeId, usize)>> =
        p.splits.iter().map(|s| s.copies.iter().map(|c| (c.name.clone(), c.storage, c.bytes)).collect()).collect();
    assert_eq!(copies, vec![vec![], vec![("s1@cpu".to_string(), s1, 128)], vec![("s2@gpu".to_string(), s2, 128)]]);
    assert_eq!(p.copy_bytes(), 256);
    let text = s.plan_text();
    assert!(text.contains("only supporter (unsupported on gpu)"), "{text}");
    assert!(text.contains("copy s1@cpu <- #3"), "{text}");
}

#[test]
fn pins_decide_first_and_weights_attract_their_consumers() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[16]).unwrap();
    let w = g.param("w", DType::F32, &[16]).unwrap();
    let m = g.mul(x, w).unwrap();
    let s = g.scale(m, 3.0).unwrap();
    let t = g.scale(s, 3.0).unwrap();
    g.set_output(t);
    let mut sched = gpu_cpu(&[]);
    sched.pin(w, "cpu").unwrap();
    sched.pin(t, "cpu").unwrap();
    let p = sched.plan(&g).unwrap().clone();
    assert_eq!(cause(&p, w), &Cause::Pinned);
    assert_eq!(cause(&p, m), &Cause::Weights(w));
    assert_eq!(p.backend_of(m), "cpu");
    assert_eq!(cause(&p, x), &Cause::FirstUse(m));
    assert_eq!(p.backend_of(x), "cpu");
    assert_eq!(cause(&p, s), &Cause::FollowsInput(m));
    assert_eq!(cause(&p, t), &Cause::Pinned);
    // Without pins everything is on the preferred backend: one split, no copies.
    sched.clear_pins();
    let p = sched.plan(&g).unwrap();
    assert_eq!(p.splits.len(), 1);
    assert_eq!(p.backend_of(w), "gpu");
    assert_eq!(p.n_copies(), 0);
}

#[test]
fn fallback_names_the_first_refusing_backend() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4]).unwrap();
    let y = g.scale(x, 2.0).unwrap();
    g.set_output(y);
    let l = log();
    let mut s = Scheduler::new(vec![
        Mock::new("npu", &l).refusing(&["scale"]).boxed(),
        Mock::new("gpu", &l).boxed(),
        Mock::new("cpu", &l).boxed(),
    ])
    .unwrap();
    let p = s.plan(&g).unwrap();
    assert_eq!(cause(p, y), &Cause::Fallback { refused_by: "npu".into() });
    assert_eq!(p.backend_of(y), "gpu");
    assert_eq!(p.backend_of(x), "gpu");
}

#[test]
fn views_live_with_their_storage_and_set_rows_runs_where_its_destination_is() {
    let mut g = Graph::new();
    let cache = g.param("cache", DType::F32, &[8, 6]).unwrap();
    let vals = g.input("vals", DType::F32, &[8, 2]).unwrap();
    let ids = g.input("ids", DType::I32, &[2]).unwrap();
    let upd = g.set_rows(cache, vals, ids).unwrap();
    let win = g.view(upd, &[8, 3], &[4, 32], 64).unwrap();
    let out = g.cont(win).unwrap();
    g.set_output(out);

    let mut s = gpu_cpu(&[]);
    s.pin(cache, "cpu").unwrap();
    let p = s.plan(&g).unwrap().clone();
    assert_eq!(cause(&p, upd), &Cause::InPlace(cache));
    assert_eq!(p.backend_of(upd), "cpu");
    assert_eq!(cause(&p, win), &Cause::View(cache));
    assert_eq!(p.backend_of(win), "cpu");
    assert_eq!(p.nodes[win.index()].region, None);
    // The cache is a param: its own, never reused, region in the params buffer.
    let r = p.nodes[cache.index()].region.unwrap();
    assert_eq!(p.buffers[r.buffer].role, BufferRole::Params);

    // Storage not placed yet: set_rows is assigned normally and the cache follows it.
    s.clear_pins();
    let p = s.plan(&g).unwrap().clone();
    assert_eq!(cause(&p, upd), &Cause::Preferred);
    assert_eq!(cause(&p, cache), &Cause::FirstUse(upd));

    // The destination lives where set_rows is unsupported: an error, not a silent copy.
    let mut s = gpu_cpu(&["set_rows"]);
    s.pin(cache, "gpu").unwrap();
    let e = s.plan(&g).unwrap_err();
    assert!(matches!(e, SchedError::InPlace { .. }));
    let msg = e.to_string();
    assert!(msg.contains("set_rows") && msg.contains("'cache'") && msg.contains("gpu does not support it"), "{msg}");
    // Pinned elsewhere than its destination: also an error.
    let mut s = gpu_cpu(&[]);
    s.pin(cache, "gpu").unwrap();
    s.pin(upd, "cpu").unwrap();
    let msg = s.plan(&g).unwrap_err().to_string();
    assert!(msg.contains("pinned to cpu"), "{msg}");
}

#[test]
fn in_place_writes_force_a_fresh_copy() {
    let mut g = Graph::new();
    let cache = g.param("cache", DType::F32, &[4, 4]).unwrap();
    let v1 = g.input("v1", DType::F32, &[4, 1]).unwrap();
    let i1 = g.input("i1", DType::I32, &[1]).unwrap();
    let u1 = g.set_rows(cache, v1, i1).unwrap();
    let r1 = g.scale(u1, 1.0).unwrap();
    let u2 = g.set_rows(u1, v1, i1).unwrap();
    let r2 = g.scale(u2, 1.0).unwrap();
    let r3 = g.add(r2, u2).unwrap();
    g.set_output(r1);
    g.set_output(r3);
    let mut s = gpu_cpu(&[]);
    s.pin(cache, "cpu").unwrap();
    for n in [r1, r2, r3] {
        s.pin(n, "gpu").unwrap();
    }
    let p = s.plan(&g).unwrap();
    let copies: Vec<(usize, String)> =
        p.splits.iter().enumerate().flat_map(|(i, s)| s.copies.iter().map(move |c| (i, c.name.clone()))).collect();
    // Copied before r1 and again after the second write; r3 reuses the second copy.
    assert_eq!(copies, vec![(1, "cache@gpu".to_string()), (3, "cache@gpu".to_string())]);
}

/// Checks that arena storages whose lifetimes overlap get disjoint regions, on a single backend.
fn assert_no_overlap(g: &Graph, p: &Plan) {
    let consumers = g.consumers();
    let mut last = vec![0usize; g.len()];
    for id in g.topo_order() {
        let st = g.storage_of(id);
        last[st.index()] = last[st.index()].max(id.index());
        for c in &consumers[id.index()] {
            last[st.index()] = last[st.index()].max(c.index());
        }
    }
    let arena: Vec<(NodeId, sched::Region)> = g
        .topo_order()
        .filter_map(|id| p.nodes[id.index()].region.map(|r| (id, r)))
        .filter(|(_, r)| p.buffers[r.buffer].role == BufferRole::Arena)
        .collect();
    for (i, &(a, ra)) in arena.iter().enumerate() {
        for &(b, rb) in &arena[i + 1..] {
            let live_together = b.index() <= last[a.index()];
            let disjoint =
                ra.buffer != rb.buffer || ra.offset + ra.size <= rb.offset || rb.offset + rb.size <= ra.offset;
            assert!(!live_together || disjoint, "{a} {ra:?} and {b} {rb:?} overlap while both live");
        }
        assert!(ra.size >= g.node(a).nbytes());
    }
}

#[test]
fn liveness_reuse_shrinks_the_arena_of_the_fixtures() {
    for name in ["mlp2", "attention", "sampling_tail"] {
        let g = fixture(name);
        let l = log();
        let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
        let p = s.plan(&g).unwrap();
        assert_no_overlap(&g, p);
        if name != "sampling_tail" {
            assert!(p.arena_bytes < p.no_reuse_bytes, "{name}: arena {} vs {}", p.arena_bytes, p.no_reuse_bytes);
        }
        // Inputs in host memory; params, outputs and everything else (the arena) on the device.
        for (id, n) in g.nodes() {
            let Some(r) = p.nodes[id.index()].region else { continue };
            let buf = &p.buffers[r.buffer];
            let want = if n.flags.param {
                BufferRole::Params
            } else if n.flags.input {
                BufferRole::Inputs
            } else if g.outputs().iter().any(|&o| g.storage_of(o) == id) {
                // Small outputs no node reads go to host-visible memory.
                let read = g.nodes().any(|(c, cn)| {
                    !cn.op.is_view() && cn.op != Op::Input && cn.srcs.iter().any(|&s| g.storage_of(s) == id) && c != id
                });
                if !read && n.nbytes() <= sched::HOST_OUTPUT_MAX {
                    BufferRole::HostOutputs
                } else {
                    BufferRole::Outputs
                }
            } else {
                BufferRole::Arena
            };
            assert_eq!(buf.role, want, "{name}: {}", g.describe(id));
            assert_eq!(buf.kind, want.kind());
        }
    }
    // mlp2: h1 and h1b (16 KiB each) are reused by a1 and h2.
    let g = fixture("mlp2");
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let p = s.plan(&g).unwrap();
    assert_eq!((p.arena_bytes, p.no_reuse_bytes), (2 * 16384, 3 * 16384 + 4096));
}

#[test]
fn offsets_respect_alignment_and_largest_buffer() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[50]).unwrap();
    let a = g.scale(x, 1.0).unwrap();
    let b = g.scale(x, 2.0).unwrap();
    let c = g.scale(x, 3.0).unwrap();
    let d = g.add(a, b).unwrap();
    let e = g.add(d, c).unwrap();
    g.set_output(e);
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("dev", &l).align(256).max_buffer(512).boxed()]).unwrap();
    let p = s.plan(&g).unwrap();
    for np in &p.nodes {
        if let Some(r) = np.region {
            assert_eq!(r.offset % 256, 0);
            assert_eq!(r.size, 256);
            assert!(r.offset + r.size <= p.buffers[r.buffer].size);
        }
    }
    let arenas: Vec<(&str, usize)> =
        p.buffers.iter().filter(|b| b.role == BufferRole::Arena).map(|b| (b.name.as_str(), b.size)).collect();
    // a, b, c live together: 768 bytes do not fit one 512-byte buffer.
    assert_eq!(arenas, vec![("dev.arena", 512), ("dev.arena1", 512)]);

    let mut g = Graph::new();
    let big = g.input("big", DType::F32, &[200]).unwrap();
    g.set_output(big);
    let msg = s.plan(&g).unwrap_err().to_string();
    assert!(msg.contains("dev") && msg.contains("'big'") && msg.contains("800 bytes") && msg.contains("512"), "{msg}");
}

#[test]
fn planning_errors_name_the_node_op_and_backends() {
    let (g, [x, _, a1, s1, n1, _, _]) = chain();
    // Unsupported by every backend.
    let l = log();
    let mut s = Scheduler::new(vec![
        Mock::new("gpu", &l).refusing(&["neg"]).boxed(),
        Mock::new("cpu", &l).refusing(&["neg"]).boxed(),
    ])
    .unwrap();
    let msg = s.plan(&g).unwrap_err().to_string();
    assert_eq!(
        msg,
        "node #4 'n1' f32 [8, 4]: neg (sources: #3 's1' f32 [8, 4]) is not supported by any backend (gpu, cpu)"
    );
    // Pinned to a backend that refuses it.
    let mut s = gpu_cpu(&["neg"]);
    s.pin(n1, "gpu").unwrap();
    let msg = s.plan(&g).unwrap_err().to_string();
    assert!(msg.contains("#4 'n1'") && msg.contains("pinned to gpu, which does not support it"), "{msg}");
    // Unknown backend name, unknown node.
    let mut s = gpu_cpu(&[]);
    let msg = s.pin(a1, "tpu").unwrap_err().to_string();
    assert_eq!(msg, "unknown backend 'tpu' (the scheduler has gpu, cpu)");
    s.pin(NodeId(99), "cpu").unwrap();
    let msg = s.plan(&g).unwrap_err().to_string();
    assert_eq!(msg, "pin: unknown node #99 (the graph has 7 nodes)");
    // A pinned view.
    let mut g2 = g.clone();
    let v = g2.reshape(s1, &[32]).unwrap();
    let mut s = gpu_cpu(&[]);
    s.pin(v, "cpu").unwrap();
    let msg = s.plan(&g2).unwrap_err().to_string();
    assert!(msg.contains("reshape is a view of #3 's1'"), "{msg}");
    // Constructor errors.
    let l = log();
    assert_eq!(Scheduler::new(vec![]).unwrap_err(), SchedError::NoBackends);
    let e = Scheduler::new(vec![Mock::new("cpu", &l).boxed(), Mock::new("cpu", &l).boxed()]).unwrap_err();
    assert_eq!(e.to_string(), "two backends are named 'cpu'");
    let _ = x;
}

/// The plan of a fixture on a GPU-like mock (device memory the host cannot read in place, so
/// its outputs get read-back regions) and a CPU-like one.
fn fixture_plan(name: &str) -> String {
    let g = fixture(name);
    let l = log();
    let gpu = Mock::new("gpu", &l).refusing(&["top_k", "rope"]).device_only();
    let mut s = Scheduler::new(vec![gpu.boxed(), Mock::new("cpu", &l).boxed()]).unwrap();
    s.plan(&g).unwrap();
    s.plan_text()
}

#[test]
fn snapshot_mlp2_plan() {
    insta::assert_snapshot!("mlp2_gpu_cpu", fixture_plan("mlp2"));
}

#[test]
fn snapshot_attention_plan() {
    insta::assert_snapshot!("attention_gpu_cpu", fixture_plan("attention"));
}

#[test]
fn snapshot_sampling_tail_plan() {
    insta::assert_snapshot!("sampling_tail_gpu_cpu", fixture_plan("sampling_tail"));
}

#[test]
fn plan_dot_has_a_cluster_per_split_and_dashed_copy_edges_and_renders() {
    for name in ["mlp2", "attention", "sampling_tail"] {
        let g = fixture(name);
        let l = log();
        let mut s = Scheduler::new(vec![
            Mock::new("gpu", &l).refusing(&["top_k", "rope"]).boxed(),
            Mock::new("cpu", &l).boxed(),
        ])
        .unwrap();
        let p = s.plan(&g).unwrap();
        let dot = p.to_dot(&g);
        assert!(dot.starts_with("digraph G {") && dot.ends_with("}\n"));
        assert_eq!(dot.matches("subgraph cluster_split").count(), p.splits.len(), "{name}");
        // Dashed edges: every edge from a source whose storage is on another backend (views excluded).
        let crossing = g
            .nodes()
            .filter(|(_, n)| !n.op.is_view())
            .flat_map(|(id, n)| n.srcs.iter().map(move |&s| (id, s)))
            .filter(|&(id, s)| p.backend_of(id) != p.backend_of(g.storage_of(s)))
            .count();
        assert_eq!(dot.matches("style=dashed]").count(), crossing, "{name}");
        assert_eq!(crossing > 0, p.n_copies() > 0, "{name}");
        let have_dot = std::process::Command::new("dot").arg("-V").output().is_ok_and(|o| o.status.success());
        if have_dot {
            use std::io::Write;
            let mut child = std::process::Command::new("dot")
                .arg("-Tsvg")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(dot.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

#[test]
fn a_table_larger_than_a_backends_largest_buffer_is_read_on_another() {
    // an embedding table of 64 KiB and a GPU whose buffers hold 16 KiB: the get_rows reading it
    // (and so the table) go to the CPU; its consumer follows it there
    let mut g = Graph::new();
    let table = g.param("table", DType::F32, &[64, 256]).unwrap();
    let ids = g.input("ids", DType::I32, &[4]).unwrap();
    let rows = g.get_rows(table, ids).unwrap();
    let y = g.neg(rows).unwrap();
    g.set_output(y);
    let l = log();
    let mut s =
        Scheduler::new(vec![Mock::new("gpu", &l).max_buffer(16 << 10).boxed(), Mock::new("cpu", &l).boxed()]).unwrap();
    let p = s.plan(&g).unwrap().clone();
    assert_eq!(cause(&p, rows), &Cause::OnlySupporter { refused_by: "gpu".into() });
    let on: Vec<&str> = [table, rows, y].iter().map(|&n| p.backend_of(n)).collect();
    assert_eq!(on, ["cpu", "cpu", "cpu"]);
    // with room for the table, everything stays on the GPU
    let mut s =
        Scheduler::new(vec![Mock::new("gpu", &l).max_buffer(64 << 10).boxed(), Mock::new("cpu", &l).boxed()]).unwrap();
    assert_eq!(s.plan(&g).unwrap().backend_of(rows), "gpu");
}
