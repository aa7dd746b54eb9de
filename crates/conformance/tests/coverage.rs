//! The suite covers every dtype combination the graph builder accepts: for each op, every tuple of
//! source dtypes (and result dtype, where the caller picks it) is offered to the builder, and each one
//! it accepts must appear in some case of the suite.

use conformance::cases;
use graph::{BinaryOp, CompareOp, DType, Graph, GraphError, NodeId, RopeMode, SortOrder, UnaryOp};
use std::collections::BTreeSet;

type Sig = (String, Vec<DType>, DType);

fn sig(g: &Graph, id: NodeId) -> Sig {
    let n = g.node(id);
    (n.op.name().to_string(), n.srcs.iter().map(|&s| g.node(s).dtype).collect(), n.dtype)
}

fn suite_signatures() -> BTreeSet<Sig> {
    let mut out = BTreeSet::new();
    for c in cases::all() {
        let g = c.build().unwrap().graph;
        for (id, n) in g.nodes() {
            if n.op != graph::Op::Input && !n.op.is_view() {
                out.insert(sig(&g, id));
            }
        }
    }
    out
}

/// Builds `op` on fresh inputs of the given dtypes; `Ok(signature)` when the builder accepts them.
fn try_build(op: &str, d: &[DType]) -> Result<Sig, GraphError> {
    let mut g = Graph::new();
    let x = |g: &mut Graph, i: usize, shape: &[usize]| g.input(&format!("s{i}"), d[i], shape);
    let id = match op {
        "cont" => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.cont(a)?
        }
        "cast" => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.cast(a, d[1])?
        }
        "scale" => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.scale_bias(a, 2.0, 1.0)?
        }
        "clamp" => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.clamp(a, -1.0, 1.0)?
        }
        "where" => {
            let (m, a, b) = (x(&mut g, 0, &[4, 2])?, x(&mut g, 1, &[4, 2])?, x(&mut g, 2, &[4, 2])?);
            g.where_(m, a, b)?
        }
        "fill" => g.fill(d[0], &[4, 2], 1.0)?,
        "arange" => g.arange(d[0], &[4, 2], 0.0, 1.0)?,
        "get_rows" => {
            let (a, i) = (x(&mut g, 0, &[4, 3])?, x(&mut g, 1, &[2])?);
            g.get_rows(a, i)?
        }
        "set_rows" => {
            let (a, v, i) = (x(&mut g, 0, &[4, 3])?, x(&mut g, 1, &[4, 2])?, x(&mut g, 2, &[2])?);
            g.set_rows(a, v, i)?
        }
        "scatter_add" => {
            let (a, i, v) = (x(&mut g, 0, &[4, 3])?, x(&mut g, 1, &[2, 3])?, x(&mut g, 2, &[2, 3])?);
            g.scatter_add(a, i, v)?
        }
        "mul_mat" => {
            let (a, b) = (x(&mut g, 0, &[4, 3])?, x(&mut g, 1, &[4, 2])?);
            g.mul_mat(a, b)?
        }
        "rms_norm" => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.rms_norm(a, 1e-5)?
        }
        "rope" => {
            let (a, p) = (x(&mut g, 0, &[4, 2, 3])?, x(&mut g, 1, &[3])?);
            g.rope(a, p, 4, RopeMode::Normal, 10000.0, 1.0)?
        }
        "soft_max" => {
            let a = x(&mut g, 0, &[4, 2])?;
            let m = if d.len() > 1 { Some(x(&mut g, 1, &[4, 2])?) } else { None };
            g.soft_max(a, m, 1.0)?
        }
        "sum_rows" | "max_rows" | "argmax" | "argsort" | "top_k" | "cumsum" => {
            let a = x(&mut g, 0, &[4, 2])?;
            match op {
                "sum_rows" => g.sum_rows(a)?,
                "max_rows" => g.max_rows(a)?,
                "argmax" => g.argmax(a)?,
                "argsort" => g.argsort(a, SortOrder::Desc)?,
                "top_k" => g.top_k(a, 2)?,
                _ => g.cumsum(a)?,
            }
        }
        "random_uniform" => {
            let k = x(&mut g, 0, &[4, 2])?;
            g.random_uniform(k, 3, 0)?
        }
        name => {
            let (a, b) = (x(&mut g, 0, &[4, 2])?, if d.len() > 1 { Some(x(&mut g, 1, &[4, 1])?) } else { None });
            if let Some(u) = UnaryOp::ALL.into_iter().find(|u| u.name() == name) {
                g.unary(u, a)?
            } else if let Some(bop) = BinaryOp::ALL.into_iter().find(|o| o.name() == name) {
                g.binary(bop, a, b.expect("two sources"))?
            } else if let Some(c) = CompareOp::ALL.into_iter().find(|c| c.name() == name) {
                g.compare(c, a, b.expect("two sources"))?
            } else {
                panic!("no builder for {name}")
            }
        }
    };
    Ok(sig(&g, id))
}

fn tuples(k: usize) -> Vec<Vec<DType>> {
    let mut out = vec![vec![]];
    for _ in 0..k {
        out = out.into_iter().flat_map(|t| DType::ALL.map(|d| [t.clone(), vec![d]].concat())).collect();
    }
    out
}

#[test]
fn every_accepted_dtype_combination_has_a_case() {
    let mut arity: Vec<(String, usize)> = vec![];
    for u in UnaryOp::ALL {
        arity.push((u.name().into(), 1));
    }
    for b in BinaryOp::ALL {
        arity.push((b.name().into(), 2));
    }
    for c in CompareOp::ALL {
        arity.push((c.name().into(), 2));
    }
    for (op, k) in [
        ("cont", 1),
        ("cast", 2),
        ("scale", 1),
        ("clamp", 1),
        ("where", 3),
        ("fill", 1),
        ("arange", 1),
        ("get_rows", 2),
        ("set_rows", 3),
        ("scatter_add", 3),
        ("mul_mat", 2),
        ("rms_norm", 1),
        ("rope", 2),
        ("soft_max", 1),
        ("soft_max", 2),
        ("sum_rows", 1),
        ("max_rows", 1),
        ("argmax", 1),
        ("argsort", 1),
        ("top_k", 1),
        ("cumsum", 1),
        ("random_uniform", 1),
    ] {
        arity.push((op.into(), k));
    }
    let have = suite_signatures();
    let mut accepted = 0;
    let mut missing = vec![];
    for (op, k) in arity {
        for t in tuples(k) {
            if let Ok(s) = try_build(&op, &t) {
                accepted += 1;
                if !have.contains(&s) {
                    missing.push(s);
                }
            }
        }
    }
    // The builder accepts well over a hundred combinations; all must be exercised.
    assert!(accepted > 120, "only {accepted} accepted combinations: is the enumeration broken?");
    assert!(missing.is_empty(), "{} accepted dtype combinations have no case: {missing:?}", missing.len());
}
