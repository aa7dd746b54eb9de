//! Comparators: how one output of a case is checked against the oracle's, and the worst error seen.
//!
//! Every comparison reports a *ratio*: the largest `error / allowed` over the elements (0 for a
//! perfect match, at most 1 for a pass, infinity for a structural failure such as a wrong NaN, an
//! index out of range or a repeated index).

use graph::{DType, NodeId, SortOrder};
use std::fmt;

#[path = "compare_list.rs"]
mod list;

/// An error bound: `|got - want| <= abs + rel * |want|`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tol {
    /// Absolute part.
    pub abs: f64,
    /// Relative part (relative to the oracle's value).
    pub rel: f64,
}

impl Tol {
    /// A tolerance.
    pub const fn new(abs: f64, rel: f64) -> Tol {
        Tol { abs, rel }
    }

    /// This tolerance widened to what a result stored as `dtype` can honour: two units in the last
    /// place of f16 (`2^-9` relative) or bf16 (`2^-6`), with an absolute floor for subnormals.
    pub fn for_dtype(self, dtype: DType) -> Tol {
        let (abs, rel) = match dtype {
            DType::F16 => (1e-6, 2f64.powi(-9)),
            DType::BF16 => (1e-6, 2f64.powi(-6)),
            DType::F32 | DType::I32 => (0.0, 0.0),
            // no op produces a quantized result; a case states its own tolerance for reading one
            _ => (0.0, 0.0),
        };
        Tol { abs: self.abs.max(abs), rel: self.rel.max(rel) }
    }

    /// This tolerance multiplied by `k` (both parts).
    pub fn times(self, k: f64) -> Tol {
        Tol { abs: self.abs * k, rel: self.rel * k }
    }

    /// `error / allowed` for one pair of values (NaN matches NaN, infinities match exactly).
    pub fn ratio(&self, got: f64, want: f64) -> f64 {
        if got.is_nan() || want.is_nan() {
            return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
        }
        if got == want {
            return 0.0;
        }
        if got.is_infinite() || want.is_infinite() {
            return f64::INFINITY;
        }
        let allowed = self.abs + self.rel * want.abs();
        let err = (got - want).abs();
        if allowed == 0.0 { f64::INFINITY } else { err / allowed }
    }
}

impl fmt::Display for Tol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "abs {:e} rel {:e}", self.abs, self.rel)
    }
}

/// Which ordering an index output encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// One index per row: the position of the maximum.
    Argmax,
    /// A permutation of the row.
    Argsort(SortOrder),
    /// The `k` positions of the largest values, by value descending.
    TopK,
}

/// How an output is compared with the oracle's.
#[derive(Debug, Clone, PartialEq)]
pub enum Cmp {
    /// Bit-for-bit equal values (NaN matches NaN).
    Exact,
    /// Within a tolerance (widened for the output's dtype by [`Tol::for_dtype`]).
    Close(Tol),
    /// A 0/1 mask: every value must be 0 or 1 and equal to the oracle's.
    Mask,
    /// Indices compared by the values they select in `keys` (the node the op ordered; its values come
    /// from the f64 reference): every index must be in range and distinct within its row, and the
    /// selected values must equal the oracle's selection position by position within `tol`. Ties (and
    /// near-ties within `tol`) may be broken either way.
    Indices {
        /// The ordered node.
        keys: NodeId,
        /// What the indices encode.
        kind: IndexKind,
        /// Tolerance on the selected values.
        tol: Tol,
    },
    /// A `top_p_mask` result (see [`compare_nucleus`]): bad parameters give all-NaN rows, bad rows
    /// pass through, and otherwise each row keeps a prefix of its order (value descending, index
    /// ascending) with the oracle's length and values. With `slack` (against another backend) the
    /// length may differ where the boundary is a close call: the mass before the longer cut and
    /// through the shorter one within `1e-5 + n 2^-24` of `p`, the drift llama.cpp's f32 running
    /// sums (which the CPU replays) can have over `n` terms.
    Nucleus {
        /// The masked node (`x`).
        x: NodeId,
        /// The parameters node (`t, p, min_keep` per row).
        params: NodeId,
        /// Allow close calls at the boundary to differ.
        slack: bool,
    },
    /// Draws of `Op::Categorical`, checked against their CDF brackets: the reference gives each
    /// row's running sums of the (f64) weights and the target `u W` its uniform asks for; a drawn
    /// index passes when its bracket `[C(i-1), C(i))` holds the target or lies within `rel * W` of
    /// it (rounding of the weights may move a target that close to a bracket's end into the next
    /// token), it has a positive weight, and `-1` is drawn exactly where the oracle draws `-1`.
    Draw {
        /// Allowed distance from the bracket, relative to the row's total weight.
        rel: f64,
    },
    /// A `list_filter` result (see `compare_list.rs`): NaN rows match, kept values within two f32
    /// ulps, the kept entries the oracle's; with `slack` (against another backend) the kept
    /// prefix may be longer or shorter where a top-p or min-p cut is a close call.
    ListFilter {
        /// The filtered lists (`vals`).
        x: NodeId,
        /// The parameters node.
        params: NodeId,
        /// The node's stages.
        stages: graph::ListStages,
        /// Allow close calls at a cut to differ.
        slack: bool,
    },
}

/// One row of a draw as the f64 reference sees it (for [`Cmp::Draw`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DrawRow {
    /// Running sums of the row's weights: `cum[i]` is the weight of entries `0..=i` (an entry of
    /// weight 0, cut or masked, repeats its predecessor's sum). Empty for a row that draws `-1`.
    pub cum: Vec<f64>,
    /// The target `u W` (`u` the row's uniform, `W` the total weight).
    pub target: f64,
    /// For a `spec_verify` row with a draft entry: the acceptance test. `cum` and `target` are
    /// then the residual's (the draft entry's weight taken out), used when the draft is rejected.
    pub accept: Option<Accept>,
    /// For a draw that returns token ids: each entry's id (the result names an entry by it).
    pub ids: Option<Vec<f64>>,
}

/// The acceptance test of a `spec_verify` row: the draft `entry` is the result iff `a_w < w_e`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Accept {
    /// The draft entry.
    pub entry: usize,
    /// `a W`: the acceptance uniform times the total weight (with the draft entry's).
    pub a_w: f64,
    /// The draft entry's weight.
    pub w_e: f64,
    /// The total weight `W`.
    pub total: f64,
}

/// What a comparator needs beyond the two outputs.
#[derive(Debug, Clone, Copy, Default)]
pub enum Aux<'a> {
    /// Nothing.
    #[default]
    None,
    /// The ordered node's values and shape (for [`Cmp::Indices`]).
    Keys(&'a [f64], [usize; 4]),
    /// Each row's brackets (for [`Cmp::Draw`]).
    Draws(&'a [DrawRow]),
    /// The masked node's values and the params (for [`Cmp::Nucleus`]).
    Nucleus(&'a [f64], &'a [f64]),
}

/// The result of comparing one output.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Worst `error / allowed` (see the module docs); a pass is `<= 1`.
    pub worst: f64,
    /// Flat element index of the worst error.
    pub at: usize,
    /// Words on the worst element (empty on a perfect match).
    pub detail: String,
}

impl Verdict {
    /// True when every element is within bounds.
    pub fn passed(&self) -> bool {
        self.worst <= 1.0
    }

    pub(crate) fn perfect() -> Verdict {
        Verdict { worst: 0.0, at: 0, detail: String::new() }
    }

    pub(crate) fn note(&mut self, ratio: f64, at: usize, detail: impl FnOnce() -> String) {
        if ratio > self.worst || (ratio.is_nan() && !self.worst.is_nan()) {
            self.worst = ratio;
            self.at = at;
            self.detail = detail();
        }
    }
}

impl Cmp {
    /// The comparator with its tolerances multiplied by `k` (used when the oracle is itself an f32
    /// backend: the two results' errors against the exact value may add up).
    pub fn widened(&self, k: f64) -> Cmp {
        match self {
            Cmp::Close(t) => Cmp::Close(t.times(k)),
            Cmp::Indices { keys, kind, tol } => Cmp::Indices { keys: *keys, kind: *kind, tol: tol.times(k) },
            Cmp::Nucleus { x, params, .. } => Cmp::Nucleus { x: *x, params: *params, slack: true },
            Cmp::Draw { rel } => Cmp::Draw { rel: rel * k },
            Cmp::ListFilter { x, params, stages, .. } => {
                Cmp::ListFilter { x: *x, params: *params, stages: *stages, slack: true }
            }
            c => c.clone(),
        }
    }
}

/// Compares `got` with `want` (both logical values of a tensor of shape `ne` and dtype `dtype`).
/// [`Cmp::Indices`] needs [`Aux::Keys`] (values and shape of the ordered node), [`Cmp::Draw`]
/// needs [`Aux::Draws`].
pub fn compare(cmp: &Cmp, dtype: DType, ne: [usize; 4], got: &[f64], want: &[f64], aux: Aux<'_>) -> Verdict {
    let mut v = Verdict::perfect();
    if got.len() != want.len() {
        v.note(f64::INFINITY, 0, || format!("{} values, the oracle has {}", got.len(), want.len()));
        return v;
    }
    match cmp {
        Cmp::Exact => {
            for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
                if !(a == b || (a.is_nan() && b.is_nan())) {
                    v.note(f64::INFINITY, i, || format!("element {i}: got {a}, want exactly {b}"));
                    break;
                }
            }
        }
        Cmp::Close(tol) => {
            let tol = tol.for_dtype(dtype);
            for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
                let r = tol.ratio(a, b);
                v.note(r, i, || format!("element {i}: got {a}, want {b} ({tol}; off by {:e})", (a - b).abs()));
            }
        }
        Cmp::Mask => {
            for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
                if (a != 0.0 && a != 1.0) || a != b {
                    v.note(f64::INFINITY, i, || format!("mask element {i}: got {a}, want {b}"));
                    break;
                }
            }
        }
        Cmp::Indices { kind, tol, .. } => {
            let Aux::Keys(kv, kne) = aux else { panic!("Cmp::Indices needs the key values") };
            compare_indices(&mut v, *kind, *tol, ne, got, want, kv, kne[0]);
        }
        Cmp::Nucleus { slack, .. } => {
            let Aux::Nucleus(x, params) = aux else { panic!("Cmp::Nucleus needs x and the params") };
            return compare_nucleus(ne, got, want, x, params, *slack);
        }
        Cmp::ListFilter { stages, slack, .. } => {
            let Aux::Nucleus(x, params) = aux else { panic!("Cmp::ListFilter needs the lists and the params") };
            return list::compare_list_filter(ne[0], got, want, x, params, stages.as_slice(), *slack);
        }
        Cmp::Draw { rel } => {
            let Aux::Draws(rows) = aux else { panic!("Cmp::Draw needs the reference's brackets") };
            compare_draws(&mut v, *rel, got, want, rows);
        }
    }
    v
}

/// [`Cmp::Nucleus`]: `got` and `want` are `top_p_mask` results of shape `ne`, `x` its input values
/// and `params` its `(t, p, min_keep)` per row. Kept values may differ from `x / t` by 2 ulps
/// (a GPU's division); with `slack`, the kept length as described at [`Cmp::Nucleus`].
pub fn compare_nucleus(ne: [usize; 4], got: &[f64], want: &[f64], x: &[f64], params: &[f64], slack: bool) -> Verdict {
    let mut v = Verdict::perfect();
    let n = ne[0];
    if got.len() != want.len() || x.len() != got.len() || params.len() * n != 3 * got.len() {
        v.note(f64::INFINITY, 0, || format!("{} values, the oracle has {}, x {}", got.len(), want.len(), x.len()));
        return v;
    }
    let tol = Tol::new(0.0, 2.0 * f64::from(f32::EPSILON));
    for (r, ((g, w), xr)) in got.chunks(n).zip(want.chunks(n)).zip(x.chunks(n)).enumerate() {
        let (t, p, mk) = (params[3 * r] as f32, params[3 * r + 1] as f32, params[3 * r + 2]);
        let l: Vec<f64> = xr.iter().map(|&xi| f64::from(xi as f32 / t)).collect();
        // Element by element first: NaN rows, pass-through rows and the kept values.
        for (i, (&a, &b)) in g.iter().zip(w).enumerate() {
            let kept_ok = a == f64::NEG_INFINITY || b.is_nan() || tol.ratio(a, l[i]) <= 1.0;
            if (a.is_nan() != b.is_nan()) || !kept_ok || (a.is_infinite() && b.is_finite() && !slack) {
                v.note(f64::INFINITY, r * n + i, || {
                    format!("row {r} element {i}: got {a}, want {b} (x / t = {})", l[i])
                });
                return v;
            }
            if b.is_finite() && a.is_finite() {
                let ratio = tol.ratio(a, b);
                v.note(ratio, r * n + i, || format!("row {r} element {i}: got {a}, want {b}"));
            }
        }
        let finite = |row: &[f64]| row.iter().filter(|v| v.is_finite()).count();
        let (gk, wk) = (finite(g), finite(w));
        // Without slack the element checks above already required the same set.
        if (gk == wk && !slack) || w.iter().any(|b| b.is_nan() || *b == f64::INFINITY) {
            continue;
        }
        // Both must be prefixes of the order; then the boundary must be a close call.
        let mut order: Vec<usize> = (0..n).filter(|&i| l[i].is_finite()).collect();
        order.sort_by(|&i, &j| l[j].total_cmp(&l[i]).then(i.cmp(&j)));
        for (name, row, k) in [("got", g, gk), ("want", w, wk)] {
            if let Some(&i) = order[..k.min(order.len())].iter().find(|&&i| !row[i].is_finite()) {
                v.note(f64::INFINITY, r * n + i, || {
                    format!("row {r}: {name} keeps {k} entries but not #{i}, which orders among them")
                });
                return v;
            }
        }
        if gk == wk {
            continue;
        }
        let (a, b) = (gk.min(wk), gk.max(wk));
        let max = l[order[0]];
        let e: Vec<f64> = order.iter().map(|&i| (l[i] - max).exp()).collect();
        let total: f64 = e.iter().sum();
        let cum = |j: usize| e[..j].iter().sum::<f64>() / total;
        let tol_m = 1e-5 + n as f64 * f64::from(f32::EPSILON) / 2.0;
        let floor = (mk.max(1.0) as usize).min(order.len());
        let close = slack && a >= floor && cum(a) >= f64::from(p) - tol_m && cum(b - 1) <= f64::from(p) + tol_m;
        if !close {
            v.note(f64::INFINITY, r * n, || {
                format!(
                    "row {r}: got keeps {gk}, want {wk} (p = {p}, min_keep = {mk}; mass through {a}: {:.9}, before {b}: {:.9})",
                    cum(a),
                    cum(b - 1)
                )
            });
            return v;
        }
    }
    v
}

/// [`Cmp::Draw`]: per row, the drawn index's bracket against the reference's target. With the
/// row's token ids (a draw that returns ids) the drawn token passes when one of the entries
/// holding it passes.
fn compare_draws(v: &mut Verdict, rel: f64, got: &[f64], want: &[f64], rows: &[DrawRow]) {
    if rows.len() != got.len() {
        v.note(f64::INFINITY, 0, || format!("{} draws, the reference has {} rows", got.len(), rows.len()));
        return;
    }
    for (r, ((&g, &w), row)) in got.iter().zip(want).zip(rows).enumerate() {
        if g == w {
            continue;
        }
        // A bad row (the oracle's -1 without weights) must match exactly.
        if row.cum.is_empty() || (row.ids.is_none() && (g < 0.0 || w < 0.0)) {
            v.note(f64::INFINITY, r, || format!("row {r}: drew {g}, the oracle drew {w} (a -1 must match)"));
            return;
        }
        let n = row.cum.len();
        let entries: Vec<usize> = match &row.ids {
            None if g.fract() != 0.0 || g >= n as f64 => {
                v.note(f64::INFINITY, r, || format!("row {r}: index {g} is outside 0..{n}"));
                return;
            }
            None => vec![g as usize],
            Some(ids) => ids.iter().enumerate().filter(|&(_, &t)| t == g).map(|(i, _)| i).collect(),
        };
        if entries.is_empty() {
            v.note(f64::INFINITY, r, || format!("row {r}: drew token {g}, which no entry holds (the oracle drew {w})"));
            return;
        }
        // The entry that fits best.
        let (ratio, words) = entries
            .iter()
            .map(|&i| draw_entry(rel, row, i))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .expect("at least one entry");
        if ratio == f64::INFINITY {
            v.note(ratio, r, || format!("row {r}: {words} (the oracle drew {w})"));
            return;
        }
        v.note(ratio, r, || format!("row {r}: {words}, the oracle drew {w}"));
    }
}

/// How far drawing entry `i` of `row` is from allowed, as `error / allowed` (`<= 1` passes,
/// infinite for a draw that cannot happen), and words on it.
fn draw_entry(rel: f64, row: &DrawRow, i: usize) -> (f64, String) {
    if let Some(acc) = row.accept {
        // A close call (within the weights' rounding) may go either way; a clear one may not.
        let close = (acc.a_w - acc.w_e).abs() <= rel * acc.total;
        let accepted = acc.a_w < acc.w_e;
        if i == acc.entry && (accepted || close) {
            return (0.0, format!("accepted the draft entry {i}"));
        }
        if accepted && !close {
            let words = format!(
                "drew {i}, but the draft entry {} is accepted (a W {:e} < w_e {:e})",
                acc.entry, acc.a_w, acc.w_e
            );
            return (f64::INFINITY, words);
        }
    }
    let n = row.cum.len();
    let lo = if i == 0 { 0.0 } else { row.cum[i - 1] };
    let hi = row.cum[i];
    if hi <= lo {
        return (f64::INFINITY, format!("drew {i}, which has no weight"));
    }
    let total = row.cum[n - 1];
    let dist = if row.target < lo { lo - row.target } else { (row.target - hi).max(0.0) };
    let allowed = rel * total;
    let ratio = if dist == 0.0 {
        0.0
    } else if allowed == 0.0 {
        f64::INFINITY
    } else {
        dist / allowed
    };
    let words = format!(
        "drew {i} (bracket [{lo:e}, {hi:e})); the target {:e} is {dist:e} away (allowed {allowed:e} of total weight \
         {total:e})",
        row.target
    );
    (ratio, words)
}

#[allow(clippy::too_many_arguments)]
fn compare_indices(
    v: &mut Verdict,
    kind: IndexKind,
    tol: Tol,
    ne: [usize; 4],
    got: &[f64],
    want: &[f64],
    keys: &[f64],
    n: usize,
) {
    let k = ne[0];
    let expect = match kind {
        IndexKind::Argmax => Some(1),
        IndexKind::Argsort(_) => Some(n),
        IndexKind::TopK => None,
    };
    if let Some(e) = expect
        && e != k
    {
        v.note(f64::INFINITY, 0, || format!("{kind:?} rows have {k} indices, expected {e} for rows of {n} keys"));
        return;
    }
    let mut seen = vec![usize::MAX; n];
    for (r, (grow, wrow)) in got.chunks(k).zip(want.chunks(k)).enumerate() {
        let base = r * n;
        for (j, (&gi, &wi)) in grow.iter().zip(wrow).enumerate() {
            let at = r * k + j;
            if gi.fract() != 0.0 || gi < 0.0 || gi >= n as f64 {
                v.note(f64::INFINITY, at, || format!("row {r} position {j}: index {gi} is outside 0..{n}"));
                return;
            }
            let gi = gi as usize;
            if seen[gi] == r {
                v.note(f64::INFINITY, at, || format!("row {r} position {j}: index {gi} appears twice"));
                return;
            }
            seen[gi] = r;
            let (a, b) = (keys[base + gi], keys[base + wi as usize]);
            let ratio = tol.ratio(a, b);
            v.note(ratio, at, || {
                format!("row {r} position {j}: index {gi} selects {a}, the oracle's index {wi} selects {b} ({tol})")
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NE4: [usize; 4] = [4, 1, 1, 1];

    #[test]
    fn close_scales_with_dtype_and_handles_specials() {
        let t = Tol::new(0.0, 1e-6);
        let nan = f64::NAN;
        assert!(
            compare(
                &Cmp::Close(t),
                DType::F32,
                NE4,
                &[1.0, nan, -f64::INFINITY, 0.0],
                &[1.0, nan, -f64::INFINITY, 0.0],
                Aux::None
            )
            .passed()
        );
        let v = compare(&Cmp::Close(t), DType::F32, NE4, &[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0001, 4.0], Aux::None);
        assert!(!v.passed());
        assert_eq!(v.at, 2);
        assert!(v.detail.contains("got 3, want 3.0001"), "{}", v.detail);
        // The same error is within two f16 ulps.
        assert!(
            compare(&Cmp::Close(t), DType::F16, NE4, &[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0001, 4.0], Aux::None)
                .passed()
        );
        assert!(
            !compare(&Cmp::Close(t), DType::F32, NE4, &[1.0, 2.0, nan, 4.0], &[1.0, 2.0, 3.0, 4.0], Aux::None).passed()
        );
        assert!(
            !compare(
                &Cmp::Close(t),
                DType::F32,
                NE4,
                &[1.0, 2.0, f64::INFINITY, 4.0],
                &[1.0, 2.0, 3.0, 4.0],
                Aux::None
            )
            .passed()
        );
    }

    #[test]
    fn exact_and_mask() {
        assert!(
            compare(&Cmp::Exact, DType::I32, NE4, &[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0, 4.0], Aux::None).passed()
        );
        assert!(
            !compare(&Cmp::Exact, DType::F32, NE4, &[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0, 4.000001], Aux::None)
                .passed()
        );
        assert!(compare(&Cmp::Mask, DType::F32, NE4, &[1.0, 0.0, 1.0, 0.0], &[1.0, 0.0, 1.0, 0.0], Aux::None).passed());
        assert!(
            !compare(&Cmp::Mask, DType::F32, NE4, &[1.0, 0.5, 1.0, 0.0], &[1.0, 0.5, 1.0, 0.0], Aux::None).passed()
        );
        assert!(
            !compare(&Cmp::Mask, DType::F32, NE4, &[1.0, 1.0, 1.0, 0.0], &[1.0, 0.0, 1.0, 0.0], Aux::None).passed()
        );
    }

    #[test]
    fn indices_accept_ties_and_reject_wrong_picks() {
        let keys = [5.0, 1.0, 5.0, 3.0];
        let k = Aux::Keys(&keys[..], NE4);
        let c = Cmp::Indices { keys: NodeId(0), kind: IndexKind::Argsort(SortOrder::Desc), tol: Tol::new(0.0, 0.0) };
        // [2, 0, 3, 1] breaks the tie differently from the oracle's [0, 2, 3, 1]: fine by value.
        assert!(compare(&c, DType::I32, NE4, &[2.0, 0.0, 3.0, 1.0], &[0.0, 2.0, 3.0, 1.0], k).passed());
        let v = compare(&c, DType::I32, NE4, &[0.0, 3.0, 2.0, 1.0], &[0.0, 2.0, 3.0, 1.0], k);
        assert!(!v.passed() && v.at == 1, "{v:?}");
        let v = compare(&c, DType::I32, NE4, &[0.0, 0.0, 3.0, 1.0], &[0.0, 2.0, 3.0, 1.0], k);
        assert!(v.detail.contains("appears twice"), "{v:?}");
        let v = compare(&c, DType::I32, NE4, &[0.0, 2.0, 4.0, 1.0], &[0.0, 2.0, 3.0, 1.0], k);
        assert!(v.detail.contains("outside 0..4"), "{v:?}");
        // top_k with k = 2 over two rows of 4 keys.
        let keys2 = [5.0, 1.0, 5.0, 3.0, 0.0, 9.0, 8.0, 9.0];
        let t = Cmp::Indices { keys: NodeId(0), kind: IndexKind::TopK, tol: Tol::new(0.0, 0.0) };
        let ne = [2, 2, 1, 1];
        let kk = Aux::Keys(&keys2[..], [4, 2, 1, 1]);
        assert!(compare(&t, DType::I32, ne, &[2.0, 0.0, 3.0, 1.0], &[0.0, 2.0, 1.0, 3.0], kk).passed());
        assert!(!compare(&t, DType::I32, ne, &[2.0, 3.0, 3.0, 1.0], &[0.0, 2.0, 1.0, 3.0], kk).passed());
    }

    #[test]
    fn draws_pass_in_or_near_their_bracket_only() {
        // weights [1, 0, 2, 1] (entry 1 cut): brackets [0,1), -, [1,3), [3,4); target 2.9.
        let rows = [
            DrawRow { cum: vec![1.0, 1.0, 3.0, 4.0], target: 2.9, accept: None, ids: None },
            DrawRow { cum: vec![], target: 0.0, accept: None, ids: None },
        ];
        let d = Aux::Draws(&rows);
        let c = Cmp::Draw { rel: 0.05 };
        let ne = [1, 2, 1, 1];
        assert!(compare(&c, DType::I32, ne, &[2.0, -1.0], &[2.0, -1.0], d).passed());
        // Index 3 starts 0.1 past the target: within 0.05 * 4 = 0.2.
        let v = compare(&c, DType::I32, ne, &[3.0, -1.0], &[2.0, -1.0], d);
        assert!(v.passed() && v.worst > 0.0, "{v:?}");
        // ... but not within 0.01 * 4.
        assert!(!compare(&Cmp::Draw { rel: 0.01 }, DType::I32, ne, &[3.0, -1.0], &[2.0, -1.0], d).passed());
        // Index 0 ends 1.9 before the target.
        assert!(!compare(&c, DType::I32, ne, &[0.0, -1.0], &[2.0, -1.0], d).passed());
        // Index 1 has no weight, however close its (empty) bracket.
        let v = compare(&c, DType::I32, ne, &[1.0, -1.0], &[2.0, -1.0], d);
        assert!(v.detail.contains("no weight"), "{v:?}");
        // -1 must match -1, and an index past the row fails.
        assert!(!compare(&c, DType::I32, ne, &[2.0, 0.0], &[2.0, -1.0], d).passed());
        assert!(!compare(&c, DType::I32, ne, &[-1.0, -1.0], &[2.0, -1.0], d).passed());
        assert!(!compare(&c, DType::I32, ne, &[4.0, -1.0], &[2.0, -1.0], d).passed());
    }

    #[test]
    fn draws_of_token_ids_pass_by_an_entry_holding_them() {
        // The brackets above, entries holding tokens 10, -1, 30, 40; then entries 1 and 2 both
        // holding -1 (a -1 drawn from entry 2 is a draw, not a bad row); then a bad row.
        let row = |ids: [f64; 4]| DrawRow {
            cum: vec![1.0, 1.0, 3.0, 4.0],
            target: 2.9,
            accept: None,
            ids: Some(ids.to_vec()),
        };
        let rows = [
            row([10.0, -1.0, 30.0, 40.0]),
            row([10.0, -1.0, -1.0, 40.0]),
            DrawRow { cum: vec![], target: 0.0, accept: None, ids: Some(vec![10.0, -1.0, 30.0, 40.0]) },
        ];
        let d = Aux::Draws(&rows);
        let c = Cmp::Draw { rel: 0.05 };
        let ne = [1, 3, 1, 1];
        let want = [30.0, -1.0, -1.0];
        assert!(compare(&c, DType::I32, ne, &[30.0, -1.0, -1.0], &want, d).passed());
        // Token 40 (entry 3) is within 0.2 of the target; token 10 (entry 0) is not.
        assert!(compare(&c, DType::I32, ne, &[40.0, 40.0, -1.0], &want, d).passed());
        assert!(!compare(&c, DType::I32, ne, &[10.0, -1.0, -1.0], &want, d).passed());
        // -1 in the first row names entry 1, which has no weight.
        let v = compare(&c, DType::I32, ne, &[-1.0, -1.0, -1.0], &want, d);
        assert!(v.detail.contains("no weight"), "{v:?}");
        // A token no entry holds, and a bad row that is not -1.
        let v = compare(&c, DType::I32, ne, &[99.0, -1.0, -1.0], &want, d);
        assert!(v.detail.contains("no entry holds"), "{v:?}");
        let v = compare(&c, DType::I32, ne, &[30.0, -1.0, 30.0], &want, d);
        assert!(v.detail.contains("must match"), "{v:?}");
    }
}
