//! The runner and comparators catch wrong results: the reference checked against itself passes every
//! case with zero error; a target that corrupts one element of every output fails every case; a target
//! that claims not to support an op has exactly the cases using it skipped.

use conformance::cases;
use conformance::error::ConformanceError;
use conformance::runner::{Outcome, ReferenceTarget, Target, run_cases};
use graph::{Graph, NodeId, Op};

/// The reference with the first element of every output corrupted.
struct Mutant;

impl Target for Mutant {
    fn name(&self) -> String {
        "mutant".into()
    }
    fn unsupported(&mut self, _g: &Graph) -> Option<String> {
        None
    }
    fn run(
        &mut self,
        g: &Graph,
        inputs: &[(NodeId, Vec<u8>)],
        outputs: &[NodeId],
    ) -> Result<Vec<Vec<f64>>, ConformanceError> {
        let mut out = ReferenceTarget.run(g, inputs, outputs)?;
        for (o, vals) in outputs.iter().zip(&mut out) {
            let n = g.node(*o);
            let x = vals[0];
            vals[0] = match n.op {
                // An index one past the row: never valid.
                Op::Argmax | Op::Argsort { .. } | Op::TopK { .. } => g.node(n.srcs[0]).ne()[0] as f64,
                _ if !x.is_finite() => 0.0,
                _ if n.dtype == graph::DType::I32 => x + 1.0,
                Op::Compare(_) => 1.0 - x,
                _ => x + 0.1 * x.abs() + 0.01,
            };
        }
        Ok(out)
    }
}

/// The reference, refusing `top_k`.
struct NoTopK;

impl Target for NoTopK {
    fn name(&self) -> String {
        "no-top-k".into()
    }
    fn unsupported(&mut self, g: &Graph) -> Option<String> {
        g.nodes().find(|(_, n)| matches!(n.op, Op::TopK { .. })).map(|(id, _)| format!("top_k at {id}"))
    }
    fn run(
        &mut self,
        g: &Graph,
        inputs: &[(NodeId, Vec<u8>)],
        outputs: &[NodeId],
    ) -> Result<Vec<Vec<f64>>, ConformanceError> {
        ReferenceTarget.run(g, inputs, outputs)
    }
}

fn small_cases() -> Vec<cases::Case> {
    // Every case but the largest rows (the reference alone is slow on them in a debug build).
    cases::all().into_iter().filter(|c| !c.name.contains("151936") && !c.name.contains("262144")).collect()
}

#[test]
fn reference_matches_itself_and_mutants_fail_every_case() {
    let cases = small_cases();
    assert!(cases.len() > 300, "{} cases", cases.len());
    let same = run_cases(&cases, &mut ReferenceTarget, &mut ReferenceTarget);
    assert!(same.ok(), "{same}");
    assert_eq!(same.passed().len(), cases.len(), "{same}");
    for r in &same.results {
        assert_eq!(r.outcome, Outcome::Pass { worst: 0.0 }, "{}", r.name);
    }

    let bad = run_cases(&cases, &mut Mutant, &mut ReferenceTarget);
    let caught = bad.results.iter().filter(|r| matches!(r.outcome, Outcome::Fail { .. })).count();
    let missed: Vec<&str> =
        bad.results.iter().filter(|r| !matches!(r.outcome, Outcome::Fail { .. })).map(|r| r.name.as_str()).collect();
    assert_eq!(caught, cases.len(), "corruption not caught in: {missed:?}");
    assert!(!bad.ok());
    assert!(bad.to_string().contains("FAIL"), "{bad}");
}

#[test]
fn unsupported_ops_skip_exactly_their_cases() {
    let cases: Vec<_> =
        small_cases().into_iter().filter(|c| c.name.starts_with("sort/") || c.name.starts_with("fixture/")).collect();
    let report = run_cases(&cases, &mut NoTopK, &mut ReferenceTarget);
    assert!(report.ok(), "{report}");
    let skipped: Vec<&str> = report.skipped().iter().map(|r| r.name.as_str()).collect();
    for c in &cases {
        let uses = c.build().unwrap().graph.nodes().any(|(_, n)| matches!(n.op, Op::TopK { .. }));
        assert_eq!(skipped.contains(&c.name.as_str()), uses, "{}", c.name);
    }
    assert!(skipped.contains(&"fixture/sampling_tail"));
    assert!(report.summary().contains("skipped"), "{}", report.summary());
}

#[test]
fn an_unavailable_backend_is_reported_as_such() {
    use conformance::runner::SchedTarget;
    use sched::BackendError;
    let factory =
        Box::new(|| Err(BackendError::Unavailable { backend: "vulkan".into(), reason: "no Vulkan loader".into() }));
    match SchedTarget::new(factory) {
        Err(ConformanceError::Backend(BackendError::Unavailable { reason, .. })) => {
            assert_eq!(reason, "no Vulkan loader");
        }
        other => panic!("expected Backend(Unavailable), got {other:?}"),
    }
}
