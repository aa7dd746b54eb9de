//! The executor on mock backends: results across two backends with copies, byte counters, graph
//! reuse over 100 steps (one plan, one allocation round), re-planning, output views, and every
//! executor error path.

mod common;

use common::{Mock, count, log};
use graph::{DType, Graph, NodeId};
use sched::{BufferRole, SchedError, Scheduler};

/// x [8, 4], b [8]: a1 = x + b; s1 = 2 a1; n1 = -s1; s2 = n1 / 2; y = s2 + x  (= -b).
fn chain(g: &mut Graph) -> (NodeId, NodeId, NodeId) {
    let x = g.input("x", DType::F32, &[8, 4]).unwrap();
    let b = g.input("b", DType::F32, &[8]).unwrap();
    let a1 = g.named("a1", |g| g.add(x, b)).unwrap();
    let s1 = g.named("s1", |g| g.scale(a1, 2.0)).unwrap();
    let n1 = g.named("n1", |g| g.neg(s1)).unwrap();
    let s2 = g.named("s2", |g| g.scale_bias(n1, 0.5, 1.0)).unwrap();
    let y = g.named("y", |g| g.mul(s2, x)).unwrap();
    g.set_output(y);
    (x, b, y)
}

/// What `chain` computes, on the host.
fn expected(x: &[f32], b: &[f32]) -> Vec<f32> {
    x.iter().enumerate().map(|(i, &xv)| (-(2.0 * (xv + b[i % 8])) * 0.5 + 1.0) * xv).collect()
}

fn data(step: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..32).map(|i| (i as f32 * 0.25 - 3.0) + step as f32).collect();
    let b = (0..8).map(|i| i as f32 - 2.5).collect();
    (x, b)
}

#[test]
fn runs_across_two_backends_with_copies_and_counts_bytes() {
    let l = log();
    // The gpu mock is not host-visible: copies out of it and reads from it go through download.
    let mut s = Scheduler::new(vec![
        Mock::new("gpu", &l).refusing(&["neg"]).device_only().boxed(),
        Mock::new("cpu", &l).boxed(),
    ])
    .unwrap();
    let mut g = Graph::new();
    let (x, b, y) = chain(&mut g);
    let copy_bytes = s.plan(&g).unwrap().copy_bytes();
    assert_eq!(copy_bytes, 256);
    let (xv, bv) = data(0);
    s.set_input_f32(x, &xv).unwrap();
    s.set_input_f32(b, &bv).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(y).unwrap(), expected(&xv, &bv));
    let st = s.stats();
    assert_eq!((st.steps, st.copies, st.bytes_between_backends, st.step_bytes_between_backends), (1, 2, 256, 256));
    assert_eq!((st.bytes_from_host, st.bytes_to_host, st.step_bytes_to_host), (128 + 32, 128, 128));
    let lines = l.lock().unwrap().clone();
    let computes: Vec<&String> = lines.iter().filter(|l| l.contains("compute")).collect();
    assert_eq!(computes, ["gpu compute #2 #3", "cpu compute #4 #5", "gpu compute #6"]);
    // One download for the gpu -> cpu copy of s1; y, a small output no node reads, lies in
    // host-visible memory the device wrote: reading it is one more download (the mock has no
    // host_slice), with no copy into a read-back region first.
    assert_eq!(count(&l, "gpu download"), 2);
    assert_eq!(count(&l, "gpu copy_regions"), 0);
    assert_eq!(count(&l, "cpu download"), 0, "cpu is host-visible: copies read through host_slice");
}

#[test]
fn a_hundred_steps_of_one_topology_plan_and_allocate_once() {
    let l = log();
    let mut s =
        Scheduler::new(vec![Mock::new("gpu", &l).refusing(&["neg"]).boxed(), Mock::new("cpu", &l).boxed()]).unwrap();
    let mut n_buffers = 0;
    let mut b_set = false;
    let mut previous = Vec::new();
    for step in 0..100 {
        // A fresh graph every step, as a runner would build it: same topology, same plan.
        let mut g = Graph::new();
        let (x, b, y) = chain(&mut g);
        n_buffers = s.plan(&g).unwrap().buffers.len();
        let (xv, bv) = data(step);
        s.set_input_f32(x, &xv).unwrap();
        if !b_set {
            s.set_input_f32(b, &bv).unwrap();
            b_set = true;
        }
        s.compute().unwrap();
        let out = s.read_f32(y).unwrap();
        assert_eq!(out, expected(&xv, &bv), "step {step}");
        assert_ne!(out, previous, "the output changes with the input");
        previous = out;
    }
    let st = s.stats();
    assert_eq!((st.plans, st.allocations, st.steps), (1, 1, 100));
    assert_eq!(st.buffers as usize, n_buffers);
    assert_eq!(count(&l, " alloc "), n_buffers);
    assert_eq!(count(&l, " free "), 0);
    assert_eq!(st.bytes_between_backends, 100 * 256);
    assert_eq!(st.bytes_from_host, 100 * 128 + 32);
}

#[test]
fn a_new_topology_is_planned_keeps_the_old_plan_cached_and_needs_inputs_again() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let mut g = Graph::new();
    let (x, b, y) = chain(&mut g);
    let first = s.plan(&g).unwrap().buffers.len();
    let (xv, bv) = data(1);
    s.set_input_f32(x, &xv).unwrap();
    s.set_input_f32(b, &bv).unwrap();
    s.compute().unwrap();
    let g1 = g.clone();
    // One more node: a different topology hash. Its buffers come from the same pool: y, now
    // read by z, moves to a new outputs buffer and z takes the host-outputs buffer y had, so
    // nothing is freed.
    let z = g.scale(y, 2.0).unwrap();
    g.set_output(z);
    s.plan(&g).unwrap();
    assert_eq!((s.stats().plans, s.stats().allocations, s.cached_plans()), (2, 2, 2));
    assert_eq!(count(&l, " free "), 0);
    assert_eq!(s.stats().buffers as usize, first + 1);
    let e = s.compute().unwrap_err();
    assert_eq!(
        e.to_string(),
        "compute: input #0 'x' f32 [8, 4] has not been set since the graph was planned (call set_input)"
    );
    s.set_input_f32(x, &xv).unwrap();
    s.set_input_f32(b, &bv).unwrap();
    s.compute().unwrap();
    let want: Vec<f32> = expected(&xv, &bv).iter().map(|v| v * 2.0).collect();
    assert_eq!(s.read_f32(z).unwrap(), want);
    // Back to the first topology: a cache hit, no planning, no allocation; its inputs must be
    // set again (another plan used their buffers in between).
    s.plan(&g1).unwrap();
    assert_eq!((s.stats().plans, s.stats().allocations, s.stats().cache_hits), (2, 2, 1));
    assert!(matches!(s.compute().unwrap_err(), SchedError::InputNotSet { .. }));
    s.set_input_f32(x, &xv).unwrap();
    s.set_input_f32(b, &bv).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(y).unwrap(), expected(&xv, &bv));
    // Pins are part of the key: a new pin plans again even with the same topology.
    s.pin(y, "cpu").unwrap();
    s.plan(&g).unwrap();
    assert_eq!(s.stats().plans, 3);
}

#[test]
fn output_views_are_read_in_contiguous_element_order() {
    let l = log();
    for backend in [Mock::new("cpu", &l), Mock::new("gpu", &l).device_only()] {
        let mut s = Scheduler::new(vec![backend.boxed()]).unwrap();
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[3, 2]).unwrap();
        let c = g.scale(x, 10.0).unwrap();
        let t = g.transpose(c).unwrap();
        g.set_output(t);
        s.plan(&g).unwrap();
        s.set_input_f32(x, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        s.compute().unwrap();
        // t is [2, 3]: t[i0, i1] = c[i1, i0].
        assert_eq!(s.read_f32(t).unwrap(), vec![0.0, 30.0, 10.0, 40.0, 20.0, 50.0]);
    }
}

#[test]
fn set_rows_writes_the_cache_in_place_across_steps_and_backends() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("gpu", &l).boxed(), Mock::new("cpu", &l).boxed()]).unwrap();
    let mut g = Graph::new();
    let cache = g.param("cache", DType::F32, &[2, 4]).unwrap();
    let vals = g.input("vals", DType::F32, &[2, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[1]).unwrap();
    let upd = g.set_rows(cache, vals, ids).unwrap();
    let read = g.scale(upd, 1.0).unwrap();
    g.set_output(read);
    s.pin(cache, "cpu").unwrap();
    s.pin(read, "gpu").unwrap();
    let p = s.plan(&g).unwrap();
    assert_eq!(p.backend_of(upd), "cpu");
    assert_eq!(p.n_copies(), 1);
    s.set_input_f32(cache, &[0.0; 8]).unwrap();
    for step in 0..4 {
        s.set_input_f32(vals, &[step as f32 + 1.0, -(step as f32) - 1.0]).unwrap();
        s.set_input_i32(ids, &[step]).unwrap();
        s.compute().unwrap();
    }
    // Every step's row stayed in the cache.
    assert_eq!(s.read_f32(read).unwrap(), vec![1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0]);
    // A bad row id is a backend compute error naming the node and op.
    s.set_input_i32(ids, &[7]).unwrap();
    let msg = s.compute().unwrap_err().to_string();
    assert_eq!(msg, "cpu: node #3 (set_rows): row id 7 out of range 0..4");
}

#[test]
fn executor_errors_name_the_node_and_sizes() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4, 4]).unwrap();
    let k = g.input("k", DType::I32, &[4]).unwrap();
    let y = g.named("y", |g| g.scale(x, 2.0)).unwrap();
    let z = g.named("z", |g| g.scale(y, 2.0)).unwrap();
    g.set_output(z);

    assert_eq!(s.compute().unwrap_err().to_string(), "compute called before plan(): plan a graph first");
    assert_eq!(s.set_input(x, &[0; 64]).unwrap_err(), SchedError::NotPlanned { what: "set_input" });
    assert_eq!(s.read(z).unwrap_err(), SchedError::NotPlanned { what: "read" });
    assert_eq!(s.plan_text(), "");

    s.plan(&g).unwrap();
    let e = s.set_input(x, &[0; 12]).unwrap_err();
    assert_eq!(e.to_string(), "set_input: node #0 'x' f32 [4, 4] needs 64 bytes, got 12 bytes");
    let e = s.set_input_f32(y, &[0.0; 16]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "set_input: node #2 'y' f32 [4, 4] (scale{scale=2, bias=0}) is not an input, parameter or state leaf"
    );
    let e = s.set_input_i32(x, &[0; 16]).unwrap_err();
    assert_eq!(e.to_string(), "set_input_i32: node #0 'x' f32 [4, 4] has dtype f32, not i32");
    let e = s.set_input_f32(k, &[0.0; 4]).unwrap_err();
    assert_eq!(e.to_string(), "set_input_f32: node #1 'k' i32 [4] has dtype i32, not f32, f16 or bf16");
    let e = s.set_input(NodeId(40), &[]).unwrap_err();
    assert_eq!(e.to_string(), "set_input: unknown node #40 (the graph has 4 nodes)");

    s.set_input_f32(x, &[1.0; 16]).unwrap();
    let e = s.compute().unwrap_err();
    assert_eq!(
        e.to_string(),
        "compute: input #1 'k' i32 [4] has not been set since the graph was planned (call set_input)"
    );
    s.set_input_i32(k, &[0; 4]).unwrap();
    assert_eq!(
        s.read(z).unwrap_err().to_string(),
        "read: node #3 'z' f32 [4, 4] has not been computed yet (call compute first)"
    );
    s.compute().unwrap();
    assert_eq!(s.read_f32(z).unwrap(), vec![4.0; 16]);
    let e = s.read(y).unwrap_err();
    assert_eq!(
        e.to_string(),
        "read: node #2 'y' f32 [4, 4] is not an output (mark it with Graph::set_output before planning)"
    );
    let e = s.read_i32(z).unwrap_err();
    assert_eq!(e.to_string(), "read_i32: node #3 'z' f32 [4, 4] has dtype f32, not i32");
}

#[test]
fn f16_params_are_converted_by_set_input_f32() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let mut g = Graph::new();
    let w = g.param("w", DType::F16, &[4]).unwrap();
    let x = g.input("x", DType::F32, &[4]).unwrap();
    let y = g.mul(x, w).unwrap();
    g.set_output(y);
    s.plan(&g).unwrap();
    s.set_input_f32(w, &[0.5, 1.5, -2.0, 1.0 / 3.0]).unwrap();
    s.set_input_f32(x, &[2.0; 4]).unwrap();
    s.compute().unwrap();
    let third = graph::f16::from_f32(1.0 / 3.0).to_f32();
    assert_eq!(s.read_f32(y).unwrap(), vec![1.0, 3.0, -4.0, 2.0 * third]);
    assert_eq!(s.stats().bytes_from_host, 8 + 16);
}

#[test]
fn a_replan_keeps_params_with_the_same_name_dtype_and_shape() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4]).unwrap();
    let w = g.param("w", DType::F32, &[4]).unwrap();
    let v = g.param("v", DType::F32, &[4]).unwrap();
    let y = g.mul(x, w).unwrap();
    let y2 = g.add(y, v).unwrap();
    g.set_output(y2);
    let first = s.plan(&g).unwrap().buffers.len();
    s.set_input_f32(w, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    s.set_input_f32(v, &[0.5; 4]).unwrap();
    s.set_input_f32(x, &[1.0; 4]).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(y2).unwrap(), vec![1.5, 2.5, 3.5, 4.5]);

    // A new topology (another batch size): w and v are the same weights and keep their buffers.
    let mut g2 = Graph::new();
    let x2 = g2.input("x", DType::F32, &[4, 2]).unwrap();
    let w2 = g2.param("w", DType::F32, &[4]).unwrap();
    let v2 = g2.param("v", DType::F32, &[4]).unwrap();
    let y = g2.mul(x2, w2).unwrap();
    let z = g2.add(y, v2).unwrap();
    g2.set_output(z);
    let uploads = count(&l, " upload ");
    let second = s.plan(&g2).unwrap().buffers.len();
    s.set_input_f32(x2, &[1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(z).unwrap(), vec![1.5, 2.5, 3.5, 4.5, 2.5, 4.5, 6.5, 8.5]);
    assert_eq!(count(&l, " upload ") - uploads, 1, "only x was uploaded again");
    let st = s.stats();
    // The second plan's inputs, outputs and arena fit the pool's buffers (64-byte aligned): it
    // allocates nothing, and w and v are the same weights.
    assert_eq!((st.plans, st.allocations), (2, 1));
    assert_eq!((first, second), (5, 5));
    assert_eq!(st.buffers as usize, first, "nothing was allocated for the second plan");
    assert_eq!(count(&l, " free "), 0);

    // A param that changed shape is a different weight: it must be set again.
    let mut g3 = Graph::new();
    let x3 = g3.input("x", DType::F32, &[8]).unwrap();
    let w3 = g3.param("w", DType::F32, &[8]).unwrap();
    let y3 = g3.mul(x3, w3).unwrap();
    g3.set_output(y3);
    s.plan(&g3).unwrap();
    s.set_input_f32(x3, &[1.0; 8]).unwrap();
    let msg = s.compute().unwrap_err().to_string();
    assert_eq!(msg, "compute: param #1 'w' f32 [8] has not been set since the graph was planned (call set_input)");
}

#[test]
fn an_allocation_failure_is_reported_and_frees_what_the_round_got() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("gpu", &l).fail_alloc(1).boxed()]).unwrap();
    let mut g = Graph::new();
    let (_, _, _) = chain(&mut g);
    let e = s.plan(&g).unwrap_err();
    assert!(matches!(e, SchedError::Backend(sched::BackendError::OutOfMemory { .. })));
    assert!(e.to_string().starts_with("gpu: out of memory allocating "), "{e}");
    assert_eq!(count(&l, " alloc "), 2);
    assert_eq!(count(&l, " free "), 0, "the buffer the failed round got stays in the pool");
    assert!(s.current_plan().is_none() && s.cached_plans() == 0);
    assert_eq!(s.compute().unwrap_err(), SchedError::NotPlanned { what: "compute" });
    // The next attempt succeeds (the mock fails only its second alloc call) and reuses it.
    let n = s.plan(&g).unwrap().buffers.len();
    assert_eq!(s.stats().allocations, 1);
    assert_eq!(count(&l, " alloc "), 1 + n);
    // A graph error converts into SchedError for callers mixing both with `?`.
    let ge = g.top_k(NodeId(0), 99).unwrap_err();
    let se: SchedError = ge.clone().into();
    assert_eq!(se.to_string(), ge.to_string());
}

#[test]
fn the_scheduler_can_move_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<Scheduler>();
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let mut g = Graph::new();
    let (x, b, y) = chain(&mut g);
    s.plan(&g).unwrap();
    let (xv, bv) = data(3);
    let want = expected(&xv, &bv);
    let got = std::thread::spawn(move || {
        s.set_input_f32(x, &xv).unwrap();
        s.set_input_f32(b, &bv).unwrap();
        s.compute().unwrap();
        s.read_f32(y).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(got, want);
}

#[test]
fn reset_frees_every_buffer_and_forgets_the_plan() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let mut g = Graph::new();
    let (x, b, y) = chain(&mut g);
    let n = s.plan(&g).unwrap().buffers.len();
    s.reset().unwrap();
    assert_eq!(count(&l, " free "), n);
    assert!(s.current_plan().is_none() && s.graph().is_none());
    assert_eq!(s.read(y).unwrap_err(), SchedError::NotPlanned { what: "read" });
    // The same topology is planned again (the plan was forgotten).
    s.plan(&g).unwrap();
    let (xv, bv) = data(2);
    s.set_input_f32(x, &xv).unwrap();
    s.set_input_f32(b, &bv).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(y).unwrap(), expected(&xv, &bv));
    assert_eq!((s.stats().plans, s.stats().allocations), (2, 2));
    drop(s);
    assert_eq!(count(&l, " free "), 2 * n, "dropping the scheduler frees its buffers");
}

#[test]
fn a_param_gets_storage_when_given_data_and_shared_bytes_are_copied_where_the_backend_cannot_import() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("gpu", &l).device_only().boxed()]).unwrap();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4]).unwrap();
    let w = g.param("w", DType::F32, &[4]).unwrap();
    let y = g.mul(x, w).unwrap();
    g.set_output(y);
    let n = s.plan(&g).unwrap().buffers.len();
    assert_eq!(count(&l, " alloc "), n - 1, "the param's buffer waits for its data");
    assert_eq!(s.pool_bytes(BufferRole::Params), 0);
    assert!(!s.is_set(w).unwrap());
    s.set_input_f32(x, &[1.0; 4]).unwrap();
    let e = s.compute().unwrap_err();
    assert!(matches!(e, SchedError::InputNotSet { kind: "param", .. }), "{e}");
    // the mock cannot read host memory in place: the bytes are uploaded into a buffer of its own
    let w_bytes: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    s.set_input_shared(w, &sched::SharedBytes::from(w_bytes)).unwrap();
    assert_eq!(count(&l, " alloc "), n);
    assert_eq!(count(&l, " upload "), 2, "x, then w");
    assert!(s.is_set(w).unwrap());
    assert_eq!(s.pool_bytes(BufferRole::Params), 64);
    assert_eq!((s.stats().imported, s.stats().bytes_from_host, s.stats().buffers as usize), (0, 32, n));
    assert_eq!(s.param_bytes(w).unwrap(), None, "device memory: not host-visible");
    s.set_input_f32(x, &[1.0; 4]).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(y).unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
}
