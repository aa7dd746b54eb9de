//! Every op family on the Vulkan backend against the CPU backend (`cpu::CpuBackend`, the oracle),
//! on the edge sizes 1, 31, 32, 33, 4095, 4096, 4097, 151936 and 262144 (row ops at batch 1 and 64),
//! under the validation layer. Tensors are packed into one buffer at non-zero offsets on the Vulkan
//! side, so offset handling is exercised too.

mod common;

use common::*;
use graph::{BinaryOp, CompareOp, DType, Graph, NodeId, RopeMode, SortOrder, UnaryOp};
use sched::Backend;
use vulkan::VulkanBackend;

const SIZES: [usize; 9] = [1, 31, 32, 33, 4095, 4096, 4097, 151_936, 262_144];
const SMALL: [usize; 7] = [1, 31, 32, 33, 4095, 4096, 4097];

/// How outputs are compared.
#[derive(Clone, Copy)]
enum Cmp {
    /// Bit-identical bytes.
    Exact,
    /// Within `atol + rtol * |cpu|`.
    Close(f64, f64),
    /// i32 indices into the rows of input `src` (f32 values `[ne0, rows]`): the selected values
    /// must be equal position by position (ties may pick different indices) and distinct per row.
    Indices { ne0: usize, k: usize },
}

struct Case {
    g: Graph,
    inputs: Vec<(NodeId, Vec<u8>)>,
    outputs: Vec<NodeId>,
}

fn check(vk: &mut VulkanBackend, cpu: &mut cpu::CpuBackend, what: &str, c: &Case, cmp: Cmp, src: Option<&[f32]>) {
    for &o in &c.outputs {
        assert!(vk.supports(&c.g, o), "{what}: vulkan should support {}", c.g.describe(o));
    }
    let got = run(vk, &c.g, &c.inputs, &c.outputs, true);
    let want = run(cpu, &c.g, &c.inputs, &c.outputs, false);
    assert_clean(vk);
    for (i, &o) in c.outputs.iter().enumerate() {
        let d = c.g.node(o).dtype;
        let what = format!("{what} output {}", c.g.describe(o));
        match cmp {
            Cmp::Exact => {
                if got[i] != want[i] {
                    let (g, w) = (values(d, &got[i]), values(d, &want[i]));
                    let first = g.iter().zip(&w).position(|(a, b)| a.to_bits() != b.to_bits());
                    panic!(
                        "{what}: differs first at {first:?}: vulkan {:?} cpu {:?}",
                        first.map(|f| g[f]),
                        first.map(|f| w[f])
                    );
                }
            }
            Cmp::Close(atol, rtol) => assert_close(&what, &values(d, &got[i]), &values(d, &want[i]), atol, rtol),
            Cmp::Indices { ne0, k } => {
                let src = src.expect("indices need the source");
                let (g, w) = (to_i32(&got[i]), to_i32(&want[i]));
                for (r, (gr, wr)) in g.chunks(k).zip(w.chunks(k)).enumerate() {
                    let row = &src[r * ne0..(r + 1) * ne0];
                    let mut seen = std::collections::HashSet::new();
                    for (j, (&a, &b)) in gr.iter().zip(wr).enumerate() {
                        assert!(a >= 0 && (a as usize) < ne0, "{what}: row {r} pos {j}: index {a} out of range");
                        assert!(seen.insert(a), "{what}: row {r}: index {a} twice");
                        assert_eq!(
                            row[a as usize].to_bits(),
                            row[b as usize].to_bits(),
                            "{what}: row {r} pos {j}: vulkan picks {a} ({}), cpu {b} ({})",
                            row[a as usize],
                            row[b as usize]
                        );
                    }
                }
            }
        }
    }
}

fn backends(test: &str) -> Option<(VulkanBackend, cpu::CpuBackend)> {
    Some((vulkan(test)?, cpu::CpuBackend::new()))
}

/// A graph with one f32 input `[ne0, rows]` and the op `f` applied to it as the output.
fn unary_case(ne0: usize, rows: usize, x: &[f32], f: impl FnOnce(&mut Graph, NodeId) -> NodeId) -> Case {
    let mut g = Graph::new();
    let a = g.input("x", DType::F32, &[ne0, rows]).unwrap();
    let o = f(&mut g, a);
    g.set_output(o);
    Case { g, inputs: vec![(a, f32_bytes(x))], outputs: vec![o] }
}

#[test]
fn fill_and_arange() {
    let Some((mut vk, mut cpu)) = backends("fill_and_arange") else { return };
    for &n in &SMALL {
        let mut g = Graph::new();
        let f = g.fill(DType::F32, &[n, 3], -1.5).unwrap();
        let fi = g.fill(DType::I32, &[n, 2], 7.0).unwrap();
        let fh = g.fill(DType::F16, &[n, 3], f32::NEG_INFINITY).unwrap();
        let fb = g.fill(DType::BF16, &[n], 0.1).unwrap();
        let ar = g.arange(DType::F32, &[n, 2], 0.5, 0.25).unwrap();
        let ai = g.arange(DType::I32, &[n, 2], -3.0, 2.0).unwrap();
        let outs = vec![f, fi, fh, fb, ar, ai];
        for &o in &outs {
            g.set_output(o);
        }
        check(&mut vk, &mut cpu, &format!("fill n={n}"), &Case { g, inputs: vec![], outputs: outs }, Cmp::Exact, None);
    }
}

#[test]
fn copy_cont_cast_and_strided_views() {
    let Some((mut vk, mut cpu)) = backends("copy_cont_cast_and_strided_views") else { return };
    for &n in &[1usize, 31, 33, 4097] {
        let x = data(n * 6, 1, -70000.0, 70000.0);
        let mut g = Graph::new();
        let a = g.input("x", DType::F32, &[n, 6]).unwrap();
        let t = g.transpose(a).unwrap();
        let ct = g.cont(t).unwrap();
        let h = g.cast(a, DType::F16).unwrap();
        let b = g.cast(a, DType::BF16).unwrap();
        let i = g.cast(a, DType::I32).unwrap();
        let hf = g.cast(h, DType::F32).unwrap();
        let hb = g.cast(h, DType::BF16).unwrap();
        let ih = g.cast(i, DType::F16).unwrap();
        let v = g.view(a, &[n.div_ceil(2), 3], &[8, 8 * n], 4).unwrap_or(a);
        let cv = g.cont(v).unwrap();
        let outs = vec![ct, h, b, i, hf, hb, ih, cv];
        for &o in &outs {
            g.set_output(o);
        }
        let c = Case { g, inputs: vec![(a, f32_bytes(&x))], outputs: outs };
        check(&mut vk, &mut cpu, &format!("copy n={n}"), &c, Cmp::Exact, None);
    }
}

#[test]
fn unary_scale_clamp() {
    let Some((mut vk, mut cpu)) = backends("unary_scale_clamp") else { return };
    for &n in &[1usize, 33, 4097] {
        let mut x = data(n * 2, 2, -8.0, 8.0);
        x[0] = 0.0;
        for op in UnaryOp::ALL {
            let c = unary_case(n, 2, &x, |g, a| g.unary(op, a).unwrap());
            check(&mut vk, &mut cpu, &format!("{} n={n}", op.name()), &c, Cmp::Close(1e-6, 2e-5), None);
        }
        let c = unary_case(n, 2, &x, |g, a| g.scale_bias(a, 0.5, -1.0).unwrap());
        check(&mut vk, &mut cpu, "scale", &c, Cmp::Exact, None);
        let c = unary_case(n, 2, &x, |g, a| g.clamp(a, -1.0, 2.0).unwrap());
        check(&mut vk, &mut cpu, "clamp", &c, Cmp::Exact, None);
        let c = unary_case(n, 2, &x, |g, a| {
            let h = g.cast(a, DType::F16).unwrap();
            g.unary(UnaryOp::Sqr, h).unwrap()
        });
        check(&mut vk, &mut cpu, "sqr f16", &c, Cmp::Exact, None);
    }
}

#[test]
fn binary_compare_where_broadcast() {
    let Some((mut vk, mut cpu)) = backends("binary_compare_where_broadcast") else { return };
    for &n in &[1usize, 32, 4095] {
        let x = small_ints(n * 4 * 3, 3, 4);
        let y = small_ints(n * 2, 4, 4);
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[n, 4, 3]).unwrap();
        let b = g.input("b", DType::F32, &[n, 2]).unwrap();
        let b1 = g.input("b1", DType::F32, &[1, 4, 1]).unwrap();
        let mut outs = vec![];
        for op in BinaryOp::ALL {
            outs.push(g.binary(op, a, b).unwrap());
            outs.push(g.binary(op, a, b1).unwrap());
        }
        for op in CompareOp::ALL {
            outs.push(g.compare(op, a, b).unwrap());
        }
        let m = g.compare(CompareOp::Gt, a, b1).unwrap();
        let fb = g.fill(DType::F32, &[1], f32::NEG_INFINITY).unwrap();
        outs.push(g.where_(m, a, fb).unwrap());
        let ai = g.cast(a, DType::I32).unwrap();
        let bi = g.cast(b, DType::I32).unwrap();
        outs.push(g.compare(CompareOp::Ge, ai, bi).unwrap());
        let ah = g.cast(a, DType::F16).unwrap();
        outs.push(g.binary(BinaryOp::Mul, ah, b).unwrap());
        for &o in &outs {
            g.set_output(o);
        }
        let b1v = [1.0f32, -2.0, 0.0, 3.0];
        let c = Case { g, inputs: vec![(a, f32_bytes(&x)), (b, f32_bytes(&y)), (b1, f32_bytes(&b1v))], outputs: outs };
        check(&mut vk, &mut cpu, &format!("binary n={n}"), &c, Cmp::Close(0.0, 1e-7), None);
    }
}

#[test]
fn reductions_all_sizes() {
    let Some((mut vk, mut cpu)) = backends("reductions_all_sizes") else { return };
    for &n in &SIZES {
        for rows in [1usize, 64] {
            let x = small_ints(n * rows, n as u64, 3);
            let c = unary_case(n, rows, &x, |g, a| g.sum_rows(a).unwrap());
            check(&mut vk, &mut cpu, &format!("sum_rows [{n}, {rows}]"), &c, Cmp::Exact, None);
            let c = unary_case(n, rows, &x, |g, a| g.max_rows(a).unwrap());
            check(&mut vk, &mut cpu, &format!("max_rows [{n}, {rows}]"), &c, Cmp::Exact, None);
            // argmax: ties (many, with small ints) must pick the lowest index.
            let c = unary_case(n, rows, &x, |g, a| g.argmax(a).unwrap());
            check(&mut vk, &mut cpu, &format!("argmax ties [{n}, {rows}]"), &c, Cmp::Exact, None);
            let xf = data(n * rows, n as u64 + 7, -20.0, 20.0);
            let c = unary_case(n, rows, &xf, |g, a| g.argmax(a).unwrap());
            check(&mut vk, &mut cpu, &format!("argmax [{n}, {rows}]"), &c, Cmp::Exact, None);
        }
    }
}

#[test]
fn softmax_and_cumsum_all_sizes() {
    let Some((mut vk, mut cpu)) = backends("softmax_and_cumsum_all_sizes") else { return };
    for &n in &SIZES {
        for rows in [1usize, 64] {
            let mut x = data(n * rows, n as u64 + 11, -10.0, 10.0);
            x[0] = f32::NEG_INFINITY;
            let c = unary_case(n, rows, &x, |g, a| g.soft_max(a, None, 0.7).unwrap());
            check(&mut vk, &mut cpu, &format!("soft_max [{n}, {rows}]"), &c, Cmp::Close(1e-9, 1e-4), None);
            let xi = small_ints(n * rows, n as u64 + 3, 2);
            let c = unary_case(n, rows, &xi, |g, a| g.cumsum(a).unwrap());
            check(&mut vk, &mut cpu, &format!("cumsum [{n}, {rows}]"), &c, Cmp::Exact, None);
        }
    }
    // a mask with extra rows, broadcast over dim 2, in f16
    let (n, rows) = (33usize, 4usize);
    let mut g = Graph::new();
    let a = g.input("x", DType::F32, &[n, rows, 2]).unwrap();
    let m = g.input("m", DType::F32, &[n, rows + 2]).unwrap();
    let mh = g.cast(m, DType::F16).unwrap();
    let o = g.soft_max(a, Some(mh), 0.5).unwrap();
    let o2 = g.soft_max(a, Some(m), 1.0).unwrap();
    g.set_output(o);
    g.set_output(o2);
    let mut mv = data(n * (rows + 2), 5, -3.0, 3.0);
    mv[3] = f32::NEG_INFINITY;
    let c = Case {
        g,
        inputs: vec![(a, f32_bytes(&data(n * rows * 2, 6, -5.0, 5.0))), (m, f32_bytes(&mv))],
        outputs: vec![o, o2],
    };
    check(&mut vk, &mut cpu, "soft_max mask", &c, Cmp::Close(1e-9, 1e-4), None);
    // a float cumsum with rounding: tolerance relative to the running absolute sum
    let x = data(4097 * 2, 9, -1.0, 1.0);
    let c = unary_case(4097, 2, &x, |g, a| g.cumsum(a).unwrap());
    check(&mut vk, &mut cpu, "cumsum float", &c, Cmp::Close(1e-3, 1e-4), None);
}

#[test]
fn top_k_and_argsort() {
    let Some((mut vk, mut cpu)) = backends("top_k_and_argsort") else { return };
    for &n in &SIZES {
        for rows in [1usize, 64] {
            let x = data(n * rows, n as u64 + 21, -30.0, 30.0);
            // Large k on the big rows is covered at batch 1; lavapipe is slow.
            let ks: &[usize] = if n <= 4097 || rows == 1 { &[1, 40, 2049] } else { &[1, 40] };
            for &k in ks {
                let k = k.min(n);
                let c = unary_case(n, rows, &x, |g, a| g.top_k(a, k).unwrap());
                check(
                    &mut vk,
                    &mut cpu,
                    &format!("top_k({k}) [{n}, {rows}]"),
                    &c,
                    Cmp::Indices { ne0: n, k },
                    Some(&x),
                );
            }
            if rows == 1 || n <= 4097 {
                for order in [SortOrder::Desc, SortOrder::Asc] {
                    let c = unary_case(n, rows, &x, |g, a| g.argsort(a, order).unwrap());
                    let what = format!("argsort {} [{n}, {rows}]", order.name());
                    check(&mut vk, &mut cpu, &what, &c, Cmp::Indices { ne0: n, k: n }, Some(&x));
                }
            }
        }
    }
    // ties, -inf and an exact index order check
    let n = 5000;
    let mut x = small_ints(n, 77, 3);
    x[17] = f32::NEG_INFINITY;
    let c = unary_case(n, 1, &x, |g, a| g.argsort(a, SortOrder::Asc).unwrap());
    check(&mut vk, &mut cpu, "argsort ties", &c, Cmp::Exact, None);
    let c = unary_case(n, 1, &x, |g, a| g.top_k(a, 300).unwrap());
    check(&mut vk, &mut cpu, "top_k ties", &c, Cmp::Exact, None);
}

#[test]
fn random_is_bit_identical() {
    let Some((mut vk, mut cpu)) = backends("random_is_bit_identical") else { return };
    for &n in &[1usize, 33, 4097, 151_936] {
        let rows = 3;
        let mut g = Graph::new();
        let k = g.input("keys", DType::I32, &[4, rows]).unwrap();
        let r = g.random_uniform(k, n, 0).unwrap();
        let r2 = g.random_uniform(k, n, 3).unwrap();
        g.set_output(r);
        g.set_output(r2);
        let keys = [42, 0, 7, 0, 0x1234_5678, -1, -5, 0x7fff_ffff, 1, 2, 3, 4];
        let c = Case { g, inputs: vec![(k, i32_bytes(&keys))], outputs: vec![r, r2] };
        check(&mut vk, &mut cpu, &format!("random n={n}"), &c, Cmp::Exact, None);
        // and against graph::philox directly
        let got = to_f32(&run(&mut vk, &c.g, &c.inputs, &[r2], true)[0]);
        let seed = (0x1234_5678u64) | (u64::from(-1i32 as u32) << 32);
        let step = (-5i32 as u32 as u64) | (0x7fff_ffffu64 << 32);
        for i in [0usize, n / 2, n - 1] {
            let want = graph::philox::uniform(seed, step, graph::philox::stream::element(3, i as u64));
            assert_eq!(got[n + i].to_bits(), want.to_bits(), "random row 1 element {i}");
        }
    }
}

#[test]
fn rows_get_set_and_scatter() {
    let Some((mut vk, mut cpu)) = backends("rows_get_set_and_scatter") else { return };
    for &n in &[1usize, 33, 4096] {
        let rows = 10;
        let x = data(n * rows * 2, 31, -4.0, 4.0);
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[n, rows, 2]).unwrap();
        let ids = g.input("ids", DType::I32, &[3, 2]).unwrap();
        let gr = g.get_rows(a, ids).unwrap();
        let ah = g.cast(a, DType::F16).unwrap();
        let grh = g.get_rows(ah, ids).unwrap();
        let ai = g.cast(a, DType::I32).unwrap();
        let gri = g.get_rows(ai, ids).unwrap();
        // set_rows into an f16 cache and an f32 copy
        let dst = g.fill(DType::F16, &[n, rows, 2], 0.0).unwrap();
        let vals = g.input("vals", DType::F32, &[n, 3, 2]).unwrap();
        let sr = g.set_rows(dst, vals, ids).unwrap();
        let src = g.cont(sr).unwrap();
        let dst32 = g.cont(a).unwrap();
        let sr32 = g.set_rows(dst32, vals, ids).unwrap();
        let src32 = g.cont(sr32).unwrap();
        // scatter_add of counts
        let base = g.fill(DType::F32, &[n, 2], 0.5).unwrap();
        let sids = g.input("sids", DType::I32, &[5, 2]).unwrap();
        let one = g.fill(DType::F32, &[1], 1.0).unwrap();
        let sc = g.scatter_add(base, sids, one).unwrap();
        let svals = g.input("svals", DType::F32, &[5, 2]).unwrap();
        let sc2 = g.scatter_add(base, sids, svals).unwrap();
        let outs = vec![gr, grh, gri, src, src32, sc, sc2];
        for &o in &outs {
            g.set_output(o);
        }
        let idv = [3, 0, 9, 9, 1, 3];
        let m = n as i32;
        let sid = [0, m - 1, 0, -1, m, m - 1, 0, 0, 2 % m, -1];
        let c = Case {
            g,
            inputs: vec![
                (a, f32_bytes(&x)),
                (ids, i32_bytes(&idv)),
                (vals, f32_bytes(&data(n * 6, 32, -2.0, 2.0))),
                (sids, i32_bytes(&sid)),
                (svals, f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])),
            ],
            outputs: outs,
        };
        check(&mut vk, &mut cpu, &format!("rows n={n}"), &c, Cmp::Exact, None);
    }
}

#[test]
fn mul_mat_norm_rope() {
    let Some((mut vk, mut cpu)) = backends("mul_mat_norm_rope") else { return };
    for (k, m, n) in [(1usize, 1usize, 1usize), (33, 31, 4), (4096, 64, 3), (4097, 5, 2)] {
        for wd in [DType::F32, DType::F16, DType::BF16] {
            let mut g = Graph::new();
            let w = g.input("w", DType::F32, &[k, m]).unwrap();
            let wc = if wd == DType::F32 { w } else { g.cast(w, wd).unwrap() };
            let x = g.input("x", DType::F32, &[k, n]).unwrap();
            let o = g.mul_mat(wc, x).unwrap();
            g.set_output(o);
            let c = Case {
                g,
                inputs: vec![(w, f32_bytes(&data(k * m, 41, -1.0, 1.0))), (x, f32_bytes(&data(k * n, 42, -1.0, 1.0)))],
                outputs: vec![o],
            };
            let tol = 2e-5 * (k as f64).sqrt();
            check(&mut vk, &mut cpu, &format!("mul_mat {wd} k={k} m={m} n={n}"), &c, Cmp::Close(tol, 1e-4), None);
        }
    }
    // broadcast over dims 2 and 3 (grouped heads)
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[16, 8, 2, 1]).unwrap();
    let b = g.input("b", DType::F32, &[16, 5, 4, 3]).unwrap();
    let o = g.mul_mat(a, b).unwrap();
    g.set_output(o);
    let c = Case {
        g,
        inputs: vec![(a, f32_bytes(&data(256, 43, -1.0, 1.0))), (b, f32_bytes(&data(16 * 60, 44, -1.0, 1.0)))],
        outputs: vec![o],
    };
    check(&mut vk, &mut cpu, "mul_mat broadcast", &c, Cmp::Close(1e-5, 1e-4), None);

    for &n in &[1usize, 33, 4096] {
        let x = data(n * 3, 45, -3.0, 3.0);
        let c = unary_case(n, 3, &x, |g, a| g.rms_norm(a, 1e-6).unwrap());
        check(&mut vk, &mut cpu, &format!("rms_norm n={n}"), &c, Cmp::Close(1e-6, 1e-5), None);
    }
    for mode in [RopeMode::Normal, RopeMode::Neox] {
        let (hd, nh, nt) = (64usize, 4usize, 5usize);
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[hd, nh, nt]).unwrap();
        let p = g.input("pos", DType::I32, &[nt]).unwrap();
        let o = g.rope(x, p, 48, mode, 10000.0, 1.0).unwrap();
        g.set_output(o);
        let c = Case {
            g,
            inputs: vec![(x, f32_bytes(&data(hd * nh * nt, 46, -1.0, 1.0))), (p, i32_bytes(&[0, 1, 7, 100, 511]))],
            outputs: vec![o],
        };
        check(&mut vk, &mut cpu, &format!("rope {}", mode.name()), &c, Cmp::Close(2e-4, 1e-3), None);
    }
}

#[test]
fn shared_memory_fallback_variants() {
    let opts = vulkan::Options { no_subgroups: true, ..vulkan::Options::default() };
    let Some(mut vk) = vulkan_with("shared_memory_fallback_variants", opts) else { return };
    assert!(!vk.uses_subgroups());
    let mut cpu = cpu::CpuBackend::new();
    for &n in &[1usize, 33, 4097, 151_936] {
        let x = small_ints(n * 3, n as u64 + 5, 3);
        let c = unary_case(n, 3, &x, |g, a| g.sum_rows(a).unwrap());
        check(&mut vk, &mut cpu, &format!("sum_rows fallback n={n}"), &c, Cmp::Exact, None);
        let c = unary_case(n, 3, &x, |g, a| g.max_rows(a).unwrap());
        check(&mut vk, &mut cpu, &format!("max_rows fallback n={n}"), &c, Cmp::Exact, None);
        let c = unary_case(n, 3, &x, |g, a| g.argmax(a).unwrap());
        check(&mut vk, &mut cpu, &format!("argmax fallback n={n}"), &c, Cmp::Exact, None);
        let xf = data(n * 3, 8, -9.0, 9.0);
        let c = unary_case(n, 3, &xf, |g, a| g.soft_max(a, None, 1.0).unwrap());
        check(&mut vk, &mut cpu, &format!("soft_max fallback n={n}"), &c, Cmp::Close(1e-9, 1e-4), None);
        let c = unary_case(n, 3, &xf, |g, a| g.rms_norm(a, 1e-5).unwrap());
        check(&mut vk, &mut cpu, &format!("rms_norm fallback n={n}"), &c, Cmp::Close(1e-6, 1e-5), None);
    }
    let (k, m, n) = (4097usize, 7usize, 3usize);
    let mut g = Graph::new();
    let w = g.input("w", DType::F32, &[k, m]).unwrap();
    let x = g.input("x", DType::F32, &[k, n]).unwrap();
    let o = g.mul_mat(w, x).unwrap();
    g.set_output(o);
    let c = Case {
        g,
        inputs: vec![(w, f32_bytes(&data(k * m, 51, -1.0, 1.0))), (x, f32_bytes(&data(k * n, 52, -1.0, 1.0)))],
        outputs: vec![o],
    };
    check(&mut vk, &mut cpu, "mul_mat fallback", &c, Cmp::Close(2e-3, 1e-4), None);
}

#[test]
fn out_of_range_row_ids_are_compute_errors() {
    use sched::{Bindings, MemoryKind, SplitTask, TensorLoc};
    let Some(mut vk) = vulkan("out_of_range_row_ids_are_compute_errors") else { return };
    for set in [false, true] {
        let mut g = Graph::new();
        let a = g.input("a", DType::F32, &[4, 3]).unwrap();
        let ids = g.input("ids", DType::I32, &[2]).unwrap();
        let o = if set {
            let v = g.input("v", DType::F32, &[4, 2]).unwrap();
            g.set_rows(a, v, ids).unwrap()
        } else {
            g.get_rows(a, ids).unwrap()
        };
        g.set_output(o);
        let mut b = Bindings::new(g.len());
        for (id, _) in g.nodes() {
            if g.storage_of(id) == id {
                let buf = vk.alloc(64, MemoryKind::Device).unwrap();
                b.bind(id, TensorLoc { buffer: buf, offset: 0 });
            }
        }
        for (id, _) in g.nodes() {
            b.bind(id, b.loc(g.storage_of(id)));
        }
        let run = |vk: &mut VulkanBackend, idv: [i32; 2]| {
            let loc = b.loc(ids);
            vk.upload(loc.buffer, loc.offset, &i32_bytes(&idv)).unwrap();
            vk.compute(SplitTask { graph: &g, nodes: &[o], bindings: &b }).unwrap();
            vk.synchronize()
        };
        match run(&mut vk, [1, 3]) {
            Err(sched::BackendError::Compute { node, op, .. }) => {
                assert_eq!((node, op), (o, if set { "set_rows" } else { "get_rows" }));
            }
            other => panic!("id 3 of 3 rows should be a compute error, got {other:?}"),
        }
        assert!(run(&mut vk, [-1, 0]).is_err(), "negative ids are errors");
        assert!(run(&mut vk, [2, 0]).is_ok(), "in-range ids after an error run cleanly");
    }
    assert_clean(&vk);
}
