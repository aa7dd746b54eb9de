//! Hand-computed cases for the reference interpreter: every expected number is written out here.

use super::*;
use crate::values::encode;
use graph::{CompareOp, SortOrder};

fn f32s(v: &[f64]) -> Vec<u8> {
    encode(DType::F32, v)
}

fn i32s(v: &[f64]) -> Vec<u8> {
    encode(DType::I32, v)
}

#[test]
fn views_strides_and_offsets() {
    // x = [[0, 1, 2], [3, 4, 5]] (ne = [3, 2]); transpose then cont gives [[0, 3], [1, 4], [2, 5]].
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[3, 2]).unwrap();
    let t = g.transpose(x).unwrap();
    let c = g.cont(t).unwrap();
    // A window of one element per row starting at column 1: [1, 4].
    let v = g.view(x, &[1, 2], &[4, 12], 4).unwrap();
    let vc = g.scale_bias(v, 2.0, 1.0).unwrap();
    // reshape to [6] and a view of it at byte offset 8: elements 2 and 3.
    let flat = g.reshape(x, &[6]).unwrap();
    let odd = g.view(flat, &[2], &[4], 8).unwrap();
    let neg = g.neg(odd).unwrap();
    let xs = f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let out = run(&g, &[(x, xs)], &[c, t, vc, neg]).unwrap();
    assert_eq!(out[0], [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(out[1], [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(out[2], [3.0, 9.0]);
    assert_eq!(out[3], [-2.0, -3.0]);
}

#[test]
fn broadcasting_and_where() {
    // a [2, 2] + b [2, 1]: b's row repeats; a [2,2] * c [1] (a scalar).
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2, 2]).unwrap();
    let b = g.input("b", DType::F32, &[2, 1]).unwrap();
    let c = g.input("c", DType::F32, &[1]).unwrap();
    let s = g.add(a, b).unwrap();
    let m = g.mul(a, c).unwrap();
    let gt = g.gt(a, c).unwrap();
    let w = g.where_(gt, a, b).unwrap();
    let ins = [(a, f32s(&[1.0, 2.0, 3.0, 4.0])), (b, f32s(&[10.0, 20.0])), (c, f32s(&[2.5]))];
    let out = run(&g, &ins, &[s, m, gt, w]).unwrap();
    assert_eq!(out[0], [11.0, 22.0, 13.0, 24.0]);
    assert_eq!(out[1], [2.5, 5.0, 7.5, 10.0]);
    assert_eq!(out[2], [0.0, 0.0, 1.0, 1.0]);
    assert_eq!(out[3], [10.0, 20.0, 3.0, 4.0]);
}

#[test]
fn compare_is_false_for_nan_and_i32_works() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[3]).unwrap();
    let e = g.compare(CompareOp::Eq, a, a).unwrap();
    let i = g.input("i", DType::I32, &[3]).unwrap();
    let j = g.input("j", DType::I32, &[1]).unwrap();
    let ge = g.ge(i, j).unwrap();
    let ins = [(a, f32s(&[1.0, f64::NAN, -0.0])), (i, i32s(&[1.0, 5.0, 7.0])), (j, i32s(&[5.0]))];
    let out = run(&g, &ins, &[e, ge]).unwrap();
    assert_eq!(out[0], [1.0, 0.0, 1.0]);
    assert_eq!(out[1], [0.0, 1.0, 1.0]);
}

#[test]
fn cast_rules_and_16_bit_rounding() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[5]).unwrap();
    let to_i = g.cast(x, DType::I32).unwrap();
    let to_h = g.cast(x, DType::F16).unwrap();
    let to_b = g.cast(x, DType::BF16).unwrap();
    let i = g.input("i", DType::I32, &[2]).unwrap();
    let i_to_f = g.cast(i, DType::F32).unwrap();
    // f16 scale: 1.0 * 1.0009765625 rounds to f16 1.0009765625 (exact), 3 * (1 + 2^-11) ties to even.
    let h = g.input("h", DType::F16, &[1]).unwrap();
    let hs = g.scale(h, 1.0 + 1.0 / 2048.0).unwrap();
    let ins = [
        (x, f32s(&[-2.75, 3.5, 1e10, f64::NAN, 70000.0])),
        (i, i32s(&[16_777_217.0, -3.0])),
        (h, encode(DType::F16, &[3.0])),
    ];
    let out = run(&g, &ins, &[to_i, to_h, to_b, i_to_f, hs]).unwrap();
    assert_eq!(out[0], [-2.0, 3.0, 2_147_483_647.0, 0.0, 70000.0]);
    assert_eq!(out[1][..2], [-2.75, 3.5]);
    assert_eq!(out[1][2], f64::INFINITY);
    assert!(out[1][3].is_nan());
    assert_eq!(out[1][4], f64::INFINITY);
    // bf16 keeps 8 significant bits: 70000 = 0x1.1170p16 -> 0x1.12p16 = 70144.
    assert_eq!(out[2][4], 70144.0);
    // i32 -> f32 rounds to nearest (even): 2^24 + 1 -> 2^24.
    assert_eq!(out[3], [16_777_216.0, -3.0]);
    // 3 * (1 + 2^-11) = 3 + 3 * 2^-11; f16 spacing at 3 is 2^-9: 3 + 1.5 * 2^-10 rounds to 3 + 2^-9.
    assert_eq!(out[4], [3.0 + 2f64.powi(-9)]);
}

#[test]
fn get_rows_set_rows_in_place_and_scatter_add() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2, 3]).unwrap();
    let ids = g.input("ids", DType::I32, &[2]).unwrap();
    let got = g.get_rows(a, ids).unwrap();
    let vals = g.input("vals", DType::F32, &[2, 2]).unwrap();
    let dst = g.param("dst", DType::F16, &[2, 3]).unwrap();
    let upd = g.set_rows(dst, vals, ids).unwrap();
    let after = g.cont(upd).unwrap();
    let base = g.input("base", DType::F32, &[4, 2]).unwrap();
    let sids = g.input("sids", DType::I32, &[3, 2]).unwrap();
    let one = g.fill(DType::F32, &[1], 1.0).unwrap();
    let counts = g.scatter_add(base, sids, one).unwrap();
    let ins = [
        (a, f32s(&[0.0, 1.0, 10.0, 11.0, 20.0, 21.0])),
        (ids, i32s(&[2.0, 0.0])),
        (vals, f32s(&[5.0, 6.0, 7.0, 0.1])),
        (dst, encode(DType::F16, &[1.0; 6])),
        (base, f32s(&[0.0; 8])),
        (sids, i32s(&[1.0, 1.0, -1.0, 3.0, 4.0, 0.0])),
    ];
    let out = run(&g, &ins, &[got, after, counts]).unwrap();
    assert_eq!(out[0], [20.0, 21.0, 0.0, 1.0]);
    // Row 2 <- [5, 6], row 0 <- [7, 0.1 rounded to f16].
    assert_eq!(out[1], [7.0, f16::from_f32(0.1).to_f64(), 1.0, 1.0, 5.0, 6.0]);
    // Row 0 counts ids 1, 1 (-1 ignored); row 1 counts 3 and 0 (4 is out of range).
    assert_eq!(out[2], [0.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0]);

    let bad = [(ids, i32s(&[3.0, 0.0]))];
    let mut ins2: Vec<_> = ins.to_vec();
    ins2[1] = bad[0].clone();
    let err = run(&g, &ins2, &[got]).unwrap_err();
    assert!(err.to_string().contains("get_rows") && err.to_string().contains("outside 0..3"), "{err}");
}

use graph::f16;

#[test]
fn mul_mat_with_batch_broadcast_by_division() {
    // a [2, 1, 2]: batch 0 row [1, 0], batch 1 row [0, 1]; b [2, 1, 4]: four batches.
    // ggml: a batch = b batch / 2, so b batches 0, 1 use a's batch 0 and 2, 3 use batch 1.
    let mut g = Graph::new();
    let a = g.param("a", DType::F16, &[2, 1, 2]).unwrap();
    let b = g.input("b", DType::F32, &[2, 1, 4]).unwrap();
    let y = g.mul_mat(a, b).unwrap();
    let ins = [(a, encode(DType::F16, &[1.0, 0.0, 0.0, 1.0])), (b, f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]))];
    let out = run(&g, &ins, &[y]).unwrap();
    assert_eq!(out[0], [1.0, 3.0, 6.0, 8.0]);

    // out[i, j] = sum_k a[k, i] * b[k, j]: a = [[1, 2], [3, 4]] (rows), b = [[1, 1], [0, 2]].
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[2, 2]).unwrap();
    let b = g.input("b", DType::F32, &[2, 2]).unwrap();
    let y = g.mul_mat(a, b).unwrap();
    let out = run(&g, &[(a, f32s(&[1.0, 2.0, 3.0, 4.0])), (b, f32s(&[1.0, 1.0, 0.0, 2.0]))], &[y]).unwrap();
    assert_eq!(out[0], [3.0, 7.0, 4.0, 8.0]);
}

#[test]
fn soft_max_with_scale_mask_and_all_neg_inf_row() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[2, 2, 2]).unwrap();
    let m = g.input("m", DType::F32, &[2, 3]).unwrap();
    let y = g.soft_max(x, Some(m), 0.5).unwrap();
    let ln3 = 3f64.ln();
    let ninf = f64::NEG_INFINITY;
    let xs = f32s(&[0.0, 2.0 * ln3, 4.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
    // mask rows: [0, 0], [-inf, 0], [9, 9] (unused); broadcast over ne[2].
    let ms = f32s(&[0.0, 0.0, ninf, 0.0, 9.0, 9.0]);
    let out = run(&g, &[(x, xs), (m, ms)], &[y]).unwrap();
    let v = &out[0];
    assert!((v[0] - 0.25).abs() < 1e-7 && (v[1] - 0.75).abs() < 1e-7);
    assert_eq!(&v[2..8], &[0.0, 1.0, 0.5, 0.5, 0.0, 1.0]);

    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[3]).unwrap();
    let y = g.soft_max(x, None, 1.0).unwrap();
    let out = run(&g, &[(x, f32s(&[ninf; 3]))], &[y]).unwrap();
    assert!(out[0].iter().all(|v| v.is_nan()));
}

#[test]
fn orderings_ties_and_reductions() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[5, 2]).unwrap();
    let am = g.argmax(x).unwrap();
    let asc = g.argsort(x, SortOrder::Asc).unwrap();
    let desc = g.argsort(x, SortOrder::Desc).unwrap();
    let top = g.top_k(x, 2).unwrap();
    let sum = g.sum_rows(x).unwrap();
    let max = g.max_rows(x).unwrap();
    let cs = g.cumsum(x).unwrap();
    let xs = f32s(&[1.0, 3.0, 3.0, 0.0, 1.0, -1.0, f64::NAN, 2.0, 2.0, 2.0]);
    let out = run(&g, &[(x, xs)], &[am, asc, desc, top, sum, max, cs]).unwrap();
    assert_eq!(out[0][0], 1.0);
    assert_eq!(out[1][..5], [3.0, 0.0, 4.0, 1.0, 2.0]);
    assert_eq!(out[2][..5], [1.0, 2.0, 0.0, 4.0, 3.0]);
    assert_eq!(out[3][..2], [1.0, 2.0]);
    assert_eq!(out[4][0], 8.0);
    assert!(out[4][1].is_nan());
    assert_eq!(out[5][0], 3.0);
    assert!(out[5][1].is_nan());
    assert_eq!(out[6][..5], [1.0, 4.0, 7.0, 7.0, 8.0]);
}

#[test]
fn fill_arange_rms_norm_and_rope() {
    let mut g = Graph::new();
    let f = g.fill(DType::BF16, &[2], 0.1).unwrap();
    let ar = g.arange(DType::I32, &[3, 2], 5.0, -2.0).unwrap();
    let x = g.input("x", DType::F16, &[2]).unwrap();
    let rn = g.rms_norm(x, 0.0).unwrap();
    let q = g.input("q", DType::F32, &[2, 1, 2]).unwrap();
    let pos = g.input("pos", DType::I32, &[2]).unwrap();
    let r = g.rope(q, pos, 2, graph::RopeMode::Normal, 10000.0, 0.5).unwrap();
    let ins = [(x, encode(DType::F16, &[3.0, 4.0])), (q, f32s(&[1.0, 0.0, 0.0, 2.0])), (pos, i32s(&[0.0, 2.0]))];
    let out = run(&g, &ins, &[f, ar, rn, r]).unwrap();
    assert_eq!(out[0], [graph::bf16::from_f32(0.1).to_f64(); 2]);
    assert_eq!(out[1], [5.0, 3.0, 1.0, 5.0, 3.0, 1.0]);
    let s = 12.5f64.sqrt();
    assert_eq!(out[2], [f64::from((3.0 / s) as f32), f64::from((4.0 / s) as f32)]);
    // token 0 at pos 0 unchanged; token 1 at pos 2 * 0.5 = theta 1: (0, 2) -> (-2 sin 1, 2 cos 1).
    assert_eq!(out[3][..2], [1.0, 0.0]);
    assert_eq!(out[3][2], f64::from((-2.0 * 1f64.sin()) as f32));
    assert_eq!(out[3][3], f64::from((2.0 * 1f64.cos()) as f32));
}

#[test]
fn random_uniform_follows_philox_per_row_keys() {
    let mut g = Graph::new();
    let keys = g.input("keys", DType::I32, &[4, 2]).unwrap();
    let u = g.random_uniform(keys, 3, 1).unwrap();
    // Row 0: seed = 7 + (1 << 32), step 5; row 1: seed = 0xffff_ffff (lo word -1), step 2^32.
    let ks = i32s(&[7.0, 1.0, 5.0, 0.0, -1.0, 0.0, 0.0, 1.0]);
    let out = run(&g, &[(keys, ks)], &[u]).unwrap();
    let s = philox::stream::element(1, 0);
    assert_eq!(out[0][0], f64::from(philox::uniform(7 + (1 << 32), 5, s)));
    assert_eq!(out[0][2], f64::from(philox::uniform(7 + (1 << 32), 5, s + 2)));
    assert_eq!(out[0][4], f64::from(philox::uniform(0xffff_ffff, 1 << 32, s + 1)));
}

#[test]
fn missing_and_mis_sized_inputs_are_errors() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4]).unwrap();
    let y = g.neg(x).unwrap();
    let e = run(&g, &[], &[y]).unwrap_err();
    assert_eq!(e.to_string(), "reference: input node #0 (x) was given no data");
    let e = run(&g, &[(x, vec![0; 12])], &[y]).unwrap_err();
    assert_eq!(e.to_string(), "reference: input node #0 f32 [4] needs 16 bytes, got 12");
}
