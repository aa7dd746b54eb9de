//! The list of conformance cases. A case is a name and a builder closure that produces a graph with
//! its inputs' generators and the checked outputs (each with a comparator); the runner generates the
//! input data from a seed derived from the case name, so a case is the same on every run and backend.
//!
//! Families (one module each, named after the op families of the backends): element-wise ops and
//! copies in [`elementwise`], indexing and row-wise ops in [`rows`], the fused sampling ops in
//! [`sample`], whole graphs from `fixtures/graphs` in [`fixtures`], the quantized dtypes'
//! `get_rows` and `mul_mat` in [`quant`]; the draws returning token ids in [`draw_ids`] and
//! speculative verification of sampled drafts in [`spec_sampled`].

pub mod draw_ids;
pub mod elementwise;
pub mod fixtures;
pub mod list_filter;
pub mod penalize;
pub mod quant;
pub mod rows;
pub mod sample;
pub mod spec_sampled;
pub mod token_mask;

use crate::compare::Cmp;
use crate::error::ConformanceError;
use crate::generate::{Gen, Rng};
use crate::values;
use graph::{DType, Fnv64, Graph, GraphError, NodeId};
use std::fmt;
use std::sync::Arc;

/// What a case's builder closure fills in: the graph, a generator per input/param, and the checks.
#[derive(Debug, Default)]
pub struct Builder {
    /// The graph being built.
    pub g: Graph,
    gens: Vec<(NodeId, Gen)>,
    checks: Vec<Check>,
}

/// One checked output.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The output node.
    pub node: NodeId,
    /// How it is compared.
    pub cmp: Cmp,
}

impl Builder {
    /// An input with its generator.
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize], vals_gen: Gen) -> Result<NodeId, GraphError> {
        let id = self.g.input(name, dtype, shape)?;
        self.gens.push((id, vals_gen));
        Ok(id)
    }

    /// A parameter (weight) with its generator.
    pub fn param(&mut self, name: &str, dtype: DType, shape: &[usize], vals_gen: Gen) -> Result<NodeId, GraphError> {
        let id = self.g.param(name, dtype, shape)?;
        self.gens.push((id, vals_gen));
        Ok(id)
    }

    /// Sets the generator of an existing input or param (for graphs parsed from fixtures).
    pub fn generate(&mut self, id: NodeId, vals_gen: Gen) {
        self.gens.retain(|(i, _)| *i != id);
        self.gens.push((id, vals_gen));
    }

    /// Marks `node` as an output checked with `cmp`.
    pub fn check(&mut self, node: NodeId, cmp: Cmp) {
        self.g.set_output(node);
        self.checks.push(Check { node, cmp });
    }
}

/// A case after its builder ran.
#[derive(Debug)]
pub struct Built {
    /// The graph, outputs marked.
    pub graph: Graph,
    /// Generators for every input and param.
    pub gens: Vec<(NodeId, Gen)>,
    /// The checked outputs.
    pub checks: Vec<Check>,
    seed: u64,
}

impl Built {
    /// The input data (bytes of each input's dtype), generated from the case's seed.
    pub fn input_data(&self) -> Vec<(NodeId, Vec<u8>)> {
        self.gens
            .iter()
            .enumerate()
            .map(|(i, (id, vals_gen))| {
                let n = self.graph.node(*id);
                let mut rng = Rng::new(self.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                (*id, values::encode(n.dtype, &vals_gen.generate(&mut rng, n.ne())))
            })
            .collect()
    }

    /// The output nodes, in check order.
    pub fn outputs(&self) -> Vec<NodeId> {
        self.checks.iter().map(|c| c.node).collect()
    }
}

type BuildFn = dyn Fn(&mut Builder) -> Result<(), GraphError> + Send + Sync;

/// A named conformance case.
#[derive(Clone)]
pub struct Case {
    /// Unique name (`family/op/details`).
    pub name: String,
    build: Arc<BuildFn>,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Case({})", self.name)
    }
}

impl Case {
    /// A case from its name and builder closure.
    pub fn new(
        name: impl Into<String>,
        build: impl Fn(&mut Builder) -> Result<(), GraphError> + Send + Sync + 'static,
    ) -> Case {
        Case { name: name.into(), build: Arc::new(build) }
    }

    /// Runs the builder. Every input and param must have a generator and at least one output must be
    /// checked (else the case list has a bug, reported as an error).
    pub fn build(&self) -> Result<Built, ConformanceError> {
        let err = |msg: String| ConformanceError::Build { case: self.name.clone(), msg };
        let mut b = Builder::default();
        (self.build)(&mut b).map_err(|e| err(e.to_string()))?;
        for (id, n) in b.g.nodes() {
            if n.op == graph::Op::Input && !b.gens.iter().any(|(i, _)| *i == id) {
                return Err(err(format!("input {} has no generator", b.g.describe(id))));
            }
        }
        if b.checks.is_empty() {
            return Err(err("no output is checked".into()));
        }
        let mut h = Fnv64::default();
        h.write_str(&self.name);
        Ok(Built { graph: b.g, gens: b.gens, checks: b.checks, seed: h.finish() })
    }
}

/// Every case of the suite.
pub fn all() -> Vec<Case> {
    let mut v = elementwise::cases();
    v.extend(rows::cases());
    v.extend(draw_ids::cases());
    v.extend(spec_sampled::cases());
    v.extend(sample::cases());
    v.extend(fixtures::cases());
    v.extend(quant::cases());
    v.extend(list_filter::cases());
    v.extend(penalize::cases());
    v.extend(token_mask::cases());
    v
}

/// The cases whose name contains `pattern` (all of them for `None` or an empty pattern); handy with
/// an environment variable such as `CONFORMANCE_FILTER` when debugging one family.
pub fn matching(pattern: Option<&str>) -> Vec<Case> {
    let all = all();
    match pattern {
        Some(p) if !p.is_empty() => all.into_iter().filter(|c| c.name.contains(p)).collect(),
        _ => all,
    }
}

/// The edge sizes of row ops.
pub const EDGE_SIZES: [usize; 9] = [1, 31, 32, 33, 4095, 4096, 4097, 151_936, 262_144];

/// The float dtypes.
pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_builds_with_unique_names() {
        let cases = all();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        let dups: Vec<&&str> = names.windows(2).filter(|w| w[0] == w[1]).map(|w| &w[0]).collect();
        assert!(dups.is_empty(), "duplicate case names: {dups:?}");
        for c in &cases {
            let b = c.build().unwrap_or_else(|e| panic!("{e}"));
            assert!(!b.checks.is_empty());
        }
    }

    #[test]
    fn every_op_is_covered() {
        let mut seen = std::collections::BTreeSet::new();
        for c in all() {
            for (_, n) in c.build().unwrap().graph.nodes() {
                seen.insert(n.op.name());
            }
        }
        for op in crate::ops::names() {
            assert!(seen.contains(op), "no case covers {op}");
        }
    }

    #[test]
    fn inputs_are_deterministic_per_case() {
        let c = &all()[0];
        let (a, b) = (c.build().unwrap(), c.build().unwrap());
        assert_eq!(a.input_data(), b.input_data());
    }
}
