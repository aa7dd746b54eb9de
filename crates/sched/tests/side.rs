//! Side plans (`Scheduler::plan_side`): a small graph run after the current plan's step that reads
//! the base's tensors in place. Results, the base left as it was (its inputs still set, its
//! outputs readable, its step repeatable without writing anything), caching, a linked tensor on
//! a device the side's consumer does not run on (copied), and the errors.

mod common;

use common::{Mock, log};
use graph::{DType, Graph, NodeId};
use sched::{BufferRole, SchedError, Scheduler};

/// Base: x [8, 4], b [8]; a = x + b (an intermediate), y = 2 a (an output).
fn base(g: &mut Graph) -> (NodeId, NodeId, NodeId, NodeId) {
    let x = g.input("x", DType::F32, &[8, 4]).unwrap();
    let b = g.input("b", DType::F32, &[8]).unwrap();
    let a = g.named("a", |g| g.add(x, b)).unwrap();
    let y = g.named("y", |g| g.scale(a, 2.0)).unwrap();
    g.set_output(y);
    (x, b, a, y)
}

/// Side: ly (y), lx (x) linked; w [8, 1] an input of its own; z = ly * w - lx.
fn side(g: &mut Graph) -> (NodeId, NodeId, NodeId, NodeId) {
    let ly = g.input("ly", DType::F32, &[8, 4]).unwrap();
    let lx = g.input("lx", DType::F32, &[8, 4]).unwrap();
    let w = g.input("w", DType::F32, &[8, 1]).unwrap();
    let m = g.named("m", |g| g.mul(ly, w)).unwrap();
    let z = g.named("z", |g| g.sub(m, lx)).unwrap();
    g.set_output(z);
    (ly, lx, w, z)
}

fn inputs(step: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..32).map(|i| i as f32 * 0.5 - 4.0 + step as f32).collect();
    let b: Vec<f32> = (0..8).map(|i| i as f32 - 3.0).collect();
    let w: Vec<f32> = (0..8).map(|i| 1.0 + i as f32 * 0.25 + step as f32).collect();
    (x, b, w)
}

fn want_y(x: &[f32], b: &[f32]) -> Vec<f32> {
    x.iter().enumerate().map(|(i, v)| 2.0 * (v + b[i % 8])).collect()
}

fn want_z(x: &[f32], b: &[f32], w: &[f32]) -> Vec<f32> {
    want_y(x, b).iter().enumerate().map(|(i, y)| y * w[i % 8] - x[i]).collect()
}

fn run(s: &mut Scheduler, steps: usize) {
    let (mut bg, mut sg) = (Graph::new(), Graph::new());
    let (x, b, _, y) = base(&mut bg);
    let (ly, lx, w, z) = side(&mut sg);
    for step in 0..steps {
        let (xv, bv, wv) = inputs(step);
        s.plan(&bg).unwrap();
        s.set_input_f32(x, &xv).unwrap();
        s.set_input_f32(b, &bv).unwrap();
        s.compute().unwrap();
        assert!(!s.in_side());
        s.plan_side(&sg, &[(ly, y), (lx, x)]).unwrap();
        assert!(s.in_side());
        s.set_input_f32(w, &wv).unwrap();
        s.compute().unwrap();
        assert_eq!(s.read_f32(z).unwrap(), want_z(&xv, &bv, &wv), "step {step}");
        s.end_side().unwrap();
        // The base as the side found it: its output readable, its inputs still set (a step
        // again without writing them gives the same result).
        assert_eq!(s.read_f32(y).unwrap(), want_y(&xv, &bv));
        s.compute().unwrap();
        assert_eq!(s.read_f32(y).unwrap(), want_y(&xv, &bv));
    }
}

#[test]
fn a_side_plan_reads_the_base_in_place_and_leaves_it_as_it_was() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    run(&mut s, 5);
    let st = s.stats();
    // One base plan and one side plan, each planned once; the side steps count apart.
    assert_eq!((st.plans, st.steps, st.side_steps), (2, 10, 5));
    assert_eq!(s.cached_plans(), 2);
    // The side plan's linked leaves have no buffer of their own.
    let (mut bg, mut sg) = (Graph::new(), Graph::new());
    let (x, _, _, y) = base(&mut bg);
    let (ly, lx, _, _) = side(&mut sg);
    s.plan(&bg).unwrap();
    let plan = s.plan_side(&sg, &[(ly, y), (lx, x)]).unwrap().clone();
    let roles: Vec<BufferRole> = plan.buffers.iter().map(|b| b.role).collect();
    assert_eq!(roles.iter().filter(|r| **r == BufferRole::Linked).count(), 2, "{roles:?}");
    assert!(plan.to_text(&sg).contains("cpu.linked.ly"), "{}", plan.to_text(&sg));
}

#[test]
fn a_linked_tensor_on_a_device_is_copied_to_a_consumer_elsewhere() {
    let l = log();
    // The gpu holds the base (not host-visible: its outputs have read-back regions) but refuses
    // `sub`: the side's `z` runs on the cpu and the linked `x` and `m` are copied there.
    let mut s = Scheduler::new(vec![
        Mock::new("gpu", &l).refusing(&["sub"]).device_only().boxed(),
        Mock::new("cpu", &l).boxed(),
    ])
    .unwrap();
    run(&mut s, 3);
    assert!(s.stats().copies > 0);
}

#[test]
fn side_plans_are_cached_apart_and_leave_with_their_base() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let mut bg = Graph::new();
    let (x, b, _, y) = base(&mut bg);
    s.plan(&bg).unwrap();
    // More distinct side plans than the side cache holds: the base stays cached.
    for i in 0..sched::SIDE_CACHE + 3 {
        let mut sg = Graph::new();
        let ly = sg.input("ly", DType::F32, &[8, 4]).unwrap();
        let z = sg.scale(ly, 1.0 + i as f32).unwrap();
        sg.set_output(z);
        s.plan_side(&sg, &[(ly, y)]).unwrap();
        s.end_side().unwrap();
    }
    assert_eq!(s.cached_plans(), 1 + sched::SIDE_CACHE);
    let before = s.stats().plans;
    s.plan(&bg).unwrap();
    assert_eq!(s.stats().plans, before, "the base is still cached");
    // Main plans evicting the base take its side plans along.
    for i in 0..sched::PLAN_CACHE {
        let mut g = Graph::new();
        let v = g.input("v", DType::F32, &[4 + i]).unwrap();
        let o = g.neg(v).unwrap();
        g.set_output(o);
        s.plan(&g).unwrap();
    }
    assert_eq!(s.cached_plans(), sched::PLAN_CACHE);
    let _ = (x, b);
}

#[test]
fn side_plan_errors() {
    let l = log();
    let mut s = Scheduler::new(vec![Mock::new("cpu", &l).boxed()]).unwrap();
    let (mut bg, mut sg) = (Graph::new(), Graph::new());
    let (x, b, a, y) = base(&mut bg);
    let (ly, lx, w, z) = side(&mut sg);
    assert!(matches!(s.plan_side(&sg, &[(ly, y)]), Err(SchedError::NotPlanned { .. })));
    s.plan(&bg).unwrap();
    // An intermediate is reused within the step: it cannot be linked.
    let e = s.plan_side(&sg, &[(ly, a)]).unwrap_err();
    assert!(matches!(e, SchedError::BadLink { .. }), "{e}");
    assert!(e.to_string().contains("intermediate"), "{e}");
    // Another shape.
    let e = s.plan_side(&sg, &[(ly, b)]).unwrap_err();
    assert!(e.to_string().contains("dtype and shape"), "{e}");
    // A compute node of the side graph is no leaf.
    let e = s.plan_side(&sg, &[(z, y)]).unwrap_err();
    assert!(e.to_string().contains("input leaf"), "{e}");
    // A side step before its base computed.
    s.plan_side(&sg, &[(ly, y), (lx, x)]).unwrap();
    s.set_input_f32(w, &[1.0; 8]).unwrap();
    assert!(matches!(s.compute(), Err(SchedError::NotComputed { .. })));
    // A linked leaf is never written.
    let e = s.set_input_f32(ly, &[0.0; 32]).unwrap_err();
    assert!(matches!(e, SchedError::LinkedLeaf { .. }), "{e}");
    // The side's own inputs must be set anew once it is current again.
    s.end_side().unwrap();
    let (xv, bv, wv) = inputs(0);
    s.set_input_f32(x, &xv).unwrap();
    s.set_input_f32(b, &bv).unwrap();
    s.compute().unwrap();
    s.plan_side(&sg, &[(ly, y), (lx, x)]).unwrap();
    assert!(matches!(s.compute(), Err(SchedError::InputNotSet { .. })));
    s.set_input_f32(w, &wv).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(z).unwrap(), want_z(&xv, &bv, &wv));
    // end_side outside a side plan does nothing.
    s.end_side().unwrap();
    s.end_side().unwrap();
    assert!(!s.in_side());
}
