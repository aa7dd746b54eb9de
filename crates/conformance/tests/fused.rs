//! The fused sampling ops on the CPU backend (through `sched`): one test per scenario of the
//! Ascend spec's table and per edge rule of the digest (known answers), property tests against
//! the f64 reference (`conformance::reference::sample`) with per-row parameters over every regime,
//! every dtype, V from 1 to 262,144 and ties, and statistical tests of the multinomial draw.

use conformance::reference::sample::{RefPost, random_sample_row, top_k_top_p_row};
use graph::fused::{FusedOutput, IndexDType, PostSample, TopKTopP, multinomial_uniform};
use graph::{DType, Graph};
use proptest::prelude::*;

/// One row's inputs.
#[derive(Debug, Clone)]
struct Row {
    x: Vec<f32>,
    k: i32,
    p: f32,
    m: f32,
    /// qSample noise (`[V]`).
    q: Vec<f32>,
}

fn row(x: &[f32], k: i32, p: f32, m: f32) -> Row {
    Row { x: x.to_vec(), k, p, m, q: vec![1.0; x.len()] }
}

fn bytes_of(dtype: DType, v: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F32 => v.iter().flat_map(|t| t.to_le_bytes()).collect(),
        DType::F16 => v.iter().flat_map(|&t| graph::f16::from_f32(t).to_bits().to_le_bytes()).collect(),
        DType::BF16 => v.iter().flat_map(|&t| graph::bf16::from_f32(t).to_bits().to_le_bytes()).collect(),
        _ => unreachable!("logits are f32, f16 or bf16"),
    }
}

/// Runs `top_k_top_p_sample` on the CPU: the indices and the filtered logits.
fn run(rows: &[Row], dtype: DType, a: TopKTopP, pairs: &[(u64, u64)]) -> (Vec<i32>, Vec<f32>) {
    let (b, v) = (rows.len(), rows[0].x.len());
    let mut g = Graph::new();
    let lx = g.input("logits", dtype, &[v, b]).unwrap();
    let lk = g.input("top_k", DType::I32, &[1, b]).unwrap();
    let lp = g.input("params", DType::F32, &[2, b]).unwrap();
    let xs: Vec<f32> = rows.iter().flat_map(|r| r.x.clone()).collect();
    let mut inputs = vec![
        (lx, bytes_of(dtype, &xs)),
        (lk, rows.iter().flat_map(|r| r.k.to_le_bytes()).collect::<Vec<u8>>()),
        (lp, rows.iter().flat_map(|r| [r.p, r.m]).flat_map(f32::to_le_bytes).collect()),
    ];
    let q = match a.post {
        PostSample::None => None,
        PostSample::QSample => {
            let id = g.input("q", DType::F32, &[v, b]).unwrap();
            inputs.push((id, rows.iter().flat_map(|r| r.q.clone()).flat_map(f32::to_le_bytes).collect()));
            Some(id)
        }
        PostSample::Multinomial => {
            let id = g.input("q", DType::I32, &[4, pairs.len()]).unwrap();
            let w: Vec<u8> = pairs
                .iter()
                .flat_map(|&(s, o)| [s as u32, (s >> 32) as u32, o as u32, (o >> 32) as u32])
                .flat_map(u32::to_le_bytes)
                .collect();
            inputs.push((id, w));
            Some(id)
        }
    };
    let idx = g.top_k_top_p_sample(lx, lk, lp, q, TopKTopP { output: FusedOutput::Index, ..a }).unwrap();
    let kept = g.top_k_top_p_sample(lx, lk, lp, q, TopKTopP { output: FusedOutput::Logits, ..a }).unwrap();
    g.set_output(idx);
    g.set_output(kept);
    let mut s = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
    s.plan(&g).unwrap();
    for (id, bytes) in &inputs {
        s.set_input(*id, bytes).unwrap();
    }
    s.compute().unwrap();
    (s.read_i32(idx).unwrap(), s.read_f32(kept).unwrap())
}

/// The reference's answer for the same rows (values rounded to `dtype` first).
fn reference(rows: &[Row], dtype: DType, a: &TopKTopP, pairs: &[(u64, u64)]) -> Vec<Option<(usize, Vec<bool>)>> {
    let round = |t: f32| match dtype {
        DType::F16 => graph::f16::from_f32(t).to_f32(),
        DType::BF16 => graph::bf16::from_f32(t).to_f32(),
        _ => t,
    };
    rows.iter()
        .enumerate()
        .map(|(b, r)| {
            let x: Vec<f64> = r.x.iter().map(|&t| f64::from(round(t))).collect();
            let q: Vec<f64> = r.q.iter().map(|&t| f64::from(t)).collect();
            let post = match a.post {
                PostSample::None => RefPost::None,
                PostSample::QSample => RefPost::QSample(&q),
                PostSample::Multinomial => {
                    let (s, o) = pairs[b.min(pairs.len() - 1)];
                    RefPost::Multinomial(multinomial_uniform(s, o))
                }
            };
            top_k_top_p_row(&x, i64::from(r.k), f64::from(r.p), f64::from(r.m), a, post).map(|p| (p.index, p.kept))
        })
        .collect()
}

/// The survivors of row `b` in the filtered logits (`fill` elsewhere).
fn kept_of(kept: &[f32], v: usize, b: usize, fill: f32) -> Vec<usize> {
    (0..v).filter(|&i| kept[b * v + i] != fill || kept[b * v + i].is_nan()).collect()
}

const X8: [f32; 8] = [1.0, 3.0, 2.0, 0.5, 3.0, -1.0, 2.5, 0.0];

fn attrs(post: PostSample) -> TopKTopP {
    TopKTopP::new(post)
}

/// One scenario: `(index, survivors)` on the row `X8` (order 1, 4, 6, 2, 0, 3, 7, 5).
fn scenario(r: Row, post: PostSample) -> (i32, Vec<usize>) {
    let pairs = [(42u64, 7u64)];
    let (i, kept) = run(std::slice::from_ref(&r), DType::F32, attrs(post), &pairs);
    let want = reference(std::slice::from_ref(&r), DType::F32, &attrs(post), &pairs)[0].clone().unwrap();
    assert_eq!(i[0] as usize, want.0, "the reference agrees");
    let ks = kept_of(&kept, 8, 0, f32::NEG_INFINITY);
    let want_kept: Vec<usize> = (0..8).filter(|&t| want.1[t]).collect();
    assert_eq!(ks, want_kept, "the reference's survivors");
    (i[0], ks)
}

#[test]
fn scenario_01_argmax() {
    assert_eq!(scenario(row(&X8, 0, 1.0, 0.0), PostSample::None), (1, (0..8).collect()));
}

#[test]
fn scenario_02_top_k() {
    assert_eq!(scenario(row(&X8, 3, 1.0, 0.0), PostSample::None), (1, vec![1, 4, 6]));
}

#[test]
fn scenario_03_top_p() {
    // probabilities .307, .307, .186, ...: exclusive sums 0, .307, .614 > .5.
    assert_eq!(scenario(row(&X8, 0, 0.5, 0.0), PostSample::None), (1, vec![1, 4]));
}

#[test]
fn scenario_04_qsample_unsorted_uses_token_columns() {
    let mut r = row(&X8, 0, 1.0, 0.0);
    r.q[4] = 0.1;
    assert_eq!(scenario(r, PostSample::QSample), (4, (0..8).collect()));
}

#[test]
fn scenario_05_top_k_top_p() {
    // softmax over the top 3: .384, .384, .233; exclusive sums 0, .384, .767 > .6.
    assert_eq!(scenario(row(&X8, 3, 0.6, 0.0), PostSample::None), (1, vec![1, 4]));
}

#[test]
fn scenario_06_top_k_qsample_uses_sorted_positions() {
    let mut r = row(&X8, 3, 1.0, 0.0);
    r.q = vec![0.1, 1.0, 1.0, 1.0, 1.0, 1.0, 0.01, 1.0];
    // position 0 (token 1) takes q[0] = 0.1; token 6 is position 2 (q = 1), not column 6.
    assert_eq!(scenario(r, PostSample::QSample), (1, vec![1, 4, 6]));
}

#[test]
fn scenario_07_top_k_multinomial() {
    let (i, kept) = scenario(row(&X8, 3, 1.0, 0.0), PostSample::Multinomial);
    assert_eq!(kept, vec![1, 4, 6]);
    assert!(kept.contains(&(i as usize)));
}

#[test]
fn scenario_08_top_k_min_p_multinomial() {
    // top 5 weights 1, 1, .61, .37, .14 (relative): min-P 0.5 keeps 1, 4, 6.
    let (i, kept) = scenario(row(&X8, 5, 1.0, 0.5), PostSample::Multinomial);
    assert_eq!(kept, vec![1, 4, 6]);
    assert!(kept.contains(&(i as usize)));
}

#[test]
fn scenario_09_top_p_qsample_uses_sorted_positions() {
    let mut r = row(&X8, 0, 0.7, 0.0);
    r.q = vec![5.0, 5.0, 0.01, 5.0, 5.0, 5.0, 5.0, 5.0];
    // nucleus 1, 4, 6 (exclusive sums 0, .307, .614 <= .7); position 2 (token 6) takes q[2].
    assert_eq!(scenario(r, PostSample::QSample), (6, vec![1, 4, 6]));
}

#[test]
fn scenario_10_top_k_top_p_qsample() {
    let mut r = row(&X8, 3, 0.6, 0.0);
    r.q = vec![1.0, 0.5, 0.001, 1.0, 1.0, 1.0, 1.0, 1.0];
    // survivors at positions 0 and 1; q[2] belonged to the removed position 2.
    assert_eq!(scenario(r, PostSample::QSample), (4, vec![1, 4]));
}

#[test]
fn scenario_11_top_k_top_p_multinomial() {
    let (i, kept) = scenario(row(&X8, 3, 0.6, 0.0), PostSample::Multinomial);
    assert_eq!(kept, vec![1, 4]);
    assert!(kept.contains(&(i as usize)));
}

#[test]
fn scenario_12_top_k_top_p_min_p_multinomial() {
    // top 5 probabilities .322, .322, .195, .118, .044: top-P .9 keeps 4, min-P .9 keeps 2.
    let (i, kept) = scenario(row(&X8, 5, 0.9, 0.9), PostSample::Multinomial);
    assert_eq!(kept, vec![1, 4]);
    assert!(kept.contains(&(i as usize)));
}

// ---------------------------------------------------------------- edge rules

fn probs_mode(post: PostSample) -> TopKTopP {
    TopKTopP { input_is_logits: false, ..attrs(post) }
}

#[test]
fn ties_at_the_kth_value_keep_exactly_k_lowest_indices() {
    let (i, kept) = run(&[row(&[1.0, 2.0, 2.0, 2.0, 0.0], 2, 1.0, 0.0)], DType::F32, attrs(PostSample::None), &[]);
    assert_eq!(i, vec![1]);
    assert_eq!(kept_of(&kept, 5, 0, f32::NEG_INFINITY), vec![1, 2]);
}

#[test]
fn ks_max_bounds_top_k_unrounded_and_clamped_to_1024() {
    let x: Vec<f32> = (0..2000).map(|i| ((i * 37) % 101) as f32 / 10.0).collect();
    let fill = f32::NEG_INFINITY;
    // k = 3 with ks_max = 2: skipped; ks_max = 3 (not a multiple of 8): runs.
    for (ks_max, survivors) in [(2, 2000), (3, 3), (1024, 3)] {
        let a = TopKTopP { ks_max, ..attrs(PostSample::None) };
        let (_, kept) = run(&[row(&x, 3, 1.0, 0.0)], DType::F32, a, &[]);
        assert_eq!(kept_of(&kept, 2000, 0, fill).len(), survivors, "ks_max {ks_max}");
    }
    // ks_max above 1024 is 1024: k = 1025 is skipped, k = 1024 runs.
    for (k, survivors) in [(1025, 2000), (1024, 1024)] {
        let a = TopKTopP { ks_max: 4096, ..attrs(PostSample::None) };
        let (_, kept) = run(&[row(&x, k, 1.0, 0.0)], DType::F32, a, &[]);
        assert_eq!(kept_of(&kept, 2000, 0, fill).len(), survivors, "k {k}");
    }
}

#[test]
fn k_equal_to_v_sorts_and_k_above_v_does_not() {
    // The worked example of the contract: q by position when sorted, by token when not.
    let mut r = row(&[1.0, 3.0, 2.0, 0.0], 4, 1.0, 0.0);
    r.q = vec![0.5, 2.0, 0.1, 9.0];
    let mut r2 = r.clone();
    r2.k = 5;
    let mut r3 = r.clone();
    r3.k = 0;
    let (i, _) = run(&[r, r2, r3], DType::F32, attrs(PostSample::QSample), &[]);
    assert_eq!(i, vec![1, 2, 2]);
}

#[test]
fn top_p_at_or_below_zero_keeps_the_first_token_and_sorts() {
    for p in [0.0, -1.0] {
        let mut r = row(&[0.0, 2.0, 2.0, 1.0], 0, p, 0.0);
        r.q = vec![1e-6, 1.0, 1e-6, 1e-6];
        let (i, kept) = run(&[r], DType::F32, attrs(PostSample::QSample), &[]);
        assert_eq!(i, vec![1], "p = {p}");
        assert_eq!(kept_of(&kept, 4, 0, f32::NEG_INFINITY), vec![1]);
    }
}

#[test]
fn top_p_exclusive_prefix_keeps_the_crossing_token_and_an_exact_hit() {
    // probability mode, dyadic values: exact sums.
    let x = [0.5, 0.25, 0.125, 0.125];
    for (p, want) in
        [(0.5, vec![0, 1]), (0.4, vec![0]), (0.75, vec![0, 1, 2]), (0.875, vec![0, 1, 2, 3]), (0.25, vec![0])]
    {
        let (_, kept) = run(&[row(&x, 0, p, 0.0)], DType::F32, probs_mode(PostSample::None), &[]);
        assert_eq!(kept_of(&kept, 4, 0, 0.0), want, "p = {p}");
    }
}

#[test]
fn probability_mode_is_not_renormalised_and_fills_zero() {
    let x = [0.4, 0.3, 0.2, 0.1];
    let (i, kept) = run(&[row(&x, 2, 0.5, 0.0)], DType::F32, probs_mode(PostSample::None), &[]);
    assert_eq!(i, vec![0]);
    assert_eq!(kept, vec![0.4, 0.3, 0.0, 0.0]);
    // Rows need not sum to 1: a row of small values keeps everything under p = 0.5.
    let (_, kept) = run(&[row(&[0.01, 0.02, 0.03], 0, 0.5, 0.0)], DType::F32, probs_mode(PostSample::None), &[]);
    assert_eq!(kept, vec![0.01, 0.02, 0.03]);
}

#[test]
fn min_p_equality_keeps_and_min_p_one_keeps_the_first_maximum() {
    let x = [0.125, 0.5, 0.25, 0.125];
    for (m, want) in [(0.5, vec![1, 2]), (0.25, vec![0, 1, 2, 3]), (0.0, vec![0, 1, 2, 3]), (-1.0, vec![0, 1, 2, 3])] {
        let (_, kept) = run(&[row(&x, 0, 1.0, m)], DType::F32, probs_mode(PostSample::None), &[]);
        assert_eq!(kept_of(&kept, 4, 0, 0.0), want, "m = {m}");
    }
    for m in [1.0, 3.0] {
        let (i, kept) = run(&[row(&[0.3, 0.5, 0.5, 0.1], 0, 1.0, m)], DType::F32, probs_mode(PostSample::None), &[]);
        assert_eq!((i[0], kept_of(&kept, 4, 0, 0.0)), (1, vec![1]), "m = {m}");
    }
}

#[test]
fn min_p_does_not_sort_the_row() {
    // top-K and top-P skipped, min-P on: q is indexed by token.
    let mut r = row(&[3.0, 2.9, 0.0, 2.8], 0, 1.0, 0.5);
    r.q = vec![1.0, 1.0, 1.0, 0.01];
    let (i, kept) = run(&[r], DType::F32, attrs(PostSample::QSample), &[]);
    assert_eq!(kept_of(&kept, 4, 0, f32::NEG_INFINITY), vec![0, 1, 3]);
    assert_eq!(i, vec![3]);
}

#[test]
fn qsample_ties_take_the_earlier_position_and_eps_is_added() {
    // Equal ratios at positions 0 and 1 (tokens 2 and 0 of a sorted row): the earlier wins.
    let mut r = row(&[1.0, 1.0, 1.0], 3, 1.0, 0.0);
    r.q = vec![0.0, 0.0, 0.0];
    let (i, _) = run(&[r], DType::F32, attrs(PostSample::QSample), &[]);
    assert_eq!(i, vec![0]);
    // q = 0 everywhere: eps keeps the division finite, and the largest probability wins.
    let mut r = row(&[0.0, 1.0, 0.5], 0, 1.0, 0.0);
    r.q = vec![0.0; 3];
    let (i, _) = run(&[r], DType::F32, attrs(PostSample::QSample), &[]);
    assert_eq!(i, vec![1]);
}

#[test]
fn bad_rows_give_minus_one() {
    let ni = f32::NEG_INFINITY;
    let rows = [
        row(&[0.0, f32::NAN, 1.0], 0, 1.0, 0.0),
        row(&[0.0, f32::INFINITY, 1.0], 0, 1.0, 0.0),
        row(&[ni, ni, ni], 0, 1.0, 0.0),
        row(&[0.0, 1.0, 2.0], 0, f32::NAN, 0.0),
        row(&[0.0, 1.0, 2.0], 0, 1.0, f32::NAN),
        row(&[0.0, ni, 2.0], 0, 1.0, 0.0),
    ];
    let (i, kept) = run(&rows, DType::F32, attrs(PostSample::None), &[]);
    assert_eq!(i, vec![-1, -1, -1, -1, -1, 2]);
    assert!(kept[..15].iter().all(|t| t.is_nan()));
    let (i, _) = run(
        &[row(&[0.5, 1.5], 0, 1.0, 0.0), row(&[0.5, -0.1], 0, 1.0, 0.0)],
        DType::F32,
        probs_mode(PostSample::None),
        &[],
    );
    assert_eq!(i, vec![-1, -1]);
}

#[test]
fn top_k_guess_never_changes_a_result() {
    let x: Vec<f32> = (0..5000).map(|i| (((i * 7919) % 1009) as f32 / 1009.0 * 8.0).round() / 2.0).collect();
    let mut rows = Vec::new();
    for (k, p) in [(0, 0.3f32), (0, 0.95), (-1, 0.999), (5000, 0.5), (2000, 0.2)] {
        let mut r = row(&x, k, p, 0.0);
        r.q = (0..5000).map(|i| 0.05 + ((i * 31) % 97) as f32 / 50.0).collect();
        rows.push(r);
    }
    let base = run(&rows, DType::F32, attrs(PostSample::QSample), &[]);
    for guess in [-5, 0, 1, 2, 7, 32, 100, 4999, 5000, 100_000] {
        let a = TopKTopP { top_k_guess: guess, ..attrs(PostSample::QSample) };
        assert_eq!(run(&rows, DType::F32, a, &[]), base, "top_k_guess {guess}");
    }
}

#[test]
fn multinomial_reuses_the_last_pair_and_depends_on_nothing_else() {
    let x: Vec<f32> = (0..64).map(|i| (i % 5) as f32 * 0.1).collect();
    let rows: Vec<Row> = (0..6).map(|_| row(&x, 0, 1.0, 0.0)).collect();
    let pairs = [(1u64, 2u64), (3, 4)];
    let (i, _) = run(&rows, DType::F32, attrs(PostSample::Multinomial), &pairs);
    assert!(i[1..].iter().all(|&t| t == i[1]), "rows past q's last reuse its pair: {i:?}");
    // The same row with the same pair in another batch: the same index.
    let (j, _) = run(&rows[..1], DType::F32, attrs(PostSample::Multinomial), &pairs[..1]);
    assert_eq!(j[0], i[0]);
}

// ---------------------------------------------------------------- statistics

/// Chi-squared statistic of `counts` against probabilities `p`.
fn chi2(counts: &[u64], p: &[f64]) -> f64 {
    let n: u64 = counts.iter().sum();
    counts.iter().zip(p).map(|(&c, &pi)| (c as f64 - n as f64 * pi).powi(2) / (n as f64 * pi)).sum()
}

#[test]
fn multinomial_follows_the_survivor_distribution() {
    // ln of [.4, .3, .15, .1, .05]: top-K 4 drops the last; survivors renormalised .4/.95 ...
    let x: Vec<f32> = [0.4f64, 0.3, 0.15, 0.1, 0.05].iter().map(|p| p.ln() as f32).collect();
    let n = 20_000;
    let rows: Vec<Row> = (0..n).map(|_| row(&x, 4, 1.0, 0.0)).collect();
    let pairs: Vec<(u64, u64)> = (0..n as u64).map(|s| (s * 7 + 1, s % 3)).collect();
    let (i, _) = run(&rows, DType::F32, attrs(PostSample::Multinomial), &pairs);
    let mut counts = [0u64; 4];
    for t in i {
        assert!((0..4).contains(&t), "a survivor: {t}");
        counts[t as usize] += 1;
    }
    let p = [0.4 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.1 / 0.95];
    // df = 3: P(chi2 > 30) < 2e-6.
    assert!(chi2(&counts, &p) < 30.0, "{counts:?} vs {p:?}");
    // With min-P 0.3 (keep >= .12 of .4/.95 relative... i.e. prob >= 0.3 max): tokens 0, 1, 2.
    let rows: Vec<Row> = (0..n).map(|_| row(&x, 4, 1.0, 0.3)).collect();
    let (i, _) = run(&rows, DType::F32, attrs(PostSample::Multinomial), &pairs);
    let mut counts = [0u64; 3];
    for t in i {
        assert!((0..3).contains(&t), "a min-P survivor: {t}");
        counts[t as usize] += 1;
    }
    assert!(chi2(&counts, &[0.4 / 0.85, 0.3 / 0.85, 0.15 / 0.85]) < 30.0, "{counts:?}");
}

#[test]
fn multinomial_in_probability_mode_draws_by_the_raw_values() {
    // Unnormalised probabilities .2, .1, .1 (sum .4): draws .5, .25, .25.
    let n = 20_000;
    let rows: Vec<Row> = (0..n).map(|_| row(&[0.2, 0.1, 0.1], 0, 1.0, 0.0)).collect();
    let pairs: Vec<(u64, u64)> = (0..n as u64).map(|s| (s ^ 0xABCDEF, 9)).collect();
    let (i, _) = run(&rows, DType::F32, probs_mode(PostSample::Multinomial), &pairs);
    let mut counts = [0u64; 3];
    for t in i {
        counts[t as usize] += 1;
    }
    assert!(chi2(&counts, &[0.5, 0.25, 0.25]) < 28.0, "{counts:?}");
}

// ---------------------------------------------------------------- property tests

/// A row of length `v` from `seed`: logits (with ties: one value in 4 from 3 levels) or
/// probabilities, and per-row parameters in the regime `regime`.
fn gen_row(seed: u64, v: usize, logits: bool, regime: u32) -> Row {
    let u = |i: u64| f64::from(graph::philox::uniform(seed, 1, i));
    let x: Vec<f32> = (0..v as u64)
        .map(|i| {
            let t = u(i);
            if logits {
                if t < 0.25 { (t * 12.0).floor() as f32 } else { (t * 16.0 - 8.0) as f32 }
            } else if t < 0.25 {
                0.5 / v as f32
            } else {
                (t * 2.0 / v as f64).min(1.0) as f32
            }
        })
        .collect();
    let r = |i: u64| f64::from(graph::philox::uniform(seed, 2, i));
    let k = match regime % 7 {
        0 => 0,
        1 => 1,
        2 => (1 + (r(0) * v.min(1024) as f64) as usize).min(v) as i32,
        3 => v as i32,
        4 => v as i32 + 1,
        5 => -2,
        _ => 1025,
    };
    let p = match (regime / 7) % 5 {
        0 => 1.0,
        1 => 0.0,
        2 => (0.05 + 0.9 * r(1)) as f32,
        3 => (0.9 + 0.0999 * r(1)) as f32,
        _ => 1.5,
    };
    let m = match (regime / 35) % 4 {
        0 => 0.0,
        1 => (0.05 + 0.9 * r(2)) as f32,
        2 => 1.0,
        _ => -0.5,
    };
    let q: Vec<f32> =
        (0..v as u64).map(|i| (-(1.0 - f64::from(graph::philox::uniform(seed, 3, i))).ln()) as f32).collect();
    Row { x, k, p, m, q }
}

fn v_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 1usize..=40,
        3 => 41usize..=3000,
        1 => Just(4097usize),
        1 => Just(33_000usize),
        1 => Just(151_936usize),
        1 => Just(262_144usize),
    ]
}

proptest! {
    // A fixed seed: the same inputs on every run (a near-tie found once stays found, none flakes).
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5EED_F00D),
        ..ProptestConfig::default()
    })]

    #[test]
    fn top_k_top_p_equals_the_reference(
        v in v_strategy(),
        dtype in prop_oneof![Just(DType::F32), Just(DType::F16), Just(DType::BF16)],
        logits in any::<bool>(),
        post in prop_oneof![Just(PostSample::None), Just(PostSample::QSample), Just(PostSample::Multinomial)],
        regimes in proptest::collection::vec(0u32..140, 1..6),
        seed in any::<u64>(),
        guess in -4i32..64,
        ks_max in prop_oneof![Just(1024u32), 1u32..2000],
    ) {
        let rows: Vec<Row> = regimes.iter().enumerate().map(|(i, &g)| gen_row(seed ^ (i as u64) << 40, v, logits, g)).collect();
        let a = TopKTopP { input_is_logits: logits, top_k_guess: guess, ks_max, ..attrs(post) };
        let pairs: Vec<(u64, u64)> = (0..(rows.len() as u64).div_ceil(2)).map(|i| (seed.wrapping_add(i), i * 3)).collect();
        let (idx, kept) = run(&rows, dtype, a, &pairs);
        let want = reference(&rows, dtype, &a, &pairs);
        let fill = if logits { f32::NEG_INFINITY } else { 0.0 };
        for (b, w) in want.iter().enumerate() {
            let (wi, wk) = w.clone().expect("generated rows are good");
            prop_assert_eq!(idx[b] as usize, wi, "row {} (k {}, p {}, m {})", b, rows[b].k, rows[b].p, rows[b].m);
            for t in 0..v {
                let got = kept[b * v + t];
                let expect_kept = wk[t];
                // a survivor keeps its value (which may equal the fill: a -inf logit or a 0 probability)
                if expect_kept {
                    prop_assert_eq!(got.to_bits(), bytes_round(dtype, rows[b].x[t]).to_bits());
                } else {
                    prop_assert_eq!(got.to_bits(), fill.to_bits(), "row {} token {}", b, t);
                }
            }
        }
    }

    #[test]
    fn random_sample_equals_the_sorted_reference(
        n in prop_oneof![4 => 1usize..=50, 3 => 51usize..=5000, 1 => Just(151_936usize), 1 => Just(262_144usize)],
        dtype in prop_oneof![Just(DType::F32), Just(DType::F16), Just(DType::BF16)],
        seed in any::<u64>(),
        params in proptest::collection::vec((0u32..6, 0u32..5, 0u32..4, 0.0f32..1.0), 1..5),
    ) {
        let rows: Vec<(Vec<f32>, [f32; 3], i32)> = params.iter().enumerate().map(|(i, &(kr, pr, tr, rv))| {
            let s = seed ^ (i as u64) << 40;
            let x: Vec<f32> = (0..n as u64).map(|j| {
                let t = f64::from(graph::philox::uniform(s, 5, j));
                if t < 0.2 { (t * 20.0).floor() as f32 } else { (t * 10.0 - 5.0) as f32 }
            }).collect();
            let topk = match kr { 0 => 0, 1 => 1, 2 => -3, 3 => n as i32 + 2, _ => 1 + (rv * n.min(300) as f32) as i32 };
            let topp = match pr { 0 => 0.0, 1 => 1.0, 2 => 1.7, _ => 0.05 + rv * 0.9 };
            let temp = match tr { 0 => 0.0, 1 => 1.0, _ => 0.2 + 1.5 * rv };
            let random = if kr == 5 && pr == 4 { 0.0 } else { (0.01 + 0.98 * f64::from(graph::philox::uniform(s, 6, 0))) as f32 };
            (x, [random, topp, temp], topk)
        }).collect();
        let mut g = Graph::new();
        let b = rows.len();
        let lx = g.input("x", dtype, &[n, b]).unwrap();
        let lp = g.input("params", DType::F32, &[3, b]).unwrap();
        let lk = g.input("topk", DType::I32, &[1, b]).unwrap();
        let y = g.random_sample(lx, lp, lk, IndexDType::U32, false).unwrap();
        g.set_output(y);
        let mut s = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
        s.plan(&g).unwrap();
        let xs: Vec<f32> = rows.iter().flat_map(|r| r.0.clone()).collect();
        s.set_input(lx, &bytes_of(dtype, &xs)).unwrap();
        s.set_input_f32(lp, &rows.iter().flat_map(|r| r.1).collect::<Vec<_>>()).unwrap();
        s.set_input_i32(lk, &rows.iter().map(|r| r.2).collect::<Vec<_>>()).unwrap();
        s.compute().unwrap();
        let got = s.read_i32(y).unwrap();
        for (i, r) in rows.iter().enumerate() {
            let x: Vec<f64> = r.0.iter().map(|&t| f64::from(bytes_round(dtype, t))).collect();
            let want = random_sample_row(&x, f64::from(r.1[0]), f64::from(r.1[1]), f64::from(r.1[2]), i64::from(r.2));
            prop_assert_eq!(Some(got[i] as usize), want, "row {} params {:?} topk {}", i, r.1, r.2);
        }
    }
}

/// `t` rounded to `dtype`, as f32.
fn bytes_round(dtype: DType, t: f32) -> f32 {
    match dtype {
        DType::F16 => graph::f16::from_f32(t).to_f32(),
        DType::BF16 => graph::bf16::from_f32(t).to_f32(),
        _ => t,
    }
}

#[test]
fn random_sample_f64_rows_tell_apart_what_f32_cannot() {
    // 1 + 1e-12 and 1 + 2e-12 are the same f32; in f64 the later one is the maximum.
    let x = [1.0f64, 1.0 + 2e-12, 1.0 + 1e-12, 0.0];
    let mut g = Graph::new();
    let lx = g.input("x", DType::I32, &[8, 1]).unwrap();
    let lp = g.input("params", DType::F32, &[3, 1]).unwrap();
    let lk = g.input("topk", DType::I32, &[1, 1]).unwrap();
    let y = g.random_sample(lx, lp, lk, IndexDType::I8, true).unwrap();
    g.set_output(y);
    let mut s = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
    s.plan(&g).unwrap();
    let bits: Vec<u8> = x.iter().flat_map(|t| t.to_le_bytes()).collect();
    s.set_input(lx, &bits).unwrap();
    s.set_input_i32(lk, &[0]).unwrap();
    for (params, want) in [([0.0f32, 0.9, 1.0], 1), ([0.3, 1.0, 1e-14], 1), ([0.8, 1.0, 1e-12], 2)] {
        s.set_input_f32(lp, &params).unwrap();
        s.compute().unwrap();
        let got = s.read_i32(y).unwrap()[0];
        let r = random_sample_row(&x, f64::from(params[0]), f64::from(params[1]), f64::from(params[2]), 0);
        assert_eq!(Some(got as usize), r, "{params:?}");
        assert_eq!(got, want, "{params:?}");
    }
}

#[test]
fn random_sample_index_overflow_is_a_build_error() {
    for (dt, ok) in [(IndexDType::I8, 128), (IndexDType::U8, 256), (IndexDType::I16, 32_768), (IndexDType::U16, 65_536)]
    {
        let mut g = Graph::new();
        let lp = g.input("params", DType::F32, &[3, 1]).unwrap();
        let lk = g.input("topk", DType::I32, &[1, 1]).unwrap();
        let fits = g.input("fits", DType::F32, &[ok, 1]).unwrap();
        assert!(g.random_sample(fits, lp, lk, dt, false).is_ok());
        let over = g.input("over", DType::F32, &[ok + 1, 1]).unwrap();
        let e = g.random_sample(over, lp, lk, dt, false).unwrap_err().to_string();
        assert!(e.contains("index overflow"), "{e}");
    }
}
