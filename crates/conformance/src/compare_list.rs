//! [`Cmp::ListFilter`](crate::Cmp::ListFilter): `list_filter` results, row by row. NaN rows must
//! match; kept values must agree within two f32 ulps (a device's division); which entries are kept
//! must agree exactly, except against another backend (`slack`), where the kept prefixes may
//! differ in length at a close call: a top-p stage whose mass (the f64 softmax of the list as that
//! stage sees it) before the longer cut and through the shorter one lies within `1e-5 + k 2^-24` of
//! `p` (the rounding of an `f32` running sum with another `exp`), or a min-p stage whose threshold
//! lies within `4 * 2^-24` (relative) of every entry between the two cuts.

use crate::compare::{Tol, Verdict};
use graph::ListStage;

/// Compares `got` with `want` (`[k, rows]` flattened) given the input lists `x` and `params`.
pub fn compare_list_filter(
    k: usize,
    got: &[f64],
    want: &[f64],
    x: &[f64],
    params: &[f64],
    stages: &[ListStage],
    slack: bool,
) -> Verdict {
    let mut v = Verdict::perfect();
    let np = 2 * stages.len();
    if got.len() != want.len() || x.len() != got.len() || params.len() * k != np * got.len() {
        v.note(f64::INFINITY, 0, || format!("{} values, the oracle has {}, x {}", got.len(), want.len(), x.len()));
        return v;
    }
    let tol = Tol::new(0.0, 2.0 * f64::from(f32::EPSILON));
    for (r, ((g, w), xr)) in got.chunks(k).zip(want.chunks(k)).zip(x.chunks(k)).enumerate() {
        let pr = &params[np * r..np * (r + 1)];
        let mut differs = false;
        for (i, (&a, &b)) in g.iter().zip(w).enumerate() {
            let both_kept = a.is_finite() && b.is_finite();
            if a.is_nan() != b.is_nan() || (a.is_infinite() != b.is_infinite() && !(both_kept || slack)) {
                v.note(f64::INFINITY, r * k + i, || format!("row {r} entry {i}: got {a}, want {b}"));
                return v;
            }
            if a.is_infinite() != b.is_infinite() || (a.is_infinite() && a != b) {
                differs = true;
            } else if both_kept {
                v.note(tol.ratio(a, b), r * k + i, || format!("row {r} entry {i}: got {a}, want {b}"));
            }
        }
        if !differs {
            continue;
        }
        let len = |row: &[f64]| row.iter().rposition(|e| e.is_finite()).map_or(0, |i| i + 1);
        let (gk, wk) = (len(g), len(w));
        let prefix = |row: &[f64], n: usize| row[..n].iter().zip(xr).all(|(e, xi)| e.is_finite() == xi.is_finite());
        if gk == wk || !prefix(g, gk) || !prefix(w, wk) {
            v.note(f64::INFINITY, r * k, || format!("row {r}: got keeps {g:?}, want {w:?}"));
            return v;
        }
        let (a, b) = (gk.min(wk), gk.max(wk));
        if !close_call(xr, pr, stages, a, b) {
            v.note(f64::INFINITY, r * k, || {
                format!("row {r}: got keeps {gk} entries, want {wk}, and no stage's cut is a close call there")
            });
            return v;
        }
    }
    v
}

/// Whether some stage of the row's pipeline (replayed in f64 on `x`, with the shorter cut `a`
/// where it decides) could place its cut anywhere between `a` and `b` within rounding.
fn close_call(x: &[f64], pr: &[f64], stages: &[ListStage], a: usize, b: usize) -> bool {
    let n = x.len();
    let mut v: Vec<f64> = x.to_vec();
    let tol_m = 1e-5 + n as f64 * f64::from(f32::EPSILON) / 2.0;
    for (s, stage) in stages.iter().enumerate() {
        let (pa, pb) = (pr[2 * s], pr[2 * s + 1]);
        let floor = pb.floor().max(1.0) as usize;
        match stage {
            ListStage::Temp => v.iter_mut().for_each(|e| *e /= pa),
            ListStage::TopP if pa >= 1.0 => {}
            ListStage::TopP => {
                let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = v.iter().map(|&l| (l - max).exp()).collect();
                let total: f64 = e.iter().sum();
                let cum = |j: usize| e[..j].iter().sum::<f64>() / total;
                if a >= floor && cum(a) >= pa - tol_m && cum(b - 1) <= pa + tol_m {
                    return true;
                }
            }
            ListStage::MinP => {
                let thr = v[0] + pa;
                let near = |e: f64| (e - thr).abs() <= 4.0 * f64::from(f32::EPSILON) * thr.abs().max(e.abs());
                if a >= floor && v[a..b].iter().all(|&e| near(e)) {
                    return true;
                }
            }
        }
        // Continue on the shorter list (either list agrees before the shorter cut).
        if matches!(stage, ListStage::TopP | ListStage::MinP) {
            v[a.min(n)..].iter_mut().for_each(|e| *e = f64::NEG_INFINITY);
        }
    }
    false
}
