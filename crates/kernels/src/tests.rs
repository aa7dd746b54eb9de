//! Unit tests of the block statistics ([`crate::stats`]) and the selections ([`crate::select`]):
//! each AVX2 version against the portable one and both against a scalar f64 reference, on odd
//! lengths and on rows with NaN, +inf and -inf. The dispatching functions run the AVX2 versions
//! where the CPU has AVX2 and FMA, so `portable::f` against `f` compares the two versions.

use crate::key::{order_key, rank_key as key, rank_key_value as unkey};
use crate::select::{
    self, argmax, argmax_index, desc, gather_ge, kth_largest, min_p_gather, rescan, top_k, top_k_indices,
};
use crate::stats::{self, BLOCK, BlockStats, SUB, block_stats, block_stats_with_sub_max, sub_maxima};

const LENS: [usize; 12] = [1, 2, 15, 127, 128, 129, 1023, 1024, 1025, 2048, 4099, 9000];

/// A row of LLM-like logits with a few ties: pseudo-random in [-6, 7), plus spikes.
fn row(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let h = i.wrapping_mul(2_654_435_761).wrapping_add(seed.wrapping_mul(40_503)) >> 9;
            let x = (h % 13_000) as f32 / 1000.0 - 6.0;
            if h % 997 == 0 { x + 9.0 } else { x }
        })
        .collect()
}

fn ref_max(xs: &[f32]) -> f32 {
    xs.iter().copied().filter(|x| !x.is_nan()).fold(f32::NEG_INFINITY, f32::max)
}

fn ref_bad(xs: &[f32]) -> bool {
    xs.iter().any(|x| x.is_nan() || *x == f32::INFINITY)
}

/// Rows with special values: each of NaN, +inf at the start, the middle and the end, some `-inf`.
fn variants(n: usize) -> Vec<Vec<f32>> {
    let mut out = vec![row(n, 1)];
    for bad in [f32::NAN, f32::INFINITY] {
        for pos in [0, n / 2, n - 1] {
            let mut v = row(n, 2);
            v[pos] = bad;
            out.push(v);
        }
    }
    let mut v = row(n, 3);
    for x in v.iter_mut().step_by(3) {
        *x = f32::NEG_INFINITY;
    }
    out.push(v);
    out.push(vec![f32::NEG_INFINITY; n]);
    out
}

#[test]
fn sub_maxima_match_reference() {
    for n in LENS {
        for v in variants(n) {
            let bad = ref_bad(&v);
            let want: Vec<f32> = v.chunks(SUB).map(ref_max).collect();
            let mut a = Vec::new();
            let mut b = vec![1.0; 3];
            assert_eq!((stats::portable::sub_maxima(&v, &mut a), sub_maxima(&v, &mut b)), (bad, bad), "n = {n}");
            assert_eq!((a.len(), b.len()), (want.len(), want.len()));
            if !bad {
                assert_eq!(a, want, "n = {n}");
                assert_eq!(b, want, "n = {n}");
            }
        }
    }
}

#[test]
fn block_stats_match_reference() {
    for n in LENS {
        for v in variants(n) {
            for s in [1.0f32, 1.25, 0.3] {
                let bad = ref_bad(&v);
                let mut sts = vec![BlockStats::default(), BlockStats::default()];
                stats::portable::block_stats_with_sub_max(&v, s, &mut sts[0]);
                block_stats_with_sub_max(&v, s, &mut sts[1]);
                let mut plain = BlockStats::default();
                block_stats(&v, s, &mut plain);
                let mut plain_p = BlockStats::default();
                stats::portable::block_stats(&v, s, &mut plain_p);
                for st in sts.iter().chain([&plain, &plain_p]) {
                    assert_eq!(st.bad, bad, "n = {n}");
                    assert_eq!(st.max.len(), n.div_ceil(BLOCK));
                    if bad {
                        continue;
                    }
                    assert_eq!(st.row_max, ref_max(&v));
                    for (b, blk) in v.chunks(BLOCK).enumerate() {
                        let m = ref_max(blk);
                        assert_eq!(st.max[b], m, "n = {n}, block {b}");
                        let want: f64 = if m == f32::NEG_INFINITY {
                            0.0
                        } else {
                            blk.iter().map(|&x| (f64::from(x - m) * f64::from(s)).exp()).sum()
                        };
                        let got = f64::from(st.sum[b]);
                        assert!((got - want).abs() <= 2e-6 * want, "n = {n}, block {b}: {got} vs {want}");
                    }
                }
                if !bad {
                    let want: Vec<f32> = v.chunks(SUB).map(ref_max).collect();
                    assert_eq!(sts[0].sub_max, want);
                    assert_eq!(sts[1].sub_max, want);
                    assert!(plain.sub_max.is_empty());
                    // Whole-row mass against f64.
                    let m = ref_max(&v);
                    if m > f32::NEG_INFINITY {
                        let want: f64 = v.iter().map(|&x| (f64::from(x - m) * f64::from(s)).exp()).sum();
                        for st in &mut sts {
                            let total = st.weights(s);
                            assert!((total - want).abs() <= 2e-6 * want, "n = {n}: {total} vs {want}");
                            assert_eq!(st.weight.len(), n.div_ceil(BLOCK));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn block_stats_reuse_buffers() {
    let mut st = BlockStats::default();
    block_stats_with_sub_max(&row(5000, 1), 1.0, &mut st);
    block_stats(&row(100, 1), 1.0, &mut st);
    assert_eq!((st.max.len(), st.sum.len(), st.sub_max.len()), (1, 1, 0));
    assert_eq!(st.max[0], ref_max(&row(100, 1)));
}

#[test]
fn argmax_matches_reference() {
    for n in LENS {
        for mut v in variants(n) {
            // ties: the maximum twice
            if n > 10 && !ref_bad(&v) {
                let m = ref_max(&v) + 1.0;
                v[n / 3] = m;
                v[n - 2] = m;
            }
            let bad = ref_bad(&v);
            for (i, m, b) in [select::portable::argmax(&v), argmax(&v)] {
                assert_eq!(b, bad, "n = {n}");
                if !bad {
                    let want_m = ref_max(&v);
                    let want_i =
                        if want_m == f32::NEG_INFINITY { 0 } else { v.iter().position(|&x| x == want_m).unwrap() };
                    assert_eq!((i, m), (want_i, want_m), "n = {n}");
                }
            }
        }
    }
}

#[test]
fn gathers_match_reference() {
    for n in LENS {
        for v in variants(n) {
            for thr in [f32::NEG_INFINITY, -1.0, 6.5, 100.0] {
                let want: Vec<(u32, f32)> =
                    v.iter().enumerate().filter(|&(_, &x)| x >= thr).map(|(i, &x)| (i as u32 + 7, x)).collect();
                let mut a = Vec::new();
                select::portable::gather_ge(&v, 7, thr, &mut a);
                let mut b = Vec::new();
                gather_ge(&v, 7, thr, &mut b);
                assert_eq!(a, want, "n = {n}, thr = {thr}");
                assert_eq!(b, want, "n = {n}, thr = {thr}");
            }
            for ln_p in [-3.0f32, -0.5, 0.0] {
                let bad = ref_bad(&v);
                let m = ref_max(&v);
                let mut a = Vec::new();
                let (ma, ba) = select::portable::min_p_gather(&v, ln_p, &mut a);
                let mut b = Vec::new();
                let (mb, bb) = min_p_gather(&v, ln_p, &mut b);
                assert_eq!((ba, bb), (bad, bad));
                if bad {
                    continue;
                }
                assert_eq!((ma, mb), (m, m));
                let want: Vec<(u32, f32)> =
                    v.iter().enumerate().filter(|&(_, &x)| x >= m + ln_p).map(|(i, &x)| (i as u32, x)).collect();
                for got in [&mut a, &mut b] {
                    got.retain(|&(_, x)| x >= m + ln_p);
                    assert_eq!(*got, want, "n = {n}, ln_p = {ln_p}");
                }
            }
        }
    }
}

fn ref_top_k(v: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut all: Vec<(u32, f32)> = v.iter().enumerate().map(|(i, &x)| (i as u32, x)).collect();
    all.sort_by(desc);
    all.truncate(k);
    all
}

#[test]
fn top_k_matches_sort() {
    for n in LENS {
        for v in variants(n) {
            let bad = ref_bad(&v);
            for k in [1, 2, 40, 64, 100, 1000, n / 2, n - 1, n] {
                if k == 0 || k > n {
                    continue;
                }
                let mut out = Vec::new();
                assert_eq!(top_k(&v, k, &mut out), bad, "n = {n}");
                if bad {
                    continue;
                }
                assert_eq!(out, ref_top_k(&v, k), "n = {n}, k = {k}");
                // Both rescans, from the portable maxima.
                let mut maxima = Vec::new();
                stats::portable::sub_maxima(&v, &mut maxima);
                let thr = kth_largest(&maxima, k, &mut Vec::new());
                let mut kp = Vec::new();
                select::portable::rescan(&v, &maxima, thr, &mut kp);
                let mut kd = Vec::new();
                rescan(&v, &maxima, thr, &mut kd);
                assert_eq!(kp, kd);
            }
        }
    }
    // A constant row: every sub-block ties.
    let z = vec![0.5f32; 3000];
    let mut out = Vec::new();
    top_k(&z, 40, &mut out);
    assert_eq!(out, ref_top_k(&z, 40));
}

#[test]
fn kth_largest_matches_sort() {
    for n in [1usize, 2, 5, 40, 41, 100, 1002, 1003] {
        let m: Vec<f32> = row(n, 9).into_iter().map(|x| (x * 3.0).round()).collect();
        for k in [1, 2, 3, 40, 64, 500, 1001] {
            let got = kth_largest(&m, k, &mut Vec::new());
            if k >= n {
                assert_eq!(got, f32::NEG_INFINITY);
            } else {
                let mut s = m.clone();
                s.sort_by(|a, b| b.total_cmp(a));
                assert_eq!(got, s[k - 1], "n = {n}, k = {k}");
            }
        }
    }
}

#[test]
fn keys_order_like_desc() {
    let xs = [f32::NEG_INFINITY, -1.5, -0.0, 0.0, 1e-30, 2.0, 2.0, f32::MAX];
    for (i, &a) in xs.iter().enumerate() {
        assert_eq!(unkey(key(i as u32, a)), (i as u32, a));
        for (j, &b) in xs.iter().enumerate() {
            let by_key = key(j as u32, b).cmp(&key(i as u32, a));
            assert_eq!(by_key, desc(&(i as u32, a), &(j as u32, b)), "{a} {b}");
        }
    }
}

/// The `top_k` op's selection (moved from `cpu::ops::sort`) against a full sort by `order_key`.
fn reference_indices(x: &[f32], k: usize) -> Vec<i32> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| order_key(x[b]).cmp(&order_key(x[a])).then(a.cmp(&b)));
    idx[..k].iter().map(|&i| i as i32).collect()
}

#[test]
fn top_k_matches_full_sort_including_ties_and_adversarial_orders() {
    let mut seed = 12345u64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for &n in &[1usize, 5, 31, 32, 33, 1000, 5000, 8192, 70_000] {
        let cases: Vec<Vec<f32>> = vec![
            (0..n).map(|_| (rnd() % 1000) as f32 / 7.0).collect(),
            (0..n).map(|_| (rnd() % 5) as f32).collect(),
            (0..n).map(|i| i as f32).collect(),
            (0..n).map(|i| -(i as f32)).collect(),
            (0..n).map(|i| if i % 3 == 0 { -0.0 } else { 0.0 }).collect(),
            // Masked rows (a grammar's): a few finite entries, or none, among `-inf`, with +inf.
            (0..n).map(|i| if i % 4099 == 7 { (i % 13) as f32 } else { f32::NEG_INFINITY }).collect(),
            (0..n).map(|i| if i % 977 == 3 { -(i as f32) } else { f32::NEG_INFINITY }).collect(),
            (0..n).map(|i| if i == n / 2 { f32::INFINITY } else { f32::NEG_INFINITY }).collect(),
            vec![f32::NEG_INFINITY; n],
        ];
        for x in cases {
            for k in [1, 2, 40, n.min(100), n] {
                if k == 0 || k > n {
                    continue;
                }
                let mut out = vec![0; k];
                top_k_indices(&x, k, &mut Vec::new(), &mut out);
                assert_eq!(out, reference_indices(&x, k), "n = {n}, k = {k}");
            }
        }
    }
}

/// The masked top-k (a grammar's mask fused into the top-k) is the top-k of the masked row, on
/// the same rows under masks that allow everything, nothing, a few tokens, whole and mixed words,
/// and too few words; with NaN and +inf on allowed and banned tokens (the masked row's NaN).
#[test]
fn masked_top_k_is_the_top_k_of_the_masked_row() {
    let mut seed = 777u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for &n in &[1usize, 33, 1000, 8192, 70_000, 262_144] {
        let w = n.div_ceil(32);
        let masks: Vec<Vec<u32>> = vec![
            vec![u32::MAX; w],
            vec![0; w],
            (0..w).map(|_| rnd() as u32).collect(),
            (0..w).map(|i| if i % 97 == 5 { rnd() as u32 } else { 0 }).collect(),
            (0..w).map(|i| if i % 3 == 0 { u32::MAX } else { 0 }).collect(),
            (0..w / 2).map(|_| rnd() as u32).collect(),
        ];
        let rows: Vec<Vec<f32>> = vec![
            (0..n).map(|_| (rnd() % 1000) as f32 / 7.0 - 50.0).collect(),
            (0..n).map(|_| (rnd() % 5) as f32).collect(),
            (0..n).map(|i| if i % 4099 == 7 { (i % 13) as f32 } else { f32::NEG_INFINITY }).collect(),
            (0..n).map(|i| if i % 1001 == 9 { f32::NAN } else { (rnd() % 100) as f32 }).collect(),
            (0..n).map(|i| if i % 777 == 1 { f32::INFINITY } else { (rnd() % 100) as f32 }).collect(),
        ];
        for x in &rows {
            for bits in &masks {
                let mut m = vec![0.0; n];
                crate::token_mask::mask_vocab(x, bits, &mut m);
                for k in [1, 40, n.min(100), n] {
                    if k > n || (k == n && n > 10_000) {
                        continue;
                    }
                    let (mut got, mut want) = (vec![0; k], vec![0; k]);
                    top_k_indices(&m, k, &mut Vec::new(), &mut want);
                    crate::select::top_k_masked_indices(x, bits, k, &mut Vec::new(), &mut Vec::new(), &mut got);
                    assert_eq!(got, want, "n = {n}, k = {k}");
                }
            }
        }
    }
}

/// The `argmax` op's rule on special values: the first NaN (either sign) wins, then the first +inf;
/// -0.0 ties +0.0 (lower index first); an all `-inf` or empty row gives 0.
#[test]
fn argmax_index_follows_the_order_key() {
    for n in [1usize, 7, 1023, 1024, 1025, 5000] {
        for v in variants(n) {
            let want = (0..n).fold(0, |b, i| if order_key(v[i]) > order_key(v[b]) { i } else { b });
            assert_eq!(argmax_index(&v), want, "n = {n}");
        }
        let mut z = vec![f32::NEG_INFINITY; n];
        assert_eq!(argmax_index(&z), 0);
        z[n - 1] = 0.0;
        z[n / 2] = -0.0;
        assert_eq!(argmax_index(&z), n / 2, "n = {n}");
        z[n - 1] = -f32::NAN;
        z[0] = f32::INFINITY;
        assert_eq!(argmax_index(&z), n - 1, "n = {n}");
    }
    assert_eq!(argmax_index(&[]), 0);
}
