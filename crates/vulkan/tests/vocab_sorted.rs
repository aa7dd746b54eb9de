//! Backend sampling on Vulkan of the stages whose CPU samplers used to sort the whole vocabulary,
//! on the vocabulary (`crates/sampling/src/backend/vocab_sorted.rs`): dynamic `temp_ext`,
//! mirostat (v1) and typical, alone and mixed with the other stages in one batch, every token
//! equal to the sequence's CPU chain run alone (same seed and step), on rows with `-inf` entries
//! from the start, ties, and a single finite entry; at 3000 tokens over many steps and at 151936
//! over two (lavapipe is slow). Bytes read back equal the reservation; the validation layer must
//! stay silent.

mod common;

use graph::{DType, Graph};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::{Chain, Sampler};
use sched::Scheduler;
use std::sync::{Arc, Mutex};
use vulkan::{Options, VulkanBackend};

/// Deterministic logits for (step, row): kind `(step + row) % 6` is a spread of scales, `-inf`
/// entries (every 5th), ties (values on a grid of 0.5) or (every 4th step) a single finite entry.
fn logits_for(v: usize, step: usize, row: usize) -> Vec<f32> {
    let kind = (step + row) % 6;
    let scale = [2.0f32, 6.0, 12.0, 20.0, 8.0, 4.0][kind];
    let mut x: Vec<f32> =
        (0..v as u64).map(|i| (graph::philox::uniform(row as u64 + 91, step as u64, i) - 0.5) * scale).collect();
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

const CHAINS: [&str; 14] = [
    "temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=1)",
    "penalties(last_n=16,repeat=1.3,freq=0.1);temp_ext(t=1.0,delta=0.7,exponent=2);top_k(k=40);dist(seed=2)",
    "temp(t=0.7);temp_ext(t=0.9,delta=0.3,exponent=0.5);min_p(p=0.05);dist(seed=3)",
    "temp_ext(t=0.8,delta=0.5,exponent=1);top_p(p=0.9);dist(seed=4)",
    "temp_ext(t=0.5,delta=0.5,exponent=0);greedy",
    "mirostat(tau=5,eta=0.1,m=100,seed=7)",
    "temp(t=0.9);mirostat(tau=3,eta=0.2,m=0,seed=8)",
    "temp_ext(t=1.2,delta=0.4,exponent=1);mirostat(tau=6,eta=0.1,m=20,seed=10)",
    "typical(p=0.9);dist(seed=20)",
    "temp(t=0.8);typical(p=0.5,min_keep=5);dist(seed=21)",
    "penalties(last_n=8,repeat=1.2);typical(p=0.95);top_k(k=20);dist(seed=22)",
    "typical(p=0.7);min_p(p=0.1);greedy",
    "top_k(k=40);temp(t=0.8);dist(seed=12)",
    "dist(seed=13)",
];

fn run(v: usize, steps: usize) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let opts = Options { validation: true, log: Some(log.clone()), ..Options::default() };
    let vk = VulkanBackend::with_options(opts).unwrap();
    let mut seqs = Sequences::new(1).unwrap();
    let mut refs: Vec<Chain> = Vec::new();
    for (i, spec) in CHAINS.iter().enumerate() {
        let c = Chain::parse(spec).unwrap();
        refs.push(c.clone());
        seqs.set(SeqId(i as u32), SeqConfig::new(c));
    }
    let n = CHAINS.len();
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[v, n]).unwrap();
    let rows: Vec<(SeqId, usize)> = (0..n).map(|r| (SeqId(r as u32), r)).collect();
    let mut tail = Tail::attach(&mut g, logits, &rows, &seqs, &vk).unwrap();
    for (i, (_, p)) in tail.placement().iter().enumerate() {
        assert!(!p.contains('-'), "chain {i} `{}` should run on Vulkan: {p}", CHAINS[i]);
    }
    let mut sched = Scheduler::new(vec![Box::new(vk), Box::new(cpu::CpuBackend::with_threads(1))]).unwrap();
    sched.plan(&g).unwrap();
    for step in 0..steps {
        let all: Vec<f32> = (0..n).flat_map(|r| logits_for(v, step, r)).collect();
        sched.set_input_f32(logits, &all).unwrap();
        tail.set_inputs(&mut sched, &seqs).unwrap();
        sched.compute().unwrap();
        let out = tail.sample(&mut sched, &mut seqs).unwrap();
        assert_eq!(out.bytes_read, tail.reserved_bytes(), "step {step}");
        for r in &out.rows {
            let i = r.seq.0 as usize;
            refs[i].set_step(seqs.step(r.seq).unwrap());
            let want = refs[i].sample(&logits_for(v, step, i)).unwrap();
            let got = r.result.as_ref().unwrap().token;
            assert_eq!(got, Some(want), "v {v}, step {step}, {} ({})", r.seq, CHAINS[i]);
            tail.accept(&mut seqs, r.seq, &[want]).unwrap();
        }
    }
    let msgs = log.lock().unwrap();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}

#[test]
fn sorted_stages_on_the_vocabulary_on_vulkan_match_each_chain_alone() {
    let Some(probe) = common::vulkan("sorted_stages_on_the_vocabulary_on_vulkan_match_each_chain_alone") else {
        return;
    };
    drop(probe);
    run(3000, 24);
}

#[test]
fn sorted_stages_on_the_vocabulary_on_vulkan_at_151936() {
    let Some(probe) = common::vulkan("sorted_stages_on_the_vocabulary_on_vulkan_at_151936") else { return };
    drop(probe);
    run(151_936, 2);
}
