//! Statistical tests of the random backend stages (the draw, after temperature, min-p, top-k and
//! top-p as graph ops, top-p also on the whole vocabulary; mirostat v1 and v2, whose truncation depends on `mu`; xtc, whose coin
//! mixes two distributions): chi-squared against the exact distribution that the CPU chain
//! reports, with fixed seeds and enough draws that a wrong distribution fails. And the resolution of the draw: a
//! token of probability 2^-26 (below f32's 2^-24) is drawn exactly where the uniform falls in its
//! bracket, on the graph path and on the CPU chain alike.
mod common;
mod scenarios;

use common::CHI2_999;

use graph::{DType, Graph};
use sampling::Chain;
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sched::Scheduler;

const V: usize = 16;

fn row() -> Vec<f32> {
    (0..V).map(|i| ((i * 7919) % 23) as f32 * 0.2 - 2.0).collect()
}

/// Runs `spec` (with `seed=` appended to its dist stage per sequence) for `batch` sequences over
/// `steps` steps on the CPU backend's graph path; returns the counts of each token.
fn draw_counts(spec: &str, batch: usize, steps: usize) -> Vec<u64> {
    let chain = |s: usize, _: usize| Chain::parse(&spec.replace("dist", &format!("dist(seed={})", 1000 + s))).unwrap();
    counts_of(spec, batch, steps, chain, false)
}

/// Draws `spec` (`SEED` replaced by a fresh seed for every draw) from sequences in their initial
/// state: every step each of `batch` sequences gets a new chain (same structure, so no re-attach),
/// so stateful stages (mirostat's `mu`) always start from their initial state.
fn fresh_draw_counts(spec: &str, batch: usize, reps: usize) -> Vec<u64> {
    let chain =
        |s: usize, rep: usize| Chain::parse(&spec.replace("SEED", &(10_000 + rep * batch + s).to_string())).unwrap();
    counts_of(spec, batch, reps, chain, true)
}

/// The token counts of `steps` steps of `batch` sequences on [`row`], sequence `s` starting with
/// `chain(s, 0)`, and at every step `rep` given `chain(s, rep)` anew if `renew`.
fn counts_of(spec: &str, batch: usize, steps: usize, chain: impl Fn(usize, usize) -> Chain, renew: bool) -> Vec<u64> {
    let mut seqs = Sequences::new(1).unwrap();
    for s in 0..batch {
        seqs.set(SeqId(s as u32), SeqConfig::new(chain(s, 0)));
    }
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[V, batch]).unwrap();
    let rows: Vec<(SeqId, usize)> = (0..batch).map(|s| (SeqId(s as u32), s)).collect();
    let mut tail = Tail::attach(&mut g, logits, &rows, &seqs, &cpu::CpuBackend::with_threads(1)).unwrap();
    for (_, p) in tail.placement() {
        assert!(!p.contains('-'), "{spec}: every stage should run on the backend: {p}");
    }
    let mut sched = Scheduler::new(vec![Box::new(cpu::CpuBackend::with_threads(1))]).unwrap();
    sched.plan(&g).unwrap();
    let all: Vec<f32> = (0..batch).flat_map(|_| row()).collect();
    let mut counts = vec![0u64; V];
    for rep in 0..steps {
        if renew {
            for s in 0..batch {
                seqs.set(SeqId(s as u32), SeqConfig::new(chain(s, rep)));
            }
        }
        sched.set_input_f32(logits, &all).unwrap();
        tail.set_inputs(&mut sched, &mut seqs).unwrap();
        sched.compute().unwrap();
        let out = tail.sample(&mut sched, &mut seqs).unwrap();
        for r in &out.rows {
            let t = r.result.as_ref().unwrap().token.unwrap();
            counts[t as usize] += 1;
            tail.accept(&mut seqs, r.seq, &[t]).unwrap();
        }
    }
    counts
}

/// The distribution of the surviving candidates of `spec` on [`row`] (the CPU chain's `p`).
fn chain_distribution(spec: &str) -> Vec<f64> {
    let want = Chain::parse(&spec.replace("SEED", "0")).unwrap().run(&row()).unwrap();
    let mut p = vec![0.0f64; V];
    for c in &want.candidates {
        p[c.id as usize] = f64::from(c.p);
    }
    p
}

/// Chi-squared of `counts` against `p` (cells with an expected count below 5 pooled), asserted
/// below the p = 0.001 critical value; a token of probability 0 must never be drawn.
fn assert_fits(what: &str, counts: &[u64], p: &[f64]) {
    let n = counts.iter().sum::<u64>() as f64;
    for (t, &c) in counts.iter().enumerate() {
        assert!(p[t] > 0.0 || c == 0, "{what}: token {t} has probability 0 but was drawn {c} times");
    }
    let (mut chi2, mut cells, mut pooled_e, mut pooled_o) = (0.0, 0, 0.0, 0.0);
    for t in 0..V {
        let e = p[t] * n;
        if e == 0.0 {
            continue;
        }
        if e < 5.0 {
            pooled_e += e;
            pooled_o += counts[t] as f64;
        } else {
            chi2 += (counts[t] as f64 - e).powi(2) / e;
            cells += 1;
        }
    }
    if pooled_e > 0.0 {
        chi2 += (pooled_o - pooled_e).powi(2) / pooled_e;
        cells += 1;
    }
    let df = cells - 1;
    assert!(df >= 1, "{what}: too few cells");
    assert!(
        chi2 < CHI2_999[df - 1],
        "{what}: chi2 = {chi2:.2} with {df} degrees of freedom; counts {counts:?}, p {p:?}"
    );
}

#[test]
fn mirostat_draws_follow_the_truncated_distribution() {
    // mu = 2 tau decides the truncation: v1 through its Zipf estimate of k, v2 by surprise.
    for spec in [
        "top_k(k=16);mirostat(tau=2,eta=0.1,m=8,seed=SEED)",
        "top_k(k=16);temp(t=0.6);mirostat(tau=2,eta=0.1,seed=SEED)",
        "top_k(k=16);mirostat_v2(tau=1.5,eta=0.1,seed=SEED)",
    ] {
        let p = chain_distribution(spec);
        let kept = p.iter().filter(|&&x| x > 0.0).count();
        assert!(kept > 2 && kept < V, "{spec}: the truncation should matter ({kept} kept)");
        assert_fits(spec, &fresh_draw_counts(spec, 64, 250), &p);
    }
}

#[test]
fn xtc_draws_mix_its_two_distributions() {
    // The step's coin applies xtc with probability 0.5: half the mass from each branch.
    let spec = "top_k(k=16);xtc(p=0.5,t=0.08,seed=SEED);dist(seed=SEED)";
    let on = chain_distribution("top_k(k=16);xtc(p=1,t=0.08);dist");
    let off = chain_distribution("top_k(k=16);dist");
    assert_ne!(on, off, "the threshold should remove tokens");
    let mix: Vec<f64> = on.iter().zip(&off).map(|(a, b)| 0.5 * a + 0.5 * b).collect();
    let counts = fresh_draw_counts(spec, 64, 250);
    assert_fits(spec, &counts, &mix);
}

#[test]
fn backend_draws_follow_the_chain_distribution() {
    for spec in [
        "dist",
        "temp(t=0.7);dist",
        "min_p(p=0.05);temp(t=1.3);dist",
        "top_k(k=8);dist",
        "top_k(k=10);top_p(p=0.9);temp(t=1.5);dist",
        "top_k(k=12);min_p(p=0.2);dist",
        "logit_bias(3=2.5);dist",
        // top-p on the whole vocabulary: the top_p_mask op, then the draw from the masked row.
        "top_p(p=0.8);dist",
        "temp(t=0.8);top_p(p=0.6,min_keep=3);temp(t=1.4);dist",
    ] {
        let (batch, steps) = (64, 250);
        assert_fits(spec, &draw_counts(spec, batch, steps), &chain_distribution(spec));
    }
}

#[test]
fn a_token_below_f32_resolution_is_drawable() {
    // (`scenarios::tiny_token`, run on Vulkan too by `crates/vulkan/tests/tail.rs`.)
    let placement = scenarios::tiny_token(Box::new(cpu::CpuBackend::with_threads(1)));
    assert_eq!(placement, "+dist");
}

#[test]
fn vocabulary_selections_follow_their_distributions() {
    // No top_k before them: mirostat_v2's surprise mask over the whole row and its draw in token
    // order, and xtc's mask with the step's coin (their vocabulary forms in `samplers/`).
    for spec in ["mirostat_v2(tau=1.5,eta=0.1,seed=SEED)", "temp(t=0.8);mirostat_v2(tau=2,eta=0.1,seed=SEED)"] {
        let p = chain_distribution(spec);
        let kept = p.iter().filter(|&&x| x > 0.0).count();
        assert!(kept > 2 && kept < V, "{spec}: the truncation should matter ({kept} kept)");
        assert_fits(spec, &fresh_draw_counts(spec, 64, 250), &p);
    }
    let spec = "xtc(p=0.5,t=0.08,seed=SEED);dist(seed=SEED)";
    let on = chain_distribution("xtc(p=1,t=0.08);dist");
    let off = chain_distribution("dist");
    assert_ne!(on, off, "the threshold should remove tokens");
    let mix: Vec<f64> = on.iter().zip(&off).map(|(a, b)| 0.5 * a + 0.5 * b).collect();
    assert_fits(spec, &fresh_draw_counts(spec, 64, 250), &mix);
}

/// Mirostat (v1), the dynamic temperature and typical on the whole vocabulary (no `top_k` before
/// them: their vocabulary forms in `samplers/`), drawn by sequences in their initial state.
#[test]
fn vocabulary_sorted_stages_follow_the_chain_distribution() {
    for (spec, truncates) in [
        ("mirostat(tau=2,eta=0.1,m=8,seed=SEED)", true),
        ("temp(t=0.6);mirostat(tau=2,eta=0.1,m=0,seed=SEED)", true),
        ("temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=SEED)", false),
        ("typical(p=0.7);dist(seed=SEED)", true),
        ("temp(t=1.3);typical(p=0.5,min_keep=3);dist(seed=SEED)", true),
    ] {
        let p = chain_distribution(spec);
        let kept = p.iter().filter(|&&x| x > 0.0).count();
        if truncates {
            assert!(kept > 2 && kept < V, "{spec}: the truncation should matter ({kept} kept)");
        }
        assert_fits(spec, &fresh_draw_counts(spec, 64, 250), &p);
    }
}
