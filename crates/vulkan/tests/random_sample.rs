//! `random_sample` (family `sample`) on Vulkan with the CPU backend as the oracle: every node runs
//! on the backend it is given (no fallback), and the selected indices must equal the CPU's exactly.
//! Rows cycle every regime: the argmax path (random 0, topp 0, topk 1, temperature 0), top-K run
//! (small, 2, n - 1) or off (`topk <= 0`, `topk >= n`), topp tiny, in (0, 1), 1 and above 1,
//! random near 1 (the crossing deep in the tail), temperatures tiny (every weight below the
//! maximum underflows), small and large; tied rows, `-inf` entries, bad rows and parameters (NaN,
//! `+inf`, all `-inf`, random outside `[0, 1)`, negative topp or temperature); every float dtype;
//! f64 rows (values f32 cannot tell apart); V from 1 to 262,144 (chunk and lane boundaries
//! included); a property test; and the scheduler placing the op on Vulkan. The validation layer
//! must stay silent.

mod common;

use common::*;
use conformance::generate::Rng;
use graph::fused::IndexDType;
use graph::{DType, Graph, NodeId};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use vulkan::VulkanBackend;

/// One case: rows with their parameters (random, topp, temperature; topk) and a dtype; with
/// `f64_rows` the rows are f64 (each value plus a multiple of 1e-12 that f32 cannot hold).
#[derive(Debug, Clone)]
struct Case {
    x: Vec<Vec<f32>>,
    params: Vec<[f32; 3]>,
    topk: Vec<i32>,
    dtype: DType,
    f64_rows: bool,
}

/// The f64 rows of a case: `x + (j % 5) 1e-12` (ties stay among equal offsets).
fn rows64(c: &Case) -> Vec<i32> {
    c.x.iter()
        .flat_map(|row| row.iter().enumerate().map(|(j, &v)| f64::from(v) + (j % 5) as f64 * 1e-12))
        .flat_map(|v| {
            let b = v.to_bits();
            [b as u32 as i32, (b >> 32) as u32 as i32]
        })
        .collect()
}

fn bytes_of(dtype: DType, v: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F16 => v.iter().flat_map(|&t| graph::f16::from_f32(t).to_bits().to_le_bytes()).collect(),
        DType::BF16 => v.iter().flat_map(|&t| graph::bf16::from_f32(t).to_bits().to_le_bytes()).collect(),
        _ => f32_bytes(v),
    }
}

fn build(c: &Case) -> (Graph, Vec<(NodeId, Vec<u8>)>, NodeId) {
    let (b, n) = (c.x.len(), c.x[0].len());
    let mut g = Graph::new();
    let (x, xb) = if c.f64_rows {
        (g.input("x", DType::I32, &[2 * n, b]).unwrap(), i32_bytes(&rows64(c)))
    } else {
        (g.input("x", c.dtype, &[n, b]).unwrap(), bytes_of(c.dtype, &c.x.concat()))
    };
    let p = g.input("params", DType::F32, &[3, b]).unwrap();
    let k = g.input("topk", DType::I32, &[1, b]).unwrap();
    let y = g.random_sample(x, p, k, IndexDType::I64, c.f64_rows).unwrap();
    let inputs = vec![(x, xb), (p, f32_bytes(&c.params.concat())), (k, i32_bytes(&c.topk))];
    (g, inputs, y)
}

/// Runs a case on Vulkan and on the CPU; `Err` says where they differ.
fn compare(vk: &mut VulkanBackend, c: &Case, packed: bool) -> Result<Vec<i32>, String> {
    let (g, inputs, y) = build(c);
    let got = to_i32(&run(vk, &g, &inputs, &[y], packed)[0]);
    let want = to_i32(&run(&mut cpu::CpuBackend::new(), &g, &inputs, &[y], packed)[0]);
    if let Some(r) = got.iter().zip(&want).position(|(a, b)| a != b) {
        return Err(format!(
            "row {r}: vulkan {} cpu {} (params {:?} topk {}; {:?} f64 rows {} n {})",
            got[r],
            want[r],
            c.params[r],
            c.topk[r],
            c.dtype,
            c.f64_rows,
            c.x[0].len()
        ));
    }
    Ok(got)
}

/// Row `r`'s parameters `([random, topp, temperature], topk)` for rows of `n` (24 regimes).
fn params_of(rng: &mut Rng, r: usize, n: usize) -> ([f32; 3], i32) {
    let u = |rng: &mut Rng, lo: f64, hi: f64| (lo + (hi - lo) * rng.unit()) as f32;
    let small_k = 2 + rng.below(n.clamp(1, 60) as u64) as i32;
    let (rnd, topp, t) = (u(rng, 0.02, 0.98), u(rng, 0.2, 1.0), u(rng, 0.3, 2.0));
    match r % 24 {
        0 => ([0.0, topp, t], small_k),
        1 => ([rnd, 0.0, t], 0),
        2 => ([rnd, topp, t], 1),
        3 => ([rnd, topp, 0.0], -3),
        4 => ([rnd, topp, t], small_k),
        5 => ([rnd, topp, t], 0),
        6 => ([rnd, topp, t], n as i32 + 2),
        7 => ([0.999_999, 1.0, t], 0),
        8 => ([rnd, 1e-6, t], 0),
        9 => ([rnd, 5.0, t], -1),
        10 => ([rnd, topp, 1e-3], small_k),
        11 => ([rnd, topp, 1e-30], 0),
        12 => ([rnd, topp, 50.0], 0),
        13 => ([rnd, topp, t], (n as i32 - 1).max(2)),
        14 => ([rnd, topp, t], 2),
        15 => ([0.999_999_94, 1.0, 1.0], 0),
        // Bad parameters: -1 (or the argmax where the argmax path comes first).
        16 => ([f32::NAN, topp, t], 0),
        17 => ([1.0, topp, t], 0),
        18 => ([rnd, -0.5, t], 0),
        19 => ([rnd, topp, -1.0], 0),
        20 => ([rnd, f32::INFINITY, t], 0),
        21 => ([rnd, topp, f32::INFINITY], 0),
        _ => ([rnd, topp, t], small_k),
    }
}

/// Row `r`'s values: random, tied (a few levels), with `-inf` entries, or bad (NaN, `+inf`, all
/// `-inf`) for some rows.
fn x_of(rng: &mut Rng, r: usize, n: usize, bad: bool) -> Vec<f32> {
    let kind = r % 7;
    let mut x: Vec<f32> = (0..n)
        .map(|_| match kind {
            1 | 2 => (rng.below(6) as f32 - 5.0) * 0.25,
            _ => (rng.unit() * 8.0 - 4.0) as f32,
        })
        .collect();
    if kind == 2 || kind == 3 {
        for i in (3..n).step_by(11) {
            x[i] = f32::NEG_INFINITY;
        }
    }
    if bad && n > 1 {
        match r % 11 {
            4 => x[n / 2] = f32::NAN,
            5 => x[n - 1] = f32::INFINITY,
            6 => x.fill(f32::NEG_INFINITY),
            _ => {}
        }
    }
    x
}

fn regimes(seed: u64, rows: usize, n: usize, dtype: DType, bad: bool) -> Case {
    let mut rng = Rng::new(seed);
    let mut c = Case { x: Vec::new(), params: Vec::new(), topk: Vec::new(), dtype, f64_rows: false };
    for r in 0..rows {
        let (p, k) = params_of(&mut rng, r, n);
        c.params.push(p);
        c.topk.push(k);
        c.x.push(x_of(&mut rng, r, n, bad));
    }
    c
}

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[test]
fn every_regime_and_dtype_equals_the_cpu() {
    let Some(mut vk) = vulkan("every_regime_and_dtype_equals_the_cpu") else { return };
    let mut fails = Vec::new();
    let mut picked = 0usize;
    for di in 0..4 {
        for (vi, n) in [1usize, 2, 7, 33, 255, 256, 257, 2049, 65_537].into_iter().enumerate() {
            // di = 3: f64 rows.
            let mut c = regimes(100 + (di * 10 + vi) as u64, 24, n, DTYPES[di % 3], true);
            c.f64_rows = di == 3;
            match compare(&mut vk, &c, vi % 2 == 0) {
                Ok(got) => picked += got.iter().filter(|&&i| i > 0).count(),
                Err(e) => fails.push(e),
            }
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
    assert!(picked > 300, "too few rows sampled past index 0: {picked}");
    assert_clean(&vk);
}

#[test]
fn long_rows_equal_the_cpu() {
    let Some(mut vk) = vulkan("long_rows_equal_the_cpu") else { return };
    for (seed, n, dtype, f64_rows) in [
        (1u64, 151_936usize, DType::F32, false),
        (2, 262_144, DType::BF16, false),
        (3, 262_144, DType::F32, false),
        (4, 151_936, DType::F32, true),
    ] {
        let mut c = regimes(seed, 16, n, dtype, false);
        c.f64_rows = f64_rows;
        // The crossing deep in the tail on every other row: no top-K, topp 1, random near 1.
        for r in (1..16).step_by(2) {
            c.params[r] = [0.999 + 0.000_9 * (r as f32 / 16.0), 1.0, 1.0 + r as f32];
            c.topk[r] = 0;
        }
        compare(&mut vk, &c, true).unwrap_or_else(|e| panic!("{e}"));
    }
    assert_clean(&vk);
}

#[test]
fn random_cases_equal_the_cpu() {
    let Some(vk) = vulkan("random_cases_equal_the_cpu") else { return };
    let vk = std::cell::RefCell::new(vk);
    let strategy =
        (prop_oneof![1usize..=8, 9usize..=600, 601usize..=20_000], 1usize..=6, 0usize..4, any::<bool>(), any::<u64>());
    let mut runner = TestRunner::new(Config { cases: 40, failure_persistence: None, ..Config::default() });
    runner
        .run(&strategy, |(n, rows, di, bad, seed)| {
            let mut rng = Rng::new(seed);
            let mut c = regimes(seed, rows, n, DTYPES[di % 3], bad);
            c.f64_rows = di == 3;
            for r in 0..rows {
                let pick = rng.below(24 * 7) as usize;
                (c.params[r], c.topk[r]) = params_of(&mut rng, pick, n);
                c.x[r] = x_of(&mut rng, pick, n, bad);
            }
            compare(&mut vk.borrow_mut(), &c, seed % 2 == 0).map(|_| ()).map_err(TestCaseError::fail)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_clean(&vk.borrow());
}

#[test]
fn the_scheduler_places_the_op_on_vulkan() {
    let Some(vk) = vulkan("the_scheduler_places_the_op_on_vulkan") else { return };
    assert!(vk.has_float64(), "lavapipe and the GPUs this runs on have shaderFloat64");
    let c = regimes(9, 4, 300, DType::F32, false);
    let (mut g, inputs, y) = build(&c);
    // The same rows as f64 bit pairs (without offsets: f32 values widen exactly).
    let bits: Vec<i32> =
        c.x.concat()
            .iter()
            .flat_map(|&v| {
                let b = f64::from(v).to_bits();
                [b as u32 as i32, (b >> 32) as u32 as i32]
            })
            .collect();
    let x64 = g.input("x64", DType::I32, &[2 * 300, 4]).unwrap();
    let y64 = g.random_sample(x64, inputs[1].0, inputs[2].0, IndexDType::U16, true).unwrap();
    g.set_output(y);
    g.set_output(y64);
    let mut s = sched::Scheduler::new(vec![Box::new(vk), Box::new(cpu::CpuBackend::new())]).unwrap();
    let plan = s.plan(&g).unwrap();
    assert_eq!(plan.backend_of(y), "vulkan", "{}", plan.to_text(&g));
    assert_eq!(plan.backend_of(y64), "vulkan", "{}", plan.to_text(&g));
    for (id, bytes) in &inputs {
        s.set_input(*id, bytes).unwrap();
    }
    s.set_input(x64, &i32_bytes(&bits)).unwrap();
    s.compute().unwrap();
    let want = to_i32(&run(&mut cpu::CpuBackend::new(), &g, &inputs, &[y], true)[0]);
    assert_eq!(s.read_i32(y).unwrap(), want);
    // f32 values widen exactly: the f64 rows pick the same tokens.
    assert_eq!(s.read_i32(y64).unwrap(), want);
}

#[test]
fn rows_on_dyadic_boundaries_equal_the_cpu() {
    // Weights near powers of two (x = -j ln 2, temperatures 1 and 1/2), thresholds at simple
    // fractions of the total, f32 and f64 rows. (Index equality is a weak check of the last bits:
    // a one-ulp change of the shader's exponential was not caught by this or the next test.)
    let Some(mut vk) = vulkan("rows_on_dyadic_boundaries_equal_the_cpu") else { return };
    let ln2 = std::f32::consts::LN_2;
    for (n, levels) in [(64usize, 8usize), (600, 5), (5000, 12)] {
        let mut c = Case { x: Vec::new(), params: Vec::new(), topk: Vec::new(), dtype: DType::F32, f64_rows: false };
        for r in 0..64usize {
            c.x.push((0..n).map(|i| -(((i * 7 + r) % levels) as f32) * ln2).collect());
            let t = if r % 2 == 0 { 1.0 } else { 0.5 };
            let random = ((r / 2) % 31 + 1) as f32 / 32.0;
            c.params.push([random, if r % 3 == 0 { 1.0 } else { 0.75 }, t]);
            c.topk.push(if r % 4 == 1 { (n / 3) as i32 } else { 0 });
        }
        compare(&mut vk, &c, true).unwrap_or_else(|e| panic!("{e}"));
        c.f64_rows = true;
        compare(&mut vk, &c, false).unwrap_or_else(|e| panic!("f64 rows: {e}"));
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
        let mut g = Graph::new();
        let rows = qs.len();
        let x = g.input("x", DType::I32, &[2 * n, rows]).unwrap();
        let p = g.input("params", DType::F32, &[3, rows]).unwrap();
        let k = g.input("topk", DType::I32, &[1, rows]).unwrap();
        let y = g.random_sample(x, p, k, IndexDType::I32, true).unwrap();
        let bits: Vec<i32> = qs
            .iter()
            .flat_map(|&q| (0..n).map(move |i| if i == 0 { 0.0 } else { -((2 * q) as f64).ln() }))
            .flat_map(|v: f64| {
                let b = v.to_bits();
                [b as u32 as i32, (b >> 32) as u32 as i32]
            })
            .collect();
        let params: Vec<f32> = (0..rows).flat_map(|_| [0.5, 1.0, 1.0]).collect();
        let inputs = vec![(x, i32_bytes(&bits)), (p, f32_bytes(&params)), (k, i32_bytes(&vec![0; rows]))];
        let got = to_i32(&run(&mut vk, &g, &inputs, &[y], true)[0]);
        let want = to_i32(&run(&mut cpu::CpuBackend::new(), &g, &inputs, &[y], true)[0]);
        assert_eq!(got, want, "m {m}");
        // The crossing is at rank m - q or one of its neighbours (ranks are indices here).
        for (r, &q) in qs.iter().enumerate() {
            assert!((want[r] - (m - q) as i32).abs() <= 1, "m {m} q {q}: {}", want[r]);
        }
    }
    assert_clean(&vk);
}
