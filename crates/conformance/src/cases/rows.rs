//! Cases for indexing (get_rows, set_rows, scatter_add), mul_mat, rms_norm, rope, soft_max, the row
//! reductions and orderings (sum/max rows, argmax, argsort, top_k, top_p_mask), cumsum and
//! random_uniform: edge
//! row lengths (1, 31, 32, 33, 4095, 4096, 4097, 151936, 262144) at batch 1 and a few at batch 64,
//! every float dtype, padded-row sources, ties and `-inf` rows.

use super::elementwise::{Src, source};
use super::{Builder, Case, EDGE_SIZES, FLOATS};
use crate::compare::{Cmp, IndexKind, Tol};
use crate::generate::{Gen, Rng};
use graph::{DType, GraphError, NodeId, RopeMode, RopeParams, SortOrder};
use std::sync::Arc;

fn dt(d: DType) -> &'static str {
    d.name()
}

fn logits(b: &mut Builder, d: DType, n: usize, rows: usize, src: Src, vals_gen: Gen) -> Result<NodeId, GraphError> {
    source(b, "x", d, [n, rows, 1, 1], src, vals_gen)
}

/// The rows of the ordering cases: (length, batch).
fn order_shapes() -> Vec<(usize, usize)> {
    let mut s: Vec<(usize, usize)> = EDGE_SIZES.iter().map(|&n| (n, 1)).collect();
    s.extend([(33, 64), (4097, 64)]);
    s
}

/// Summation tolerance for `n` terms of magnitude at most 1: f32 rounding grows like `sqrt(n)` for
/// blocked/pairwise sums; this allows a generous multiple of it.
fn sum_tol(n: usize) -> Tol {
    Tol::new(1e-6 + 4e-7 * (n as f64).sqrt() * 8.0, 2e-6)
}

/// Every row-op case.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    indexing(&mut v);
    linear(&mut v);
    edge_rows(&mut v);
    rope_window(&mut v);
    rope_ext(&mut v);
    softmax(&mut v);
    reductions(&mut v);
    orderings(&mut v);
    top_p_masks(&mut v);
    long_rows(&mut v);
    random(&mut v);
    v
}

fn indexing(v: &mut Vec<Case>) {
    for d in DType::ALL {
        for src in [Src::Contig, Src::Window] {
            v.push(Case::new(format!("rows/get_rows/{}/{}", dt(d), src.name()), move |b| {
                let vals_gen = if d == DType::I32 { Gen::Ints(-100, 100) } else { Gen::Uniform(-2.0, 2.0) };
                let a = source(b, "a", d, [33, 10, 2, 1], src, vals_gen)?;
                let ids = b.input("ids", DType::I32, &[7, 2], Gen::Ints(0, 10))?;
                let y = b.g.get_rows(a, ids)?;
                b.check(y, Cmp::Exact);
                Ok(())
            }));
        }
    }
    v.push(Case::new("rows/get_rows/f16/strided-ids", |b| {
        // ids need not be contiguous: a transposed [7, 2] view of a [2, 7] input.
        let a = b.input("a", DType::F16, &[33, 10, 2], Gen::Uniform(-2.0, 2.0))?;
        let ids_t = b.input("ids", DType::I32, &[2, 7], Gen::Ints(0, 10))?;
        let ids = b.g.transpose(ids_t)?;
        let y = b.g.get_rows(a, ids)?;
        b.check(y, Cmp::Exact);
        Ok(())
    }));
    v.push(Case::new("rows/get_rows/f32/vocab-row", |b| {
        let a = b.input("emb", DType::F32, &[4097, 300], Gen::Uniform(-1.0, 1.0))?;
        let ids = b.input("ids", DType::I32, &[9], Gen::Ints(0, 300))?;
        let y = b.g.get_rows(a, ids)?;
        b.check(y, Cmp::Exact);
        Ok(())
    }));
    let mut pairs: Vec<(DType, DType)> = FLOATS.iter().flat_map(|&a| FLOATS.iter().map(move |&b| (a, b))).collect();
    pairs.push((DType::I32, DType::I32));
    for (dd, dv) in pairs {
        v.push(Case::new(format!("rows/set_rows/{}<-{}", dt(dd), dt(dv)), move |b| {
            let vals_gen = |d: DType| if d == DType::I32 { Gen::Ints(-100, 100) } else { Gen::Uniform(-2.0, 2.0) };
            let dst = b.input("dst", dd, &[33, 16, 2], vals_gen(dd))?;
            let vals = b.input("vals", dv, &[33, 5, 2], vals_gen(dv))?;
            let ids = b.input("ids", DType::I32, &[5, 2], Gen::Distinct(16))?;
            let upd = b.g.set_rows(dst, vals, ids)?;
            let y = b.g.cont(upd)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
    }
    v.push(Case::new("rows/set_rows/f16<-f32/one-element-rows", |b| {
        // The transposed V cache's store: a row per channel and position.
        let dst = b.input("dst", DType::F16, &[1, 40, 2], Gen::Uniform(-2.0, 2.0))?;
        let vals = b.input("vals", DType::F32, &[1, 24, 2], Gen::Uniform(-70000.0, 70000.0))?;
        let ids = b.input("ids", DType::I32, &[24, 2], Gen::Distinct(40))?;
        let upd = b.g.set_rows(dst, vals, ids)?;
        let y = b.g.cont(upd)?;
        b.check(y, Cmp::Exact);
        Ok(())
    }));
    v.push(Case::new("rows/set_rows/f32/window-dst-then-read", |b| {
        // dst is a padded window of a cache; the rows written are read back through a later view.
        let cache = b.input("cache", DType::F32, &[40, 20], Gen::Uniform(-1.0, 1.0))?;
        let dst = b.g.view(cache, &[32, 16], &[4, 160], 16)?;
        let vals = b.input("vals", DType::F32, &[32, 3], Gen::Uniform(5.0, 6.0))?;
        let ids = b.input("ids", DType::I32, &[3], Gen::Distinct(16))?;
        let upd = b.g.set_rows(dst, vals, ids)?;
        let win = b.g.view(upd, &[32, 16], &[4, 160], 0)?;
        let all = b.g.scale(win, 2.0)?;
        b.check(all, Cmp::Exact);
        Ok(())
    }));
    for (constant, what) in [(false, "values"), (true, "constant")] {
        v.push(Case::new(format!("rows/scatter_add/{what}"), move |b| {
            let base = b.input("base", DType::F32, &[100, 4, 2], Gen::Levels(5, 0.0, 4.0))?;
            // ids include -1 (padding), ids past the end, and repeats.
            let ids = b.input("ids", DType::I32, &[64, 4, 2], Gen::Ints(-1, 102))?;
            let vals = if constant {
                b.input("one", DType::F32, &[1], Gen::Levels(2, 1.0, 2.0))?
            } else {
                b.input("vals", DType::F32, &[64, 4, 2], Gen::Uniform(-1.0, 1.0))?
            };
            let y = b.g.scatter_add(base, ids, vals)?;
            b.check(y, Cmp::Close(Tol::new(1e-6, 1e-6)));
            Ok(())
        }));
    }
    v.push(Case::new("rows/scatter_add/long-rows", |b| {
        // More values per row than lavapipe lets one invocation loop over in a dispatch (65,535):
        // counts of 100,003 ids per row (ones, so every sum is an exact integer in any order).
        let base = b.input("base", DType::F32, &[300, 2], Gen::Levels(3, 0.0, 2.0))?;
        let ids = b.input("ids", DType::I32, &[100_003, 2], Gen::Ints(-1, 301))?;
        let one = b.input("one", DType::F32, &[1], Gen::Levels(2, 1.0, 1.0))?;
        let y = b.g.scatter_add(base, ids, one)?;
        b.check(y, Cmp::Exact);
        Ok(())
    }));
}

fn linear(v: &mut Vec<Case>) {
    let shapes: [([usize; 4], [usize; 4], &str); 5] = [
        ([64, 33, 1, 1], [64, 5, 1, 1], "64x33x5"),
        ([4097, 7, 1, 1], [4097, 3, 1, 1], "k4097"),
        ([32, 16, 2, 1], [32, 9, 4, 3], "broadcast"),
        ([1, 3, 1, 1], [1, 1, 1, 1], "k1"),
        ([256, 128, 1, 1], [256, 32, 1, 1], "256x128x32"),
    ];
    // Odd K (not a multiple of 8), the matrix-vector path's row blocks (67 x 150, 1 to 4 columns of
    // b, batch 2 broadcast), the matrix-matrix path with K past one pass (4103) and ragged tiles,
    // broadcast over dims 2 and 3.
    let more: [([usize; 4], [usize; 4], &str); 13] = [
        ([37, 19, 1, 1], [37, 1, 1, 1], "37x19x1"),
        ([13, 4, 1, 1], [13, 2, 1, 1], "13x4x2"),
        ([8, 1, 1, 1], [8, 1, 1, 1], "8x1x1"),
        ([40, 9, 2, 1], [40, 3, 4, 1], "broadcast-dim2"),
        ([128, 70, 1, 2], [128, 7, 3, 2], "broadcast-dim3"),
        ([67, 150, 1, 1], [67, 1, 2, 1], "rowblocks-n1"),
        ([67, 150, 1, 1], [67, 2, 2, 1], "rowblocks-n2"),
        ([67, 150, 1, 1], [67, 3, 2, 1], "rowblocks-n3"),
        ([67, 150, 1, 1], [67, 4, 2, 1], "rowblocks-n4"),
        ([4103, 9, 1, 1], [4103, 5, 2, 1], "k4103-n5"),
        ([4103, 9, 1, 1], [4103, 7, 2, 1], "k4103-n7"),
        ([4096, 64, 1, 1], [4096, 3, 1, 1], "k4096x64x3"),
        ([33, 31, 1, 1], [33, 4, 1, 1], "33x31x4"),
    ];
    for d in FLOATS {
        for (sa, sb, what) in shapes.into_iter().chain(more) {
            v.push(Case::new(format!("mul_mat/{}/{what}", dt(d)), move |b| {
                let a = b.param("a", d, &sa, Gen::Uniform(-1.0, 1.0))?;
                let x = b.input("b", DType::F32, &sb, Gen::Uniform(-1.0, 1.0))?;
                let y = b.g.mul_mat(a, x)?;
                b.check(y, Cmp::Close(Tol::new(2e-7 * sa[0] as f64, 1e-5)));
                Ok(())
            }));
        }
    }
    for d in FLOATS {
        v.push(Case::new(format!("mul_mat/{}/window-sources", dt(d)), move |b| {
            let a = source(b, "a", d, [48, 10, 1, 1], Src::Window, Gen::Uniform(-1.0, 1.0))?;
            let x = source(b, "b", DType::F32, [48, 6, 1, 1], Src::Window, Gen::Uniform(-1.0, 1.0))?;
            let y = b.g.mul_mat(a, x)?;
            b.check(y, Cmp::Close(Tol::new(1e-5, 1e-5)));
            Ok(())
        }));
    }
    v.push(Case::new("mul_mat/f32/every-other-row-b", |b| {
        // b as every other row of a bigger input, with strided outer dims, over two batches.
        let big = b.input("big", DType::F32, &[37, 6, 2, 1], Gen::Uniform(-1.0, 1.0))?;
        let e = 4 * 37;
        let x = b.g.view(big, &[37, 3, 2, 1], &[4, 2 * e, 6 * e, 12 * e], e)?;
        let a = b.param("a", DType::F16, &[37, 19, 2, 1], Gen::Uniform(-1.0, 1.0))?;
        let y = b.g.mul_mat(a, x)?;
        b.check(y, Cmp::Close(Tol::new(2e-7 * 37.0, 1e-5)));
        Ok(())
    }));
    for d in FLOATS {
        for (n, src) in [(33, Src::Contig), (4096, Src::Contig), (4097, Src::Window)] {
            v.push(Case::new(format!("norm/rms_norm/{}/{n}/{}", dt(d), src.name()), move |b| {
                let x = source(b, "x", d, [n, 5, 2, 1], src, Gen::Uniform(-3.0, 3.0))?;
                let y = b.g.rms_norm(x, 1e-5)?;
                b.check(y, Cmp::Close(Tol::new(1e-6, 1e-5)));
                Ok(())
            }));
        }
    }
    for mode in [RopeMode::Normal, RopeMode::Neox] {
        for (head, n_dims, base, fscale) in [
            (64, 64, 10000.0, 1.0),
            (128, 64, 500000.0, 0.5),
            (32, 2, 10.0, 1.0),
            (64, 48, 10000.0, 1.0),
            (10, 6, 10000.0, 0.5),
        ] {
            v.push(Case::new(format!("rope/{}/{head}/{n_dims}/{base}/{fscale}", mode.name()), move |b| {
                let x = b.input("x", DType::F32, &[head, 4, 7], Gen::Uniform(-2.0, 2.0))?;
                let pos = b.input("pos", DType::I32, &[7], Gen::Ints(0, 300))?;
                let y = b.g.rope(x, pos, n_dims, mode, base, fscale)?;
                b.check(y, Cmp::Close(Tol::new(2e-4, 1e-4)));
                Ok(())
            }));
        }
    }
}

/// Row lengths at the workgroup/vector edges for the ops whose rows are not the sampling hot path.
fn edge_rows(v: &mut Vec<Case>) {
    for n in EDGE_SIZES.into_iter().filter(|&n| n <= 4097) {
        v.push(Case::new(format!("norm/rms_norm/f32/len{n}"), move |b| {
            let x = b.input("x", DType::F32, &[n, 2], Gen::Uniform(-3.0, 3.0))?;
            let y = b.g.rms_norm(x, 1e-6)?;
            b.check(y, Cmp::Close(Tol::new(1e-6, 1e-5)));
            Ok(())
        }));
        v.push(Case::new(format!("mul_mat/f16/edge-k{n}"), move |b| {
            let a = b.param("a", DType::F16, &[n, 5], Gen::Uniform(-1.0, 1.0))?;
            let x = b.input("b", DType::F32, &[n, 2], Gen::Uniform(-1.0, 1.0))?;
            let y = b.g.mul_mat(a, x)?;
            b.check(y, Cmp::Close(Tol::new(1e-6 + 2e-7 * n as f64, 1e-5)));
            Ok(())
        }));
        v.push(Case::new(format!("random/uniform/len{n}x2"), move |b| {
            let keys = b.input("keys", DType::I32, &[4, 2], Gen::Ints(i64::from(i32::MIN), i64::from(i32::MAX)))?;
            let y = b.g.random_uniform(keys, n, 3)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
        v.push(Case::new(format!("rows/get_rows/bf16/len{n}"), move |b| {
            let a = b.input("a", DType::BF16, &[n, 6], Gen::Uniform(-1.0, 1.0))?;
            let ids = b.input("ids", DType::I32, &[4], Gen::Ints(0, 6))?;
            let y = b.g.get_rows(a, ids)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
    }
}

/// Rope with ggml's `ggml_rope_ext` extras: per-pair frequency factors (LLaMA 3's `rope_freqs`),
/// linear scaling, and YaRN (the extrapolation mix and its magnitude correction).
fn rope_ext(v: &mut Vec<Case>) {
    for mode in [RopeMode::Normal, RopeMode::Neox] {
        for (head, n_dims, ff, fscale, ext) in [
            (64, 64, true, 1.0, 0.0),
            (64, 48, true, 0.25, 0.0),
            (128, 128, false, 0.25, 1.0),
            (32, 32, true, 0.5, 0.5),
        ] {
            let name = format!("rope/{}/ext/{head}/{n_dims}/ff={ff}/{fscale}/{ext}", mode.name());
            v.push(Case::new(name, move |b| {
                let x = b.input("x", DType::F32, &[head, 3, 6], Gen::Uniform(-2.0, 2.0))?;
                let pos = b.input("pos", DType::I32, &[6], Gen::Ints(0, 2000))?;
                let f = if ff { Some(b.input("ff", DType::F32, &[n_dims / 2], Gen::Uniform(1.0, 8.0))?) } else { None };
                let p = RopeParams {
                    ext_factor: ext,
                    attn_factor: if ext != 0.0 { 0.9 } else { 1.0 },
                    n_ctx_orig: 4096,
                    ..RopeParams::new(n_dims as u32, mode, 500000.0, fscale)
                };
                let y = b.g.rope_ext(x, pos, f, p)?;
                // positions up to 2000: the angle's f32 rounding grows with it
                b.check(y, Cmp::Close(Tol::new(2e-3, 1e-3)));
                Ok(())
            }));
        }
    }
}

fn rope_window(v: &mut Vec<Case>) {
    v.push(Case::new("rope/neox/window", |b| {
        // x as a padded window (rows contiguous, outer strides larger).
        let big = b.input("x", DType::F32, &[70, 5, 3], Gen::Uniform(-2.0, 2.0))?;
        let x = b.g.view(big, &[64, 4, 3], &[4, 280, 1400], 8)?;
        let pos = b.input("pos", DType::I32, &[3], Gen::Ints(0, 300))?;
        let y = b.g.rope(x, pos, 32, RopeMode::Neox, 10000.0, 1.0)?;
        b.check(y, Cmp::Close(Tol::new(2e-4, 1e-4)));
        Ok(())
    }));
}

fn softmax(v: &mut Vec<Case>) {
    let tol = Tol::new(1e-9, 2e-5);
    // The normalising sum's rounding error grows like sqrt(n).
    let tol_n = |n: usize| Tol::new(1e-9, 1e-5 + 1e-7 * (n as f64).sqrt());
    for (n, rows) in order_shapes() {
        v.push(Case::new(format!("softmax/f32/{n}x{rows}"), move |b| {
            let x = logits(b, DType::F32, n, rows, Src::Contig, Gen::Uniform(-10.0, 10.0))?;
            let y = b.g.soft_max(x, None, 1.0)?;
            b.check(y, Cmp::Close(tol_n(n)));
            Ok(())
        }));
    }
    v.push(Case::new("softmax/f32/151936x64", move |b| {
        let x = logits(b, DType::F32, 151_936, 64, Src::Contig, Gen::Uniform(-10.0, 10.0))?;
        let y = b.g.soft_max(x, None, 1.0)?;
        b.check(y, Cmp::Close(tol_n(151_936)));
        Ok(())
    }));
    for d in FLOATS {
        v.push(Case::new(format!("softmax/{}/4097x3/window/scale", dt(d)), move |b| {
            let x = logits(b, d, 4097, 3, Src::Window, Gen::Uniform(-10.0, 10.0))?;
            let y = b.g.soft_max(x, None, 0.7)?;
            b.check(y, Cmp::Close(tol));
            Ok(())
        }));
    }
    for dm in [DType::F32, DType::F16] {
        v.push(Case::new(format!("softmax/f32/mask-{}", dt(dm)), move |b| {
            let x = b.input("x", DType::F32, &[67, 5, 6], Gen::Uniform(-5.0, 5.0))?;
            // Causal-looking mask with -inf, more rows than x (extra rows unused), broadcast over ne[2].
            let m = b.input("mask", dm, &[67, 8, 2], Gen::with_special(-1.0, 1.0, 3, 1, f64::NEG_INFINITY))?;
            let y = b.g.soft_max(x, Some(m), 0.125)?;
            b.check(y, Cmp::Close(tol));
            Ok(())
        }));
    }
    for (d, dm) in
        [(DType::F16, DType::F16), (DType::BF16, DType::F16), (DType::F16, DType::F32), (DType::BF16, DType::F32)]
    {
        v.push(Case::new(format!("softmax/{}/mask-{}", dt(d), dt(dm)), move |b| {
            let x = b.input("x", d, &[33, 4, 2], Gen::Uniform(-5.0, 5.0))?;
            let m = b.input("mask", dm, &[33, 4], Gen::with_special(-1.0, 1.0, 5, 2, f64::NEG_INFINITY))?;
            let y = b.g.soft_max(x, Some(m), 1.5)?;
            b.check(y, Cmp::Close(tol));
            Ok(())
        }));
    }
    v.push(Case::new("softmax/bf16/9x2/negative-scale", move |b| {
        let x = b.input("x", DType::BF16, &[9, 2, 2], Gen::Uniform(-10.0, 10.0))?;
        let m = b.input("mask", DType::F16, &[9, 3], Gen::with_special(-1.0, 1.0, 4, 2, f64::NEG_INFINITY))?;
        let y = b.g.soft_max(x, Some(m), -2.0)?;
        b.check(y, Cmp::Close(tol));
        Ok(())
    }));
    v.push(Case::new("softmax/f32/262144x2x2/mask-f32", move |b| {
        // The longest row with a mask of more rows than x, broadcast over ne[2]; row 0 all -inf.
        let x = b.input(
            "x",
            DType::F32,
            &[262_144, 2, 2],
            Gen::func(|rng, i| if i[1] == 0 && i[2] == 0 { f64::NEG_INFINITY } else { rng.unit() * 20.0 - 10.0 }),
        )?;
        let m = b.input("mask", DType::F32, &[262_144, 3], Gen::with_special(-1.0, 1.0, 97, 2, f64::NEG_INFINITY))?;
        let y = b.g.soft_max(x, Some(m), 1.0)?;
        b.check(y, Cmp::Close(tol_n(262_144)));
        Ok(())
    }));
    v.push(Case::new("softmax/f32/large-logits", move |b| {
        // exp overflows f32 above 88.7: only a max-subtracted softmax gets these right.
        let x = b.input("x", DType::F32, &[4097, 3], Gen::Uniform(60.0, 120.0))?;
        let y = b.g.soft_max(x, None, 1.0)?;
        b.check(y, Cmp::Close(tol));
        Ok(())
    }));
    v.push(Case::new("softmax/f32/neg-inf-rows", move |b| {
        // Row 0: all -inf (gives NaN); row 1: one finite entry; rows 2-3: sparse -inf.
        let x = b.input(
            "x",
            DType::F32,
            &[40, 4],
            Gen::func(|rng, idx| match idx[1] {
                0 => f64::NEG_INFINITY,
                1 if idx[0] != 17 => f64::NEG_INFINITY,
                _ if idx[0] % 4 == 0 => f64::NEG_INFINITY,
                _ => rng.unit() * 4.0,
            }),
        )?;
        let y = b.g.soft_max(x, None, 1.0)?;
        b.check(y, Cmp::Close(tol));
        Ok(())
    }));
}

fn reductions(v: &mut Vec<Case>) {
    for &n in &EDGE_SIZES {
        v.push(Case::new(format!("reduce/sum_rows/f32/{n}"), move |b| {
            let x = logits(b, DType::F32, n, 2, Src::Contig, Gen::Uniform(-1.0, 1.0))?;
            let y = b.g.sum_rows(x)?;
            b.check(y, Cmp::Close(sum_tol(n)));
            Ok(())
        }));
        v.push(Case::new(format!("reduce/max_rows/f32/{n}"), move |b| {
            let x = logits(b, DType::F32, n, 2, Src::Contig, Gen::Uniform(-1.0, 1.0))?;
            let y = b.g.max_rows(x)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
        v.push(Case::new(format!("cumsum/f32/{n}"), move |b| {
            // Probabilities-like positive entries: prefix sums grow, error grows like sqrt(n).
            let x = logits(b, DType::F32, n, 2, Src::Contig, Gen::Uniform(0.0, 1.0))?;
            let y = b.g.cumsum(x)?;
            b.check(y, Cmp::Close(Tol::new(1e-6, 1e-6 + 4e-7 * (n as f64).sqrt())));
            Ok(())
        }));
    }
    v.push(Case::new("cumsum/f32/151936x64", |b| {
        let x = logits(b, DType::F32, 151_936, 64, Src::Contig, Gen::Uniform(0.0, 1.0))?;
        let y = b.g.cumsum(x)?;
        b.check(y, Cmp::Close(Tol::new(1e-6, 1e-6 + 4e-7 * 151_936f64.sqrt())));
        Ok(())
    }));
    v.push(Case::new("cumsum/f32/4097x64", |b| {
        let x = logits(b, DType::F32, 4097, 64, Src::Contig, Gen::Uniform(0.0, 1.0))?;
        let y = b.g.cumsum(x)?;
        b.check(y, Cmp::Close(Tol::new(1e-6, 1e-6 + 4e-7 * 4097f64.sqrt())));
        Ok(())
    }));
    for d in FLOATS {
        for src in [Src::Contig, Src::Window] {
            v.push(Case::new(format!("reduce/sum_max_cumsum/{}/{}", dt(d), src.name()), move |b| {
                let x = source(b, "x", d, [4097, 3, 2, 1], src, Gen::Uniform(-1.0, 1.0))?;
                let s = b.g.sum_rows(x)?;
                let m = b.g.max_rows(x)?;
                let c = b.g.cumsum(x)?;
                b.check(s, Cmp::Close(sum_tol(4097)));
                b.check(m, Cmp::Exact);
                b.check(c, Cmp::Close(sum_tol(4097)));
                Ok(())
            }));
        }
    }
    v.push(Case::new("reduce/specials/f32", |b| {
        // Row 0 has a NaN (max and sum propagate it), row 1 is all -inf, row 2 has +inf.
        let x = b.input(
            "x",
            DType::F32,
            &[9, 3],
            Gen::func(|rng, idx| match (idx[1], idx[0]) {
                (0, 4) => f64::NAN,
                (1, _) => f64::NEG_INFINITY,
                (2, 2) => f64::INFINITY,
                _ => rng.unit(),
            }),
        )?;
        let s = b.g.sum_rows(x)?;
        let m = b.g.max_rows(x)?;
        b.check(s, Cmp::Close(sum_tol(9)));
        b.check(m, Cmp::Exact);
        Ok(())
    }));

    // Rows long enough that a GPU backend reduces them in segments (8192 elements each on Vulkan):
    // the specials and ties sit in different segments, so combining the partials must keep the
    // one-pass answer (NaN first and propagated, ties to the lowest index, -inf rows, +inf).
    v.push(Case::new("reduce/segmented/specials", |b| {
        let x = b.input(
            "x",
            DType::F32,
            &[40_000, 4],
            Gen::func(|rng, idx| match (idx[1], idx[0]) {
                (0, 31_000) | (0, 9000) => f64::NAN,
                (1, 100) | (1, 30_000) => 5.0,
                (2, _) => f64::NEG_INFINITY,
                (3, 39_999) => f64::INFINITY,
                _ => rng.unit(),
            }),
        )?;
        let s = b.g.sum_rows(x)?;
        let m = b.g.max_rows(x)?;
        let am = b.g.argmax(x)?;
        b.check(s, Cmp::Close(sum_tol(40_000)));
        b.check(m, Cmp::Exact);
        b.check(am, Cmp::Exact);
        Ok(())
    }));
}

fn indices(b: &mut Builder, y: NodeId, x: NodeId, kind: IndexKind) {
    b.check(y, Cmp::Indices { keys: x, kind, tol: Tol::new(0.0, 0.0) });
}

fn orderings(v: &mut Vec<Case>) {
    // Every NaN (x86's default NaN has its sign bit set) ranks above +inf, NaNs and -0.0/+0.0 tie
    // (lower index first): the exact indices are specified, so compared exactly.
    v.push(Case::new("reduce/orderings/nan_first", |b| {
        let x = b.input(
            "x",
            DType::F32,
            &[37, 4],
            Gen::func(|rng, idx| match (idx[1], idx[0]) {
                (0, 30) => -f64::NAN,
                (0, 5) => f64::INFINITY,
                (1, 7) | (1, 20) => f64::NAN,
                (1, 3) => -f64::NAN,
                (2, 11) => -0.0,
                (2, 4) => 0.0,
                (2, _) => -1.0 - rng.unit(),
                (3, 9) => f64::NEG_INFINITY,
                _ => rng.unit() * 4.0 - 2.0,
            }),
        )?;
        let am = b.g.argmax(x)?;
        let tk = b.g.top_k(x, 5)?;
        let asc = b.g.argsort(x, SortOrder::Asc)?;
        let desc = b.g.argsort(x, SortOrder::Desc)?;
        for y in [am, tk, asc, desc] {
            b.check(y, Cmp::Exact);
        }
        Ok(())
    }));
    for (n, rows) in order_shapes() {
        v.push(Case::new(format!("reduce/argmax/f32/{n}x{rows}"), move |b| {
            let x = logits(b, DType::F32, n, rows, Src::Contig, Gen::Uniform(-10.0, 10.0))?;
            let y = b.g.argmax(x)?;
            indices(b, y, x, IndexKind::Argmax);
            Ok(())
        }));
        for k in [1, 40, 1000] {
            if k > n || (k == 1000 && (rows > 1 || n < 4096)) {
                continue;
            }
            v.push(Case::new(format!("sort/top_k/f32/{n}x{rows}/k{k}"), move |b| {
                let x = logits(b, DType::F32, n, rows, Src::Contig, Gen::Uniform(-10.0, 10.0))?;
                let y = b.g.top_k(x, k)?;
                indices(b, y, x, IndexKind::TopK);
                Ok(())
            }));
        }
        if n <= 4097 || rows == 1 {
            for order in [SortOrder::Asc, SortOrder::Desc] {
                if n > 4097 && order == SortOrder::Asc {
                    continue;
                }
                v.push(Case::new(format!("sort/argsort/f32/{n}x{rows}/{}", order.name()), move |b| {
                    let x = logits(b, DType::F32, n, rows, Src::Contig, Gen::Uniform(-10.0, 10.0))?;
                    let y = b.g.argsort(x, order)?;
                    indices(b, y, x, IndexKind::Argsort(order));
                    Ok(())
                }));
            }
        }
    }
    // Ties at every edge length (few levels: the maximum repeats; the lowest index must win).
    for (n, rows) in order_shapes() {
        v.push(Case::new(format!("reduce/argmax/f32/ties/{n}x{rows}"), move |b| {
            let x = logits(b, DType::F32, n, rows, Src::Contig, Gen::Levels(5, -2.0, 2.0))?;
            let y = b.g.argmax(x)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
    }
    // k past a 2048-entry shared-memory pass.
    for (n, rows) in [(4095, 1), (4097, 1), (4097, 64), (151_936, 1), (262_144, 1)] {
        v.push(Case::new(format!("sort/top_k/f32/{n}x{rows}/k2049"), move |b| {
            let x = logits(b, DType::F32, n, rows, Src::Contig, Gen::Uniform(-30.0, 30.0))?;
            let y = b.g.top_k(x, 2049)?;
            indices(b, y, x, IndexKind::TopK);
            Ok(())
        }));
    }
    // top_k by block minima (the Vulkan path for k <= 512 on long rows): each row of these shapes
    // takes a different branch. Row 0: the winners crowd one block (a radix select among the
    // blocks below the threshold); row 1: ten finite entries, the rest -inf (the ties at -inf come
    // in index order from the blocks at the threshold); row 2: one value throughout; row 3: NaNs
    // rank first; row 4: three levels (ties across many blocks); row 5: plain uniform.
    for (n, ks) in [(4097, &[1usize, 40, 64, 65, 66][..]), (151_936, &[1, 40, 512][..]), (262_144, &[40, 512][..])] {
        for &k in ks {
            v.push(Case::new(format!("sort/top_k/blocks/{n}x6/k{k}"), move |b| {
                let x = logits(
                    b,
                    DType::F32,
                    n,
                    6,
                    Src::Contig,
                    Gen::func(move |rng, i| match i[1] {
                        0 if (1000..1600).contains(&i[0]) => 20.0 + rng.unit(),
                        1 if i[0] % (n / 10) == 7 => rng.unit() * 8.0,
                        1 => f64::NEG_INFINITY,
                        2 => 1.5,
                        3 if i[0] % 997 == 3 => f64::NAN,
                        4 => f64::from((rng.next_u32() % 3) as u8),
                        _ => rng.unit() * 20.0 - 10.0,
                    }),
                )?;
                let y = b.g.top_k(x, k)?;
                b.check(y, Cmp::Exact);
                Ok(())
            }));
        }
    }
    // Stable argsort and top_k on heavy ties (50 levels), exact, from one entry to the longest row.
    for (d, n, rows) in [
        (DType::F32, 262_144, 1),
        (DType::F32, 1000, 64),
        (DType::F32, 5000, 1),
        (DType::F16, 77, 3),
        (DType::BF16, 5, 2),
    ] {
        v.push(Case::new(format!("sort/ties/{}/{n}x{rows}", dt(d)), move |b| {
            let x = logits(b, d, n, rows, Src::Contig, Gen::Levels(50, -12.5, 12.0))?;
            let asc = b.g.argsort(x, SortOrder::Asc)?;
            let desc = b.g.argsort(x, SortOrder::Desc)?;
            let tk = b.g.top_k(x, n.min(300))?;
            let t1 = b.g.top_k(x, 1)?;
            for y in [asc, desc, tk, t1] {
                b.check(y, Cmp::Exact);
            }
            Ok(())
        }));
    }
    // The sampling hot path at full size: a 151936 vocabulary at batch 64.
    v.push(Case::new("reduce/argmax/f32/151936x64", |b| {
        let x = logits(b, DType::F32, 151_936, 64, Src::Contig, Gen::Uniform(-10.0, 10.0))?;
        let y = b.g.argmax(x)?;
        indices(b, y, x, IndexKind::Argmax);
        Ok(())
    }));
    v.push(Case::new("sort/top_k/f32/151936x64/k40", |b| {
        let x = logits(b, DType::F32, 151_936, 64, Src::Contig, Gen::Uniform(-10.0, 10.0))?;
        let y = b.g.top_k(x, 40)?;
        indices(b, y, x, IndexKind::TopK);
        Ok(())
    }));
    for d in FLOATS {
        v.push(Case::new(format!("sort/all/{}/window", dt(d)), move |b| {
            let x = logits(b, d, 4097, 4, Src::Window, Gen::Uniform(-10.0, 10.0))?;
            let am = b.g.argmax(x)?;
            let tk = b.g.top_k(x, 40)?;
            let asc = b.g.argsort(x, SortOrder::Asc)?;
            indices(b, am, x, IndexKind::Argmax);
            indices(b, tk, x, IndexKind::TopK);
            indices(b, asc, x, IndexKind::Argsort(SortOrder::Asc));
            Ok(())
        }));
        // Heavy ties: the op docs fix the order (argmax lowest index, argsort stable, top_k lower index
        // first), so these compare exactly.
        v.push(Case::new(format!("sort/ties/{}", dt(d)), move |b| {
            let x = logits(b, d, 4097, 3, Src::Contig, Gen::Levels(7, -3.0, 3.0))?;
            let am = b.g.argmax(x)?;
            let tk = b.g.top_k(x, 100)?;
            let asc = b.g.argsort(x, SortOrder::Asc)?;
            let desc = b.g.argsort(x, SortOrder::Desc)?;
            for y in [am, tk, asc, desc] {
                b.check(y, Cmp::Exact);
            }
            Ok(())
        }));
    }
    // Adversarial placements: the maximum in the last (tail) element, ascending and descending rows
    // (top values all in the tail or all in the head; presorted input for the sorts).
    for n in [31, 33, 4095, 4097, 151_936] {
        v.push(Case::new(format!("reduce/argmax/f32/max-last/{n}"), move |b| {
            let x = logits(
                b,
                DType::F32,
                n,
                2,
                Src::Contig,
                Gen::func(move |rng, i| if i[0] == n - 1 { 100.0 } else { rng.unit() }),
            )?;
            let y = b.g.argmax(x)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
        for (dir, sign) in [("ascending", 1.0), ("descending", -1.0)] {
            v.push(Case::new(format!("sort/presorted/{dir}/{n}"), move |b| {
                let x = logits(b, DType::F32, n, 2, Src::Contig, Gen::func(move |_, i| sign * i[0] as f64))?;
                let tk = b.g.top_k(x, 40.min(n))?;
                let am = b.g.argmax(x)?;
                b.check(tk, Cmp::Exact);
                b.check(am, Cmp::Exact);
                if n <= 4097 {
                    let asc = b.g.argsort(x, SortOrder::Asc)?;
                    let desc = b.g.argsort(x, SortOrder::Desc)?;
                    b.check(asc, Cmp::Exact);
                    b.check(desc, Cmp::Exact);
                }
                Ok(())
            }));
        }
    }
    v.push(Case::new("sort/neg-inf/f32", |b| {
        // Masked logits: most entries -inf (a top_k after a filter); one row entirely -inf.
        let x = b.input(
            "x",
            DType::F32,
            &[300, 3],
            Gen::func(|rng, idx| if idx[1] == 2 || idx[0] % 10 != 3 { f64::NEG_INFINITY } else { rng.unit() }),
        )?;
        let am = b.g.argmax(x)?;
        let tk = b.g.top_k(x, 40)?;
        let ds = b.g.argsort(x, SortOrder::Desc)?;
        indices(b, am, x, IndexKind::Argmax);
        indices(b, tk, x, IndexKind::TopK);
        indices(b, ds, x, IndexKind::Argsort(SortOrder::Desc));
        Ok(())
    }));
}

/// `top_p_mask` with per-row parameters `rows[r % rows.len()]` = (t, p, min_keep).
fn top_p_case(name: String, n: usize, rows: usize, vals: Gen, params: &'static [[f64; 3]]) -> Case {
    Case::new(name, move |b| {
        let x = b.input("x", DType::F32, &[n, rows], vals.clone())?;
        let pr = b.input("params", DType::F32, &[3, rows], Gen::func(move |_, i| params[i[1] % params.len()][i[0]]))?;
        let y = b.g.top_p_mask(x, pr)?;
        b.check(y, Cmp::Nucleus { x, params: pr, slack: false });
        Ok(())
    })
}

fn top_p_masks(v: &mut Vec<Case>) {
    // Mixed regimes per row: a temperature, a p that is not a round number, p = 0 with min_keep,
    // min_keep above the cut, a cold row, p = 1 (everything).
    const MIXED: &[[f64; 3]] =
        &[[1.0, 0.9, 0.0], [0.7, 0.437, 1.0], [1.5, 0.0, 3.0], [1.0, 0.95, 40.0], [0.25, 0.61, 0.0], [1.0, 1.0, 0.0]];
    for (n, rows) in [(1, 1), (31, 6), (33, 6), (4095, 6), (4097, 6), (151_936, 6), (262_144, 1)] {
        v.push(top_p_case(format!("sort/top_p_mask/f32/{n}x{rows}"), n, rows, Gen::Uniform(-10.0, 10.0), MIXED));
    }
    // Heavy ties (the order is value descending, index ascending, so the cut inside a tie group
    // keeps the lower ids).
    const TIES: &[[f64; 3]] = &[[1.0, 0.61, 0.0], [2.0, 0.3, 0.0], [1.0, 0.999, 0.0], [0.5, 0.05, 5.0]];
    v.push(top_p_case("sort/top_p_mask/ties/4097x4".into(), 4097, 4, Gen::Levels(7, -3.0, 3.0), TIES));
    // A flat vocabulary: every cut is a boundary call, decided in llama.cpp's f32 arithmetic after
    // the selection widened to the whole row.
    const FLAT: &[[f64; 3]] = &[[1.0, 0.5, 0.0], [1.0, 0.3, 0.0], [3.0, 0.9999, 0.0]];
    v.push(top_p_case("sort/top_p_mask/flat/151936x3".into(), 151_936, 3, Gen::func(|_, _| 0.5), FLAT));
    // Peaked rows (one token holds almost all the mass) and rows that are mostly -inf (a vocabulary
    // an earlier stage masked; row 3 has a single finite entry).
    let masked = Gen::func(|rng, i| match i[1] {
        0 if i[0] == 3 => 30.0,
        1 if i[0] == 4000 => 12.0,
        2 if i[0] % 7 != 2 => f64::NEG_INFINITY,
        3 if i[0] != 99 => f64::NEG_INFINITY,
        _ => rng.unit() * 4.0 - 2.0,
    });
    const PEAKED: &[[f64; 3]] = &[[1.0, 0.9, 0.0], [1.0, 0.99, 2.0], [1.0, 0.8, 0.0], [1.0, 0.5, 4.0]];
    v.push(top_p_case("sort/top_p_mask/peaked-and-masked/4097x4".into(), 4097, 4, masked, PEAKED));
    // Bad rows pass through divided by t (NaN, +inf, all -inf: the consumer's check reports them);
    // bad parameters give an all-NaN row; p <= 0 and p >= 1; min_keep beyond the row.
    let bad = Gen::func(|rng, i| match i[1] {
        0 if i[0] == 5 => f64::NAN,
        1 if i[0] == 6 => f64::INFINITY,
        2 => f64::NEG_INFINITY,
        _ => rng.unit() * 8.0 - 4.0,
    });
    const BAD: &[[f64; 3]] = &[
        [1.0, 0.5, 0.0],
        [2.0, 0.5, 0.0],
        [1.0, 0.5, 0.0],
        [0.0, 0.5, 0.0],
        [-1.0, 0.5, 0.0],
        [f64::INFINITY, 0.5, 0.0],
        [f64::NAN, 0.5, 0.0],
        [1.0, f64::NAN, 0.0],
        [1.0, 0.5, -1.0],
        [1.0, 0.5, f64::NAN],
        [1.0, -0.5, 0.0],
        [1.0, f64::NEG_INFINITY, 2.0],
        [1.0, 2.0, 0.0],
        [0.5, f64::INFINITY, 0.0],
        [1.0, 0.2, 1e9],
    ];
    v.push(top_p_case("sort/top_p_mask/bad-rows-and-params/300x15".into(), 300, 15, bad, BAD));
}

/// Rows spanning many 4096-entry blocks with the special values that send a block or a whole row to
/// a slow path (the CPU's block-wise softmax, block-maxima argmax and top_k, vector prefix scan; a
/// GPU's workgroup passes): all `-inf` blocks, a maximum far above the rest in the last block, NaN
/// of both signs, `+inf`, ties across blocks, `-0.0` beside `+0.0`.
fn long_rows(v: &mut Vec<Case>) {
    const N: usize = 3 * 4096 + 123;
    for scale in [1.0f32, 0.3, 2.5] {
        v.push(Case::new(format!("softmax/f32/blocks/scale{scale}"), move |b| {
            // Row 0 plain, row 1 with its middle block all -inf, row 2 with the maximum far above
            // everything in the last block (earlier blocks underflow), row 3 a NaN, row 4 +inf.
            let x = b.input(
                "x",
                DType::F32,
                &[N, 5],
                Gen::func(|rng, i| match (i[1], i[0]) {
                    (1, 4096..8192) => f64::NEG_INFINITY,
                    (2, j) if j == N - 5 => 200.0,
                    (3, 9000) => f64::NAN,
                    (4, 100) => f64::INFINITY,
                    _ => rng.unit() * 16.0 - 8.0,
                }),
            )?;
            let y = b.g.soft_max(x, None, scale)?;
            b.check(y, Cmp::Close(Tol::new(1e-9, 2e-6)));
            Ok(())
        }));
    }
    v.push(Case::new("sort/blocks/f32/100003x4", |b| {
        // Row 0: quarter steps (ties everywhere); row 1: the maximum tied in two blocks; row 2: +inf
        // late, a NaN later, a negative NaN early (the first NaN, any sign, ranks first); row 3:
        // negatives with a negative NaN, -0.0 before +0.0 and a -inf.
        let x = b.input(
            "x",
            DType::F32,
            &[100_003, 4],
            Gen::func(|rng, i| {
                let base = (rng.unit() * 32.0 - 16.0).round() / 4.0;
                match (i[1], i[0]) {
                    (1, 70_000 | 5_000) => 9.0,
                    (2, 60_000) => f64::INFINITY,
                    (2, 90_000) => f64::NAN,
                    (2, 10) | (3, 3) => -f64::NAN,
                    (3, 50_000) => -0.0,
                    (3, 80_000) => 0.0,
                    (3, 99_999) => f64::NEG_INFINITY,
                    (3, _) => -base.abs() - 1.0,
                    _ => base,
                }
            }),
        )?;
        let am = b.g.argmax(x)?;
        b.check(am, Cmp::Exact);
        for k in [1, 40, 200] {
            let tk = b.g.top_k(x, k)?;
            b.check(tk, Cmp::Exact);
        }
        Ok(())
    }));
    v.push(Case::new("cumsum/f32/262147x2/signed", |b| {
        // Partial sums of terms in [-1, 1) wander to a few hundred; f32 rounding over 262k additions.
        let x = b.input("x", DType::F32, &[262_147, 2], Gen::Uniform(-1.0, 1.0))?;
        let y = b.g.cumsum(x)?;
        b.check(y, Cmp::Close(Tol::new(2e-3, 1e-5)));
        Ok(())
    }));
}

fn random(v: &mut Vec<Case>) {
    for (n, rows, stream) in [(1, 1, 0), (33, 5, 0), (4097, 3, 2), (262_144, 1, 1)] {
        v.push(Case::new(format!("random/uniform/{n}x{rows}/stream{stream}"), move |b| {
            let keys = b.input("keys", DType::I32, &[4, rows], Gen::Ints(i64::from(i32::MIN), i64::from(i32::MAX)))?;
            let y = b.g.random_uniform(keys, n, stream)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
    }
    categorical(v);
    spec_verify(v);
}

/// Speculative verification, checked as draws ([`Cmp::Draw`]): the acceptance test against the
/// reference's `a W` and `w_e` (a close call may go either way), the residual draw by its bracket.
/// The fifth key word is the draft token: mostly in range (accepted or not), some -1 (a plain
/// draw), some past the row (none), and in the peaked rows the peak (accepted) or a token of tiny
/// probability (rejected).
fn spec_verify(v: &mut Vec<Case>) {
    const DRAW: Cmp = Cmp::Draw { rel: 1e-6 };
    fn keys(n: usize) -> Gen {
        Gen::func(move |r: &mut Rng, i: [usize; 4]| match (i[0], i[1] % 8) {
            (4, 0) => -1.0,
            (4, 1) => n as f64,
            (4, 2 | 3) => 0.0,
            (4, _) => r.below(n as u64) as f64,
            _ => r.below(1 << 32) as f64 - 2_147_483_648.0,
        })
    }
    for (n, rows, stream) in [(1, 2, 0), (33, 16, 0), (4097, 8, 2), (151_936, 3, 0)] {
        v.push(Case::new(format!("random/spec_verify/{n}x{rows}/stream{stream}"), move |b| {
            // Rows 2 and 3 (mod 8) peak at entry 0: a draft of 0 is nearly always accepted.
            let x = b.input(
                "x",
                DType::F32,
                &[n, rows],
                Gen::func(|r: &mut Rng, i: [usize; 4]| match (i[1] % 8, i[0]) {
                    (2 | 3, 0) => 9.0,
                    _ => r.below(1200) as f64 / 100.0 - 6.0,
                }),
            )?;
            let k = b.input("keys", DType::I32, &[5, rows], keys(n))?;
            let y = b.g.spec_verify(x, k, graph::SpecAux::None, stream)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
    // Per-row scale and cut (as categorical's params case): s = +inf is greedy verification, bad
    // parameters and rows give -1, a cut that removes the draft rejects it.
    for n in [40usize, 3000] {
        v.push(Case::new(format!("random/spec_verify/params/{n}"), move |b| {
            let x = b.input(
                "x",
                DType::F32,
                &[n, 16],
                Gen::func(|r: &mut Rng, i: [usize; 4]| match (i[1], i[0]) {
                    (11, 5) | (11, 9) => 9.0,
                    (12, 7) => f64::NAN,
                    _ => r.below(1000) as f64 / 125.0 - 4.0,
                }),
            )?;
            let k = b.input("keys", DType::I32, &[5, 16], keys(n))?;
            let p = b.input(
                "params",
                DType::F32,
                &[2, 16],
                Gen::func(|r: &mut Rng, i: [usize; 4]| match (i[1], i[0]) {
                    (10 | 11, 0) => f64::INFINITY,
                    (13, 0) => 0.0,
                    (14, 1) => f64::NAN,
                    (15, 1) => 0.0,
                    (_, 0) => 0.3 + r.below(1000) as f64 * 0.0027,
                    (_, _) => -(r.below(1000) as f64) * 0.004,
                }),
            )?;
            let y = b.g.spec_verify(x, k, graph::SpecAux::Params(p), 1)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
    // A candidate list: entries hold distinct token ids of a 50000-token vocabulary (some -1 with
    // a -inf value, as a backend stage leaves removed entries); the draft is an entry's token, a
    // token not in the list, or -1.
    for (k, rows) in [(1usize, 4usize), (40, 24), (1000, 5)] {
        v.push(Case::new(format!("random/spec_verify/ids/{k}x{rows}"), move |b| {
            let removed = |i: [usize; 4]| i[0] % 7 == 3 && i[1] % 3 == 1;
            let x = b.input(
                "x",
                DType::F32,
                &[k, rows],
                Gen::func(
                    move |r: &mut Rng, i: [usize; 4]| {
                        if removed(i) { f64::NEG_INFINITY } else { r.below(1000) as f64 / 100.0 - 5.0 }
                    },
                ),
            )?;
            let ids = b.input(
                "ids",
                DType::I32,
                &[k, rows],
                Gen::func(
                    move |_, i: [usize; 4]| {
                        if removed(i) { -1.0 } else { ((i[0] * 7919 + i[1] * 104_729) % 50_000) as f64 }
                    },
                ),
            )?;
            let keys = b.input(
                "keys",
                DType::I32,
                &[5, rows],
                Gen::func(move |r: &mut Rng, i: [usize; 4]| match (i[0], i[1] % 4) {
                    (4, 0) => ((r.below(k as u64) as usize * 7919 + i[1] * 104_729) % 50_000) as f64,
                    (4, 1) => ((i[1] % 5) * 7919 + i[1] * 104_729) as f64 % 50_000.0,
                    (4, 2) => -1.0,
                    (4, _) => 49_999.0 - (i[1] as f64),
                    _ => r.below(1 << 32) as f64 - 2_147_483_648.0,
                }),
            )?;
            let y = b.g.spec_verify(x, keys, graph::SpecAux::Ids(ids), 0)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
}

/// Categorical draws, checked by their CDF brackets ([`Cmp::Draw`]): a backend's f32 weights may
/// move the target `u W` across a bracket's end by their rounding (about 1e-7 of `W`), never more;
/// `-1` rows must match exactly.
fn categorical(v: &mut Vec<Case>) {
    const DRAW: Cmp = Cmp::Draw { rel: 1e-6 };
    let keys_gen = || Gen::Ints(i64::from(i32::MIN), i64::from(i32::MAX));
    for (n, rows, stream) in [(1, 1, 0), (33, 16, 0), (4097, 8, 2), (151_936, 3, 0)] {
        v.push(Case::new(format!("random/categorical/{n}x{rows}/stream{stream}"), move |b| {
            let x = b.input("x", DType::F32, &[n, rows], Gen::Uniform(-6.0, 6.0))?;
            let keys = b.input("keys", DType::I32, &[4, rows], keys_gen())?;
            let y = b.g.categorical(x, keys, None, None, stream)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
    // Rows 0..8: masked (-inf) entries mixed in; row 8: NaN; row 9: +inf; row 10: all -inf;
    // row 11: one finite entry among -inf; rows 12..: a peaked row whose tail is drawn. The long
    // rows put the specials in different segments of a backend that splits a row (8192 entries a
    // workgroup on Vulkan).
    for n in [300usize, 20_000] {
        let (nan_at, inf_at, finite_at) = if n > 300 { (n - 17, 12_000, n - 1) } else { (50, 7, 77) };
        v.push(Case::new(format!("random/categorical/special_rows/{n}"), move |b| {
            let vals = Gen::Fn(Arc::new(move |r: &mut Rng, i: [usize; 4]| {
                let ninf = f64::NEG_INFINITY;
                match i[1] {
                    0..8 if r.below(3) == 0 => ninf,
                    8 if i[0] == nan_at => f64::NAN,
                    9 if i[0] == inf_at => f64::INFINITY,
                    10 => ninf,
                    11 if i[0] != finite_at => ninf,
                    12.. if i[0] == 3 => 12.0,
                    _ => r.below(1000) as f64 / 100.0 - 5.0,
                }
            }));
            let x = b.input("x", DType::F32, &[n, 16], vals)?;
            let keys = b.input("keys", DType::I32, &[4, 16], keys_gen())?;
            let y = b.g.categorical(x, keys, None, None, 5)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
    // Per-row scale and min-p cut: rows 0..10 random (s in [0.3, 3], off in [-4, 0]); then s = +inf
    // (the first maximum; row 11 has ties of the maximum), s = 0, s = NaN, off = NaN, off = +0.5
    // (nothing passes: -1), off = 0 (only the maxima). At 20,000 the second tie is in another
    // segment than the first.
    for n in [33usize, 5000, 20_000] {
        let tie = if n > 8192 { 15_000 } else { 20 };
        v.push(Case::new(format!("random/categorical/params/{n}"), move |b| {
            let x = b.input(
                "x",
                DType::F32,
                &[n, 17],
                Gen::func(move |r: &mut Rng, i: [usize; 4]| match (i[1], i[0]) {
                    (11, 3) => 9.0,
                    (11, t) if t == tie => 9.0,
                    _ => r.below(1000) as f64 / 125.0 - 4.0,
                }),
            )?;
            let keys = b.input("keys", DType::I32, &[4, 17], keys_gen())?;
            let p = b.input(
                "params",
                DType::F32,
                &[2, 17],
                Gen::func(|r: &mut Rng, i: [usize; 4]| match (i[1], i[0]) {
                    (10 | 11, 0) => f64::INFINITY,
                    (12, 0) => 0.0,
                    (13, 0) => f64::NAN,
                    (14, 1) => f64::NAN,
                    (15, 1) => 0.5,
                    (16, 1) => 0.0,
                    (_, 0) => 0.3 + r.below(1000) as f64 * 0.0027,
                    (_, _) => -(r.below(1000) as f64) * 0.004,
                }),
            )?;
            let y = b.g.categorical(x, keys, Some(p), None, 1)?;
            b.check(y, DRAW);
            Ok(())
        }));
    }
}
