//! One row of `random_sample` (see `graph::Op::RandomSample` and `docs/FUSED.md`), in f64 (f16,
//! bf16 and f32 rows widen exactly).
//!
//! The arithmetic is defined so that a GPU computes the same bits (`shaders/sample.comp`, variant
//! `RANDOM`): `e = kernels::exp64::exp((x - x_(0)) / temperature)` (the project's f64 exponential,
//! not the platform's), and every sum in a fixed order that a workgroup can run in parallel:
//!
//! - the total `c_{n-1}` and the top-K sum `c_{kk-1}` are *lane sums* ([`lane_sum`]) over the
//!   members of the set in index order: lane `t` adds the members with `i % 256 == t` in index
//!   order, then the 256 lanes are added pairwise (`acc[t] += acc[t + s]`, `s = 128, 64, .., 1`);
//! - the running sums `c_i` over the order value descending, index ascending are *chunked*: ranks
//!   in chunks of 256, `c_i = P + s` with `s` the running sum inside rank `i`'s chunk and `P` the
//!   running sum of the previous chunks' totals (`P += s` at each chunk start).
//!
//! Every sum only adds non-negative terms, so `c_i` is non-decreasing in `i`, and the result is a
//! correct evaluation of the spec's f64 algorithm (R5: the spec's own scan is a parallel one).
//!
//! No sort of the row. One pass computes the weights `e` a vector at a time
//! (`kernels::exp64::exp_into`, the same bits as `exp`) into scratch, the total's lane sum and a
//! histogram of the row by value below the max ([`BUCKETS`] buckets, 1/128 of a temperature unit
//! wide; a bucket never holds a value above one of an earlier bucket, so bucket `b` holds exactly
//! the ranks `count[b]..count[b + 1]`). The `kk`-th entry of the order is read from its bucket,
//! ordered alone; the top-K lane sum adds the members' weights, each lane in index order, over
//! the gathered entries of the buckets up to it (a member never lies in a later bucket). The buckets' approximate masses name a prefix of buckets that holds the
//! crossing rank with room for rounding: only those tokens are ordered (bucket by bucket, on
//! `u128` keys) and walked with the chunked sums. If the crossing is not inside them (rounding, or
//! a crossing below the 32 units the buckets cover), the walk starts over on the largest `G`
//! entries (`G` from 64, 8 times more until crossed), ordered by a selection. Ties resolve by index
//! (the composite order value descending, index ascending), so the result is the sorted
//! algorithm's; the tests compare it with the former whole-row implementation bit for bit.

use kernels::exp64;

/// Lanes of a [`lane_sum`] (the shader's workgroup size).
pub(crate) const LANES: usize = 256;
/// Ranks per chunk of the running sums.
pub(crate) const CHUNK: usize = 256;
/// Buckets of value below the max, 1/128 of a temperature unit wide over 32 units; the last holds
/// everything below.
const BUCKETS: usize = 4096;
/// Buckets per temperature unit.
const PER_UNIT: f64 = 128.0;

/// The parameters of one row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub random: f32,
    pub topp: f32,
    pub temperature: f32,
    pub topk: i32,
}

/// Per-row scratch.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The weights `e_i`.
    e: Vec<f64>,
    count: Vec<u32>,
    mass: Vec<f64>,
    idx: Vec<u32>,
}

/// `a` before `b` in the order value descending, index ascending (no NaN).
fn before(x: &[f64], a: u32, b: u32) -> std::cmp::Ordering {
    let (va, vb) = (x[a as usize], x[b as usize]);
    vb.partial_cmp(&va).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
}

/// The index `random_sample` picks from `x`, or `None` for a bad row (see the op's documentation).
pub(crate) fn row(x: &[f64], p: Params, s: &mut Scratch) -> Option<usize> {
    let n = x.len();
    if p.random.is_nan() || p.topp.is_nan() || p.temperature.is_nan() {
        return None;
    }
    // The first maximum (float comparison: -0.0 ties +0.0) and the NaN check, in one pass.
    let (mut first, mut mx, mut nan) = (0, x.first().copied().unwrap_or(f64::NEG_INFINITY), false);
    for (i, &v) in x.iter().enumerate() {
        nan |= v.is_nan();
        if v > mx {
            (first, mx) = (i, v);
        }
    }
    if nan || !(0.0..1.0).contains(&p.random) || p.topp < 0.0 || p.temperature < 0.0 {
        return None;
    }
    if p.random == 0.0 || p.topp == 0.0 || p.topk == 1 || p.temperature == 0.0 {
        return Some(first);
    }
    let x0 = x[first];
    if x0.is_infinite() {
        return None;
    }
    let t = f64::from(p.temperature);
    let scale = PER_UNIT / t;
    let bucket_of = |v: f64| bucket(v, x0, scale);
    let total = weights(x, x0, t, scale, s);
    let e = &s.e[..];
    let kk = if p.topk <= 0 || p.topk as usize >= n { n } else { p.topk as usize };
    let count = &s.count[..];
    let top = if kk < n {
        // The bucket of rank kk - 1, ordered, names the kk-th entry.
        let b = count.partition_point(|&c| (c as usize) < kk) - 1;
        // The entries of buckets `0..=b` by the gather (in index order), then bucket `b`'s among
        // them; the members of the top `kk` all lie in those buckets, so their lane sum adds the
        // gathered members only (in index order: each lane's order).
        let h = if b < BUCKETS - 1 { Some(gather(x, x0, scale, (b + 1) as f64, &mut s.idx)) } else { None };
        let mut members = match h {
            Some(h) => s.idx[..h].iter().copied().filter(|&i| bucket_of(x[i as usize]) == b).collect(),
            None => bucket_members(x, b, &bucket_of, count[b + 1] - count[b]),
        };
        members.sort_unstable_by(|&a, &c| before(x, a, c));
        let pi = members[kk - 1 - count[b] as usize] as usize;
        let pv = x[pi];
        let member = |i: usize| x[i] > pv || (x[i] == pv && i <= pi);
        match h {
            Some(h) => {
                let mut acc = [0.0f64; LANES];
                for &i in &s.idx[..h] {
                    let i = i as usize;
                    if member(i) {
                        acc[i % LANES] += e[i];
                    }
                }
                tree(&mut acc)
            }
            None => lane_sum(e, member),
        }
    } else {
        total
    };
    #[cfg(test)]
    tests::SUMS.set((total, top));
    // `f64::min` returns the other operand when one is NaN (a `-inf` entry at an infinite
    // temperature); the shader spells the same rule out.
    let threshold = f64::from(p.random) * (f64::from(p.topp) * total).min(top);
    // The buckets whose approximate mass reaches the threshold (with room for rounding): their
    // entries, ordered bucket by bucket, are the first ranks of the order.
    let mut cum = 0.0f64;
    let reach = s.mass.iter().position(|&m| {
        cum += m;
        cum > threshold * (1.0 + 1e-9)
    });
    if let Some(last) = reach.filter(|&b| b < BUCKETS - 1) {
        // The entries of buckets `0..=last` by the gather, then a counting placement by bucket and
        // an order inside each.
        let mut hits = std::mem::take(&mut s.idx);
        let h = gather(x, x0, scale, (last + 1) as f64, &mut hits);
        let mut keys = vec![0u128; h];
        let mut next = count[..=last].to_vec();
        for &i in &hits[..h] {
            let v = x[i as usize];
            let b = bucket_of(v);
            keys[next[b] as usize] = rank_key(v, i);
            next[b] += 1;
        }
        s.idx = hits;
        for b in 0..=last {
            keys[count[b] as usize..count[b + 1] as usize].sort_unstable_by(|a, c| c.cmp(a));
        }
        let order: Vec<u32> = keys.iter().map(|&k| key_index(k)).collect();
        if let Some(i) = walk(&order, e, threshold) {
            return Some(i);
        }
    }
    // Otherwise (no bucket bound, or rounding left the crossing past it): the largest `g` entries
    // by selection, ordered and walked from rank 0, `g` growing 8 times until crossed.
    let mut idx: Vec<u32> = (0..n as u32).collect();
    let mut g = 64.min(n);
    loop {
        if g < n {
            idx.select_nth_unstable_by(g - 1, |&a, &b| before(x, a, b));
        }
        idx[..g].sort_unstable_by(|&a, &b| before(x, a, b));
        if let Some(i) = walk(&idx[..g], e, threshold) {
            return Some(i);
        }
        if g == n {
            // Rounding left the threshold above the sorted total: the last rank.
            return idx.last().map(|&i| i as usize);
        }
        g = (g * 8).min(n);
    }
}

/// The sort key of entry `i` of value `v` (no NaN): larger is earlier in the order value
/// descending (-0.0 tying +0.0), index ascending, as [`before`] orders.
fn rank_key(v: f64, i: u32) -> u128 {
    let b = if v == 0.0 { 0 } else { v.to_bits() };
    let k = if b >> 63 == 1 { !b } else { b | 1 << 63 };
    (u128::from(k) << 64) | u128::from(u32::MAX - i)
}

/// The index of a [`rank_key`].
fn key_index(k: u128) -> u32 {
    u32::MAX - k as u32
}

/// The first of the ordered entries `idx` (the first ranks of the order) whose chunked running sum
/// (see the module documentation) reaches `threshold`, if one does.
fn walk(idx: &[u32], e: &[f64], threshold: f64) -> Option<usize> {
    let (mut base, mut s) = (0.0f64, 0.0f64);
    for (r, &i) in idx.iter().enumerate() {
        if r > 0 && r % CHUNK == 0 {
            base += s;
            s = 0.0;
        }
        s += e[i as usize];
        if base + s >= threshold {
            return Some(i as usize);
        }
    }
    None
}

/// The indices `i` (in index order) into `hits[..h]`, returning `h`, of the entries whose bucket
/// distance `(x0 - x[i]) scale` is below `lim` (`lim <= BUCKETS - 1`: the entries of buckets
/// `0..lim`; a NaN distance, which `bucket` puts last, fails). Branch-free, in a function of its
/// own so that the loop keeps its few values in registers.
#[inline(never)]
fn gather(x: &[f64], x0: f64, scale: f64, lim: f64, hits: &mut Vec<u32>) -> usize {
    // Every entry up to the last hit is written before it is read: no need to clear.
    if hits.len() < x.len() {
        hits.resize(x.len(), 0);
    }
    let mut h = 0;
    for (i, &v) in x.iter().enumerate() {
        hits[h] = i as u32;
        h += usize::from((x0 - v) * scale < lim);
    }
    h
}

/// The indices of bucket `b`'s `len` entries.
fn bucket_members(x: &[f64], b: usize, bucket: &impl Fn(f64) -> usize, len: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(len as usize);
    out.extend(x.iter().enumerate().filter(|&(_, &v)| bucket(v) == b).map(|(i, _)| i as u32));
    out
}

/// The bucket of value `v` in a row of maximum `x0` (`scale` buckets per unit of `x`): non-increasing
/// in `v`; NaN distances go last.
#[inline(always)]
fn bucket(v: f64, x0: f64, scale: f64) -> usize {
    let d = (x0 - v) * scale;
    if d < (BUCKETS - 1) as f64 { d as usize } else { BUCKETS - 1 }
}

/// One pass, a chunk of [`LANES`] at a time: `e[i] = exp64::exp((x[i] - x0) / t)` into `s.e`, the
/// total's lane sum (chunk `b`'s entry `t` is lane `t`'s, as [`lane_sum`] adds it) and the histogram
/// (`s.count[b + 1]` entries and about `s.mass[b]` of weight in bucket `b`; `s.count` is then made
/// cumulative: bucket `b` holds ranks `count[b]..count[b + 1]`). Returns the total.
fn weights(x: &[f64], x0: f64, t: f64, scale: f64, s: &mut Scratch) -> f64 {
    // Every entry is written below: no need to clear.
    s.e.resize(x.len(), 0.0);
    s.count.clear();
    s.count.resize(BUCKETS + 1, 0);
    s.mass.clear();
    s.mass.resize(BUCKETS, 0.0);
    let (count, mass) = (&mut s.count[..], &mut s.mass[..]);
    let mut acc = [0.0f64; LANES];
    let mut y = [0.0f64; LANES];
    for (xc, ec) in x.chunks(LANES).zip(s.e.chunks_mut(LANES)) {
        for (yi, &v) in y.iter_mut().zip(xc) {
            *yi = (v - x0) / t;
        }
        exp64::exp_into(&y[..xc.len()], ec);
        for (a, &ei) in acc.iter_mut().zip(ec.iter()) {
            *a += ei;
        }
        for (&v, &ei) in xc.iter().zip(ec.iter()) {
            let b = bucket(v, x0, scale);
            count[b + 1] += 1;
            mass[b] += ei;
        }
    }
    for b in 0..BUCKETS {
        count[b + 1] += count[b];
    }
    tree(&mut acc)
}

/// The pairwise reduction of the lanes (`acc[t] += acc[t + s]`, `s = 128, .., 1`).
fn tree(acc: &mut [f64; LANES]) -> f64 {
    let mut s = LANES / 2;
    while s > 0 {
        for t in 0..s {
            acc[t] += acc[t + s];
        }
        s /= 2;
    }
    acc[0]
}

/// The lane sum of `e_i` over the members `i` (`member(i)`): lane `t` adds its members
/// (`i % LANES == t`) in index order, then the lanes are added pairwise (see the module
/// documentation; the shader's workgroup reduction is the same tree). A non-member adds `+0.0`,
/// which changes no lane (every lane holds `+0.0` or more).
fn lane_sum(e: &[f64], member: impl Fn(usize) -> bool) -> f64 {
    let mut acc = [0.0f64; LANES];
    for (b, block) in e.chunks(LANES).enumerate() {
        for (t, (a, &v)) in acc.iter_mut().zip(block).enumerate() {
            *a += if member(b * LANES + t) { v } else { 0.0 };
        }
    }
    tree(&mut acc)
}

#[cfg(test)]
mod tests {
    use super::{CHUNK, LANES, Params, Scratch, before, row};
    use graph::philox::uniform;
    use kernels::exp64;
    use std::cell::Cell;

    thread_local! {
        /// The total and top-K sums of the last [`row`] on the full path.
        pub(super) static SUMS: Cell<(f64, f64)> = const { Cell::new((0.0, 0.0)) };
        /// The same of the last [`sorted_row`].
        static ORACLE_SUMS: Cell<(f64, f64)> = const { Cell::new((0.0, 0.0)) };
    }

    /// The implementation before the histogram (every weight by the scalar `exp`, selections over
    /// the whole row): the oracle, bit for bit.
    fn sorted_row(x: &[f64], p: Params) -> Option<usize> {
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
        let e = |v: f64| exp64::exp((v - x0) / t);
        let total = old_lane_sum(x, |_, _| true, e);
        let kk = if p.topk <= 0 || p.topk as usize >= n { n } else { p.topk as usize };
        let mut idx: Vec<u32> = (0..n as u32).collect();
        let top = if kk < n {
            idx.select_nth_unstable_by(kk - 1, |&a, &b| before(x, a, b));
            let (pi, pv) = (idx[kk - 1] as usize, x[idx[kk - 1] as usize]);
            old_lane_sum(x, |i, v| v > pv || (v == pv && i <= pi), e)
        } else {
            total
        };
        // `f64::min` returns the other operand when one is NaN (a `-inf` entry at an infinite
        // temperature); the shader spells the same rule out.
        ORACLE_SUMS.set((total, top));
        let threshold = f64::from(p.random) * (f64::from(p.topp) * total).min(top);
        let mut g = 64.min(n);
        loop {
            if g < n {
                idx.select_nth_unstable_by(g - 1, |&a, &b| before(x, a, b));
            }
            idx[..g].sort_unstable_by(|&a, &b| before(x, a, b));
            let (mut base, mut s) = (0.0f64, 0.0f64);
            for (r, &i) in idx[..g].iter().enumerate() {
                if r > 0 && r % CHUNK == 0 {
                    base += s;
                    s = 0.0;
                }
                s += e(x[i as usize]);
                if base + s >= threshold {
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

    /// The lane sum of `e(x_i)` over the members `i` (`member(i, x_i)`): lane `t` adds its members
    /// (`i % LANES == t`) in index order, then the lanes are added pairwise (see the module
    /// documentation; the shader's workgroup reduction is the same tree).
    fn old_lane_sum(x: &[f64], member: impl Fn(usize, f64) -> bool, e: impl Fn(f64) -> f64) -> f64 {
        let mut acc = [0.0f64; LANES];
        for (b, block) in x.chunks(LANES).enumerate() {
            for (t, &v) in block.iter().enumerate() {
                if member(b * LANES + t, v) {
                    acc[t] += e(v);
                }
            }
        }
        let mut s = LANES / 2;
        while s > 0 {
            for t in 0..s {
                acc[t] += acc[t + s];
            }
            s /= 2;
        }
        acc[0]
    }

    /// The histogram path against the sorting oracle, bit for bit, over rows (ties, `-inf`
    /// entries, wide and narrow), every regime of topk/topp, randoms and temperatures.
    #[test]
    fn equals_the_sorting_algorithm() {
        let mut s = Scratch::default();
        for seed in 0..120u64 {
            let n = [1usize, 2, 7, 255, 256, 257, 3000, 40_000, 151_936][(seed % 9) as usize];
            let width = [0.01f64, 2.0, 16.0, 60.0, 2000.0][(seed % 5) as usize];
            let x: Vec<f64> = (0..n)
                .map(|i| {
                    let t = uniform(seed, 0, i as u64) as f64 * width;
                    match seed / 9 % 4 {
                        1 => (t * 2.0).round() / 2.0,
                        3 => [-0.0, 0.0, -1.0, 1.0, 0.5][(uniform(seed, 1, i as u64) * 5.0) as usize % 5],
                        2 if uniform(seed, 1, i as u64) < 0.05 => f64::NEG_INFINITY,
                        _ => t,
                    }
                })
                .collect();
            for j in 0..8u64 {
                let p = Params {
                    random: [0.37f32, 0.999_999, 0.5, 1e-7, 0.81, 0.93, 0.2, 0.6][j as usize],
                    topp: [0.9f32, 0.95, 1.0, 1e-6, 2.0, 0.5, 1.0, 0.8][((j + seed) % 8) as usize],
                    topk: [0i32, 50, 2, 1000, n as i32 - 1, 0, 20_000, 7][((j * 3 + seed) % 8) as usize],
                    temperature: [1.0f32, 0.8, 1e-3, 50.0, 1.2, 1e-30, 1.0, 3.0][((j * 5 + seed) % 8) as usize],
                };
                SUMS.set((-1.0, -1.0));
                ORACLE_SUMS.set((-1.0, -1.0));
                assert_eq!(row(&x, p, &mut s), sorted_row(&x, p), "seed {seed}, n {n}, width {width}, {p:?}");
                // The lane sums too, bit for bit (an index only moves near a boundary).
                let bits = |(a, b): (f64, f64)| (a.to_bits(), b.to_bits());
                assert_eq!(bits(SUMS.get()), bits(ORACLE_SUMS.get()), "sums: seed {seed}, n {n}, {p:?}");
            }
        }
    }
}
