//! Statistical tests of the random samplers: chi-squared of fixed-seed draws against the exact
//! distribution (computed in f64 from the logits), with enough draws that a wrong distribution
//! (a 10% different temperature, a missing truncation) fails. The critical value is the 0.1%
//! point; every test also checks that the wrong distribution is rejected.

mod common;
use common::*;
use sampling::{Candidates, Sampler};

const DRAWS: usize = 100_000;

fn assert_fits(counts: &[u64], probs: &[f64], wrong: &[f64], what: &str) {
    let (stat, df) = chi2(counts, probs);
    assert!(stat < chi2_crit(df), "{what}: chi2 = {stat:.1} with {df} df (crit {:.1})", chi2_crit(df));
    let (bad, bdf) = chi2(counts, wrong);
    assert!(bad > chi2_crit(bdf), "{what}: the wrong distribution was not rejected (chi2 = {bad:.1}, {bdf} df)");
    // Total variation as a second check, against its sampling noise: E|c/n - p| is about
    // sqrt(2 p / (pi n)) per bin, so the expected TV of a correct sampler is
    // 0.5 * sqrt(2 / (pi n)) * sum sqrt(p); allow twice that plus 0.005.
    let n: u64 = counts.iter().sum();
    let n = n as f64;
    let tv: f64 = counts.iter().zip(probs).map(|(&c, &p)| (c as f64 / n - p).abs()).sum::<f64>() / 2.0;
    let noise = 0.5 * (2.0 / (std::f64::consts::PI * n)).sqrt() * probs.iter().map(|p| p.sqrt()).sum::<f64>();
    assert!(tv < 2.0 * noise + 0.005, "{what}: total variation {tv} (noise level {noise})");
}

fn scaled(logits: &[f32], t: f32) -> Vec<f32> {
    logits.iter().map(|x| x / t).collect()
}

#[test]
fn dist_on_the_vocabulary_view() {
    // 3000 tokens: spans three 1024-blocks, so the block choice and the in-block scan are tested.
    let logits = gaussian_logits(3000, 21, 2.5);
    let draws = draws("dist(seed=1234)", &logits, DRAWS);
    let counts = counts_of(&draws, logits.len());
    assert_fits(&counts, &softmax64(&logits), &softmax64(&scaled(&logits, 1.1)), "dist");
}

#[test]
fn temp_then_dist() {
    let logits = gaussian_logits(200, 5, 1.5);
    let draws = draws("temp(t=0.7);dist(seed=99)", &logits, DRAWS);
    let counts = counts_of(&draws, logits.len());
    assert_fits(&counts, &softmax64(&scaled(&logits, 0.7)), &softmax64(&scaled(&logits, 0.77)), "temp+dist");
}

#[test]
fn dist_after_truncation() {
    // top_k(20) then dist: the exact distribution is the softmax over the 20 largest.
    let logits = gaussian_logits(500, 8, 1.0);
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    let mut trunc = vec![f32::NEG_INFINITY; logits.len()];
    for &i in &order[..20] {
        trunc[i] = logits[i];
    }
    let draws = draws("top_k(k=20);dist(seed=3)", &logits, DRAWS);
    let counts = counts_of(&draws, logits.len());
    let mut wrong = trunc.clone();
    wrong[order[20]] = logits[order[20]]; // top-21
    wrong[order[0]] -= 0.2;
    assert_fits(&counts, &softmax64(&trunc), &softmax64(&wrong), "top_k+dist");
}

#[test]
fn mirostat_v2_first_step() {
    // Fresh sampler every draw (mu = 2 tau): keeps tokens with surprise <= mu, draws from the
    // renormalised softmax. p = [0.4, 0.3, 0.2, 0.1]: surprises 1.32, 1.74, 2.32, 3.32 bits;
    // tau = 1.2 -> mu = 2.4: keeps {0, 1, 2} with 4/9, 3/9, 2/9.
    let logits = logits_of(&[0.4, 0.3, 0.2, 0.1]);
    let mut counts = vec![0u64; 4];
    for step in 0..DRAWS as u64 {
        let mut m = sampling::samplers::MirostatV2::new(77, 1.2, 0.1).unwrap();
        m.set_step(step);
        let mut c = Candidates::from_row(&logits).unwrap();
        m.apply(&mut c).unwrap();
        counts[c.selected_token().unwrap() as usize] += 1;
    }
    assert_fits(&counts, &[4.0 / 9.0, 3.0 / 9.0, 2.0 / 9.0, 0.0], &[0.4, 0.3, 0.2, 0.1], "mirostat_v2");
}

#[test]
fn adaptive_p_disabled_is_plain_dist() {
    let logits = gaussian_logits(100, 4, 1.0);
    let draws = draws("adaptive_p(target=-1,seed=8)", &logits, DRAWS);
    let counts = counts_of(&draws, logits.len());
    assert_fits(&counts, &softmax64(&logits), &softmax64(&scaled(&logits, 1.1)), "adaptive_p(-1)");
}

#[test]
fn xtc_coin_frequency() {
    // p = 0.3, t = 0.2 on [0.5, 0.25, 0.125, 0.125]: when the coin hits (prob 0.3) token 0 is
    // removed. Then dist: P(0) = 0.7 * 0.5 = 0.35; P(1) = 0.7*0.25 + 0.3*0.5 = 0.325;
    // P(2) = P(3) = 0.7*0.125 + 0.3*0.25 = 0.1625.
    let logits = logits_of(&[0.5, 0.25, 0.125, 0.125]);
    let draws = draws("xtc(p=0.3,t=0.2,seed=5);dist(seed=6)", &logits, DRAWS);
    let counts = counts_of(&draws, 4);
    assert_fits(&counts, &[0.35, 0.325, 0.1625, 0.1625], &[0.5, 0.25, 0.125, 0.125], "xtc");
}

#[test]
fn draws_are_reproducible() {
    let logits = gaussian_logits(5000, 2, 2.0);
    assert_eq!(draws("top_p(p=0.9);dist(seed=42)", &logits, 50), draws("top_p(p=0.9);dist(seed=42)", &logits, 50));
    assert_ne!(draws("dist(seed=42)", &logits, 50), draws("dist(seed=43)", &logits, 50));
}

#[test]
fn mirostat_v1_first_step() {
    // p ∝ 1/(i+1)^2 over 4 tokens, tau = 1: k = 2 (derived in known_answers.rs), so a fresh
    // sampler draws from {0.8, 0.2}.
    let ps: Vec<f64> = (0..4).map(|i| 1.0 / f64::from((i + 1) * (i + 1))).collect();
    let s: f64 = ps.iter().sum();
    let norm: Vec<f64> = ps.iter().map(|p| p / s).collect();
    let logits = logits_of(&norm);
    let mut counts = vec![0u64; 4];
    for step in 0..DRAWS as u64 {
        let mut m = sampling::samplers::Mirostat::new(12, 1.0, 0.1, 100).unwrap();
        m.set_step(step);
        let mut c = Candidates::from_row(&logits).unwrap();
        m.apply(&mut c).unwrap();
        counts[c.selected_token().unwrap() as usize] += 1;
    }
    assert_fits(&counts, &[0.8, 0.2, 0.0, 0.0], &norm, "mirostat");
}

#[test]
fn adaptive_p_first_step() {
    // target 0.25 on p = [1/2, 1/4, 1/8, 1/8]: transformed logits 5 - 10 d^2/(1 + d) with
    // d = |p - 0.25| / 0.3 (derived in known_answers.rs); a fresh sampler draws from their softmax.
    let logits = logits_of(&[0.5, 0.25, 0.125, 0.125]);
    let f = |d: f64| (5.0 - 10.0 * d * d / (1.0 + d)) as f32;
    let transformed = [f(0.25 / 0.3), f(0.0), f(0.125 / 0.3), f(0.125 / 0.3)];
    let mut counts = vec![0u64; 4];
    for step in 0..DRAWS as u64 {
        let mut a = sampling::samplers::AdaptiveP::new(0.25, 0.9, 4).unwrap();
        a.set_step(step);
        let mut c = Candidates::from_row(&logits).unwrap();
        a.apply(&mut c).unwrap();
        counts[c.selected_token().unwrap() as usize] += 1;
    }
    assert_fits(&counts, &softmax64(&transformed), &[0.5, 0.25, 0.125, 0.125], "adaptive_p");
}
