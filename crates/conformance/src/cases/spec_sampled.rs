//! Cases for `spec_verify_sampled` (speculative verification of a draft token drawn from a
//! distribution `q`), checked as draws ([`Cmp::Draw`]) against the f64 reference: the acceptance
//! test `a q(d) W < w_e` (close calls either way) and, after a rejection, the residual
//! `max(0, w - q W)`'s brackets. On the vocabulary (with and without per-row scale and cut) and
//! on a candidate list (token ids per entry, removed entries). Each row's `q` lists the draft
//! token first (as a drafter gives it), then tokens of the row, tokens without an entry (past the
//! vocabulary, not in the list), `-1` padding of weight 0; per row pattern the draft is `-1` (a
//! plain draw, `q` unread), a token without an entry (always rejected), the peak (mostly
//! accepted), a token `q` gives no weight (accepted iff it weighs), or a bad `q` (a NaN, a
//! negative weight, all zeros: -1).

use super::Case;
use crate::compare::Cmp;
use crate::generate::{Gen, Rng};
use graph::{DType, SpecAux};

/// The residual's brackets are relative to its own total `R`; the weights' rounding is relative
/// to `W`, and `R` is a fair part of `W` in these rows.
const DRAW: Cmp = Cmp::Draw { rel: 1e-5 };

/// The draft token of row `r` (`n`: the vocabulary, or a token of the list via `token_of`).
fn draft_of(r: usize, n: usize, token_of: &impl Fn(usize, usize) -> i64) -> i64 {
    match r % 8 {
        0 => -1,
        1 => n as i64 + 3,
        2 | 3 => token_of(0, r),
        _ => token_of((r * 7919 + 13) % n, r),
    }
}

/// The keys `[5, rows]`: random seed and step words, the fifth the draft token.
fn keys(n: usize, token_of: impl Fn(usize, usize) -> i64 + Send + Sync + 'static) -> Gen {
    Gen::func(move |r: &mut Rng, i: [usize; 4]| match i[0] {
        4 => draft_of(i[1], n, &token_of) as f64,
        _ => r.below(1 << 32) as f64 - 2_147_483_648.0,
    })
}

/// The ids of `q` `[m, rows]`: the draft token first (rows 5 mod 8: a token other than the
/// draft, so `q(d) = 0`), then tokens of the row, past it, and `-1` padding.
fn q_ids(n: usize, token_of: impl Fn(usize, usize) -> i64 + Send + Sync + 'static) -> Gen {
    Gen::func(move |_, i: [usize; 4]| {
        let (j, r) = (i[0], i[1]);
        let d = draft_of(r, n, &token_of);
        let t = match j {
            0 if r % 8 == 5 => token_of((r * 31 + 1) % n, r),
            0 if d >= 0 => d,
            _ if j % 5 == 4 => -1,
            _ if j % 7 == 6 => n as i64 + 100 + j as i64,
            _ => token_of((r * 104_729 + j * 7919) % n, r),
        };
        t as f64
    })
}

/// The weights of `q` `[m, rows]`: 2 on the first entry, random elsewhere, 0 on the padding; rows
/// 6, 14 and 7 (mod 16) are bad (a NaN, a negative weight, all zeros).
fn q_probs() -> Gen {
    Gen::func(move |r: &mut Rng, i: [usize; 4]| match (i[1] % 16, i[0]) {
        (7, _) => 0.0,
        (6, 1) => f64::NAN,
        (14, 1) => -0.5,
        (_, 0) => 2.0,
        (_, j) if j % 5 == 4 => 0.0,
        _ => r.below(300) as f64 / 100.0 + 0.01,
    })
}

/// Logits in `[-6, 6)`, rows 2 and 3 (mod 8) peaked at entry 0.
fn logits() -> Gen {
    Gen::func(|r: &mut Rng, i: [usize; 4]| match (i[1] % 8, i[0]) {
        (2 | 3, 0) => 9.0,
        _ => r.below(1200) as f64 / 100.0 - 6.0,
    })
}

/// The cases.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    let vocab = |e: usize, _r: usize| e as i64;
    for (n, rows, m, stream) in [(1usize, 2usize, 1usize, 0u32), (33, 16, 8, 0), (4097, 16, 40, 2), (151_936, 8, 64, 0)]
    {
        v.push(Case::new(format!("random/spec_verify/sampled/{n}x{rows}/q{m}/stream{stream}"), move |b| {
            let x = b.input("x", DType::F32, &[n, rows], logits())?;
            let k = b.input("keys", DType::I32, &[5, rows], keys(n, vocab))?;
            let qi = b.input("q_ids", DType::I32, &[m, rows], q_ids(n, vocab))?;
            let qp = b.input("q_probs", DType::F32, &[m, rows], q_probs())?;
            let y = b.g.spec_verify_sampled(x, k, qi, qp, SpecAux::None, stream)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
    // Per-row scale and cut: s = +inf (greedy: the first maximum whatever `q`), bad parameters
    // (-1), a cut that removes the draft token (rejected, its `q` still taken off the others).
    for n in [40usize, 3000] {
        v.push(Case::new(format!("random/spec_verify/sampled/params/{n}"), move |b| {
            let x = b.input("x", DType::F32, &[n, 32], logits())?;
            let k = b.input("keys", DType::I32, &[5, 32], keys(n, vocab))?;
            let qi = b.input("q_ids", DType::I32, &[12, 32], q_ids(n, vocab))?;
            let qp = b.input("q_probs", DType::F32, &[12, 32], q_probs())?;
            let p = b.input(
                "params",
                DType::F32,
                &[2, 32],
                Gen::func(|r: &mut Rng, i: [usize; 4]| match (i[1], i[0]) {
                    (10 | 11, 0) => f64::INFINITY,
                    (13, 0) => 0.0,
                    (20, 1) => f64::NAN,
                    (_, 0) => 0.3 + r.below(1000) as f64 * 0.0027,
                    (_, _) => -(r.below(1000) as f64) * 0.004,
                }),
            )?;
            let y = b.g.spec_verify_sampled(x, k, qi, qp, SpecAux::Params(p), 1)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
    // A candidate list: distinct token ids of a 50000-token vocabulary, some entries removed
    // (-inf, id -1); `q`'s tokens are the list's, tokens not in it, and padding.
    for (k, rows, m) in [(1usize, 8usize, 2usize), (40, 24, 16), (1000, 16, 32)] {
        v.push(Case::new(format!("random/spec_verify/sampled/ids/{k}x{rows}/q{m}"), move |b| {
            let removed = |e: usize, r: usize| e % 7 == 3 && r % 3 == 1;
            let token = move |e: usize, r: usize| ((e * 7919 + r * 104_729) % 50_000) as i64;
            let x = b.input(
                "x",
                DType::F32,
                &[k, rows],
                Gen::func(
                    move |r: &mut Rng, i: [usize; 4]| {
                        if removed(i[0], i[1]) { f64::NEG_INFINITY } else { r.below(1000) as f64 / 100.0 - 5.0 }
                    },
                ),
            )?;
            let ids = b.input(
                "ids",
                DType::I32,
                &[k, rows],
                Gen::func(move |_, i: [usize; 4]| if removed(i[0], i[1]) { -1.0 } else { token(i[0], i[1]) as f64 }),
            )?;
            let kk = b.input("keys", DType::I32, &[5, rows], keys(k, token))?;
            let qi = b.input("q_ids", DType::I32, &[m, rows], q_ids(k, token))?;
            let qp = b.input("q_probs", DType::F32, &[m, rows], q_probs())?;
            let y = b.g.spec_verify_sampled(x, kk, qi, qp, SpecAux::Ids(ids), 0)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
    v
}
