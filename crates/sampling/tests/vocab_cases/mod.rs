//! The cases of the stages on the whole vocabulary, written once and run on every backend: the
//! selections on the vocabulary (mirostat_v2, min_p with `min_keep > 1` or `p > 1`, top_n_sigma,
//! xtc: [`CHAINS`]) and the stages that order the vocabulary (dynamic temp_ext,
//! mirostat v1, typical: [`SORTED_CHAINS`]), the vocabulary stages and top-p after a cut on the
//! vocabulary ([`AFTER_CUT`], on the masked row), the history stages (dry, adaptive-p, the
//! constraints, the reasoning budget: [`HISTORY_CHAINS`]), tail-free and softmax on every form
//! ([`TAIL_FREE_CHAINS`]), top-p approximated by top-k ([`APPROX_TOP_P`]), with [`run`] and
//! [`run_resampled`], which check a mixed batch against each chain run alone on the CPU. `tests/backend_vocab*.rs` run them on the CPU backend,
//! `crates/vulkan/tests/vocab_select.rs` and `vocab_sorted.rs` include this file (`#[path]`) and
//! run them on Vulkan. Every chain's tokens over many steps must equal its CPU chain's, token for
//! token, in one mixed batch, on rows with `-inf` entries from the start and rows of tied logits.
#![allow(dead_code)]

use graph::{DType, Graph};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::{Chain, Sampler};
use sched::{Backend, Scheduler};

/// xorshift logits in `[-scale/2, scale/2)`.
fn xorshift_logits(n: usize, state: u64, scale: f32) -> Vec<f32> {
    let mut s = state | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
        })
        .collect()
}

/// Logits for (vocabulary, step, row).
pub type Logits = fn(usize, usize, usize) -> Vec<f32>;

/// Deterministic logits for (step, row): a spread of scales; a third of the rows have a `-inf`
/// entry every 7 tokens, a quarter are rounded to multiples of 0.5 (ties, also at the maximum).
pub fn logits_for(v: usize, step: usize, row: usize) -> Vec<f32> {
    let scale = [2.0f32, 6.0, 12.0, 20.0][(row + step) % 4];
    let mut l = xorshift_logits(v, step as u64 * 7919 + row as u64 * 104_729 + 4242, scale);
    if (row + step) % 3 == 1 {
        for x in l.iter_mut().step_by(7) {
            *x = f32::NEG_INFINITY;
        }
    }
    if (row + 2 * step) % 4 == 2 {
        for x in l.iter_mut() {
            *x = (*x * 2.0).round() / 2.0;
        }
    }
    l
}

/// Deterministic logits for (step, row) of [`SORTED_CHAINS`]: kind `(step + row) % 6` is a spread
/// of scales, `-inf` entries (every 5th), ties (values on a grid of 0.5) or (every 4th step) a
/// single finite entry (entropy 0: a dynamic temperature of 0).
pub fn sorted_logits(v: usize, step: usize, row: usize) -> Vec<f32> {
    let kind = (step + row) % 6;
    let scale = [2.0f32, 6.0, 12.0, 20.0, 8.0, 4.0][kind];
    let mut x = xorshift_logits(v, step as u64 * 7919 + row as u64 * 104_729 + 12_345, scale);
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

/// One mixed batch: sequence `i` runs `chains[i]` on logits row `i` of `[v, n]`, the logits held by
/// `backend` (with `fallback` for CPU suffixes); `refs` are the chains to run alone on the CPU.
pub struct Batch {
    pub seqs: Sequences,
    pub refs: Vec<Chain>,
    pub tail: Tail,
    pub sched: Scheduler,
    pub logits: graph::NodeId,
}

impl Batch {
    /// The batch of the chains `chains` (SPEC strings).
    pub fn new(
        v: usize,
        chains: &[&str],
        config: impl Fn(Chain) -> SeqConfig,
        backend: Box<dyn Backend>,
        fallback: Option<Box<dyn Backend>>,
    ) -> Batch {
        let refs: Vec<Chain> = chains.iter().map(|spec| Chain::parse(spec).unwrap()).collect();
        Batch::of(v, refs, config, backend, fallback)
    }

    /// The batch of the chains `refs` (built in code).
    pub fn of(
        v: usize,
        refs: Vec<Chain>,
        config: impl Fn(Chain) -> SeqConfig,
        backend: Box<dyn Backend>,
        fallback: Option<Box<dyn Backend>>,
    ) -> Batch {
        let mut seqs = Sequences::new(1).unwrap();
        for (i, chain) in refs.iter().enumerate() {
            seqs.set(SeqId(i as u32), config(chain.clone()));
        }
        let n = refs.len();
        let rows: Vec<(SeqId, usize)> = (0..n).map(|i| (SeqId(i as u32), i)).collect();
        let mut g = Graph::new();
        let logits = g.input("logits", DType::F32, &[v, n]).unwrap();
        let tail = Tail::attach(&mut g, logits, &rows, &seqs, &*backend).unwrap();
        let mut sched = Scheduler::new([backend].into_iter().chain(fallback).collect()).unwrap();
        sched.plan(&g).unwrap();
        Batch { seqs, refs, tail, sched, logits }
    }

    /// One step on the rows `all` (`[v, n]`, row-major by sequence); nothing accepted.
    pub fn step(&mut self, all: &[f32]) -> sampling::backend::StepOutput {
        self.sched.set_input_f32(self.logits, all).unwrap();
        self.tail.set_inputs(&mut self.sched, &mut self.seqs).unwrap();
        self.sched.compute().unwrap();
        self.tail.sample(&mut self.sched, &mut self.seqs).unwrap()
    }

    /// Accepts `token` for sequence `seq`.
    pub fn accept(&mut self, seq: usize, token: sampling::Token) {
        self.tail.accept(&mut self.seqs, SeqId(seq as u32), &[token]).unwrap();
    }

    /// The placements, in sequence order.
    pub fn placements(&self) -> Vec<String> {
        self.tail.placement().into_iter().map(|(_, p)| p).collect()
    }
}

/// Runs `chains` as one mixed batch for `steps` steps at vocabulary `v` on the rows of `logits_for`,
/// the logits held by `backend` (with `fallback` for CPU suffixes), and checks every token (and the
/// bytes read back) against the chain run alone on the CPU; returns the placements.
pub fn run(
    v: usize,
    steps: usize,
    chains: &[&str],
    logits_for: Logits,
    backend: Box<dyn Backend>,
    fallback: Option<Box<dyn Backend>>,
) -> Vec<String> {
    run_resampled(v, steps, chains, logits_for, backend, fallback, 0)
}

/// [`run`], where every `every`-th step (0: never) is first sampled on another step's logits and
/// not accepted, on the backend and by the CPU chains alike: a stage whose state moved while
/// sampling (not only on accept) diverges from its CPU chain.
pub fn run_resampled(
    v: usize,
    steps: usize,
    chains: &[&str],
    logits_for: Logits,
    backend: Box<dyn Backend>,
    fallback: Option<Box<dyn Backend>>,
    every: usize,
) -> Vec<String> {
    let n = chains.len();
    let mut b = Batch::new(v, chains, SeqConfig::new, backend, fallback);
    for step in 0..steps {
        if every > 0 && step % every == every - 1 {
            let other: Vec<f32> = (0..n).flat_map(|r| logits_for(v, step + 1000, r)).collect();
            b.step(&other);
            for (r, chain) in b.refs.iter_mut().enumerate() {
                chain.set_step(b.seqs.step(SeqId(r as u32)).unwrap());
                chain.run(&logits_for(v, step + 1000, r)).unwrap();
            }
        }
        let all: Vec<f32> = (0..n).flat_map(|r| logits_for(v, step, r)).collect();
        let out = b.step(&all);
        let Batch { seqs, refs, tail, .. } = &mut b;
        assert_eq!(out.bytes_read, tail.reserved_bytes());
        for row in &out.rows {
            let r = row.seq.0 as usize;
            refs[r].set_step(seqs.step(row.seq).unwrap());
            let want = refs[r].sample(&logits_for(v, step, r)).unwrap();
            let got = row.result.as_ref().unwrap().token;
            assert_eq!(got, Some(want), "v {v} step {step} chain {r} `{}` ({})", chains[r], tail.describe());
            tail.accept(seqs, row.seq, &[want]).unwrap();
        }
    }
    b.tail.placement().into_iter().map(|(_, p)| p).collect()
}

pub const CHAINS: [&str; 27] = [
    "mirostat_v2(tau=5,eta=0.1,seed=1)",
    "temp(t=0.8);mirostat_v2(tau=5,eta=0.1,seed=2)",
    "penalties(last_n=16,repeat=1.3,freq=0.05);temp(t=0.8);mirostat_v2(tau=3,eta=0.2,seed=3)",
    "mirostat_v2(tau=9,eta=0.3,seed=4)",
    "logit_bias(5=3);mirostat_v2(tau=0,eta=0.1,seed=5)",
    "min_p(p=0.3,min_keep=5);dist(seed=6)",
    "min_p(p=2);dist(seed=7)",
    "temp(t=1.5);min_p(p=0.2,min_keep=40);temp(t=0.7);dist(seed=8)",
    "min_p(p=0.6,min_keep=8);top_k(k=4);dist(seed=9)",
    "min_p(p=1.5,min_keep=3);greedy",
    "min_p(p=0.5,min_keep=6);typical(p=0.9);dist(seed=10)",
    "min_p(p=0.4,min_keep=30);min_p(p=0.1);dist(seed=11)",
    "min_p(p=2,min_keep=6);dist(seed=24)",
    "temp(t=0.5);min_p(p=0.9,min_keep=10);dist(seed=25)",
    "top_n_sigma(n=1);dist(seed=12)",
    "temp(t=0.8);top_n_sigma(n=1.5);temp(t=1.2);dist(seed=13)",
    "top_n_sigma(n=0.5);top_k(k=5);greedy",
    "top_n_sigma(n=2);typical(p=0.8);dist(seed=14)",
    "top_n_sigma(n=inf);xtc(p=1,t=0.01,min_keep=996,seed=15);dist(seed=15)",
    "top_n_sigma(n=inf);mirostat_v2(tau=4,eta=0.1,seed=16)",
    "top_n_sigma(n=1);min_p(p=0.05);dist(seed=17)",
    "xtc(p=0.6,t=0.05,seed=18);dist(seed=18)",
    "temp(t=0.7);xtc(p=1,t=0.02,min_keep=2,seed=19);greedy",
    "xtc(p=1,t=0.01,min_keep=998,seed=20);dist(seed=20)",
    "xtc(p=1,t=0.05,seed=21);typical(p=0.9);dist(seed=21)",
    "xtc(p=1,t=0.03,seed=22);top_k(k=50);typical(p=0.9,min_keep=45);dist(seed=22)",
    "xtc(p=0.8,t=0.02,seed=23);temp(t=1.3);min_p(p=0.05);top_k(k=30);dist(seed=23)",
];

pub const PLACEMENTS: [&str; 27] = [
    "+mirostat_v2",
    "+temp +mirostat_v2",
    "+penalties +temp +mirostat_v2",
    "+mirostat_v2",
    "+logit_bias +mirostat_v2",
    "+min_p +dist",
    "+min_p +dist",
    "+temp +min_p +temp +dist",
    "+min_p +top_k +dist",
    "+min_p +greedy",
    "+min_p +typical +dist",
    "+min_p +min_p +dist",
    "+min_p +dist",
    "+temp +min_p +dist",
    "+top_n_sigma +dist",
    "+temp +top_n_sigma +temp +dist",
    "+top_n_sigma +top_k +greedy",
    "+top_n_sigma +typical +dist",
    "+top_n_sigma +xtc +dist",
    "+top_n_sigma +mirostat_v2",
    "+top_n_sigma +min_p +dist",
    "+xtc +dist",
    "+temp +xtc +greedy",
    "+xtc +dist",
    "+xtc +typical +dist",
    "+xtc +top_k +typical +dist",
    "+xtc +temp +min_p +top_k +dist",
];

/// The chains of the stages that order the vocabulary (their vocabulary forms in `samplers/`): each stage alone, after temp and penalties, followed by top_k, min_p, top_p, dist
/// and greedy.
pub const SORTED_CHAINS: [&str; 21] = [
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

/// Where each of [`SORTED_CHAINS`] runs.
pub const SORTED_PLACEMENTS: [&str; 21] = [
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
    "+typical +top_p +dist",
    "+temp_ext +typical +dist",
    "+typical +dist",
    "+typical +temp_ext +dist",
];

/// Long candidate lists (`top_k` of most of a small vocabulary) through the list stages, on
/// [`logits_for`]'s rows, whose ties include both zeros: the list's order must be the chain's
/// (`kernels::select::desc`: -0.0 ties +0.0, then lower id) for every draw to walk the same tokens.
pub const LONG_LISTS: [&str; 6] = [
    "top_k(k=990);dist(seed=15)",
    "top_k(k=990);top_p(p=0.9);dist(seed=16)",
    "top_k(k=990);temp_ext(t=0.9,delta=0.5,exponent=1);dist(seed=17)",
    "top_k(k=990);typical(p=0.9,min_keep=900);dist(seed=18)",
    "top_k(k=990);typical(p=0.9);dist(seed=19)",
    "top_k(k=600);min_p(p=0.01);temp(t=1.5);dist(seed=20)",
];

/// Chains whose candidates (the record before the selecting stage) are read back too.
pub const WITH_CANDIDATES: [&str; 5] = [
    "temp(t=0.8);mirostat_v2(tau=5,eta=0.1,seed=31)",
    "min_p(p=0.9,min_keep=10);dist(seed=32)",
    "top_n_sigma(n=1);temp(t=0.9);dist(seed=33)",
    "xtc(p=1,t=0.02,seed=34);dist(seed=34)",
    "xtc(p=1,t=0.02,seed=35);greedy",
];

/// Runs `WITH_CANDIDATES` (each asking for its candidates) as one batch for `steps` steps: every
/// row's candidates (ids in output order, `p` to 1e-5) and token equal the CPU chain's, and the
/// sequence's state (mirostat's `mu`) stays in step with it.
pub fn candidates(v: usize, steps: usize, backend: Box<dyn Backend>, fallback: Option<Box<dyn Backend>>) {
    candidates_of(&WITH_CANDIDATES, v, steps, backend, fallback)
}

/// [`candidates`] for the chains `chains` (each entirely on the backend).
pub fn candidates_of(
    chains: &[&str],
    v: usize,
    steps: usize,
    backend: Box<dyn Backend>,
    fallback: Option<Box<dyn Backend>>,
) {
    let n = chains.len();
    let mut b = Batch::new(v, chains, |c| SeqConfig::new(c).with_candidates(), backend, fallback);
    for (_, p) in b.tail.placement() {
        assert!(!p.contains('-'), "every stage on the backend: {p}");
    }
    for step in 0..steps {
        let all: Vec<f32> = (0..n).flat_map(|r| logits_for(v, step, r)).collect();
        let out = b.step(&all);
        let Batch { seqs, refs, tail, .. } = &mut b;
        assert_eq!(out.bytes_read, tail.reserved_bytes());
        for (i, row) in out.rows.iter().enumerate() {
            let r = row.seq.0 as usize;
            let spec = chains[r];
            let mut c = refs[r].clone();
            c.set_step(seqs.step(row.seq).unwrap());
            let want = c.run(&logits_for(v, step, r)).unwrap();
            assert_same_candidates(out.candidates(i).unwrap(), &want.candidates, &format!("step {step} `{spec}`"));
            let tok = row.result.as_ref().unwrap().token.unwrap();
            assert_eq!(Some(tok), want.selected, "step {step} `{spec}`");
            refs[r] = c;
            refs[r].accept(tok);
            tail.accept(seqs, row.seq, &[tok]).unwrap();
        }
    }
}

/// The top `n` tokens of `row` (value descending, ties by lower id) with their f64 log-softmax:
/// the reference of a log-probability read-back.
pub fn reference_logprobs(row: &[f32], n: usize) -> Vec<(usize, f64)> {
    let max = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
    let lse = max + row.iter().map(|&x| (f64::from(x) - max).exp()).sum::<f64>().ln();
    let mut order: Vec<usize> = (0..row.len()).collect();
    order.sort_by(|&a, &c| row[c].total_cmp(&row[a]).then(a.cmp(&c)));
    order.into_iter().take(n).map(|i| (i, f64::from(row[i]) - lse)).collect()
}

/// `got` (read back) holds `want`'s tokens (the CPU chain's candidates), each `p` within 1e-5.
/// By id: the output order is by `p`, and two tokens whose logits differ in the last bit may swap
/// places where the two sides' `p` differ by float rounding (a dynamic temperature an ulp apart).
pub fn assert_same_candidates(got: &[sampling::TokenData], want: &[sampling::TokenData], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let mut got = got.to_vec();
    let mut want = want.to_vec();
    got.sort_by_key(|t| t.id);
    want.sort_by_key(|t| t.id);
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.id, b.id, "{what}");
        assert!((a.p - b.p).abs() < 1e-5, "{what}: {a:?} vs {b:?}");
    }
}

/// Runs `chains` with the top `n_lp` log-probabilities of the raw logits reserved (and the
/// candidates), for `steps` steps at vocabulary `v`, and checks the values read back: the ids are
/// the top `n_lp` of the row (value descending, ties by lower id), each log-probability within 1e-4
/// of the f64 log-softmax, and the candidates as [`candidates_of`] checks them.
pub fn logprobs_of(
    chains: &[&str],
    n_lp: usize,
    v: usize,
    steps: usize,
    backend: Box<dyn Backend>,
    fallback: Option<Box<dyn Backend>>,
) {
    let n = chains.len();
    let config = |c: Chain| SeqConfig::new(c).with_logprobs(n_lp).with_candidates();
    let mut b = Batch::new(v, chains, config, backend, fallback);
    for step in 0..steps {
        let all: Vec<f32> = (0..n).flat_map(|r| logits_for(v, step, r)).collect();
        let out = b.step(&all);
        assert_eq!(out.bytes_read, b.tail.reserved_bytes());
        for (r, spec) in chains.iter().enumerate() {
            let row = logits_for(v, step, r);
            let lp = out.logprobs(r).unwrap();
            let reference = reference_logprobs(&row, n_lp);
            assert_eq!(lp.len(), reference.len(), "step {step} `{spec}`");
            for (j, (&(id, l), &(want_id, want))) in lp.iter().zip(&reference).enumerate() {
                assert_eq!(id as usize, want_id, "step {step} `{spec}` rank {j}");
                assert!((f64::from(l) - want).abs() < 1e-4, "step {step} `{spec}` rank {j}: {l} vs {want}");
            }
            b.refs[r].set_step(b.seqs.step(SeqId(r as u32)).unwrap());
            let want = b.refs[r].run(&row).unwrap();
            assert_same_candidates(out.candidates(r).unwrap(), &want.candidates, &format!("step {step} `{spec}`"));
            let tok = out.token(r).unwrap();
            assert_eq!(Some(tok), want.selected, "step {step} `{}`", spec);
            // The chosen token's own log-probability, wherever it ranks.
            let own = reference_logprobs(&row, v).into_iter().find(|e| e.0 == tok as usize).unwrap().1;
            let got = out.token_logprob(r).unwrap();
            assert!((f64::from(got) - own).abs() < 1e-4, "step {step} `{spec}`: token {tok}: {got} vs {own}");
            // Its rank: 1 + the raw logits strictly above its own.
            let above = row.iter().filter(|&&x| x > row[tok as usize]).count() as u32;
            assert_eq!(out.token_rank(r).unwrap(), above + 1, "step {step} `{spec}`: token {tok}'s rank");
            b.refs[r].accept(tok);
            b.accept(r, tok);
        }
    }
}

/// Chains whose log-probabilities (the top ones and the chosen token's) and candidates
/// [`logprobs_of`] reads back: a list, the
/// vocabulary, after a cut, a selection with its own survivors, a history stage.
pub const WITH_LOGPROBS: [&str; 6] = [
    "top_k(k=20);temp(t=0.8);dist(seed=61)",
    "greedy",
    "min_p(p=0.05);temp(t=0.9);dist(seed=62)",
    "top_k(k=30);mirostat_v2(tau=3,eta=0.1,seed=63)",
    "top_k(k=40);dry(multiplier=1,allowed_length=1);adaptive_p(target=0.3,seed=64)",
    "top_p(p=0.9);dist(seed=65)",
];

/// The vocabulary stages (and top-p) after a cut on the vocabulary (min-p, top-p, min-p's
/// fallback, typical, top-n-sigma, xtc): the record is the masked row, the CPU chain's list the
/// survivors in token order, and every count (`min_keep`, temp_ext's `n`, mirostat's estimate)
/// is of the finite entries. One ends before a CPU-only `dry`, its suffix starting from the
/// masked row's survivors; the last one's xtc keeps its `min_keep` only against the finite count.
pub const AFTER_CUT: [&str; 28] = [
    "min_p(p=0.05);temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=41)",
    "top_p(p=0.9);temp_ext(t=1.0,delta=0.7,exponent=2);dist(seed=42)",
    "min_p(p=0.02);mirostat(tau=5,eta=0.1,m=100,seed=43)",
    "top_p(p=0.95);mirostat(tau=3,eta=0.2,m=0,seed=44)",
    "min_p(p=0.05);typical(p=0.9);dist(seed=45)",
    "top_p(p=0.8);typical(p=0.5,min_keep=5);dist(seed=46)",
    "min_p(p=0.05);xtc(p=1,t=0.05,seed=47);dist(seed=47)",
    "top_p(p=0.9);xtc(p=0.7,t=0.02,min_keep=3,seed=48);dist(seed=48)",
    "min_p(p=0.05);top_n_sigma(n=1);dist(seed=49)",
    "top_p(p=0.95);top_n_sigma(n=0.5);dist(seed=50)",
    "min_p(p=0.05);mirostat_v2(tau=5,eta=0.1,seed=51)",
    "top_p(p=0.9);mirostat_v2(tau=3,eta=0.2,seed=52)",
    "min_p(p=0.1);min_p(p=0.5,min_keep=8);dist(seed=53)",
    "top_p(p=0.9);min_p(p=2,min_keep=3);dist(seed=54)",
    "min_p(p=0.05);top_p(p=0.9);dist(seed=55)",
    "top_p(p=0.95);top_p(p=0.5,min_keep=4);dist(seed=56)",
    "xtc(p=1,t=0.02,seed=57);top_n_sigma(n=1);dist(seed=57)",
    "min_p(p=0.3,min_keep=40);temp_ext(t=0.9,delta=0.5,exponent=1);dist(seed=58)",
    "top_n_sigma(n=1.5);mirostat(tau=4,eta=0.1,m=50,seed=59)",
    "typical(p=0.9);xtc(p=1,t=0.03,seed=60);greedy",
    "temp(t=0.8);min_p(p=0.05);temp(t=1.3);typical(p=0.9);top_p(p=0.9);dist(seed=61)",
    "min_p(p=0.05);temp_ext(t=0.5,delta=0.5,exponent=1);top_k(k=10);dist(seed=62)",
    "min_p(p=0.05);xtc(p=1,t=0.01,min_keep=50,seed=63);temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=63)",
    "min_p(p=0.5);temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=64)",
    "min_p(p=0.05);typical(p=0.9);mirostat(tau=5,eta=0.1,m=10,seed=65)",
    "top_n_sigma(n=1);min_p(p=3,min_keep=2000);top_p(p=0.9,min_keep=3);temp_ext(t=1,delta=1,exponent=1);dist(seed=66)",
    "min_p(p=0.05);temp_ext(t=0.8,delta=0.5,exponent=1);dry(multiplier=0.8);typical(p=0.9);dist(seed=67)",
    "min_p(p=0.3);xtc(p=1,t=0.01,min_keep=6,seed=68);dist(seed=68)",
];

/// The stages whose state is the token history (dry, the constraints of `samplers/constraints.rs`)
/// or moves with what they selected (adaptive-p, mirostat's `mu`), on the vocabulary, after a cut, on a sorted and an unsorted list, with a pending
/// temperature, mixed with penalties; run with resampled steps ([`run_resampled`]).
pub const HISTORY_CHAINS: [&str; 27] = [
    "dry(multiplier=0.8,base=1.75,allowed_length=1,last_n=32);dist(seed=31)",
    "top_k(k=40);dry(multiplier=2,base=2,allowed_length=1);dist(seed=32)",
    "top_k(k=20);dry(multiplier=inf,allowed_length=1,last_n=16);temp(t=0.8);top_p(p=0.9);dist(seed=33)",
    "temp(t=0.7);dry(multiplier=1.5,allowed_length=1,breakers=3|5 6);min_p(p=0.05);dist(seed=34)",
    "min_p(p=0.05);dry(multiplier=3,allowed_length=1);greedy",
    "penalties(last_n=-1,repeat=1.2,freq=0.1);dry(multiplier=1,allowed_length=2,last_n=-1,n_ctx=64);top_k(k=40);dist(seed=41)",
    "dry(multiplier=-0.5,base=1.5,allowed_length=0,last_n=8);top_k(k=8);dist(seed=42)",
    "adaptive_p(target=0.3,decay=0.9,seed=35)",
    "top_k(k=40);adaptive_p(target=0.5,decay=0.5,seed=36)",
    "min_p(p=0.02);temp(t=0.9);adaptive_p(target=0.2,seed=37)",
    "adaptive_p(target=-1,seed=38)",
    "top_k(k=30);dry(multiplier=1,allowed_length=1);temp(t=1.3);adaptive_p(target=0.4,seed=39)",
    "top_k(k=40);dry(multiplier=0.8,allowed_length=1);adaptive_p(target=0.3,seed=40)",
    "dry(multiplier=-0.5,base=1.5,allowed_length=0,last_n=8);top_k(k=8);adaptive_p(target=1.5,decay=0,seed=43)",
    "top_k(k=40);mirostat_v2(tau=3,eta=0.2,seed=44)",
    "mirostat(tau=5,eta=0.1,m=50,seed=45)",
    "min_p(p=0.05);mirostat_v2(tau=4,eta=0.1,seed=46)",
    "bad_words(words=3|5 7|1 2 4|7 7);dist(seed=47)",
    "top_k(k=10);bad_words(words=0|2 2|6 1);temp(t=0.8);dist(seed=48)",
    "min_tokens(n=20,eos=0 1 2 3);dist(seed=49)",
    "min_p(p=0.05);ignore_eos(eos=5 6);greedy",
    "allowed_tokens(ids=1 3 5 7 9 11 40 63 100 70000);temp(t=0.9);dist(seed=50)",
    "min_p(p=0.01);allowed_tokens(ids=0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);dist(seed=51)",
    "top_k(k=20);logit_bias(3=2,5=-inf,1=-1.5,60=1);temp(t=0.8);dist(seed=52)",
    "reasoning_budget(budget=3,start=5|9 10,end=7 8|11,state=counting);dist(seed=53)",
    "reasoning_budget(budget=0,start=4,end=6,forced=2 6,state=counting);penalties(last_n=8,repeat=1.3);greedy",
    "reasoning_budget(budget=2,start=1|3,end=12 13);top_k(k=20);temp(t=0.8);dist(seed=54)",
];

/// Where each of [`HISTORY_CHAINS`] runs: everywhere on the backend.
pub const HISTORY_PLACEMENTS: [&str; 27] = [
    "+dry +dist",
    "+top_k +dry +dist",
    "+top_k +dry +temp +top_p +dist",
    "+temp +dry +min_p +dist",
    "+min_p +dry +greedy",
    "+penalties +dry +top_k +dist",
    "+dry +top_k +dist",
    "+adaptive_p",
    "+top_k +adaptive_p",
    "+min_p +temp +adaptive_p",
    "+adaptive_p",
    "+top_k +dry +temp +adaptive_p",
    "+top_k +dry +adaptive_p",
    "+dry +top_k +adaptive_p",
    "+top_k +mirostat_v2",
    "+mirostat",
    "+min_p +mirostat_v2",
    "+bad_words +dist",
    "+top_k +bad_words +temp +dist",
    "+min_tokens +dist",
    "+min_p +ignore_eos +greedy",
    "+allowed_tokens +temp +dist",
    "+min_p +allowed_tokens +dist",
    "+top_k +logit_bias +temp +dist",
    "+reasoning_budget +dist",
    "+reasoning_budget +penalties +greedy",
    "+reasoning_budget +top_k +temp +dist",
];

/// Where each of [`AFTER_CUT`] runs.
pub const AFTER_CUT_PLACEMENTS: [&str; 28] = [
    "+min_p +temp_ext +dist",
    "+top_p +temp_ext +dist",
    "+min_p +mirostat",
    "+top_p +mirostat",
    "+min_p +typical +dist",
    "+top_p +typical +dist",
    "+min_p +xtc +dist",
    "+top_p +xtc +dist",
    "+min_p +top_n_sigma +dist",
    "+top_p +top_n_sigma +dist",
    "+min_p +mirostat_v2",
    "+top_p +mirostat_v2",
    "+min_p +min_p +dist",
    "+top_p +min_p +dist",
    "+min_p +top_p +dist",
    "+top_p +top_p +dist",
    "+xtc +top_n_sigma +dist",
    "+min_p +temp_ext +dist",
    "+top_n_sigma +mirostat",
    "+typical +xtc +greedy",
    "+temp +min_p +temp +typical +top_p +dist",
    "+min_p +temp_ext +top_k +dist",
    "+min_p +xtc +temp_ext +dist",
    "+min_p +temp_ext +dist",
    "+min_p +typical +mirostat",
    "+top_n_sigma +min_p +top_p +temp_ext +dist",
    "+min_p +temp_ext +dry +typical +dist",
    "+min_p +xtc +dist",
];

/// Chains after a cut whose candidates are read back too (all on the backend).
pub const AFTER_CUT_CANDIDATES: [&str; 8] = [
    "min_p(p=0.05);temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=71)",
    "top_p(p=0.9);typical(p=0.8);dist(seed=72)",
    "min_p(p=0.05);xtc(p=1,t=0.03,seed=73);dist(seed=73)",
    "top_p(p=0.95);top_n_sigma(n=1);dist(seed=74)",
    "min_p(p=0.05);mirostat_v2(tau=4,eta=0.1,seed=75)",
    "top_p(p=0.9);min_p(p=0.6,min_keep=6);dist(seed=76)",
    "min_p(p=0.1);top_p(p=0.8);temp(t=0.9);dist(seed=77)",
    "top_p(p=0.95);mirostat(tau=4,eta=0.2,m=20,seed=78)",
];

/// Batches of the `CHAINS` where one row holds a NaN and another a `+inf` (each chain in turn):
/// those rows (and only those) fail with `BadRow`, the others still equal their CPU chains.
pub fn bad_rows(v: usize, backend: Box<dyn Backend>, fallback: Option<Box<dyn Backend>>) {
    bad_rows_of(&CHAINS, v, backend, fallback)
}

/// [`bad_rows`] for the chains `chains`.
pub fn bad_rows_of(chains: &[&str], v: usize, backend: Box<dyn Backend>, fallback: Option<Box<dyn Backend>>) {
    let n = chains.len();
    let mut b = Batch::new(v, chains, SeqConfig::new, backend, fallback);
    for bad in 0..n {
        // Fresh sequences (same structure: no re-attach), so every reference starts at step 0.
        for (i, spec) in chains.iter().enumerate() {
            b.seqs.set(SeqId(i as u32), SeqConfig::new(Chain::parse(spec).unwrap()));
        }
        let other = (bad + 5) % n;
        let row_of = |r: usize| {
            let mut l = logits_for(v, 1, r);
            if r == bad {
                l[v / 3] = f32::NAN;
            }
            if r == other {
                l[v / 2] = f32::INFINITY;
            }
            l
        };
        let all: Vec<f32> = (0..n).flat_map(row_of).collect();
        let out = b.step(&all);
        for row in &out.rows {
            let r = row.seq.0 as usize;
            if r == bad || r == other {
                assert!(
                    // BadRow from a backend prefix; a chain all on the CPU says what its stage found.
                    matches!(
                        row.result,
                        Err(sampling::SamplingError::BadRow { .. } | sampling::SamplingError::BadLogit { .. })
                    ),
                    "`{}` with a {} logit: {:?}",
                    chains[r],
                    if r == bad { "NaN" } else { "+inf" },
                    row.result
                );
            } else {
                let mut c = Chain::parse(chains[r]).unwrap();
                let want = c.sample(&row_of(r)).unwrap();
                assert_eq!(row.result.as_ref().unwrap().token, Some(want), "`{}` beside bad rows", chains[r]);
            }
        }
    }
}

/// Tail-free sampling and the softmax stage on every record form: on the vocabulary (tail-free
/// orders the row and leaves the masked row, the kept tokens in token order; softmax appends
/// nothing), after a cut on the vocabulary (the masked row, `n` the count of its finite entries),
/// on sorted lists (after `top_k`; after a cut inside the list, whose removed entries the CPU
/// chain's list no longer holds) and on unsorted ones (after `typical` and `logit_bias`: both
/// sort first), with `min_keep`, `z = 0` and a list of 3 (one second difference). On a list the
/// parameters avoid exact rational boundaries (`z (len - 2)` or typical's `p k` an integer), where
/// a list of ties (`sorted_logits`' grid rows) makes the cut a close call between llama.cpp's
/// sequential `f32` sums and the graph's `cumsum`.
pub const TAIL_FREE_CHAINS: [&str; 24] = [
    "tail_free(z=0.9);dist(seed=81)",
    "temp(t=0.8);tail_free(z=0.5,min_keep=3);dist(seed=82)",
    "tail_free(z=0.95);top_k(k=20);dist(seed=83)",
    "tail_free(z=0.7);min_p(p=0.05);temp(t=1.2);dist(seed=84)",
    "tail_free(z=0.9);greedy",
    "penalties(last_n=8,repeat=1.2);tail_free(z=0.8);dist(seed=85)",
    "tail_free(z=0);dist(seed=86)",
    "tail_free(z=0.95,min_keep=1);typical(p=0.9);dist(seed=87)",
    "min_p(p=0.05);tail_free(z=0.9);dist(seed=88)",
    "top_p(p=0.95);tail_free(z=0.6,min_keep=2);dist(seed=89)",
    "top_n_sigma(n=1.5);tail_free(z=0.8);dist(seed=90)",
    "top_k(k=40);tail_free(z=0.95);dist(seed=91)",
    "top_k(k=50);tail_free(z=0.55,min_keep=5);temp(t=0.8);dist(seed=92)",
    "top_k(k=30);typical(p=0.85);tail_free(z=0.9);dist(seed=93)",
    "top_k(k=3);tail_free(z=0.2);dist(seed=94)",
    "top_k(k=40);top_p(p=0.9);tail_free(z=0.93,min_keep=1);dist(seed=95)",
    "softmax;dist(seed=96)",
    "temp(t=0.7);softmax;min_p(p=0.05);dist(seed=97)",
    "top_k(k=40);softmax;dist(seed=98)",
    "top_k(k=30);typical(p=0.77);softmax;dist(seed=99)",
    "min_p(p=0.05);softmax;dist(seed=100)",
    "softmax;tail_free(z=0.9);greedy",
    "top_k(k=20);logit_bias(3=2,5=-inf);softmax;dist(seed=101)",
    "top_k(k=40);tail_free(z=0.9);softmax;top_p(p=0.9);dist(seed=102)",
];

/// Where each of [`TAIL_FREE_CHAINS`] runs: everywhere on the backend.
pub const TAIL_FREE_PLACEMENTS: [&str; 24] = [
    "+tail_free +dist",
    "+temp +tail_free +dist",
    "+tail_free +top_k +dist",
    "+tail_free +min_p +temp +dist",
    "+tail_free +greedy",
    "+penalties +tail_free +dist",
    "+tail_free +dist",
    "+tail_free +typical +dist",
    "+min_p +tail_free +dist",
    "+top_p +tail_free +dist",
    "+top_n_sigma +tail_free +dist",
    "+top_k +tail_free +dist",
    "+top_k +tail_free +temp +dist",
    "+top_k +typical +tail_free +dist",
    "+top_k +tail_free +dist",
    "+top_k +top_p +tail_free +dist",
    "+softmax +dist",
    "+temp +softmax +min_p +dist",
    "+top_k +softmax +dist",
    "+top_k +typical +softmax +dist",
    "+min_p +softmax +dist",
    "+softmax +tail_free +greedy",
    "+top_k +logit_bias +softmax +dist",
    "+top_k +tail_free +softmax +top_p +dist",
];

/// Whether `chain` (one of [`TAIL_FREE_CHAINS`]) runs tail_free or typical on a list (after a
/// `top_k`): their list forms decide with the graph's softmax where the CPU chain replays
/// llama.cpp's `f32` arithmetic, so on the flat top lists of long flat rows, whose second
/// differences are rounding noise, the kept sets can differ (docs/SAMPLING.md, "Backend sampling:
/// not done yet"): the runs at 151936 leave them out.
pub fn list_form(chain: &str) -> bool {
    let at = |s: &str| chain.find(s);
    match at("top_k") {
        Some(k) => [at("tail_free"), at("typical")].into_iter().flatten().any(|i| i > k),
        None => false,
    }
}

/// [`TAIL_FREE_CHAINS`] and their placements without the [`list_form`] chains.
pub fn tail_free_vocab_chains() -> (Vec<&'static str>, Vec<&'static str>) {
    TAIL_FREE_CHAINS.iter().zip(TAIL_FREE_PLACEMENTS).filter(|(c, _)| !list_form(c)).map(|(c, p)| (*c, p)).unzip()
}

/// Tail-free and softmax chains whose candidates are read back too (all on the backend).
pub const TAIL_FREE_CANDIDATES: [&str; 6] = [
    "tail_free(z=0.9);dist(seed=111)",
    "top_k(k=40);tail_free(z=0.95);dist(seed=112)",
    "min_p(p=0.05);tail_free(z=0.8);dist(seed=113)",
    "top_k(k=30);typical(p=0.77);softmax;dist(seed=114)",
    "softmax;dist(seed=115)",
    "top_k(k=40);top_p(p=0.9);tail_free(z=0.93,min_keep=1);dist(seed=116)",
];

/// Rows for [`APPROX_TOP_P`]: [`logits_for`]'s rows, some of them sharpened (times 3 or 8) so that
/// nuclei of every size meet the caps: a few tokens (the cut inside the `N` largest, exact) to
/// thousands (all `N` kept).
pub fn approx_logits(v: usize, step: usize, row: usize) -> Vec<f32> {
    let sharpen = [1.0f32, 3.0, 8.0][(step + 2 * row) % 3];
    logits_for(v, step, row).into_iter().map(|x| x * sharpen).collect()
}

/// Top-p approximated by top-k (`approx_k = N`): on the vocabulary (after a temperature, a
/// pending min-p, a cut on the vocabulary), on a list longer and shorter than `N`, `N` at least
/// the vocabulary (exact), `min_keep` above `N`, `p = 0` and `p = 1`, followed by the list stages,
/// xtc, mirostat_v2, top_k, greedy and dist (not typical: on a list its backend cut can differ from
/// the CPU's at a close call, docs/SAMPLING.md, whatever list it gets). The record after it is a list of `N`.
pub const APPROX_TOP_P: [&str; 20] = [
    "top_p(p=0.9,approx_k=32);dist(seed=81)",
    "top_p(p=0.95,approx_k=8);dist(seed=82)",
    "temp(t=0.7);top_p(p=0.8,approx_k=16);dist(seed=83)",
    "top_p(p=0.9,approx_k=64);temp(t=1.3);dist(seed=84)",
    "top_p(p=0.5,min_keep=3,approx_k=20);min_p(p=0.2);dist(seed=85)",
    "top_p(p=0.9,approx_k=24);greedy",
    "top_p(p=0.3,min_keep=40,approx_k=12);dist(seed=86)",
    "min_p(p=0.05);top_p(p=0.9,approx_k=16);dist(seed=87)",
    "top_p(p=0.95);top_p(p=0.8,approx_k=10);dist(seed=88)",
    "top_k(k=50);top_p(p=0.9,approx_k=10);dist(seed=89)",
    "top_k(k=8);top_p(p=0.9,approx_k=10);dist(seed=90)",
    "top_p(p=0.9,approx_k=200000);dist(seed=91)",
    "top_p(p=0.9,approx_k=30);xtc(p=1,t=0.05,seed=92);dist(seed=92)",
    "top_p(p=0.9,approx_k=40);mirostat_v2(tau=5,eta=0.1,seed=93)",
    "top_p(p=0.9,approx_k=16);top_k(k=5);dist(seed=94)",
    "temp(t=1.5);top_p(p=0.95,approx_k=256);min_p(p=0.05);temp(t=0.8);dist(seed=95)",
    "top_p(p=0,approx_k=16);dist(seed=96)",
    "top_p(p=1,approx_k=16);dist(seed=97)",
    "top_p(p=0.5,approx_k=128);dist(seed=98)",
    "top_n_sigma(n=1.5);top_p(p=0.7,approx_k=48);dist(seed=99)",
];

/// Where each of [`APPROX_TOP_P`] runs: everywhere on the backend.
pub const APPROX_TOP_P_PLACEMENTS: [&str; 20] = [
    "+top_p +dist",
    "+top_p +dist",
    "+temp +top_p +dist",
    "+top_p +temp +dist",
    "+top_p +min_p +dist",
    "+top_p +greedy",
    "+top_p +dist",
    "+min_p +top_p +dist",
    "+top_p +top_p +dist",
    "+top_k +top_p +dist",
    "+top_k +top_p +dist",
    "+top_p +dist",
    "+top_p +xtc +dist",
    "+top_p +mirostat_v2",
    "+top_p +top_k +dist",
    "+temp +top_p +min_p +temp +dist",
    "+top_p +dist",
    "+top_p +dist",
    "+top_p +dist",
    "+top_n_sigma +top_p +dist",
];

/// Chains of [`APPROX_TOP_P`] whose candidates are read back too.
pub const APPROX_TOP_P_CANDIDATES: [&str; 5] = [
    "top_p(p=0.9,approx_k=32);dist(seed=101)",
    "temp(t=0.7);top_p(p=0.5,approx_k=16);dist(seed=102)",
    "min_p(p=0.05);top_p(p=0.9,approx_k=16);dist(seed=103)",
    "top_k(k=50);top_p(p=0.9,approx_k=10);temp(t=0.8);dist(seed=104)",
    "top_p(p=0.95);top_p(p=0.8,approx_k=10);dist(seed=105)",
];
