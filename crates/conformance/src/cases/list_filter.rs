//! Cases for `list_filter` (the list stages top-p, min-p and temp in one node): candidate lists as
//! `top_k` leaves them (value descending, `-inf` entries at the tail, NaN rows), each stage alone
//! and in several orders, per-row parameters over the edge values (p 0 and 1, min_keep 0, 1, a
//! fraction, beyond the list; min-p's `ln p` of 0, of p > 1 and `-inf`; temperatures tiny, huge
//! and infinite), ties, and NaN parameters. The oracle replays the `f32` arithmetic, so the CPU
//! must match it exactly; another backend may move a cut only at a close call
//! ([`Cmp::ListFilter`]).

use super::Case;
use crate::compare::Cmp;
use crate::generate::{Gen, Rng};
use graph::{DType, ListStage, ListStages};

use ListStage::{MinP, Temp, TopP};

/// The values of list row `r` (of `k` entries): descending, by row pattern `r % 8`: 0-2 random
/// steps (spread by the row), 3 ties in groups of four, 4 `-inf` from entry `k / 2` on, 5 a single
/// finite entry, 6 all NaN (what `top_k`'s check leaves for a bad row), 7 a NaN in the middle.
fn lists(k: usize) -> Gen {
    Gen::func(move |rng: &mut Rng, i: [usize; 4]| {
        let (e, r) = (i[0] as f64, i[1]);
        let step = 0.05 + 0.4 * ((r * 37) % 11) as f64 / 10.0;
        match r % 8 {
            3 => 4.0 - 0.7 * (i[0] / 4) as f64,
            4 if i[0] >= k / 2 => f64::NEG_INFINITY,
            5 if i[0] > 0 => f64::NEG_INFINITY,
            6 => f64::NAN,
            7 if i[0] == k / 2 => f64::NAN,
            _ => 6.0 - step * e - step * 0.9 * rng.unit(),
        }
    })
}

/// Per-stage parameter pairs cycled over the rows: `(p, min_keep)` for top-p, `(ln p, min_keep)`
/// for min-p, `(t, 0)` for temp.
fn params_of(stage: ListStage) -> &'static [[f64; 2]] {
    match stage {
        TopP => &[
            [0.9, 0.0],
            [0.437, 1.0],
            [0.0, 3.0],
            [0.95, 40.0],
            [0.61, 2.5],
            [1.0, 0.0],
            [0.999_999, 0.0],
            [-0.5, 0.0],
            [0.3, 1e9],
            [0.05, 0.0],
            [0.75, 0.0],
        ],
        MinP => &[
            [-2.995_732_3, 0.0],
            [-std::f64::consts::LN_2, 1.0],
            [0.0, 0.0],
            [std::f64::consts::LN_2, 0.0],
            [-1.2, 5.0],
            [f64::NEG_INFINITY, 0.0],
            [-4.0, 1e9],
            [-0.1, 2.5],
            [-30.0, 0.0],
        ],
        Temp => &[[0.8, 0.0], [1.0, 0.0], [1e-3, 0.0], [1e3, 0.0], [f64::INFINITY, 0.0], [1e-30, 0.0], [2.5, 0.0]],
    }
}

/// One case: `k`-entry lists over `rows` rows through `stages`; with `nan_params`, every 13th
/// row's first parameter is NaN.
fn case(name: &str, k: usize, rows: usize, stages: &[ListStage], nan_params: bool) -> Case {
    let st = ListStages::new(stages).expect("1 to 8 stages");
    let kinds: Vec<ListStage> = stages.to_vec();
    let label: String = st.to_string();
    Case::new(format!("list_filter/{name}/{label}/{k}x{rows}"), move |b| {
        let x = b.input("x", DType::F32, &[k, rows], lists(k))?;
        let kinds = kinds.clone();
        let pr = b.input(
            "params",
            DType::F32,
            &[st.param_rows(), rows],
            Gen::func(move |_, i| {
                let (s, j, r) = (i[0] / 2, i[0] % 2, i[1]);
                if nan_params && r % 13 == 12 && i[0] == 0 {
                    return f64::NAN;
                }
                let table = params_of(kinds[s]);
                // Stages of one row take different entries of their tables.
                table[(r + 3 * s) % table.len()][j]
            }),
        )?;
        let y = b.g.list_filter(x, pr, st)?;
        b.check(y, Cmp::ListFilter { x, params: pr, stages: st, slack: false });
        Ok(())
    })
}

/// The cases.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    let orders: &[&[ListStage]] = &[
        &[TopP],
        &[MinP],
        &[Temp],
        &[TopP, MinP, Temp],
        &[MinP, TopP],
        &[Temp, TopP, MinP],
        &[MinP, Temp, TopP],
        &[TopP, TopP],
        &[Temp, Temp, MinP, TopP, Temp],
        &[TopP, MinP, TopP, MinP, Temp, Temp, TopP, MinP],
    ];
    for stages in orders {
        v.push(case("orders", 40, 48, stages, false));
    }
    for k in [1, 2, 7, 1024] {
        v.push(case("lengths", k, 24, &[TopP, MinP, Temp], false));
    }
    v.push(case("nan-params", 16, 26, &[MinP, TopP, Temp], true));
    v.push(case("one-row", 40, 1, &[TopP, MinP, Temp], false));
    v
}
