//! What a decode loop needs from the scheduler, on mock backends: partial reads of outputs (rows)
//! that count exactly the bytes they move, partial input writes, alternating topologies after
//! `reserve` (no re-planning, no re-allocation), and state tensors written in place that persist
//! across steps and re-plans and are never overwritten by arena reuse (a property test).

mod common;

use common::{Mock, count, log};
use graph::{DType, Graph, NodeId};
use proptest::prelude::*;
use sched::{BufferRole, SchedError, Scheduler};

/// logits-like output y = 2 x of `[v, n]`, plus a transposed view `t` (rows not contiguous) and a
/// strided view `odd` of y's odd rows.
fn logits_graph(v: usize, n: usize) -> (Graph, NodeId, NodeId, NodeId, NodeId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[v, n]).unwrap();
    let y = g.named("y", |g| g.scale(x, 2.0)).unwrap();
    let t = g.named("t", |g| g.transpose(y)).unwrap();
    let odd = g.named("odd", |g| g.view(y, &[v, n / 2], &[4, 8 * v], 4 * v)).unwrap();
    // a consumer of y on the same backend: y stays in device memory
    let z = g.named("z", |g| g.scale(y, 0.5)).unwrap();
    for o in [y, t, odd, z] {
        g.set_output(o);
    }
    (g, x, y, t, odd)
}

fn rows_of(full: &[u8], row_bytes: usize, rows: &[usize]) -> Vec<u8> {
    rows.iter().flat_map(|&r| full[r * row_bytes..(r + 1) * row_bytes].to_vec()).collect()
}

#[test]
fn read_rows_of_any_subset_equals_the_full_read_and_counts_exactly_its_bytes() {
    let (v, n) = (16, 6);
    for gpu_like in [false, true] {
        let l = log();
        let mock = if gpu_like { Mock::new("gpu", &l).device_only() } else { Mock::new("cpu", &l) };
        let mut s = Scheduler::new(vec![mock.boxed()]).unwrap();
        let (g, x, y, t, odd) = logits_graph(v, n);
        let p = s.plan(&g).unwrap();
        // y is an output a node on the same device consumes: in device memory, with a read-back
        // region exactly when the host cannot read that memory in place.
        let np = &p.nodes[y.index()];
        assert_eq!(p.buffers[np.region.unwrap().buffer].role, BufferRole::Outputs);
        assert_eq!(np.readback.is_some(), gpu_like);
        let xs: Vec<f32> = (0..v * n).map(|i| i as f32 * 0.5 - 7.0).collect();
        s.set_input_f32(x, &xs).unwrap();
        s.compute().unwrap();
        let subsets: [&[usize]; 6] = [&[], &[0], &[5], &[3, 1], &[2, 2, 0], &[0, 1, 2, 3, 4, 5]];
        for (node, rows, row_bytes) in [(y, n, 4 * v), (t, v, 4 * n), (odd, n / 2, 4 * v)] {
            let full = s.read(node).unwrap();
            assert_eq!(full.len(), rows * row_bytes);
            for subset in subsets {
                let subset: Vec<usize> = subset.iter().map(|r| r % rows).collect();
                let before = s.stats().bytes_to_host;
                let got = s.read_rows(node, &subset).unwrap();
                assert_eq!(got, rows_of(&full, row_bytes, &subset), "gpu_like {gpu_like}, {node}, rows {subset:?}");
                assert_eq!(s.stats().bytes_to_host - before, (subset.len() * row_bytes) as u64);
            }
        }
        // typed reads
        assert_eq!(s.read_rows_f32(y, &[1]).unwrap(), xs[v..2 * v].iter().map(|x| x * 2.0).collect::<Vec<_>>());
        assert!(matches!(s.read_rows_i32(y, &[1]), Err(SchedError::DType { .. })));
        // errors: a row past the end, a node that is not an output
        let e = s.read_rows(y, &[6]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "read_rows: row 6 of node #1 'y' f32 [16, 6] is out of range (it has 6 rows of ne[0] elements)"
        );
        assert!(matches!(s.read_rows(x, &[0]), Err(SchedError::NotAnOutput { .. })));
        if gpu_like {
            // a read of 2 of y's rows copies exactly those bytes into the read-back region
            let before = count(&l, "copy_regions");
            s.read_rows(y, &[4, 1]).unwrap();
            assert_eq!(count(&l, "copy_regions") - before, 1);
            let lines = l.lock().unwrap().clone();
            let last = lines.iter().rev().find(|l| l.contains("copy_regions")).unwrap();
            assert!(last.ends_with("2 regions 128 B"), "{last}");
        }
    }
}

#[test]
fn set_input_rows_writes_only_those_rows() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let (g, x, y, _, _) = logits_graph(4, 4);
    s.plan(&g).unwrap();
    s.set_input_f32(x, &[1.0; 16]).unwrap();
    let row: Vec<u8> = [5.0f32, 6.0, 7.0, 8.0, -1.0, -2.0, -3.0, -4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let before = s.stats().bytes_from_host;
    s.set_input_rows(x, &[2, 0], &row).unwrap();
    assert_eq!(s.stats().bytes_from_host - before, 32);
    s.compute().unwrap();
    let want = [-2.0, -4.0, -6.0, -8.0, 2.0, 2.0, 2.0, 2.0, 10.0, 12.0, 14.0, 16.0, 2.0, 2.0, 2.0, 2.0];
    assert_eq!(s.read_f32(y).unwrap(), want);
    let e = s.set_input_rows(x, &[4], &row[..16]).unwrap_err();
    assert!(matches!(e, SchedError::RowOutOfRange { row: 4, rows: 4, .. }), "{e}");
    let e = s.set_input_rows(x, &[1], &row).unwrap_err();
    assert!(matches!(e, SchedError::InputSize { expected: 16, got: 32, .. }), "{e}");
    assert!(matches!(s.set_input_rows(y, &[0], &row[..16]), Err(SchedError::NotAnInput { .. })));
}

/// A batch-`n` graph: y = (x + w) * 3 with a param w, plus an intermediate to occupy the arena.
fn batch_graph(n: usize) -> (Graph, NodeId, NodeId, NodeId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[8, n]).unwrap();
    let w = g.param("w", DType::F32, &[8]).unwrap();
    let a = g.add(x, w).unwrap();
    let y = g.named("y", |g| g.scale(a, 3.0)).unwrap();
    g.set_output(y);
    (g, x, w, y)
}

#[test]
fn a_hundred_steps_alternating_two_topologies_after_reserve_plan_twice_and_allocate_once() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("gpu", &l).device_only().boxed()]).unwrap();
    let (worst, _, w8, _) = batch_graph(8);
    s.reserve(&worst).unwrap();
    s.set_input_f32(w8, &[0.5; 8]).unwrap();
    let allocs = count(&l, " alloc ");
    for step in 0..100 {
        let n = if step % 2 == 0 { 4 } else { 8 };
        // a fresh graph every step, as a runner builds it
        let (g, x, _, y) = batch_graph(n);
        s.plan(&g).unwrap();
        let xs: Vec<f32> = (0..8 * n).map(|i| (i + step) as f32).collect();
        s.set_input_f32(x, &xs).unwrap();
        s.compute().unwrap();
        let want: Vec<f32> = xs.iter().map(|v| (v + 0.5) * 3.0).collect();
        assert_eq!(s.read_f32(y).unwrap(), want, "step {step}");
        assert_eq!(s.read_rows_f32(y, &[n - 1]).unwrap(), want[8 * (n - 1)..], "step {step}");
    }
    let st = s.stats();
    assert_eq!((st.plans, st.allocations, st.steps), (2, 1, 100));
    assert_eq!(st.cache_hits, 99, "every plan() after the first two is answered from the cache");
    assert_eq!(count(&l, " alloc "), allocs, "no buffer allocated after reserve");
    assert_eq!(count(&l, " free "), 0);
    assert_eq!(s.cached_plans(), 2);
}

#[test]
fn the_plan_cache_evicts_the_least_recently_used_and_frees_only_its_own_leaves() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    // largest first, so that the shared buffers never grow (a growth frees the smaller buffer)
    for n in (1..=sched::PLAN_CACHE + 1).rev() {
        let (mut g, _, w, y) = batch_graph(n);
        // a param only this topology has
        let own = g.param(&format!("own{n}"), DType::F32, &[8]).unwrap();
        let z = g.add(y, own).unwrap();
        g.set_output(z);
        s.plan(&g).unwrap();
        // params get their buffers when they are given data
        if !s.is_set(w).unwrap() {
            s.set_input_f32(w, &[1.0; 8]).unwrap();
        }
        s.set_input_f32(own, &[2.0; 8]).unwrap();
    }
    assert_eq!(s.cached_plans(), sched::PLAN_CACHE);
    // the first plan left: its own param was freed, the shared w was not
    assert_eq!(count(&l, " free "), 1);
    assert_eq!(s.pool_bytes(BufferRole::Params), 64 * (sched::PLAN_CACHE + 1));
}

#[test]
fn state_persists_across_steps_and_replans_and_can_be_read_and_set() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("gpu", &l).device_only().boxed(), Mock::new("cpu", &l).boxed()]).unwrap();
    // a KV-cache-like state [4, 6]: each step writes one row; the output reads the whole cache
    let build = |extra: bool| {
        let mut g = Graph::new();
        let cache = g.state("cache", DType::F32, &[4, 6]).unwrap();
        let vals = g.input("vals", DType::F32, &[4, 1]).unwrap();
        let ids = g.input("ids", DType::I32, &[1]).unwrap();
        let mut v = g.scale(vals, 1.0).unwrap();
        if extra {
            v = g.neg(v).unwrap();
            v = g.neg(v).unwrap();
        }
        let upd = g.set_rows(cache, v, ids).unwrap();
        let out = g.named("out", |g| g.scale(upd, 1.0)).unwrap();
        g.set_output(out);
        (g, cache, vals, ids, out)
    };
    let (g, cache, vals, ids, out) = build(false);
    let p = s.plan(&g).unwrap();
    let r = p.nodes[cache.index()].region.unwrap();
    assert_eq!(p.buffers[r.buffer].role, BufferRole::State);
    assert_eq!(p.buffers[r.buffer].name, "gpu.state.cache");
    // state needs no set_input; it starts at zero and can be read before any compute
    assert_eq!(s.read_f32(cache).unwrap(), vec![0.0; 24]);
    for step in 0..3 {
        s.set_input_f32(vals, &[step as f32 + 1.0; 4]).unwrap();
        s.set_input_i32(ids, &[step]).unwrap();
        s.compute().unwrap();
    }
    let mut want = vec![1.0; 4];
    want.extend([2.0; 4]);
    want.extend([3.0; 4]);
    want.extend([0.0; 12]);
    assert_eq!(s.read_f32(out).unwrap(), want);
    // another topology with the same state: its contents carry over
    let (g2, cache2, vals2, ids2, out2) = build(true);
    s.plan(&g2).unwrap();
    s.set_input_f32(vals2, &[9.0; 4]).unwrap();
    s.set_input_i32(ids2, &[5]).unwrap();
    s.compute().unwrap();
    want[20..24].copy_from_slice(&[9.0; 4]);
    assert_eq!(s.read_f32(out2).unwrap(), want);
    assert_eq!(s.read_rows_f32(cache2, &[5, 0]).unwrap(), [[9.0; 4], [1.0; 4]].concat());
    // and the state can be set from outside (all of it, or some rows)
    s.set_input_rows(cache2, &[0], &[0u8; 16]).unwrap();
    assert_eq!(s.read_rows_f32(cache2, &[0]).unwrap(), vec![0.0; 4]);
    assert_eq!(s.stats().plans, 2);
    // state stays where it was first placed: pinning it elsewhere is an error
    let (mut g3, cache3, _, _, _) = build(false);
    let extra = g3.scale(cache3, 2.0).unwrap();
    g3.set_output(extra);
    let lives = s.current_plan().unwrap().backend_of(cache2).to_string();
    let other = if lives == "gpu" { "cpu" } else { "gpu" };
    s.pin(cache3, other).unwrap();
    let e = s.plan(&g3).unwrap_err();
    assert!(matches!(e, SchedError::StatePinned { .. }), "{e}");
    assert!(e.to_string().contains(&format!("lives on {lives}; it cannot be pinned to {other}")), "{e}");
}

/// One random element-wise op over earlier [4, 2] nodes.
#[derive(Debug, Clone)]
enum Op2 {
    Add(usize, usize),
    Mul(usize, usize),
    Neg(usize),
    Scale(usize, i8),
}

fn op2() -> impl Strategy<Value = Op2> {
    prop_oneof![
        (0usize..64, 0usize..64).prop_map(|(a, b)| Op2::Add(a, b)),
        (0usize..64, 0usize..64).prop_map(|(a, b)| Op2::Mul(a, b)),
        (0usize..64).prop_map(Op2::Neg),
        (0usize..64, any::<i8>()).prop_map(|(a, s)| Op2::Scale(a, s)),
    ]
}

/// Builds the random graph: `ops` over inputs `a` [4, 2] and `w`, the last node's two rows stored
/// into state `kv` [4, 16] at rows `ids`; output: the cache (through a scale) and the last node.
fn random_graph(ops: &[Op2]) -> (Graph, [NodeId; 4], NodeId) {
    let mut g = Graph::new();
    let kv = g.state("kv", DType::F32, &[4, 16]).unwrap();
    let a = g.input("a", DType::F32, &[4, 2]).unwrap();
    let ids = g.input("ids", DType::I32, &[2]).unwrap();
    let mut nodes = vec![a];
    for o in ops {
        let pick = |i: usize| nodes[i % nodes.len()];
        let id = match *o {
            Op2::Add(x, y) => g.add(pick(x), pick(y)),
            Op2::Mul(x, y) => g.mul(pick(x), pick(y)),
            Op2::Neg(x) => g.neg(pick(x)),
            Op2::Scale(x, s) => g.scale(pick(x), f32::from(s) / 64.0),
        }
        .unwrap();
        nodes.push(id);
    }
    let last = *nodes.last().unwrap();
    let upd = g.set_rows(kv, last, ids).unwrap();
    let out = g.scale(upd, 1.0).unwrap();
    g.set_output(out);
    g.set_output(last);
    (g, [kv, a, ids, last], out)
}

/// Host evaluation of the random graph's last node.
fn host_eval(ops: &[Op2], a: &[f32]) -> Vec<f32> {
    let mut vals: Vec<Vec<f32>> = vec![a.to_vec()];
    for o in ops {
        let pick = |i: usize| vals[i % vals.len()].clone();
        let v: Vec<f32> = match *o {
            Op2::Add(x, y) => pick(x).iter().zip(pick(y)).map(|(p, q)| p + q).collect(),
            Op2::Mul(x, y) => pick(x).iter().zip(pick(y)).map(|(p, q)| p * q).collect(),
            Op2::Neg(x) => pick(x).iter().map(|p| -p).collect(),
            Op2::Scale(x, s) => pick(x).iter().map(|p| p * (f32::from(s) / 64.0)).collect(),
        };
        vals.push(v);
    }
    vals.pop().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random graphs around a state tensor, re-planned between two random topologies every few
    /// steps on two backends: the state holds exactly what every step stored (never overwritten by
    /// arena reuse, never lost by a re-plan).
    #[test]
    fn state_survives_replans_and_arena_reuse(
        ops1 in proptest::collection::vec(op2(), 1..12),
        ops2 in proptest::collection::vec(op2(), 1..12),
        gpu_refuses_mul in any::<bool>(),
        pin_kv_cpu in any::<bool>(),
    ) {
        let l = log();
        let gpu = Mock::new("gpu", &l).device_only();
        let gpu = if gpu_refuses_mul { gpu.refusing(&["mul"]) } else { gpu };
        let mut s = Scheduler::new(vec![gpu.boxed(), Mock::new("cpu", &l).boxed()]).unwrap();
        let mut model = vec![0.0f32; 64];
        for step in 0..8usize {
            let ops = if (step / 2) % 2 == 0 { &ops1 } else { &ops2 };
            let (g, [kv, a, ids, last], out) = random_graph(ops);
            if pin_kv_cpu {
                s.pin(kv, "cpu").unwrap();
            }
            s.plan(&g).unwrap();
            let av: Vec<f32> = (0..8).map(|i| (i as f32 - 3.5) * 0.25 + step as f32 * 0.125).collect();
            let rows = [step % 16, (step * 7 + 3) % 16];
            s.set_input_f32(a, &av).unwrap();
            s.set_input_i32(ids, &[rows[0] as i32, rows[1] as i32]).unwrap();
            s.compute().unwrap();
            let v = host_eval(ops, &av);
            prop_assert_eq!(s.read_f32(last).unwrap(), v.clone());
            for (j, &r) in rows.iter().enumerate() {
                model[r * 4..r * 4 + 4].copy_from_slice(&v[j * 4..j * 4 + 4]);
            }
            prop_assert_eq!(s.read_f32(out).unwrap(), model.clone(), "step {}", step);
            prop_assert_eq!(s.read_f32(kv).unwrap(), model.clone());
        }
        prop_assert!(s.stats().plans <= 2);
    }
}

#[test]
fn a_failed_growth_leaves_the_cached_plans_working() {
    let l = log();
    // batch 2 allocates 3 buffers (inputs, outputs, arena), and w one when it is set; the 5th
    // alloc call, the first growth for batch 64, fails
    let mut s = Scheduler::new(vec![Mock::new("gpu", &l).fail_alloc(4).boxed()]).unwrap();
    let (small, x, w, y) = batch_graph(2);
    s.plan(&small).unwrap();
    assert_eq!(count(&l, " alloc "), 3, "a param gets its buffer when it is given data");
    s.set_input_f32(w, &[1.0; 8]).unwrap();
    assert_eq!(count(&l, " alloc "), 4);
    let (big, ..) = batch_graph(64);
    let e = s.plan(&big).unwrap_err();
    assert!(matches!(e, SchedError::Backend(sched::BackendError::OutOfMemory { .. })), "{e}");
    assert_eq!(count(&l, " free "), 0, "the buffers the small plan uses were kept");
    // the small plan is still cached and runs
    s.plan(&small).unwrap();
    assert_eq!(s.stats().cache_hits, 1);
    s.set_input_f32(x, &[2.0; 16]).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(y).unwrap(), vec![9.0; 16]);
    // and the big one can be planned once memory is there again
    s.plan(&big).unwrap();
}
