//! The fused sampling shaders against the CPU backend where the two must agree bit for bit in their
//! arithmetic, not only in their decisions on well-separated data: `random_sample`'s rows whose
//! thresholds fall on or within rounding of a rank's running sum, and the shaders' exponentials
//! (f64 for `random_sample`, f32 fused and unfused for `top_k_top_p_sample`) against the CPU's
//! through the `probe_exp64`/`probe_exp2` test probes. (Every regime, dtype, f64 rows and
//! V up to 262,144 are conformance cases, `sample/random_sample/*`, run on Vulkan by
//! `tests/conformance.rs`.) The validation layer must stay silent.

mod common;

use common::*;
use graph::fused::IndexDType;
use graph::{DType, Graph, NodeId};
use vulkan::VulkanBackend;

/// `rows` as f64 bit pairs (the op's `f64_rows` input).
fn f64_bits(rows: impl Iterator<Item = f64>) -> Vec<i32> {
    rows.flat_map(|v| {
        let b = v.to_bits();
        [b as u32 as i32, (b >> 32) as u32 as i32]
    })
    .collect()
}

/// `random_sample` over `b` rows of `n` (f64 bit pairs with `f64_rows`, else f32) with
/// `[random, topp, temperature]` and `topk` per row; runs it on Vulkan and on the CPU and returns
/// both answers.
fn both(
    vk: &mut VulkanBackend,
    x: Vec<u8>,
    f64_rows: bool,
    n: usize,
    params: &[[f32; 3]],
    topk: &[i32],
) -> (Vec<i32>, Vec<i32>) {
    let b = params.len();
    let mut g = Graph::new();
    let xi = if f64_rows { g.input("x", DType::I32, &[2 * n, b]) } else { g.input("x", DType::F32, &[n, b]) }.unwrap();
    let p = g.input("params", DType::F32, &[3, b]).unwrap();
    let k = g.input("topk", DType::I32, &[1, b]).unwrap();
    let y = g.random_sample(xi, p, k, IndexDType::I32, f64_rows).unwrap();
    let inputs: Vec<(NodeId, Vec<u8>)> = vec![(xi, x), (p, f32_bytes(&params.concat())), (k, i32_bytes(topk))];
    let got = to_i32(&run(vk, &g, &inputs, &[y], true)[0]);
    let want = to_i32(&run(&mut cpu::CpuBackend::new(), &g, &inputs, &[y], true)[0]);
    (got, want)
}

#[test]
fn rows_on_dyadic_boundaries_equal_the_cpu() {
    // Weights near powers of two (x = -j ln 2, temperatures 1 and 1/2), thresholds at simple
    // fractions of the total, f32 and f64 rows. (Index equality is a weak check of the last bits:
    // a one-ulp change of the shader's exponential was not caught by this or the next test.)
    let Some(mut vk) = vulkan("rows_on_dyadic_boundaries_equal_the_cpu") else { return };
    let ln2 = std::f32::consts::LN_2;
    for (n, levels) in [(64usize, 8usize), (600, 5), (5000, 12)] {
        let rows = 64usize;
        let x: Vec<f32> = (0..rows).flat_map(|r| (0..n).map(move |i| -(((i * 7 + r) % levels) as f32) * ln2)).collect();
        let params: Vec<[f32; 3]> = (0..rows)
            .map(|r| {
                let t = if r % 2 == 0 { 1.0 } else { 0.5 };
                let random = ((r / 2) % 31 + 1) as f32 / 32.0;
                [random, if r % 3 == 0 { 1.0 } else { 0.75 }, t]
            })
            .collect();
        let topk: Vec<i32> = (0..rows).map(|r| if r % 4 == 1 { (n / 3) as i32 } else { 0 }).collect();
        let (got, want) = both(&mut vk, f32_bytes(&x), false, n, &params, &topk);
        assert_eq!(got, want, "n {n}");
        // As f64 rows, each value plus a multiple of 1e-12 that f32 cannot hold.
        let bits = f64_bits(x.iter().enumerate().map(|(j, &v)| f64::from(v) + ((j % n) % 5) as f64 * 1e-12));
        let (got, want) = both(&mut vk, i32_bytes(&bits), true, n, &params, &topk);
        assert_eq!(got, want, "f64 rows, n {n}");
    }
    assert_clean(&vk);
}

#[test]
fn rows_with_thresholds_within_ulps_of_a_rank_equal_the_cpu() {
    // f64 rows: the maximum 0 and 2m ties at y = -ln(2q), weight w = exp(y) ~ 1/(2q); with
    // random = 1/2, topp 1 and no top-K the threshold is 1/2 + m w and the running sums 1 + i w,
    // so the crossing rank m - q sits within rounding of the threshold, decided by the sums'
    // rounding (exercising the polynomial over |r| up to 0.35 and both sum orders).
    let Some(mut vk) = vulkan("rows_with_thresholds_within_ulps_of_a_rank_equal_the_cpu") else { return };
    for m in [64usize, 300] {
        let n = 2 * m + 1;
        let qs: Vec<usize> = (3..=60).filter(|&q| q < m).collect();
        let bits =
            f64_bits(qs.iter().flat_map(|&q| (0..n).map(move |i| if i == 0 { 0.0 } else { -((2 * q) as f64).ln() })));
        let params = vec![[0.5f32, 1.0, 1.0]; qs.len()];
        let (got, want) = both(&mut vk, i32_bytes(&bits), true, n, &params, &vec![0; qs.len()]);
        assert_eq!(got, want, "m {m}");
        // The crossing is at rank m - q or one of its neighbours (ranks are indices here).
        for (r, &q) in qs.iter().enumerate() {
            assert!((want[r] - (m - q) as i32).abs() <= 1, "m {m} q {q}: {}", want[r]);
        }
    }
    assert_clean(&vk);
}

#[test]
fn the_shaders_exp64_is_kernels_exp64_bit_for_bit() {
    // The f64 exponential every `random_sample` weight goes through, compared bit for bit (index
    // equality cannot see a one-ulp difference). Points: the whole range, dense near 0 and over
    // the weights' usual [-50, 0], both sides of every reduction step k ln 2, the overflow and
    // underflow edges, the subnormal results, and the special values.
    let Some(mut vk) = vulkan("the_shaders_exp64_is_kernels_exp64_bit_for_bit") else { return };
    let mut ys = vec![0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 709.782712893384, 709.79, -745.2, -745.3];
    let mut rng = conformance::generate::Rng::new(0xE64);
    let mut unit = || rng.unit();
    for _ in 0..200_000 {
        ys.push(-50.0 * unit());
    }
    for _ in 0..100_000 {
        ys.push(-746.0 + 1456.0 * unit());
    }
    for _ in 0..50_000 {
        ys.push((unit() - 0.5) * 1e-6);
    }
    for k in -1080i32..=1025 {
        let c = f64::from(k) * std::f64::consts::LN_2;
        for d in [-1e-12, 0.0, 1e-12, 0.5 * std::f64::consts::LN_2, -0.5 * std::f64::consts::LN_2] {
            ys.push(c + d);
        }
        ys.push(f64::from_bits(c.to_bits() + 1));
        ys.push(f64::from_bits(c.to_bits().wrapping_sub(1)));
    }
    let got = vk.probe_exp64(&ys).unwrap();
    let mut bad = Vec::new();
    for (&y, &g) in ys.iter().zip(&got) {
        let want = kernels::exp64::exp(y);
        if !(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan())) {
            bad.push(format!("exp({y:e}): shader {g:e} ({:#x}), CPU {want:e} ({:#x})", g.to_bits(), want.to_bits()));
        }
    }
    assert!(bad.is_empty(), "{} of {} differ, e.g.\n{}", bad.len(), ys.len(), bad[..bad.len().min(10)].join("\n"));
    assert_clean(&vk);
}

#[test]
fn top_k_top_p_samples_exp2_is_kernels_exp2_bit_for_bit() {
    // `top_k_top_p_sample`'s f32 weights `2^y` on the shader, fused (as the CPU's AVX2+FMA build
    // computes them) and unfused, against `kernels::exp::exp2::<FMA>`, bit for bit: a fine grid
    // over [-130, 1) (the weights' arguments are at most 0), both sides of every integer, the
    // clamp at -127 and the special values. With GLSL's own fma() the fused form differed on 9.5%
    // of these points on lavapipe, which computes fma() as a multiply and an add (the message
    // counts the points that differ from the unfused CPU form, to tell that case apart); the
    // shader's `fma_exact` rounds once on any device.
    let Some(mut vk) = vulkan("top_k_top_p_samples_exp2_is_kernels_exp2_bit_for_bit") else { return };
    let mut ys = vec![0.0f32, -0.0, f32::NEG_INFINITY, -127.0, -126.5, -128.0, -1e30, 0.5, f32::MIN_POSITIVE];
    ys.extend((0..500_000).map(|i| -130.0 + 131.0 * (i as f32 / 500_000.0)));
    for k in -130i32..=1 {
        let c = k as f32;
        ys.extend([c, f32::from_bits(c.to_bits() + 1), f32::from_bits(c.to_bits().wrapping_sub(1)), c + 0.5]);
    }
    for fused in [false, true] {
        let got = vk.probe_exp2(&ys, fused).unwrap();
        let mut bad = Vec::new();
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for (&y, &g) in ys.iter().zip(&got) {
            let want = if fused { kernels::exp::exp2::<true>(y) } else { kernels::exp::exp2::<false>(y) };
            if g.to_bits() != want.to_bits() && !(g.is_nan() && want.is_nan()) {
                (lo, hi) = (lo.min(y), hi.max(y));
                bad.push(format!("2^{y:e}: shader {g:e} ({:#x}), CPU {want:e} ({:#x})", g.to_bits(), want.to_bits()));
            }
        }
        let as_unfused =
            ys.iter().zip(&got).filter(|&(&y, &g)| g.to_bits() != kernels::exp::exp2::<false>(y).to_bits()).count();
        assert!(
            bad.is_empty(),
            "fused {fused}: {} of {} differ (arguments {lo} to {hi}; {as_unfused} differ from the unfused CPU form), e.g.\n{}",
            bad.len(),
            ys.len(),
            bad[..bad.len().min(10)].join("\n")
        );
    }
    assert_clean(&vk);
}
