//! Differential tests: each op ggml has, on random inputs of several shapes (including sizes that are
//! not multiples of our block sizes, and strided views on our side), computed by our CPU backend and
//! by ggml's CPU backend (`ggml-sys-bleedingedge`), compared element-wise with tolerances that follow
//! the arithmetic (ggml's f16 mul_mat rounds `b` to f16, for example). That ggml is b2757; what
//! came later (rope's per-pair frequency factors) is compared with a fixture that today's ggml
//! computed (`tests/data/rope_ext.json`, made by `tests/data/rope_ext_ref.py`).

mod ggml;
mod harness;

use ggml::{Ctx, Ty};
use graph::{DType, Graph, NodeId, RopeMode, SortOrder};
use harness::{Harness, Rng, assert_close};

/// Our graph with one f32 input `x` of shape `ne` fed through a row-strided view: `x` lives in every
/// other row of a twice-as-tall tensor, so kernels see non-contiguous outer strides.
fn strided_input(g: &mut Graph, dt: DType, ne: [usize; 4]) -> (NodeId, NodeId) {
    let big = g.input("big", dt, &[ne[0], 2 * ne[1], ne[2], ne[3]]).unwrap();
    let s = dt.size();
    let nb1 = 2 * ne[0] * s;
    let v = g.view(big, &ne, &[s, nb1, nb1 * ne[1], nb1 * ne[1] * ne[2]], ne[0] * s).unwrap();
    (big, v)
}

/// Writes `vals` (logical, contiguous order) into the odd rows of `big`.
fn fill_strided(h: &mut Harness, big: NodeId, ne: [usize; 4], vals: &[f32], filler: f32) {
    let rows = ne[1] * ne[2] * ne[3];
    let mut all = Vec::with_capacity(2 * vals.len());
    for r in 0..rows {
        all.extend(std::iter::repeat_n(filler, ne[0]));
        all.extend_from_slice(&vals[r * ne[0]..(r + 1) * ne[0]]);
    }
    h.set_f32(big, &all);
}

const SHAPES: [[usize; 4]; 4] = [[37, 5, 1, 1], [256, 3, 2, 1], [1000, 2, 1, 2], [4097, 1, 1, 1]];

#[test]
fn add_and_mul_with_broadcast_and_views() {
    let mut rng = Rng::new(100);
    for ne in SHAPES {
        for bne in [ne, [ne[0], 1, 1, 1], [1, ne[1], ne[2], ne[3]]] {
            let n: usize = ne.iter().product();
            let nb: usize = bne.iter().product();
            let (av, bv) = (rng.vec(n, -3.0, 3.0), rng.vec(nb, -3.0, 3.0));
            let c = Ctx::new(64);
            let (a, b) = (c.tensor(Ty::F32, &ne), c.tensor(Ty::F32, &bne));
            c.set_f32(a, &av);
            c.set_f32(b, &bv);
            let (add, mul) = (c.add(a, b), c.mul(a, b));
            c.compute(add, 2);
            c.compute(mul, 2);

            let mut g = Graph::new();
            let (big, x) = strided_input(&mut g, DType::F32, ne);
            let y = g.input("b", DType::F32, &bne).unwrap();
            let (oa, om) = (g.add(x, y).unwrap(), g.mul(x, y).unwrap());
            let mut h = Harness::new(g, 2);
            fill_strided(&mut h, big, ne, &av, f32::NAN);
            h.set_f32(y, &bv);
            h.run().unwrap();
            assert_close(&format!("add {ne:?} {bne:?}"), &h.f32(oa), &c.read_f32(add), 0.0, 0.0);
            assert_close(&format!("mul {ne:?} {bne:?}"), &h.f32(om), &c.read_f32(mul), 0.0, 0.0);
        }
    }
}

#[test]
fn scale_rms_norm_sum_rows_argmax() {
    let mut rng = Rng::new(101);
    for ne in SHAPES {
        let n: usize = ne.iter().product();
        let v = rng.vec(n, -4.0, 4.0);
        // ggml b2757 resolves argmax ties to the last index, our op to the first (the conformance
        // suite checks ties), so here every row's maximum is unique (uniform floats: ties are
        // vanishingly rare, and checked).
        for r in v.chunks(ne[0]) {
            let m = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(r.iter().filter(|&&x| x == m).count(), 1);
        }
        let c = Ctx::new(64);
        let x = c.tensor(Ty::F32, &ne);
        c.set_f32(x, &v);
        let sc = c.scale(x, 0.37);
        let rn = c.rms_norm(x, 1e-6);
        let sr = c.sum_rows(x);
        let x2 = c.tensor(Ty::F32, &[ne[0], ne[1] * ne[2] * ne[3]]);
        c.set_f32(x2, &v);
        let am = c.argmax(x2);
        for t in [sc, rn, sr, am] {
            c.compute(t, 2);
        }

        let mut g = Graph::new();
        let (big, xv) = strided_input(&mut g, DType::F32, ne);
        let (osc, orn, osr, oam) =
            (g.scale(xv, 0.37).unwrap(), g.rms_norm(xv, 1e-6).unwrap(), g.sum_rows(xv).unwrap(), g.argmax(xv).unwrap());
        let mut h = Harness::new(g, 2);
        fill_strided(&mut h, big, ne, &v, 1e30);
        h.run().unwrap();
        assert_close("scale", &h.f32(osc), &c.read_f32(sc), 0.0, 0.0);
        assert_close("rms_norm", &h.f32(orn), &c.read_f32(rn), 1e-6, 2e-6);
        let scale = 4.0 * (ne[0] as f32).sqrt() * 1e-6;
        assert_close("sum_rows", &h.f32(osr), &c.read_f32(sr), scale, 1e-6);
        assert_eq!(h.i32(oam), c.read_i32(am), "argmax {ne:?}");
    }
}

#[test]
fn soft_max_with_scale_and_mask() {
    let mut rng = Rng::new(102);
    for ne in [[37usize, 5, 1, 1], [256, 4, 3, 1], [4097, 2, 1, 1], [151_936, 1, 1, 1]] {
        for (with_mask, scale) in [(false, 1.0f32), (true, 0.125), (true, 1.0), (false, 0.7)] {
            let n: usize = ne.iter().product();
            let xv = rng.vec(n, -8.0, 8.0);
            let mne = [ne[0], ne[1]];
            let mut mv = rng.vec(mne[0] * mne[1], -2.0, 2.0);
            for (i, m) in mv.iter_mut().enumerate() {
                if i % 7 == 3 {
                    *m = f32::NEG_INFINITY;
                }
            }
            let c = Ctx::new(64);
            let x = c.tensor(Ty::F32, &ne);
            c.set_f32(x, &xv);
            let m = with_mask.then(|| {
                let m = c.tensor(Ty::F32, &mne);
                c.set_f32(m, &mv);
                m
            });
            let sm = c.soft_max_ext(x, m, scale);
            c.compute(sm, 2);

            let mut g = Graph::new();
            let (big, xn) = strided_input(&mut g, DType::F32, ne);
            let mn = with_mask.then(|| g.input("mask", DType::F32, &mne).unwrap());
            let out = g.soft_max(xn, mn, scale).unwrap();
            let mut h = Harness::new(g, 2);
            fill_strided(&mut h, big, ne, &xv, 0.0);
            if let Some(mn) = mn {
                h.set_f32(mn, &mv);
            }
            h.run().unwrap();
            // ggml b2757 looks exp up in an f16 table indexed by the f16-rounded `x - max`: its relative
            // error grows with |x - max| (about 2^-11 per unit plus the table's 2^-11), so the
            // tolerance does too; below 6e-5 the table holds f16 subnormals, 6e-8 apart (the row sum is
            // at least 1, so that is also the bound after normalising). The conformance suite holds our
            // soft_max to 2e-5 of the f64 reference.
            let (got, want) = (h.f32(out), c.read_f32(sm));
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                let tol = w * (2e-3 + 1e-3 * w.max(1e-30).ln().abs()) + 6e-8;
                assert!((g - w).abs() <= tol, "soft_max {ne:?} mask={with_mask} scale={scale} [{i}]: {g} vs {w}");
            }
        }
    }
}

#[test]
fn rope_normal_and_neox() {
    let mut rng = Rng::new(103);
    // ggml b2757's normal mode rotates the whole head, so n_dims = head_dim there; its neox mode applies
    // freq_scale twice, so freq_scale = 1 there. Our own tests cover the other combinations.
    for (mode, hd, nd, fs) in [
        (RopeMode::Normal, 64usize, 64u32, 0.5f32),
        (RopeMode::Normal, 10, 10, 1.0),
        (RopeMode::Neox, 64, 32, 1.0),
        (RopeMode::Neox, 12, 12, 1.0),
    ] {
        let (nh, nt) = (3usize, 5usize);
        let ne = [hd, nh, nt, 1];
        let xv = rng.vec(hd * nh * nt, -1.0, 1.0);
        let pv: Vec<i32> = vec![0, 1, 7, 63, 200];
        let c = Ctx::new(64);
        let x = c.tensor(Ty::F32, &ne[..3]);
        let p = c.tensor(Ty::I32, &[nt]);
        c.set_f32(x, &xv);
        c.set_i32(p, &pv);
        let r = c.rope(x, p, nd as i32, if mode == RopeMode::Neox { 2 } else { 0 }, 10000.0, fs);
        c.compute(r, 2);

        let mut g = Graph::new();
        let (big, xn) = strided_input(&mut g, DType::F32, ne);
        let pn = g.input("pos", DType::I32, &[nt]).unwrap();
        let out = g.rope(xn, pn, nd, mode, 10000.0, fs).unwrap();
        let mut h = Harness::new(g, 2);
        fill_strided(&mut h, big, ne, &xv, 5.0);
        h.set_i32(pn, &pv);
        h.run().unwrap();
        // ggml accumulates theta by repeated multiplication; positions up to 200 amplify that rounding.
        assert_close(&format!("rope {mode:?} hd={hd} nd={nd}"), &h.f32(out), &c.read_f32(r), 2e-4, 2e-4);
    }
}

/// Linear RoPE scaling and YaRN (`ggml_rope_ext`'s `freq_scale`, `ext_factor`, `attn_factor`,
/// `beta_fast`, `beta_slow`, `n_ctx_orig`) against ggml b2757's `ggml_rope_custom`, which computes
/// them as today's ggml does in normal mode over the whole head (its neox mode applies
/// `freq_scale` twice). The per-pair frequency factors came later than b2757: the tiny-model tests
/// in `crates/runner/tests/tiny_arch.rs` check them against llama.cpp.
#[test]
fn rope_linear_scaling_and_yarn() {
    let mut rng = Rng::new(113);
    // (head_dim, freq_base, freq_scale, [ext_factor, attn_factor, beta_fast, beta_slow], n_ctx_orig)
    let cases: [(usize, f32, f32, [f32; 4], u32); 6] = [
        (64, 10000.0, 0.25, [0.0, 1.0, 32.0, 1.0], 0),
        (32, 500000.0, 0.125, [0.0, 0.8, 32.0, 1.0], 0),
        (64, 10000.0, 0.25, [1.0, 1.0, 32.0, 1.0], 2048),
        (128, 1000000.0, 0.125, [1.0, 0.9, 32.0, 1.0], 32768),
        (64, 10000.0, 0.5, [0.5, 1.0, 16.0, 2.0], 4096),
        (48, 10000.0, 1.0 / 3.0, [1.0, 1.0, 32.0, 1.0], 1024),
    ];
    for (hd, base, fs, yarn, n_orig) in cases {
        let (nh, nt) = (3usize, 6usize);
        let ne = [hd, nh, nt, 1];
        let xv = rng.vec(hd * nh * nt, -1.0, 1.0);
        let pv: Vec<i32> = vec![0, 1, 7, 63, 200, 1000];
        let c = Ctx::new(64);
        let x = c.tensor(Ty::F32, &ne[..3]);
        let p = c.tensor(Ty::I32, &[nt]);
        c.set_f32(x, &xv);
        c.set_i32(p, &pv);
        let r = c.rope_yarn(x, p, hd as i32, 0, n_orig as i32, base, fs, yarn);
        c.compute(r, 2);

        let mut g = Graph::new();
        let (big, xn) = strided_input(&mut g, DType::F32, ne);
        let pn = g.input("pos", DType::I32, &[nt]).unwrap();
        let [ext_factor, attn_factor, beta_fast, beta_slow] = yarn;
        let params = graph::RopeParams {
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
            n_ctx_orig: n_orig,
            ..graph::RopeParams::new(hd as u32, RopeMode::Normal, base, fs)
        };
        let out = g.rope_ext(xn, pn, None, params).unwrap();
        let mut h = Harness::new(g, 2);
        fill_strided(&mut h, big, ne, &xv, 5.0);
        h.set_i32(pn, &pv);
        h.run().unwrap();
        // ggml accumulates theta by repeated multiplication; positions up to 1000 amplify that rounding.
        let what = format!("rope hd={hd} base={base} fs={fs} yarn={yarn:?} n_orig={n_orig}");
        assert_close(&what, &h.f32(out), &c.read_f32(r), 1e-3, 1e-3);
    }
}

/// `ggml_rope_ext` as today's ggml computes it (llama-cpp-python's libggml through ctypes:
/// `tests/data/rope_ext_ref.py` made `tests/data/rope_ext.json`): per-pair frequency factors in
/// both modes, neox with `freq_scale`, YaRN, `attn_factor`, partial rotation; positions up to 3000
/// (the largest difference is about 4e-5).
#[test]
#[allow(clippy::print_stdout)]
fn rope_ext_with_frequency_factors_against_todays_ggml() {
    let fixture: serde_json::Value = serde_json::from_str(include_str!("data/rope_ext.json")).unwrap();
    let f32s = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
    };
    let num = |c: &serde_json::Value, k: &str| c[k].as_f64().unwrap() as f32;
    let mut worst = 0.0f32;
    for c in fixture["cases"].as_array().unwrap() {
        let ne: Vec<usize> = c["ne"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        let mode = if c["mode"] == "neox" { RopeMode::Neox } else { RopeMode::Normal };
        let p = graph::RopeParams {
            ext_factor: num(c, "ext_factor"),
            attn_factor: num(c, "attn_factor"),
            beta_fast: num(c, "beta_fast"),
            beta_slow: num(c, "beta_slow"),
            n_ctx_orig: c["n_ctx_orig"].as_u64().unwrap() as u32,
            ..graph::RopeParams::new(
                c["n_dims"].as_u64().unwrap() as u32,
                mode,
                num(c, "freq_base"),
                num(c, "freq_scale"),
            )
        };
        let pos: Vec<i32> = c["pos"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap() as i32).collect();
        let mut g = Graph::new();
        let (big, xn) = strided_input(&mut g, DType::F32, [ne[0], ne[1], ne[2], 1]);
        let pn = g.input("pos", DType::I32, &[ne[2]]).unwrap();
        let ff = if c["freq_factors"].is_null() {
            None
        } else {
            Some(g.input("ff", DType::F32, &[p.n_dims as usize / 2]).unwrap())
        };
        let out = g.rope_ext(xn, pn, ff, p).unwrap();
        let mut h = Harness::new(g, 2);
        fill_strided(&mut h, big, [ne[0], ne[1], ne[2], 1], &f32s(&c["x"]), 5.0);
        h.set_i32(pn, &pos);
        if let Some(ff) = ff {
            h.set_f32(ff, &f32s(&c["freq_factors"]));
        }
        h.run().unwrap();
        let (got, want) = (h.f32(out), f32s(&c["want"]));
        worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(worst, f32::max);
        // ggml accumulates theta by repeated multiplication; positions up to 3000 amplify that rounding.
        assert_close(&format!("rope_ext {p:?} ff={}", ff.is_some()), &got, &want, 3e-4, 3e-4);
    }
    println!("rope_ext against today's ggml: largest difference {worst:e}");
}

#[test]
fn mul_mat_f32_and_f16_weights() {
    let mut rng = Rng::new(104);
    let cases: [([usize; 4], [usize; 4]); 6] = [
        ([64, 17, 1, 1], [64, 1, 1, 1]),
        ([100, 33, 1, 1], [100, 7, 1, 1]),
        ([256, 64, 1, 1], [256, 32, 1, 1]),
        ([37, 5, 2, 1], [37, 3, 4, 1]),
        ([512, 9, 1, 1], [512, 2, 1, 3]),
        ([4096, 8, 1, 1], [4096, 1, 1, 1]),
    ];
    for (ane, bne) in cases {
        for ty in [Ty::F32, Ty::F16] {
            let (na, nb): (usize, usize) = (ane.iter().product(), bne.iter().product());
            let (av, bv) = (rng.vec(na, -1.0, 1.0), rng.vec(nb, -1.0, 1.0));
            let c = Ctx::new(64);
            let (a, b) = (c.tensor(ty, &ane), c.tensor(Ty::F32, &bne));
            c.set_f32(a, &av);
            c.set_f32(b, &bv);
            let mm = c.mul_mat(a, b);
            c.compute(mm, 2);

            let dt = if ty == Ty::F16 { DType::F16 } else { DType::F32 };
            let mut g = Graph::new();
            let an = g.input("a", dt, &ane).unwrap();
            let (big, bn) = strided_input(&mut g, DType::F32, bne);
            let out = g.mul_mat(an, bn).unwrap();
            let mut h = Harness::new(g, 3);
            h.set_f32(an, &av);
            fill_strided(&mut h, big, bne, &bv, 9.0);
            h.run().unwrap();
            // ggml rounds b to f16 for f16 weights: error ~ 2^-11 per product, random signs.
            let per = if ty == Ty::F16 { 1e-3 } else { 2e-7 };
            let atol = per * (ane[0] as f32).sqrt() * 2.0;
            assert_close(&format!("mul_mat {ty:?} {ane:?} x {bne:?}"), &h.f32(out), &c.read_f32(mm), atol, 1e-5);
        }
    }
}

#[test]
fn get_rows_and_cpy_casts() {
    let mut rng = Rng::new(105);
    for ty in [Ty::F32, Ty::F16] {
        let ane = [33usize, 10, 3, 1];
        let av = rng.vec(33 * 30, -5.0, 5.0);
        let ids: Vec<i32> = (0..12).map(|_| rng.below(10) as i32).collect();
        let c = Ctx::new(16);
        let a = c.tensor(ty, &ane);
        let i = c.tensor(Ty::I32, &[4, 3]);
        c.set_f32(a, &av);
        c.set_i32(i, &ids);
        let gr = c.get_rows(a, i);
        c.compute(gr, 2);
        // cpy: f32 <-> f16 of a transposed (non-contiguous) source.
        let src = c.tensor(if ty == Ty::F32 { Ty::F16 } else { Ty::F32 }, &[33, 30]);
        c.set_f32(src, &av);
        let tr = c.transpose(src);
        let dst = c.tensor(ty, &[30, 33]);
        let cp = c.cpy(tr, dst);
        c.compute(cp, 2);

        let dt = if ty == Ty::F16 { DType::F16 } else { DType::F32 };
        let sdt = if ty == Ty::F32 { DType::F16 } else { DType::F32 };
        let mut g = Graph::new();
        let an = g.input("a", dt, &ane).unwrap();
        let idn = g.input("ids", DType::I32, &[4, 3]).unwrap();
        let out = g.get_rows(an, idn).unwrap();
        let sn = g.input("src", sdt, &[33, 30]).unwrap();
        let tn = g.transpose(sn).unwrap();
        let cn = g.cast(tn, dt).unwrap();
        let mut h = Harness::new(g, 2);
        h.set_f32(an, &av);
        h.set_i32(idn, &ids);
        h.set_f32(sn, &av);
        h.run().unwrap();
        assert_close(&format!("get_rows {ty:?}"), &h.f32(out), &c.read_f32(gr), 0.0, 0.0);
        assert_close(&format!("cpy {sdt}->{dt}"), &h.f32(cn), &c.read_f32(dst), 0.0, 0.0);
    }
}

#[test]
fn argsort_and_top_k_on_small_rows() {
    let mut rng = Rng::new(106);
    // ggml b2757's CPU argsort is an unstable exchange sort: distinct values only.
    for (n, rows) in [(7usize, 3usize), (64, 4), (333, 2), (1024, 1)] {
        let mut v: Vec<f32> = (0..n * rows).map(|i| i as f32 * 0.25 - 40.0).collect();
        for r in v.chunks_mut(n) {
            for i in (1..n).rev() {
                r.swap(i, rng.below(i + 1));
            }
        }
        let k = n.min(40);
        let c = Ctx::new(16);
        let x = c.tensor(Ty::F32, &[n, rows]);
        c.set_f32(x, &v);
        let (asc, desc, top) = (c.argsort(x, false), c.argsort(x, true), c.top_k(x, k));
        for t in [asc, desc, top] {
            c.compute(t, 2);
        }
        let mut g = Graph::new();
        let xn = g.input("x", DType::F32, &[n, rows]).unwrap();
        let (oa, od, ot) =
            (g.argsort(xn, SortOrder::Asc).unwrap(), g.argsort(xn, SortOrder::Desc).unwrap(), g.top_k(xn, k).unwrap());
        let mut h = Harness::new(g, 2);
        h.set_f32(xn, &v);
        h.run().unwrap();
        assert_eq!(h.i32(oa), c.read_i32(asc), "argsort asc n={n}");
        assert_eq!(h.i32(od), c.read_i32(desc), "argsort desc n={n}");
        assert_eq!(h.i32(ot), c.read_i32(top), "top_k n={n}");
    }
}
