//! Backend sampling of stages on the whole vocabulary (no `top_k` before them): top-p as the
//! `top_p_mask` op, min-p's cut, and the CPU suffix that continues from a masked vocabulary. Every
//! chain's tokens over many steps must equal its CPU chain's, token for token, in a mixed batch,
//! at a small vocabulary (short rows: decided in llama.cpp's f32 arithmetic) and at 151936.

mod common;

use graph::{DType, Graph};
use sampling::Chain;
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sched::Scheduler;

/// Deterministic logits for (step, row) with a spread of scales (flat to peaked rows).
fn logits_for(v: usize, step: usize, row: usize) -> Vec<f32> {
    let scale = [2.0f32, 6.0, 12.0, 20.0][row % 4];
    common::xorshift_logits(v, step as u64 * 7919 + row as u64 * 104_729 + 12_345, scale)
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

const CHAINS: [&str; 10] = [
    "top_p(p=0.9);dist(seed=1)",
    "temp(t=0.7);top_p(p=0.8);dist(seed=2)",
    "top_p(p=0.95);temp(t=1.4);dist(seed=3)",
    "top_p(p=0.5,min_keep=3);min_p(p=0.2);dist(seed=4)",
    "top_p(p=0.9);greedy",
    "top_p(p=0.9);top_k(k=20);temp(t=0.8);dist(seed=5)",
    "top_p(p=0.3);typical(p=0.9);dist(seed=6)",
    "min_p(p=0.05);temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=7)",
    "min_p(p=0.1);top_p(p=0.9);dist(seed=8)",
    "top_p(p=0);dist(seed=9)",
];

const PLACEMENTS: [&str; 10] = [
    "+top_p +dist",
    "+temp +top_p +dist",
    "+top_p +temp +dist",
    "+top_p +min_p +dist",
    "+top_p +greedy",
    "+top_p +top_k +temp +dist",
    "+top_p -typical -dist",
    "+min_p -temp_ext -dist",
    "+min_p -top_p -dist",
    "+top_p +dist",
];

#[test]
fn vocabulary_stages_match_the_cpu_chain_at_a_small_vocabulary() {
    assert_eq!(run(1000, 60, &CHAINS), PLACEMENTS);
}

#[test]
fn vocabulary_stages_match_the_cpu_chain_at_151936() {
    assert_eq!(run(151_936, 6, &CHAINS), PLACEMENTS);
}
