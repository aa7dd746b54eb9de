//! Cases for copies (cont, cast), unary ops, scale, clamp, binary ops, comparisons, where, fill and
//! arange: every dtype combination the builder accepts, broadcasting, and strided / offset / permuted
//! sources (element-wise ops accept any strides).

use super::{Builder, Case, FLOATS};
use crate::compare::{Cmp, Tol};
use crate::generate::Gen;
use graph::{BinaryOp, CompareOp, DType, GraphError, NodeId, UnaryOp};

/// How a source tensor is laid out in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    /// A contiguous input.
    Contig,
    /// A window into a larger input: padded rows (contiguous within a row) at a non-zero offset.
    Window,
    /// The transpose of an input (`nb[0]` is not the element size).
    Transposed,
    /// A 3-axis permutation of an input.
    Permuted,
}

impl Src {
    /// Every layout.
    pub const ALL: [Src; 4] = [Src::Contig, Src::Window, Src::Transposed, Src::Permuted];

    /// Short name for case names.
    pub fn name(self) -> &'static str {
        match self {
            Src::Contig => "contig",
            Src::Window => "window",
            Src::Transposed => "transposed",
            Src::Permuted => "permuted",
        }
    }
}

/// A source of logical shape `ne` (4 dims) laid out as `src` says, filled by `vals_gen`.
pub fn source(
    b: &mut Builder,
    name: &str,
    dtype: DType,
    ne: [usize; 4],
    src: Src,
    vals_gen: Gen,
) -> Result<NodeId, GraphError> {
    let es = dtype.size();
    match src {
        Src::Contig => b.input(name, dtype, &ne, vals_gen),
        Src::Window => {
            let (p0, p1) = (ne[0] + 3, ne[1] + 1);
            let big = b.input(name, dtype, &[p0, p1, ne[2], ne[3]], vals_gen)?;
            let nb = [es, p0 * es, p0 * p1 * es, p0 * p1 * ne[2] * es];
            b.g.view(big, &ne, &nb, (1 + p0) * es)
        }
        Src::Transposed => {
            let t = b.input(name, dtype, &[ne[1], ne[0], ne[2], ne[3]], vals_gen)?;
            b.g.transpose(t)
        }
        Src::Permuted => {
            let p = b.input(name, dtype, &[ne[2], ne[0], ne[1], ne[3]], vals_gen)?;
            b.g.permute(p, [2, 0, 1, 3])
        }
    }
}

/// Tolerance of correctly rounded (or nearly: division) f32 arithmetic.
pub const ARITH: Tol = Tol::new(1e-30, 4e-7);
/// Tolerance of transcendental functions.
pub const TRANSC: Tol = Tol::new(1e-6, 4e-6);

fn unary_domain(op: UnaryOp) -> Gen {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt => Gen::Uniform(0.01, 8.0),
        UnaryOp::Exp => Gen::Uniform(-8.0, 8.0),
        UnaryOp::Silu | UnaryOp::Gelu => Gen::Uniform(-8.0, 8.0),
        UnaryOp::Neg | UnaryOp::Sqr => Gen::Uniform(-10.0, 10.0),
    }
}

fn cmp_for(op: UnaryOp) -> Cmp {
    match op {
        UnaryOp::Neg => Cmp::Exact,
        UnaryOp::Sqr | UnaryOp::Sqrt => Cmp::Close(ARITH),
        _ => Cmp::Close(TRANSC),
    }
}

fn dt(d: DType) -> &'static str {
    d.name()
}

/// Every element-wise case.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    copies(&mut v);
    view_outputs(&mut v);
    unary(&mut v);
    binary(&mut v);
    compare_where(&mut v);
    fill(&mut v);
    v
}

fn copies(v: &mut Vec<Case>) {
    for d in graph::DType::ALL {
        for src in Src::ALL {
            v.push(Case::new(format!("copy/cont/{}/{}", dt(d), src.name()), move |b| {
                let vals_gen = if d == DType::I32 { Gen::Ints(-1000, 1000) } else { Gen::Uniform(-4.0, 4.0) };
                let x = source(b, "x", d, [33, 5, 3, 1], src, vals_gen)?;
                let y = b.g.cont(x)?;
                b.check(y, Cmp::Exact);
                Ok(())
            }));
        }
        for to in graph::DType::ALL {
            for src in [Src::Window, Src::Transposed] {
                let name = if src == Src::Window {
                    format!("copy/cast/{}->{}", dt(d), dt(to))
                } else {
                    format!("copy/cast/{}->{}/{}", dt(d), dt(to), src.name())
                };
                v.push(Case::new(name, move |b| {
                    // Fractions (truncation), large values (saturation and 16-bit overflow) and, for float
                    // sources, NaN and infinities at fixed positions.
                    let vals_gen = if d == DType::I32 {
                        Gen::func(|rng, idx| match idx[0] % 5 {
                            0 => (rng.below(1 << 26) as f64) - f64::from(1 << 25),
                            1 => f64::from(i32::MAX - rng.below(200) as i32),
                            _ => rng.below(2001) as f64 - 1000.0,
                        })
                    } else {
                        Gen::func(|rng, idx| match idx[0] {
                            0 => f64::NAN,
                            1 => f64::INFINITY,
                            2 => f64::NEG_INFINITY,
                            3 => 3.0e9,
                            4 => -7.0e4,
                            _ => (rng.unit() - 0.5) * 2000.0,
                        })
                    };
                    let x = source(b, "x", d, [37, 4, 2, 1], src, vals_gen)?;
                    let y = b.g.cast(x, to)?;
                    b.check(y, Cmp::Exact);
                    Ok(())
                }));
            }
        }
    }
}

fn view_outputs(v: &mut Vec<Case>) {
    // Outputs that are views of computed tensors: read back in logical (gathered) order.
    v.push(Case::new("copy/view-output/transpose", |b| {
        let x = b.input("x", DType::F32, &[33, 5], Gen::Uniform(-1.0, 1.0))?;
        let y = b.g.scale(x, 3.0)?;
        let t = b.g.transpose(y)?;
        b.check(t, Cmp::Close(ARITH));
        Ok(())
    }));
    v.push(Case::new("copy/view-output/window", |b| {
        let x = b.input("x", DType::F16, &[33, 5, 2], Gen::Uniform(-1.0, 1.0))?;
        let y = b.g.neg(x)?;
        let w = b.g.view(y, &[7, 3, 2], &[2, 66, 330], 2 * (1 + 33))?;
        b.check(w, Cmp::Exact);
        Ok(())
    }));
}

fn unary(v: &mut Vec<Case>) {
    for d in FLOATS {
        for op in UnaryOp::ALL {
            for src in [Src::Contig, Src::Transposed, Src::Permuted] {
                v.push(Case::new(format!("unary/{}/{}/{}", op.name(), dt(d), src.name()), move |b| {
                    let x = source(b, "x", d, [67, 6, 2, 1], src, unary_domain(op))?;
                    let y = b.g.unary(op, x)?;
                    b.check(y, cmp_for(op));
                    Ok(())
                }));
            }
        }
        for src in [Src::Contig, Src::Window, Src::Permuted] {
            v.push(Case::new(format!("unary/scale/{}/{}", dt(d), src.name()), move |b| {
                let x = source(b, "x", d, [33, 4, 3, 1], src, Gen::Uniform(-10.0, 10.0))?;
                let y = b.g.scale_bias(x, 0.7, -1.25)?;
                // Two roundings (or one, fused) of terms up to 8.25: absolute error ~ 2^-23 * 8.25.
                b.check(y, Cmp::Close(Tol::new(2e-6, 4e-7)));
                Ok(())
            }));
            v.push(Case::new(format!("unary/clamp/{}/{}", dt(d), src.name()), move |b| {
                let vals_gen = Gen::with_special(-2.0, 2.0, 11, 5, f64::NEG_INFINITY);
                let x = source(b, "x", d, [33, 4, 3, 1], src, vals_gen)?;
                let y = b.g.clamp(x, -0.5, 0.75)?;
                b.check(y, Cmp::Exact);
                Ok(())
            }));
        }
    }
    // Edge lengths for vectorised loops and workgroups with tails.
    for n in super::EDGE_SIZES {
        v.push(Case::new(format!("unary/exp/f32/len{n}"), move |b| {
            let x = b.input("x", DType::F32, &[n], Gen::Uniform(-80.0, 80.0))?;
            let y = b.g.exp(x)?;
            b.check(y, Cmp::Close(TRANSC));
            Ok(())
        }));
        v.push(Case::new(format!("binary/add/f16xf32/len{n}"), move |b| {
            let x = b.input("a", DType::F16, &[n], Gen::Uniform(-4.0, 4.0))?;
            let y = b.input("b", DType::F32, &[n], Gen::Uniform(-4.0, 4.0))?;
            let z = b.g.add(x, y)?;
            b.check(z, Cmp::Close(ARITH));
            Ok(())
        }));
        if n <= 4097 {
            v.push(Case::new(format!("fill/edge/len{n}"), move |b| {
                let f = b.g.fill(DType::F16, &[n, 3], f32::NEG_INFINITY)?;
                let fb = b.g.fill(DType::BF16, &[n], 0.1)?;
                let fi = b.g.fill(DType::I32, &[n, 2], 7.0)?;
                let ai = b.g.arange(DType::I32, &[n, 2], -3.0, 2.0)?;
                for y in [f, fb, fi, ai] {
                    b.check(y, Cmp::Exact);
                }
                Ok(())
            }));
            v.push(Case::new(format!("copy/cont/f32/transposed/len{n}"), move |b| {
                let x = source(b, "x", DType::F32, [6, n, 1, 1], Src::Transposed, Gen::Uniform(-7e4, 7e4))?;
                let y = b.g.cont(x)?;
                b.check(y, Cmp::Exact);
                Ok(())
            }));
        }
        v.push(Case::new(format!("copy/cast/f32->bf16/len{n}"), move |b| {
            let x = b.input("x", DType::F32, &[n], Gen::Uniform(-4.0, 4.0))?;
            let y = b.g.cast(x, DType::BF16)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
    }
    v.push(Case::new("unary/specials/f32", |b| {
        let specials = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, -1.0, 1e-30, 100.0, -100.0];
        let x = b.input("x", DType::F32, &[8], Gen::func(move |_, idx| specials[idx[0]]))?;
        let e = b.g.exp(x)?;
        let l = b.g.log(x)?;
        let s = b.g.sqrt(x)?;
        let sc = b.g.scale_bias(x, 2.0, f32::NEG_INFINITY)?;
        b.check(e, Cmp::Close(TRANSC));
        b.check(l, Cmp::Close(TRANSC));
        b.check(s, Cmp::Close(ARITH));
        b.check(sc, Cmp::Exact);
        Ok(())
    }));
}

fn binary(v: &mut Vec<Case>) {
    for da in FLOATS {
        for db in FLOATS {
            for op in BinaryOp::ALL {
                v.push(Case::new(format!("binary/{}/{}x{}/broadcast", op.name(), dt(da), dt(db)), move |b| {
                    let x = b.input("a", da, &[33, 4, 2], Gen::Uniform(-4.0, 4.0))?;
                    let vals_gen = if op == BinaryOp::Div { Gen::Uniform(0.5, 2.0) } else { Gen::Uniform(-4.0, 4.0) };
                    let y = b.input("b", db, &[33, 1, 2], vals_gen)?;
                    let z = b.g.binary(op, x, y)?;
                    b.check(z, Cmp::Close(ARITH));
                    Ok(())
                }));
            }
        }
    }
    for op in BinaryOp::ALL {
        for src in [Src::Window, Src::Transposed, Src::Permuted] {
            v.push(Case::new(format!("binary/{}/f32/{}", op.name(), src.name()), move |b| {
                let x = source(b, "a", DType::F32, [17, 6, 4, 1], src, Gen::Uniform(-4.0, 4.0))?;
                let y = source(b, "b", DType::F32, [17, 3, 1, 1], src, Gen::Uniform(0.5, 3.0))?;
                let z = b.g.binary(op, x, y)?;
                b.check(z, Cmp::Close(ARITH));
                Ok(())
            }));
        }
        for (shape_b, what) in [([1usize, 1, 1, 1], "scalar"), ([1, 5, 1, 1], "column"), ([1, 5, 1, 2], "outer")] {
            v.push(Case::new(format!("binary/{}/f32/{what}", op.name()), move |b| {
                let x = b.input("a", DType::F32, &[4097, 5, 3, 2], Gen::Uniform(-4.0, 4.0))?;
                let y = b.input("b", DType::F32, &shape_b, Gen::Uniform(0.5, 3.0))?;
                let z = b.g.binary(op, x, y)?;
                b.check(z, Cmp::Close(ARITH));
                Ok(())
            }));
        }
    }
    for (da, db) in [(DType::F32, DType::F32), (DType::F16, DType::BF16), (DType::BF16, DType::F32)] {
        for op in BinaryOp::ALL {
            v.push(Case::new(format!("binary/{}/{}x{}/tile", op.name(), dt(da), dt(db)), move |b| {
                // b repeats along dims 1 and 3 (2 of a's 4 rows, 1 of 2 batches): ggml's repeat.
                let x = b.input("a", da, &[5, 4, 3, 2], Gen::Levels(17, -2.0, 2.0))?;
                let y = b.input("b", db, &[5, 2, 3, 1], Gen::Levels(7, 0.5, 2.0))?;
                let z = b.g.binary(op, x, y)?;
                b.check(z, Cmp::Close(ARITH));
                Ok(())
            }));
        }
    }
    v.push(Case::new("binary/div/f32/by-zero", |b| {
        let x = b.input("a", DType::F32, &[4], Gen::func(|_, i| [1.0, -1.0, 0.0, 2.0][i[0]]))?;
        let y = b.input("b", DType::F32, &[4], Gen::func(|_, i| [0.0, 0.0, 0.0, -0.0][i[0]]))?;
        let z = b.g.div(x, y)?;
        b.check(z, Cmp::Exact);
        Ok(())
    }));
}

fn compare_where(v: &mut Vec<Case>) {
    let mut pairs: Vec<(DType, DType)> = FLOATS.iter().flat_map(|&a| FLOATS.iter().map(move |&b| (a, b))).collect();
    pairs.push((DType::I32, DType::I32));
    for (da, db) in pairs {
        for op in CompareOp::ALL {
            v.push(Case::new(format!("binary/{}/{}x{}", op.name(), dt(da), dt(db)), move |b| {
                // Few levels, so equality and both orders occur often; NaN at fixed positions.
                let vals_gen = |nan: bool| {
                    Gen::func(move |rng, idx| if nan && idx[0] == 3 { f64::NAN } else { rng.below(5) as f64 - 2.0 })
                };
                let x = source(b, "a", da, [31, 4, 2, 1], Src::Transposed, vals_gen(da.is_float()))?;
                let y = b.input("b", db, &[31, 1, 2], vals_gen(db.is_float()))?;
                let z = b.g.compare(op, x, y)?;
                b.check(z, Cmp::Mask);
                Ok(())
            }));
        }
    }
    for op in CompareOp::ALL {
        v.push(Case::new(format!("binary/{}/i32xi32/beyond-f32", op.name()), move |b| {
            // 2^24 + 1 and 2^24 round to the same f32: an i32 compare must not go through f32.
            let x =
                b.input("a", DType::I32, &[6, 3], Gen::func(|rng, _| f64::from(1 << 24) + rng.below(3) as f64 - 1.0))?;
            let y = b.input("b", DType::I32, &[1, 3], Gen::func(|_, i| [16_777_216.0, 16_777_217.0, -3.0][i[1]]))?;
            let z = b.g.compare(op, x, y)?;
            b.check(z, Cmp::Mask);
            Ok(())
        }));
    }
    v.push(Case::new("binary/where/mask-specials/i32", |b| {
        // Any non-zero mask value selects a (NaN and -0.5 included); -0.0 selects b like 0.
        let specials = [1.0, 0.0, -0.5, -0.0, 2.0, f64::NAN];
        let m = b.input("mask", DType::F32, &[6, 1], Gen::func(move |_, i| specials[i[0]]))?;
        let x = b.input("a", DType::I32, &[6, 3], Gen::Ints(-100, 100))?;
        let y = b.input("b", DType::I32, &[6, 3], Gen::Ints(1000, 1100))?;
        let z = b.g.where_(m, x, y)?;
        b.check(z, Cmp::Exact);
        Ok(())
    }));
    v.push(Case::new("binary/where/f32/scalar-fallback", |b| {
        // A computed mask and a one-element fallback broadcast over everything (a filter's -inf).
        let x = b.input("a", DType::F32, &[33, 4, 3], Gen::Levels(9, -2.0, 2.0))?;
        let t = b.input("t", DType::F32, &[1, 4, 1], Gen::Levels(5, -1.0, 1.0))?;
        let m = b.g.compare(CompareOp::Gt, x, t)?;
        let fb = b.g.fill(DType::F32, &[1], f32::NEG_INFINITY)?;
        let z = b.g.where_(m, x, fb)?;
        b.check(z, Cmp::Exact);
        Ok(())
    }));
    for dm in FLOATS {
        for d in graph::DType::ALL {
            v.push(Case::new(format!("binary/where/mask-{}/{}", dt(dm), dt(d)), move |b| {
                let m = b.input("mask", dm, &[29, 3, 1], Gen::Levels(3, -1.0, 1.0))?;
                let vals_gen = if d == DType::I32 { Gen::Ints(-50, 50) } else { Gen::Uniform(-3.0, 3.0) };
                let x = source(b, "a", d, [29, 3, 4, 1], Src::Window, vals_gen.clone())?;
                let y = b.input("b", d, &[1, 3, 4], vals_gen)?;
                let z = b.g.where_(m, x, y)?;
                b.check(z, Cmp::Exact);
                Ok(())
            }));
        }
    }
}

fn fill(v: &mut Vec<Case>) {
    for d in graph::DType::ALL {
        let values: &[f32] = if d == DType::I32 { &[-3.0, 0.0] } else { &[0.1, f32::NEG_INFINITY] };
        for &value in values {
            v.push(Case::new(format!("fill/fill/{}/{value}", dt(d)), move |b| {
                let y = b.g.fill(d, &[33, 5, 2], value)?;
                // A fill feeding an op, so the constant is also used, not only read back.
                let x = b.input("x", d, &[33, 5, 2], Gen::Ints(-3, 3))?;
                let m = b.g.compare(CompareOp::Eq, x, y)?;
                b.check(y, Cmp::Exact);
                b.check(m, Cmp::Mask);
                Ok(())
            }));
        }
    }
    for (d, start, step) in [(DType::F32, 0.5, 0.25), (DType::F32, -3.0, 0.1), (DType::I32, 5.0, -2.0)] {
        for n in [1, 33, 4097] {
            v.push(Case::new(format!("fill/arange/{}/{start}/{step}/{n}", dt(d)), move |b| {
                let y = b.g.arange(d, &[n, 3], start, step)?;
                // start + step * i0 in f32 (fused or not): error relative to the terms, not the result.
                let terms = f64::from(start.abs()) + f64::from(step.abs()) * n as f64;
                b.check(y, Cmp::Close(Tol::new(2.4e-7 * terms, 2.4e-7)));
                Ok(())
            }));
        }
    }
}
