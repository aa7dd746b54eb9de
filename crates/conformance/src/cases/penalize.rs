//! Cases for `penalize` (llama.cpp's repetition, frequency and presence penalties on whole rows from
//! per-token counts): rows of the edge sizes with positive, negative, zero and `-inf` logits, most
//! counts zero and the rest small integers, per-row parameters (an identity row, a repetition
//! penalty below 1, frequency and presence alone and together), against the f64 reference.

use super::{Case, EDGE_SIZES};
use crate::compare::{Cmp, Tol};
use crate::generate::Gen;
use graph::DType;

/// Per row `(repeat, freq, present)`, row `r` taking entry `r % len`.
const PARAMS: [[f64; 3]; 6] =
    [[1.1, 0.1, 0.1], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.5, 0.25, 0.0], [1.3, 0.0, 0.75], [1.0, 0.05, 0.2]];

/// One f32 rounding of the division or product, then of the sum and the difference: relative to
/// the result, with an absolute part for a difference that cancels (logits up to 10 in size).
const TOL: Tol = Tol::new(1e-5, 4e-7);

fn case(n: usize, rows: usize) -> Case {
    Case::new(format!("penalize/f32/{n}x{rows}"), move |b| {
        // Every 17th logit is -inf and every 13th zero; the rest uniform in [-10, 10).
        let x = b.input(
            "x",
            DType::F32,
            &[n, rows],
            Gen::func(|r, i| match (i[0] % 17, i[0] % 13) {
                (5, _) => f64::NEG_INFINITY,
                (_, 7) => 0.0,
                _ => r.unit() * 20.0 - 10.0,
            }),
        )?;
        // About one token in four counted, 1 to 4 times.
        let counts = b.input(
            "counts",
            DType::F32,
            &[n, rows],
            Gen::func(|r, _| if r.below(4) == 0 { 1.0 + r.below(4) as f64 } else { 0.0 }),
        )?;
        let params = b.input("params", DType::F32, &[3, rows], Gen::func(|_, i| PARAMS[i[1] % PARAMS.len()][i[0]]))?;
        let y = b.g.penalize(x, counts, params)?;
        b.check(y, Cmp::Close(TOL));
        Ok(())
    })
}

/// The cases.
pub fn cases() -> Vec<Case> {
    let mut v: Vec<Case> = EDGE_SIZES.iter().filter(|&&n| n <= 151_936).map(|&n| case(n, 3)).collect();
    v.push(case(64, 12));
    v
}
