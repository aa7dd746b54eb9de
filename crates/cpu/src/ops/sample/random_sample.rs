//! One row of `random_sample` (see `graph::Op::RandomSample` and `docs/FUSED.md`), in f64 (f16,
//! bf16 and f32 rows widen exactly).
//!
//! No full sort: the total `c_{n-1}` is one pass; `c_{kk-1}` is the sum over a selection of the
//! `kk` largest (`select_nth_unstable`, linear); the crossing rank is then searched among the `G`
//! largest, ordered (`G` from 64, 8 times more until the threshold is crossed inside them). Only
//! the orders of those candidates are ever sorted, and ties resolve by index (the composite order
//! value descending, index ascending), so the result is the sorted algorithm's.

/// The parameters of one row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub random: f32,
    pub topp: f32,
    pub temperature: f32,
    pub topk: i32,
}

/// `a` before `b` in the order value descending, index ascending (no NaN).
fn before(x: &[f64], a: u32, b: u32) -> std::cmp::Ordering {
    let (va, vb) = (x[a as usize], x[b as usize]);
    vb.partial_cmp(&va).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
}

/// The index `random_sample` picks from `x`, or `None` for a bad row (see the op's documentation).
pub(crate) fn row(x: &[f64], p: Params) -> Option<usize> {
    let n = x.len();
    if p.random.is_nan() || p.topp.is_nan() || p.temperature.is_nan() || x.iter().any(|v| v.is_nan()) {
        return None;
    }
    if !(0.0..1.0).contains(&p.random) || p.topp < 0.0 || p.temperature < 0.0 {
        return None;
    }
    // The first maximum (float comparison: -0.0 ties +0.0).
    let mut first = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[first] {
            first = i;
        }
    }
    if p.random == 0.0 || p.topp == 0.0 || p.topk == 1 || p.temperature == 0.0 {
        return Some(first);
    }
    let x0 = x[first];
    if x0.is_infinite() {
        return None;
    }
    let t = f64::from(p.temperature);
    let e = |v: f64| ((v - x0) / t).exp();
    let total: f64 = x.iter().map(|&v| e(v)).sum();
    let kk = if p.topk <= 0 || p.topk as usize >= n { n } else { p.topk as usize };
    let mut idx: Vec<u32> = (0..n as u32).collect();
    let top = if kk < n {
        idx.select_nth_unstable_by(kk - 1, |&a, &b| before(x, a, b));
        idx[..kk].iter().map(|&i| e(x[i as usize])).sum()
    } else {
        total
    };
    let threshold = f64::from(p.random) * (f64::from(p.topp) * total).min(top);
    let mut g = 64.min(n);
    loop {
        if g < n {
            idx.select_nth_unstable_by(g - 1, |&a, &b| before(x, a, b));
        }
        idx[..g].sort_unstable_by(|&a, &b| before(x, a, b));
        let mut c = 0.0f64;
        for &i in &idx[..g] {
            c += e(x[i as usize]);
            if c >= threshold {
                return Some(i as usize);
            }
        }
        if g == n {
            // Rounding left the threshold above the sorted total: the last rank.
            return idx.last().map(|&i| i as usize);
        }
        g = (g * 8).min(n);
    }
}
