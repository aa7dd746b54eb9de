//! Every op family against a naive reference written here (scalar loops, f64 where it matters), on
//! several shapes including non-multiple-of-block sizes, views and broadcasts, each float dtype, and
//! the run-time errors. Runs through the test harness (one buffer per tensor, no scheduler).
#![allow(clippy::needless_range_loop)]

mod harness;

use graph::{BinaryOp, CompareOp, DType, Graph, NodeId, RopeMode, SortOrder, UnaryOp, bf16, f16};
use harness::{Harness, Rng, assert_close, round_to};
use sched::BackendError;

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// ggml-order index helpers for a shape.
fn idx(ne: [usize; 4], i: usize) -> [usize; 4] {
    [i % ne[0], (i / ne[0]) % ne[1], (i / (ne[0] * ne[1])) % ne[2], i / (ne[0] * ne[1] * ne[2])]
}
fn flat(ne: [usize; 4], i: [usize; 4]) -> usize {
    i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))
}
fn bcast(ne: [usize; 4], i: [usize; 4]) -> usize {
    flat(ne, [i[0] % ne[0], i[1] % ne[1], i[2] % ne[2], i[3] % ne[3]])
}

fn input(g: &mut Graph, name: &str, dt: DType, ne: &[usize]) -> NodeId {
    g.input(name, dt, ne).unwrap()
}

/// Values as the input tensor holds them (rounded to its dtype).
fn fill_input(h: &mut Harness, id: NodeId, v: &[f32]) -> Vec<f32> {
    h.set_f32(id, v);
    let dt = h.g.node(id).dtype;
    v.iter().map(|&x| round_to(dt, x)).collect()
}

#[test]
fn cont_and_cast_every_dtype_pair_from_a_transposed_view() {
    for from in DType::ALL {
        for to in DType::ALL {
            let mut g = Graph::new();
            let x = input(&mut g, "x", from, &[6, 5, 2]);
            let t = g.transpose(x).unwrap(); // [5, 6, 2], strided
            let c = g.cast(t, to).unwrap();
            let k = g.cont(t).unwrap();
            let mut h = Harness::new(g, 2);
            let mut rng = Rng::new(1);
            let mut v: Vec<f32> = rng.vec(60, -300.0, 300.0);
            v[3] = 3.7e9;
            v[4] = -2.5;
            v[5] = f32::NAN;
            if from == DType::I32 {
                v.iter_mut().for_each(|x| *x = if x.is_nan() { 7.0 } else { x.clamp(-2e9, 2e9).trunc() });
                v[7] = 16_777_217.0; // not representable in f32: i32 -> f32 must round once
            }
            let xs: Vec<f32> = if from == DType::I32 {
                let ints: Vec<i32> = v.iter().map(|&x| x as i32).collect();
                h.set_i32(x, &ints);
                ints.iter().map(|&i| i as f32).collect()
            } else {
                fill_input(&mut h, x, &v)
            };
            h.run().unwrap();
            let tn = [5, 6, 2, 1];
            let src_at = |i: usize| {
                let [a, b, c2, _] = idx(tn, i);
                flat([6, 5, 2, 1], [b, a, c2, 0])
            };
            let want_c: Vec<f32> = (0..60)
                .map(|i| {
                    let s = xs[src_at(i)];
                    match (from, to) {
                        (DType::I32, DType::I32) => s,
                        (DType::I32, DType::F16) => f16::from_f64(s as i32 as f64).to_f32(),
                        (DType::I32, DType::BF16) => bf16::from_f64(s as i32 as f64).to_f32(),
                        (DType::I32, DType::F32) => (s as i32) as f32,
                        (_, DType::I32) => (s as i32) as f32,
                        (_, to) => round_to(to, s),
                    }
                })
                .collect();
            let got_c = if to == DType::I32 { h.i32(c).iter().map(|&i| i as f32).collect() } else { h.f32(c) };
            assert_close(&format!("cast {from}->{to}"), &got_c, &want_c, 0.0, 0.0);
            if from == DType::I32 {
                let ints: Vec<i32> = (0..60).map(|i| xs[src_at(i)] as i32).collect();
                assert_eq!(h.i32(k), ints);
            } else {
                let want_k: Vec<f32> = (0..60).map(|i| xs[src_at(i)]).collect();
                assert_close(&format!("cont {from}"), &h.f32(k), &want_k, 0.0, 0.0);
            }
        }
    }
}

fn unary_ref(op: UnaryOp, x: f32) -> f32 {
    let x = f64::from(x);
    (match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqr => x * x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Gelu => 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh()),
    }) as f32
}

#[test]
fn unary_scale_clamp_every_float_dtype_on_a_permuted_view() {
    for dt in FLOATS {
        let mut g = Graph::new();
        let x = input(&mut g, "x", dt, &[7, 3, 2]);
        let p = g.permute(x, [1, 0, 2, 3]).unwrap(); // [3, 7, 2]
        let outs: Vec<(UnaryOp, NodeId)> = UnaryOp::ALL.iter().map(|&op| (op, g.unary(op, p).unwrap())).collect();
        let s = g.scale_bias(p, -1.5, 0.25).unwrap();
        let c = g.clamp(p, -0.5, 1.25).unwrap();
        let mut h = Harness::new(g, 3);
        let mut v = Rng::new(2).vec(42, -3.0, 3.0);
        v[0] = 0.0;
        v[1] = -0.0;
        let xs = fill_input(&mut h, x, &v);
        h.run().unwrap();
        let pn = [3, 7, 2, 1];
        let src = |i: usize| {
            let [a, b, c2, _] = idx(pn, i);
            xs[flat([7, 3, 2, 1], [b, a, c2, 0])]
        };
        // Results are stored in the source dtype.
        let tol = if dt == DType::F32 { 2e-6 } else { 8e-3 };
        for (op, id) in outs {
            let want: Vec<f32> = (0..42).map(|i| round_to(dt, unary_ref(op, src(i)))).collect();
            assert_close(&format!("{} {dt}", op.name()), &h.f32(id), &want, tol, tol);
        }
        let want: Vec<f32> = (0..42).map(|i| round_to(dt, src(i) * -1.5 + 0.25)).collect();
        assert_close("scale", &h.f32(s), &want, tol, tol);
        let want: Vec<f32> = (0..42).map(|i| round_to(dt, src(i).clamp(-0.5, 1.25))).collect();
        assert_close("clamp", &h.f32(c), &want, 0.0, 0.0);
    }
}

#[test]
fn binary_compare_where_with_broadcasts_and_mixed_dtypes() {
    let ane = [5, 4, 3, 2];
    let bshapes: [[usize; 4]; 5] = [[5, 4, 3, 2], [5, 1, 1, 1], [1, 4, 1, 2], [1, 1, 1, 1], [5, 2, 3, 1]];
    let mut rng = Rng::new(3);
    for (t, bne) in bshapes.iter().enumerate() {
        let (da, db) = (FLOATS[t % 3], FLOATS[(t + 1) % 3]);
        let mut g = Graph::new();
        let a = input(&mut g, "a", da, &ane);
        let b = input(&mut g, "b", db, bne);
        let m = input(&mut g, "m", DType::F32, bne);
        let bin: Vec<(BinaryOp, NodeId)> = BinaryOp::ALL.iter().map(|&op| (op, g.binary(op, a, b).unwrap())).collect();
        let cmp: Vec<(CompareOp, NodeId)> =
            CompareOp::ALL.iter().map(|&op| (op, g.compare(op, a, b).unwrap())).collect();
        let a2 = g.cast(b, da).unwrap();
        let _ = a2;
        let w = g.where_(m, a, a).unwrap();
        let mut h = Harness::new(g, 2);
        let na: usize = ane.iter().product();
        let nb: usize = bne.iter().product();
        let xa =
            fill_input(&mut h, a, &rng.vec(na, -2.0, 2.0).iter().map(|x| (x * 4.0).round() / 4.0).collect::<Vec<_>>());
        let mut bv: Vec<f32> = rng.vec(nb, -2.0, 2.0).iter().map(|x| (x * 4.0).round() / 4.0).collect();
        bv[0] = 0.0;
        let xb = fill_input(&mut h, b, &bv);
        let mv: Vec<f32> = (0..nb).map(|i| (i % 2) as f32).collect();
        h.set_f32(m, &mv);
        h.run().unwrap();
        let tol = if da == DType::F32 { 1e-6 } else { 8e-3 };
        for (op, id) in bin {
            let want: Vec<f32> = (0..na)
                .map(|i| {
                    let (x, y) = (xa[i], xb[bcast(*bne, idx(ane, i))]);
                    round_to(
                        da,
                        match op {
                            BinaryOp::Add => x + y,
                            BinaryOp::Sub => x - y,
                            BinaryOp::Mul => x * y,
                            BinaryOp::Div => x / y,
                        },
                    )
                })
                .collect();
            assert_close(&format!("{} {da} {db} {bne:?}", op.name()), &h.f32(id), &want, tol, tol);
        }
        for (op, id) in cmp {
            let want: Vec<f32> = (0..na)
                .map(|i| {
                    let (x, y) = (xa[i], xb[bcast(*bne, idx(ane, i))]);
                    let r = match op {
                        CompareOp::Ge => x >= y,
                        CompareOp::Gt => x > y,
                        CompareOp::Eq => x == y,
                    };
                    f32::from(u8::from(r))
                })
                .collect();
            assert_close(op.name(), &h.f32(id), &want, 0.0, 0.0);
        }
        let want: Vec<f32> = (0..na).map(|i| xa[i]).collect();
        assert_close("where same", &h.f32(w), &want, 0.0, 0.0);
    }
}

#[test]
fn compare_and_where_on_i32() {
    let mut g = Graph::new();
    let a = input(&mut g, "a", DType::I32, &[6, 3]);
    let b = input(&mut g, "b", DType::I32, &[1, 3]);
    let m = input(&mut g, "m", DType::F32, &[6, 1]);
    let ge = g.ge(a, b).unwrap();
    let eq = g.compare(CompareOp::Eq, a, b).unwrap();
    let bb = g.cont(b).unwrap();
    let _ = bb;
    let fb = input(&mut g, "fb", DType::I32, &[6, 3]);
    let w = g.where_(m, a, fb).unwrap();
    let mut h = Harness::new(g, 1);
    let av: Vec<i32> = (0..18).map(|i| (i * 7919 % 11) - 5 + 16_777_216 * (i % 2)).collect();
    let bv = vec![0, 16_777_217, -3];
    let mv: Vec<f32> = vec![1.0, 0.0, -0.5, 0.0, 2.0, f32::NAN];
    let fv: Vec<i32> = (0..18).map(|i| 1000 + i).collect();
    h.set_i32(a, &av);
    h.set_i32(b, &bv);
    h.set_f32(m, &mv);
    h.set_i32(fb, &fv);
    h.run().unwrap();
    let want_ge: Vec<f32> = (0..18).map(|i| f32::from(u8::from(av[i] >= bv[i / 6]))).collect();
    let want_eq: Vec<f32> = (0..18).map(|i| f32::from(u8::from(av[i] == bv[i / 6]))).collect();
    assert_eq!(h.f32(ge), want_ge);
    assert_eq!(h.f32(eq), want_eq);
    // NaN != 0, so NaN selects `a`.
    let want_w: Vec<i32> = (0..18).map(|i| if mv[i % 6] != 0.0 { av[i] } else { fv[i] }).collect();
    assert_eq!(h.i32(w), want_w);
}

#[test]
fn fill_and_arange() {
    let mut g = Graph::new();
    let fs: Vec<(DType, NodeId)> = DType::ALL.iter().map(|&d| (d, g.fill(d, &[3, 2], -7.0).unwrap())).collect();
    let ninf = g.fill(DType::F32, &[2], f32::NEG_INFINITY).unwrap();
    let af = g.arange(DType::F32, &[5, 2], 1.5, -0.25).unwrap();
    let ai = g.arange(DType::I32, &[4, 3], -2.0, 3.0).unwrap();
    let mut h = Harness::new(g, 1);
    h.run().unwrap();
    for (_, id) in fs {
        assert_eq!(h.f32(id), vec![-7.0; 6]);
    }
    assert_eq!(h.f32(ninf), vec![f32::NEG_INFINITY; 2]);
    let want: Vec<f32> = (0..10).map(|i| 1.5 - 0.25 * (i % 5) as f32).collect();
    assert_eq!(h.f32(af), want);
    let want: Vec<i32> = (0..12).map(|i| -2 + 3 * (i % 4)).collect();
    assert_eq!(h.i32(ai), want);
}

#[test]
fn get_rows_every_dtype_with_batches() {
    for dt in DType::ALL {
        let ane = [4, 6, 2, 1];
        let mut g = Graph::new();
        let a = input(&mut g, "a", dt, &ane);
        let ids = input(&mut g, "ids", DType::I32, &[3, 2]);
        let r = g.get_rows(a, ids).unwrap();
        let mut h = Harness::new(g, 2);
        let v: Vec<f32> = (0..48).map(|i| i as f32 * 1.5 - 20.0).collect();
        let xs = fill_input(&mut h, a, &v);
        let idv = vec![5, 0, 5, 1, 1, 3];
        h.set_i32(ids, &idv);
        h.run().unwrap();
        let mut want = Vec::new();
        for i2 in 0..2 {
            for j in 0..3 {
                let row = idv[j + 3 * i2] as usize;
                for i0 in 0..4 {
                    let x = xs[flat(ane, [i0, row, i2, 0])];
                    want.push(if dt == DType::I32 { x.trunc() } else { x });
                }
            }
        }
        assert_close(&format!("get_rows {dt}"), &h.f32(r), &want, 0.0, 0.0);
    }
}

fn expect_compute_err(r: Result<(), BackendError>, op: &str, node: NodeId) {
    match r {
        Err(BackendError::Compute { op: o, node: n, msg, .. }) => {
            assert_eq!(o, op);
            assert_eq!(n, node);
            assert!(msg.contains("out of range"), "{msg}");
        }
        other => panic!("expected a compute error from {op}, got {other:?}"),
    }
}

#[test]
fn out_of_range_ids_are_errors_naming_node_and_op() {
    let mut g = Graph::new();
    let a = input(&mut g, "a", DType::F32, &[4, 6]);
    let ids = input(&mut g, "ids", DType::I32, &[2]);
    let r = g.get_rows(a, ids).unwrap();
    let mut h = Harness::new(g, 1);
    for bad in [6, -1, i32::MAX] {
        h.set_i32(ids, &[0, bad]);
        expect_compute_err(h.run(), "get_rows", r);
    }
    let mut g = Graph::new();
    let dst = input(&mut g, "dst", DType::F32, &[4, 6]);
    let vals = input(&mut g, "vals", DType::F32, &[4, 2]);
    let ids = input(&mut g, "ids", DType::I32, &[2]);
    let s = g.set_rows(dst, vals, ids).unwrap();
    let mut h = Harness::new(g, 1);
    h.set_f32(dst, &[1.0; 24]);
    h.set_i32(ids, &[1, 6]);
    expect_compute_err(h.run(), "set_rows", s);
    // Nothing was written before the error.
    assert_eq!(h.f32(dst), vec![1.0; 24]);
}

#[test]
fn set_rows_converts_and_last_duplicate_wins() {
    for (dd, vd) in
        [(DType::F32, DType::F32), (DType::F16, DType::F32), (DType::F32, DType::BF16), (DType::I32, DType::I32)]
    {
        let mut g = Graph::new();
        let dst = input(&mut g, "dst", dd, &[3, 5, 2]);
        let vals = input(&mut g, "vals", vd, &[3, 2, 2]);
        let ids = input(&mut g, "ids", DType::I32, &[2, 2]);
        let s = g.set_rows(dst, vals, ids).unwrap();
        let after = g.scale(s, 1.0);
        let mut h = Harness::new(g, 2);
        let d0: Vec<f32> = (0..30).map(|i| i as f32).collect();
        let xd = fill_input(&mut h, dst, &d0);
        let v: Vec<f32> = (0..12).map(|i| 100.0 + i as f32 * 0.3).collect();
        let xv: Vec<f32> = if vd == DType::I32 {
            let iv: Vec<i32> = v.iter().map(|&x| x as i32).collect();
            h.set_i32(vals, &iv);
            iv.iter().map(|&x| x as f32).collect()
        } else {
            fill_input(&mut h, vals, &v)
        };
        let idv = vec![4, 4, 0, 2];
        h.set_i32(ids, &idv);
        h.run().unwrap();
        let mut want = xd.clone();
        for i2 in 0..2 {
            for j in 0..2 {
                let row = idv[j + 2 * i2] as usize;
                for i0 in 0..3 {
                    want[flat([3, 5, 2, 1], [i0, row, i2, 0])] = round_to(dd, xv[flat([3, 2, 2, 1], [i0, j, i2, 0])]);
                }
            }
        }
        assert_close(&format!("set_rows {vd}->{dd}"), &h.f32(s), &want, 0.0, 0.0);
        assert_close("storage", &h.f32(dst), &want, 0.0, 0.0);
        if let Ok(after) = after {
            assert_close("reader after set_rows", &h.f32(after), &want, 0.0, 0.0);
        }
    }
}

#[test]
fn scatter_add_skips_padding_and_accepts_a_constant() {
    let mut g = Graph::new();
    let base = input(&mut g, "base", DType::F32, &[5, 3]);
    let ids = input(&mut g, "ids", DType::I32, &[4, 3]);
    let vals = input(&mut g, "vals", DType::F32, &[4, 3]);
    let one = input(&mut g, "one", DType::F32, &[1]);
    let s1 = g.scatter_add(base, ids, vals).unwrap();
    let s2 = g.scatter_add(base, ids, one).unwrap();
    let mut h = Harness::new(g, 1);
    let bv: Vec<f32> = (0..15).map(|i| i as f32).collect();
    let idv = vec![0, 0, -1, 4, 2, 5, 1, 2, -1, -1, -1, 3];
    let vv: Vec<f32> = (0..12).map(|i| (i + 1) as f32 * 0.5).collect();
    h.set_f32(base, &bv);
    h.set_i32(ids, &idv);
    h.set_f32(vals, &vv);
    h.set_f32(one, &[1.0]);
    h.run().unwrap();
    let (mut w1, mut w2) = (bv.clone(), bv.clone());
    for row in 0..3 {
        for j in 0..4 {
            let id = idv[row * 4 + j];
            if (0..5).contains(&id) {
                w1[row * 5 + id as usize] += vv[row * 4 + j];
                w2[row * 5 + id as usize] += 1.0;
            }
        }
    }
    assert_eq!(h.f32(s1), w1);
    assert_eq!(h.f32(s2), w2);
}

fn mul_mat_ref(a: &[f32], ane: [usize; 4], b: &[f32], bne: [usize; 4]) -> Vec<f32> {
    let (k, m, n) = (ane[0], ane[1], bne[1]);
    let (r2, r3) = (bne[2] / ane[2], bne[3] / ane[3]);
    let mut out = Vec::new();
    for i3 in 0..bne[3] {
        for i2 in 0..bne[2] {
            for j in 0..n {
                for i in 0..m {
                    let mut s = 0.0f64;
                    for t in 0..k {
                        s +=
                            f64::from(a[flat(ane, [t, i, i2 / r2, i3 / r3])]) * f64::from(b[flat(bne, [t, j, i2, i3])]);
                    }
                    out.push(s as f32);
                }
            }
        }
    }
    out
}

#[test]
fn mul_mat_odd_sizes_dtypes_broadcast_and_strided_b() {
    let cases: [([usize; 4], [usize; 4]); 6] = [
        ([37, 19, 1, 1], [37, 1, 1, 1]),
        ([64, 33, 1, 1], [64, 5, 1, 1]),
        ([13, 4, 1, 1], [13, 2, 1, 1]),
        ([40, 9, 2, 1], [40, 3, 4, 1]),
        ([128, 70, 1, 2], [128, 7, 3, 2]),
        ([8, 1, 1, 1], [8, 1, 1, 1]),
    ];
    let mut rng = Rng::new(4);
    for (ane, bne) in cases {
        for dt in FLOATS {
            let mut g = Graph::new();
            let a = input(&mut g, "a", dt, &ane);
            // b as a view: every other row of a bigger tensor (contiguous rows, strided outer dims).
            let big = input(&mut g, "big", DType::F32, &[bne[0], bne[1] * 2, bne[2], bne[3]]);
            let e = 4 * bne[0];
            let b = g.view(big, &bne, &[4, 2 * e, 2 * e * bne[1], 2 * e * bne[1] * bne[2]], e).unwrap();
            let out = g.mul_mat(a, b).unwrap();
            let mut h = Harness::new(g, 3);
            let xa = fill_input(&mut h, a, &rng.vec(ane.iter().product(), -1.0, 1.0));
            let bigv = rng.vec(bne.iter().product::<usize>() * 2, -1.0, 1.0);
            h.set_f32(big, &bigv);
            h.run().unwrap();
            let bv = h.f32(b);
            let want = mul_mat_ref(&xa, ane, &bv, bne);
            let got = h.f32(out);
            let tol = 1e-5 * (ane[0] as f32).sqrt();
            assert_close(&format!("mul_mat {dt} {ane:?} x {bne:?}"), &got, &want, tol, 1e-5);
        }
    }
}

#[test]
fn rms_norm_and_rope() {
    let mut rng = Rng::new(5);
    for dt in FLOATS {
        let mut g = Graph::new();
        let x = input(&mut g, "x", dt, &[37, 4]);
        let r = g.rms_norm(x, 1e-5).unwrap();
        let mut h = Harness::new(g, 2);
        let xs = fill_input(&mut h, x, &rng.vec(148, -2.0, 2.0));
        h.run().unwrap();
        let mut want = Vec::new();
        for row in xs.chunks(37) {
            let ms: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / 37.0;
            let s = 1.0 / (ms + 1e-5).sqrt();
            want.extend(row.iter().map(|&v| (f64::from(v) * s) as f32));
        }
        assert_close("rms_norm", &h.f32(r), &want, 1e-5, 1e-5);
    }
    for mode in [RopeMode::Normal, RopeMode::Neox] {
        let (hd, nh, nt, nd) = (10usize, 3usize, 4usize, 6u32);
        let mut g = Graph::new();
        let x = input(&mut g, "x", DType::F32, &[hd, nh, nt]);
        let pos = input(&mut g, "pos", DType::I32, &[nt]);
        let r = g.rope(x, pos, nd, mode, 10000.0, 0.5).unwrap();
        let mut h = Harness::new(g, 2);
        let xs = fill_input(&mut h, x, &rng.vec(hd * nh * nt, -1.0, 1.0));
        let pv = vec![0, 3, 17, 100];
        h.set_i32(pos, &pv);
        h.run().unwrap();
        let mut want = xs.clone();
        let half = nd as usize / 2;
        for t in 0..nt {
            for hh in 0..nh {
                let o = (t * nh + hh) * hd;
                for i in 0..half {
                    let theta = f64::from(pv[t]) * 0.5 * 10000f64.powf(-2.0 * i as f64 / f64::from(nd));
                    let (i0, i1) = match mode {
                        RopeMode::Normal => (2 * i, 2 * i + 1),
                        RopeMode::Neox => (i, i + half),
                    };
                    let (a, b) = (f64::from(xs[o + i0]), f64::from(xs[o + i1]));
                    want[o + i0] = (a * theta.cos() - b * theta.sin()) as f32;
                    want[o + i1] = (a * theta.sin() + b * theta.cos()) as f32;
                }
            }
        }
        assert_close(&format!("rope {mode:?}"), &h.f32(r), &want, 2e-5, 1e-4);
    }
}

fn softmax_ref(row: &[f32]) -> Vec<f32> {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - f64::from(m)).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|&v| (v / s) as f32).collect()
}

#[test]
fn soft_max_with_scale_masks_and_special_rows() {
    let mut rng = Rng::new(6);
    for (dt, n, rows, scale) in [
        (DType::F32, 37usize, 3usize, 1.0f32),
        (DType::F16, 100, 4, 0.5),
        (DType::BF16, 9, 2, -2.0),
        (DType::F32, 262_144, 2, 1.0),
    ] {
        for mask_dt in [None, Some(DType::F32), Some(DType::F16)] {
            let mut g = Graph::new();
            let x = input(&mut g, "x", dt, &[n, rows, 2]);
            let m = mask_dt.map(|md| input(&mut g, "mask", md, &[n, rows + 1]));
            let s = g.soft_max(x, m, scale).unwrap();
            let mut h = Harness::new(g, 2);
            let mut xv = rng.vec(n * rows * 2, -10.0, 10.0);
            xv[..n].fill(f32::NEG_INFINITY); // first row all -inf -> NaN
            xv[n + 1] = f32::NEG_INFINITY;
            let xs = fill_input(&mut h, x, &xv);
            let ms = m.map(|m| {
                let mut mv = rng.vec(n * (rows + 1), -1.0, 1.0);
                mv[n + 2] = f32::NEG_INFINITY;
                fill_input(&mut h, m, &mv)
            });
            h.run().unwrap();
            let mut want = Vec::new();
            for (r, row) in xs.chunks(n).enumerate() {
                let y: Vec<f32> = row
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| v * scale + ms.as_ref().map_or(0.0, |m| m[(r % rows) * n + i]))
                    .collect();
                if r == 0 {
                    want.extend(std::iter::repeat_n(f32::NAN, n));
                } else {
                    want.extend(softmax_ref(&y));
                }
            }
            assert_close(&format!("soft_max {dt} n={n} mask={mask_dt:?}"), &h.f32(s), &want, 1e-7, 1e-5);
        }
    }
}

#[test]
fn reductions_argmax_ties_and_large_rows() {
    let mut rng = Rng::new(7);
    for (dt, n, rows) in
        [(DType::F32, 262_144usize, 3usize), (DType::F16, 1000, 5), (DType::BF16, 4097, 2), (DType::F32, 1, 3)]
    {
        let mut g = Graph::new();
        let x = input(&mut g, "x", dt, &[n, rows]);
        let s = g.sum_rows(x).unwrap();
        let m = g.max_rows(x).unwrap();
        let a = g.argmax(x).unwrap();
        let mut h = Harness::new(g, 2);
        let mut v: Vec<f32> = rng.vec(n * rows, -4.0, 4.0).iter().map(|x| (x * 8.0).round() / 8.0).collect();
        if n > 10 {
            // Row 1: the maximum appears three times; the lowest index must win.
            let big = 100.0;
            v[n + n / 2] = big;
            v[n + n - 1] = big;
            v[n + 7] = big;
            // Row 0: a NaN makes max_rows NaN.
            v[3] = f32::NAN;
        }
        let xs = fill_input(&mut h, x, &v);
        h.run().unwrap();
        let got_s = h.f32(s);
        let got_m = h.f32(m);
        let got_a = h.i32(a);
        for r in 0..rows {
            let row = &xs[r * n..(r + 1) * n];
            let want_s: f64 = row.iter().filter(|v| !v.is_nan()).map(|&v| f64::from(v)).sum();
            if !row.iter().any(|v| v.is_nan()) {
                let scale: f64 = row.iter().map(|&v| f64::from(v).abs()).sum();
                assert!((f64::from(got_s[r]) - want_s).abs() <= 1e-6 * scale + 1e-6, "sum_rows row {r}");
                let want_m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                assert_eq!(got_m[r], want_m);
                let want_a = row.iter().position(|&v| v == want_m).unwrap();
                assert_eq!(got_a[r] as usize, want_a, "argmax row {r} of {dt} n={n}");
            } else {
                assert!(got_m[r].is_nan() && got_s[r].is_nan());
            }
        }
        if n > 10 {
            assert_eq!(got_a[1] as usize, 7);
        }
    }
}

fn argsort_ref(x: &[f32], order: SortOrder) -> Vec<i32> {
    let mut i: Vec<usize> = (0..x.len()).collect();
    // Values here are never -0.0 or NaN, so partial_cmp is the total order.
    i.sort_by(|&a, &b| match order {
        SortOrder::Asc => x[a].partial_cmp(&x[b]).unwrap(),
        SortOrder::Desc => x[b].partial_cmp(&x[a]).unwrap(),
    });
    i.into_iter().map(|v| v as i32).collect()
}

#[test]
fn argsort_stable_and_top_k_on_small_and_huge_rows() {
    let mut rng = Rng::new(8);
    for (dt, n, rows) in
        [(DType::F32, 262_144usize, 1usize), (DType::F32, 1000, 64), (DType::F16, 77, 3), (DType::BF16, 5, 2)]
    {
        let mut g = Graph::new();
        let x = input(&mut g, "x", dt, &[n, rows]);
        let asc = g.argsort(x, SortOrder::Asc).unwrap();
        let desc = g.argsort(x, SortOrder::Desc).unwrap();
        let kk = n.min(40);
        let top = g.top_k(x, kk).unwrap();
        let top1 = g.top_k(x, 1).unwrap();
        let mut h = Harness::new(g, 2);
        // Few distinct values: many ties.
        let v: Vec<f32> = (0..n * rows).map(|_| (rng.below(50) as f32 - 25.0) * 0.5).collect();
        let xs = fill_input(&mut h, x, &v);
        h.run().unwrap();
        let (ga, gd, gt, g1) = (h.i32(asc), h.i32(desc), h.i32(top), h.i32(top1));
        for r in 0..rows {
            let row = &xs[r * n..(r + 1) * n];
            assert_eq!(ga[r * n..(r + 1) * n], argsort_ref(row, SortOrder::Asc)[..], "asc {dt} n={n} row {r}");
            let want_d = argsort_ref(row, SortOrder::Desc);
            assert_eq!(gd[r * n..(r + 1) * n], want_d[..], "desc {dt} n={n} row {r}");
            assert_eq!(gt[r * kk..(r + 1) * kk], want_d[..kk], "top_k {dt} n={n} row {r}");
            assert_eq!(g1[r], want_d[0]);
        }
    }
}

#[test]
fn cumsum_large_rows_and_dtypes() {
    let mut rng = Rng::new(9);
    for (dt, n, rows) in [(DType::F32, 262_144usize, 2usize), (DType::F16, 1001, 3), (DType::F32, 3, 4)] {
        let mut g = Graph::new();
        let x = input(&mut g, "x", dt, &[n, rows]);
        let c = g.cumsum(x).unwrap();
        let mut h = Harness::new(g, 2);
        let xs = fill_input(&mut h, x, &rng.vec(n * rows, 0.0, 1.0));
        h.run().unwrap();
        let got = h.f32(c);
        for r in 0..rows {
            let mut acc = 0.0f64;
            for i in 0..n {
                acc += f64::from(xs[r * n + i]);
                let g = f64::from(got[r * n + i]);
                // f32 rounding grows like sqrt(i) ulps of the running sum; a wrong carry would be off by whole values.
                assert!((g - acc).abs() <= 4e-7 * acc * ((i + 1) as f64).sqrt() + 1e-6, "row {r} i {i}: {g} vs {acc}");
            }
        }
    }
}

#[test]
fn random_uniform_known_answers_and_key_layout() {
    let mut g = Graph::new();
    let keys = input(&mut g, "keys", DType::I32, &[4, 3]);
    let u = g.random_uniform(keys, 1000, 0).unwrap();
    let u2 = g.random_uniform(keys, 5, graph::philox::stream::XTC as u32).unwrap();
    let mut h = Harness::new(g, 2);
    let seeds: [u64; 3] = [42, 0x1234_5678_9abc_def0, u64::MAX];
    let steps: [u64; 3] = [7, 1 << 33, 0];
    let mut kv = Vec::new();
    for r in 0..3 {
        kv.extend([
            seeds[r] as u32 as i32,
            (seeds[r] >> 32) as u32 as i32,
            steps[r] as u32 as i32,
            (steps[r] >> 32) as u32 as i32,
        ]);
    }
    h.set_i32(keys, &kv);
    h.run().unwrap();
    let got = h.f32(u);
    for r in 0..3 {
        for i in 0..1000 {
            assert_eq!(got[r * 1000 + i], graph::philox::uniform(seeds[r], steps[r], i as u64));
        }
    }
    // Known answer pinned from the generator's definition: Philox4x32-10 with key (42, 0) and counter
    // (0, 0, 7, 0); its first word's top 24 bits scaled by 2^-24.
    let w = graph::philox::philox4x32_10([0, 0, 7, 0], [42, 0])[0];
    assert_eq!(got[0], (w >> 8) as f32 / 16_777_216.0);
    let got2 = h.f32(u2);
    for i in 0..5 {
        let e = graph::philox::stream::element(graph::philox::stream::XTC, i as u64);
        assert_eq!(got2[5 + i], graph::philox::uniform(seeds[1], steps[1], e));
    }
    assert!(got.iter().all(|&x| (0.0..1.0).contains(&x)));
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let build = || {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[5000, 9]).unwrap();
        let w = g.input("w", DType::F16, &[5000, 33]).unwrap();
        let s = g.soft_max(x, None, 0.7).unwrap();
        let c = g.cumsum(s).unwrap();
        let t = g.top_k(x, 17).unwrap();
        let a = g.argmax(c).unwrap();
        let m = g.mul_mat(w, x).unwrap();
        (g, [s, c, m], [t, a])
    };
    let mut rng = Rng::new(10);
    let xv = rng.vec(45_000, -5.0, 5.0);
    let wv = rng.vec(165_000, -1.0, 1.0);
    let mut results = Vec::new();
    for threads in [1, 4] {
        let (g, fl, ints) = build();
        let mut h = Harness::new(g, threads);
        h.set_f32(NodeId(0), &xv);
        h.set_f32(NodeId(1), &wv);
        h.run().unwrap();
        let f: Vec<Vec<u32>> = fl.iter().map(|&id| h.f32(id).iter().map(|v| v.to_bits()).collect()).collect();
        let i: Vec<Vec<i32>> = ints.iter().map(|&id| h.i32(id)).collect();
        results.push((f, i));
    }
    assert!(results[0] == results[1]);
}

#[test]
fn mul_mat_vec_and_mat_many_row_blocks_long_k_and_broadcast() {
    // Several row blocks of the matrix-vector path (plus a ragged last one), 1 to 4 columns of `b`,
    // `a` broadcast over two batches of `b`, and K not a multiple of 8.
    let (ane, k) = ([67usize, 150, 1, 1], 67usize);
    let mut rng = Rng::new(41);
    for dt in FLOATS {
        for n in 1..=4usize {
            let bne = [k, n, 2, 1];
            let mut g = Graph::new();
            let a = input(&mut g, "a", dt, &ane);
            let b = input(&mut g, "b", DType::F32, &bne);
            let out = g.mul_mat(a, b).unwrap();
            let mut h = Harness::new(g, 2);
            let xa = fill_input(&mut h, a, &rng.vec(ane.iter().product(), -1.0, 1.0));
            let xb = fill_input(&mut h, b, &rng.vec(bne.iter().product(), -1.0, 1.0));
            h.run().unwrap();
            let want = mul_mat_ref(&xa, ane, &xb, bne);
            assert_close(
                &format!("mul_mat {dt} {ane:?} x {bne:?}"),
                &h.f32(out),
                &want,
                1e-5 * (k as f32).sqrt(),
                1e-5,
            );
        }
    }
    // The matrix-matrix path with K longer than one pass (4096) and ragged row and column tiles.
    let (ane, k) = ([4103usize, 9, 1, 1], 4103usize);
    for dt in FLOATS {
        for n in [5usize, 7] {
            let bne = [k, n, 2, 1];
            let mut g = Graph::new();
            let a = input(&mut g, "a", dt, &ane);
            let b = input(&mut g, "b", DType::F32, &bne);
            let out = g.mul_mat(a, b).unwrap();
            let mut h = Harness::new(g, 2);
            let xa = fill_input(&mut h, a, &rng.vec(ane.iter().product(), -1.0, 1.0));
            let xb = fill_input(&mut h, b, &rng.vec(bne.iter().product(), -1.0, 1.0));
            h.run().unwrap();
            let want = mul_mat_ref(&xa, ane, &xb, bne);
            let tol = 1e-5 * (k as f32).sqrt();
            assert_close(&format!("mul_mat {dt} {ane:?} x {bne:?}"), &h.f32(out), &want, tol, 1e-5);
        }
    }
}
