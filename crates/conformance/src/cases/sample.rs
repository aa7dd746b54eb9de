//! The fused sampling ops (`top_k_top_p_sample`, `random_sample`; family `sample`): rows whose
//! per-row parameters cover every regime (top-K run / skipped by `k <= 0`, `k > V`, `k > ks_max`;
//! top-P kept-one / run / skipped; min-P off / on / kept-one), every post stage and output, both
//! modes, every float dtype, f64 rows, and the sizes of [`super::EDGE_SIZES`] that keep the debug
//! run short. Indices and filtered logits compare exactly with the f64 reference: the random
//! data keep every top-P and min-P boundary far from its threshold.

use super::{Case, FLOATS};
use crate::compare::Cmp;
use crate::generate::{Gen, Rng};
use graph::DType;
use graph::fused::{FusedOutput, IndexDType, PostSample, TopKTopP};

/// Every case of the family.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    top_k_top_p(&mut v);
    random_sample(&mut v);
    v
}

/// Rows of a case: enough to cycle every regime of `k`, `p` and `m` against each other.
const ROWS: usize = 24;

/// `k` of row `r` for rows of length `n`.
fn k_of(rng: &mut Rng, r: usize, n: usize) -> f64 {
    match r % 8 {
        0 => 0.0,
        1 => 1.0,
        2 => 5.0,
        3 => n as f64,
        4 => n as f64 + 1.0,
        5 => 2000.0,
        6 => -3.0,
        _ => 1.0 + rng.below(n.min(50) as u64) as f64,
    }
}

/// `top_p` of row `r`.
fn p_of(rng: &mut Rng, r: usize) -> f64 {
    match (r / 2) % 6 {
        0 => 1.0,
        1 => 0.0,
        2 => -0.5,
        3 => 0.5,
        4 => 0.9,
        _ => 0.1 + 0.8 * rng.unit(),
    }
}

/// `min_p` of row `r`.
fn m_of(rng: &mut Rng, r: usize) -> f64 {
    match r % 5 {
        0 | 3 => 0.0,
        1 => 0.1,
        2 => 1.0,
        _ => 0.2 + 0.5 * rng.unit(),
    }
}

fn top_k_top_p(v: &mut Vec<Case>) {
    let posts = [PostSample::None, PostSample::QSample, PostSample::Multinomial];
    for dtype in FLOATS {
        for n in [1usize, 33, 4097, 151_936] {
            for post in posts {
                for logits_mode in [true, false] {
                    if n == 151_936 && (dtype != DType::F32 || !logits_mode) {
                        continue;
                    }
                    let name = format!(
                        "sample/top_k_top_p/{dtype}/{n}x{ROWS}/{}/{}",
                        post.name(),
                        if logits_mode { "logits" } else { "probs" }
                    );
                    v.push(Case::new(name, move |b| {
                        let vals = if logits_mode {
                            // ties: one value in 16 is drawn from a few levels
                            Gen::func(
                                |r: &mut Rng, _| {
                                    if r.below(16) == 0 { r.below(4) as f64 } else { -6.0 + 12.0 * r.unit() }
                                },
                            )
                        } else {
                            let hi = 2.0 / n as f64;
                            Gen::func(
                                move |r: &mut Rng, _| if r.below(16) == 0 { hi / 2.0 } else { hi.min(1.0) * r.unit() },
                            )
                        };
                        let x = b.input("logits", dtype, &[n, ROWS], vals)?;
                        let k = b.input("top_k", DType::I32, &[1, ROWS], Gen::func(move |r, i| k_of(r, i[1], n)))?;
                        let p = b.input(
                            "params",
                            DType::F32,
                            &[2, ROWS],
                            Gen::func(|r, i| if i[0] == 0 { p_of(r, i[1]) } else { m_of(r, i[1]) }),
                        )?;
                        let q = match post {
                            PostSample::None => None,
                            PostSample::QSample => Some(b.input(
                                "q",
                                DType::F32,
                                &[n, ROWS],
                                Gen::func(|r: &mut Rng, _| -(1.0 - r.unit()).ln()),
                            )?),
                            PostSample::Multinomial => Some(b.input(
                                "q",
                                DType::I32,
                                &[4, 7],
                                Gen::Ints(i64::from(i32::MIN), i64::from(i32::MAX)),
                            )?),
                        };
                        let mut a = TopKTopP::new(post);
                        a.input_is_logits = logits_mode;
                        a.ks_max = 1000;
                        a.top_k_guess = if n == 4097 { -1 } else { 8 };
                        let idx = b.g.top_k_top_p_sample(x, k, p, q, a)?;
                        b.check(idx, Cmp::Exact);
                        if post == PostSample::None {
                            let kept =
                                b.g.top_k_top_p_sample(x, k, p, q, TopKTopP { output: FusedOutput::Logits, ..a })?;
                            b.check(kept, Cmp::Exact);
                        }
                        Ok(())
                    }));
                }
            }
        }
    }
    // Bad rows: NaN, +inf, all -inf (logits mode), a value outside [0, 1] (probability mode), NaN
    // parameters: index -1 and an all-NaN logits row.
    for logits_mode in [true, false] {
        v.push(Case::new(
            format!("sample/top_k_top_p/bad_rows/{}", if logits_mode { "logits" } else { "probs" }),
            move |b| {
                let vals = Gen::func(move |r: &mut Rng, i| match (i[1], i[0]) {
                    (0, 3) => f64::NAN,
                    (1, 5) => f64::INFINITY,
                    (2, _) if logits_mode => f64::NEG_INFINITY,
                    (3, 0) if !logits_mode => 1.5,
                    (4, 1) if !logits_mode => -0.25,
                    _ => {
                        if logits_mode {
                            r.unit() * 4.0
                        } else {
                            r.unit() / 8.0
                        }
                    }
                });
                let x = b.input("logits", DType::F32, &[9, 8], vals)?;
                let k = b.input("top_k", DType::I32, &[1, 8], Gen::func(|_, _| 3.0))?;
                let p = b.input(
                    "params",
                    DType::F32,
                    &[2, 8],
                    Gen::func(|_, i| match (i[1], i[0]) {
                        (5, 0) | (6, 1) => f64::NAN,
                        (7, 0) => f64::INFINITY,
                        (_, 0) => 0.7,
                        _ => 0.1,
                    }),
                )?;
                let mut a = TopKTopP::new(PostSample::None);
                a.input_is_logits = logits_mode;
                let idx = b.g.top_k_top_p_sample(x, k, p, None, a)?;
                b.check(idx, Cmp::Exact);
                let kept = b.g.top_k_top_p_sample(x, k, p, None, TopKTopP { output: FusedOutput::Logits, ..a })?;
                b.check(kept, Cmp::Exact);
                Ok(())
            },
        ));
    }
}

fn random_sample(v: &mut Vec<Case>) {
    // Row parameters: random in (0, 1) except row 0 (0: argmax) and row 1 (topk = 1: argmax);
    // topk over <= 0, small, >= n; topp over 0 (argmax), (0, 1), > 1; temperature over 0 and
    // (0.3, 2).
    let params = |rows: usize| {
        Gen::func(move |r: &mut Rng, i| match (i[0], i[1] % rows) {
            (0, 0) => 0.0,
            (0, _) => 0.02 + 0.96 * r.unit(),
            (1, 2) => 0.0,
            (1, 3) => 1.7,
            (1, _) => 0.2 + 0.8 * r.unit(),
            (_, 4) => 0.0,
            (_, _) => 0.3 + 1.7 * r.unit(),
        })
    };
    let topk = |n: usize| {
        Gen::func(move |r: &mut Rng, i| match i[1] % 6 {
            1 => 1.0,
            2 => 0.0,
            3 => -5.0,
            4 => n as f64 + 3.0,
            _ => 1.0 + r.below(n.min(80) as u64) as f64,
        })
    };
    const ROWS: usize = 12;
    for dtype in FLOATS {
        for n in [1usize, 33, 4097, 151_936] {
            if n == 151_936 && dtype != DType::F32 {
                continue;
            }
            v.push(Case::new(format!("sample/random_sample/{dtype}/{n}x{ROWS}"), move |b| {
                let x = b.input("x", dtype, &[n, ROWS], Gen::Uniform(-4.0, 4.0))?;
                let p = b.input("params", DType::F32, &[3, ROWS], params(ROWS))?;
                let k = b.input("topk", DType::I32, &[1, ROWS], topk(n))?;
                let y = b.g.random_sample(x, p, k, IndexDType::I32, false)?;
                b.check(y, Cmp::Exact);
                Ok(())
            }));
        }
    }
    // Regimes, one per row of 8: random near 1 with topp 1 (the crossing deep in the tail), topp
    // tiny, topk 2, topp above 1 with no top-K, a tiny temperature, one so small that every
    // weight below the maximum underflows to 0, a large one, topk n - 1; on rows full of ties
    // (seven values, a quarter apart) with some -inf entries, V from 2 to 262,144.
    let regime = |n: usize| {
        let p = Gen::func(move |r: &mut Rng, i| match (i[0], i[1] % 8) {
            (0, 0) => 0.999_999,
            (0, _) => 0.05 + 0.9 * r.unit(),
            (1, 0) => 1.0,
            (1, 1) => 1e-6,
            (1, 3) => 5.0,
            (1, _) => 0.5 + 0.5 * r.unit(),
            (_, 4) => 1e-3,
            (_, 5) => 1e-30,
            (_, 6) => 50.0,
            (_, _) => 0.5 + r.unit(),
        });
        let k = Gen::func(move |r: &mut Rng, i| match i[1] % 8 {
            0 | 3 => 0.0,
            2 => 2.0,
            7 => n as f64 - 1.0,
            _ => 1.0 + r.below(n.min(300) as u64) as f64,
        });
        (p, k)
    };
    const RROWS: usize = 8;
    for (dtype, n) in [
        (DType::F32, 2usize),
        (DType::BF16, 2),
        (DType::F32, 257),
        (DType::BF16, 257),
        (DType::F16, 4097),
        (DType::F32, 70_000),
        (DType::BF16, 70_000),
        (DType::F32, 262_144),
    ] {
        v.push(Case::new(format!("sample/random_sample/regimes/{dtype}/{n}x{RROWS}"), move |b| {
            let ties = Gen::func(
                |r: &mut Rng, i| {
                    if i[0] % 97 == 5 { f64::NEG_INFINITY } else { (r.below(7) as f64 - 6.0) * 0.25 }
                },
            );
            let x = b.input("x", dtype, &[n, RROWS], ties)?;
            let (pg, kg) = regime(n);
            let p = b.input("params", DType::F32, &[3, RROWS], pg)?;
            let k = b.input("topk", DType::I32, &[1, RROWS], kg)?;
            let y = b.g.random_sample(x, p, k, IndexDType::I32, false)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
    }
    // f64 rows as bit pairs: values closer together than f32 can tell apart.
    for n in [5usize, 300] {
        v.push(Case::new(format!("sample/random_sample/f64/{n}x{ROWS}"), move |b| {
            let bits = Gen::func(move |r: &mut Rng, i| {
                // Each pair of i32 is one f64: regenerate the value from the pair's index.
                let mut rr = Rng::new((i[0] / 2 + 1000 * i[1]) as u64);
                let val = 1.0 + (rr.below(8) as f64) * 1e-12 + rr.unit() * 1e-3;
                let _ = r.next_u32();
                let b = val.to_bits();
                f64::from(if i[0] % 2 == 0 { b as u32 as i32 } else { (b >> 32) as u32 as i32 })
            });
            let x = b.input("x", DType::I32, &[2 * n, ROWS], bits)?;
            let p = b.input("params", DType::F32, &[3, ROWS], params(ROWS))?;
            let k = b.input("topk", DType::I32, &[1, ROWS], topk(n))?;
            let y = b.g.random_sample(x, p, k, IndexDType::U16, true)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
    }
}
