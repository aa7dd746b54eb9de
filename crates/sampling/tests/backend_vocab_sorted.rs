//! Backend sampling of the stages whose CPU samplers used to sort the whole vocabulary, on the
//! vocabulary (no `top_k` before them): the dynamic temperature (`temp_ext` with `delta > 0`),
//! mirostat (v1) and locally typical sampling (a mask: a CPU suffix after it continues from the
//! survivors in token order). Every chain's tokens over many steps must equal its
//! CPU chain's, token for token, in one mixed batch, at a small vocabulary and at 151936, on rows
//! of several kinds: spreads from flat to peaked, rows with `-inf` entries from the start, rows
//! of many ties, and a row with one finite entry (entropy 0: a dynamic temperature of 0).
//! Also: on the vocabulary view, the CPU chain's new order keeps every token of a chain whose
//! next stage sorts anyway (`top_k`), against the same chain on the sorted list.

mod common;

use graph::{DType, Graph};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::{Candidates, Chain, Sampler, TokenData};
use sched::Scheduler;

/// Deterministic logits for (step, row): kind `(step + row) % 6` is a spread of scales, `-inf`
/// entries (every 5th), ties (values on a grid of 0.5) or a single finite entry.
pub fn logits_for(v: usize, step: usize, row: usize) -> Vec<f32> {
    let kind = (step + row) % 6;
    let scale = [2.0f32, 6.0, 12.0, 20.0, 8.0, 4.0][kind];
    let mut x = common::xorshift_logits(v, step as u64 * 7919 + row as u64 * 104_729 + 12_345, scale);
    match kind {
        3 => x.iter_mut().step_by(5).for_each(|e| *e = f32::NEG_INFINITY),
        4 => x.iter_mut().for_each(|e| *e = (*e * 2.0).round() / 2.0),
        5 if step % 4 == 1 => {
            let keep = (step * 31 + row * 17) % v;
            x.iter_mut().enumerate().filter(|(i, _)| *i != keep).for_each(|(_, e)| *e = f32::NEG_INFINITY);
        }
        _ => {}
    }
    x
}

/// Runs `chains` as one mixed batch for `steps` steps at vocabulary `v` and checks every token
/// against the chain run alone on the CPU; returns the placements.
fn run(v: usize, steps: usize, chains: &[&str]) -> Vec<String> {
    let mut seqs = Sequences::new(1).unwrap();
    let mut refs: Vec<Chain> = Vec::new();
    for (i, spec) in chains.iter().enumerate() {
        let chain = Chain::parse(spec).unwrap();
        refs.push(chain.clone());
        seqs.set(SeqId(i as u32), SeqConfig::new(chain));
    }
    let n = chains.len();
    let rows: Vec<(SeqId, usize)> = (0..n).map(|i| (SeqId(i as u32), i)).collect();
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[v, n]).unwrap();
    let mut tail = Tail::attach(&mut g, logits, &rows, &seqs, &cpu::CpuBackend::new()).unwrap();
    let mut sched = Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
    sched.plan(&g).unwrap();
    for step in 0..steps {
        let all: Vec<f32> = (0..n).flat_map(|r| logits_for(v, step, r)).collect();
        sched.set_input_f32(logits, &all).unwrap();
        tail.set_inputs(&mut sched, &seqs).unwrap();
        sched.compute().unwrap();
        let out = tail.sample(&mut sched, &mut seqs).unwrap();
        assert_eq!(out.bytes_read, tail.reserved_bytes());
        for row in &out.rows {
            let r = row.seq.0 as usize;
            let want = refs[r].sample(&logits_for(v, step, r)).unwrap();
            let got = row.result.as_ref().unwrap().token;
            assert_eq!(got, Some(want), "v {v} step {step} chain {r} `{}` ({})", chains[r], tail.describe());
            tail.accept(&mut seqs, row.seq, &[want]).unwrap();
        }
    }
    tail.placement().into_iter().map(|(_, p)| p).collect()
}

/// The chains: each stage alone, after temp and penalties, followed by top_k, min_p, top_p, dist
/// and greedy.
pub const CHAINS: [&str; 21] = [
    "temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=1)",
    "penalties(last_n=16,repeat=1.3,freq=0.1);temp_ext(t=1.0,delta=0.7,exponent=2);top_k(k=40);dist(seed=2)",
    "temp(t=0.7);temp_ext(t=0.9,delta=0.3,exponent=0.5);min_p(p=0.05);dist(seed=3)",
    "temp_ext(t=0.8,delta=0.5,exponent=1);top_p(p=0.9);dist(seed=4)",
    "temp_ext(t=0.5,delta=0.5,exponent=1);dist(seed=5)",
    "temp_ext(t=0.3,delta=0.5,exponent=0);greedy",
    "mirostat(tau=5,eta=0.1,m=100,seed=7)",
    "temp(t=0.9);mirostat(tau=3,eta=0.2,m=0,seed=8)",
    "penalties(last_n=8,repeat=1.2);mirostat(tau=4,eta=0.3,m=2000,seed=9)",
    "temp_ext(t=1.2,delta=0.4,exponent=1);mirostat(tau=6,eta=0.1,m=20,seed=10)",
    "mirostat(tau=2,eta=0.5,m=2,seed=11)",
    "temp_ext(t=0.8,delta=0.5,exponent=1);top_k(k=3);greedy",
    "typical(p=0.9);dist(seed=20)",
    "temp(t=0.8);typical(p=0.5,min_keep=5);dist(seed=21)",
    "penalties(last_n=8,repeat=1.2);typical(p=0.95);top_k(k=20);dist(seed=22)",
    "typical(p=0.7);min_p(p=0.1);temp(t=1.2);dist(seed=23)",
    "typical(p=0.9);greedy",
    "typical(p=0.9);top_p(p=0.8);dist(seed=24)",
    "temp_ext(t=0.8,delta=0.5,exponent=1);typical(p=0.9);dist(seed=25)",
    "typical(p=0);dist(seed=26)",
    "typical(p=0.9);temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=27)",
];

/// Where each of [`CHAINS`] runs.
pub const PLACEMENTS: [&str; 21] = [
    "+temp_ext +dist",
    "+penalties +temp_ext +top_k +dist",
    "+temp +temp_ext +min_p +dist",
    "+temp_ext +top_p +dist",
    "+temp_ext +dist",
    "+temp_ext +greedy",
    "+mirostat",
    "+temp +mirostat",
    "+penalties +mirostat",
    "+temp_ext +mirostat",
    "+mirostat",
    "+temp_ext +top_k +greedy",
    "+typical +dist",
    "+temp +typical +dist",
    "+penalties +typical +top_k +dist",
    "+typical +min_p +temp +dist",
    "+typical +greedy",
    "+typical -top_p -dist",
    "+temp_ext +typical +dist",
    "+typical +dist",
    "+typical -temp_ext -dist",
];

#[test]
fn sorted_stages_on_the_vocabulary_match_the_cpu_chain_at_a_small_vocabulary() {
    assert_eq!(run(1000, 60, &CHAINS), PLACEMENTS);
}

#[test]
fn sorted_stages_on_the_vocabulary_match_the_cpu_chain_at_151936() {
    assert_eq!(run(151_936, 6, &CHAINS), PLACEMENTS);
}

/// `spec` on `logits` as an explicit list sorted by logit descending (ties by lower id): the CPU
/// samplers' list paths, which keep llama.cpp's sorted order.
fn sample_sorted_list(chain: &mut Chain, logits: &[f32]) -> Option<u32> {
    let mut list: Vec<TokenData> =
        logits.iter().enumerate().map(|(i, &l)| TokenData { id: i as u32, logit: l, p: 0.0 }).collect();
    list.sort_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
    let mut cur = Candidates::from_list(list, logits.len()).unwrap();
    chain.apply(&mut cur).unwrap();
    cur.selected_token()
}

#[test]
fn the_vocabulary_order_keeps_the_tokens_of_a_chain_that_sorts_next() {
    // temp_ext followed by top_k: the vocabulary view (unsorted) and the sorted list give the same
    // tokens, draw for draw.
    for spec in [
        "temp_ext(t=0.8,delta=0.5,exponent=1);top_k(k=40);dist(seed=3)",
        "temp_ext(t=1.5,delta=1.0,exponent=0.5);top_k(k=5);temp(t=0.7);dist(seed=4)",
    ] {
        let (mut a, mut b) = (Chain::parse(spec).unwrap(), Chain::parse(spec).unwrap());
        for step in 0..400 {
            let x = logits_for(1000, step, step / 6);
            let got = a.sample(&x).unwrap();
            let want = sample_sorted_list(&mut b, &x).unwrap();
            assert_eq!(got, want, "`{spec}` step {step}");
            b.accept(want);
        }
    }
}

// ------------------------------------------------------------------ statistics

/// Chi-squared critical values at p = 0.001 for 1..=15 degrees of freedom.
const CHI2_999: [f64; 15] =
    [10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70];

const SV: usize = 16;

fn small_row() -> Vec<f32> {
    (0..SV).map(|i| ((i * 7919) % 23) as f32 * 0.2 - 2.0).collect()
}

/// The token counts of `reps` steps of `batch` sequences drawing `spec` on [`small_row`] on the
/// CPU backend's graph path, every sequence given a fresh chain (`SEED` replaced by a new seed)
/// every step, so stateful stages (mirostat's `mu`) draw from their initial state.
fn fresh_draw_counts(spec: &str, batch: usize, reps: usize) -> Vec<u64> {
    let chain =
        |s: usize, rep: usize| Chain::parse(&spec.replace("SEED", &(10_000 + rep * batch + s).to_string())).unwrap();
    let mut seqs = Sequences::new(1).unwrap();
    for s in 0..batch {
        seqs.set(SeqId(s as u32), SeqConfig::new(chain(s, 0)));
    }
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[SV, batch]).unwrap();
    let rows: Vec<(SeqId, usize)> = (0..batch).map(|s| (SeqId(s as u32), s)).collect();
    let mut tail = Tail::attach(&mut g, logits, &rows, &seqs, &cpu::CpuBackend::with_threads(1)).unwrap();
    for (_, p) in tail.placement() {
        assert!(!p.contains('-'), "{spec}: every stage should run on the backend: {p}");
    }
    let mut sched = Scheduler::new(vec![Box::new(cpu::CpuBackend::with_threads(1))]).unwrap();
    sched.plan(&g).unwrap();
    let all: Vec<f32> = (0..batch).flat_map(|_| small_row()).collect();
    let mut counts = vec![0u64; SV];
    for rep in 0..reps {
        for s in 0..batch {
            seqs.set(SeqId(s as u32), SeqConfig::new(chain(s, rep)));
        }
        sched.set_input_f32(logits, &all).unwrap();
        tail.set_inputs(&mut sched, &seqs).unwrap();
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

/// The distribution of the surviving candidates of `spec` on [`small_row`] (the CPU chain's `p`).
fn chain_distribution(spec: &str) -> Vec<f64> {
    let want = Chain::parse(&spec.replace("SEED", "0")).unwrap().run(&small_row()).unwrap();
    let mut p = vec![0.0f64; SV];
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
    for t in 0..SV {
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
fn draws_on_the_vocabulary_follow_the_chain_distribution() {
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
            assert!(kept > 2 && kept < SV, "{spec}: the truncation should matter ({kept} kept)");
        }
        assert_fits(spec, &fresh_draw_counts(spec, 64, 250), &p);
    }
}
