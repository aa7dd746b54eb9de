//! Backend verification of SAMPLED drafts (`graph::Op::SpecVerifySampled`, a draft token drawn
//! from a distribution `q`): the op alone emits the target's distribution whatever `q` (very
//! wrong, with mass on tokens the target filters out, and draft tokens the target filters out),
//! by chi-squared at p = 0.001 on the vocabulary and on a shuffled candidate list, where a
//! verifier that draws the residual from `p` or accepts every draft fails by far (one that
//! ignores `q`, the one-hot `spec_verify`, is exact too but accepts far fewer); through the
//! tail, the verdict equals `speculative::verify` with `DraftProbs::Sampled` token for token over
//! many steps; `Sequences::set_draft_sampled` refuses what the CPU verifier refuses.

mod common;
mod scenarios;

use common::{CHI2_999, chi2_on_support, draw_from, shuffled_list};
use graph::{DType, Graph, SpecAux};
use sampling::backend::{SeqConfig, SeqId, Sequences};
use sampling::{Chain, SamplingError, Token};

const V: usize = 12;

fn row() -> Vec<f32> {
    (0..V).map(|i| (((i * 37) % 13) as f32) * 0.35 - 1.5).collect()
}

/// 20,000 rows of one target row, each with its own key and a draft token drawn from a very
/// wrong `q`: most mass on tokens the target cuts (min-p on the vocabulary; removed entries on the
/// list) and on the target's least likely survivors, little on its likeliest, in a shuffled order
/// padded with id -1 entries. The emitted tokens fit the target; two biased verifiers on the same
/// rows and keys fail: one that, after a rejection, draws from `p` instead of the residual
/// (`categorical` with the same key), and one that accepts every draft. Ignoring `q` (the one-hot
/// `spec_verify`, acceptance `p(d)`) is exact for any proposal, and must accept fewer drafts.
#[test]
fn sampled_verifier_emits_the_target_distribution_and_biased_ones_do_not() {
    const N: usize = 20_000;
    const M: usize = 16;
    let row = row();
    let s = 1.0f32 / 0.9;
    let off = 0.05f32.ln();
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let w: Vec<f64> =
        row.iter().map(|&x| if x >= m + off { (f64::from(x - m) * f64::from(s)).exp() } else { 0.0 }).collect();
    let total: f64 = w.iter().sum();
    let p: Vec<f64> = w.iter().map(|w| w / total).collect();
    let cut = p.iter().filter(|&&v| v == 0.0).count();
    assert!(cut >= 3, "the cut removes some tokens: {p:?}");
    // Very wrong q: rank the survivors by p; mass 3 on each cut token, 4 on the least likely
    // survivor, 0.3 on the likeliest, 1 on the others; listed in a shuffled order.
    let best = (0..V).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
    let worst = (0..V).filter(|&t| p[t] > 0.0).min_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
    let q: Vec<(Token, f32)> = (0..V)
        .map(|i| (i * 7 + 5) % V)
        .map(|t| {
            let wq = if p[t] == 0.0 {
                3.0
            } else if t == worst {
                4.0
            } else if t == best {
                0.3
            } else {
                1.0
            };
            (t as Token, wq)
        })
        .collect();
    let q_ids: Vec<i32> = q.iter().map(|e| e.0 as i32).chain(std::iter::repeat_n(-1, M - V)).collect();
    let q_probs: Vec<f32> = q.iter().map(|e| e.1).chain(std::iter::repeat_n(0.0, M - V)).collect();
    let draft: Vec<Token> = (0..N as u64).map(|t| draw_from(&q, graph::philox::uniform_f64(11, t, 0))).collect();
    // The list form: a shuffled order with token ids, three entries removed (id -1, -inf), two
    // of them tokens q likes.
    let (list_x, list_ids, pl) = shuffled_list(&row, m, |j| j == 2 || j == 4 || j == 9);

    let keys: Vec<i32> =
        (0..N).flat_map(|t| [t as i32 * 13 + 5, 9, t as i32, 0, i32::try_from(draft[t]).unwrap()]).collect();
    let plain_keys: Vec<i32> = keys.chunks(5).flat_map(|k| k[..4].to_vec()).collect();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[V, N]).unwrap();
    let k5 = g.input("keys", DType::I32, &[5, N]).unwrap();
    let k4 = g.input("plain_keys", DType::I32, &[4, N]).unwrap();
    let pr = g.input("params", DType::F32, &[2, N]).unwrap();
    let qi = g.input("q_ids", DType::I32, &[M, N]).unwrap();
    let qp = g.input("q_probs", DType::F32, &[M, N]).unwrap();
    let lx = g.input("list_x", DType::F32, &[V, N]).unwrap();
    let li = g.input("list_ids", DType::I32, &[V, N]).unwrap();
    let stream = graph::philox::stream::DRAW as u32;
    let vocab = g.spec_verify_sampled(x, k5, qi, qp, SpecAux::Params(pr), stream).unwrap();
    let list = g.spec_verify_sampled(lx, k5, qi, qp, SpecAux::Ids(li), stream).unwrap();
    let one_hot = g.spec_verify(x, k5, SpecAux::Params(pr), stream).unwrap();
    let one_hot_l = g.spec_verify(lx, k5, SpecAux::Ids(li), stream).unwrap();
    let plain = g.categorical(x, k4, Some(pr), None, stream).unwrap();
    let plain_l = g.categorical(lx, k4, None, Some(li), stream).unwrap();
    let outs = [vocab, list, one_hot, one_hot_l, plain, plain_l];
    for o in outs {
        g.set_output(o);
    }
    let mut sched = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
    sched.plan(&g).unwrap();
    let bytes = |v: &[i32]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    sched.set_input_f32(x, &row.repeat(N)).unwrap();
    sched.set_input_f32(lx, &list_x.repeat(N)).unwrap();
    sched.set_input(k5, &bytes(&keys)).unwrap();
    sched.set_input(k4, &bytes(&plain_keys)).unwrap();
    sched.set_input(li, &bytes(&list_ids.repeat(N))).unwrap();
    sched.set_input(qi, &bytes(&q_ids.repeat(N))).unwrap();
    sched.set_input_f32(qp, &q_probs.repeat(N)).unwrap();
    sched.set_input_f32(pr, &[s, off].repeat(N)).unwrap();
    sched.compute().unwrap();
    let got: Vec<Vec<i32>> = outs.iter().map(|&o| sched.read_i32(o).unwrap()).collect();

    let count = |toks: &[i32]| {
        let mut c = vec![0u64; V];
        for &t in toks {
            c[usize::try_from(t).expect("a token")] += 1;
        }
        c
    };
    // The residual-from-p verifier: the sampled op's acceptance (the token is the draft exactly
    // when it accepted), else the plain draw.
    let from_p = |verdict: &[i32], plain: &[i32]| -> Vec<i32> {
        (0..N).map(|t| if verdict[t] == draft[t] as i32 { verdict[t] } else { plain[t] }).collect()
    };
    for (form, target, (sampled, one_hot, plain)) in
        [("vocabulary", &p, (&got[0], &got[2], &got[4])), ("list", &pl, (&got[1], &got[3], &got[5]))]
    {
        let accepted = (0..N).filter(|&t| sampled[t] == draft[t] as i32).count();
        assert!(accepted > 2000 && accepted < N - 2000, "{form}: {accepted} of {N} drafts accepted");
        let (c2, df) = chi2_on_support(&count(sampled), target);
        assert!(c2 < CHI2_999[df - 1], "{form}: chi2 {c2} with {df} df, counts {:?} vs {target:?}", count(sampled));
        // Ignoring `q` (the one-hot verifier, accepting with probability `p(d)`) is exact too,
        // for any proposal, but accepts fewer drafts: `sum q p` against `sum min(p, q)`.
        let (c1, d1) = chi2_on_support(&count(one_hot), target);
        assert!(c1 < CHI2_999[d1 - 1], "{form}: the one-hot verifier is exact too: chi2 {c1} with {d1} df");
        let accepted_one_hot = (0..N).filter(|&t| one_hot[t] == draft[t] as i32).count();
        assert!(accepted_one_hot + 1000 < accepted, "{form}: one-hot accepts {accepted_one_hot}, sampled {accepted}");
        // Biased verifiers fail: the residual drawn from `p`, and every draft accepted.
        let (c3, d3) = chi2_on_support(&count(&from_p(sampled, plain)), target);
        assert!(c3 > 2.0 * CHI2_999[d3 - 1], "{form}: residual-from-p should fail: chi2 {c3} with {d3} df");
        let all: Vec<i32> = draft.iter().map(|&t| t as i32).collect();
        let (c4, d4) = chi2_on_support(&count(&all), target);
        assert!(c4 > 2.0 * CHI2_999[d4 - 1], "{form}: accepting every draft should fail: chi2 {c4} with {d4} df");
    }
}

const TV: usize = 1000;

fn logits_for(step: usize, row: usize) -> Vec<f32> {
    common::xorshift_logits(TV, step as u64 * 7919 + row as u64 * 104_729 + 1, 1.0 + (row % 4) as f32 * 2.0)
}

/// Through the tail on the CPU backend: the verdict from the tokens read back equals
/// `speculative::verify` with the drafts' `q` token for token, 40 steps per chain, on a list
/// (top-k, typical's reordered list), on the vocabulary (temperature and min-p as parameters, a
/// top-p mask, dry, a logit bias on a list) and with a CPU suffix (a zero temperature after a cut,
/// and dist, on the CPU).
#[test]
fn tail_verification_of_sampled_drafts_equals_the_cpu_verifier() {
    let specs = [
        ("penalties(last_n=6,repeat=1.2,present=0.5);top_k(k=30);temp(t=0.8);dist(seed=61)", 0),
        ("top_k(k=20);min_p(p=0.05);dist(seed=62)", 0),
        ("temp(t=0.9);dist(seed=63)", 0),
        ("min_p(p=0.02);temp(t=0.7);dist(seed=64)", 0),
        ("top_p(p=0.9);dist(seed=65)", 0),
        ("top_k(k=40);typical(p=0.9);dist(seed=66)", 0),
        ("dry(multiplier=0.8,last_n=16);dist(seed=68)", 0),
        ("top_k(k=30);logit_bias(5=1.5,7=-2);dist(seed=69)", 0),
        ("top_k(k=30);temp(t=0);dist(seed=70)", 2),
        ("penalties(last_n=8,repeat=3,present=2);top_k(k=10);greedy", 0),
    ];
    for (spec, suffix) in specs {
        let r =
            scenarios::verification_sampled(spec, Box::new(cpu::CpuBackend::new()), None, TV, 40, 5.0, 8, logits_for);
        assert_eq!(r.placement.matches('-').count(), suffix, "{spec}: {}", r.placement);
        assert!(r.accepted >= 2 && r.rejected > 5, "{spec}: {r:?}");
        if suffix == 0 {
            // Only tokens come back: 4 bytes a row.
            assert_eq!(r.reserved, 4 * 4, "{spec}");
        }
    }
}

#[test]
fn set_draft_sampled_refuses_what_the_cpu_verifier_refuses() {
    let msg = |e: SamplingError| e.to_string();
    let mut plain = Sequences::new(3).unwrap();
    plain.set(SeqId(0), SeqConfig::new(Chain::parse("dist(seed=1)").unwrap()));
    assert!(msg(plain.set_draft_sampled(SeqId(0), &[1], &[vec![(1, 1.0)]]).unwrap_err()).contains("reserve no draft"));
    assert!(Sequences::with_draft_distributions(1, 4).is_err());
    assert!(Sequences::with_draft_distributions(3, 0).is_err());
    let mut s = Sequences::with_draft_distributions(3, 4).unwrap();
    s.set(SeqId(0), SeqConfig::new(Chain::parse("dist(seed=1)").unwrap()));
    let bad = |d: &[Token], q: Vec<Vec<(Token, f32)>>, s: &mut Sequences| {
        msg(s.set_draft_sampled(SeqId(0), d, &q).unwrap_err())
    };
    assert!(bad(&[1], vec![], &mut s).contains("need 1 draft distributions"));
    assert!(bad(&[1], vec![vec![(1, 1.0); 5]], &mut s).contains("more than the 4 reserved"));
    assert!(bad(&[1], vec![vec![(1, f32::NAN)]], &mut s).contains("not finite"));
    assert!(bad(&[1], vec![vec![(1, -0.5), (2, 1.0)]], &mut s).contains("not finite"));
    assert!(bad(&[1], vec![vec![(1, 0.5), (1, 0.5)]], &mut s).contains("listed twice"));
    assert!(bad(&[1], vec![vec![(2, 1.0)]], &mut s).contains("probability 0"));
    assert!(bad(&[1], vec![vec![(1, 0.0), (2, 1.0)]], &mut s).contains("probability 0"));
    assert!(matches!(
        s.set_draft_sampled(SeqId(0), &[1, 2, 3], &[vec![(1, 1.0)], vec![(2, 1.0)], vec![(3, 1.0)]]),
        Err(SamplingError::TooManyOutputs { .. })
    ));
    assert!(matches!(
        s.set_draft_sampled(SeqId(7), &[1], &[vec![(1, 1.0)]]),
        Err(SamplingError::UnknownSequence { seq: 7 })
    ));
    s.set_draft_sampled(SeqId(0), &[1, 2], &[vec![(1, 1.0), (3, 2.0)], vec![(2, 0.5)]]).unwrap();
}
