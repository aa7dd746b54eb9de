//! The fused sampling ops (`top_k_top_p_sample`, `random_sample`; family `sample`), the one home of
//! their cases for every backend (the CPU against the f64 reference, Vulkan against the CPU).
//! `top_k_top_p_sample`: rows whose per-row parameters cycle every regime (top-K run / skipped by
//! `k <= 0`, `k > V`, `k > ks_max`; top-P kept-one / run / skipped; min-P off / on / kept-one) on
//! spread, tied, `-inf`-holding and bad rows (NaN, `+inf`, out of `[0, 1]`), every post stage,
//! both modes, every float dtype, `ks_max` and `top_k_guess` varied, V from 1 to 262,144, and 16
//! random cases whose rows take random regimes; index and filtered logits checked on each.
//! `random_sample`: every regime of `(random, topp, temperature, topk)` including bad parameters,
//! on spread, tied, `-inf`-holding and bad rows, every float dtype and f64 rows, V over chunk and
//! lane boundaries up to 262,144, and 16 random cases. Everything compares exactly: the
//! backends decide as the reference does on all of these rows (a close call where the CPU's f64
//! sums and the reference's round differently would show up here as a failure).

use super::{Builder, Case, FLOATS};
use crate::compare::Cmp;
use crate::generate::{Gen, Rng};
use graph::{DType, GraphError, NodeId};

type GResult<T> = Result<T, GraphError>;
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

/// Logits (or probabilities) of row `row` of a case of rows of `n`: spread values with one in 16
/// from a few levels; every fourth row all ties (a few levels); in logits mode every sixth row
/// with `-inf` at every third token; with `bad`, row 10 holds a NaN and row 21 a `+inf` (a value
/// above 1 in probability mode).
fn x_of(r: &mut Rng, i: [usize; 4], n: usize, logits_mode: bool, bad: bool) -> f64 {
    let (t, row) = (i[0], i[1]);
    if bad && row % 11 == 10 && t == if row / 11 == 0 { n / 2 } else { n - 1 } {
        return match (row / 11, logits_mode) {
            (0, _) => f64::NAN,
            (_, true) => f64::INFINITY,
            (_, false) => 1.5,
        };
    }
    if logits_mode && row % 6 == 5 && n > 3 && t % 3 == 0 {
        return f64::NEG_INFINITY;
    }
    let tied = row % 4 == 2;
    match (logits_mode, tied) {
        (true, true) => r.below(5) as f64 * 0.5,
        (true, false) => {
            if r.below(16) == 0 {
                r.below(4) as f64
            } else {
                -6.0 + 12.0 * r.unit()
            }
        }
        (false, true) => r.below(4) as f64 * 0.125,
        (false, false) => {
            let hi = (2.0 / n as f64).min(1.0);
            if r.below(16) == 0 { hi / 2.0 } else { hi * r.unit() }
        }
    }
}

fn top_k_top_p(v: &mut Vec<Case>) {
    let posts = [PostSample::None, PostSample::QSample, PostSample::Multinomial];
    let mut nth = 0usize;
    for dtype in FLOATS {
        for n in [1usize, 2, 7, 33, 2049, 4097, 151_936] {
            for post in posts {
                for logits_mode in [true, false] {
                    if n == 151_936 && (dtype != DType::F32 || !logits_mode) {
                        continue;
                    }
                    // The skip bound `ks_max` below most `k` on every other case, and `top_k_guess`
                    // (speed only) spread.
                    let ks_max = if nth % 4 < 2 { 1000 } else { 6 };
                    let guess = [8, 0, 1, -1][(nth / 3) % 4];
                    nth += 1;
                    let name = format!(
                        "sample/top_k_top_p/{dtype}/{n}x{ROWS}/{}/{}/ks{ks_max}",
                        post.name(),
                        if logits_mode { "logits" } else { "probs" }
                    );
                    let bad = n > 1;
                    v.push(Case::new(name, move |b| {
                        let vals = Gen::func(move |r: &mut Rng, i| x_of(r, i, n, logits_mode, bad));
                        let x = b.input("logits", dtype, &[n, ROWS], vals)?;
                        let k = b.input("top_k", DType::I32, &[1, ROWS], Gen::func(move |r, i| k_of(r, i[1], n)))?;
                        let p = b.input(
                            "params",
                            DType::F32,
                            &[2, ROWS],
                            Gen::func(|r, i| if i[0] == 0 { p_of(r, i[1]) } else { m_of(r, i[1]) }),
                        )?;
                        let q = q_input(b, post, n, ROWS, 7, Gen::func(|r: &mut Rng, _| -(1.0 - r.unit()).ln()))?;
                        let mut a = TopKTopP::new(post);
                        a.input_is_logits = logits_mode;
                        a.ks_max = ks_max;
                        a.top_k_guess = guess;
                        check_both(b, [x, k, p], q, a)
                    }));
                }
            }
        }
    }
    // Long rows: 262,144 tokens, top-P over the whole row, top-K, unsorted min-P.
    for post in posts {
        v.push(Case::new(format!("sample/top_k_top_p/f32/262144x4/{}/logits", post.name()), move |b| {
            let n = 262_144;
            let x = b.input("logits", DType::F32, &[n, 4], Gen::func(move |r, i| x_of(r, i, n, true, false)))?;
            let k = b.input("top_k", DType::I32, &[1, 4], Gen::func(|_, i| [0.0, 40.0, -1.0, 1024.0][i[1]]))?;
            let p = b.input(
                "params",
                DType::F32,
                &[2, 4],
                Gen::func(|_, i| if i[0] == 0 { [0.9, 0.8, 1.0, 0.4][i[1]] } else { [0.0, 0.05, 0.02, 0.0][i[1]] }),
            )?;
            let q = q_input(b, post, n, 4, 3, Gen::func(|r: &mut Rng, _| 2.0 * r.unit()))?;
            let a = TopKTopP::new(post);
            check_both(b, [x, k, p], q, a)
        }));
    }
    // Random cases (fixed seeds): V, rows, dtype, post stage, mode, `ks_max` and `top_k_guess`
    // drawn per case, each row in a regime drawn at random instead of cycled.
    for seed in 0..16u64 {
        let mut r = Rng::new(0xF05E_D000 + seed);
        let n = [1 + r.below(8), 9 + r.below(292), 301 + r.below(4700)][r.below(3) as usize] as usize;
        let rows = 1 + r.below(6) as usize;
        let dtype = FLOATS[r.below(3) as usize];
        let post = posts[r.below(3) as usize];
        let logits_mode = r.below(2) == 0;
        let ks_max = [1024, 1 + r.below(64), 1025 + r.below(3072)][r.below(3) as usize] as u32;
        let guess = r.below(109) as i32 - 8;
        // Row `row` takes the regime of row `picks[row]` of the cycled cases.
        let picks: Vec<usize> = (0..rows).map(|_| r.below(120) as usize).collect();
        let name = format!(
            "sample/top_k_top_p/random/{seed}/{dtype}/{n}x{rows}/{}/{}",
            post.name(),
            if logits_mode { "logits" } else { "probs" }
        );
        v.push(Case::new(name, move |b| {
            let pk = picks.clone();
            let vals = Gen::func(move |r: &mut Rng, i| x_of(r, [i[0], pk[i[1]], 0, 0], n, logits_mode, true));
            let x = b.input("logits", dtype, &[n, rows], vals)?;
            let pk = picks.clone();
            let k = b.input("top_k", DType::I32, &[1, rows], Gen::func(move |r, i| k_of(r, pk[i[1]], n)))?;
            let pk = picks.clone();
            let p = b.input(
                "params",
                DType::F32,
                &[2, rows],
                Gen::func(move |r, i| if i[0] == 0 { p_of(r, pk[i[1]]) } else { m_of(r, pk[i[1]]) }),
            )?;
            let q = q_input(b, post, n, rows, rows.div_ceil(2), Gen::func(|r: &mut Rng, _| 3.0 * r.unit()))?;
            let a = TopKTopP { input_is_logits: logits_mode, ks_max, top_k_guess: guess, ..TopKTopP::new(post) };
            check_both(b, [x, k, p], q, a)
        }));
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
    // Every regime of a row's parameters, one per row of 24, including bad parameters (NaN or
    // `random` outside [0, 1), negative `topp` or temperature, `+inf`): the argmax path, top-K
    // small, 1, 2, n - 1, off (`<= 0`, `>= n`), topp tiny, above 1, random near 1, temperatures
    // tiny, underflowing and large; on rows that are spread, tied or hold `-inf`, with NaN,
    // `+inf` and all-`-inf` rows; V over chunk and lane boundaries; f64 rows too.
    for (dtype, n, f64_rows) in
        [1usize, 2, 7, 33, 255, 256, 257, 2049, 65_537].into_iter().enumerate().flat_map(|(j, n)| {
            let f64_rows = [7, 257, 2049].contains(&n);
            std::iter::once((FLOATS[j % 3], n, false)).chain(f64_rows.then_some((DType::F32, n, true)))
        })
    {
        let kind = if f64_rows { "f64".to_string() } else { dtype.to_string() };
        v.push(Case::new(format!("sample/random_sample/edges/{kind}/{n}x{EROWS}"), move |b| {
            let x = if f64_rows {
                // Each pair of i32 is one f64 row value plus a multiple of 1e-12 (ties stay
                // among equal offsets): regenerated from the pair's index.
                let bits = Gen::func(move |_, i| {
                    let (t, row) = (i[0] / 2, i[1]);
                    let mut rr = Rng::new((t * EROWS + row) as u64 ^ 0xF64);
                    let val = rs_x(&mut rr, t, row, n) + (t % 5) as f64 * 1e-12;
                    f64_word(val, i[0])
                });
                b.input("x", DType::I32, &[2 * n, EROWS], bits)?
            } else {
                b.input("x", dtype, &[n, EROWS], Gen::func(move |r, i| rs_x(r, i[0], i[1], n)))?
            };
            let p = b.input("params", DType::F32, &[3, EROWS], Gen::func(|r, i| rs_params(r, i[1])[i[0]]))?;
            let k = b.input("topk", DType::I32, &[1, EROWS], Gen::func(move |r, i| rs_topk(r, i[1], n)))?;
            let y = b.g.random_sample(x, p, k, IndexDType::I64, f64_rows)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
    }
    // Random cases (fixed seeds): V, rows, dtype and f64 rows drawn per case, each row's
    // parameters and values in a regime drawn at random.
    for seed in 0..16u64 {
        let mut r = Rng::new(0x5A_3D00 + seed);
        let n = [1 + r.below(8), 9 + r.below(592), 601 + r.below(19_400)][r.below(3) as usize] as usize;
        let rows = 1 + r.below(6) as usize;
        let f64_rows = r.below(4) == 0;
        let dtype = FLOATS[r.below(3) as usize];
        let picks: Vec<usize> = (0..rows).map(|_| r.below(24 * 11) as usize).collect();
        let kind = if f64_rows { "f64".to_string() } else { dtype.to_string() };
        v.push(Case::new(format!("sample/random_sample/random/{seed}/{kind}/{n}x{rows}"), move |b| {
            let pk = picks.clone();
            let x = if f64_rows {
                let bits = Gen::func(move |_, i| {
                    let (t, row) = (i[0] / 2, pk[i[1]]);
                    let mut rr = Rng::new((t * 1000 + i[1]) as u64 ^ seed);
                    let val = rs_x(&mut rr, t, row, n) + (t % 5) as f64 * 1e-12;
                    f64_word(val, i[0])
                });
                b.input("x", DType::I32, &[2 * n, rows], bits)?
            } else {
                b.input("x", dtype, &[n, rows], Gen::func(move |r, i| rs_x(r, i[0], pk[i[1]], n)))?
            };
            let pk = picks.clone();
            let p = b.input("params", DType::F32, &[3, rows], Gen::func(move |r, i| rs_params(r, pk[i[1]])[i[0]]))?;
            let pk = picks.clone();
            let k = b.input("topk", DType::I32, &[1, rows], Gen::func(move |r, i| rs_topk(r, pk[i[1]], n)))?;
            let y = b.g.random_sample(x, p, k, IndexDType::I64, f64_rows)?;
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
                f64_word(val, i[0])
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

/// Rows of the `random_sample/edges` cases: one per parameter regime of [`rs_params`].
const EROWS: usize = 24;

/// Row `row`'s `[random, topp, temperature]` (24 regimes, `row % 24`).
fn rs_params(r: &mut Rng, row: usize) -> [f64; 3] {
    let (rnd, topp, t) = (0.02 + 0.96 * r.unit(), 0.2 + 0.8 * r.unit(), 0.3 + 1.7 * r.unit());
    match row % 24 {
        0 => [0.0, topp, t],
        3 => [rnd, topp, 0.0],
        7 => [0.999_999, 1.0, t],
        8 => [rnd, 1e-6, t],
        9 => [rnd, 5.0, t],
        10 => [rnd, topp, 1e-3],
        11 => [rnd, topp, 1e-30],
        12 => [rnd, topp, 50.0],
        15 => [0.999_999_94, 1.0, 1.0],
        16 => [f64::NAN, topp, t],
        17 => [1.0, topp, t],
        18 => [rnd, -0.5, t],
        19 => [rnd, topp, -1.0],
        20 => [rnd, f64::INFINITY, t],
        21 => [rnd, topp, f64::INFINITY],
        1 => [rnd, 0.0, t],
        _ => [rnd, topp, t],
    }
}

/// Row `row`'s `topk` (the regimes of [`rs_params`]'s rows) for rows of `n`.
fn rs_topk(r: &mut Rng, row: usize, n: usize) -> f64 {
    let small = 2.0 + r.below(n.clamp(1, 60) as u64) as f64;
    match row % 24 {
        1 | 5 | 7 | 8 | 11 | 12 | 15..=21 => 0.0,
        2 => 1.0,
        3 => -3.0,
        6 => n as f64 + 2.0,
        9 => -1.0,
        13 => (n as f64 - 1.0).max(2.0),
        14 => 2.0,
        _ => small,
    }
}

/// Token `t` of row `row` (rows of `n`): spread, tied (six levels), with `-inf` entries; row 4
/// mod 11 holds a NaN, row 5 mod 11 a `+inf` and row 6 mod 11 is all `-inf`.
fn rs_x(r: &mut Rng, t: usize, row: usize, n: usize) -> f64 {
    if n > 1 {
        match row % 11 {
            4 if t == n / 2 => return f64::NAN,
            5 if t == n - 1 => return f64::INFINITY,
            6 => return f64::NEG_INFINITY,
            _ => {}
        }
    }
    let kind = row % 7;
    if (kind == 2 || kind == 3) && t >= 3 && (t - 3).is_multiple_of(11) {
        return f64::NEG_INFINITY;
    }
    match kind {
        1 | 2 => (r.below(6) as f64 - 5.0) * 0.25,
        _ => r.unit() * 8.0 - 4.0,
    }
}

/// The `q` input of a `top_k_top_p_sample` case: none, qSample noise `[n, rows]` from `noise`, or
/// `pairs` multinomial (seed, offset) keys.
fn q_input(
    b: &mut Builder,
    post: PostSample,
    n: usize,
    rows: usize,
    pairs: usize,
    noise: Gen,
) -> GResult<Option<NodeId>> {
    Ok(match post {
        PostSample::None => None,
        PostSample::QSample => Some(b.input("q", DType::F32, &[n, rows], noise)?),
        PostSample::Multinomial => {
            Some(b.input("q", DType::I32, &[4, pairs], Gen::Ints(i64::from(i32::MIN), i64::from(i32::MAX)))?)
        }
    })
}

/// Checks both outputs of `top_k_top_p_sample` over `[logits, top_k, params]` and `q` exactly: the
/// index and the filtered logits.
fn check_both(b: &mut Builder, [x, k, p]: [NodeId; 3], q: Option<NodeId>, a: TopKTopP) -> GResult<()> {
    let idx = b.g.top_k_top_p_sample(x, k, p, q, a)?;
    b.check(idx, Cmp::Exact);
    let kept = b.g.top_k_top_p_sample(x, k, p, q, TopKTopP { output: FusedOutput::Logits, ..a })?;
    b.check(kept, Cmp::Exact);
    Ok(())
}

/// Word `i0 % 2` of `val`'s bits as an i32 (low word first): f64 rows as i32 word pairs.
fn f64_word(val: f64, i0: usize) -> f64 {
    let b = val.to_bits();
    f64::from(if i0.is_multiple_of(2) { b as u32 as i32 } else { (b >> 32) as u32 as i32 })
}
