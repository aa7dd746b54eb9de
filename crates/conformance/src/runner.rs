//! Running cases: a [`Target`] computes a case's outputs (the f64 reference, or a backend through
//! `sched::Scheduler`), [`run_case`] checks a target against an oracle, and [`run_suite`] runs every
//! case into a [`Report`] of pass / fail / skipped (with the reason) and the worst error per case.
//!
//! A case is skipped only when the target's backend says `supports == false` for one of its compute
//! nodes; everything it claims to support must run and match.

use crate::cases::{self, Built, Case};
use crate::compare::{self, Aux, Cmp};
use crate::error::ConformanceError;
use crate::reference::{self, Reference};
use crate::values;
use graph::{Graph, NodeId};
use sched::{Backend, BackendError, Scheduler};
use std::fmt;
use std::time::Instant;

/// Something that computes a graph's outputs from its inputs.
pub trait Target {
    /// Name for reports.
    fn name(&self) -> String;

    /// `Some(reason)` when some compute node of `g` cannot run here.
    fn unsupported(&mut self, g: &Graph) -> Option<String>;

    /// Runs `g` on `inputs` (bytes per input/param) and returns the logical values of `outputs`.
    fn run(
        &mut self,
        g: &Graph,
        inputs: &[(NodeId, Vec<u8>)],
        outputs: &[NodeId],
    ) -> Result<Vec<Vec<f64>>, ConformanceError>;

    /// True for the f64 reference (lets the runner reuse its evaluation for index keys).
    fn is_reference(&self) -> bool {
        false
    }
}

/// The f64 reference interpreter as a target.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReferenceTarget;

impl Target for ReferenceTarget {
    fn name(&self) -> String {
        "reference(f64)".into()
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
        reference::run(g, inputs, outputs)
    }

    fn is_reference(&self) -> bool {
        true
    }
}

/// Makes a fresh backend (called once, and again after a failed case to start clean).
pub type BackendFactory = Box<dyn FnMut() -> Result<Box<dyn Backend>, BackendError> + Send>;

/// A backend driven through `sched::Scheduler` (a one-backend scheduler, so every node runs on it).
pub struct SchedTarget {
    name: String,
    factory: BackendFactory,
    sched: Option<Scheduler>,
}

impl fmt::Debug for SchedTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedTarget").field("name", &self.name).finish_non_exhaustive()
    }
}

impl SchedTarget {
    /// A target over backends made by `factory` (one is made now, to learn its name; its error is
    /// returned as [`ConformanceError::Backend`], e.g. `BackendError::Unavailable` without a device).
    pub fn new(mut factory: BackendFactory) -> Result<SchedTarget, ConformanceError> {
        let backend = factory()?;
        let name = backend.name().to_string();
        let sched = Scheduler::new(vec![backend])
            .map_err(|e| ConformanceError::Target { target: name.clone(), msg: e.to_string() })?;
        Ok(SchedTarget { name, factory, sched: Some(sched) })
    }

    fn err(&self, msg: impl fmt::Display) -> ConformanceError {
        ConformanceError::Target { target: self.name.clone(), msg: msg.to_string() }
    }

    fn sched(&mut self) -> Result<&mut Scheduler, ConformanceError> {
        if self.sched.is_none() {
            let backend = (self.factory)().map_err(|e| self.err(e))?;
            self.sched = Some(Scheduler::new(vec![backend]).map_err(|e| self.err(e))?);
        }
        Ok(self.sched.as_mut().expect("just made"))
    }

    fn try_run(
        &mut self,
        g: &Graph,
        inputs: &[(NodeId, Vec<u8>)],
        outputs: &[NodeId],
    ) -> Result<Vec<Vec<f64>>, ConformanceError> {
        let name = self.name.clone();
        let e = |x: sched::SchedError| ConformanceError::Target { target: name.clone(), msg: x.to_string() };
        let s = self.sched()?;
        s.plan(g).map_err(e)?;
        for (id, bytes) in inputs {
            s.set_input(*id, bytes).map_err(e)?;
        }
        s.compute().map_err(e)?;
        outputs.iter().map(|&o| Ok(values::decode(g.node(o).dtype, &s.read(o).map_err(e)?))).collect()
    }
}

impl Target for SchedTarget {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn unsupported(&mut self, g: &Graph) -> Option<String> {
        let s = match self.sched() {
            Ok(s) => s,
            Err(e) => return Some(e.to_string()),
        };
        let backend = &s.backends()[0];
        g.nodes().filter(|(_, n)| n.op != graph::Op::Input && !n.op.is_view()).find_map(|(id, n)| {
            if backend.supports(g, id) {
                return None;
            }
            let srcs: Vec<String> = n.srcs.iter().map(|&s| g.describe(s)).collect();
            Some(format!("{} does not support {} {} <- {}", backend.name(), g.describe(id), n.op, srcs.join(", ")))
        })
    }

    fn run(
        &mut self,
        g: &Graph,
        inputs: &[(NodeId, Vec<u8>)],
        outputs: &[NodeId],
    ) -> Result<Vec<Vec<f64>>, ConformanceError> {
        let r = self.try_run(g, inputs, outputs);
        if r.is_err() {
            // Start the next case on a fresh scheduler and backend.
            self.sched = None;
        }
        r
    }
}

/// What the target is checked against.
pub enum Oracle {
    /// The f64 reference interpreter.
    Reference,
    /// Another backend (e.g. the CPU for Vulkan), through the scheduler.
    Backend(BackendFactory),
}

impl fmt::Debug for Oracle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Oracle::Reference => f.write_str("Oracle::Reference"),
            Oracle::Backend(_) => f.write_str("Oracle::Backend(..)"),
        }
    }
}

impl Oracle {
    /// The oracle as a target.
    pub fn into_target(self) -> Result<Box<dyn Target>, ConformanceError> {
        Ok(match self {
            Oracle::Reference => Box::new(ReferenceTarget),
            Oracle::Backend(f) => Box::new(SchedTarget::new(f)?),
        })
    }
}

/// How one case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every output matched; the worst `error / allowed` ratio over them.
    Pass {
        /// Worst ratio (`<= 1`).
        worst: f64,
    },
    /// An output did not match.
    Fail {
        /// The output node.
        output: NodeId,
        /// Its description (`#id 'name' dtype [shape]`) and comparator.
        what: String,
        /// Worst ratio (`> 1`, or infinity for structural failures).
        worst: f64,
        /// The worst element, in words.
        detail: String,
    },
    /// The target does not support the case (the reason names the node).
    Skip(String),
    /// The case could not run (a target error, or the oracle failed).
    Error(String),
}

/// One case's result.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall time of the whole case (inputs, oracle, target, comparison), for keeping the suite fast.
    pub millis: u128,
}

/// Runs one case on `target` and checks it against `oracle`.
pub fn run_case(case: &Case, target: &mut dyn Target, oracle: &mut dyn Target) -> CaseResult {
    let start = Instant::now();
    let _span = tracing::info_span!("case", name = %case.name).entered();
    let outcome = match case.build() {
        Ok(built) => run_built(&built, target, oracle),
        Err(e) => Outcome::Error(e.to_string()),
    };
    CaseResult { name: case.name.clone(), outcome, millis: start.elapsed().as_millis() }
}

fn run_built(b: &Built, target: &mut dyn Target, oracle: &mut dyn Target) -> Outcome {
    let g = &b.graph;
    if let Some(reason) = target.unsupported(g) {
        return Outcome::Skip(reason);
    }
    if let Some(reason) = oracle.unsupported(g) {
        return Outcome::Error(format!("the oracle {} cannot run the case: {reason}", oracle.name()));
    }
    let inputs = b.input_data();
    let outputs = b.outputs();
    let needs_keys = b.checks.iter().any(|c| {
        matches!(c.cmp, Cmp::Indices { .. } | Cmp::Draw { .. } | Cmp::Nucleus { .. } | Cmp::ListFilter { .. })
    });
    let reference = if needs_keys || oracle.is_reference() {
        match Reference::evaluate(g, &inputs) {
            Ok(r) => Some(r),
            Err(e) => return Outcome::Error(format!("reference: {e}")),
        }
    } else {
        None
    };
    let want = match (&reference, oracle.is_reference()) {
        (Some(r), true) => outputs.iter().map(|&o| r.values(o)).collect(),
        _ => match oracle.run(g, &inputs, &outputs) {
            Ok(w) => w,
            Err(e) => return Outcome::Error(format!("oracle {}: {e}", oracle.name())),
        },
    };
    let got = match target.run(g, &inputs, &outputs) {
        Ok(v) => v,
        Err(e) => return Outcome::Error(e.to_string()),
    };
    let mut worst = 0.0f64;
    for (i, check) in b.checks.iter().enumerate() {
        let n = g.node(check.node);
        let (keys_vals, draws, nucleus);
        let aux = match (&check.cmp, &reference) {
            (Cmp::Indices { keys, .. }, Some(r)) => {
                keys_vals = r.values(*keys);
                Aux::Keys(&keys_vals[..], g.node(*keys).ne())
            }
            (Cmp::Draw { .. }, Some(r)) => {
                draws = r.draw_rows(check.node);
                Aux::Draws(&draws[..])
            }
            (Cmp::Nucleus { x, params, .. } | Cmp::ListFilter { x, params, .. }, Some(r)) => {
                nucleus = (r.values(*x), r.values(*params));
                Aux::Nucleus(&nucleus.0[..], &nucleus.1[..])
            }
            _ => Aux::None,
        };
        // Against another f32 backend both sides carry rounding error: allow twice the tolerance.
        let cmp = if oracle.is_reference() { check.cmp.clone() } else { check.cmp.widened(2.0) };
        let v = compare::compare(&cmp, n.dtype, n.ne(), &got[i], &want[i], aux);
        if !v.passed() {
            return Outcome::Fail {
                output: check.node,
                what: format!("{} {} ({:?})", g.describe(check.node), n.op, cmp),
                worst: v.worst,
                detail: v.detail,
            };
        }
        worst = worst.max(v.worst);
    }
    Outcome::Pass { worst }
}

/// Results of a suite run.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The target's name.
    pub target: String,
    /// The oracle's name.
    pub oracle: String,
    /// One result per case, in suite order.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// Results that passed.
    pub fn passed(&self) -> Vec<&CaseResult> {
        self.results.iter().filter(|r| matches!(r.outcome, Outcome::Pass { .. })).collect()
    }

    /// Results that failed or could not run.
    pub fn failures(&self) -> Vec<&CaseResult> {
        self.results.iter().filter(|r| matches!(r.outcome, Outcome::Fail { .. } | Outcome::Error(_))).collect()
    }

    /// Results skipped as unsupported.
    pub fn skipped(&self) -> Vec<&CaseResult> {
        self.results.iter().filter(|r| matches!(r.outcome, Outcome::Skip(_))).collect()
    }

    /// True when no supported case failed.
    pub fn ok(&self) -> bool {
        self.failures().is_empty()
    }

    /// The counts line: `cpu vs reference(f64): 312 passed, 0 failed, 2 skipped, 3.1 s`.
    pub fn summary(&self) -> String {
        let ms: u128 = self.results.iter().map(|r| r.millis).sum();
        format!(
            "{} vs {}: {} passed, {} failed, {} skipped ({} cases, {:.1} s)",
            self.target,
            self.oracle,
            self.passed().len(),
            self.failures().len(),
            self.skipped().len(),
            self.results.len(),
            ms as f64 / 1000.0
        )
    }

    /// Every case on one line, failures with their worst element.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for r in &self.results {
            let line = match &r.outcome {
                Outcome::Pass { worst } => format!("PASS  {:<48} worst {worst:.3} {:>6} ms", r.name, r.millis),
                Outcome::Fail { what, worst, detail, .. } => {
                    format!("FAIL  {:<48} {what}: worst {worst:.3e}: {detail}", r.name)
                }
                Outcome::Skip(reason) => format!("SKIP  {:<48} {reason}", r.name),
                Outcome::Error(e) => format!("ERROR {:<48} {e}", r.name),
            };
            s.push_str(&line);
            s.push('\n');
        }
        s
    }
}

impl fmt::Display for Report {
    /// The summary, then every case that did not pass, then the slowest cases.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.summary())?;
        for line in self.table().lines().filter(|l| !l.starts_with("PASS")) {
            writeln!(f, "  {line}")?;
        }
        let mut slow: Vec<&CaseResult> = self.results.iter().collect();
        slow.sort_by_key(|r| std::cmp::Reverse(r.millis));
        let slow: Vec<String> = slow.iter().take(5).map(|r| format!("{} {} ms", r.name, r.millis)).collect();
        writeln!(f, "  slowest: {}", slow.join(", "))
    }
}

/// Runs `cases` on `target` against `oracle`.
pub fn run_cases(cases: &[Case], target: &mut dyn Target, oracle: &mut dyn Target) -> Report {
    let _span = tracing::info_span!("suite", target = %target.name(), oracle = %oracle.name()).entered();
    let results = cases.iter().map(|c| run_case(c, target, oracle)).collect();
    Report { target: target.name(), oracle: oracle.name(), results }
}

/// Runs the whole suite ([`cases::all`]) on `target` against `oracle`.
pub fn run_suite(target: &mut dyn Target, oracle: Oracle) -> Result<Report, ConformanceError> {
    let mut oracle = oracle.into_target()?;
    Ok(run_cases(&cases::all(), target, oracle.as_mut()))
}

/// Runs the whole suite on the backends `factory` makes (through the scheduler) against `oracle`.
pub fn run_suite_on(factory: BackendFactory, oracle: Oracle) -> Result<Report, ConformanceError> {
    let mut target = SchedTarget::new(factory)?;
    run_suite(&mut target, oracle)
}
