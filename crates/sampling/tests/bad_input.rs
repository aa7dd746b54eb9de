//! Bad input: NaN and +inf logits (at the start, middle, end, inside and after the vectorised
//! chunks), all `-inf` rows and empty arrays give a clear error naming the stage and position for
//! every kind of chain (each fast path and the materialising path), never a panic or a token.

mod common;
use sampling::{Candidates, Chain, SamplingError, TokenData};

const CHAINS: &[&str] = &[
    "greedy",
    "dist",
    "top_k(k=40)",
    "top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist",
    "top_p(p=0.95);temp(t=0.8);dist",
    "min_p(p=0.05);temp(t=0.8);dist",
    "temp(t=0.8);dist",
    "temp(t=0);dist",
    "typical(p=0.5);dist",
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
