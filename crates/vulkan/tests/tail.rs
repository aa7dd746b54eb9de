//! Backend sampling on Vulkan (`sampling::backend::Tail` with the Vulkan backend holding the
//! logits, the CPU as the fallback): a mixed batch over many steps whose every token equals the
//! sequence's CPU chain run alone (same seed and step), bytes read back equal to the reservation,
//! no re-plan on steady steps, normal and staged memory; the three-sequence tail's placement and
//! plan as an `insta` snapshot; speculative verification (one-hot and sampled drafts) equal to the
//! CPU verifier. The validation layer must stay silent.

mod common;
#[path = "../../sampling/tests/scenarios/mod.rs"]
mod scenarios;

use graph::{DType, Graph};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::{Chain, Sampler};
use sched::Scheduler;
use std::sync::{Arc, Mutex};
use vulkan::{Options, VulkanBackend};

const V: usize = 3000;

fn logits_for(step: usize, row: usize) -> Vec<f32> {
    let step = if row >= 6 { 0 } else { step };
    let scale = 1.0 + (row % 4) as f32 * 2.0;
    (0..V as u64).map(|i| (graph::philox::uniform(row as u64 + 77, step as u64, i) - 0.5) * scale).collect()
}

const CHAINS: [&str; 13] = [
    "greedy",
    "top_k(k=40);temp(t=0.8);dist(seed=3)",
    "min_p(p=0.05);temp(t=0.9);dist(seed=4)",
    "top_k(k=50);top_p(p=0.9);min_p(p=0.1);temp(t=0.7);dist(seed=5)",
    "typical(p=0.9);dist(seed=6)",
    "temp(t=0.9);logit_bias(5=2,9=-inf);dist(seed=8)",
    "penalties(last_n=8,freq=0.004,present=0.002);greedy",
    "top_k(k=40);xtc(p=0.7,t=0.03);top_n_sigma(n=2);dist(seed=10)",
    "dist(seed=11)",
    "top_k(k=40);mirostat(tau=3,eta=0.3,m=20,seed=12)",
    // top-p on the whole vocabulary: the top_p_mask op, then the draw from the masked row.
    "top_p(p=0.9);temp(t=0.8);dist(seed=13)",
    "temp(t=0.7);top_p(p=0.5,min_keep=2);min_p(p=0.1);dist(seed=14)",
    // Penalties over the whole history (the counts are device state, any window).
    "penalties(last_n=-1,repeat=1.2,freq=0.01,present=0.05);top_k(k=20);temp(t=0.9);dist(seed=15)",
];

fn mixed_batch(staged: bool) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let opts = Options { validation: true, staged, log: Some(log.clone()), ..Options::default() };
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
    let logits = g.input("logits", DType::F32, &[V, n]).unwrap();
    let rows: Vec<(SeqId, usize)> = (0..n).map(|r| (SeqId(r as u32), r)).collect();
    let mut tail = Tail::attach(&mut g, logits, &rows, &seqs, &vk).unwrap();
    let placement = tail.placement();
    assert_eq!(placement[10].1, "+top_p +temp +dist", "top_p on the vocabulary runs on Vulkan");
    assert_eq!(placement[11].1, "+temp +top_p +min_p +dist");
    assert_eq!(placement[6].1, "+penalties +greedy");
    assert_eq!(
        placement[12].1, "+penalties +top_k +temp +dist",
        "whole-history penalties (device-state counts) run on Vulkan"
    );
    let mut sched = Scheduler::new(vec![Box::new(vk), Box::new(cpu::CpuBackend::with_threads(1))]).unwrap();
    sched.plan(&g).unwrap();
    let plans = sched.stats().plans;
    for step in 0..30 {
        let all: Vec<f32> = (0..n).flat_map(|r| logits_for(step, r)).collect();
        sched.plan(&g).unwrap();
        sched.set_input_f32(logits, &all).unwrap();
        tail.set_inputs(&mut sched, &mut seqs).unwrap();
        sched.compute().unwrap();
        let out = tail.sample(&mut sched, &mut seqs).unwrap();
        assert_eq!(out.bytes_read, tail.reserved_bytes(), "step {step}");
        for r in &out.rows {
            let i = r.seq.0 as usize;
            refs[i].set_step(seqs.step(r.seq).unwrap());
            let want = refs[i].sample(&logits_for(step, i)).unwrap();
            let got = r.result.as_ref().unwrap().token;
            assert_eq!(got, Some(want), "staged {staged}, step {step}, {} ({})", r.seq, CHAINS[i]);
            tail.accept(&mut seqs, r.seq, &[want]).unwrap();
        }
    }
    assert_eq!(sched.stats().plans, plans, "steady steps re-planned");
    let msgs = log.lock().unwrap();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}

#[test]
fn mixed_batch_on_vulkan_matches_each_chain_alone() {
    let Some(probe) = common::vulkan("mixed_batch_on_vulkan_matches_each_chain_alone") else { return };
    drop(probe);
    for staged in [false, true] {
        mixed_batch(staged);
    }
}

#[test]
fn three_sequence_tail_on_vulkan() {
    let Some(vk) = common::vulkan("three_sequence_tail_on_vulkan") else { return };
    let mut seqs = Sequences::new(1).unwrap();
    let c = |s: &str| Chain::parse(s).unwrap();
    seqs.set(SeqId(0), SeqConfig::new(c("top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist(seed=1)")));
    seqs.set(SeqId(1), SeqConfig::new(c("greedy")).with_logprobs(3));
    seqs.set(SeqId(2), SeqConfig::new(c("min_p(p=0.05);temp(t=0);typical(p=0.9);dist(seed=2)")).with_candidates());
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[32000, 3]).unwrap();
    let rows = [(SeqId(0), 0), (SeqId(1), 1), (SeqId(2), 2)];
    let tail = Tail::attach(&mut g, logits, &rows, &seqs, &vk).unwrap();
    let mut sched = Scheduler::new(vec![Box::new(vk), Box::new(cpu::CpuBackend::with_threads(1))]).unwrap();
    sched.plan(&g).unwrap();
    let text =
        format!("{}\nreserved {} bytes per step\n\n{}", tail.describe(), tail.reserved_bytes(), sched.plan_text());
    insta::assert_snapshot!("tail_three_sequences_vulkan", text);
}

#[test]
fn a_token_below_f32_resolution_is_drawable_on_vulkan() {
    let Some(vk) = common::vulkan("a_token_below_f32_resolution_is_drawable_on_vulkan") else { return };
    assert_eq!(scenarios::tiny_token(Box::new(vk)), "+dist");
}

#[test]
fn speculative_verification_on_vulkan_equals_the_cpu_verifier() {
    // A sequence with 4 outputs and a draft each step: every drafted output's token is decided on
    // Vulkan (`spec_verify`, the list form after top-k and the vocabulary form), only tokens come
    // back (16 bytes), and the accepted prefix equals `speculative::verify` on the CPU.
    let Some(probe) = common::vulkan("speculative_verification_on_vulkan_equals_the_cpu_verifier") else { return };
    drop(probe);
    // The fourth: whole-history penalties, its counts a device state tensor and each drafted
    // output's draft added on Vulkan.
    for spec in [
        "top_k(k=30);temp(t=0.8);dist(seed=61)",
        "min_p(p=0.01);temp(t=0.9);dist(seed=62)",
        "greedy",
        "penalties(last_n=-1,repeat=1.3,present=0.5);top_k(k=30);temp(t=0.8);dist(seed=63)",
        // A reasoning budget: drafted outputs past it are forced (11, then 3) on Vulkan too.
        "reasoning_budget(budget=1,start=7|14,end=3,forced=11 3,state=counting);top_k(k=30);dist(seed=64)",
    ] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let vk =
            VulkanBackend::with_options(Options { validation: true, log: Some(log.clone()), ..Options::default() })
                .unwrap();
        let cpu = Box::new(cpu::CpuBackend::with_threads(1));
        let r = scenarios::verification(spec, Box::new(vk), Some(cpu), V, 24, 6.0, logits_for);
        assert!(!r.placement.contains('-'), "{spec}: {}", r.placement);
        assert_eq!(r.reserved, 16, "{spec}: 4 tokens");
        assert!(r.accepted > 3 && r.rejected > 3, "{spec}: {r:?}");
        let msgs = log.lock().unwrap();
        assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
    }
}

#[test]
fn speculative_verification_of_sampled_drafts_on_vulkan_equals_the_cpu_verifier() {
    // Sampled drafts with their distributions `q` (up to 8 pairs, mass on tokens the target
    // filters out), every third step a deterministic draft through the same tail: each drafted
    // output's token is decided on Vulkan (`spec_verify_sampled`, the list form after top-k and
    // the vocabulary form with params and a top-p mask), only tokens come back, and the accepted
    // prefix equals `speculative::verify` with `DraftProbs::Sampled` on the CPU, 32 steps a chain.
    let Some(probe) = common::vulkan("speculative_verification_of_sampled_drafts_on_vulkan_equals_the_cpu_verifier")
    else {
        return;
    };
    drop(probe);
    for spec in [
        "top_k(k=30);temp(t=0.8);dist(seed=61)",
        "min_p(p=0.01);temp(t=0.9);dist(seed=62)",
        "top_p(p=0.9);dist(seed=65)",
        "greedy",
    ] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let vk =
            VulkanBackend::with_options(Options { validation: true, log: Some(log.clone()), ..Options::default() })
                .unwrap();
        let cpu = Box::new(cpu::CpuBackend::with_threads(1));
        let r = scenarios::verification_sampled(spec, Box::new(vk), Some(cpu), V, 32, 6.0, 8, logits_for);
        assert!(!r.placement.contains('-'), "{spec}: {}", r.placement);
        assert_eq!(r.reserved, 16, "{spec}: 4 tokens");
        assert!(r.accepted > 3 && r.rejected > 3, "{spec}: {r:?}");
        let msgs = log.lock().unwrap();
        assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
    }
}
