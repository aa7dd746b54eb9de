//! Bad input: NaN and +inf logits (at the start, middle, end, inside and after the vectorised
//! chunks), all `-inf` rows and empty arrays give a clear error naming the stage and position for
//! every kind of chain (each fast path and the materialising path), never a panic or a token.

mod common;
use sampling::{Candidates, Chain, Sampler, SamplingError, TokenData};

const CHAINS: &[&str] = &[
    "greedy",
    "dist",
    "top_k(k=40)",
    "top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist",
    "top_p(p=0.95);temp(t=0.8);dist",
    "top_p(p=0.95,approx_k=8);temp(t=0.8);dist",
    "top_k(k=40);top_p(p=0.9,approx_k=8);dist",
    "min_p(p=0.05);temp(t=0.8);dist",
    "temp(t=0.8);dist",
    "temp(t=0);dist",
    "typical(p=0.5);dist",
    "tail_free(z=0.9);dist",
    "top_k(k=40);tail_free(z=0.9,min_keep=1);dist",
    "softmax;dist",
    "top_k(k=40);softmax;dist",
    "mirostat_v2",
    "mirostat",
    "top_n_sigma(n=1);dist",
    "xtc(p=1,t=0.1);dist",
    "adaptive_p(target=0.3)",
    "temp_ext(t=1,delta=0.5);dist",
    "logit_bias(0=1);penalties(repeat=1.1);greedy",
];

#[test]
fn nan_and_inf_are_errors_with_position() {
    for n in [1usize, 15, 16, 17, 1000, 5000] {
        for pos in [0, n / 2, n - 1] {
            for bad in [f32::NAN, f32::INFINITY] {
                let mut row: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.1).collect();
                row[pos] = bad;
                for spec in CHAINS {
                    let r = Chain::parse(spec).unwrap().sample(&row);
                    match r {
                        Err(SamplingError::BadLogit { index, .. }) => assert_eq!(index, pos, "{spec} n={n}"),
                        other => panic!("{spec} n={n} pos={pos} {bad}: expected BadLogit, got {other:?}"),
                    }
                }
            }
        }
    }
}

#[test]
fn all_neg_inf_rows_are_errors() {
    for n in [1usize, 16, 3000] {
        let row = vec![f32::NEG_INFINITY; n];
        for spec in CHAINS {
            let r = Chain::parse(spec).unwrap().sample(&row);
            assert!(matches!(r, Err(SamplingError::AllMasked { .. })), "{spec} n={n}: {r:?}");
        }
    }
}

#[test]
fn masking_everything_mid_chain_is_an_error() {
    // logit_bias bans the only finite token
    let r = Chain::parse("logit_bias(1=-inf);dist").unwrap().sample(&[f32::NEG_INFINITY, 2.0]);
    assert!(matches!(r, Err(SamplingError::AllMasked { .. })), "{r:?}");
}

#[test]
fn empty_inputs_are_errors() {
    for spec in CHAINS {
        let r = Chain::parse(spec).unwrap().sample(&[]);
        assert!(matches!(r, Err(SamplingError::Empty { .. })), "{spec}: {r:?}");
    }
    assert!(matches!(Candidates::from_list(vec![], 10), Err(SamplingError::Empty { .. })));
    let bad = vec![TokenData { id: 12, logit: 0.0, p: 0.0 }];
    assert!(matches!(Candidates::from_list(bad, 10), Err(SamplingError::TokenOutOfRange { token: 12, .. })));
}

#[test]
fn overflow_from_tiny_temperature_is_an_error() {
    // 3e38 / 1e-30 overflows to +inf: reported, not sampled.
    let r = Chain::parse("temp(t=1e-30);top_k(k=2);dist").unwrap().sample(&[3e38, 1.0]);
    assert!(matches!(r, Err(SamplingError::BadLogit { .. })), "{r:?}");
}

#[test]
fn no_selecting_stage_is_an_error_for_sample() {
    let r = Chain::parse("top_k(k=2)").unwrap().sample(&[1.0, 2.0]);
    assert_eq!(r, Err(SamplingError::NothingSelected));
    // but run() reports the candidates with selected = None
    let o = Chain::parse("top_k(k=2)").unwrap().run(&[1.0, 2.0]).unwrap();
    assert_eq!(o.selected, None);
}

/// Every parameter value that llama.cpp gives no meaning to (NaN, or values whose arithmetic is
/// NaN, undefined, or a crash in llama.cpp) is an `InvalidParam` naming the stage and the
/// parameter, wrapped by the SPEC parser with the stage's index; every edge value llama.cpp does
/// define is accepted (its known answer is in `known_answers.rs`).
#[test]
fn rejected_parameter_values_name_stage_and_parameter() {
    const REJECTED: &[(&str, &str, &str)] = &[
        ("top_p(p=nan)", "top_p", "p"),
        ("top_p(approx_k=-3)", "top_p", "approx_k"),
        ("top_p(p=0.9,approx_k=1.5)", "top_p", "approx_k"),
        ("top_p(approx_k=32x)", "top_p", "approx_k"),
        ("top_p(approx_k=)", "top_p", "approx_k"),
        ("top_p(approx_k=1e3)", "top_p", "approx_k"),
        ("min_p(p=nan)", "min_p", "p"),
        ("typical(p=nan)", "typical", "p"),
        // tail_free: NaN, and a negative z (llama.cpp would keep exactly min_keep candidates, or
        // leave an empty array: docs/SAMPLING.md, "Deliberate differences").
        ("tail_free(z=nan)", "tail_free", "z"),
        ("tail_free(z=-0.5)", "tail_free", "z"),
        ("tail_free(z=-1e-30,min_keep=3)", "tail_free", "z"),
        ("tail_free(z=-inf)", "tail_free", "z"),
        ("temp(t=nan)", "temp", "t"),
        ("temp_ext(t=nan)", "temp_ext", "t"),
        ("temp_ext(delta=nan)", "temp_ext", "delta"),
        ("temp_ext(exponent=nan)", "temp_ext", "exponent"),
        ("temp_ext(t=inf,delta=0.5)", "temp_ext", "t"),
        ("temp_ext(t=-inf,delta=inf)", "temp_ext", "delta"),
        ("xtc(p=nan)", "xtc", "p"),
        ("xtc(p=1,t=nan)", "xtc", "t"),
        ("top_n_sigma(n=nan)", "top_n_sigma", "n"),
        ("mirostat(m=1)", "mirostat", "m"),
        ("mirostat(m=-2147483648)", "mirostat", "m"),
        ("mirostat(tau=nan)", "mirostat", "tau"),
        ("mirostat(tau=inf)", "mirostat", "tau"),
        ("mirostat(tau=-inf)", "mirostat", "tau"),
        ("mirostat(tau=3e38)", "mirostat", "tau"),
        ("mirostat(eta=nan)", "mirostat", "eta"),
        ("mirostat(eta=inf)", "mirostat", "eta"),
        ("mirostat_v2(tau=nan)", "mirostat_v2", "tau"),
        ("mirostat_v2(tau=inf,eta=0)", "mirostat_v2", "tau"),
        ("mirostat_v2(tau=-inf,eta=-1)", "mirostat_v2", "tau"),
        ("mirostat_v2(eta=nan)", "mirostat_v2", "eta"),
        ("mirostat_v2(eta=-inf)", "mirostat_v2", "eta"),
        ("penalties(last_n=-2)", "penalties", "last_n"),
        ("penalties(repeat=0)", "penalties", "repeat"),
        ("penalties(repeat=-inf)", "penalties", "repeat"),
        ("penalties(repeat=nan)", "penalties", "repeat"),
        ("penalties(freq=-inf)", "penalties", "freq"),
        ("penalties(freq=nan)", "penalties", "freq"),
        ("penalties(present=-inf)", "penalties", "present"),
        ("penalties(present=nan)", "penalties", "present"),
        ("dry(multiplier=nan)", "dry", "multiplier"),
        ("dry(multiplier=-inf)", "dry", "multiplier"),
        ("dry(multiplier=-0.5,base=inf)", "dry", "multiplier"),
        ("dry(base=nan)", "dry", "base"),
        ("dry(last_n=-2)", "dry", "last_n"),
        ("dry(multiplier=1,last_n=-1,n_ctx=0)", "dry", "n_ctx"),
        ("dry(n_ctx=2147483648)", "dry", "n_ctx"),
        ("dry(multiplier=1,allowed_length=-2147483648)", "dry", "allowed_length"),
        ("logit_bias(1=nan)", "logit_bias", "bias"),
        ("logit_bias(1=inf)", "logit_bias", "bias"),
        ("adaptive_p(target=nan)", "adaptive_p", "target"),
        ("adaptive_p(target=inf,decay=0)", "adaptive_p", "target"),
        ("adaptive_p(decay=nan)", "adaptive_p", "decay"),
    ];
    // approx_k's reason says what it is.
    let e = Chain::parse("top_p(approx_k=-1)").unwrap_err().to_string();
    assert!(e.contains("approx_k") && e.contains("-1") && e.contains("non-negative integer"), "{e}");
    for &(spec, stage, param) in REJECTED {
        let e = Chain::parse(&format!("greedy;{spec}")).unwrap_err();
        assert!(matches!(e, SamplingError::Spec { stage_index: 1, .. }), "{spec}: {e:?}");
        let msg = e.to_string();
        let want = format!("{stage}: invalid parameter `{param}` = ");
        assert!(msg.contains(&want), "{spec}: {msg}");
    }
}

/// Edge values whose llama.cpp result is NaN only for some rows are accepted, and such a row is an
/// error when the stage runs, on both representations, never NaN probabilities or a token.
#[test]
fn row_dependent_nan_is_an_error_when_the_stage_runs() {
    let list_of = |row: &[f32]| {
        let list = row.iter().enumerate().map(|(i, &l)| TokenData { id: i as u32, logit: l, p: 0.0 }).collect();
        Candidates::from_list(list, row.len()).unwrap()
    };
    // (spec, row, stage, parameter): an infinite temperature with a masked token (-inf / inf);
    // a dynamic temperature of inf with a masked token; a dynamic temperature of 0 * inf = NaN
    // (t = -0.5, delta = 0.5: max_t = min_t = 0; zero entropy, exponent -1: 0^-1 = inf).
    let cases: &[(&str, &[f32], &str)] = &[
        ("temp(t=inf);dist", &[1.0, f32::NEG_INFINITY, 2.0], "temp"),
        ("temp_ext(t=inf,delta=-1);dist", &[1.0, f32::NEG_INFINITY], "temp_ext"),
        ("top_k(k=2);temp(t=inf);dist", &[f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY], "temp"),
        ("temp_ext(t=1,delta=0.5,exponent=-1);dist", &[5.0, f32::NEG_INFINITY], "temp_ext"),
        ("temp_ext(t=-0.5,delta=0.5,exponent=-1);dist", &[0.0, -1000.0], "temp_ext"),
    ];
    for &(spec, row, stage) in cases {
        let view = Chain::parse(spec).unwrap().sample(row);
        let mut cur = list_of(row);
        let list = Chain::parse(spec).unwrap().apply(&mut cur);
        for r in [view.map(|_| ()), list] {
            match r {
                Err(SamplingError::InvalidParam { stage: s, param: "t", .. }) => assert_eq!(s, stage, "{spec}"),
                other => panic!("{spec}: expected InvalidParam for `t`, got {other:?}"),
            }
        }
    }
    // penalties(repeat = inf) on a seen token whose logit is exactly 0: 0 * inf = NaN, which the
    // next stage reports (as any NaN or +inf logit made inside a chain).
    let mut c = Chain::parse("penalties(repeat=inf);greedy").unwrap();
    c.accept(0);
    assert!(matches!(c.sample(&[0.0, 1.0]), Err(SamplingError::BadLogit { index: 0, .. })));
}

/// DRY's string breakers: a bad quoted value, or strings with no vocabulary to match them in, is
/// a SPEC error naming the stage (index and name) and the parameter.
#[test]
fn dry_string_breakers_bad_input_names_stage_and_parameter() {
    for (spec, what) in [
        (r#"dry(multiplier=1,breakers="\n|:"#, "unterminated quote"),
        (r#"dry(multiplier=1,breakers="\n|:\"#, "unterminated escape"),
        (r#"dry(multiplier=1,breakers="a\"#, "unterminated escape"),
        (r#"dry(multiplier=1,breakers="a\tb")"#, "unknown escape `\\t`"),
        (r#"dry(multiplier=1,breakers="a"b)"#, "after the closing quote"),
        (r#"dry(multiplier=1,breakers=a"b")"#, "a quote may only enclose the whole value"),
        (r#"dry(multiplier=1,breakers="\n|:|\"|*")"#, "need the model's vocabulary and tokenizer"),
        (r#"dry(multiplier=1,breakers="a;b,c)");dist"#, "need the model's vocabulary and tokenizer"),
    ] {
        let e = Chain::parse(&format!("greedy;{spec}")).unwrap_err();
        let SamplingError::Spec { stage_index, stage, message } = &e else { panic!("{spec}: {e:?}") };
        assert_eq!((*stage_index, stage.as_str()), (1, "dry"), "{spec}: {e}");
        assert!(message.contains("`breakers`") && message.contains(what), "{spec}: {e}");
    }
    // A quoted value where a number or token ids are expected.
    for (spec, param) in [
        (r#"dry(multiplier="1")"#, "`multiplier`"),
        (r#"bad_words(words="a")"#, "`words`"),
        (r#"logit_bias(5="1")"#, "`5`"),
    ] {
        let e = Chain::parse(spec).unwrap_err().to_string();
        assert!(e.contains(param) && e.contains("quoted"), "{spec}: {e}");
    }
    // With a vocabulary but no tokenizer (the tails need it; so do the detokenize flags).
    let (vocab, _) = common::breaker_vocab(&["a", ":"]);
    let cx = sampling::chain_spec::SpecContext { vocab: Some(vocab), ..Default::default() };
    let e = sampling::chain_spec::parse_with(r#"dry(multiplier=1,breakers=":")"#, &cx).unwrap_err().to_string();
    assert!(e.contains("dry") && e.contains("`breakers`") && e.contains("tokenizer"), "{e}");
}
