//! Whole-graph cases: the fixtures in `fixtures/graphs/*.graph` (an MLP with f16 weights, an attention
//! block with KV-cache views and `set_rows`, and a sampling tail), with input generators chosen so the
//! graphs compute meaningful values (distinct cache slots, a mask with a finite entry in every row).

use super::{Builder, Case};
use crate::compare::{Cmp, Tol};
use crate::generate::Gen;
use graph::{GraphError, NodeId};

/// The fixture texts, by name.
pub const FIXTURES: [(&str, &str); 3] = [
    ("mlp2", include_str!("../../../../fixtures/graphs/mlp2.graph")),
    ("attention", include_str!("../../../../fixtures/graphs/attention.graph")),
    ("sampling_tail", include_str!("../../../../fixtures/graphs/sampling_tail.graph")),
];

fn node(b: &Builder, name: &str) -> Result<NodeId, GraphError> {
    b.g.find(name).ok_or_else(|| GraphError::Fixture { line: 0, msg: format!("the fixture has no tensor `{name}`") })
}

fn gens(fixture: &str, name: &str) -> Gen {
    match (fixture, name) {
        (_, "x") => Gen::Uniform(-1.0, 1.0),
        ("attention", "pos") => Gen::Ints(0, 200),
        ("attention", "slots") => Gen::Distinct(16),
        // Query token j sees cache slots 0..=j+8: every row has finite entries.
        ("attention", "kq_mask") => Gen::func(|_, i| if i[0] <= i[1] + 8 { 0.0 } else { f64::NEG_INFINITY }),
        ("attention", "norm_w") => Gen::Uniform(0.5, 1.5),
        ("attention", "k_cache" | "v_cache") => Gen::Uniform(-1.0, 1.0),
        ("sampling_tail", "logits") => Gen::Uniform(-5.0, 5.0),
        ("sampling_tail", "inv_t") => Gen::Uniform(0.5, 2.0),
        ("sampling_tail", "keys") => Gen::Ints(i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => Gen::Uniform(-0.1, 0.1),
    }
}

/// One case per fixture; every output is checked (token ids exactly, floats within a tolerance).
pub fn cases() -> Vec<Case> {
    FIXTURES
        .iter()
        .map(|&(name, text)| {
            Case::new(format!("fixture/{name}"), move |b| {
                b.g = graph::fixture::parse(text)?;
                let leaves: Vec<(NodeId, String)> =
                    b.g.nodes()
                        .filter(|(_, n)| n.op == graph::Op::Input)
                        .map(|(id, n)| (id, n.name.clone().unwrap_or_default()))
                        .collect();
                for (id, leaf) in leaves {
                    b.generate(id, gens(name, &leaf));
                }
                for out in b.g.outputs() {
                    let cmp =
                        if b.g.node(out).dtype.is_float() { Cmp::Close(Tol::new(1e-4, 1e-4)) } else { Cmp::Exact };
                    b.check(out, cmp);
                }
                // Fail loudly if a fixture loses a tensor the generators expect.
                let expected: &[&str] = match name {
                    "attention" => &["slots", "kq_mask"],
                    "sampling_tail" => &["keys", "inv_t"],
                    _ => &["x"],
                };
                for e in expected {
                    node(b, e)?;
                }
                Ok(())
            })
        })
        .collect()
}
