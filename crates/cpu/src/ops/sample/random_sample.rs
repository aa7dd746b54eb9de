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
//! total's lane sums and each entry's bucket (`floor(-128 y)` for `y = (x - x0) / t`,
//! [`BUCKETS`] buckets over 32 units of `y`; a bucket never holds a value above one of an earlier
//! bucket, so the entries of buckets `0..=b` are exactly the first ranks of the order). A 1-in-16
//! subsample of the buckets' counts and weights estimates how many buckets each gather needs;
//! estimates only decide the work: each is checked on what it gathered, and a short one gathers
//! more.
//!
//! - **Top-K.** The entries of the buckets that hold rank `kk - 1` are gathered ([`gather`], a
//!   vector compress) and counted by bucket; the `kk`-th entry of the order is read from its
//!   bucket, ordered alone; the top-K lane sum adds the members' weights, each lane in index
//!   order, over the gathered entries (a member never lies in a later bucket).
//! - **The crossing.** The entries of the buckets that hold the crossing rank are gathered (a
//!   top-K row's crossing lies in its top `kk`: its gather serves). Their bucket sums, in any
//!   order, name the crossing bucket, and only that bucket is ordered and walked
//!   ([`certain_crossing`]): the answer stands wherever the rounding that separates those sums
//!   from the chunked `c_i` (a proven bound, about `2 V 2^-52` of the total) cannot move the
//!   crossing. At a close call (a threshold that near a running sum: about 2e-5 of the rows even
//!   on a flat row of 151,936, where the crossing token weighs least) or a NaN weight, the
//!   gathered prefix is ordered exactly (a counting placement by bucket, then an order inside
//!   each, on integer keys) and walked with the chunked sums. If the crossing is not inside it
//!   (rounding, or a crossing below the 32 units the buckets cover), the walk starts over on the
//!   largest `G` entries (`G` from 64, 8 times more until crossed), ordered by a selection.
//!
//! Ties resolve by index (the composite order value descending, index ascending), so the result
//! is the sorted algorithm's; the tests compare it with the former whole-row implementation bit
//! for bit, and the certified crossing with the exact walk at thresholds on the running sums' own
//! bits.

use kernels::exp64;
use kernels::key::{index_key, order_key};

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
    /// Gathered entries (indices in index order).
    idx: Vec<u32>,
    sub: Subsample,
    keys64: Vec<u64>,
    keys128: Vec<u128>,
}

/// A row's element type: f32 (f16 and bf16 rows widen to it exactly) or f64. Every value is
/// used as its exact f64; the type only picks the cheaper sort key and scan.
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
    /// [`weights_body`] into `e`, `bk` (one per entry) and the subsample `sub`; returns the total.
    fn weights(x: &[Self], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], sub: &mut Subsample) -> f64;
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
    fn keys(s: &mut Scratch) -> &mut Vec<u64> {
        &mut s.keys64
    }
    fn first_max(x: &[f32]) -> (usize, bool) {
        // The block argmax (NaN ignored; one pass and the rescan of one block).
        let (i, _, bad) = kernels::select::argmax(x);
        (i, bad && x.iter().any(|v| v.is_nan()))
    }
    fn weights(x: &[f32], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], sub: &mut Subsample) -> f64 {
        weights_f32(x, x0, t, e, bk, sub)
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
    fn keys(s: &mut Scratch) -> &mut Vec<u128> {
        &mut s.keys128
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
    fn weights(x: &[f64], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], sub: &mut Subsample) -> f64 {
        weights_f64(x, x0, t, e, bk, sub)
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
    // Every weight and bucket is written by the pass: no need to clear.
    s.e.resize(n, 0.0);
    s.bk.resize(n, 0);
    s.sub.clear();
    let total = T::weights(x, x0, t, &mut s.e, &mut s.bk, &mut s.sub);
    let kk = if p.topk <= 0 || p.topk as usize >= n { n } else { p.topk as usize };
    // A top-K row's gather holds the buckets `0..=b` (`b`: the bucket of rank `kk - 1`), and the
    // crossing lies among its top `kk` (up to rounding, which the selection path below catches).
    let mut top_bucket = None;
    let top = if kk < n {
        let mut last = rank_bucket(&s.sub.count, kk);
        let mut h = gather(&s.bk, last, &mut s.idx);
        if h < kk {
            // The subsample's estimate fell short: every entry.
            #[cfg(test)]
            tests::REGATHERS.set(tests::REGATHERS.get() + 1);
            last = BUCKETS - 1;
            h = gather(&s.bk, last, &mut s.idx);
        }
        let count = cumulative_counts(&s.bk, &s.idx[..h], last);
        let b = count.partition_point(|&c| (c as usize) < kk) - 1;
        let (idx, bk, e) = (&s.idx[..h], &s.bk[..], &s.e[..]);
        let mut members: Vec<u32> = idx.iter().copied().filter(|&i| usize::from(bk[i as usize]) == b).collect();
        members.sort_unstable_by(|&a, &c| before(x, a, c));
        let pi = members[kk - 1 - count[b] as usize] as usize;
        let pv = x[pi].f64();
        // The members of the top `kk` all lie in buckets `0..=b`, so their lane sum adds gathered
        // entries only (in index order: each lane's order).
        let mut acc = [0.0f64; LANES];
        for &i in idx {
            let i = i as usize;
            let v = x[i].f64();
            if v > pv || (v == pv && i <= pi) {
                acc[i % LANES] += e[i];
            }
        }
        if b < last {
            // Keep the gathered entries of buckets `0..=b` for the walk.
            let mut kept = 0;
            for r in 0..h {
                let i = s.idx[r];
                s.idx[kept] = i;
                kept += usize::from(usize::from(bk[i as usize]) <= b);
            }
            h = kept;
        }
        top_bucket = Some((b, h));
        tree(&mut acc)
    } else {
        total
    };
    #[cfg(test)]
    tests::SUMS.set((total, top));
    // `f64::min` returns the other operand when one is NaN (a `-inf` entry at an infinite
    // temperature); the shader spells the same rule out.
    let threshold = f64::from(p.random) * (f64::from(p.topp) * total).min(top);
    let (mut last, mut h) = match top_bucket {
        Some(bh) => bh,
        None => {
            let last = mass_bucket(&s.sub.mass, threshold);
            (last, gather(&s.bk, last, &mut s.idx))
        }
    };
    if last < BUCKETS - 1 {
        let mut crossing = certain_crossing(x, &s.e, &s.bk, &s.idx[..h], last, threshold, total);
        while crossing == Crossing::Beyond && top_bucket.is_none() && last < BUCKETS - 2 {
            // The subsample's estimate fell short: eight times as many buckets.
            #[cfg(test)]
            tests::REGATHERS.set(tests::REGATHERS.get() + 1);
            last = (8 * last + 8).min(BUCKETS - 2);
            h = gather(&s.bk, last, &mut s.idx);
            crossing = certain_crossing(x, &s.e, &s.bk, &s.idx[..h], last, threshold, total);
        }
        if let Crossing::At(i) = crossing {
            return Some(i);
        }
        // A close call: the gathered buckets' exact order (a counting placement by bucket, then
        // an order inside each), walked with the chunked sums.
        let count = cumulative_counts(&s.bk, &s.idx[..h], last);
        let mut keys = std::mem::take(T::keys(s));
        keys.clear();
        keys.resize(h, T::key(x[0], 0));
        let mut next = count.clone();
        for &i in &s.idx[..h] {
            let b = usize::from(s.bk[i as usize]);
            keys[next[b] as usize] = x[i as usize].key(i);
            next[b] += 1;
        }
        for b in 0..=last {
            keys[count[b] as usize..count[b + 1] as usize].sort_unstable_by(|a, c| c.cmp(a));
        }
        let found = walk(keys.iter().map(|&k| T::index(k)), &s.e, threshold);
        *T::keys(s) = keys;
        if found.is_some() {
            return found;
        }
    }
    // Otherwise (rounding left the crossing past the gathered buckets, or it lies below the 32
    // units the buckets cover): the largest `g` entries by selection, ordered and walked from
    // rank 0, `g` growing 8 times until crossed.
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

/// Every [`STRIDE`]-th entry goes into the subsample.
const STRIDE: usize = 16;

/// The subsample's counts and weights by bucket (every [`STRIDE`]-th entry, taken by the weights
/// pass), from which the gathers' bucket bounds are estimated. Only the work depends on them,
/// never a result: every estimate is checked on the gathered entries, and a short one gathers more.
#[derive(Debug, Default)]
pub(crate) struct Subsample {
    count: Vec<u32>,
    mass: Vec<f64>,
}

impl Subsample {
    /// Empty buckets.
    fn clear(&mut self) {
        self.count.clear();
        self.count.resize(BUCKETS, 0);
        self.mass.clear();
        self.mass.resize(BUCKETS, 0.0);
    }

    /// Adds every [`STRIDE`]-th entry of a chunk that starts at a multiple of [`STRIDE`].
    #[inline(always)]
    fn add(&mut self, bk: &[u16], e: &[f64]) {
        for (&b, &w) in bk.iter().step_by(STRIDE).zip(e.iter().step_by(STRIDE)) {
            self.count[usize::from(b)] += 1;
            self.mass[usize::from(b)] += w;
        }
    }
}

/// The first bucket whose estimated cumulative count reaches `kk` with room to spare (a quarter
/// more and 64), or the last.
fn rank_bucket(sub_count: &[u32], kk: usize) -> usize {
    let need = (kk as f64 * 1.25 + 64.0) / STRIDE as f64;
    let mut cum = 0.0f64;
    sub_count
        .iter()
        .position(|&c| {
            cum += f64::from(c);
            cum >= need
        })
        .unwrap_or(BUCKETS - 1)
}

/// The first bucket whose estimated cumulative weight reaches `threshold` with room to spare (a
/// fifth more, or half the estimated weight beyond it where that is less), or the last but one
/// (the last holds everything below the buckets' range; a crossing there is the selection's).
fn mass_bucket(sub_mass: &[f64], threshold: f64) -> usize {
    let est_total: f64 = sub_mass.iter().sum::<f64>() * STRIDE as f64;
    let need = (threshold * 1.2).min(threshold + 0.5 * (est_total - threshold)) / STRIDE as f64;
    let mut cum = 0.0f64;
    sub_mass[..BUCKETS - 1]
        .iter()
        .position(|&m| {
            cum += m;
            cum >= need
        })
        .unwrap_or(BUCKETS - 2)
}

/// `count[b]` = the entries of buckets `0..b` among `idx` (every entry of buckets `0..=last`),
/// for `b` in `0..=last + 1`: bucket `b` holds ranks `count[b]..count[b + 1]`.
fn cumulative_counts(bk: &[u16], idx: &[u32], last: usize) -> Vec<u32> {
    let mut count = vec![0u32; last + 2];
    for &i in idx {
        count[usize::from(bk[i as usize]) + 1] += 1;
    }
    for b in 0..=last {
        count[b + 1] += count[b];
    }
    count
}

/// What [`certain_crossing`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crossing {
    /// The crossing rank's index, certain.
    At(usize),
    /// A close call (or a NaN weight): only the exact order decides.
    Close,
    /// The gathered buckets' weight surely does not reach the threshold.
    Beyond,
}

/// The crossing rank's index where it is certain without the exact order of the ranks before it:
/// `idx` are the entries of buckets `0..=last` (in index order). The buckets' sums (in any order)
/// name the crossing bucket; only its entries are ordered and walked on from the sum of the
/// earlier buckets. Those sums differ from the chunked running sums `c_i` (see the module
/// documentation) by rounding alone, less than `delta`: where the walk's `c_{i-1}` lies more than
/// `delta` below the threshold and its `c_i` more than `delta` above, the chunked sums cross at
/// the same rank (they never decrease).
fn certain_crossing<T: Elem>(
    x: &[T],
    e: &[f64],
    bk: &[u16],
    idx: &[u32],
    last: usize,
    threshold: f64,
    total: f64,
) -> Crossing {
    if !total.is_finite() || !threshold.is_finite() {
        return Crossing::Close;
    }
    let mut mass = vec![0.0f64; last + 1];
    for &i in idx {
        mass[usize::from(bk[i as usize])] += e[i as usize];
    }
    // Every sum here and in the chunked walk is a sum of at most `2 n + 4096` non-negative terms,
    // each within `(2 n + 4096) ulp` of the exact sum (a bound twice as wide as the rounding's).
    let delta = (2 * e.len() + 4096 + 1024) as f64 * f64::EPSILON * total;
    let mut before = 0.0f64;
    let Some(b) = (0..=last).find(|&b| {
        let reached = before + mass[b] >= threshold;
        if !reached {
            before += mass[b];
        }
        reached
    }) else {
        return if before + delta < threshold { Crossing::Beyond } else { Crossing::Close };
    };
    let mut members: Vec<u32> = idx.iter().copied().filter(|&i| usize::from(bk[i as usize]) == b).collect();
    members.sort_unstable_by(|&a, &c| self::before(x, a, c));
    let mut c = before;
    for &i in &members {
        let prev = c;
        c += e[i as usize];
        if c >= threshold {
            let certain = prev + delta < threshold && c - delta >= threshold;
            return if certain { Crossing::At(i as usize) } else { Crossing::Close };
        }
    }
    Crossing::Close
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

/// Gathers the entries of buckets `0..=last` into `hits[..h]` (indices in index order) and returns
/// `h`. `hits` keeps its length (at least the row's and a vector more, so the scan never has to
/// clear or grow it again).
fn gather(bk: &[u16], last: usize, hits: &mut Vec<u32>) -> usize {
    // Every entry up to the last hit is written before it is read: no need to clear. Room for a
    // whole vector past the last hit.
    if hits.len() < bk.len() + 8 {
        hits.resize(bk.len() + 8, 0);
    }
    gather_into(bk, last.min(BUCKETS - 1) as u16, hits)
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

/// One pass, a chunk of [`LANES`] at a time: `e[i] = exp64::exp((x[i] - x0) / t)`, the total's
/// lane sums (chunk `c`'s entry `t` is lane `t`'s), each entry's [`bucket`] and the
/// [`Subsample`]. Returns the total.
///
/// A power-of-two `t` multiplies by `1 / t` instead of dividing: `1 / t` is then exact, so the
/// product and the quotient round the same real number (the same bits, subnormals included).
#[inline(always)]
fn weights_body<T: Elem>(x: &[T], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], sub: &mut Subsample) -> f64 {
    const _: () = assert!(LANES.is_multiple_of(STRIDE));
    let inv = 1.0 / t;
    let pow2 = t.is_finite() && t > 0.0 && (t.to_bits() & ((1u64 << 52) - 1)) == 0 && inv.is_normal();
    let mut acc = [0.0f64; LANES];
    let mut y = [0.0f64; LANES];
    for ((xc, ec), bc) in x.chunks(LANES).zip(e.chunks_mut(LANES)).zip(bk.chunks_mut(LANES)) {
        let y = &mut y[..xc.len()];
        if pow2 {
            for ((yi, v), b) in y.iter_mut().zip(xc).zip(bc.iter_mut()) {
                *yi = (v.f64() - x0) * inv;
                *b = bucket(*yi);
            }
        } else {
            for ((yi, v), b) in y.iter_mut().zip(xc).zip(bc.iter_mut()) {
                *yi = (v.f64() - x0) / t;
                *b = bucket(*yi);
            }
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
        sub.add(bc, ec);
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
    sub: &mut Subsample,
) -> f64 {
    weights_body(x, x0, t, e, bk, sub)
}

#[inline(always)]
fn weights_f64_body<const FMA: bool>(
    x: &[f64],
    x0: f64,
    t: f64,
    e: &mut [f64],
    bk: &mut [u16],
    sub: &mut Subsample,
) -> f64 {
    weights_body(x, x0, t, e, bk, sub)
}

kernels::dispatch!(
    /// [`weights_body`] on an f32 row, vectorised.
    fn weights_f32(x: &[f32], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], sub: &mut Subsample) -> f64 => weights_f32_body
);
kernels::dispatch!(
    /// [`weights_body`] on an f64 row, vectorised.
    fn weights_f64(x: &[f64], x0: f64, t: f64, e: &mut [f64], bk: &mut [u16], sub: &mut Subsample) -> f64 => weights_f64_body
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
        BUCKETS, CHUNK, Crossing, Elem, LANES, Params, Scratch, before, certain_crossing, gather, gather_portable, row,
        walk,
    };
    use graph::philox::uniform;
    use kernels::exp64;
    use std::cell::Cell;

    thread_local! {
        /// The total and top-K sums of the last [`row`] on the full path.
        pub(super) static SUMS: Cell<(f64, f64)> = const { Cell::new((0.0, 0.0)) };
        /// How many times a subsample's estimate fell short and [`row`] gathered again.
        pub(super) static REGATHERS: Cell<usize> = const { Cell::new(0) };
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
                    // Powers of two (1, 64, 0.25, 2^-100) take the pass's product by `1 / t`.
                    temperature: [1.0f32, 0.8, 1e-3, 64.0, 1.2, 1e-30, 0.25, 2f32.powi(-100)]
                        [((j * 5 + seed) % 8) as usize],
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
            let t = 1.0 + seed as f64 / 7.0;
            s.e.resize(n, 0.0);
            s.bk.resize(n, 0);
            s.sub.clear();
            let total = <f32 as Elem>::weights(&x, x0, t, &mut s.e, &mut s.bk, &mut s.sub);
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_unstable_by(|&a, &b| before(&x, a, b));
            let h = gather(&s.bk, BUCKETS - 2, &mut s.idx);
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
                    match certain_crossing(&x, &s.e, &s.bk, &s.idx[..h], BUCKETS - 2, thr, total) {
                        Crossing::At(i) => {
                            assert_eq!(Some(i), want, "seed {seed}, rank {r}, threshold {thr:e}");
                            answered += 1;
                        }
                        Crossing::Close | Crossing::Beyond => declined += 1,
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
            for last in [0usize, 1, 40, 2047, 4094, 4095] {
                let mut want = vec![0u32; n + 8];
                let h = gather_portable(&bk, last as u16, &mut want);
                let mut got = Vec::new();
                assert_eq!(gather(&bk, last, &mut got), h, "n {n}, last {last}");
                assert_eq!(got[..h], want[..h], "n {n}, last {last}");
            }
        }
    }

    /// Rows built so that the 1-in-16 subsample misjudges them: the large entries sit exactly at
    /// the sampled indices (the estimate overrates the top buckets, so the first gather falls
    /// short), or exactly between them (it underrates them). Every answer still equals the
    /// sorting algorithm's, and the short estimates really happened.
    #[test]
    fn misleading_subsamples_change_the_work_only() {
        let mut s = Scratch::default();
        REGATHERS.set(0);
        for (case, n) in [(0u64, 4096usize), (1, 40_000), (2, 151_936)] {
            for on_sample in [true, false] {
                let x: Vec<f32> = (0..n)
                    .map(|i| {
                        let big = (i % 16 == 0) == on_sample;
                        let u = uniform(case, 5, i as u64);
                        if big { u } else { -6.0 - 4.0 * u }
                    })
                    .collect();
                let wide: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                for (j, &(random, topp, topk)) in
                    [(0.9f32, 1.0f32, 0i32), (0.99, 0.99, 0), (0.5, 0.95, 0), (0.7, 1.0, 2000), (0.95, 0.9, 500)]
                        .iter()
                        .enumerate()
                {
                    let p = Params { random, topp, topk, temperature: [1.0f32, 0.7][j % 2] };
                    assert_eq!(row(&x, p, &mut s), sorted_row(&wide, p), "case {case}, sampled big {on_sample}, {p:?}");
                }
            }
        }
        assert!(REGATHERS.get() > 0, "no estimate fell short: the test does not reach the second gathers");
    }
}
