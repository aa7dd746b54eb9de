//! Composition: chains of two and three truncating stages (top-k, top-p, min-p) in every order on
//! a 10,000-token vocabulary, with the surviving set checked exactly against an independent
//! reference of llama.cpp's semantics (top-p in llama.cpp's own `f32` arithmetic, whose rounding
//! decides at boundaries), on both candidate representations.

mod common;
use common::*;

#[derive(Clone, Copy, Debug)]
enum Stage {
    K(i32),
    P(f32, usize),
    M(f32, usize),
}

impl Stage {
    fn spec(self) -> String {
        match self {
            Stage::K(k) => format!("top_k(k={k})"),
            Stage::P(p, mk) => format!("top_p(p={p},min_keep={mk})"),
            Stage::M(p, mk) => format!("min_p(p={p},min_keep={mk})"),
        }
    }
    fn reference(self, v: Vec<R>) -> Vec<R> {
        match self {
            Stage::K(k) => ref_top_k(v, k),
            Stage::P(p, mk) => ref_top_p(v, p, mk),
            Stage::M(p, mk) => ref_min_p(v, p, mk),
        }
    }
}

fn permutations(items: &[Stage], len: usize) -> Vec<Vec<Stage>> {
    if len == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let s = rest.remove(i);
        for mut tail in permutations(&rest, len - 1) {
            tail.insert(0, s);
            out.push(tail);
        }
    }
    out
}

fn check(stages: &[Stage], logits: &[f32]) -> usize {
    let spec = stages.iter().map(|s| s.spec()).collect::<Vec<_>>().join(";");
    let mut want = ref_all(logits);
    for s in stages {
        want = s.reference(want);
    }
    let want = ref_ids(&want);
    let view = run_view(&spec, logits);
    let list = run_list(&spec, logits);
    assert_eq!(id_set(&view), want, "vocabulary view, `{spec}`");
    assert_eq!(id_set(&list), want, "explicit array, `{spec}`");
    let total: f32 = view.candidates.iter().map(|t| t.p).sum();
    assert!((total - 1.0).abs() < 1e-4, "output not normalised: {total}");
    assert!(view.candidates.windows(2).all(|w| w[0].p >= w[1].p), "output not sorted by p");
    want.len()
}

#[test]
fn pairs_and_triples_in_every_order() {
    let n = 10_000;
    let settings: &[[Stage; 3]] = &[
        [Stage::K(40), Stage::P(0.95, 0), Stage::M(0.05, 0)],
        [Stage::K(500), Stage::P(0.5, 0), Stage::M(0.2, 0)],
        [Stage::K(3000), Stage::P(0.99, 0), Stage::M(0.001, 0)],
        [Stage::K(1), Stage::P(0.0, 0), Stage::M(1.0, 0)],
        [Stage::K(n as i32), Stage::P(0.9, 50), Stage::M(0.5, 20)],
        [Stage::K(0), Stage::P(1.0, 0), Stage::M(0.0, 0)],
    ];
    let mut sizes = Vec::new();
    for (seed, scale) in [(1u64, 1.0f32), (2, 3.0), (3, 6.0)] {
        let logits = gaussian_logits(n, seed, scale);
        for set in settings {
            for len in [2, 3] {
                for order in permutations(set, len) {
                    sizes.push(check(&order, &logits));
                }
            }
        }
    }
    // the cases cover small and large surviving sets
    assert!(sizes.contains(&1) && sizes.iter().any(|&s| s > 1000), "{sizes:?}");
}

#[test]
fn single_stages_on_peaked_and_flat_rows() {
    // top-p on a flat row needs thousands of tokens: exercises the widening of the gathered set
    for scale in [0.01f32, 0.5, 10.0] {
        let logits = gaussian_logits(10_000, 7, scale);
        for s in [Stage::P(0.95, 0), Stage::P(0.3, 0), Stage::M(0.9, 0), Stage::M(0.05, 300), Stage::K(2500)] {
            check(&[s], &logits);
        }
    }
}

#[test]
fn top_p_on_long_rows_decides_as_llama_cpp_f32_arithmetic() {
    // Rows past the short-row limit take the fast f64 path unless the call is close; every
    // decision must still be llama.cpp's. Many p values put the boundary at many places in the
    // long tail, where neighbouring cumulative sums differ by little.
    let n = 20_000;
    for (seed, scale) in [(11u64, 0.3f32), (12, 2.0), (13, 5.0)] {
        let logits = gaussian_logits(n, seed, scale);
        for i in 0..40 {
            let p = 0.05 + 0.0237 * i as f32;
            check(&[Stage::P(p, 0)], &logits);
        }
    }
}
