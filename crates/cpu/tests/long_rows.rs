//! The long-row fast paths of the row ops (block-wise softmax, block-maxima argmax and top_k, the
//! vector prefix scan) on rows spanning many blocks, with the special values that send a block or a
//! row to the exact slow path: all `-inf` blocks, NaN of both signs, +inf, ties across blocks.

mod harness;

use graph::{DType, Graph, NodeId};
use harness::{Harness, Rng, assert_close};

/// Runs a one-op graph on rows `[n, rows]` of `x` and returns the op's node with the harness.
fn run(n: usize, rows: usize, x: &[f32], op: impl Fn(&mut Graph, NodeId) -> NodeId) -> (Harness, NodeId) {
    let mut g = Graph::new();
    let xi = g.input("x", DType::F32, &[n, rows]).unwrap();
    let y = op(&mut g, xi);
    g.set_output(y);
    let mut h = Harness::new(g, 2);
    h.set_f32(xi, x);
    h.run().unwrap();
    (h, y)
}

fn softmax_ref(row: &[f32], scale: f32) -> Vec<f32> {
    let m = row.iter().map(|&v| f64::from(v) * f64::from(scale)).fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) * f64::from(scale) - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|&v| (v / s) as f32).collect()
}

/// The order of `kernels::key::order_key`: every NaN above +inf (NaNs tie), -0 = +0.
fn key(x: f32) -> (i32, f32) {
    if x.is_nan() { (2, 0.0) } else { (0, if x == 0.0 { 0.0 } else { x }) }
}

fn greater(a: f32, b: f32) -> bool {
    let (ka, kb) = (key(a), key(b));
    ka.0 > kb.0 || (ka.0 == kb.0 && ka.1 > kb.1)
}

fn top_k_ref(row: &[f32], k: usize) -> Vec<i32> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| {
        if greater(row[a], row[b]) {
            std::cmp::Ordering::Less
        } else if greater(row[b], row[a]) {
            std::cmp::Ordering::Greater
        } else {
            a.cmp(&b)
        }
    });
    idx[..k].iter().map(|&i| i as i32).collect()
}

#[test]
fn soft_max_blocks_masked_blocks_and_bad_rows() {
    let n = 3 * 4096 + 123;
    let mut rng = Rng::new(41);
    let mut rows: Vec<Vec<f32>> = Vec::new();
    // A plain row, one whose middle block is all -inf, one whose maximum sits in the last block far
    // above everything else (earlier blocks' weights underflow), one with a NaN, one with +inf.
    rows.push(rng.vec(n, -8.0, 8.0));
    let mut r = rng.vec(n, -8.0, 8.0);
    r[4096..8192].fill(f32::NEG_INFINITY);
    rows.push(r);
    let mut r = rng.vec(n, -8.0, 8.0);
    r[n - 5] = 200.0;
    rows.push(r);
    let mut r = rng.vec(n, -8.0, 8.0);
    r[9000] = f32::NAN;
    rows.push(r);
    let mut r = rng.vec(n, -8.0, 8.0);
    r[100] = f32::INFINITY;
    rows.push(r);
    let x: Vec<f32> = rows.concat();
    for scale in [1.0f32, 0.3, 2.5] {
        let (h, y) = run(n, rows.len(), &x, |g, xi| g.soft_max(xi, None, scale).unwrap());
        let got = h.f32(y);
        for (r, row) in rows.iter().enumerate() {
            let out = &got[r * n..(r + 1) * n];
            if r >= 3 {
                assert!(out.iter().all(|v| v.is_nan()), "row {r} (NaN or +inf) must be NaN");
                continue;
            }
            assert_close(&format!("soft_max row {r} scale {scale}"), out, &softmax_ref(row, scale), 1e-9, 2e-6);
            if r == 1 {
                assert!(out[4096..8192].iter().all(|&v| v == 0.0), "masked block must be exactly 0");
            }
        }
    }
}

#[test]
fn argmax_and_top_k_across_blocks_with_nan_inf_and_ties() {
    let n = 100_003;
    let mut rng = Rng::new(42);
    let base: Vec<f32> = rng.vec(n, -4.0, 4.0).iter().map(|v| (v * 4.0).round() / 4.0).collect();
    let mut cases: Vec<Vec<f32>> = vec![base.clone()];
    // Ties of the maximum in two blocks: the lower index must win.
    let mut r = base.clone();
    r[70_000] = 9.0;
    r[5_000] = 9.0;
    cases.push(r);
    // +inf late, a positive NaN later, a negative NaN early: the first NaN (any sign) ranks first.
    let mut r = base.clone();
    r[60_000] = f32::INFINITY;
    r[90_000] = f32::NAN;
    r[10] = -f32::NAN;
    cases.push(r);
    // A negative NaN (x86's default NaN) among negatives: it ranks first; -0.0/+0.0 next.
    let mut r: Vec<f32> = base.iter().map(|v| -v.abs() - 1.0).collect();
    r[3] = -f32::NAN;
    r[50_000] = -0.0;
    r[80_000] = 0.0;
    r[99_999] = f32::NEG_INFINITY;
    cases.push(r);
    let x: Vec<f32> = cases.concat();
    let (h, am) = run(n, cases.len(), &x, |g, xi| g.argmax(xi).unwrap());
    let got = h.i32(am);
    for (r, row) in cases.iter().enumerate() {
        assert_eq!(got[r], top_k_ref(row, 1)[0], "argmax row {r}");
    }
    for k in [1usize, 40, 200] {
        let (h, tk) = run(n, cases.len(), &x, |g, xi| g.top_k(xi, k).unwrap());
        let got = h.i32(tk);
        for (r, row) in cases.iter().enumerate() {
            assert_eq!(&got[r * k..(r + 1) * k], &top_k_ref(row, k)[..], "top_k({k}) row {r}");
        }
    }
}

#[test]
fn cumsum_long_rows() {
    let n = 262_147;
    let mut rng = Rng::new(43);
    let x = rng.vec(2 * n, -1.0, 1.0);
    let (h, y) = run(n, 2, &x, |g, xi| g.cumsum(xi).unwrap());
    let got = h.f32(y);
    for (r, row) in x.chunks(n).enumerate() {
        let mut acc = 0.0f64;
        let mut want = Vec::with_capacity(n);
        for &v in row {
            acc += f64::from(v);
            want.push(acc as f32);
        }
        // Partial sums of +-1 terms wander to a few hundred; f32 rounding along 262k additions.
        assert_close(&format!("cumsum row {r}"), &got[r * n..(r + 1) * n], &want, 2e-3, 1e-5);
    }
}
