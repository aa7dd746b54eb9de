//! Known-answer tests for every sampler: small inputs whose expected survivors and probabilities
//! are derived by hand in the comments, for each parameter regime (disabled, boundary, typical,
//! invalid). Most cases run on both candidate representations (the vocabulary view with the fast
//! paths, and llama.cpp's explicit array) and require the two to agree.

mod common;
use common::*;
use sampling::samplers::*;
use sampling::{Candidates, Chain, Sampler, SamplingError, TokenData};

/// p = [1/2, 1/4, 1/8, 1/8] for ids 0..3: logits ln p, so every softmax below is exact.
fn quarter() -> Vec<f32> {
    logits_of(&[0.5, 0.25, 0.125, 0.125])
}

fn spec_err(spec: &str) -> SamplingError {
    Chain::parse(spec).unwrap_err()
}

// ------------------------------------------------------------------ greedy

#[test]
fn greedy_first_maximum() {
    // logits [1, 3, 2, 3]: the max 3 occurs at 1 and 3; llama.cpp keeps the first (strict >).
    let o = run_both("greedy", &[1.0, 3.0, 2.0, 3.0]);
    assert_eq!(o.selected, Some(1));
    // Greedy does not truncate: all four survive with their softmax.
    assert_eq!(o.candidates.len(), 4);
    // after a pending temperature the choice is unchanged
    assert_eq!(run_both("temp(t=0.5);greedy", &[1.0, 3.0, 2.0, 3.0]).selected, Some(1));
    // single token
    assert_eq!(run_both("greedy", &[-5.0]).selected, Some(0));
}

// ------------------------------------------------------------------ top_k

#[test]
fn top_k_regimes() {
    let l = quarter();
    // disabled: k <= 0 keeps everything (llama.cpp).
    assert_eq!(id_set(&run_both("top_k(k=0)", &l)), vec![0, 1, 2, 3]);
    assert_eq!(id_set(&run_both("top_k(k=-3)", &l)), vec![0, 1, 2, 3]);
    // k = 1: only the max, p = 1.
    assert_probs(&run_both("top_k(k=1)", &l), &[(0, 1.0)]);
    // k = 2: {0, 1}, renormalised 0.5/0.75 = 2/3 and 0.25/0.75 = 1/3.
    assert_probs(&run_both("top_k(k=2)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    // k = 3: the tie at 1/8 between ids 2 and 3 goes to the lower id: {0, 1, 2}, p = 4/7, 2/7, 1/7.
    assert_probs(&run_both("top_k(k=3)", &l), &[(0, 4.0 / 7.0), (1, 2.0 / 7.0), (2, 1.0 / 7.0)]);
    // k = n and k > n: everything, the original probabilities.
    for k in [4, 5, 1000] {
        assert_probs(&run_both(&format!("top_k(k={k})"), &l), &[(0, 0.5), (1, 0.25), (2, 0.125), (3, 0.125)]);
    }
    // invalid: not an integer
    assert!(matches!(spec_err("top_k(k=1.5)"), SamplingError::Spec { stage_index: 0, .. }));
}

// ------------------------------------------------------------------ top_p

#[test]
fn top_p_regimes() {
    let l = quarter();
    // disabled: p = 1 keeps all.
    assert_eq!(id_set(&run_both("top_p(p=1)", &l)), vec![0, 1, 2, 3]);
    // p = 0: the first token already has cum 0.5 >= 0: keep 1.
    assert_probs(&run_both("top_p(p=0)", &l), &[(0, 1.0)]);
    // p = 0.6: cum 0.5 < 0.6, 0.75 >= 0.6: keep {0, 1} -> 2/3, 1/3.
    assert_probs(&run_both("top_p(p=0.6)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    // p = 0.8: cum 0.875 >= 0.8 at the third: {0, 1, 2} -> 4/7, 2/7, 1/7.
    assert_probs(&run_both("top_p(p=0.8)", &l), &[(0, 4.0 / 7.0), (1, 2.0 / 7.0), (2, 1.0 / 7.0)]);
    // p = 0.9: needs all four.
    assert_eq!(id_set(&run_both("top_p(p=0.9)", &l)), vec![0, 1, 2, 3]);
    // min_keep = 3 with p = 0.6: the prefix must also have >= 3 tokens: {0, 1, 2}.
    assert_eq!(id_set(&run_both("top_p(p=0.6,min_keep=3)", &l)), vec![0, 1, 2]);
    // min_keep larger than n: everything.
    assert_eq!(id_set(&run_both("top_p(p=0.1,min_keep=10)", &l)), vec![0, 1, 2, 3]);
    // p > 1 and +inf: disabled (llama.cpp: `p >= 1`).
    for p in ["1.5", "inf"] {
        assert_probs(&run_both(&format!("top_p(p={p})"), &l), &[(0, 0.5), (1, 0.25), (2, 0.125), (3, 0.125)]);
    }
    // p < 0 and -inf: every running sum is >= 0 > p, so only min_keep decides: one token, or the
    // top min_keep (min_keep 0 and 1 alike).
    for p in ["-0.1", "-1", "-inf"] {
        for mk in [0, 1] {
            assert_probs(&run_both(&format!("top_p(p={p},min_keep={mk})"), &l), &[(0, 1.0)]);
        }
        assert_eq!(id_set(&run_both(&format!("top_p(p={p},min_keep=3)"), &l)), vec![0, 1, 2]);
        assert_eq!(id_set(&run_both(&format!("top_p(p={p},min_keep=9)"), &l)), vec![0, 1, 2, 3]);
    }
    // NaN: no defined behaviour in llama.cpp (`cum_sum >= NaN` is always false).
    let e = spec_err("top_p(p=NaN)");
    assert!(e.to_string().contains("`p`") && e.to_string().contains("NaN"), "{e}");
}

#[test]
fn top_p_keeps_pre_truncation_probabilities() {
    // llama.cpp's top-p leaves p as the softmax over the set before truncation.
    let l = quarter();
    let mut c = Candidates::from_row(&l).unwrap();
    TopP::new(0.6, 0).unwrap().apply(&mut c).unwrap();
    let list = c.list("test").unwrap();
    assert_eq!(list.len(), 2);
    assert!((list[0].p - 0.5).abs() < 1e-6 && (list[1].p - 0.25).abs() < 1e-6);
    // On the vocabulary the kept tokens stay in vocabulary order, unsorted (as min-p leaves them),
    // so a later draw walks them in token-id order, as the backend's draw from the masked row does.
    let l = [0.25f32.ln(), 0.125f32.ln(), 0.5f32.ln(), 0.125f32.ln()];
    let mut c = Candidates::from_row(&l).unwrap();
    TopP::new(0.6, 0).unwrap().apply(&mut c).unwrap();
    assert!(!c.is_sorted());
    let list = c.list("test").unwrap();
    assert_eq!(list.iter().map(|t| t.id).collect::<Vec<_>>(), vec![0, 2]);
    assert!((list[0].p - 0.25).abs() < 1e-6 && (list[1].p - 0.5).abs() < 1e-6);
    // On a list (after top-k) the result is sorted, as llama.cpp's.
    let mut c = Candidates::from_row(&l).unwrap();
    TopK::new(3).apply(&mut c).unwrap();
    TopP::new(0.6, 0).unwrap().apply(&mut c).unwrap();
    assert!(c.is_sorted());
    assert_eq!(c.list("test").unwrap().iter().map(|t| t.id).collect::<Vec<_>>(), vec![2, 0]);
}

// ------------------------------------------------------------------ top_p approximated by top-k

#[test]
fn top_p_approx_k_regimes() {
    // quarter(): p = [1/2, 1/4, 1/8, 1/8]. The nucleus is cut inside the N largest, each with its
    // probability over the whole row; where the N carry less than p, all N are kept.
    let l = quarter();
    // approx_k = 0: exact top-p.
    assert_probs(&run_both("top_p(p=0.6,approx_k=0)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    // The nucleus fits in the N largest: exact. p = 0.6 -> {0, 1}; p = 0.8 -> {0, 1, 2}.
    assert_probs(&run_both("top_p(p=0.6,approx_k=2)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    assert_probs(&run_both("top_p(p=0.8,approx_k=3)", &l), &[(0, 4.0 / 7.0), (1, 2.0 / 7.0), (2, 1.0 / 7.0)]);
    // It does not: the N are kept, renormalised over them. p = 0.8, N = 2: the two largest carry
    // 0.75 < 0.8 -> {0, 1} (exact top-p keeps {0, 1, 2}).
    assert_probs(&run_both("top_p(p=0.8,approx_k=2)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    // p = 0.9, N = 3: the tie at 1/8 goes to the lower id: {0, 1, 2} (exact keeps all four).
    assert_probs(&run_both("top_p(p=0.9,approx_k=3)", &l), &[(0, 4.0 / 7.0), (1, 2.0 / 7.0), (2, 1.0 / 7.0)]);
    assert_probs(&run_both("top_p(p=0.9,approx_k=1)", &l), &[(0, 1.0)]);
    // The mass is the whole row's: p = 0.55, N = 2: cum 0.5 < 0.55, 0.75 >= 0.55 -> {0, 1}
    // (normalised over the two alone, 2/3 >= 0.55 would keep only {0}).
    assert_probs(&run_both("top_p(p=0.55,approx_k=2)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    assert_probs(&run_both("top_p(p=0.55,approx_k=3)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    // approx_k >= n_vocab: exact top-p (all four at p = 0.9).
    for n in [4, 5, 1000] {
        assert_eq!(id_set(&run_both(&format!("top_p(p=0.9,approx_k={n})"), &l)), vec![0, 1, 2, 3]);
    }
    // min_keep counts inside the N: min_keep = 3 with N = 2 keeps the 2; with N = 3, {0, 1, 2}.
    assert_eq!(id_set(&run_both("top_p(p=0.1,min_keep=3,approx_k=2)", &l)), vec![0, 1]);
    assert_eq!(id_set(&run_both("top_p(p=0.1,min_keep=3,approx_k=3)", &l)), vec![0, 1, 2]);
    // p = 0 (and below): the top max(min_keep, 1); p >= 1: disabled, N or not.
    assert_probs(&run_both("top_p(p=0,approx_k=3)", &l), &[(0, 1.0)]);
    assert_probs(&run_both("top_p(p=-1,approx_k=3)", &l), &[(0, 1.0)]);
    assert_eq!(id_set(&run_both("top_p(p=1,approx_k=2)", &l)), vec![0, 1, 2, 3]);
    // After a temperature: t = 0.5 squares the odds, p = [16, 4, 1, 1] / 22: N = 1 at p = 0.9
    // keeps {0}; N = 2 at p = 0.9: 20/22 = 0.909 >= 0.9 -> {0, 1} = 16/20, 4/20.
    assert_probs(&run_both("temp(t=0.5);top_p(p=0.9,approx_k=1)", &l), &[(0, 1.0)]);
    assert_probs(&run_both("temp(t=0.5);top_p(p=0.9,approx_k=2)", &l), &[(0, 0.8), (1, 0.2)]);
    // On a list (after top_k): the cut inside its first N, with the list's own softmax: top_k(3)
    // gives [4, 2, 1] / 7; p = 0.8: 6/7 >= 0.8 at the second -> {0, 1} whatever N >= 2; N = 1: {0}.
    assert_eq!(id_set(&run_both("top_k(k=3);top_p(p=0.8,approx_k=2)", &l)), vec![0, 1]);
    assert_eq!(id_set(&run_both("top_k(k=3);top_p(p=0.8,approx_k=9)", &l)), vec![0, 1]);
    assert_eq!(id_set(&run_both("top_k(k=3);top_p(p=0.95,approx_k=2)", &l)), vec![0, 1]);
    assert_eq!(id_set(&run_both("top_k(k=3);top_p(p=0.95,approx_k=1)", &l)), vec![0]);
    // After a cut on the vocabulary (min_p keeps {0, 1, 2, 3}; top_p(0.95) all four): the same.
    assert_probs(&run_both("top_p(p=0.95);top_p(p=0.55,approx_k=2)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    assert_probs(&run_both("min_p(p=0.2);top_p(p=0.8,approx_k=2)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
}

#[test]
fn top_p_approx_k_keeps_whole_row_probabilities_sorted() {
    // The kept tokens carry their probability in the whole row's softmax (as exact top-p keeps
    // the pre-truncation ones) and leave sorted by logit, as top-k's list (the backend's record is
    // a list of N), on the vocabulary view and after a cut alike.
    let l = [0.25f32.ln(), 0.125f32.ln(), 0.5f32.ln(), 0.125f32.ln()];
    for pre in [None, Some("top_p(p=0.99)")] {
        let mut c = Candidates::from_row(&l).unwrap();
        if let Some(spec) = pre {
            Chain::parse(spec).unwrap().apply(&mut c).unwrap();
        }
        TopP::new(0.55, 0).unwrap().with_approx_k(2).apply(&mut c).unwrap();
        assert!(c.is_sorted());
        let list = c.list("test").unwrap();
        assert_eq!(list.iter().map(|t| t.id).collect::<Vec<_>>(), vec![2, 0], "{pre:?}");
        assert!((list[0].p - 0.5).abs() < 1e-6 && (list[1].p - 0.25).abs() < 1e-6, "{pre:?}: {list:?}");
    }
    // A later draw is from the kept tokens renormalised: with p = 0.8 and N = 2, {2, 0} at 2/3
    // and 1/3, for every uniform (dist's draws over many seeds hit both, in proportion).
    let mut hits = [0usize; 4];
    for seed in 0..3000 {
        let t = Chain::parse(&format!("top_p(p=0.8,approx_k=2);dist(seed={seed})")).unwrap().sample(&l).unwrap();
        hits[t as usize] += 1;
    }
    assert_eq!((hits[1], hits[3]), (0, 0), "{hits:?}");
    let share = hits[2] as f64 / 3000.0;
    assert!((share - 2.0 / 3.0).abs() < 0.03, "{hits:?}");
}

#[test]
fn top_p_approx_k_is_the_exact_nucleus_cut_to_its_first_n_on_long_rows() {
    // 10,000 and 20,000 tokens (the fast path with its replay): the kept set is the first
    // min(kept, N) of the exact nucleus in value order, ties by lower id.
    for (n, scale) in [(10_000usize, 2.0f32), (10_000, 6.0), (20_000, 1.0)] {
        let l = gaussian_logits(n, 9 + n as u64, scale);
        for p in [0.3f32, 0.9, 0.95] {
            let mut exact = run_view(&format!("top_p(p={p})"), &l).candidates;
            exact.sort_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
            for nn in [1usize, 16, 64, 256, 4096] {
                let got = run_both(&format!("top_p(p={p},approx_k={nn})"), &l);
                let mut want: Vec<u32> = exact.iter().take(nn).map(|t| t.id).collect();
                want.sort_unstable();
                assert_eq!(id_set(&got), want, "n {n} scale {scale} p {p} N {nn}");
            }
        }
    }
}

// ------------------------------------------------------------------ min_p

#[test]
fn min_p_regimes() {
    let l = quarter();
    // disabled: p = 0.
    assert_eq!(id_set(&run_both("min_p(p=0)", &l)), vec![0, 1, 2, 3]);
    // p = 0.3: keep p_i >= 0.3 * 0.5 = 0.15: {0 (0.5), 1 (0.25)} -> 2/3, 1/3.
    assert_probs(&run_both("min_p(p=0.3)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    // p = 0.2: threshold 0.1 <= 0.125: all four.
    assert_eq!(id_set(&run_both("min_p(p=0.2)", &l)), vec![0, 1, 2, 3]);
    // p = 1: only tokens tied with the max.
    assert_probs(&run_both("min_p(p=1)", &l), &[(0, 1.0)]);
    assert_eq!(id_set(&run_both("min_p(p=1)", &[2.0, 1.0, 2.0])), vec![0, 2]);
    // min_keep = 3 with p = 0.3: only 2 pass, so the top 3 are kept (ties: lower id): {0, 1, 2}.
    assert_eq!(id_set(&run_both("min_p(p=0.3,min_keep=3)", &l)), vec![0, 1, 2]);
    // unsorted result keeps vocabulary order, like llama.cpp's unsorted path
    let mut c = Candidates::from_row(&[1.0f32, 5.0, 4.9, 0.0]).unwrap();
    MinP::new(0.5, 0).unwrap().apply(&mut c).unwrap();
    assert!(!c.is_sorted());
    assert_eq!(c.list("t").unwrap().iter().map(|t| t.id).collect::<Vec<_>>(), vec![1, 2]);
    // p < 0 and -inf: disabled (llama.cpp: `p <= 0`).
    for p in ["-1", "-inf"] {
        assert_eq!(id_set(&run_both(&format!("min_p(p={p})"), &l)), vec![0, 1, 2, 3]);
    }
    // p > 1 and +inf: the threshold max + ln p lies above the max; llama.cpp's unsorted path keeps
    // nothing, its sorted fallback keeps the first token (or the top min_keep), sorted.
    for p in ["1.01", "2", "inf"] {
        assert_probs(&run_both(&format!("min_p(p={p})"), &l), &[(0, 1.0)]);
        assert_probs(&run_both(&format!("min_p(p={p},min_keep=1)"), &l), &[(0, 1.0)]);
        assert_probs(&run_both(&format!("min_p(p={p},min_keep=2)"), &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
        assert_eq!(id_set(&run_both(&format!("min_p(p={p},min_keep=9)"), &l)), vec![0, 1, 2, 3]);
        // ties at the max: the lower id
        assert_eq!(ids(&run_both(&format!("min_p(p={p})"), &[1.0, 3.0, 3.0])), vec![1]);
        // the sorted path (after top_k) gives the same
        assert_probs(&run_both(&format!("top_k(k=3);min_p(p={p})"), &l), &[(0, 1.0)]);
        assert_probs(&run_both(&format!("top_k(k=3);min_p(p={p},min_keep=2)"), &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    }
    // p just above 1: ln p = 1.19e-7 in f32. Against a max of 100 (f32 spacing 7.6e-6) the
    // threshold 100 + 1.19e-7 rounds to 100, so the ties of the max pass (llama.cpp computes the
    // threshold in f32 the same way); against a max of 0.5 (spacing 6e-8) it stays above: one.
    assert_eq!(id_set(&run_both("min_p(p=1.0000001)", &[100.0, 100.0, 50.0])), vec![0, 1]);
    assert_eq!(id_set(&run_both("min_p(p=1.0000001)", &[0.5, 0.5, 0.1])), vec![0]);
    // NaN: no defined behaviour (every `logit < NaN` is false).
    let e = spec_err("min_p(p=nan)");
    assert!(e.to_string().contains("min_p") && e.to_string().contains("`p`"), "{e}");
}

// ------------------------------------------------------------------ typical

#[test]
fn typical_regimes() {
    let l = quarter();
    // H = 0.5 ln2 + 0.25 * 2ln2 + 2 * 0.125 * 3ln2 = 1.75 ln2.
    // |-ln p - H|: id0 |ln2 - 1.75ln2| = 0.75ln2, id1 0.25ln2, id2 = id3 = 1.25ln2.
    // Typical order: 1, 0, 2, 3 with p 0.25, 0.5, 0.125, 0.125.
    // p = 0.5: cum 0.25 (not > 0.5), 0.75 > 0.5: keep {1, 0} -> 1/3, 2/3.
    assert_probs(&run_both("typical(p=0.5)", &l), &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    // p = 0.2: cum 0.25 > 0.2 at the first: {1} alone.
    assert_probs(&run_both("typical(p=0.2)", &l), &[(1, 1.0)]);
    // p = 0: same, one token.
    assert_probs(&run_both("typical(p=0)", &l), &[(1, 1.0)]);
    // min_keep = 3: {1, 0, 2} (2 before 3: equal scores keep the logit order, lower id first).
    assert_eq!(id_set(&run_both("typical(p=0.2,min_keep=3)", &l)), vec![0, 1, 2]);
    // disabled: p = 1, p > 1, +inf (llama.cpp: `p >= 1`).
    for p in ["1", "2", "inf"] {
        assert_eq!(id_set(&run_both(&format!("typical(p={p})"), &l)), vec![0, 1, 2, 3]);
    }
    // p < 0, -inf: the first token of the typical order already has cum 0.25 > p: {1}, or the
    // first min_keep of the order 1, 0, 2, 3.
    for p in ["-0.5", "-inf"] {
        assert_probs(&run_both(&format!("typical(p={p})"), &l), &[(1, 1.0)]);
        assert_eq!(id_set(&run_both(&format!("typical(p={p},min_keep=2)"), &l)), vec![0, 1]);
        assert_eq!(id_set(&run_both(&format!("typical(p={p},min_keep=9)"), &l)), vec![0, 1, 2, 3]);
    }
    assert!(spec_err("typical(p=nan)").to_string().contains("`p`"));
}

// ------------------------------------------------------------------ tail_free

/// llama.cpp's `test_tfs` (tests/test-sampling.cpp, release b2757): probabilities
/// [0.1, 0.15, 0.2, 0.25, 0.3] as logits `logf(p)`, `llama_sample_tail_free(.., z, 1)`, and the
/// probabilities left (llama.cpp's, not renormalised after the cut) within 1e-3.
#[test]
fn tail_free_llama_cpp_test_sampling_cases() {
    let probs = [0.1f32, 0.15, 0.2, 0.25, 0.3];
    let logits: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
    // Sorted p = [.3, .25, .2, .15, .1]: the first differences are all .05, so the second ones
    // are 0 (up to rounding): sum <= 1e-6, every value 1/3, running sums 1/3, 2/3, 1. With
    // min_keep = 1 the cut is at the first i >= 1 whose running sum exceeds z: z = .25 keeps 1,
    // z = .75 and z = .99 keep 2.
    for (z, want) in [(0.25f32, &[0.3f32][..]), (0.75, &[0.3, 0.25]), (0.99, &[0.3, 0.25])] {
        let list = logits.iter().enumerate().map(|(i, &l)| TokenData { id: i as u32, logit: l, p: 0.0 }).collect();
        let mut cur = Candidates::from_list(list, logits.len()).unwrap();
        TailFree::new(z, 1).unwrap().apply(&mut cur).unwrap();
        let got: Vec<f32> = cur.list("test").unwrap().iter().map(|t| t.p).collect();
        assert_eq!(got.len(), want.len(), "z = {z}: {got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-3, "z = {z}: {got:?} vs {want:?}");
        }
        // Through a SPEC on both representations: the same tokens (ids 4, 3), renormalised.
        let o = run_both(&format!("tail_free(z={z},min_keep=1)"), &logits);
        let kept: Vec<u32> = (0..want.len() as u32).map(|i| 4 - i).collect();
        let mut kept_sorted = kept.clone();
        kept_sorted.sort_unstable();
        assert_eq!(id_set(&o), kept_sorted, "z = {z}");
    }
}

#[test]
fn tail_free_regimes() {
    // Weights [1, 1, 1, 1, 1/4, 1/4, 1/4] (exact ties): sorted p = a, a, a, a, b, b, b. First
    // differences 0, 0, 0, a - b, 0, 0; second differences 0, 0, -(a - b), a - b, 0, whose
    // absolute values normalise to exactly 0, 0, 1/2, 1/2, 0: running sums 0, 0, .5, 1, 1.
    // The cut keeps i tokens, i the first index >= min_keep whose running sum exceeds z.
    let l = logits_of(&[1.0, 1.0, 1.0, 1.0, 0.25, 0.25, 0.25]);
    let all = vec![0, 1, 2, 3, 4, 5, 6];
    // z = .3: i = 2 (.5 > .3): the first two (ties by lower id), renormalised.
    assert_probs(&run_both("tail_free(z=0.3)", &l), &[(0, 0.5), (1, 0.5)]);
    // z = .5: .5 > .5 is false (strict, llama.cpp's `cum_sum > z`): i = 3.
    assert_eq!(id_set(&run_both("tail_free(z=0.5)", &l)), vec![0, 1, 2]);
    // z = 0: the first nonzero value, at i = 2.
    assert_eq!(id_set(&run_both("tail_free(z=0)", &l)), vec![0, 1]);
    assert_eq!(id_set(&run_both("tail_free(z=-0)", &l)), vec![0, 1]);
    // z = .99: i = 3.
    assert_eq!(id_set(&run_both("tail_free(z=0.99)", &l)), vec![0, 1, 2]);
    // min_keep: the cut waits for i >= min_keep (3, 4); from n - 2 = 5 on the loop never cuts.
    assert_eq!(id_set(&run_both("tail_free(z=0.3,min_keep=3)", &l)), vec![0, 1, 2]);
    assert_eq!(id_set(&run_both("tail_free(z=0.3,min_keep=4)", &l)), vec![0, 1, 2, 3]);
    for mk in [5, 6, 100] {
        assert_eq!(id_set(&run_both(&format!("tail_free(z=0.3,min_keep={mk})"), &l)), all);
    }
    // A `-inf` entry counts as llama.cpp's array holds it (p = 0): sorted p = a x4, b x3, 0, so
    // |d2| = 0, 0, c, c, 0, b (c = a - b) -> running sums 0, 0, .43, .86, .86, 1: z = .9 cuts at
    // i = 5 (without the entry: at i = 3, as above).
    let mut with_inf = l.clone();
    with_inf.push(f32::NEG_INFINITY);
    assert_eq!(id_set(&run_both("tail_free(z=0.9)", &with_inf)), vec![0, 1, 2, 3, 4]);
    assert_eq!(id_set(&run_both("tail_free(z=0.3)", &with_inf)), vec![0, 1]);
    // Disabled: z >= 1, +inf too (llama.cpp: `z >= 1.0f`).
    for z in ["1", "1.5", "inf"] {
        assert_eq!(id_set(&run_both(&format!("tail_free(z={z})"), &l)), all);
    }
    // The default z = 1 (llama.cpp's common `tfs_z = 1.00f`): disabled.
    assert_eq!(id_set(&run_both("tail_free", &l)), all);

    // All equal: every difference 0, sum <= 1e-6, every value 1/(n - 2) = 1/4 (llama.cpp's
    // fallback): running sums .25, .5, .75, 1; z = .5 cuts at i = 2 (.5 > .5 is false).
    let flat = vec![0.7f32; 6];
    assert_eq!(id_set(&run_both("tail_free(z=0.5)", &flat)), vec![0, 1]);
    assert_eq!(id_set(&run_both("tail_free(z=0.2)", &flat)), vec![0]);

    // At most 2 candidates: disabled (llama.cpp's `size <= 2`).
    assert_eq!(id_set(&run_both("tail_free(z=0)", &[1.0, 3.0])), vec![0, 1]);
    assert_eq!(id_set(&run_both("tail_free(z=0)", &[1.0])), vec![0]);
    // 3 candidates: one second difference, normalised to 1 > z at i = 0. With min_keep = 1 the
    // loop ends first: all 3 kept. With min_keep = 0 llama.cpp would keep 0 (an empty array, which
    // its next stage asserts on): here the most likely one (docs/SAMPLING.md).
    assert_eq!(id_set(&run_both("tail_free(z=0.5,min_keep=1)", &[3.0, 2.0, 0.0])), vec![0, 1, 2]);
    assert_probs(&run_both("tail_free(z=0.5)", &[3.0, 2.0, 0.0]), &[(0, 1.0)]);
    // p = [1/2, 1/4, 1/8, 1/8]: |d2| = 1/8, 1/8 -> 1/2, 1/2; z = .4 exceeded at i = 0 (min_keep 0:
    // the most likely one) and at i = 1 (min_keep 1: keeps 1).
    assert_probs(&run_both("tail_free(z=0.4)", &quarter()), &[(0, 1.0)]);
    assert_probs(&run_both("tail_free(z=0.4,min_keep=1)", &quarter()), &[(0, 1.0)]);
    assert_eq!(id_set(&run_both("tail_free(z=0.4,min_keep=2)", &quarter())), vec![0, 1, 2, 3]);

    // A list after top_k stays sorted, with llama.cpp's probabilities (not renormalised).
    let mut chain = Chain::parse("top_k(k=7);tail_free(z=0.3)").unwrap();
    let mut cur = Candidates::from_row(&l).unwrap();
    chain.apply(&mut cur).unwrap();
    assert!(cur.is_sorted());
    let got: Vec<(u32, f32)> = cur.list("test").unwrap().iter().map(|t| (t.id, t.p)).collect();
    assert_eq!(got.iter().map(|t| t.0).collect::<Vec<_>>(), vec![0, 1]);
    assert!((got[0].1 - 1.0 / 4.75).abs() < 1e-6, "{got:?}");
    // On the vocabulary view the kept tokens come out in token-id order (the project's rule).
    let x = [0.0f32, 2.0, 1.0, 2.0, -1.0, 2.0, -3.0];
    let mut cur = Candidates::from_row(&x).unwrap();
    TailFree::new(0.9, 1).unwrap().apply(&mut cur).unwrap();
    let ids: Vec<u32> = cur.list("test").unwrap().iter().map(|t| t.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");

    assert!(spec_err("tail_free(z=nan)").to_string().contains("`z`"));
    assert!(spec_err("tail_free(z=-0.1)").to_string().contains("`z`"));
    assert!(spec_err("tail_free(q=1)").to_string().contains("unknown parameter"));
}

// ------------------------------------------------------------------ softmax

#[test]
fn softmax_stage() {
    let l = quarter();
    // Nothing removed, the probabilities of the logits.
    assert_probs(&run_both("softmax", &l), &[(0, 0.5), (1, 0.25), (2, 0.125), (3, 0.125)]);
    assert_eq!(run_both("softmax;greedy", &[1.0, 3.0, 2.0, 3.0]).selected, Some(1));
    // On a list: sorted by logit descending (ties by lower id), p filled (llama.cpp's
    // llama_sample_softmax).
    let list = [1.0f32, 3.0, 2.0, 3.0].iter().enumerate().map(|(i, &l)| TokenData { id: i as u32, logit: l, p: 0.0 });
    let mut cur = Candidates::from_list(list.collect(), 4).unwrap();
    Softmax::new().apply(&mut cur).unwrap();
    assert!(cur.is_sorted());
    let got: Vec<(u32, f32)> = cur.list("test").unwrap().iter().map(|t| (t.id, t.p)).collect();
    assert_eq!(got.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3, 2, 0]);
    let z = 2.0 * 3f64.exp() + 2f64.exp() + 1f64.exp();
    for (&(_, p), x) in got.iter().zip([3.0f64, 3.0, 2.0, 1.0]) {
        assert!((f64::from(p) - x.exp() / z).abs() < 1e-6, "{got:?}");
    }
    let s: f32 = got.iter().map(|t| t.1).sum();
    assert!((s - 1.0).abs() < 1e-6);
    // After a reordering stage (typical's order) the list is sorted again.
    let mut chain = Chain::parse("top_k(k=4);typical(p=0.9);softmax").unwrap();
    let mut cur = Candidates::from_row(&l).unwrap();
    chain.apply(&mut cur).unwrap();
    assert!(cur.is_sorted());
    let logits: Vec<f32> = cur.list("test").unwrap().iter().map(|t| t.logit).collect();
    assert!(logits.windows(2).all(|w| w[0] >= w[1]), "{logits:?}");
    // On the vocabulary view: the row unchanged (token-id order, see docs/SAMPLING.md).
    let mut cur = Candidates::from_row(&l).unwrap();
    Softmax::new().apply(&mut cur).unwrap();
    assert!(cur.is_vocab_view());
    assert!(spec_err("softmax(t=1)").to_string().contains("unknown parameter"));
}

// ------------------------------------------------------------------ temp, temp_ext

#[test]
fn temp_regimes() {
    // t = 0.5 on [1, 2, 3]: logits [2, 4, 6]; p = e^{2,4,6} / sum.
    let o = run_both("temp(t=0.5)", &[1.0, 2.0, 3.0]);
    let z = 2f64.exp() + 4f64.exp() + 6f64.exp();
    assert_probs(&o, &[(0, 2f64.exp() / z), (1, 4f64.exp() / z), (2, 6f64.exp() / z)]);
    assert_eq!(logit_of(&o, 2), 6.0);
    // t = 1: identity.
    let o = run_both("temp(t=1)", &[1.0, 2.0, 3.0]);
    assert_eq!(logit_of(&o, 0), 1.0);
    // t = 0 and t < 0: llama.cpp keeps only the (first) max.
    assert_probs(&run_both("temp(t=0)", &[3.0, 1.0, 3.0]), &[(0, 1.0)]);
    assert_probs(&run_both("temp(t=-2)", &[1.0, 3.0, 2.0]), &[(1, 1.0)]);
    // t = -inf: also only the max (llama.cpp: `temp <= 0`).
    assert_probs(&run_both("temp(t=-inf)", &[1.0, 3.0, 2.0]), &[(1, 1.0)]);
    // two temperatures compose: (x / 2) / 0.5 = x.
    assert_eq!(logit_of(&run_both("temp(t=2);temp(t=0.5)", &[1.0, 2.0, 3.0]), 2), 3.0);
    // t = +inf: every finite logit / inf = 0: uniform; ties then go to the lower id everywhere.
    let o = run_both("temp(t=inf)", &[1.0, -2.0, 3.0]);
    assert_probs(&o, &[(0, 1.0 / 3.0), (1, 1.0 / 3.0), (2, 1.0 / 3.0)]);
    assert_eq!(logit_of(&o, 2), 0.0);
    assert_eq!(id_set(&run_both("temp(t=inf);top_k(k=2)", &[1.0, 2.0, 3.0])), vec![0, 1]);
    assert_eq!(run_both("temp(t=inf);greedy", &[1.0, 2.0, 3.0]).selected, Some(0));
    // ... but llama.cpp makes a masked logit -inf / inf = NaN: an error naming `t` (bad_input.rs).
    assert!(spec_err("temp(t=nan)").to_string().contains("`t`"));
}

#[test]
fn temp_ext_regimes() {
    let l = quarter();
    // delta = 0: plain temperature.
    let o = run_both("temp_ext(t=0.5,delta=0)", &l);
    assert!((logit_of(&o, 0) - 2.0 * 0.5f32.ln()).abs() < 1e-6);
    // delta = 0.5, t = 1, exponent 1: min_t 0.5, max_t 1.5; H / ln 4 = 1.75 ln2 / 2 ln2 = 0.875;
    // dyn_t = 0.5 + 1.0 * 0.875 = 1.375; p_i ∝ p^(1/1.375).
    for (exponent, dyn_t) in [(1.0f64, 1.375f64), (2.0, 0.5 + 0.875f64 * 0.875)] {
        let o = run_both(&format!("temp_ext(t=1,delta=0.5,exponent={exponent})"), &l);
        let w: Vec<f64> = [0.5f64, 0.25, 0.125, 0.125].iter().map(|p| p.powf(1.0 / dyn_t)).collect();
        let s: f64 = w.iter().sum();
        assert_probs(&o, &[(0, w[0] / s), (1, w[1] / s), (2, w[2] / s), (3, w[3] / s)]);
    }
    // t - delta < 0 clamps min_t to 0; a uniform row has H = ln n, so dyn_t = max_t = 1.5.
    let o = run_both("temp_ext(t=1,delta=0.5)", &[0.0, 0.0]);
    assert!((logit_of(&o, 0)).abs() < 1e-6);
    // one candidate: unchanged.
    assert_probs(&run_both("temp_ext(t=1,delta=0.5)", &[4.0]), &[(0, 1.0)]);
    // delta = -inf: delta <= 0, plain temp(t): logits / 0.5.
    let o = run_both("temp_ext(t=0.5,delta=-inf)", &l);
    assert!((logit_of(&o, 0) - 2.0 * 0.5f32.ln()).abs() < 1e-6);
    // delta = +inf: min_t = 0, max_t = inf, dyn_t = inf * 0.875 = inf: every logit 0, uniform.
    let o = run_both("temp_ext(t=1,delta=inf)", &l);
    assert_probs(&o, &[(0, 0.25), (1, 0.25), (2, 0.25), (3, 0.25)]);
    assert_eq!(logit_of(&o, 0), 0.0);
    // exponent = +inf: 0.875^inf = 0, dyn_t = min_t = 0.5: logits / 0.5, p ∝ p^2.
    let o = run_both("temp_ext(t=1,delta=0.5,exponent=inf)", &l);
    let w = [0.25f64, 0.0625, 0.015625, 0.015625];
    let s: f64 = w.iter().sum();
    assert_probs(&o, &[(0, w[0] / s), (1, w[1] / s), (2, w[2] / s), (3, w[3] / s)]);
    // exponent = -inf: 0.875^-inf = inf, dyn_t = inf: uniform.
    assert_probs(&run_both("temp_ext(t=1,delta=0.5,exponent=-inf)", &l), &[(0, 0.25), (1, 0.25), (2, 0.25), (3, 0.25)]);
    // exponent < 0 with zero entropy ([0, -1000]: p = 1, 0): powf(0, -1) = inf, dyn_t = inf:
    // -1000 / inf = -0, so both tokens end up with p = 1/2, as in llama.cpp.
    assert_probs(&run_both("temp_ext(t=1,delta=0.5,exponent=-1)", &[0.0, -1000.0]), &[(0, 0.5), (1, 0.5)]);
    // t = -inf with a finite delta > 0: max_t = -inf, dyn_t = -inf * 0.875^1 = -inf: only the max.
    assert_probs(&run_both("temp_ext(t=-inf,delta=0.5)", &l), &[(0, 1.0)]);
    // errors: NaN anywhere; a NaN range max_t - min_t (inf - inf) at construction.
    for (bad, param) in [
        ("t=nan", "`t`"),
        ("delta=nan", "`delta`"),
        ("exponent=nan", "`exponent`"),
        ("t=inf,delta=0.5", "`t`"),
        ("t=-inf,delta=inf", "`delta`"),
    ] {
        let e = spec_err(&format!("temp_ext({bad})")).to_string();
        assert!(e.contains("temp_ext") && e.contains(param), "{bad}: {e}");
    }
    // t = +inf with delta <= 0 is temp(inf): uniform.
    assert_probs(&run_both("temp_ext(t=inf,delta=0)", &[1.0, 2.0]), &[(0, 0.5), (1, 0.5)]);
}

// ------------------------------------------------------------------ xtc

#[test]
fn xtc_regimes() {
    let l = quarter();
    // p = 1: always applies (u < 1). t = 0.2: tokens with p >= 0.2 are ids 0, 1; all but the last
    // of them (id 0) are removed: {1, 2, 3} with 0.25, 0.125, 0.125 -> 0.5, 0.25, 0.25.
    assert_probs(&run_both("xtc(p=1,t=0.2)", &l), &[(1, 0.5), (2, 0.25), (3, 0.25)]);
    // t = 0.3: only id 0 is above, nothing removed.
    assert_eq!(id_set(&run_both("xtc(p=1,t=0.3)", &l)), vec![0, 1, 2, 3]);
    // min_keep = 4 would leave 3: nothing removed.
    assert_eq!(id_set(&run_both("xtc(p=1,t=0.2,min_keep=4)", &l)), vec![0, 1, 2, 3]);
    // disabled: p = 0, or t > 0.5.
    assert_eq!(id_set(&run_both("xtc(p=0,t=0.2)", &l)), vec![0, 1, 2, 3]);
    assert_eq!(id_set(&run_both("xtc(p=1,t=0.6)", &l)), vec![0, 1, 2, 3]);
    // t = 0: every token is above: removes all but the last one, {3}.
    assert_probs(&run_both("xtc(p=1,t=0)", &l), &[(3, 1.0)]);
    // p > 1, +inf: applies at every step, as p = 1 (the coin in [0, 1) is never > p).
    for p in ["1.5", "inf"] {
        assert_probs(&run_both(&format!("xtc(p={p},t=0.2)"), &l), &[(1, 0.5), (2, 0.25), (3, 0.25)]);
    }
    // p < 0, -inf, t > 0.5, +inf: disabled.
    for spec in ["xtc(p=-1,t=0.2)", "xtc(p=-inf,t=0.2)", "xtc(p=1,t=0.51)", "xtc(p=1,t=inf)"] {
        assert_eq!(id_set(&run_both(spec, &l)), vec![0, 1, 2, 3], "{spec}");
    }
    // t < 0, -inf: as t = 0, every token is above: only the last one, {3}; min_keep = 2 stops it.
    for t in ["-0.5", "-inf"] {
        assert_probs(&run_both(&format!("xtc(p=1,t={t})"), &l), &[(3, 1.0)]);
        assert_eq!(id_set(&run_both(&format!("xtc(p=1,t={t},min_keep=2)"), &l)), vec![0, 1, 2, 3]);
    }
    assert!(spec_err("xtc(p=nan)").to_string().contains("`p`"));
    assert!(spec_err("xtc(t=nan)").to_string().contains("`t`"));
}

// ------------------------------------------------------------------ top_n_sigma

#[test]
fn top_n_sigma_regimes() {
    let l = [0.0f32, 1.0, 2.0, 3.0, 4.0];
    // mean 2, population variance (4+1+0+1+4)/5 = 2, sigma = 1.41421.
    // n = 1: keep logit >= 4 - 1.414 = 2.586: {3, 4}; p = 1/(1+e), e/(1+e).
    let e = std::f64::consts::E;
    assert_probs(&run_both("top_n_sigma(n=1)", &l), &[(3, 1.0 / (1.0 + e)), (4, e / (1.0 + e))]);
    // n = 2: threshold 4 - 2.828 = 1.172: {2, 3, 4}.
    assert_eq!(id_set(&run_both("top_n_sigma(n=2)", &l)), vec![2, 3, 4]);
    // large n: all; n <= 0: disabled.
    assert_eq!(id_set(&run_both("top_n_sigma(n=10)", &l)), vec![0, 1, 2, 3, 4]);
    assert_eq!(id_set(&run_both("top_n_sigma(n=0)", &l)), vec![0, 1, 2, 3, 4]);
    assert_eq!(id_set(&run_both("top_n_sigma(n=-1)", &l)), vec![0, 1, 2, 3, 4]);
    // -inf logits are left out of the statistics: [-inf, 0, 4]: mean 2, sigma 2; n = 1 keeps >= 2.
    assert_eq!(id_set(&run_both("top_n_sigma(n=1)", &[f32::NEG_INFINITY, 0.0, 4.0])), vec![2]);
    // n = +inf: nothing masked (threshold -inf); with sigma = 0 the threshold is inf * 0 = NaN,
    // which llama.cpp's `logit < threshold` never meets: still nothing masked.
    assert_eq!(id_set(&run_both("top_n_sigma(n=inf)", &l)), vec![0, 1, 2, 3, 4]);
    assert_probs(&run_both("top_n_sigma(n=inf)", &[2.0, 2.0, 2.0]), &[(0, 1.0 / 3.0), (1, 1.0 / 3.0), (2, 1.0 / 3.0)]);
    assert_probs(&run_both("top_n_sigma(n=inf)", &[5.0, f32::NEG_INFINITY]), &[(0, 1.0)]);
    // sigma = 0 with a finite n: threshold = max, all the (equal) finite logits pass.
    assert_eq!(id_set(&run_both("top_n_sigma(n=1)", &[2.0, 2.0, 2.0])), vec![0, 1, 2]);
    // n = -inf: disabled.
    assert_eq!(id_set(&run_both("top_n_sigma(n=-inf)", &l)), vec![0, 1, 2, 3, 4]);
    assert!(spec_err("top_n_sigma(n=nan)").to_string().contains("`n`"));
}

// ------------------------------------------------------------------ mirostat

#[test]
fn mirostat_v1_known_k() {
    // p ∝ 1/(i+1)^2 over n = 4: b_i = ln(p_i/p_{i+1}) = 2 t_i, so s_hat = 2, eps = 1;
    // tau = 1 -> mu = 2: k = (1 * 2^2 / (1 - 4^-1))^(1/2) = sqrt(16/3) = 2.309 -> 2 tokens,
    // renormalised 1 : 1/4 -> 0.8, 0.2.
    let ps: Vec<f64> = (0..4).map(|i| 1.0 / f64::from((i + 1) * (i + 1))).collect();
    let s: f64 = ps.iter().sum();
    let l = logits_of(&ps.iter().map(|p| p / s).collect::<Vec<_>>());
    let o = run_both("mirostat(tau=1,eta=0.1,m=100,seed=3)", &l);
    assert_probs(&o, &[(0, 0.8), (1, 0.2)]);
    let sel = o.selected.unwrap();
    // mu update: mu = 2 - 0.1 * (-log2 p_sel - 1).
    let mut m = Mirostat::new(3, 1.0, 0.1, 100).unwrap();
    let mut c = Candidates::from_row(&l).unwrap();
    m.apply(&mut c).unwrap();
    assert_eq!(c.selected_token(), Some(sel));
    // mu moves when the token is accepted, not when it is drawn.
    assert_eq!(m.mu(), 2.0);
    m.accept(sel);
    let p_sel = if sel == 0 { 0.8f32 } else { 0.2 };
    assert!((m.mu() - (2.0 - 0.1 * (-p_sel.log2() - 1.0))).abs() < 1e-5);
    m.reset();
    assert_eq!(m.mu(), 2.0);
    // m <= 0: llama.cpp's bound size_t(m - 1) wraps, so every pair is used: as m = 100 here.
    for m in [0, -5, i32::MAX] {
        assert_probs(&run_both(&format!("mirostat(tau=1,eta=0.1,m={m},seed=3)"), &l), &[(0, 0.8), (1, 0.2)]);
    }
    // tau <= 0 and negative eta are plain arithmetic: tau = -1 -> mu = -2: k = (1 * 2^-2 / 0.75)^(1/2)
    // = 0.577 -> int 0 -> max(0, 1) = 1 token.
    assert_probs(&run_both("mirostat(tau=-1,eta=-0.5)", &l), &[(0, 1.0)]);
    // m = 1: s = 0/0 = NaN and llama.cpp's int(NaN) is undefined: an error, as is i32::MIN.
    for bad in ["m=1", "m=-2147483648"] {
        let e = spec_err(&format!("mirostat({bad})")).to_string();
        assert!(e.contains("`m`"), "{bad}: {e}");
    }
    for bad in ["tau=inf", "tau=-inf", "tau=2e38", "tau=nan"] {
        assert!(spec_err(&format!("mirostat({bad})")).to_string().contains("`tau`"), "{bad}");
    }
    for bad in ["eta=inf", "eta=-inf", "eta=nan"] {
        assert!(spec_err(&format!("mirostat({bad})")).to_string().contains("`eta`"), "{bad}");
    }
}

#[test]
fn mirostat_v2_truncation_and_mu() {
    let l = quarter();
    // surprises -log2 p = 1, 2, 3, 3 bits. tau = 1 -> mu = 2: keep surprise <= 2: {0, 1} -> 2/3, 1/3.
    let o = run_both("mirostat_v2(tau=1,eta=0.1)", &l);
    assert_probs(&o, &[(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
    // tau = 0.4 -> mu = 0.8 < 1: nothing passes, keep one (id 0), p = 1, surprise 0:
    // mu = 0.8 - 0.1 * (0 - 0.4) = 0.84.
    let mut m = MirostatV2::new(0, 0.4, 0.1).unwrap();
    let mut c = Candidates::from_row(&l).unwrap();
    m.apply(&mut c).unwrap();
    assert_eq!(c.selected_token(), Some(0));
    m.accept(0);
    assert!((m.mu() - 0.84).abs() < 1e-6);
    m.reset();
    assert!((m.mu() - 0.8).abs() < 1e-7);
    assert_eq!(m.step(), Some(0));
    // tau = +inf (eta > 0): mu = inf truncates nothing, a plain draw; mu stays inf.
    let o = run_both("mirostat_v2(tau=inf,eta=0.1)", &l);
    assert_probs(&o, &[(0, 0.5), (1, 0.25), (2, 0.125), (3, 0.125)]);
    let mut m = MirostatV2::new(0, f32::INFINITY, 0.1).unwrap();
    for _ in 0..3 {
        let mut c = Candidates::from_row(&l).unwrap();
        m.apply(&mut c).unwrap();
        m.accept(c.selected_token().unwrap());
        assert_eq!(m.mu(), f32::INFINITY);
    }
    // tau = -inf (eta > 0): mu = -inf keeps only the most likely token; mu stays -inf.
    let mut m = MirostatV2::new(0, f32::NEG_INFINITY, 0.1).unwrap();
    for _ in 0..3 {
        let mut c = Candidates::from_row(&l).unwrap();
        m.apply(&mut c).unwrap();
        assert_eq!(c.selected_token(), Some(0));
        m.accept(0);
        assert_eq!(m.mu(), f32::NEG_INFINITY);
    }
    assert_probs(&run_both("mirostat_v2(tau=-inf,eta=0.1)", &l), &[(0, 1.0)]);
    // eta <= 0 with an infinite mu: NaN after one update (0 * inf, inf - inf): error.
    for bad in ["tau=inf,eta=0", "tau=inf,eta=-0.1", "tau=-inf,eta=0", "tau=nan"] {
        assert!(spec_err(&format!("mirostat_v2({bad})")).to_string().contains("`tau`"), "{bad}");
    }
    for bad in ["eta=inf", "eta=nan"] {
        assert!(spec_err(&format!("mirostat_v2({bad})")).to_string().contains("`eta`"), "{bad}");
    }
    // a negative or zero eta with a finite tau is plain arithmetic
    assert!(MirostatV2::new(0, 1.0, -0.1).is_ok() && MirostatV2::new(0, -3.0, 0.0).is_ok());
}

// ------------------------------------------------------------------ penalties

#[test]
fn penalties_regimes() {
    let l = [2.0f32, -1.0, 0.5, 3.0];
    let run = |spec: &str, history: &[u32]| {
        let mut c = Chain::parse(spec).unwrap();
        for &t in history {
            c.accept(t);
        }
        c.run(&l).unwrap()
    };
    // history 0, 0, 1; repeat 2, freq 0.5, present 0.25:
    // id0: 2 > 0 -> 2 / 2 = 1, minus 2 * 0.5 + 0.25 = -0.25;
    // id1: -1 <= 0 -> -2, minus 1 * 0.5 + 0.25 = -2.75; ids 2, 3 unchanged.
    let o = run("penalties(last_n=64,repeat=2,freq=0.5,present=0.25)", &[0, 0, 1]);
    assert_eq!(logit_of(&o, 0), -0.25);
    assert_eq!(logit_of(&o, 1), -2.75);
    assert_eq!(logit_of(&o, 2), 0.5);
    assert_eq!(logit_of(&o, 3), 3.0);
    // last_n = 2: the window holds [0, 1]: id0 1 - 0.75 = 0.25, id1 -2.75.
    let o = run("penalties(last_n=2,repeat=2,freq=0.5,present=0.25)", &[0, 0, 1]);
    assert_eq!(logit_of(&o, 0), 0.25);
    // last_n = -1: the whole history.
    let o = run("penalties(last_n=-1,repeat=2,freq=0.5,present=0.25)", &[0, 0, 1]);
    assert_eq!(logit_of(&o, 0), -0.25);
    // disabled: last_n = 0, or neutral values.
    assert_eq!(logit_of(&run("penalties(last_n=0,repeat=2)", &[0]), 0), 2.0);
    assert_eq!(logit_of(&run("penalties(repeat=1,freq=0,present=0)", &[0]), 0), 2.0);
    // the list path agrees
    let mut c = Chain::parse("top_k(k=4);penalties(last_n=64,repeat=2,freq=0.5,present=0.25)").unwrap();
    for t in [0, 0, 1] {
        c.accept(t);
    }
    assert_eq!(logit_of(&c.run(&l).unwrap(), 0), -0.25);
    // reset clears the history
    let mut p = Penalties::new(64, 2.0, 0.0, 0.0).unwrap();
    p.accept(0);
    p.reset();
    let mut cur = Candidates::from_row(&l).unwrap();
    p.apply(&mut cur).unwrap();
    assert_eq!(logit_of(&cur.output().unwrap(), 0), 2.0);
    // repeat < 0: plain arithmetic: id0 2 / -2 = -1, id1 -1 * -2 = 2.
    let o = run("penalties(last_n=64,repeat=-2)", &[0, 0, 1]);
    assert_eq!((logit_of(&o, 0), logit_of(&o, 1)), (-1.0, 2.0));
    // repeat = +inf: id0 2 / inf = 0, id1 -1 * inf = -inf (banned).
    let o = run("penalties(last_n=64,repeat=inf)", &[0, 0, 1]);
    assert_eq!(logit_of(&o, 0), 0.0);
    assert_eq!(id_set(&o), vec![0, 2, 3]);
    // freq = +inf or present = +inf: every seen token banned.
    for spec in ["penalties(freq=inf)", "penalties(present=inf)", "penalties(repeat=2,freq=inf,present=-3)"] {
        assert_eq!(id_set(&run(spec, &[0, 0, 1])), vec![2, 3], "{spec}");
    }
    // errors: last_n < -1 (llama.cpp's common layer), repeat 0 or -inf, -inf freq/present, NaN.
    for (bad, param) in [
        ("last_n=-2", "`last_n`"),
        ("repeat=0", "`repeat`"),
        ("repeat=-0", "`repeat`"),
        ("repeat=-inf", "`repeat`"),
        ("repeat=nan", "`repeat`"),
        ("freq=-inf", "`freq`"),
        ("freq=nan", "`freq`"),
        ("present=-inf", "`present`"),
        ("present=nan", "`present`"),
    ] {
        let e = spec_err(&format!("penalties({bad})")).to_string();
        assert!(e.contains("penalties") && e.contains(param), "{bad}: {e}");
    }
}

// ------------------------------------------------------------------ dry

#[test]
fn dry_regimes() {
    let l = [0.0f32; 6];
    let run = |spec: &str, history: &[u32]| {
        let mut c = Chain::parse(spec).unwrap();
        for &t in history {
            c.accept(t);
        }
        c.run(&l).unwrap()
    };
    // history 1 2 3 4 1 2 3: the suffix "1 2 3" occurred before, followed by 4. Emitting 4 would
    // extend a repeat of length 3: penalty multiplier * base^(3 - allowed_length) = 1 * 2^1 = 2.
    let h = [1, 2, 3, 4, 1, 2, 3];
    let o = run("dry(multiplier=1,base=2,allowed_length=2)", &h);
    assert_eq!(logit_of(&o, 4), -2.0);
    for t in [0, 1, 2, 3, 5] {
        assert_eq!(logit_of(&o, t), 0.0, "token {t}");
    }
    // allowed_length = 3: 2^0 = 1. allowed_length = 4: 3 < 4, no penalty.
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=3)", &h), 4), -1.0);
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=4)", &h), 4), 0.0);
    // multiplier 0.5: -1.
    assert_eq!(logit_of(&run("dry(multiplier=0.5,base=2,allowed_length=2)", &h), 4), -1.0);
    // a breaker at token 2 (one from the end) limits repeats to length 1 < 2: nothing.
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=2,breakers=2)", &h), 4), 0.0);
    // a two-token breaker "2 3" ending at the end: rep_limit = 0 -> nothing.
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=2,breakers=2 3)", &h), 4), 0.0);
    // an unrelated breaker changes nothing; a single-token breaker is never penalised itself.
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=2,breakers=5)", &h), 4), -2.0);
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=2,breakers=5|4)", &h), 4), 0.0);
    // last_n = 4 keeps "4 1 2 3": no earlier "1 2 3", nothing.
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=2,last_n=4)", &h), 4), 0.0);
    // disabled: multiplier 0, base < 1, last_n 0.
    for spec in ["dry(multiplier=0,base=2)", "dry(multiplier=1,base=0.5)", "dry(multiplier=1,base=2,last_n=0)"] {
        assert_eq!(logit_of(&run(spec, &h), 4), 0.0, "{spec}");
    }
    // an empty breaker sequence is skipped (llama.cpp: "skipping DRY empty sequence breaker").
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=2,breakers=)", &h), 4), -2.0);
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=2,breakers=|5|4)", &h), 4), 0.0);
    // multiplier < 0: the logit rises by the same amount.
    assert_eq!(logit_of(&run("dry(multiplier=-1,base=2,allowed_length=2)", &h), 4), 2.0);
    // multiplier = +inf: the token extending the repeat is banned.
    assert_eq!(id_set(&run("dry(multiplier=inf,base=2,allowed_length=2)", &h)), vec![0, 1, 2, 3, 5]);
    // base = +inf: no exponent clamp (88.72 / ln inf = 0); exponent 0 gives the multiplier,
    // exponent 1 gives inf (a ban).
    assert_eq!(logit_of(&run("dry(multiplier=1,base=inf,allowed_length=3)", &h), 4), -1.0);
    assert_eq!(id_set(&run("dry(multiplier=1,base=inf,allowed_length=2)", &h)), vec![0, 1, 2, 3, 5]);
    // base = -inf: base < 1, disabled.
    assert_eq!(logit_of(&run("dry(multiplier=1,base=-inf)", &h), 4), 0.0);
    // allowed_length = -1: every repeat length (0 included) counts. Repeat lengths ending at each
    // position of 1 2 3 4 1 2 3: only the "1 2 3" before 4 matches the end (length 3); every other
    // token that followed another (1, 2, 3) extends a repeat of length 0. Penalties 2^(L + 1):
    // token 4: 2^4 = 16; tokens 1, 2, 3: 2^1 = 2; tokens 0, 5 never followed anything.
    let o = run("dry(multiplier=1,base=2,allowed_length=-1)", &h);
    for (t, want) in [(0, 0.0), (1, -2.0), (2, -2.0), (3, -2.0), (4, -16.0), (5, 0.0)] {
        assert_eq!(logit_of(&o, t), want, "token {t}");
    }
    // ... and with no history (or n_ctx = 0) nothing, without indexing an empty window.
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=-1)", &[]), 4), 0.0);
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=-1,last_n=4,n_ctx=0)", &h), 4), 0.0);
    // n_ctx = 0 with last_n > 0: the window min(history, last_n, n_ctx) is empty: nothing.
    assert_eq!(logit_of(&run("dry(multiplier=1,base=2,allowed_length=2,last_n=64,n_ctx=0)", &h), 4), 0.0);
    // the largest negative allowed_length whose `L - allowed_length` fits int32 (window 4096)
    assert!(Chain::parse("dry(multiplier=1,allowed_length=-2147479552)").is_ok());
    // a disabled DRY (multiplier 0) checks nothing further, as llama.cpp's empty sampler
    assert!(Chain::parse("dry(multiplier=0,last_n=-1,n_ctx=0)").is_ok());
    for (bad, param) in [
        ("multiplier=nan", "`multiplier`"),
        ("multiplier=-inf", "`multiplier`"),
        ("multiplier=-1,base=inf", "`multiplier`"),
        ("multiplier=1,last_n=-2", "`last_n`"),
        ("multiplier=1,last_n=-1,n_ctx=0", "`n_ctx`"),
        ("multiplier=1,n_ctx=4294967296", "`n_ctx`"),
        ("multiplier=1,allowed_length=-2147479553", "`allowed_length`"),
        ("base=nan", "`base`"),
        ("breakers=x", "`breakers`"),
    ] {
        let e = spec_err(&format!("dry({bad})")).to_string();
        assert!(e.contains("dry") && e.contains(param), "{bad}: {e}");
    }
}

#[test]
fn dry_clamps_exponent() {
    // A long repeat with base 10: exponent clamped to 88.72 / ln 10 = 38, so the penalty is finite.
    let mut h: Vec<u32> = (0..50).map(|i| i % 5).collect();
    h.push(0);
    let mut c = Chain::parse("dry(multiplier=1,base=10,allowed_length=0)").unwrap();
    for &t in &h {
        c.accept(t);
    }
    let o = c.run(&[0.0f32; 5]).unwrap();
    assert!(logit_of(&o, 1).is_finite() && logit_of(&o, 1) < -1e30);
}

// ------------------------------------------------------------------ logit_bias

#[test]
fn logit_bias_regimes() {
    // [0, 0, 0, 0] with +1 on 1 and -inf on 3: id 3 is banned; p = e/(e+2), 1/(e+2) for 0 and 2.
    let e = std::f64::consts::E;
    let o = run_both("logit_bias(1=1,3=-inf,99=5)", &[0.0; 4]);
    assert_probs(&o, &[(1, e / (e + 2.0)), (0, 1.0 / (e + 2.0)), (2, 1.0 / (e + 2.0))]);
    // empty bias list: nothing changes.
    assert_eq!(id_set(&run_both("logit_bias", &[0.0; 3])), vec![0, 1, 2]);
    // a negative token (llama.cpp: looked up, never found) is ignored.
    assert_probs(
        &run_both("logit_bias(-5=3,1=1,3=-inf)", &[0.0; 4]),
        &[(1, e / (e + 2.0)), (0, 1.0 / (e + 2.0)), (2, 1.0 / (e + 2.0))],
    );
    // a token listed twice (only through the API: a SPEC key may not repeat): on the vocabulary
    // (token at its own index) both entries add, 1 + 2, on both representations.
    let twice = |biases: Vec<(u32, f32)>, top_k: i32, row: &[f32], tok: u32| {
        let chain = Chain::new().with(TopK::new(top_k)).with(LogitBias::new(biases).unwrap());
        let view = chain.clone().run(row).unwrap();
        let list = row.iter().enumerate().map(|(i, &l)| TokenData { id: i as u32, logit: l, p: 0.0 }).collect();
        let mut cur = Candidates::from_list(list, row.len()).unwrap();
        chain.clone().apply(&mut cur).unwrap();
        let list = cur.output().unwrap();
        assert_eq!(logit_of(&view, tok), logit_of(&list, tok));
        logit_of(&view, tok)
    };
    assert_eq!(twice(vec![(1, 1.0), (1, 2.0)], 0, &[0.0; 4], 1), 3.0);
    // after top_k(3) on [0, 0.5, 1, 2] the list is [3, 2, 1]: token 1 is not at index 1, so
    // llama.cpp searches for it and adds only the first entry: 0.5 + 1.
    assert_eq!(twice(vec![(1, 1.0), (1, 2.0)], 3, &[0.0, 0.5, 1.0, 2.0], 1), 1.5);
    // ... while token 0 of [2, 0.5, 1, 0] stays at index 0: both entries add, 2 + 3.
    assert_eq!(twice(vec![(0, 1.0), (0, 2.0)], 3, &[2.0, 0.5, 1.0, 0.0], 0), 5.0);
    for bad in ["1=nan", "1=inf", "-5=nan", "99=inf"] {
        let e = spec_err(&format!("logit_bias({bad})")).to_string();
        assert!(e.contains("logit_bias") && e.contains("`bias`"), "{bad}: {e}");
    }
    assert!(spec_err("logit_bias(x=1)").to_string().contains("`x`"));
    assert!(spec_err("logit_bias(4294967295=1)").to_string().contains("token id"));
}

// ------------------------------------------------------------------ adaptive_p

#[test]
fn adaptive_p_transform_and_history() {
    let l = quarter();
    // target 0.25, decay 0.9: primed weighted_sum = 0.25/0.1 = 2.5, total = 10: average 0.25,
    // adapted = 2 * 0.25 - 0.25 = 0.25. d = |p - 0.25| / 0.3 = 0.8333, 0, 0.41667, 0.41667;
    // logit = 5 - 10 d^2 / (1 + d) = 1.21212, 5, 3.77451, 3.77451.
    let o = run_both("adaptive_p(target=0.25,decay=0.9,seed=1)", &l);
    let f = |d: f64| 5.0 - 10.0 * d * d / (1.0 + d);
    for (id, d) in [(0u32, 0.25 / 0.3), (1, 0.0), (2, 0.125 / 0.3), (3, 0.125 / 0.3)] {
        assert!((f64::from(logit_of(&o, id)) - f(d)).abs() < 1e-4, "token {id}");
    }
    // accept updates the average with the selected token's original probability:
    // (p + 0.9 * 2.5) / (1 + 0.9 * 10).
    let mut a = AdaptiveP::new(0.25, 0.9, 1).unwrap();
    let mut c = Candidates::from_row(&l).unwrap();
    a.apply(&mut c).unwrap();
    let t = c.selected_token().unwrap();
    a.accept(t);
    let p = [0.5f32, 0.25, 0.125, 0.125][t as usize];
    assert!((a.average() - (p + 2.25) / 10.0).abs() < 1e-6);
    // accepting a different token than the selected one leaves it unchanged
    let before = a.average();
    a.accept(3);
    assert_eq!(a.average(), before);
    a.reset();
    assert!((a.average() - 0.25).abs() < 1e-6);
    assert!(spec_err("adaptive_p(target=nan)").to_string().contains("`target`"));
    assert!(spec_err("adaptive_p(target=0.5,decay=nan)").to_string().contains("`decay`"));
}

#[test]
fn adaptive_p_edge_values() {
    let l = quarter();
    let f = |d: f64| 5.0 - 10.0 * d * d / (1.0 + d);
    let check = |spec: &str, adapted: f64| {
        let o = run_both(spec, &l);
        for (id, p) in [(0u32, 0.5f64), (1, 0.25), (2, 0.125), (3, 0.125)] {
            let want = f((p - adapted).abs() / 0.3);
            assert!((f64::from(logit_of(&o, id)) - want).abs() < 1e-4, "{spec}: token {id}");
        }
    };
    // target = 1.5: the average is primed with the unclamped 1.5 / (1 - 0.9) / 10 = 1.5, the
    // adapted target is clamp(2 * 1 - 1.5) = 0.5, not 1 (llama.cpp clamps only the target).
    check("adaptive_p(target=1.5,decay=0.9)", 0.5);
    check("adaptive_p(target=1,decay=0.9)", 1.0);
    // target = +inf (decay > 0): average inf, adapted clamp(2 - inf) = 0, and it stays inf.
    check("adaptive_p(target=inf,decay=0.9)", 0.0);
    let mut a = AdaptiveP::new(f32::INFINITY, 0.9, 1).unwrap();
    let mut c = Candidates::from_row(&l).unwrap();
    a.apply(&mut c).unwrap();
    a.accept(c.selected_token().unwrap());
    assert_eq!(a.average(), f32::INFINITY);
    // decay outside [0, 0.99] is clamped: decay = inf acts as 0.99, -inf as 0.
    check("adaptive_p(target=0.25,decay=inf)", 0.25);
    check("adaptive_p(target=0.25,decay=-inf)", 0.25);
    assert_eq!(
        AdaptiveP::new(0.25, f32::INFINITY, 1).unwrap().average(),
        AdaptiveP::new(0.25, 0.99, 1).unwrap().average()
    );
    // target < 0, -inf: no transform, a plain draw: the logits are unchanged.
    for t in ["-1", "-inf"] {
        let o = run_both(&format!("adaptive_p(target={t})"), &l);
        assert_probs(&o, &[(0, 0.5), (1, 0.25), (2, 0.125), (3, 0.125)]);
    }
    // target = +inf with decay 0: the first update is p + 0 * inf = NaN: error.
    for bad in ["target=inf,decay=0", "target=inf,decay=-1"] {
        assert!(spec_err(&format!("adaptive_p({bad})")).to_string().contains("`target`"), "{bad}");
    }
}

// ------------------------------------------------------------------ dist

#[test]
fn dist_edges() {
    // a single candidate is always selected, p = 1
    assert_eq!(run_both("dist(seed=5)", &[3.0]).selected, Some(0));
    // masked tokens are never drawn
    let l = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY];
    for t in draws("dist(seed=9)", &l, 200) {
        assert_eq!(t, 1);
    }
    // after top_k(1) the draw is deterministic
    assert_eq!(run_both("top_k(k=1);dist", &[0.0, 2.0, 1.0]).selected, Some(1));
    // the same (seed, step) gives the same token; a different step may not
    let l = gaussian_logits(1000, 3, 2.0);
    let mut a = Chain::parse("dist(seed=11)").unwrap();
    let mut b = Chain::parse("dist(seed=11)").unwrap();
    b.set_step(5);
    let from_a: Vec<u32> = (0..10).map(|_| a.sample(&l).unwrap()).collect();
    assert_eq!(b.sample(&l).unwrap(), from_a[5]);
    // reset returns to step 0; clone carries the step
    a.reset();
    assert_eq!(a.sample(&l).unwrap(), from_a[0]);
    let mut c = a.clone();
    assert_eq!(c.sample(&l).unwrap(), a.sample(&l).unwrap());
}

// ------------------------------------------------------------------ mask (external predicate)

#[derive(Debug, Clone)]
struct EvenOnly;
impl TokenFilter for EvenOnly {
    fn allows(&self, token: u32) -> bool {
        token.is_multiple_of(2)
    }
    fn clone_box(&self) -> Box<dyn TokenFilter> {
        Box::new(self.clone())
    }
}

#[test]
fn mask_by_predicate() {
    let mut chain = Chain::new().with(Mask::new(Box::new(EvenOnly))).with(Greedy::new());
    assert_eq!(chain.sample(&[0.0, 9.0, 1.0, 8.0]).unwrap(), 2);
    let mut chain = Chain::new().with(Mask::new(Box::new(EvenOnly)));
    assert!(matches!(chain.run(&[0.0, f32::NEG_INFINITY - 0.0]).map(|_| ()), Ok(())));
    assert!(matches!(chain.run(&[f32::NEG_INFINITY, 3.0]), Err(SamplingError::AllMasked { stage: "mask" })));
}

// ------------------------------------------------------------------ SPEC errors

#[test]
fn spec_errors_name_stage_and_parameter() {
    let e = spec_err("top_k(k=40);top_p(q=0.9)");
    assert_eq!(e.to_string(), "SPEC stage 1 (`top_p`): unknown parameter `q` (expected p, min_keep, approx_k)");
    let e = spec_err("top_k(k=40);bogus");
    assert!(e.to_string().contains("stage 1") && e.to_string().contains("unknown sampler `bogus`"));
    let e = spec_err("min_p(p=nan)");
    assert!(e.to_string().contains("stage 0") && e.to_string().contains("`p`") && e.to_string().contains("NaN"));
    assert!(spec_err("top_k(k=40").to_string().contains("missing `)`"));
    assert!(spec_err("top_k(40)").to_string().contains("key=value"));
    assert!(spec_err("top_k(k=1,k=2)").to_string().contains("twice"));
    assert!(spec_err(";greedy").to_string().contains("empty stage"));
    assert!(spec_err("greedy(x=1)").to_string().contains("expected none"));
    // llama.cpp spellings and a trailing `;` are accepted
    assert_eq!(Chain::parse("top-k(k=3);min-p(p=0.1);greedy;").unwrap().stages().len(), 3);
}

// ------------------------------------------------------------------ edge values on long rows

#[test]
fn edge_values_on_long_rows() {
    // 10,000 tokens: the vocabulary-view fast paths (top_p's pipelined pass and replay, min_p's
    // gather, top_k's rescan) against the explicit list, and against the top-k that llama.cpp's
    // edge values reduce to.
    let l = gaussian_logits(10_000, 5, 2.0);
    let top = |k: i32| ref_ids(&ref_top_k(ref_all(&l), k));
    let all: Vec<u32> = (0..10_000).collect();
    for (spec, want) in [
        ("top_p(p=-1)", top(1)),
        ("top_p(p=-inf,min_keep=7)", top(7)),
        ("top_p(p=0,min_keep=7)", top(7)),
        ("top_p(p=1.5)", all.clone()),
        ("top_p(p=inf,min_keep=3)", all.clone()),
        ("min_p(p=2)", top(1)),
        ("min_p(p=inf,min_keep=5)", top(5)),
        ("min_p(p=-1)", all.clone()),
        ("top_k(k=-1)", all.clone()),
        ("typical(p=-1,min_keep=1)", vec![]),
        ("xtc(p=2,t=-1)", vec![]),
        ("top_n_sigma(n=inf)", all.clone()),
        ("temp(t=-inf)", top(1)),
    ] {
        let o = run_both(spec, &l);
        match spec {
            // one token (typical: the most typical one); xtc: all but the least likely one
            s if s.starts_with("typical") => assert_eq!(o.candidates.len(), 1, "{spec}"),
            s if s.starts_with("xtc") => {
                assert_eq!(o.candidates.len(), 1, "{spec}");
                let min = l.iter().copied().fold(f32::INFINITY, f32::min);
                assert_eq!(o.candidates[0].logit, min, "{spec}");
            }
            _ => assert_eq!(id_set(&o), want, "{spec}"),
        }
    }
}

// ------------------------------------------------------------------ dry: string breakers

/// llama.cpp's `get_overlapping_token_sequences` over a hand-made vocabulary, derived by reading
/// its code (`src/llama-sampler.cpp`): for each breaker, for each token in id order, a token whose
/// text contains the breaker is a head with an empty tail; otherwise each position `p` of the
/// breaker's first byte in the text, where the text's rest from `p` (`k` bytes) is the breaker's
/// first `k` bytes, makes the token a head with tail `tokenize(breaker[k..])` (cut to 20 tokens),
/// unless that token already has that tail; empty tails are never deduplicated. The tokenizer is
/// the test's greedy longest match (`common::breaker_vocab`).
#[test]
fn dry_string_breakers_map_as_llama_cpp() {
    use sampling::samplers::dry_breakers::{BreakerError, from_vocab, overlapping_sequences};
    #[rustfmt::skip]
    let texts = [
        "a", "b:", ":x", "\n", "\n\n", ":", "Us", "er", "User", " User:", // 0..9
        "e", "r", "x", "U", "s", "sUs", "UsUs", "r:x!", "er:",              // 10..18
    ];
    let (vocab, tok) = common::breaker_vocab(&texts);
    let got = from_vocab(&[b"\n", b":", b"User:", b"r:x", b"er:x"], &vocab, &tok).unwrap();
    let want: Vec<(u32, Vec<u32>)> = vec![
        // "\n": the tokens containing it ("\n", "\n\n"); a one-byte breaker has no partial overlap.
        (3, vec![]),
        (4, vec![]),
        // ":": "b:", ":x", ":", " User:", "r:x!", "er:".
        (1, vec![]),
        (2, vec![]),
        (5, vec![]),
        (9, vec![]),
        (17, vec![]),
        (18, vec![]),
        // "User:": "Us" ends with "Us" (k = 2): tail tokenize("er:") = [18] (the longest match);
        (6, vec![18]),
        // "User" (k = 4): tokenize(":") = [5];
        (8, vec![5]),
        // " User:" contains it: a second empty entry for 9 (not deduplicated);
        (9, vec![]),
        // "U" (k = 1): tokenize("ser:") = "s" "er:";
        (13, vec![14, 18]),
        // "sUs": the `U` at 1, rest "Us" (k = 2);
        (15, vec![18]),
        // "UsUs": the `U` at 0 fails at "U" != "e"; the `U` at 2 gives [18] once.
        (16, vec![18]),
        // "r:x": "er" (the `r` at 1, k = 1): tokenize(":x") = [2]; "User" likewise (a second
        // entry for 8, another tail); " User:" ends "r:" (k = 2): tokenize("x") = [12]; "r";
        // "r:x!" contains it; "er:" ends "r:" (k = 2).
        (7, vec![2]),
        (8, vec![2]),
        (9, vec![12]),
        (11, vec![2]),
        (17, vec![]),
        (18, vec![12]),
        // "er:x": "er" (k = 2) has tail [2] already (from "r:x"), "User" too, " User:" and
        // "er:" (k = 3) have [12] already: all skipped; "e" (k = 1): tokenize("r:x") = "r" ":x".
        (10, vec![11, 2]),
    ];
    assert_eq!(got, want);

    // A breaker is cut to 40 bytes before the search ("a" x 40 then "b": the token holding 40 a's
    // then "c" contains the cut breaker), and a tail to 20 tokens ("a" x 39 after "a").
    let long_a = "a".repeat(40) + "c";
    let (vocab, tok) = common::breaker_vocab(&["a", &long_a, "b"]);
    let breaker = "a".repeat(40) + "b";
    let got = from_vocab(&[breaker.as_bytes()], &vocab, &tok).unwrap();
    assert_eq!(got, vec![(0, vec![0; 20]), (1, vec![])]);
    // An empty breaker is skipped; a breaker ends at a NUL byte (llama.cpp's C strings).
    assert_eq!(from_vocab(&[b""], &vocab, &tok).unwrap(), vec![]);
    assert_eq!(from_vocab(&[b"\0b"], &vocab, &tok).unwrap(), vec![]);
    assert_eq!(from_vocab(&[b"b\0a"], &vocab, &tok).unwrap(), vec![(2, vec![])]);

    // Without a tokenizer: one-byte breakers need none; a tail that must be tokenized is an error.
    let words: Vec<Vec<u8>> = texts.iter().map(|t| t.as_bytes().to_vec()).collect();
    let single = overlapping_sequences(&[b"\n", b":"], &words, None).unwrap();
    assert_eq!(single.len(), 8);
    assert_eq!(overlapping_sequences(&[b"User:"], &words, None), Err(BreakerError::NeedsTokenizer(b"User:".to_vec())));
}

/// A token's text as llama.cpp's `detokenize({t}, special = true)` gives it: one leading space
/// stripped with `add_space_prefix`; `clean_spaces`' three passes.
#[test]
fn dry_token_words_as_llama_cpp_detokenizes() {
    use sampling::samplers::dry_breakers::token_word;
    let w = |p: &str, sp: bool, clean: bool| String::from_utf8(token_word(p.as_bytes(), sp, clean)).unwrap();
    assert_eq!(w(" hello", true, false), "hello");
    assert_eq!(w("  two", true, false), " two", "one space only");
    assert_eq!(w(" hello", false, false), " hello");
    assert_eq!(w("a ?", false, true), "a?");
    assert_eq!(w(" ,", false, true), ",");
    assert_eq!(w("x ! .", false, true), "x!.");
    assert_eq!(w("a ' b", false, true), "a'b", "a lone apostrophe between spaces");
    assert_eq!(w("it 's", false, true), "it's");
    assert_eq!(w("we 're 've 'm", false, true), "we're've'm");
    assert_eq!(w("don 't 'd 'll", false, true), "don 't 'd 'll", "kept as llama.cpp keeps them");
    assert_eq!(w(" ?", true, true), "?");
    assert_eq!(w("", true, true), "");
}
