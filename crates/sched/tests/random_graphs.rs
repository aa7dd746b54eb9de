//! Property test: random element-wise DAGs (with broadcasting, reshape-view chains and shared
//! sources) on two mock backends with random op refusals and random pins compute, step after step,
//! exactly what a host evaluation computes. A liveness bug (a live tensor overwritten by reuse), a
//! missing or stale copy, or a wrong binding changes some output.

mod common;

use common::{Mock, log};
use graph::{DType, Graph, NodeId};
use proptest::prelude::*;
use sched::Scheduler;

#[derive(Debug, Clone)]
enum Step {
    Add(usize, usize),
    Mul(usize, usize),
    Sub(usize, usize),
    Neg(usize),
    Scale(usize, i8),
    Cont(usize),
    /// reshape to [4, 8] and back to [8, 4]: a view chain.
    Views(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let i = 0usize..1000;
    prop_oneof![
        (i.clone(), 0usize..1000).prop_map(|(a, b)| Step::Add(a, b)),
        (i.clone(), 0usize..1000).prop_map(|(a, b)| Step::Mul(a, b)),
        (i.clone(), 0usize..1000).prop_map(|(a, b)| Step::Sub(a, b)),
        i.clone().prop_map(Step::Neg),
        (i.clone(), any::<i8>()).prop_map(|(a, s)| Step::Scale(a, s)),
        i.clone().prop_map(Step::Cont),
        i.prop_map(Step::Views),
    ]
}

/// Host values of a [8, 4] tensor (or a broadcast [8] / [1, 4] leaf) in element order.
#[derive(Clone)]
struct Val {
    ne: [usize; 2],
    v: Vec<f32>,
}

impl Val {
    fn at(&self, i0: usize, i1: usize) -> f32 {
        self.v[(i1 % self.ne[1]) * self.ne[0] + i0 % self.ne[0]]
    }
    fn map2(a: &Val, b: &Val, f: impl Fn(f32, f32) -> f32) -> Val {
        let v = (0..4)
            .flat_map(|i1| (0..8).map(move |i0| (i0, i1)))
            .map(|(i0, i1)| f(a.at(i0, i1), b.at(i0, i1)))
            .collect();
        Val { ne: [8, 4], v }
    }
}

fn run(steps: &[Step], refuse: &[&'static str], pins: &[(usize, bool)], n_outputs: usize) -> Result<(), TestCaseError> {
    let mut g = Graph::new();
    let leaves = [
        g.input("a", DType::F32, &[8, 4]).unwrap(),
        g.input("b", DType::F32, &[8]).unwrap(),
        g.param("w", DType::F32, &[8, 4]).unwrap(),
        g.input("c", DType::F32, &[1, 4]).unwrap(),
    ];
    let shapes = [[8, 4], [8, 1], [8, 4], [1, 4]];
    // Full-shape nodes usable as the first operand of a binary op.
    let mut full: Vec<NodeId> = vec![leaves[0], leaves[2]];
    let mut any: Vec<NodeId> = leaves.to_vec();
    let mut ops: Vec<(NodeId, Step, NodeId, NodeId)> = Vec::new();
    for s in steps {
        let a = full[match s {
            Step::Add(a, _) | Step::Mul(a, _) | Step::Sub(a, _) => *a,
            Step::Neg(a) | Step::Scale(a, _) | Step::Cont(a) | Step::Views(a) => *a,
        } % full.len()];
        let b = match s {
            Step::Add(_, b) | Step::Mul(_, b) | Step::Sub(_, b) => any[b % any.len()],
            _ => a,
        };
        let id = match s {
            Step::Add(..) => g.add(a, b),
            Step::Mul(..) => g.mul(a, b),
            Step::Sub(..) => g.sub(a, b),
            Step::Neg(_) => g.neg(a),
            Step::Scale(_, k) => g.scale(a, f32::from(*k) / 16.0),
            Step::Cont(_) => g.cont(a),
            Step::Views(_) => g.reshape(a, &[4, 8]).and_then(|v| g.reshape(v, &[8, 4])),
        }
        .unwrap();
        ops.push((id, s.clone(), a, b));
        full.push(id);
        any.push(id);
    }
    let computed: Vec<NodeId> = ops.iter().map(|o| o.0).filter(|&id| !g.node(id).op.is_view()).collect();
    let outputs: Vec<NodeId> = ops.iter().rev().take(n_outputs.max(1)).map(|o| o.0).collect();
    for &o in &outputs {
        g.set_output(o);
    }

    let l = log();
    let mut s = Scheduler::new(vec![
        Mock::new("gpu", &l).refusing(refuse).device_only().align(128).boxed(),
        Mock::new("cpu", &l).boxed(),
    ])
    .unwrap();
    for &(i, to_gpu) in pins {
        if !computed.is_empty() {
            let id = computed[i % computed.len()];
            let on = if to_gpu && !refuse.contains(&g.node(id).op.name()) { "gpu" } else { "cpu" };
            s.pin(id, on).unwrap();
        }
    }
    let plan = s.plan(&g).unwrap().clone();
    let text = s.plan_text();
    let mut w = None;
    for stepno in 0..3 {
        let mut vals: Vec<Option<Val>> = vec![None; g.len()];
        for (k, (&leaf, ne)) in leaves.iter().zip(shapes).enumerate() {
            let n = ne[0] * ne[1];
            let v: Vec<f32> = (0..n).map(|i| ((i * 37 + k * 11 + stepno * 5) % 17) as f32 - 8.0).collect();
            if k == 2 {
                // The weight is written once and keeps its value.
                let v0 = w.get_or_insert_with(|| v.clone()).clone();
                if stepno == 0 {
                    s.set_input_f32(leaf, &v0).unwrap();
                }
                vals[leaf.index()] = Some(Val { ne, v: v0 });
            } else {
                s.set_input_f32(leaf, &v).unwrap();
                vals[leaf.index()] = Some(Val { ne, v });
            }
        }
        for (id, st, a, b) in &ops {
            let va = vals[a.index()].clone().unwrap();
            let vb = vals[b.index()].clone().unwrap();
            let r = match st {
                Step::Add(..) => Val::map2(&va, &vb, |x, y| x + y),
                Step::Mul(..) => Val::map2(&va, &vb, |x, y| x * y),
                Step::Sub(..) => Val::map2(&va, &vb, |x, y| x - y),
                Step::Neg(_) => Val::map2(&va, &va, |x, _| -x),
                Step::Scale(_, k) => Val::map2(&va, &va, |x, _| x * (f32::from(*k) / 16.0) + 0.0),
                Step::Cont(_) | Step::Views(_) => va,
            };
            vals[id.index()] = Some(r);
        }
        s.compute().unwrap();
        for &o in &outputs {
            let got = s.read_f32(o).unwrap();
            prop_assert_eq!(&got, &vals[o.index()].as_ref().unwrap().v, "step {} output {}\n{}", stepno, o, text);
        }
    }
    prop_assert_eq!(s.stats().bytes_between_backends, 3 * plan.copy_bytes() as u64);
    prop_assert_eq!((s.stats().plans, s.stats().allocations), (1, 1));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn random_graphs_on_two_backends_match_the_host(
        steps in prop::collection::vec(step(), 1..24),
        refuse in prop::sample::subsequence(vec!["add", "mul", "neg", "scale", "cont"], 0..3),
        pins in prop::collection::vec((0usize..64, any::<bool>()), 0..6),
        n_outputs in 1usize..4,
    ) {
        run(&steps, &refuse, &pins, n_outputs)?;
    }
}
