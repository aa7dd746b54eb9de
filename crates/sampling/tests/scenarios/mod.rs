//! Backend sampling scenarios written once and run on every backend: `sampling`'s own tests run
//! them on the CPU backend, `crates/vulkan/tests/tail.rs` includes this file (`#[path]`) and runs
//! them on Vulkan. Each takes the backend that holds the logits (and, where the tail may finish a
//! stage on the CPU, a fallback) and checks the graph path against the CPU side: the verifier, the
//! chain. The caller adds what is specific to its backend (placement, validation messages).
#![allow(dead_code)]

use graph::{DType, Graph};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::speculative::{DraftProbs, accept_rows, verify};
use sampling::{Chain, Sampler};
use sched::{Backend, Scheduler};

/// How a verification run went: drafts accepted in full or in part, steps with a rejection, and
/// the tail's placement of the sequence (`+stage` on the backend, `-stage` on the CPU).
#[derive(Debug)]
pub struct Verified {
    pub accepted: usize,
    pub rejected: usize,
    pub placement: String,
    /// Bytes read back per step (equal to the reservation every step).
    pub reserved: usize,
}

/// Speculative verification through backend sampling: one sequence of `spec` owns 4 output rows of
/// `v` logits (`logits_for(step, j)` plus `peak` on token `7 j + step`, so the drafts, which guess
/// that token two times in three, are often right); each of `steps` steps sets a draft of
/// `step % 4` tokens, runs the tail on `backend` (with `fallback` for CPU suffixes), checks that
/// only the reservation came back, takes the accepted prefix from the tokens (`accept_rows`) and
/// requires it to equal `speculative::verify` on the same logits, token for token; then accepts it.
pub fn verification(
    spec: &str,
    backend: Box<dyn Backend>,
    fallback: Option<Box<dyn Backend>>,
    v: usize,
    steps: usize,
    peak: f32,
    logits_for: impl Fn(usize, usize) -> Vec<f32>,
) -> Verified {
    let seqs = Sequences::new(4).unwrap();
    run_verification(spec, backend, fallback, seqs, v, steps, peak, logits_for, |step| {
        let draft = (0..step % 4)
            .map(|j| if (step + j) % 3 == 0 { 999 - j as u32 } else { ((7 * j + step) % v) as u32 })
            .collect();
        (draft, None)
    })
}

/// A (seed, step) whose 53-bit draw uniform is at least `1 - 2^-27` (found by search; checked by
/// [`tiny_token`]).
pub const TINY_SEED: u64 = 7;
/// See [`TINY_SEED`].
pub const TINY_STEP: u64 = 100_990_465;

/// A token of probability 1.5e-8 (weight 2^-26 against 1: its bracket is `[1/(1+2^-26), 1)`,
/// below f32's resolution of the total) is drawn by `dist` on `backend` exactly at the step whose
/// uniform falls in it, and not at steps 0, 1 and 2; the CPU chain draws the same. Returns the
/// tail's placement.
pub fn tiny_token(backend: Box<dyn Backend>) -> String {
    let u = graph::philox::uniform_f64(
        TINY_SEED,
        TINY_STEP,
        graph::philox::stream::element(graph::philox::stream::DRAW, 0),
    );
    assert!(u >= 1.0 - 2f64.powi(-27), "{u}");
    let logits = [0.0f32, (2f64.powi(-26)).ln() as f32];
    let spec = format!("dist(seed={TINY_SEED})");
    let mut seqs = Sequences::new(1).unwrap();
    seqs.set(SeqId(0), SeqConfig::new(Chain::parse(&spec).unwrap()));
    let mut g = Graph::new();
    let x = g.input("logits", DType::F32, &[2, 1]).unwrap();
    let mut tail = Tail::attach(&mut g, x, &[(SeqId(0), 0)], &seqs, backend.as_ref()).unwrap();
    let placement = tail.placement()[0].1.clone();
    let mut sched = Scheduler::new(vec![backend]).unwrap();
    sched.plan(&g).unwrap();
    for (step, want) in [(TINY_STEP, 1), (0, 0), (1, 0), (2, 0)] {
        seqs.set_step(SeqId(0), step).unwrap();
        sched.set_input_f32(x, &logits).unwrap();
        tail.set_inputs(&mut sched, &mut seqs).unwrap();
        sched.compute().unwrap();
        let out = tail.sample(&mut sched, &mut seqs).unwrap();
        assert_eq!(out.token(0).unwrap(), want, "graph path, step {step}");
        let mut chain = Chain::parse(&spec).unwrap();
        chain.set_step(step);
        assert_eq!(chain.sample(&logits).unwrap(), want, "CPU chain, step {step}");
    }
    placement
}

/// [`verification`] with sampled drafts: the tail's `Sequences` reserve `q_len` entries per
/// drafted output, and each draft token is drawn (with its own uniform, not the verifier's
/// streams) from a distribution `q` of up to `q_len` tokens in a shuffled order: the peaked token
/// most often, token `v - 1 - j` (far in the tail, often filtered out by the target) and a few
/// others with uneven weights (the peaked token about 0.65 of `q`). Every third step's draft is deterministic (`set_draft`), which the
/// same tail verifies as a one-entry `q`. The accepted prefix taken from the tokens read back must
/// equal `speculative::verify` with `DraftProbs::Sampled` (or `Deterministic`) token for token.
#[allow(clippy::too_many_arguments)]
pub fn verification_sampled(
    spec: &str,
    backend: Box<dyn Backend>,
    fallback: Option<Box<dyn Backend>>,
    v: usize,
    steps: usize,
    peak: f32,
    q_len: usize,
    logits_for: impl Fn(usize, usize) -> Vec<f32>,
) -> Verified {
    let seqs = Sequences::with_draft_distributions(4, q_len).unwrap();
    run_verification(spec, backend, fallback, seqs, v, steps, peak, logits_for, |step| {
        let n = step % 4;
        let mut qs: Vec<Vec<(u32, f32)>> = Vec::new();
        let mut draft: Vec<u32> = Vec::new();
        for j in 0..n {
            let mut q: Vec<(u32, f32)> = vec![((7 * j + step) % v) as u32, (v - 1 - j) as u32]
                .into_iter()
                .chain((0..q_len.saturating_sub(2)).map(|i| ((step * 31 + j * 17 + i * 101 + 3) % v) as u32))
                .enumerate()
                .map(|(i, t)| (t, if i == 0 { 24.0 } else { [6.0f32, 1.5, 0.7, 2.0, 0.2, 1.1][i % 6] }))
                .collect();
            q.sort_by_key(|e| e.0);
            q.dedup_by_key(|e| e.0);
            q.truncate(q_len);
            // A shuffled order (the verifier's sums follow the list's order).
            let len = q.len();
            q.rotate_left((step + j) % len);
            let u = graph::philox::uniform_f64(0xd1ce, (step * 4 + j) as u64, 0);
            let total: f64 = q.iter().map(|e| f64::from(e.1)).sum();
            let mut cum = 0.0;
            let mut d = q[len - 1].0;
            for &(t, w) in &q {
                cum += f64::from(w) / total;
                if u < cum {
                    d = t;
                    break;
                }
            }
            draft.push(d);
            qs.push(q);
        }
        // Every third step's draft is deterministic: the same tail verifies it as a one-entry `q`.
        (draft, (step % 3 != 2).then_some(qs))
    })
}

/// The loop of [`verification`] and [`verification_sampled`]: `draft_for(step)` gives the step's
/// draft and, for a sampled draft, each token's `q`.
#[allow(clippy::too_many_arguments)]
fn run_verification(
    spec: &str,
    backend: Box<dyn Backend>,
    fallback: Option<Box<dyn Backend>>,
    mut seqs: Sequences,
    v: usize,
    steps: usize,
    peak: f32,
    logits_for: impl Fn(usize, usize) -> Vec<f32>,
    mut draft_for: impl FnMut(usize) -> (Vec<u32>, Option<Vec<Vec<(u32, f32)>>>),
) -> Verified {
    let seq = SeqId(2);
    seqs.set(seq, SeqConfig::new(Chain::parse(spec).unwrap()));
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[v, 4]).unwrap();
    let rows: Vec<(SeqId, usize)> = (0..4).map(|j| (seq, j)).collect();
    let mut tail = Tail::attach(&mut g, logits, &rows, &seqs, backend.as_ref()).unwrap();
    let placement = tail.placement()[0].1.clone();
    let reserved = tail.reserved_bytes();
    let mut sched = Scheduler::new(std::iter::once(backend).chain(fallback).collect()).unwrap();
    sched.plan(&g).unwrap();
    let mut reference = Chain::parse(spec).unwrap();
    let (mut accepted, mut rejected) = (0, 0);
    for step in 0..steps {
        let rows_now: Vec<Vec<f32>> = (0..4)
            .map(|j| {
                let mut r = logits_for(step, j);
                r[(7 * j + step) % v] += peak;
                r
            })
            .collect();
        let (draft, qs) = draft_for(step);
        match &qs {
            Some(qs) => seqs.set_draft_sampled(seq, &draft, qs).unwrap(),
            None => seqs.set_draft(seq, &draft).unwrap(),
        }
        sched.set_input_f32(logits, &rows_now.concat()).unwrap();
        tail.set_inputs(&mut sched, &mut seqs).unwrap();
        sched.compute().unwrap();
        let out = tail.sample(&mut sched, &mut seqs).unwrap();
        assert_eq!(out.bytes_read, tail.reserved_bytes(), "{spec}: step {step}");
        let n = draft.len();
        let emitted: Vec<u32> = (0..=n).map(|j| out.token(j).unwrap()).collect();
        let got = accept_rows(&seqs.get(seq).unwrap().chain, &emitted, &draft).unwrap();
        let mut cpu = reference.clone();
        cpu.set_step(seqs.step(seq).unwrap());
        let refs: Vec<&[f32]> = rows_now[..=n].iter().map(|r| &r[..]).collect();
        let probs = qs.as_deref().map_or(DraftProbs::Deterministic, DraftProbs::Sampled);
        let want = verify(&mut cpu, &refs, &draft, probs).unwrap();
        assert_eq!(got, want, "{spec}: step {step}, draft {draft:?}, q {qs:?}");
        accepted += got.accepted;
        rejected += usize::from(got.accepted < n);
        tail.accept(&mut seqs, seq, &got.tokens).unwrap();
        for &t in &got.tokens {
            reference.accept(t);
        }
    }
    Verified { accepted, rejected, placement, reserved }
}
