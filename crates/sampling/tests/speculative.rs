//! Speculative verification (`sampling::speculative`): greedy verification gives plain greedy
//! decoding's tokens; stochastic verification emits tokens distributed exactly as the target's
//! chain samples them, whatever the drafts (close, very wrong, outside the target's filtered set,
//! deterministic), by chi-squared at p = 0.001, and a verifier told the wrong draft distribution
//! fails the same test; rejected drafts change nothing later; penalties see every emitted token;
//! bad inputs are errors.

mod common;

use common::{CHI2_999, chi2_on_support, draw_from, shuffled_list};
use sampling::speculative::{DraftProbs, Verdict, verify};
use sampling::{Chain, Sampler, SamplingError, Token};

const V: usize = 12;

fn rows() -> Vec<Vec<f32>> {
    (0..3).map(|r| (0..V).map(|i| (((i * 37 + r * 11) % 13) as f32) * 0.35 - 1.5).collect()).collect()
}

/// The target's distribution at each position: the chain's surviving candidates.
fn target_p(spec: &str, rows: &[Vec<f32>]) -> Vec<Vec<f64>> {
    rows.iter()
        .map(|r| {
            let mut p = vec![0.0; V];
            for c in Chain::parse(spec).unwrap().run(r).unwrap().candidates {
                p[c.id as usize] = f64::from(c.p);
            }
            p
        })
        .collect()
}

fn fits(counts: &[u64], p: &[f64]) -> bool {
    let (c2, df) = chi2_on_support(counts, p);
    c2 < CHI2_999[df - 1]
}

/// Runs `trials` verifications of 2-token drafts drawn from `q` (one distribution per position);
/// `told` is what the verifier is told of them. Returns the counts of the emitted token at
/// position 0, and at position 1 (where position 0's draft was accepted).
fn run_trials(spec: &str, q: &[Vec<(Token, f32)>; 2], told: Option<DraftProbs<'_>>, trials: u64) -> [Vec<u64>; 2] {
    let rows = rows();
    let refs: Vec<&[f32]> = rows.iter().map(|r| &r[..]).collect();
    let mut counts = [vec![0u64; V], vec![0u64; V]];
    for t in 0..trials {
        let mut chain = Chain::parse(&spec.replace("dist", &format!("dist(seed={t})"))).unwrap();
        let u = |i: u64| graph::philox::uniform_f64(999, t, i);
        let draft = [draw_from(&q[0], u(0)), draw_from(&q[1], u(1))];
        let v = verify(&mut chain, &refs, &draft, told.unwrap_or(DraftProbs::Sampled(&q[..]))).unwrap();
        counts[0][v.tokens[0] as usize] += 1;
        if v.accepted >= 1 {
            counts[1][v.tokens[1] as usize] += 1;
        }
    }
    counts
}

const SPEC: &str = "top_k(k=8);temp(t=0.9);dist";

#[test]
fn emitted_tokens_follow_the_target_distribution_whatever_the_draft() {
    let p = target_p(SPEC, &rows());
    let close: Vec<(Token, f32)> =
        (0..V as Token).map(|t| (t, p[0][t as usize] as f32 * 0.8 + 0.2 / V as f32)).collect();
    let close1: Vec<(Token, f32)> =
        (0..V as Token).map(|t| (t, p[1][t as usize] as f32 * 0.8 + 0.2 / V as f32)).collect();
    // Very wrong: most mass on tokens the target's top-k filters out.
    let filtered: Vec<Token> = (0..V as Token).filter(|&t| p[0][t as usize] == 0.0).collect();
    assert!(!filtered.is_empty());
    let wrong: Vec<(Token, f32)> =
        (0..V as Token).map(|t| (t, if filtered.contains(&t) { 5.0 } else { 0.1 })).collect();
    let uniform: Vec<(Token, f32)> = (0..V as Token).map(|t| (t, 1.0)).collect();
    for (what, q) in [("close", [close.clone(), close1]), ("wrong", [wrong.clone(), uniform.clone()])] {
        let counts = run_trials(SPEC, &q, None, 20_000);
        assert!(
            fits(&counts[0], &p[0]),
            "{what}: position 0 {:?} vs {:?} ({:?})",
            counts[0],
            p[0],
            chi2_on_support(&counts[0], &p[0])
        );
        assert!(counts[1].iter().sum::<u64>() > 300, "{what}: too few accepted");
        assert!(fits(&counts[1], &p[1]), "{what}: position 1 {:?} vs {:?}", counts[1], p[1]);
    }
    // Deterministic drafts: a token outside the target's set, then the target's likeliest one.
    let best1 = (0..V).max_by(|&a, &b| p[1][a].total_cmp(&p[1][b])).unwrap() as Token;
    let det = [vec![(filtered[0], 1.0)], vec![(best1, 1.0)]];
    let counts = run_trials(SPEC, &det, Some(DraftProbs::Deterministic), 20_000);
    assert_eq!(counts[1].iter().sum::<u64>(), 0, "a token the target filters out is never accepted");
    assert!(fits(&counts[0], &p[0]), "deterministic: {:?} vs {:?}", counts[0], p[0]);
    let det = [vec![(best1, 1.0)], vec![(best1, 1.0)]];
    let counts = run_trials(SPEC, &det, Some(DraftProbs::Deterministic), 20_000);
    assert!(fits(&counts[0], &p[0]), "deterministic best: {:?} vs {:?}", counts[0], p[0]);
}

#[test]
fn a_verifier_told_the_wrong_draft_distribution_fails_the_same_test() {
    // Drafts drawn from `wrong` but verified as if drawn from a uniform distribution: the
    // acceptance min(1, p(d)/q(d)) and the residual max(0, p - q) use the wrong q.
    // (Claiming deterministic drafts is not such a bug: accepting with p(d) and otherwise drawing
    // from p without d is exact for any proposal, which the test above relies on.)
    let p = target_p(SPEC, &rows());
    let wrong: Vec<(Token, f32)> = (0..V as Token).map(|t| (t, if t % 3 == 0 { 8.0 } else { 0.25 })).collect();
    let uniform: Vec<Vec<(Token, f32)>> = vec![(0..V as Token).map(|t| (t, 1.0)).collect(); 2];
    let counts = run_trials(SPEC, &[wrong.clone(), wrong], Some(DraftProbs::Sampled(&uniform)), 20_000);
    let (c2, df) = chi2_on_support(&counts[0], &p[0]);
    assert!(c2 > 10.0 * CHI2_999[df - 1], "the biased verifier should fail: chi2 {c2} with {df} df");
}

#[test]
fn greedy_verification_is_plain_greedy_decoding() {
    let spec = "penalties(last_n=8,repeat=1.5,present=0.5);greedy";
    let rows = rows();
    let refs: Vec<&[f32]> = rows.iter().map(|r| &r[..]).collect();
    let mut plain = Chain::parse(spec).unwrap();
    let want: Vec<Token> = rows.iter().map(|r| plain.sample(r).unwrap()).collect();
    for draft in
        [vec![want[0], want[1]], vec![want[0], (want[1] + 1) % V as Token], vec![(want[0] + 1) % V as Token, 3]]
    {
        let mut chain = Chain::parse(spec).unwrap();
        let v = verify(&mut chain, &refs, &draft, DraftProbs::Deterministic).unwrap();
        let agree = draft.iter().zip(&want).take_while(|(a, b)| a == b).count();
        assert_eq!(v, Verdict { accepted: agree, tokens: want[..=agree].to_vec() }, "draft {draft:?}");
    }
}

#[test]
fn a_rejected_draft_changes_nothing_later_and_penalties_see_every_emitted_token() {
    let spec = "penalties(last_n=16,repeat=1.3,freq=0.2);top_k(k=8);dist(seed=5)";
    let rows = rows();
    let refs: Vec<&[f32]> = rows.iter().map(|r| &r[..]).collect();
    // Find a step where position 0's deterministic draft is rejected.
    let (mut a, mut b) = (Chain::parse(spec).unwrap(), Chain::parse(spec).unwrap());
    let mut found = false;
    for step in 0..200 {
        a.set_step(step);
        b.set_step(step);
        let (mut a2, mut b2) = (a.clone(), b.clone());
        let va = verify(&mut a2, &refs, &[0, 1], DraftProbs::Deterministic).unwrap();
        let vb = verify(&mut b2, &refs, &[0, 7], DraftProbs::Deterministic).unwrap();
        if va.accepted == 0 {
            // Drafts differing only after the rejection: same verdict, same state afterwards.
            assert_eq!(va, vb);
            assert_eq!(a2.step(), Some(step + 1));
            assert_eq!(a2.sample(&rows[2]).unwrap(), b2.sample(&rows[2]).unwrap());
            found = true;
        }
        if va.accepted == 2 {
            // Everything accepted: the chain accepted 0, 1 and the bonus, as if it had sampled them.
            let mut reference = Chain::parse(spec).unwrap();
            for t in &va.tokens {
                reference.accept(*t);
            }
            reference.set_step(step + 3);
            let mut again = a2.clone();
            assert_eq!(again.run(&rows[0]).unwrap(), reference.run(&rows[0]).unwrap());
        }
    }
    assert!(found, "no rejection at position 0 in 200 steps");
}

#[test]
fn bad_inputs_are_errors() {
    let rows = rows();
    let refs: Vec<&[f32]> = rows.iter().map(|r| &r[..]).collect();
    let mut c = Chain::parse("top_k(k=4);dist").unwrap();
    let msg = |e: SamplingError| e.to_string();
    assert!(
        msg(verify(&mut c, &refs, &[1], DraftProbs::Deterministic).unwrap_err()).contains("need 2 target rows, got 3")
    );
    let q = vec![vec![(1, 1.0)]];
    assert!(
        msg(verify(&mut c, &refs, &[1, 2], DraftProbs::Sampled(&q)).unwrap_err())
            .contains("need 2 draft distributions, got 1")
    );
    let q = vec![vec![(1, 1.0)], vec![(3, 1.0)]];
    assert!(
        msg(verify(&mut c, &refs, &[2, 3], DraftProbs::Sampled(&q)).unwrap_err())
            .contains("draft token 2 has probability 0")
    );
    assert!(matches!(
        verify(&mut c, &refs, &[99, 1], DraftProbs::Deterministic),
        Err(SamplingError::TokenOutOfRange { token: 99, .. })
    ));
    let mut m = Chain::parse("top_k(k=4);mirostat(tau=3,eta=0.1)").unwrap();
    assert!(msg(verify(&mut m, &refs, &[1, 2], DraftProbs::Deterministic).unwrap_err()).contains("ends in `mirostat`"));
    let mut e = Chain::new();
    assert!(msg(verify(&mut e, &refs, &[1, 2], DraftProbs::Deterministic).unwrap_err()).contains("empty"));
    let mut bad = rows.clone();
    bad[0][3] = f32::NAN;
    let bad_refs: Vec<&[f32]> = bad.iter().map(|r| &r[..]).collect();
    assert!(matches!(
        verify(&mut c, &bad_refs, &[1, 2], DraftProbs::Deterministic),
        Err(SamplingError::BadLogit { .. })
    ));
}

/// The backend's verifier, `graph::Op::SpecVerify` on the CPU backend (the tail's `dist` with a
/// draft), row by row: 20,000 rows of the same target logits, each with its own key and a draft
/// drawn from a very wrong proposal. The emitted tokens follow the target's distribution, on the
/// whole vocabulary (scale and min-p cut as parameters) and on a candidate list (ids); a verifier
/// that draws from `p` instead of the residual after a rejection (here `categorical` with the same
/// key) fails the same test.
#[test]
fn the_graph_verifier_emits_the_target_distribution_and_a_biased_one_does_not() {
    use graph::{DType, Graph, SpecAux};
    const N: usize = 20_000;
    let row = &rows()[0];
    let s = 1.0f32 / 0.9;
    let off = 0.02f32.ln();
    // The target: softmax of x s over the entries at or above max + ln 0.02.
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let w: Vec<f64> =
        row.iter().map(|&x| if x >= m + off { (f64::from(x - m) * f64::from(s)).exp() } else { 0.0 }).collect();
    let total: f64 = w.iter().sum();
    let p: Vec<f64> = w.iter().map(|w| w / total).collect();
    assert!(p.contains(&0.0), "the cut removes some tokens");
    // Very wrong drafts: often tokens the target cuts, and uneven over the others, most often the
    // likeliest (a proposal uniform over the survivors would make the biased verifier below exact
    // by accident).
    let best = (0..V).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
    let wrong: Vec<(Token, f32)> = (0..V as Token)
        .map(|t| {
            (
                t,
                if p[t as usize] == 0.0 {
                    2.0
                } else if t as usize == best {
                    8.0
                } else {
                    0.5
                },
            )
        })
        .collect();
    let draft: Vec<Token> = (0..N as u64).map(|t| draw_from(&wrong, graph::philox::uniform_f64(7, t, 0))).collect();
    // The list form: the entries in a shuffled order with token ids, two removed (id -1, -inf).
    let (list_x, list_ids, pl) = shuffled_list(row, m, |j| j == 4 || j == 9);

    let keys: Vec<i32> =
        (0..N).flat_map(|t| [t as i32 * 7 + 1, 3, t as i32, 0, i32::try_from(draft[t]).unwrap()]).collect();
    let plain_keys: Vec<i32> = keys.chunks(5).flat_map(|k| k[..4].to_vec()).collect();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[V, N]).unwrap();
    let k5 = g.input("keys", DType::I32, &[5, N]).unwrap();
    let k4 = g.input("plain_keys", DType::I32, &[4, N]).unwrap();
    let pr = g.input("params", DType::F32, &[2, N]).unwrap();
    let lx = g.input("list_x", DType::F32, &[V, N]).unwrap();
    let li = g.input("list_ids", DType::I32, &[V, N]).unwrap();
    let stream = graph::philox::stream::DRAW as u32;
    let vocab = g.spec_verify(x, k5, SpecAux::Params(pr), stream).unwrap();
    let list = g.spec_verify(lx, k5, SpecAux::Ids(li), stream).unwrap();
    let plain = g.categorical(x, k4, Some(pr), None, stream).unwrap();
    for o in [vocab, list, plain] {
        g.set_output(o);
    }
    let mut sched = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
    sched.plan(&g).unwrap();
    sched.set_input_f32(x, &row.repeat(N)).unwrap();
    sched.set_input_f32(lx, &list_x.repeat(N)).unwrap();
    let bytes = |v: &[i32]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    sched.set_input(k5, &bytes(&keys)).unwrap();
    sched.set_input(k4, &bytes(&plain_keys)).unwrap();
    sched.set_input(li, &bytes(&list_ids.repeat(N))).unwrap();
    sched.set_input_f32(pr, &[s, off].repeat(N)).unwrap();
    sched.compute().unwrap();
    let (got_v, got_l, got_p) =
        (sched.read_i32(vocab).unwrap(), sched.read_i32(list).unwrap(), sched.read_i32(plain).unwrap());
    let mut counts = vec![0u64; V];
    let mut biased = vec![0u64; V];
    let mut accepted = 0;
    for t in 0..N {
        let tok = got_v[t] as usize;
        counts[tok] += 1;
        let d = draft[t] as usize;
        accepted += usize::from(tok == d);
        biased[if tok == d { d } else { got_p[t] as usize }] += 1;
    }
    assert!(accepted > 1000 && accepted < N - 1000, "{accepted} of {N} drafts accepted");
    assert!(fits(&counts, &p), "vocabulary: {counts:?} vs {p:?} ({:?})", chi2_on_support(&counts, &p));
    let (c2, df) = chi2_on_support(&biased, &p);
    assert!(c2 > 2.0 * CHI2_999[df - 1], "the biased verifier should fail: chi2 {c2} with {df} df");
    let mut counts_l = vec![0u64; V];
    // With the list's ids the verifier returns the token itself.
    for &tok in &got_l {
        counts_l[usize::try_from(tok).expect("a kept entry's token")] += 1;
    }
    assert!(fits(&counts_l, &pl), "list: {counts_l:?} vs {pl:?} ({:?})", chi2_on_support(&counts_l, &pl));
}
