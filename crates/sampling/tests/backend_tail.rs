//! The backend sampling tail on the CPU backend: a mixed batch over many steps against each
//! sequence's CPU chain run alone, output reservation and its byte count, no re-plan on steady
//! steps or parameter changes, chains changed and removed between steps, and bad rows failing alone.

mod common;
mod scenarios;
mod vocab_cases;

use graph::{DType, Graph, NodeId};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::{Chain, Sampler, SamplingError};
use sched::Scheduler;

const V: usize = 1000;

/// Deterministic logits for (step, row): a spread of scales so that truncation matters. Rows 8
/// and up (the penalties sequences) keep the same logits every step, so the tokens they saw decide
/// what they pick next.
fn logits_for(step: usize, row: usize) -> Vec<f32> {
    let step = if row >= 8 { 0 } else { step };
    let scale = if row >= 8 { 8.0 } else { 1.0 + (row % 4) as f32 * 2.0 };
    common::xorshift_logits(V, step as u64 * 7919 + row as u64 * 104_729 + 1, scale)
}

fn cpu_sched() -> Scheduler {
    Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap()
}

struct Setup {
    g: Graph,
    logits: NodeId,
    tail: Tail,
}

fn attach(seqs: &Sequences, rows: &[(SeqId, usize)], n_rows: usize) -> Setup {
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[V, n_rows]).unwrap();
    let tail = Tail::attach(&mut g, logits, rows, seqs, &cpu::CpuBackend::new()).unwrap();
    Setup { g, logits, tail }
}

/// Plans `s` on a fresh CPU scheduler and runs one step over the logits `rows`.
fn one_step(s: &mut Setup, seqs: &mut Sequences, rows: &[Vec<f32>]) -> sampling::backend::StepOutput {
    let mut sched = cpu_sched();
    sched.plan(&s.g).unwrap();
    sched.set_input_f32(s.logits, &rows.concat()).unwrap();
    s.tail.set_inputs(&mut sched, seqs).unwrap();
    sched.compute().unwrap();
    s.tail.sample(&mut sched, seqs).unwrap()
}

const CHAINS: [&str; 13] = [
    "greedy",
    "top_k(k=40);temp(t=0.8);dist(seed=3)",
    "min_p(p=0.05);dist(seed=4)",
    "top_k(k=50);top_p(p=0.9);min_p(p=0.1);temp(t=0.7);dist(seed=5)",
    "typical(p=0.9);dist(seed=6)",
    "top_k(k=20);typical(p=0.95);dist(seed=7)",
    "temp(t=0.9);logit_bias(5=2,9=-inf);dist(seed=8)",
    "",
    "penalties(last_n=16,repeat=1.02,freq=0.05,present=0.05);top_k(k=30);dist(seed=9)",
    "penalties(last_n=8,freq=0.004,present=0.002);greedy",
    "top_k(k=40);mirostat_v2(tau=3,eta=0.3,seed=12)",
    "top_k(k=40);mirostat(tau=3,eta=0.3,m=20,seed=13)",
    "top_k(k=60);temp(t=1.3);mirostat(tau=4,eta=0.2,seed=14)",
];

#[test]
fn mixed_batch_matches_each_chain_alone_over_50_steps() {
    let mut seqs = Sequences::new(1).unwrap();
    let mut refs: Vec<Option<Chain>> = Vec::new();
    for (i, spec) in CHAINS.iter().enumerate() {
        let chain = if spec.is_empty() { Chain::new() } else { Chain::parse(spec).unwrap() };
        refs.push(Some(chain.clone()));
        let cfg = SeqConfig::new(chain);
        // The empty chain reads its logits; the penalties sequence its candidates, which show any
        // error in the penalised logits (its tokens alone might not).
        let cfg = match i {
            7 => cfg.with_logits(),
            8 => cfg.with_candidates(),
            _ => cfg,
        };
        seqs.set(SeqId(i as u32), cfg);
    }
    let n_rows = CHAINS.len();
    let rows_of = |seqs: &Sequences| -> Vec<(SeqId, usize)> { seqs.ids().map(|s| (s, s.0 as usize)).collect() };
    let mut setup = attach(&seqs, &rows_of(&seqs), n_rows);
    let placement: Vec<String> = setup.tail.placement().into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        placement,
        [
            "+greedy",
            "+top_k +temp +dist",
            "+min_p +dist",
            "+top_k +top_p +min_p +temp +dist",
            "+typical +dist",
            "+top_k +typical +dist",
            "+temp +logit_bias +dist",
            "",
            "+penalties +top_k +dist",
            "+penalties +greedy",
            "+top_k +mirostat_v2",
            "+top_k +mirostat",
            "+top_k +temp +mirostat",
        ]
    );
    let mut sched = cpu_sched();
    sched.plan(&setup.g).unwrap();
    let mut plans = sched.stats().plans;
    let mut steady_steps = 0;
    for step in 0..50 {
        match step {
            // A parameter change: same structure, no re-plan.
            10 => {
                let c = Chain::parse("top_k(k=40);temp(t=0.5);dist(seed=3)").unwrap();
                refs[1] = Some(c.clone());
                seqs.set(SeqId(1), SeqConfig::new(c));
            }
            // A structural change, and a removal: a new tail (and plan).
            20 | 30 => {
                if step == 20 {
                    let c = Chain::parse("top_k(k=10);greedy").unwrap();
                    refs[2] = Some(c.clone());
                    seqs.set(SeqId(2), SeqConfig::new(c));
                } else {
                    refs[4] = None;
                    seqs.remove(SeqId(4));
                }
                assert!(matches!(setup.tail.set_inputs(&mut sched, &mut seqs), Err(SamplingError::StaleTail { .. })));
                setup = attach(&seqs, &rows_of(&seqs), n_rows);
            }
            _ => {}
        }
        sched.plan(&setup.g).unwrap();
        let mut all = Vec::with_capacity(V * n_rows);
        for r in 0..n_rows {
            all.extend(logits_for(step, r));
        }
        sched.set_input_f32(setup.logits, &all).unwrap();
        setup.tail.set_inputs(&mut sched, &mut seqs).unwrap();
        sched.compute().unwrap();
        let out = setup.tail.sample(&mut sched, &mut seqs).unwrap();
        assert_eq!(out.bytes_read, setup.tail.reserved_bytes(), "step {step}");
        for (i, row) in out.rows.iter().enumerate() {
            let seq = row.seq;
            let r = seq.0 as usize;
            let reference = refs[r].as_mut().expect("only present sequences have rows");
            reference.set_step(seqs.step(seq).unwrap());
            let logits = logits_for(step, r);
            let got = row.result.as_ref().unwrap();
            if CHAINS[r].is_empty() {
                assert_eq!(got.token, None);
                assert_eq!(out.logits(i).unwrap(), &logits[..]);
                continue;
            }
            if r == 8 {
                let want = reference.clone().run(&logits).unwrap();
                let got_c = out.candidates(i).unwrap();
                assert_eq!(got_c.len(), want.candidates.len(), "step {step}");
                for (a, b) in got_c.iter().zip(&want.candidates) {
                    assert!(a.id == b.id && (a.p - b.p).abs() < 1e-5, "step {step}: {a:?} vs {b:?}");
                }
            }
            let want = reference.sample(&logits).unwrap();
            assert_eq!(got.token, Some(want), "step {step} {seq} ({})", setup.tail.describe());
            setup.tail.accept(&mut seqs, seq, &[want]).unwrap();
        }
        let now = sched.stats().plans;
        if ![20, 30].contains(&step) {
            assert_eq!(now, plans, "step {step} re-planned");
            steady_steps += 1;
        }
        plans = now;
    }
    assert_eq!(steady_steps, 48);
}

#[test]
fn reservation_reads_only_what_each_row_needs() {
    let mut seqs = Sequences::new(1).unwrap();
    seqs.set(SeqId(0), SeqConfig::new(Chain::parse("greedy").unwrap()).with_logits());
    seqs.set(SeqId(1), SeqConfig::new(Chain::parse("top_k(k=8);dry(multiplier=0.8)").unwrap()));
    // temp(t=0) has no backend form (llama.cpp keeps only the argmax): the row is read whole.
    seqs.set(SeqId(2), SeqConfig::new(Chain::parse("temp(t=0);dist").unwrap()));
    seqs.set(SeqId(3), SeqConfig::new(Chain::parse("dist(seed=1)").unwrap()).with_logprobs(5));
    let rows = [(SeqId(0), 0), (SeqId(1), 1), (SeqId(2), 2), (SeqId(3), 3)];
    let mut s = attach(&seqs, &rows, 4);
    // greedy: 4 and its raw logits 4 * V; top_k(8) list: 8 * 8; CPU row: 4 * V; dist: 4, logprobs
    // 5 * 8 and the drawn token's own 4 and its rank's count 4.
    assert_eq!(s.tail.reserved_bytes(), 4 + 4 * V + 64 + 4 * V + 4 + 40 + 4 + 4);
    let mut sched = cpu_sched();
    sched.plan(&s.g).unwrap();
    let all: Vec<f32> = (0..4).flat_map(|r| logits_for(1, r)).collect();
    sched.set_input_f32(s.logits, &all).unwrap();
    s.tail.set_inputs(&mut sched, &mut seqs).unwrap();
    sched.compute().unwrap();
    let out = s.tail.sample(&mut sched, &mut seqs).unwrap();
    assert_eq!(out.bytes_read, s.tail.reserved_bytes());
    // Getters for what was not reserved say so.
    assert!(matches!(out.candidates(0), Err(SamplingError::NotReserved { what: "candidates", .. })));
    assert!(matches!(out.logprobs(0), Err(SamplingError::NotReserved { what: "logprobs", .. })));
    assert!(matches!(out.logits(1), Err(SamplingError::NotReserved { what: "logits", .. })));
    // The CPU-finished row's logits were read for its suffix, but not asked for.
    assert!(matches!(out.logits(2), Err(SamplingError::NotReserved { what: "logits", .. })));
    assert_eq!(out.logits(0).unwrap(), &logits_for(1, 0)[..]);
    // Log-probabilities: the top 5 of the raw row, exactly as an f64 softmax gives them.
    let reference = vocab_cases::reference_logprobs(&logits_for(1, 3), 5);
    let lp = out.logprobs(3).unwrap();
    assert_eq!(lp.len(), reference.len());
    for (&(id, l), &(want_id, want)) in lp.iter().zip(&reference) {
        assert_eq!(id as usize, want_id);
        assert!((f64::from(l) - want).abs() < 1e-4, "{l}");
    }
    let t = out.token(3).unwrap() as usize;
    let want = vocab_cases::reference_logprobs(&logits_for(1, 3), V).into_iter().find(|e| e.0 == t).unwrap().1;
    assert!((f64::from(out.token_logprob(3).unwrap()) - want).abs() < 1e-4);
    assert_eq!(out.token_rank(3).unwrap(), brute_rank(&logits_for(1, 3), t));
    assert!(matches!(out.token_logprob(0), Err(SamplingError::NotReserved { what: "logprobs", .. })));
    assert!(matches!(out.token_rank(0), Err(SamplingError::NotReserved { what: "logprobs", .. })));
}

/// 1 + how many entries of `row` are strictly greater than token `t`'s, counted one by one.
fn brute_rank(row: &[f32], t: usize) -> u32 {
    let mut above = 0;
    for &x in row {
        if x > row[t] {
            above += 1;
        }
    }
    above + 1
}

/// The chosen token's log-probability (of the raw logits) is exact wherever the token ranks:
/// gathered on the backend where the prefix selects (a token forced from the bottom of the row by
/// a bias; a draw at a high temperature), and read from the backend's log-softmax for a token the
/// host chose (a CPU suffix after a zero temperature); the same values as an f64 log-softmax.
#[test]
fn the_chosen_tokens_logprob_is_exact_wherever_it_ranks() {
    let rows: Vec<Vec<f32>> = (0..4).map(|r| logits_for(2, r)).collect();
    // The least likely token of row 0, and of row 3.
    let last = |r: &[f32]| (0..V).min_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap();
    let (low0, low3) = (last(&rows[0]), last(&rows[3]));
    let chains = [
        format!("logit_bias({low0}=100);greedy"),
        "temp(t=40);dist(seed=11)".to_string(),
        "temp(t=0);dist(seed=2)".to_string(),
        format!("logit_bias({low3}=100);temp(t=0);dist"),
    ];
    let mut seqs = Sequences::new(1).unwrap();
    for (i, c) in chains.iter().enumerate() {
        seqs.set(SeqId(i as u32), SeqConfig::new(Chain::parse(c).unwrap()).with_logprobs(20));
    }
    let r: Vec<(SeqId, usize)> = (0..4).map(|i| (SeqId(i as u32), i)).collect();
    let mut s = attach(&seqs, &r, 4);
    assert_eq!(s.tail.backend_prefix(SeqId(2)), Some(0), "temp(t=0) runs on the CPU");
    let out = one_step(&mut s, &mut seqs, &rows);
    assert_eq!(out.token(0).unwrap() as usize, low0);
    assert_eq!(out.token(3).unwrap() as usize, low3);
    let mut outside = 0;
    for (row, logits) in rows.iter().enumerate() {
        let t = out.token(row).unwrap() as usize;
        let all = vocab_cases::reference_logprobs(logits, V);
        let want = all.iter().find(|e| e.0 == t).unwrap().1;
        let got = out.token_logprob(row).unwrap();
        assert!((f64::from(got) - want).abs() < 1e-4, "row {row}: token {t}: {got} vs {want}");
        assert_eq!(out.token_rank(row).unwrap(), brute_rank(logits, t), "row {row}: token {t}");
        if !out.logprobs(row).unwrap().iter().any(|e| e.0 as usize == t) {
            outside += 1;
        }
    }
    assert!(outside >= 3, "the forced tokens and the hot draw rank below the top 20");
    assert_eq!(out.token_rank(0).unwrap() as usize, V, "the forced token is the least likely");
    // The host-chosen rows read their logits row after the reservation, and the row's max and
    // ln-sum.
    assert_eq!(out.bytes_read, s.tail.reserved_bytes() + 2 * (4 * V + 8));
}

/// The chosen token's rank counts the raw logits strictly above it: tied tokens share a rank
/// (a row of few distinct values, the token tied with others at the top, in the middle and at
/// the bottom), on the backend where the prefix selects and on the host where the CPU chooses.
#[test]
fn the_chosen_tokens_rank_counts_only_greater_logits() {
    // Logits on a grid of 0.5: every value is shared by many tokens.
    let rows: Vec<Vec<f32>> =
        (0..6).map(|r| logits_for(4, r % 3).iter().map(|x| (x * 2.0).round() / 2.0).collect()).collect();
    let by_value = |r: &[f32]| {
        let mut ids: Vec<usize> = (0..V).collect();
        ids.sort_by(|&a, &b| r[b].total_cmp(&r[a]).then(a.cmp(&b)));
        ids
    };
    let (o1, o4) = (by_value(&rows[1]), by_value(&rows[4]));
    // A token tied in the middle of the row, and the last of the bottom value's ties.
    let (mid, bottom) = (o1[V / 2], *o4.last().unwrap());
    let ties = |r: &[f32], t: usize| r.iter().filter(|&&x| x == r[t]).count();
    assert!(ties(&rows[1], mid) > 1 && ties(&rows[4], bottom) > 1, "the chosen tokens are tied");
    let top = |r: &[f32]| r.iter().filter(|&&x| x == r[by_value(r)[0]]).count();
    assert!(top(&rows[0]) > 1, "row 0's maximum is tied");
    let chains = [
        "greedy".to_string(),
        format!("logit_bias({mid}=100);greedy"),
        "temp(t=30);dist(seed=5)".to_string(),
        "temp(t=0);dist".to_string(),
        format!("logit_bias({bottom}=100);temp(t=0);dist"),
        "temp(t=30);top_k(k=500);dist(seed=6)".to_string(),
    ];
    let mut seqs = Sequences::new(1).unwrap();
    for (i, c) in chains.iter().enumerate() {
        seqs.set(SeqId(i as u32), SeqConfig::new(Chain::parse(c).unwrap()).with_logprobs(3));
    }
    let r: Vec<(SeqId, usize)> = (0..6).map(|i| (SeqId(i as u32), i)).collect();
    let mut s = attach(&seqs, &r, 6);
    let out = one_step(&mut s, &mut seqs, &rows);
    assert_eq!(out.token(1).unwrap() as usize, mid);
    assert_eq!(out.token(4).unwrap() as usize, bottom);
    for (row, logits) in rows.iter().enumerate() {
        let t = out.token(row).unwrap() as usize;
        assert_eq!(out.token_rank(row).unwrap(), brute_rank(logits, t), "row {row} (`{}`): token {t}", chains[row]);
    }
    assert_eq!(out.token_rank(0).unwrap(), 1, "a tied maximum is rank 1");
    assert_eq!(out.token_rank(3).unwrap(), 1);
    assert_eq!(out.token_rank(4).unwrap() as usize, V + 1 - ties(&rows[4], bottom));
}

#[test]
fn candidates_match_the_cpu_chain() {
    for spec in [
        "top_k(k=30);top_p(p=0.8);dist(seed=2)",
        "min_p(p=0.2);temp(t=0.6);greedy",
        "top_k(k=12);min_p(p=0.3,min_keep=5)",
    ] {
        let mut seqs = Sequences::new(1).unwrap();
        seqs.set(SeqId(0), SeqConfig::new(Chain::parse(spec).unwrap()).with_candidates());
        let mut s = attach(&seqs, &[(SeqId(0), 0)], 1);
        let mut sched = cpu_sched();
        sched.plan(&s.g).unwrap();
        let row = logits_for(3, 2);
        sched.set_input_f32(s.logits, &row).unwrap();
        s.tail.set_inputs(&mut sched, &mut seqs).unwrap();
        sched.compute().unwrap();
        let out = s.tail.sample(&mut sched, &mut seqs).unwrap();
        let want = Chain::parse(spec).unwrap().run(&row).unwrap();
        let got = out.candidates(0).unwrap();
        assert_eq!(got.len(), want.candidates.len(), "{spec}");
        for (a, b) in got.iter().zip(&want.candidates) {
            assert_eq!(a.id, b.id, "{spec}");
            assert!((a.p - b.p).abs() < 1e-5, "{spec}: {a:?} vs {b:?}");
        }
        assert_eq!(out.rows[0].result.as_ref().unwrap().token, want.selected, "{spec}");
    }
}

#[test]
fn bad_rows_fail_alone_and_bad_configurations_are_errors() {
    let mut seqs = Sequences::new(2).unwrap();
    for (i, spec) in ["greedy", "top_k(k=5);dist", "min_p(p=0.1);dist", "dist"].iter().enumerate() {
        seqs.set(SeqId(i as u32), SeqConfig::new(Chain::parse(spec).unwrap()));
    }
    let rows: Vec<(SeqId, usize)> = (0..4).map(|i| (SeqId(i), i as usize)).chain([(SeqId(3), 4)]).collect();
    let mut s = attach(&seqs, &rows, 5);
    let mut sched = cpu_sched();
    sched.plan(&s.g).unwrap();
    let mut all: Vec<f32> = (0..5).flat_map(|r| logits_for(2, r)).collect();
    all[V + 17] = -f32::NAN; // row 1: a negative NaN (x86's default NaN, e.g. from inf - inf)
    all[2 * V + 3] = f32::INFINITY; // row 2
    for x in &mut all[4 * V..] {
        *x = f32::NEG_INFINITY; // row 4: all masked
    }
    all[5] = f32::NAN; // row 0
    sched.set_input_f32(s.logits, &all).unwrap();
    s.tail.set_inputs(&mut sched, &mut seqs).unwrap();
    sched.compute().unwrap();
    let out = s.tail.sample(&mut sched, &mut seqs).unwrap();
    for r in [0, 1, 2, 4] {
        assert!(matches!(out.rows[r].result, Err(SamplingError::BadRow { .. })), "row {r}: {:?}", out.rows[r].result);
    }
    let want = Chain::parse("dist").unwrap().sample(&logits_for(2, 3)).unwrap();
    assert_eq!(out.token(3).unwrap(), want);

    // Unknown sequence, too many outputs, rows out of range.
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[V, 3]).unwrap();
    let cpu = cpu::CpuBackend::new();
    let e = Tail::attach(&mut g, logits, &[(SeqId(9), 0)], &seqs, &cpu).unwrap_err();
    assert!(matches!(e, SamplingError::UnknownSequence { seq: 9 }), "{e}");
    let e = Tail::attach(&mut g, logits, &[(SeqId(0), 0), (SeqId(0), 1), (SeqId(0), 2)], &seqs, &cpu).unwrap_err();
    assert!(matches!(e, SamplingError::TooManyOutputs { seq: 0, n: 3, max: 2 }), "{e}");
    let e = Tail::attach(&mut g, logits, &[(SeqId(0), 3)], &seqs, &cpu).unwrap_err();
    assert!(e.to_string().contains("outside the logits"), "{e}");
    assert!(Sequences::new(0).is_err());
}

#[test]
fn several_outputs_per_sequence_and_accepting_a_prefix() {
    // Speculative verification's shape: a sequence owns 3 output rows per step; output j draws at
    // step `step + j`, and accepting the first a outputs advances the step (and the penalties
    // window) by a only.
    let spec = "penalties(last_n=8,repeat=1.3);top_k(k=50);temp(t=0.9);dist(seed=31)";
    let mut seqs = Sequences::new(3).unwrap();
    seqs.set(SeqId(5), SeqConfig::new(Chain::parse(spec).unwrap()));
    seqs.set(SeqId(6), SeqConfig::new(Chain::parse("greedy").unwrap()));
    let rows = [(SeqId(5), 0), (SeqId(6), 1), (SeqId(5), 2), (SeqId(5), 3)];
    let mut s = attach(&seqs, &rows, 4);
    let mut sched = cpu_sched();
    sched.plan(&s.g).unwrap();
    let mut reference = Chain::parse(spec).unwrap();
    for (step, accept) in [(0usize, 2usize), (1, 3), (2, 0), (3, 1), (4, 3)] {
        let all: Vec<f32> = (0..4).flat_map(|r| logits_for(step, r)).collect();
        sched.set_input_f32(s.logits, &all).unwrap();
        s.tail.set_inputs(&mut sched, &mut seqs).unwrap();
        sched.compute().unwrap();
        let out = s.tail.sample(&mut sched, &mut seqs).unwrap();
        let got = out.tokens_of(SeqId(5));
        assert_eq!(got.len(), 3);
        // Output j equals the CPU chain at step + j with the window as it was at the step's start.
        let base = seqs.step(SeqId(5)).unwrap();
        for (j, row) in [0usize, 2, 3].iter().enumerate() {
            let mut c = reference.clone();
            c.set_step(base + j as u64);
            let want = c.run(&logits_for(step, *row)).unwrap().selected.unwrap();
            assert_eq!(got[j], want, "step {step} output {j}");
        }
        s.tail.accept(&mut seqs, SeqId(5), &got[..accept]).unwrap();
        for &t in &got[..accept] {
            reference.accept(t);
        }
        assert_eq!(seqs.step(SeqId(5)).unwrap(), base + accept as u64);
        let g6 = out.tokens_of(SeqId(6));
        s.tail.accept(&mut seqs, SeqId(6), &g6).unwrap();
    }
    // Accepting more outputs than the sequence had is an error.
    let e = s.tail.accept(&mut seqs, SeqId(6), &[1, 2]).unwrap_err();
    assert!(matches!(e, SamplingError::TooManyOutputs { seq: 6, n: 2, max: 1 }), "{e}");
}

#[test]
fn rows_of_a_group_that_are_not_adjacent_are_gathered() {
    // Sequences 0 and 2 share a chain (one group) on logits rows 3 and 0; sequence 1 sits between.
    // The group gathers its rows (get_rows) instead of viewing them; results are the same.
    let mut seqs = Sequences::new(1).unwrap();
    let shared = "top_k(k=20);temp(t=0.7);dist(seed=3)";
    let cfg = || SeqConfig::new(Chain::parse(shared).unwrap()).with_candidates().with_logits();
    seqs.set(SeqId(0), cfg());
    seqs.set(SeqId(1), SeqConfig::new(Chain::parse("greedy").unwrap()));
    seqs.set(SeqId(2), cfg());
    let rows = [(SeqId(0), 3), (SeqId(1), 1), (SeqId(2), 0)];
    let mut s = attach(&seqs, &rows, 4);
    assert!(s.tail.describe().contains("logits rows [3, 0]"), "{}", s.tail.describe());
    let mut sched = cpu_sched();
    sched.plan(&s.g).unwrap();
    let all: Vec<f32> = (0..4).flat_map(|r| logits_for(4, r)).collect();
    sched.set_input_f32(s.logits, &all).unwrap();
    s.tail.set_inputs(&mut sched, &mut seqs).unwrap();
    sched.compute().unwrap();
    let out = s.tail.sample(&mut sched, &mut seqs).unwrap();
    assert_eq!(out.bytes_read, s.tail.reserved_bytes());
    // Results come back in logits-row order: row 0 is sequence 2, row 1 sequence 1, row 3 sequence 0.
    let order: Vec<u32> = out.rows.iter().map(|r| r.seq.0).collect();
    assert_eq!(order, [2, 1, 0]);
    for (i, (seq, row)) in [(0u32, 3usize), (1, 1), (2, 0)].iter().enumerate() {
        let spec = if *seq == 1 { "greedy" } else { shared };
        let want = Chain::parse(spec).unwrap().run(&logits_for(4, *row)).unwrap();
        let r = out.rows.iter().find(|r| r.seq.0 == *seq).unwrap();
        assert_eq!(r.result.as_ref().unwrap().token, want.selected, "{i}: {seq}");
    }
    assert_eq!(out.logits(2).unwrap(), &logits_for(4, 3)[..]);
    let c = out.candidates(0).unwrap();
    let want = Chain::parse(shared).unwrap().run(&logits_for(4, 0)).unwrap();
    assert_eq!(c.iter().map(|t| t.id).collect::<Vec<_>>(), want.candidates.iter().map(|t| t.id).collect::<Vec<_>>());
}

#[test]
fn f16_logits_are_converted_once_and_sampled_like_their_f32_values() {
    // A runner whose LM head writes f16 logits: the tail gathers (and converts) the rows; every
    // stage then sees exactly the f16 values, as the CPU chain does on the converted row.
    let mut seqs = Sequences::new(1).unwrap();
    let specs = ["top_k(k=30);top_p(p=0.9);dist(seed=5)", "min_p(p=0.1);typical(p=0.9);dist(seed=6)", "greedy"];
    for (i, s) in specs.iter().enumerate() {
        seqs.set(SeqId(i as u32), SeqConfig::new(Chain::parse(s).unwrap()).with_logits());
    }
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F16, &[V, 3]).unwrap();
    let rows = [(SeqId(0), 0), (SeqId(1), 1), (SeqId(2), 2)];
    let mut tail = Tail::attach(&mut g, logits, &rows, &seqs, &cpu::CpuBackend::new()).unwrap();
    let mut sched = cpu_sched();
    sched.plan(&g).unwrap();
    let all: Vec<f32> = (0..3).flat_map(|r| logits_for(6, r)).collect();
    sched.set_input_f32(logits, &all).unwrap();
    tail.set_inputs(&mut sched, &mut seqs).unwrap();
    sched.compute().unwrap();
    let out = tail.sample(&mut sched, &mut seqs).unwrap();
    for (r, spec) in specs.iter().enumerate() {
        let row: Vec<f32> = logits_for(6, r).iter().map(|&x| half::f16::from_f32(x).to_f32()).collect();
        let want = Chain::parse(spec).unwrap().run(&row).unwrap();
        assert_eq!(out.rows[r].result.as_ref().unwrap().token, want.selected, "{spec}");
        assert_eq!(out.logits(r).unwrap(), &row[..], "{spec}");
    }
}

#[test]
fn drafted_outputs_see_the_draft_and_greedy_verification_matches_the_cpu() {
    // Speculative verification's target step: output j predicts the token after draft[..j], so
    // its penalties (on the backend) and DRY (a CPU suffix) count those draft tokens; greedy
    // verification of the outputs then equals `speculative::verify` on the CPU.
    use sampling::speculative::{DraftProbs, verify};
    let specs = [
        "penalties(last_n=8,repeat=3,present=2);greedy",
        "penalties(last_n=8,repeat=2,freq=1);top_k(k=20);dry(multiplier=2,base=2,allowed_length=1);greedy",
        "penalties(last_n=6,repeat=1.5,present=1);top_k(k=40);temp(t=0.8);dist(seed=41)",
        // The whole history: device-state counts, the draft added with a scatter_add.
        "penalties(last_n=-1,repeat=3,freq=0.5,present=2);greedy",
        "penalties(last_n=-1,repeat=1.5,present=1);top_k(k=40);temp(t=0.8);dist(seed=42)",
    ];
    for spec in specs {
        let mut seqs = Sequences::new(4).unwrap();
        seqs.set(SeqId(1), SeqConfig::new(Chain::parse(spec).unwrap()));
        let rows = [(SeqId(1), 0), (SeqId(1), 1), (SeqId(1), 2), (SeqId(1), 3)];
        let mut s = attach(&seqs, &rows, 4);
        let mut sched = cpu_sched();
        sched.plan(&s.g).unwrap();
        let mut reference = Chain::parse(spec).unwrap();
        let mut accepted_total = 0;
        for step in 0..12usize {
            // Every output sees the same row, and the draft is its best tokens in order: with the
            // penalties counting the draft, output j's best is the draft's j-th token (accepted);
            // without, it would repeat the first.
            let rows_now: Vec<Vec<f32>> = vec![logits_for(step, 0); 4];
            let mut order: Vec<u32> = (0..V as u32).collect();
            order.sort_by(|&a, &b| rows_now[0][b as usize].total_cmp(&rows_now[0][a as usize]).then(a.cmp(&b)));
            let draft = &order[..step % 4];
            seqs.set_draft(SeqId(1), draft).unwrap();
            let all: Vec<f32> = rows_now.concat();
            sched.set_input_f32(s.logits, &all).unwrap();
            s.tail.set_inputs(&mut sched, &mut seqs).unwrap();
            sched.compute().unwrap();
            let out = s.tail.sample(&mut sched, &mut seqs).unwrap();
            let got = out.tokens_of(SeqId(1));
            let base = seqs.step(SeqId(1)).unwrap();
            // An output without a draft token is the chain's plain draw; a drafted output of the
            // sampling chain is the verifier's decision (`backend_verification_equals_the_cpu_verifier`).
            for j in (0..4).filter(|&j| spec.ends_with("greedy") || j >= draft.len()) {
                let mut c = reference.clone();
                for &t in &draft[..j.min(draft.len())] {
                    c.accept(t);
                }
                c.set_step(base + j as u64);
                let want = c.run(&rows_now[j]).unwrap().selected.unwrap();
                assert_eq!(got[j], want, "{spec}: step {step} output {j} draft {draft:?}");
            }
            let agree = draft.iter().zip(&got).take_while(|(d, g)| d == g).count();
            if spec.ends_with("greedy") {
                let refs: Vec<&[f32]> = rows_now[..=draft.len()].iter().map(|r| &r[..]).collect();
                let v = verify(&mut reference.clone(), &refs, draft, DraftProbs::Deterministic).unwrap();
                assert_eq!(v.tokens, got[..=agree].to_vec(), "{spec}: step {step}");
            }
            s.tail.accept(&mut seqs, SeqId(1), &got[..=agree]).unwrap();
            for &t in &got[..=agree] {
                reference.accept(t);
            }
            accepted_total += agree;
            assert_eq!(seqs.step(SeqId(1)).unwrap(), base + agree as u64 + 1);
        }
        if spec.ends_with("greedy") {
            assert!(accepted_total > 0, "{spec}: no draft token was ever accepted");
        }
    }
    // A draft longer than the outputs allow is an error.
    let mut seqs = Sequences::new(2).unwrap();
    seqs.set(SeqId(0), SeqConfig::new(Chain::parse("greedy").unwrap()));
    assert!(matches!(seqs.set_draft(SeqId(0), &[1, 2]), Err(SamplingError::TooManyOutputs { n: 3, max: 2, .. })));
    assert!(matches!(seqs.set_draft(SeqId(9), &[1]), Err(SamplingError::UnknownSequence { seq: 9 })));
}

#[test]
fn backend_verification_equals_the_cpu_verifier() {
    // With a draft, each output's draw is the verifier's decision (`spec_verify` on the backend,
    // the same rule in a CPU suffix): only the tokens come back (4 bytes a row), and the accepted
    // prefix taken from them equals `verify` on the logits, token for token. The chains cover a
    // list (top-k, and typical's reordered list), the whole vocabulary (temp, min-p, a top-p
    // mask, a top-n-sigma mask), dry on the vocabulary, a logit bias on a list, a CPU suffix (a
    // zero temperature, which has no backend form: the argmax), and greedy.
    // (`scenarios::verification`, run on Vulkan too by `crates/vulkan/tests/tail.rs`.)
    let specs = [
        ("penalties(last_n=6,repeat=1.2,present=0.5);top_k(k=30);temp(t=0.8);dist(seed=51)", 0),
        ("top_k(k=20);min_p(p=0.05);dist(seed=52)", 0),
        ("temp(t=0.9);dist(seed=53)", 0),
        ("min_p(p=0.02);temp(t=0.7);dist(seed=54)", 0),
        ("top_p(p=0.9);dist(seed=55)", 0),
        ("top_k(k=40);typical(p=0.9);dist(seed=56)", 0),
        ("top_n_sigma(n=2);dist(seed=57)", 0),
        ("dry(multiplier=0.8,last_n=16);dist(seed=58)", 0),
        ("top_k(k=30);logit_bias(5=1.5,7=-2);dist(seed=60)", 0),
        ("top_k(k=30);temp(t=0);dist(seed=61)", 2),
        ("penalties(last_n=8,repeat=3,present=2);top_k(k=10);greedy", 0),
        ("penalties(last_n=-1,repeat=1.4,freq=0.3,present=0.5);top_k(k=30);temp(t=0.8);dist(seed=59)", 0),
        // A reasoning budget of 1 re-armed by the often-drafted tokens 7 and 14: drafted outputs
        // past the budget are forced (11, then 3), whatever the draft proposed.
        ("reasoning_budget(budget=1,start=7|14,end=3,forced=11 3,state=counting);top_k(k=30);dist(seed=62)", 0),
    ];
    for (spec, suffix) in specs {
        let backend = Box::new(cpu::CpuBackend::new());
        let r = scenarios::verification(spec, backend, None, V, 40, 9.0, logits_for);
        assert_eq!(r.placement.matches('-').count(), suffix, "{spec}: {}", r.placement);
        assert!(r.accepted > 5 && r.rejected > 5, "{spec}: {r:?}");
    }
}

#[test]
fn penalty_counts_are_device_state_written_as_they_change() {
    // Penalties over the whole history (`last_n = -1`), whose counts live on the device; the last
    // two sequences share a group (two columns, two count tensors). Logits rows 8 and up stay the
    // same every step, so the penalties decide what comes next.
    let specs = [
        "penalties(last_n=-1,repeat=1.3,freq=0.2,present=0.3);top_k(k=20);dist(seed=5)",
        "penalties(last_n=-1,repeat=1.5,present=0.5);greedy",
        "penalties(last_n=-1,repeat=2,freq=0.1);greedy",
    ];
    let mut refs: Vec<Chain> = specs.iter().map(|s| Chain::parse(s).unwrap()).collect();
    let mut seqs = Sequences::new(1).unwrap();
    for (i, c) in refs.iter().enumerate() {
        seqs.set(SeqId(i as u32), SeqConfig::new(c.clone()));
    }
    let mut s = attach(&seqs, &[(SeqId(0), 0), (SeqId(1), 1), (SeqId(2), 2)], 3);
    let placement: Vec<String> = s.tail.placement().into_iter().map(|(_, p)| p).collect();
    assert_eq!(placement, ["+penalties +top_k +dist", "+penalties +greedy", "+penalties +greedy"]);
    let mut sched = cpu_sched();
    sched.plan(&s.g).unwrap();
    let all: Vec<f32> = (0..3).flat_map(|r| logits_for(0, 8 + r)).collect();
    // What a step writes besides the counts (step 0 has none to write).
    let mut params_bytes = None;
    let mut seen = vec![std::collections::BTreeSet::new(); 3];
    // Sequence 1's distinct tokens when the tensor was last written (a step's sync comes before
    // its accept).
    let mut synced = 0;
    for step in 0..40 {
        let held = std::mem::replace(&mut synced, seen[1].len());
        match step {
            // A new registry on the same tensors cannot know what they hold: it writes them whole,
            // once.
            15 => {
                let mut fresh = Sequences::new(1).unwrap();
                for id in [SeqId(0), SeqId(1), SeqId(2)] {
                    fresh.set(id, seqs.get(id).unwrap().clone());
                    fresh.set_step(id, seqs.step(id).unwrap()).unwrap();
                }
                seqs = fresh;
            }
            // A fresh chain for sequence 1 (the same structure): its counts start again, and the
            // tensor's entries go back to zero.
            25 => {
                refs[1] = Chain::parse(specs[1]).unwrap();
                seqs.set(SeqId(1), SeqConfig::new(refs[1].clone()));
            }
            _ => {}
        }
        sched.set_input_f32(s.logits, &all).unwrap();
        let before = sched.stats().bytes_from_host;
        s.tail.set_inputs(&mut sched, &mut seqs).unwrap();
        let written = (sched.stats().bytes_from_host - before) as usize;
        let counts_bytes = written - *params_bytes.get_or_insert(written);
        match step {
            0 => {}
            15 => assert_eq!(counts_bytes, 3 * 4 * V, "step {step}"),
            // Sequence 1's counts back to zero; one new count for each other sequence.
            25 => assert_eq!(counts_bytes, 4 * (held + 2), "step {step}"),
            // One new count per sequence: the token it accepted.
            _ => assert_eq!(counts_bytes, 4 * 3, "step {step}"),
        }
        sched.compute().unwrap();
        let out = s.tail.sample(&mut sched, &mut seqs).unwrap();
        for (r, row) in out.rows.iter().enumerate() {
            refs[r].set_step(seqs.step(row.seq).unwrap());
            let want = refs[r].sample(&all[r * V..(r + 1) * V]).unwrap();
            assert_eq!(row.result.as_ref().unwrap().token, Some(want), "step {step} row {r}");
            seen[r].insert(want);
            s.tail.accept(&mut seqs, row.seq, &[want]).unwrap();
        }
    }
    // The penalties moved both sequences across several tokens (fixed logits otherwise repeat one).
    assert!(seen.iter().all(|s| s.len() >= 3), "{seen:?}");
}

/// A prompt fed to a sequence's chain (`Sequences::accept_prompt`, as llama-server's
/// `init_sampler`): its penalties count the prompt's tokens from the first draw on, on the backend
/// as on the CPU chain, the step counter stays at 0 (the draw is the one without a prompt where
/// the penalties do not matter), and a grammar does not see the prompt.
#[test]
fn a_prompt_fed_to_the_chain_is_counted_without_moving_the_step() {
    let row = logits_for(3, 1);
    let mut order: Vec<usize> = (0..V).collect();
    order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
    let prompt: Vec<sampling::Token> = order[..5].iter().map(|&t| t as u32).collect();
    let spec = "penalties(last_n=16,present=50);top_k(k=8);dist(seed=21)";
    let mut seqs = Sequences::new(1).unwrap();
    seqs.set(SeqId(0), SeqConfig::new(Chain::parse(spec).unwrap()));
    seqs.accept_prompt(SeqId(0), &prompt).unwrap();
    assert_eq!(seqs.step(SeqId(0)), Some(0), "a prompt token moves no step");
    let mut s = attach(&seqs, &[(SeqId(0), 0)], 1);
    let mut sched = cpu_sched();
    sched.plan(&s.g).unwrap();
    sched.set_input_f32(s.logits, &row).unwrap();
    s.tail.set_inputs(&mut sched, &mut seqs).unwrap();
    sched.compute().unwrap();
    let t = s.tail.sample(&mut sched, &mut seqs).unwrap().token(0).unwrap();
    assert!(!prompt.contains(&t), "{t} is a prompt token");
    // The CPU chain fed the same prompt draws the same token at step 0.
    let mut cpu = Chain::parse(spec).unwrap();
    prompt.iter().for_each(|&p| cpu.accept_prompt(p));
    assert_eq!(cpu.step(), Some(0));
    assert_eq!(cpu.sample(&row).unwrap(), t);
    // A grammar ignores prompt tokens (it would refuse these).
    let vocab = std::sync::Arc::new(grammar::Vocab::new((0..V).map(|i| format!("<{i}>").into_bytes()).collect(), &[]));
    let g = grammar::Grammar::new("root ::= \"<7>\"").unwrap();
    let mut stage = sampling::samplers::GrammarStage::new(
        "grammar",
        grammar::Matcher::new(&g, vocab),
        sampling::samplers::GrammarMode::Optimistic,
    );
    stage.accept_prompt(3);
    assert!(stage.check_accept(7).is_ok() && stage.check_accept(3).is_err());
}
