//! Reviewed snapshots (`insta`) of a logits tail with three differently configured sequences on the
//! CPU backend: the placement of every stage, the groups, and the scheduler's plan (the Vulkan
//! counterpart is `crates/vulkan/tests/tail.rs`).

use graph::{DType, Graph};
use sampling::Chain;
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};

/// Three sequences: a full backend chain, greedy with log-probabilities, and a chain that the CPU
/// finishes after a backend prefix (a zero temperature, which has no backend form, ends it), with
/// candidates reserved.
pub fn three_sequences() -> Sequences {
    let mut seqs = Sequences::new(1).unwrap();
    let c = |s: &str| Chain::parse(s).unwrap();
    seqs.set(SeqId(0), SeqConfig::new(c("top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist(seed=1)")));
    seqs.set(SeqId(1), SeqConfig::new(c("greedy")).with_logprobs(3));
    seqs.set(SeqId(2), SeqConfig::new(c("min_p(p=0.05);temp(t=0);typical(p=0.9);dist(seed=2)")).with_candidates());
    seqs
}

#[test]
fn three_sequence_tail_on_cpu() {
    let seqs = three_sequences();
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[32000, 3]).unwrap();
    let rows = [(SeqId(0), 0), (SeqId(1), 1), (SeqId(2), 2)];
    let tail = Tail::attach(&mut g, logits, &rows, &seqs, &cpu::CpuBackend::with_threads(1)).unwrap();
    let mut sched = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::with_threads(1))]).unwrap();
    sched.plan(&g).unwrap();
    let text =
        format!("{}\nreserved {} bytes per step\n\n{}", tail.describe(), tail.reserved_bytes(), sched.plan_text());
    insta::assert_snapshot!("tail_three_sequences_cpu", text);
}
