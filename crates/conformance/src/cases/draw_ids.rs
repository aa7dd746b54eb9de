//! Cases for the draws that return token ids (`categorical` and `spec_verify` with `ids`): a
//! candidate list's values and the token id of each entry, as a backend sampler chain's `top_k`
//! leaves them. Rows mix entries a stage removed (`-inf`, id -1) with live ones; some rows are bad
//! (a NaN, a `+inf`, all `-inf`: -1), one row's peak entry holds id -1 (a good draw that returns -1),
//! one holds each token twice. Checked as draws ([`Cmp::Draw`]) through the ids.

use super::Case;
use crate::compare::Cmp;
use crate::generate::{Gen, Rng};
use graph::DType;

const DRAW: Cmp = Cmp::Draw { rel: 1e-6 };

/// The tokens of a 50000-token vocabulary the entries hold.
const VOCAB: usize = 50_000;

/// Whether entry `i` of a regular row was removed by a stage (`-inf`, id -1).
fn removed(i: [usize; 4]) -> bool {
    i[0] % 7 == 3 && i[1] % 3 == 1
}

/// The list values, per row pattern `row % 8`: 4, a `+inf` entry; 5, a NaN entry; 6, all `-inf`;
/// 7, a peak at entry 0 (whose id is -1); else random values with removed entries.
fn values(k: usize) -> Gen {
    Gen::func(move |r: &mut Rng, i: [usize; 4]| match (i[1] % 8, i[0]) {
        (4, e) if e == k / 2 => f64::INFINITY,
        (5, e) if e == k / 3 => f64::NAN,
        (6, _) => f64::NEG_INFINITY,
        (7, 0) => 9.0,
        _ if removed(i) => f64::NEG_INFINITY,
        _ => r.below(1000) as f64 / 100.0 - 5.0,
    })
}

/// The token id of each entry: distinct tokens (-1 for removed entries and row 7's peak); in rows
/// 3 (mod 8) every token twice (entries `2j` and `2j + 1`).
fn ids() -> Gen {
    Gen::func(move |_, i: [usize; 4]| match (i[1] % 8, i[0]) {
        (7, 0) => -1.0,
        _ if removed(i) => -1.0,
        (3, e) => ((e / 2 * 7919 + i[1] * 104_729) % VOCAB) as f64,
        (_, e) => ((e * 7919 + i[1] * 104_729) % VOCAB) as f64,
    })
}

/// The cases.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    let keys4 = || Gen::Ints(i64::from(i32::MIN), i64::from(i32::MAX));
    for (k, rows, stream) in [(1usize, 8usize, 0u32), (40, 24, 0), (1000, 9, 3), (4097, 8, 2)] {
        v.push(Case::new(format!("random/categorical/ids/{k}x{rows}/stream{stream}"), move |b| {
            let x = b.input("x", DType::F32, &[k, rows], values(k))?;
            let ids = b.input("ids", DType::I32, &[k, rows], ids())?;
            let keys = b.input("keys", DType::I32, &[4, rows], keys4())?;
            let y = b.g.categorical(x, keys, None, Some(ids), stream)?;
            b.check(y, DRAW);
            Ok(())
        }));
        // The same lists verified: the draft is an entry's token (mostly accepted or not), row 7's
        // -1 (no draft: a plain draw), a token not in the list, or the peak's.
        v.push(Case::new(format!("random/spec_verify/ids/special/{k}x{rows}/stream{stream}"), move |b| {
            let x = b.input("x", DType::F32, &[k, rows], values(k))?;
            let ids = b.input("ids", DType::I32, &[k, rows], ids())?;
            let keys = b.input(
                "keys",
                DType::I32,
                &[5, rows],
                Gen::func(move |r: &mut Rng, i: [usize; 4]| match (i[0], i[1] % 3) {
                    (4, 0) => ((r.below(k as u64) as usize * 7919 + i[1] * 104_729) % VOCAB) as f64,
                    (4, 1) => -1.0,
                    (4, _) => (VOCAB - 1 - i[1]) as f64,
                    _ => r.below(1 << 32) as f64 - 2_147_483_648.0,
                }),
            )?;
            let y = b.g.spec_verify(x, keys, graph::SpecAux::Ids(ids), stream)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
    v
}
