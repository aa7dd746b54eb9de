//! One row of `random_sample` (see `graph::Op::RandomSample` and `docs/FUSED.md`), in f64 (f16,
//! bf16 and f32 rows widen exactly).
//!
//! The arithmetic is defined so that a GPU computes the same bits (`shaders/sample.comp`, variant
//! `RANDOM`): `e = kernels::exp64::exp((x - x_(0)) / temperature)` (the project's f64 exponential,
//! not the platform's), and every sum in a fixed order that a workgroup can run in parallel:
//!
//! - the total `c_{n-1}` and the top-K sum `c_{kk-1}` are *lane sums* over the members of the set
//!   in index order: lane `t` adds the members with `i % 256 == t` in index order, then the 256
//!   lanes are added pairwise (`acc[t] += acc[t + s]`, `s = 128, 64, .., 1`: [`tree`]);
//! - the running sums `c_i` over the order value descending, index ascending are *chunked*: ranks
//!   in chunks of 256, `c_i = P + s` with `s` the running sum inside rank `i`'s chunk and `P` the
//!   running sum of the previous chunks' totals (`P += s` at each chunk start).
//!
//! Every sum only adds non-negative terms, so `c_i` is non-decreasing in `i`, and the result is a
//! correct evaluation of the spec's f64 algorithm (R5: the spec's own scan is a parallel one).
//!
//! No sort of the row, and no f64 copy of an f32 row ([`Elem`]: every value is read as its exact
//! f64). One vectorised pass ([`weights_body`]) computes the weights `e` (`exp64::exp_in_range`,
//! the same bits as `exp`, which takes the few entries out of its range) into scratch, the
//! total's lane sums, each entry's bucket (`floor(-128 y)` for `y = (x - x0) / t`, [`BUCKETS`]
//! buckets over 32 units of `y`; a bucket never holds a value above one of an earlier bucket, so
//! bucket `b` holds exactly the ranks `count[b]..count[b + 1]`) and the bucket counts.
//!
//! - **Top-K.** The `kk`-th entry of the order is read from its bucket, ordered alone; the top-K
//!   lane sum adds the members' weights, each lane in index order, over the gathered entries of the
//!   buckets up to it (a member never lies in a later bucket).
//! - **The crossing.** Lower bounds of the buckets' masses (their counts times the smallest weight
//!   a bucket can hold) name a prefix of buckets that surely holds the crossing rank; its entries
//!   are gathered ([`gather`], a vector compress). Their bucket sums, in any order, name the
//!   crossing bucket, and only that bucket is ordered and walked ([`certain_crossing`]): the
//!   answer stands wherever the rounding that separates those sums from the chunked `c_i` (a
//!   proven bound, about `2 V 2^-52` of the total) cannot move the crossing. At a close call (a
//!   threshold that near a running sum: about 2e-5 of the rows even on a flat row of 151,936, where
//!   the crossing token weighs least) or a NaN weight, the prefix is ordered exactly (a counting
//!   placement by bucket, then an order inside each, on integer keys) and walked with the chunked
//!   sums. If the crossing is not inside it (rounding, or a crossing below the 32 units the
//!   buckets cover), the walk starts over on the largest `G` entries (`G` from 64, 8 times more
//!   until crossed), ordered by a selection.
//!
//! Ties resolve by index (the composite order value descending, index ascending), so the result
//! is the sorted algorithm's; the tests compare it with the former whole-row implementation bit
//! for bit, and the certified crossing with the exact walk at thresholds on the running sums' own
//! bits.

use kernels::exp64;
use kernels::key::{index_key, order_key};
use std::sync::OnceLock;

/// Lanes of a lane sum (the shader's workgroup size).
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
    /// Each entry's bucket.
    bk: Vec<u16>,
    /// Cumulative bucket counts: bucket `b` holds ranks `count[b]..count[b + 1]`.
    count: Vec<u32>,
    idx: Vec<u32>,
    keys64: Vec<u64>,
    keys128: Vec<u128>,
}

/// A row's element type: f32 (f16 and bf16 rows widen to it exactly) or f64. Every value is
/// used as its exact f64; the type only picks the cheaper sort key.
pub(crate) trait Elem: Copy {
    /// A key whose integer order is the order value descending (-0.0 tying +0.0), index
    /// ascending, larger first; every entry distinct.
    type Key: Ord + Copy;
    fn f64(self) -> f64;
    /// The key of entry `i` of value `self` (no NaN).
    fn key(self, i: u32) -> Self::Key;
    /// The index of a key.
    fn index(k: Self::Key) -> u32;
    /// The scratch's key buffer of this type.
    fn keys(s: &mut Scratch) -> &mut Vec<Self::Key>;
    /// The index of the first maximum (float comparison: -0.0 ties +0.0; 0 for a row of `-inf`
    /// or an empty one) and whether the row holds a NaN.
    fn first_max(x: &[Self]) -> (usize, bool);
    /// [`weights`] on a row of this type.
    fn weights(x: &[Self], x0: f64, t: f64, s: &mut Scratch) -> f64;
}

impl Elem for f32 {
    type Key = u64;
    #[inline(always)]
    fn f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn key(self, i: u32) -> u64 {
        index_key(order_key(self), i as usize)
    }
    #[inline(always)]
    fn index(k: u64) -> u32 {
        kernels::key::key_index(k)
    }
    fn first_max(x: &[f32]) -> (usize, bool) {
        // The vector max scan (NaN ignored), then the first entry equal to it.
        let (m, bad) = kernels::row::max_bad(x);
        let nan = bad && x.iter().any(|v| v.is_nan());
        (x.iter().position(|&v| v == m).unwrap_or(0), nan)
    }
    fn keys(s: &mut Scratch) -> &mut Vec<u64> {
        &mut s.keys64
    }
    fn weights(x: &[f32], x0: f64, t: f64, s: &mut Scratch) -> f64 {
        prepare(s, x.len());
        weights_f32(x, x0, t, &mut s.e, &mut s.bk, &mut s.count)
    }
}

impl Elem for f64 {
    type Key = u128;
    #[inline(always)]
    fn f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn key(self, i: u32) -> u128 {
        let b = if self == 0.0 { 0 } else { self.to_bits() };
        let k = if b >> 63 == 1 { !b } else { b | 1 << 63 };
        (u128::from(k) << 64) | u128::from(u32::MAX - i)
    }
    #[inline(always)]
    fn index(k: u128) -> u32 {
        u32::MAX - k as u32
    }
    fn first_max(x: &[f64]) -> (usize, bool) {
        let (mut first, mut mx, mut nan) = (0, x.first().copied().unwrap_or(f64::NEG_INFINITY), false);
        for (i, &v) in x.iter().enumerate() {
            nan |= v.is_nan();
            if v > mx {
                (first, mx) = (i, v);
            }
        }
        (first, nan)
    }
    fn keys(s: &mut Scratch) -> &mut Vec<u128> {
        &mut s.keys128
    }
    fn weights(x: &[f64], x0: f64, t: f64, s: &mut Scratch) -> f64 {
        prepare(s, x.len());
        weights_f64(x, x0, t, &mut s.e, &mut s.bk, &mut s.count)
    }
}

/// `a` before `b` in the order value descending, index ascending (no NaN).
fn before<T: Elem>(x: &[T], a: u32, b: u32) -> std::cmp::Ordering {
    let (va, vb) = (x[a as usize].f64(), x[b as usize].f64());
    vb.partial_cmp(&va).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
}

/// The index `random_sample` picks from `x`, or `None` for a bad row (see the op's documentation).
pub(crate) fn row<T: Elem>(x: &[T], p: Params, s: &mut Scratch) -> Option<usize> {
    let n = x.len();
    if p.random.is_nan() || p.topp.is_nan() || p.temperature.is_nan() {
        return None;
    }
    let (first, nan) = T::first_max(x);
    if nan || !(0.0..1.0).contains(&p.random) || p.topp < 0.0 || p.temperature < 0.0 {
        return None;
    }
    if p.random == 0.0 || p.topp == 0.0 || p.topk == 1 || p.temperature == 0.0 {
        return Some(first);
    }
    let x0 = x[first].f64();
    if x0.is_infinite() {
        return None;
    }
    let t = f64::from(p.temperature);
    let total = T::weights(x, x0, t, s);
    let kk = if p.topk <= 0 || p.topk as usize >= n { n } else { p.topk as usize };
    // The top-K rows' gather (the entries of buckets `0..=b`, in `s.idx[..h]`), kept for the walk.
    let mut top_gather = None;
    let top = if kk < n {
        // The bucket of rank kk - 1, ordered, names the kk-th entry.
        let count = &s.count[..];
        let b = count.partition_point(|&c| (c as usize) < kk) - 1;
        // The entries of buckets `0..=b` by the gather (in index order), then bucket `b`'s among
        // them; the members of the top `kk` all lie in those buckets, so their lane sum adds the
        // gathered members only (in index order: each lane's order).
        let h = gather(&s.bk, b as u16, &mut s.idx);
        top_gather = Some((b, h));
        let (bk, e, idx) = (&s.bk[..], &s.e[..], &s.idx[..h]);
        let mut members: Vec<u32> = idx.iter().copied().filter(|&i| usize::from(bk[i as usize]) == b).collect();
        members.sort_unstable_by(|&a, &c| before(x, a, c));
        let pi = members[kk - 1 - count[b] as usize] as usize;
        let pv = x[pi].f64();
        let mut acc = [0.0f64; LANES];
        for &i in idx {
            let i = i as usize;
            let v = x[i].f64();
            if v > pv || (v == pv && i <= pi) {
                acc[i % LANES] += e[i];
            }
        }
        tree(&mut acc)
    } else {
        total
    };
    #[cfg(test)]
    tests::SUMS.set((total, top));
    // `f64::min` returns the other operand when one is NaN (a `-inf` entry at an infinite
    // temperature); the shader spells the same rule out.
    let threshold = f64::from(p.random) * (f64::from(p.topp) * total).min(top);
    // The buckets whose mass surely reaches the threshold (each entry of bucket `b` weighs more
    // than `low[b]`, with room for rounding): their entries, ordered bucket by bucket, are the
    // first ranks of the order and hold the crossing.
    let low = low_weights();
    let mut cum = 0.0f64;
    let reach = (0..BUCKETS).position(|b| {
        cum += f64::from(s.count[b + 1] - s.count[b]) * low[b];
        cum > threshold * (1.0 + 1e-9)
    });
    // A top-K row's crossing lies among its top `kk` (up to rounding, which the selection path
    // below catches): its gather serves, no bucket past `b` is needed.
    let reach = match top_gather {
        Some((b, _)) => Some(reach.map_or(b, |r| r.min(b))),
        None => reach,
    };
    if let Some(last) = reach.filter(|&b| b < BUCKETS - 1) {
        // The entries of buckets `0..=last` by the gather (or those of the top-K gather), then a
        // counting placement by bucket and an order inside each.
        let h = match top_gather {
            Some((_, h)) => {
                let (bk, idx) = (&s.bk, &mut s.idx);
                let mut kept = 0;
                for r in 0..h {
                    let i = idx[r];
                    idx[kept] = i;
                    kept += usize::from(usize::from(bk[i as usize]) <= last);
                }
                kept
            }
            None => gather(&s.bk, last as u16, &mut s.idx),
        };
        if let Some(i) = certain_crossing(x, &s.e, &s.bk, &s.idx[..h], last, threshold, total) {
            return Some(i);
        }
        let mut keys = std::mem::take(T::keys(s));
        keys.clear();
        keys.resize(h, T::key(x[0], 0));
        let mut next = s.count[..=last].to_vec();
        for &i in &s.idx[..h] {
            let b = usize::from(s.bk[i as usize]);
            keys[next[b] as usize] = x[i as usize].key(i);
            next[b] += 1;
        }
        for b in 0..=last {
            keys[s.count[b] as usize..s.count[b + 1] as usize].sort_unstable_by(|a, c| c.cmp(a));
        }
        let found = walk(keys.iter().map(|&k| T::index(k)), &s.e, threshold);
        *T::keys(s) = keys;
        if found.is_some() {
            return found;
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
        if let Some(i) = walk(idx[..g].iter().copied(), &s.e, threshold) {
            return Some(i);
        }
        if g == n {
            // Rounding left the threshold above the sorted total: the last rank.
            return idx.last().map(|&i| i as usize);
        }
        g = (g * 8).min(n);
    }
}

/// The crossing rank's index where it is certain without the exact order of the ranks before it:
/// `hits` are the entries of buckets `0..=last` (every rank up to the crossing, in index order).
/// The buckets' sums (in any order) name the crossing bucket; only its entries are ordered and
/// walked on from the sum of the earlier buckets. Those sums differ from the chunked running sums
/// `c_i` (see the module documentation) by rounding alone, less than `delta`: where the walk's
/// `c_{i-1}` lies more than `delta` below the threshold and its `c_i` more than `delta` above, the
/// chunked sums cross at the same rank (they never decrease). Otherwise (a close call, about one
/// row in `1 / (V delta)`, or a NaN weight) `None`: the caller walks the exact order.
fn certain_crossing<T: Elem>(
    x: &[T],
    e: &[f64],
    bk: &[u16],
    hits: &[u32],
    last: usize,
    threshold: f64,
    total: f64,
) -> Option<usize> {
    if !total.is_finite() || !threshold.is_finite() {
        return None;
    }
    let mut mass = vec![0.0f64; last + 1];
    for &i in hits {
        mass[usize::from(bk[i as usize])] += e[i as usize];
    }
    // Every sum here and in the chunked walk is a sum of at most `2 n + 4096` non-negative terms,
    // each within `(2 n + 4096) ulp` of the exact sum (a bound twice as wide as the rounding's).
    let delta = (2 * e.len() + 4096 + 1024) as f64 * f64::EPSILON * total;
    let mut before = 0.0f64;
    let b = (0..=last).find(|&b| {
        let reached = before + mass[b] >= threshold;
        if !reached {
            before += mass[b];
        }
        reached
    })?;
    let mut members: Vec<u32> = hits.iter().copied().filter(|&i| usize::from(bk[i as usize]) == b).collect();
    members.sort_unstable_by(|&a, &c| self::before(x, a, c));
    let mut c = before;
    for &i in &members {
        let prev = c;
        c += e[i as usize];
        if c >= threshold {
            return (prev + delta < threshold && c - delta >= threshold).then_some(i as usize);
        }
    }
    None
}

/// The first of the ordered entries `idx` (the first ranks of the order) whose chunked running sum
/// (see the module documentation) reaches `threshold`, if one does.
fn walk(idx: impl Iterator<Item = u32>, e: &[f64], threshold: f64) -> Option<usize> {
    let (mut base, mut s) = (0.0f64, 0.0f64);
    for (r, i) in idx.enumerate() {
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

/// The indices `i` (in index order) into `hits[..h]`, returning `h`, of the entries of buckets
/// `0..=last`.
fn gather(bk: &[u16], last: u16, hits: &mut Vec<u32>) -> usize {
    // Every entry up to the last hit is written before it is read: no need to clear. Room for a
    // whole vector past the last hit.
    if hits.len() < bk.len() + 8 {
        hits.resize(bk.len() + 8, 0);
    }
    gather_into(bk, last, hits)
}

/// [`gather`]'s scan, branch-free: every index is written and the count advances on a hit.
fn gather_portable(bk: &[u16], last: u16, hits: &mut [u32]) -> usize {
    let mut h = 0;
    for (i, &b) in bk.iter().enumerate() {
        hits[h] = i as u32;
        h += usize::from(b <= last);
    }
    h
}

kernels::dispatch!(
    /// [`gather`]'s scan (`hits` has room for 8 entries past the last hit).
    fn gather_into(bk: &[u16], last: u16, hits: &mut [u32]) -> usize => x86::gather_into | gather_portable
);

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// For each 8-bit hit mask, the positions of its set bits, packed to the front.
    const PACK: [[u32; 8]; 256] = {
        let mut t = [[0u32; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let (mut k, mut j) = (0, 0);
            while j < 8 {
                if m >> j & 1 == 1 {
                    t[m][k] = j as u32;
                    k += 1;
                }
                j += 1;
            }
            m += 1;
        }
        t
    };

    /// [`super::gather_portable`], 8 entries at a time: a compare, the hit mask, and the hits'
    /// indices packed by a permutation and stored whole (the store may run 8 entries past the
    /// last hit: the caller's `hits` has that room).
    ///
    /// # Safety
    /// The CPU has AVX2; `hits.len() >= bk.len() + 8`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gather_into(bk: &[u16], last: u16, hits: &mut [u32]) -> usize {
        let n = bk.len();
        assert!(hits.len() >= n + 8);
        // Buckets are below 2^15: the signed compare is the unsigned one.
        let lim = _mm_set1_epi16(last as i16);
        let step = _mm256_set1_epi32(8);
        let mut base = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let (mut h, mut i) = (0usize, 0usize);
        // SAFETY: loads read `bk[i..i + 8]` with `i + 8 <= n`; stores write `hits[h..h + 8]` with
        // `h <= i <= n`, inside `hits` (asserted above).
        unsafe {
            while i + 8 <= n {
                let v = _mm_loadu_si128(bk.as_ptr().add(i).cast());
                let over = _mm_cmpgt_epi16(v, lim);
                let m = !_mm_movemask_epi8(_mm_packs_epi16(over, over)) as u32 & 0xff;
                let perm = _mm256_loadu_si256(PACK[m as usize].as_ptr().cast());
                _mm256_storeu_si256(hits.as_mut_ptr().add(h).cast(), _mm256_permutevar8x32_epi32(base, perm));
                h += m.count_ones() as usize;
                base = _mm256_add_epi32(base, step);
                i += 8;
            }
        }
        for (j, &b) in bk.iter().enumerate().skip(i) {
            hits[h] = j as u32;
            h += usize::from(b <= last);
        }
        h
    }
}

/// The bucket of an entry whose weight is `e^y` (`y = (x - x0) / t <= 0`, or NaN): `-128 y`
/// rounded down, at most the last. Non-increasing in `x` (the division by `t > 0` and the
/// product by a power of 2 keep the order), so a bucket never holds a value above one of an
/// earlier bucket; NaN goes last (`f64::min` returns the other operand). Branch-free.
#[inline(always)]
fn bucket(y: f64) -> u16 {
    let d = (-y * PER_UNIT).min((BUCKETS - 1) as f64);
    // SAFETY: `d` is in `[0, BUCKETS - 1]` (`-y >= 0`; `-0.0` converts to 0).
    unsafe { d.to_int_unchecked::<i32>() as u16 }
}

/// A lower bound of every weight in bucket `b`, `e^(-(b + 1) / 128)` less a margin for rounding
/// (0 for the last bucket, which holds everything below): only where the walk starts is decided
/// from it, never a result (a short bound sends the walk to the selection path).
fn low_weights() -> &'static [f64] {
    static LOW: OnceLock<Vec<f64>> = OnceLock::new();
    LOW.get_or_init(|| {
        let mut low: Vec<f64> = (0..BUCKETS).map(|b| (-((b + 1) as f64) / PER_UNIT).exp() * (1.0 - 1e-6)).collect();
        low[BUCKETS - 1] = 0.0;
        low
    })
}

/// Sizes the scratch for a row of `n`.
fn prepare(s: &mut Scratch, n: usize) {
    // Every weight and bucket is written by the pass: no need to clear.
    s.e.resize(n, 0.0);
    s.bk.resize(n, 0);
    s.count.clear();
    s.count.resize(BUCKETS + 1, 0);
}

/// One pass, a chunk of [`LANES`] at a time: `e[i] = exp64::exp((x[i] - x0) / t)`, the total's
/// lane sum (chunk `c`'s entry `t` is lane `t`'s), each entry's bucket
/// and the histogram (`count[b + 1]` entries in bucket `b`, then made cumulative). Returns the
/// total.
#[inline(always)]
fn weights_body<T: Elem>(x: &[T], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], count: &mut [u32]) -> f64 {
    let mut acc = [0.0f64; LANES];
    let mut y = [0.0f64; LANES];
    for ((xc, ec), bc) in x.chunks(LANES).zip(e.chunks_mut(LANES)).zip(bk.chunks_mut(LANES)) {
        let y = &mut y[..xc.len()];
        for (yi, v) in y.iter_mut().zip(xc) {
            *yi = (v.f64() - x0) / t;
        }
        let mut outside = false;
        for (o, &yi) in ec.iter_mut().zip(y.iter()) {
            // `y <= 0`, or NaN.
            outside |= yi.is_nan() || yi < -exp64::IN_RANGE;
            *o = exp64::exp_in_range(yi);
        }
        if outside {
            for (o, &yi) in ec.iter_mut().zip(y.iter()) {
                if yi.is_nan() || yi < -exp64::IN_RANGE {
                    *o = exp64::exp(yi);
                }
            }
        }
        for (a, &w) in acc.iter_mut().zip(ec.iter()) {
            *a += w;
        }
        for (b, &yi) in bc.iter_mut().zip(y.iter()) {
            *b = bucket(yi);
        }
        for &b in bc.iter() {
            count[usize::from(b) + 1] += 1;
        }
    }
    for b in 0..BUCKETS {
        count[b + 1] += count[b];
    }
    tree(&mut acc)
}

#[inline(always)]
fn weights_f32_body<const FMA: bool>(
    x: &[f32],
    x0: f64,
    t: f64,
    e: &mut [f64],
    bk: &mut [u16],
    count: &mut [u32],
) -> f64 {
    weights_body(x, x0, t, e, bk, count)
}

#[inline(always)]
fn weights_f64_body<const FMA: bool>(
    x: &[f64],
    x0: f64,
    t: f64,
    e: &mut [f64],
    bk: &mut [u16],
    count: &mut [u32],
) -> f64 {
    weights_body(x, x0, t, e, bk, count)
}

kernels::dispatch!(
    /// [`weights_body`] on an f32 row, vectorised.
    fn weights_f32(x: &[f32], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], count: &mut [u32]) -> f64 => weights_f32_body
);
kernels::dispatch!(
    /// [`weights_body`] on an f64 row, vectorised.
    fn weights_f64(x: &[f64], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], count: &mut [u32]) -> f64 => weights_f64_body
);

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

#[cfg(test)]
mod tests {
    use super::{
        BUCKETS, CHUNK, Elem, LANES, Params, Scratch, before, certain_crossing, gather, gather_portable, row, walk,
    };
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
                // The f32 path (its own max scan, weights pass and sort keys) on the row rounded
                // to f32, against the oracle on that row widened.
                let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                let wide: Vec<f64> = x32.iter().map(|&v| f64::from(v)).collect();
                SUMS.set((-1.0, -1.0));
                ORACLE_SUMS.set((-1.0, -1.0));
                assert_eq!(row(&x32, p, &mut s), sorted_row(&wide, p), "f32: seed {seed}, n {n}, width {width}, {p:?}");
                assert_eq!(bits(SUMS.get()), bits(ORACLE_SUMS.get()), "f32 sums: seed {seed}, n {n}, {p:?}");
            }
        }
    }

    /// The certified crossing at close calls: thresholds at the chunked running sums' own bits and
    /// one ulp either side, where the buckets' sums (another order) round differently, and halfway
    /// between two of them. It may decline (`None`), never answer another rank than the exact walk.
    #[test]
    fn the_certified_crossing_never_disagrees_with_the_exact_walk() {
        let mut s = Scratch::default();
        let (mut answered, mut declined) = (0, 0);
        for seed in 0..12u64 {
            let n = [3000usize, 40_000, 151_936][(seed % 3) as usize];
            let x: Vec<f32> = (0..n).map(|i| uniform(seed, 2, i as u64) * 16.0 - 8.0).collect();
            let x0 = f64::from(x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)));
            let total = <f32 as Elem>::weights(&x, x0, 1.0 + seed as f64 / 7.0, &mut s);
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_unstable_by(|&a, &b| before(&x, a, b));
            let hits: Vec<u32> = (0..n as u32).filter(|&i| usize::from(s.bk[i as usize]) < BUCKETS - 1).collect();
            // The chunked running sums, as the exact walk forms them.
            let (mut base, mut acc, mut c) = (0.0f64, 0.0f64, Vec::with_capacity(n));
            for (r, &i) in order.iter().enumerate() {
                if r > 0 && r % CHUNK == 0 {
                    base += acc;
                    acc = 0.0;
                }
                acc += s.e[i as usize];
                c.push(base + acc);
            }
            for k in 0..64u64 {
                let r = ((uniform(seed, 3, k) as f64 * 0.6) * n as f64) as usize;
                let mid = if r > 0 { (c[r - 1] + c[r]) / 2.0 } else { c[r] / 2.0 };
                for thr in [c[r], f64::from_bits(c[r].to_bits() - 1), f64::from_bits(c[r].to_bits() + 1), mid] {
                    let want = walk(order.iter().copied(), &s.e, thr);
                    match certain_crossing(&x, &s.e, &s.bk, &hits, BUCKETS - 2, thr, total) {
                        Some(i) => {
                            assert_eq!(Some(i), want, "seed {seed}, rank {r}, threshold {thr:e}");
                            answered += 1;
                        }
                        None => declined += 1,
                    }
                }
            }
        }
        // Thresholds at a running sum or one ulp from it are close calls, declined; those halfway
        // between two running sums are answered.
        assert!(declined > 0 && answered > 0, "answered {answered}, declined {declined}");
    }

    /// The vector gather (on a CPU with AVX2) equals the portable scan, tails included.
    #[test]
    fn the_gather_equals_the_portable_scan() {
        for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 1000, 4099] {
            let bk: Vec<u16> = (0..n).map(|i| (uniform(n as u64, 4, i as u64) * BUCKETS as f32) as u16).collect();
            for last in [0u16, 1, 40, 2047, 4094, 4095] {
                let mut want = vec![0u32; n + 8];
                let h = gather_portable(&bk, last, &mut want);
                let mut got = Vec::new();
                assert_eq!(gather(&bk, last, &mut got), h, "n {n}, last {last}");
                assert_eq!(got[..h], want[..h], "n {n}, last {last}");
            }
        }
    }
}
