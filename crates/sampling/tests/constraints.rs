//! The serving constraints (`samplers/constraints.rs`): what each bans, on the vocabulary and on a
//! list, as the history moves; their bad input; and the backend's list form of `allowed_tokens`
//! against the CPU chain (the other forms run in `vocab_cases::HISTORY_CHAINS`).

mod vocab_cases;

use sampling::backend::SeqConfig;
use sampling::{Chain, Sampler, SamplingError, Token};
use vocab_cases::Batch;

/// The surviving candidates of `spec` on `row` after `history` was accepted.
fn survivors(spec: &str, history: &[Token], row: &[f32]) -> Vec<Token> {
    let mut chain = Chain::parse(spec).unwrap();
    history.iter().for_each(|&t| chain.accept(t));
    let mut ids: Vec<Token> = chain.run(row).unwrap().candidates.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    ids
}

fn row(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7) % 11) as f32 * 0.5).collect()
}

#[test]
fn allowed_tokens_keep_only_their_ids_inside_the_vocabulary() {
    let r = row(16);
    assert_eq!(survivors("allowed_tokens(ids=3 9 1 3 99)", &[], &r), [1, 3, 9]);
    // After a top-k: the allowed among the k.
    let mut top: Vec<usize> = (0..16).collect();
    top.sort_by(|&a, &b| r[b].total_cmp(&r[a]).then(a.cmp(&b)));
    let k5: Vec<Token> = top[..5].iter().map(|&i| i as Token).collect();
    let allowed = [k5[1], k5[3], 15];
    let spec = format!("top_k(k=5);allowed_tokens(ids={} {} {})", allowed[0], allowed[1], allowed[2]);
    let mut want: Vec<Token> = allowed.iter().copied().filter(|t| k5.contains(t)).collect();
    want.sort_unstable();
    assert_eq!(survivors(&spec, &[], &r), want);
    // Nothing allowed inside the vocabulary: every logit -inf, a clear error.
    let mut c = Chain::parse("allowed_tokens(ids=100);dist").unwrap();
    assert!(c.sample(&r).is_err());
}

#[test]
fn bad_words_ban_a_words_last_token_where_the_history_ends_with_the_rest() {
    let r = row(16);
    let all: Vec<Token> = (0..16).collect();
    let without = |t: &[Token]| all.iter().copied().filter(|x| !t.contains(x)).collect::<Vec<_>>();
    let spec = "bad_words(words=4|1 2 5|2 6|9 9)";
    // A one-token word is always banned.
    assert_eq!(survivors(spec, &[], &r), without(&[4]));
    assert_eq!(survivors(spec, &[7, 1, 2], &r), without(&[4, 5, 6]));
    assert_eq!(survivors(spec, &[1, 2, 3], &r), without(&[4]));
    assert_eq!(survivors(spec, &[9], &r), without(&[4, 9]));
    // Only the end of the history counts.
    assert_eq!(survivors(spec, &[2, 8], &r), without(&[4]));
    // No word: appends nothing.
    assert_eq!(survivors("bad_words", &[1, 2], &r), all);
}

#[test]
fn min_tokens_ban_the_eos_ids_until_n_tokens_were_accepted() {
    let mut r = row(16);
    r[2] = 100.0; // the end-of-generation token dominates
    let mut c = Chain::parse("min_tokens(n=3,eos=2 11);greedy").unwrap();
    let toks: Vec<Token> = (0..5).map(|_| c.sample(&r).unwrap()).collect();
    assert!(toks[..3].iter().all(|&t| t != 2 && t != 11), "{toks:?}");
    assert_eq!(&toks[3..], [2, 2]);
    c.reset();
    assert_ne!(c.sample(&r).unwrap(), 2, "reset starts the count again");
    // n = 0 bans nothing.
    assert_eq!(Chain::parse("min_tokens(n=0,eos=2);greedy").unwrap().sample(&r).unwrap(), 2);
}

#[test]
fn ignore_eos_bans_the_eos_ids_always() {
    let mut r = row(16);
    r[2] = 100.0;
    let mut c = Chain::parse("ignore_eos(eos=2);greedy").unwrap();
    assert!((0..5).all(|_| c.sample(&r).unwrap() != 2));
    // A NaN logit stays a bad row (x + -inf, as on the backend).
    r[2] = f32::NAN;
    assert!(Chain::parse("ignore_eos(eos=2);greedy").unwrap().sample(&r).is_err());
}

#[test]
fn bad_parameters_are_errors_naming_stage_and_parameter() {
    for (spec, param) in [
        ("allowed_tokens", "ids"),
        ("allowed_tokens(ids=)", "ids"),
        ("allowed_tokens(ids=1 x)", "ids"),
        ("min_tokens(n=3)", "eos"),
        ("ignore_eos", "eos"),
        ("bad_words(words=1 -2)", "words"),
        ("min_tokens(n=-1,eos=2)", "n"),
    ] {
        let e: SamplingError = Chain::parse(spec).unwrap_err();
        let s = e.to_string();
        assert!(s.contains(param) && s.contains(spec.split('(').next().unwrap()), "{spec}: {s}");
    }
}

#[test]
fn allowed_tokens_on_a_list_on_the_backend_equal_the_cpu_chain() {
    let v = 300;
    let specs = [
        "top_k(k=40);allowed_tokens(ids=1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50);dist(seed=3)",
        "top_k(k=40);allowed_tokens(ids=0 2 4 6 8 10 12 14 16 18 20 22 24 26 28 30 32 34 36 38 40);temp(t=0.7);greedy",
    ];
    // Rows whose top 40 hold some of the allowed ids: the first 50 tokens are the largest.
    let logits = |step: usize, r: usize| -> Vec<f32> {
        (0..v)
            .map(|i| {
                if i < 50 {
                    5.0 + ((i * 31 + step * 7 + r) % 13) as f32 * 0.25
                } else {
                    ((i * 17 + step) % 23) as f32 * 0.1
                }
            })
            .collect()
    };
    let mut b = Batch::new(v, &specs, |c| SeqConfig::new(c).with_candidates(), Box::new(cpu::CpuBackend::new()), None);
    assert!(b.placements().iter().all(|p| !p.contains('-')), "{:?}", b.placements());
    let ids = |c: &[sampling::TokenData]| {
        let mut v: Vec<Token> = c.iter().map(|t| t.id).collect();
        v.sort_unstable();
        v
    };
    for step in 0..20 {
        let all: Vec<f32> = (0..specs.len()).flat_map(|r| logits(step, r)).collect();
        let out = b.step(&all);
        for (r, spec) in specs.iter().enumerate() {
            b.refs[r].set_step(step as u64);
            let want = b.refs[r].run(&logits(step, r)).unwrap();
            let got = out.rows[r].result.as_ref().unwrap();
            assert_eq!(got.token, want.selected, "step {step} `{spec}`");
            assert_eq!(ids(got.candidates.as_ref().unwrap()), ids(&want.candidates), "step {step} `{spec}`");
            let t = want.selected.unwrap();
            b.refs[r].accept(t);
            b.accept(r, t);
        }
    }
}

#[test]
fn a_logit_bias_listing_a_token_twice_finishes_on_the_cpu_after_a_top_k() {
    // On a list llama.cpp's first-match search decides which of the two entries adds (it depends
    // on where the token sits in the list), so that stage has no list form; on the vocabulary
    // both add, on the backend too.
    use sampling::samplers::{Dist, LogitBias, TopK};
    let twice = || LogitBias::new(vec![(3, 2.0), (3, 1.0), (7, -1.0)]).unwrap();
    let chains = vec![
        Chain::new().with(TopK::new(8)).with(twice()).with(Dist::new(5)),
        Chain::new().with(twice()).with(TopK::new(8)).with(Dist::new(6)),
    ];
    let v = 64;
    let logits =
        |step: usize, r: usize| -> Vec<f32> { (0..v).map(|i| ((i * 13 + step * 5 + r) % 17) as f32 * 0.3).collect() };
    let mut b = Batch::of(v, chains, SeqConfig::new, Box::new(cpu::CpuBackend::new()), None);
    assert_eq!(b.placements(), ["+top_k -logit_bias -dist", "+logit_bias +top_k +dist"]);
    for step in 0..20 {
        let all: Vec<f32> = (0..2).flat_map(|r| logits(step, r)).collect();
        let out = b.step(&all);
        for r in 0..2 {
            b.refs[r].set_step(step as u64);
            let want = b.refs[r].sample(&logits(step, r)).unwrap();
            assert_eq!(out.token(r).unwrap(), want, "step {step} row {r}");
            b.accept(r, want);
        }
    }
}
