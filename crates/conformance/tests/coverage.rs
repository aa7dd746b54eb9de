//! The suite covers every dtype combination the graph builder accepts: for each op, every tuple of
//! source dtypes (and result dtype, where the caller picks it) is offered to the builder, and each one
//! it accepts must appear in some case of the suite. Every dtype is offered, the quantized ones
//! included (leaves of ne[0] = 4 cannot be quantized, so only the ops whose shapes here have whole
//! blocks can accept them: `get_rows` and `mul_mat`, the only ones the builder lets read them).

use conformance::{cases, ops};
use graph::{DType, Graph, GraphError, NodeId, Op};
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
/// One arm per `Op` variant, no wildcard: a new variant does not compile until it has a builder here.
fn try_build(op: &Op, d: &[DType]) -> Result<Sig, GraphError> {
    let mut g = Graph::new();
    let x = |g: &mut Graph, i: usize, shape: &[usize]| g.input(&format!("s{i}"), d[i], shape);
    let id = match *op {
        Op::Input | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => {
            unreachable!("leaves and views take no dtypes (ops::dtype_arities)")
        }
        Op::Cont => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.cont(a)?
        }
        Op::Cast => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.cast(a, d[1])?
        }
        Op::Unary(u) => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.unary(u, a)?
        }
        Op::Binary(b) => {
            let (a, c) = (x(&mut g, 0, &[4, 2])?, x(&mut g, 1, &[4, 1])?);
            g.binary(b, a, c)?
        }
        Op::Scale { scale, bias } => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.scale_bias(a, scale, bias)?
        }
        Op::Clamp { min, max } => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.clamp(a, min, max)?
        }
        Op::Compare(c) => {
            let (a, b) = (x(&mut g, 0, &[4, 2])?, x(&mut g, 1, &[4, 1])?);
            g.compare(c, a, b)?
        }
        Op::Where => {
            let (m, a, b) = (x(&mut g, 0, &[4, 2])?, x(&mut g, 1, &[4, 2])?, x(&mut g, 2, &[4, 2])?);
            g.where_(m, a, b)?
        }
        Op::Fill { value } => g.fill(d[0], &[4, 2], value)?,
        Op::Arange { start, step } => g.arange(d[0], &[4, 2], start, step)?,
        Op::GetRows => {
            // ne[0] = 32: one block of a quantized table
            let (a, i) = (x(&mut g, 0, &[32, 3])?, x(&mut g, 1, &[2])?);
            g.get_rows(a, i)?
        }
        Op::SetRows => {
            let (a, v, i) = (x(&mut g, 0, &[4, 3])?, x(&mut g, 1, &[4, 2])?, x(&mut g, 2, &[2])?);
            g.set_rows(a, v, i)?
        }
        Op::ScatterAdd => {
            let (a, i, v) = (x(&mut g, 0, &[4, 3])?, x(&mut g, 1, &[2, 3])?, x(&mut g, 2, &[2, 3])?);
            g.scatter_add(a, i, v)?
        }
        Op::MulMat => {
            let (a, b) = (x(&mut g, 0, &[32, 3])?, x(&mut g, 1, &[32, 2])?);
            g.mul_mat(a, b)?
        }
        Op::RmsNorm { eps } => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.rms_norm(a, eps)?
        }
        Op::Rope(rp) => {
            let (a, p) = (x(&mut g, 0, &[4, 2, 3])?, x(&mut g, 1, &[3])?);
            // the optional third source: frequency factors, one per rotated pair
            let ff = if d.len() == 3 { Some(x(&mut g, 2, &[2])?) } else { None };
            g.rope_ext(a, p, ff, rp)?
        }
        Op::SoftMax { scale } => {
            let a = x(&mut g, 0, &[4, 2])?;
            let m = if d.len() > 1 { Some(x(&mut g, 1, &[4, 2])?) } else { None };
            g.soft_max(a, m, scale)?
        }
        Op::SumRows => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.sum_rows(a)?
        }
        Op::TopPMask => {
            let (a, p) = (x(&mut g, 0, &[4, 2])?, x(&mut g, 1, &[3, 2])?);
            g.top_p_mask(a, p)?
        }
        Op::Penalize => {
            let (a, c, p) = (x(&mut g, 0, &[4, 2])?, x(&mut g, 1, &[4, 2])?, x(&mut g, 2, &[3, 2])?);
            g.penalize(a, c, p)?
        }
        Op::TokenMask { .. } => {
            let (a, b) = (x(&mut g, 0, &[40, 2])?, x(&mut g, 1, &[2, 2])?);
            let ids = if d.len() > 2 { Some(x(&mut g, 2, &[40, 2])?) } else { None };
            g.token_mask(a, b, ids)?
        }
        Op::ListFilter(stages) => {
            let (a, p) = (x(&mut g, 0, &[4, 2])?, x(&mut g, 1, &[stages.param_rows(), 2])?);
            g.list_filter(a, p, stages)?
        }
        Op::MaxRows => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.max_rows(a)?
        }
        Op::Argmax => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.argmax(a)?
        }
        Op::Argsort { order } => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.argsort(a, order)?
        }
        Op::TopK { k, .. } => {
            let a = x(&mut g, 0, &[4, 2])?;
            if d.len() > 1 {
                let b = x(&mut g, 1, &[1, 2])?;
                g.top_k_masked(a, b, k as usize)?
            } else {
                g.top_k(a, k as usize)?
            }
        }
        Op::Cumsum => {
            let a = x(&mut g, 0, &[4, 2])?;
            g.cumsum(a)?
        }
        Op::RandomUniform { stream } => {
            let k = x(&mut g, 0, &[4, 2])?;
            g.random_uniform(k, 3, stream)?
        }
        Op::Categorical { stream, ids } => {
            let l = x(&mut g, 0, &[5, 2])?;
            let k = x(&mut g, 1, &[4, 2])?;
            let (p, i) = match (d.len() > 2, ids) {
                (false, _) => (None, None),
                (true, false) => (Some(x(&mut g, 2, &[2, 2])?), None),
                (true, true) => (None, Some(x(&mut g, 2, &[5, 2])?)),
            };
            g.categorical(l, k, p, i, stream)?
        }
        Op::SpecVerify { stream, ids } => {
            let l = x(&mut g, 0, &[5, 2])?;
            let k = x(&mut g, 1, &[5, 2])?;
            let aux = match (d.len() > 2, ids) {
                (false, _) => graph::SpecAux::None,
                (true, false) => graph::SpecAux::Params(x(&mut g, 2, &[2, 2])?),
                (true, true) => graph::SpecAux::Ids(x(&mut g, 2, &[5, 2])?),
            };
            g.spec_verify(l, k, aux, stream)?
        }
        Op::SpecVerifySampled { stream, ids } => {
            let l = x(&mut g, 0, &[5, 2])?;
            let k = x(&mut g, 1, &[5, 2])?;
            let qi = x(&mut g, 2, &[3, 2])?;
            let qp = x(&mut g, 3, &[3, 2])?;
            let aux = match (d.len() > 4, ids) {
                (false, _) => graph::SpecAux::None,
                (true, false) => graph::SpecAux::Params(x(&mut g, 4, &[2, 2])?),
                (true, true) => graph::SpecAux::Ids(x(&mut g, 4, &[5, 2])?),
            };
            g.spec_verify_sampled(l, k, qi, qp, aux, stream)?
        }
        Op::TopKTopPSample(a) => {
            let l = x(&mut g, 0, &[5, 2])?;
            let k = x(&mut g, 1, &[1, 2])?;
            let p = x(&mut g, 2, &[2, 2])?;
            g.top_k_top_p_sample(l, k, p, None, a)?
        }
        Op::RandomSample { index, f64_rows } => {
            let l = x(&mut g, 0, &[6, 2])?;
            let p = x(&mut g, 1, &[3, 2])?;
            let k = x(&mut g, 2, &[1, 2])?;
            g.random_sample(l, p, k, index, f64_rows)?
        }
    };
    Ok(sig(&g, id))
}

fn tuples(k: usize) -> Vec<Vec<DType>> {
    let mut out = vec![vec![]];
    for _ in 0..k {
        out = out.into_iter().flat_map(|t| DType::EVERY.map(|d| [t.clone(), vec![d]].concat())).collect();
    }
    out
}

#[test]
fn every_accepted_dtype_combination_has_a_case() {
    let arity: Vec<(Op, usize)> =
        ops::expanded().into_iter().flat_map(|op| ops::dtype_arities(&op).iter().map(move |&k| (op, k))).collect();
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

/// Every case's graph survives the fixture format: `fixture::write` then `fixture::parse` gives the
/// same nodes (op and parameters, sources, dtype, layout, storage, flags), so the fixture parser
/// knows every op the suite covers (and `every_op_is_covered` makes that every op).
#[test]
fn every_case_graph_round_trips_through_the_fixture_format() {
    let mut ops = BTreeSet::new();
    for c in cases::all() {
        let g = c.build().unwrap().graph;
        let text = graph::fixture::write(&g);
        let back = graph::fixture::parse(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", c.name));
        assert_eq!(back.len(), g.len(), "{}:\n{text}", c.name);
        for ((id, a), (_, b)) in g.nodes().zip(back.nodes()) {
            let same = a.op == b.op
                && a.srcs == b.srcs
                && a.dtype == b.dtype
                && a.layout == b.layout
                && a.storage == b.storage
                && a.flags == b.flags;
            assert!(same, "{}: node {id}\n{a:?}\nread back as\n{b:?}\n{text}", c.name);
            ops.insert(a.op.name());
        }
        assert_eq!(back.topology_hash(), g.topology_hash(), "{}", c.name);
    }
    for op in ops::names() {
        assert!(ops.contains(op), "no case graph holds {op}");
    }
}
