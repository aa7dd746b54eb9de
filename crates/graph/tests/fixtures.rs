//! Snapshots of the text dump of every graph fixture, DOT well-formedness, and fixture-format errors
//! that point at their line.

use graph::fixture::parse;
use std::path::{Path, PathBuf};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/graphs")
}

fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures/graphs exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "graph"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_fixture_text_dump_is_snapshotted() {
    let all = fixtures();
    assert!(all.len() >= 3, "expected at least the mlp, attention and sampling-tail fixtures");
    for path in all {
        let g = parse(&std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        insta::assert_snapshot!(format!("dump_{name}"), graph::dump::to_text(&g));
    }
}

#[test]
fn dot_dump_is_well_formed() {
    for path in fixtures() {
        let g = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let dot = graph::dump::to_dot(&g);
        assert!(dot.starts_with("digraph G {") && dot.ends_with("}\n"));
        let edges = dot.lines().filter(|l| l.contains(" -> ")).count();
        let expected: usize = g.nodes().map(|(_, n)| n.srcs.len()).sum();
        assert_eq!(edges, expected, "{}", path.display());
        assert_eq!(dot.matches('"').count() % 2, 0, "balanced quotes in {}", path.display());
        // Every node appears once as a declaration.
        for (id, _) in g.nodes() {
            assert_eq!(dot.matches(&format!("  n{} [label=", id.0)).count(), 1);
        }
    }
}

#[test]
fn sampling_tail_fixture_has_the_expected_structure() {
    let g = parse(&std::fs::read_to_string(fixtures_dir().join("sampling_tail.graph")).unwrap()).unwrap();
    let token = g.find("token").unwrap();
    assert_eq!(g.node(token).ne(), [4, 1, 1, 1]);
    assert_eq!(g.node(token).dtype, graph::DType::I32);
    assert!(g.node(token).flags.output);
    let ops: Vec<&str> = g.nodes().map(|(_, n)| n.op.name()).collect();
    for op in ["mul", "top_k", "get_rows", "soft_max", "cumsum", "random_uniform", "gt", "argmax"] {
        assert!(ops.contains(&op), "{op} missing");
    }
}

fn err(text: &str) -> String {
    parse(text).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn malformed_fixtures_point_at_their_line() {
    let good = "input x f32 [4, 2]\n";
    let cases: &[(&str, &str)] = &[
        ("\n# comment\ninput x f99 [4]\n", "line 3: unknown dtype `f99`"),
        ("input x f32 4, 2\n", "line 1: expected a list like [4096, 8], got `4, 2`"),
        ("input x f32 [4, -2]\n", "line 1: `-2` in `[4, -2]` is not a non-negative integer"),
        ("input x\n", "line 1: expected `input NAME DTYPE [SHAPE]`"),
        ("input x f32 [4]\ninput x f32 [4]\n", "line 2: `x` is defined twice"),
        ("y = exp(nope)\n", "line 1: unknown tensor `nope`"),
        ("input x f32 [4, 2]\ny = frobnicate(x)\n", "line 2: unknown op `frobnicate`"),
        ("input x f32 [4, 2]\ny = top_k(x)\n", "line 2: top_k needs parameter `k=`"),
        ("input x f32 [4, 2]\ny = top_k(x, k=9)\n", "line 2: top_k (node #1 'y'): k = 9 must be in 1..=4"),
        ("input x f32 [4, 2]\ny = exp(x, x)\n", "line 2: exp takes 1 sources, got 2"),
        ("input x f32 [4, 2]\ny = scale(x, scale=2, gain=3)\n", "line 2: scale has no parameter `gain`"),
        ("input x f32 [4, 2]\ny = scale(x, scale=two)\n", "line 2: `two` is not a number"),
        ("input x f32 [4, 2]\ny = exp(x\n", "line 2: missing closing `)`"),
        ("input x f32 [4, 2]\nexp(x)\n", "line 2: expected `input`, `param`, `state`, `output` or `NAME = OP(...)`"),
        ("input x f32 [4, 2]\noutput y\n", "line 2: unknown tensor `y`"),
        ("input x f32 [4, 2]\n9y = exp(x)\n", "line 2: `9y` is not a valid name"),
        (
            "input x f32 [4, 2]\ny = argsort(x, order=sideways)\n",
            "line 2: argsort: order `sideways` is not asc or desc",
        ),
        (
            "input x f32 [4, 2]\ny = rope(x, x, n_dims=2, mode=weird)\n",
            "line 2: rope: mode `weird` is not normal or neox",
        ),
        ("input x f32 [4, 2]\ny = permute(x, axes=[0, 1])\n", "line 2: permute: axes needs 4 entries, got 2"),
        ("input x f32 [4, 2]\ny = scale(scale=2, x)\n", "line 2: scale: source `x` after a key=value parameter"),
        ("input x f32 [4, 2]\ny = add(x, x)\nz = add(x, q)\n", "line 3: unknown tensor `q`"),
    ];
    for (text, want) in cases {
        let got = err(text);
        assert!(got.starts_with(want), "for {text:?}\n got: {got}\nwant: {want}");
    }
    // The offending line is quoted back.
    assert!(err("input x f32 [4, 2]\ny = top_k(x)\n").ends_with("| y = top_k(x)"));
    assert!(parse(good).is_ok());
}

#[test]
fn fixture_params_round_trip_through_the_dump() {
    let g = parse(
        "input x f32 [8, 2]\n\
         a = scale(x, scale=0.5, bias=-inf)\n\
         b = clamp(a, min=-1, max=1)\n\
         c = fill(dtype=i32, shape=[3], value=-1)\n\
         d = arange(dtype=f32, shape=[8], start=1, step=0.25)\n\
         e = argsort(b, order=desc)\n\
         input k i32 [4, 2]\n\
         input ids i32 [8, 2]\n\
         f = categorical(x, k, ids, stream=3, ids=true)\n\
         g = categorical(x, k, stream=2)\n\
         output e\n\
         output f\n\
         output g\n",
    )
    .unwrap();
    let text = graph::dump::to_text(&g);
    for want in [
        "categorical{stream=3, ids=true}",
        "categorical{stream=2}",
        "scale{scale=0.5, bias=-inf}",
        "clamp{min=-1, max=1}",
        "fill{value=-1}",
        "arange{start=1, step=0.25}",
        "argsort{order=desc}",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
}
