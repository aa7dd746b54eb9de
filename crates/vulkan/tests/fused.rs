//! `top_k_top_p_sample` (family `sample`) on Vulkan with the CPU backend as the oracle: every node
//! runs on the backend it is given (no fallback: an unsupported node fails the run), and the
//! indices and the filtered logits must equal the CPU's bit for bit. Rows cycle every regime of
//! top-K (run, `k <= 0`, `k > V`, `k > ks_max`), top-P (kept-one, run, skipped) and min-P (off, on,
//! kept-one), every post stage, both modes, every float dtype, ties, bad rows, V from 1 to 262,144;
//! a property test draws random cases; a chi-squared test checks the multinomial draw's
//! distribution on Vulkan. The validation layer must stay silent.

mod common;

use common::*;
use conformance::generate::Rng;
use graph::fused::{FusedOutput, PostSample, TopKTopP};
use graph::{DType, Graph, NodeId};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use vulkan::VulkanBackend;

/// One case: rows `[V]` with their parameters, a dtype, the attributes and the multinomial pairs.
#[derive(Debug, Clone)]
struct Case {
    x: Vec<Vec<f32>>,
    k: Vec<i32>,
    p: Vec<f32>,
    m: Vec<f32>,
    q: Vec<Vec<f32>>,
    dtype: DType,
    a: TopKTopP,
    pairs: Vec<(u64, u64)>,
}

fn bytes_of(dtype: DType, v: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F16 => v.iter().flat_map(|&t| graph::f16::from_f32(t).to_bits().to_le_bytes()).collect(),
        DType::BF16 => v.iter().flat_map(|&t| graph::bf16::from_f32(t).to_bits().to_le_bytes()).collect(),
        _ => f32_bytes(v),
    }
}

/// Input nodes with their bytes.
type Inputs = Vec<(NodeId, Vec<u8>)>;

/// The graph of a case: both outputs (index and filtered logits) and the inputs' bytes.
fn build(c: &Case) -> (Graph, Inputs, [NodeId; 2]) {
    let (b, v) = (c.x.len(), c.x[0].len());
    let mut g = Graph::new();
    let lx = g.input("logits", c.dtype, &[v, b]).unwrap();
    let lk = g.input("top_k", DType::I32, &[1, b]).unwrap();
    let lp = g.input("params", DType::F32, &[2, b]).unwrap();
    let xs: Vec<f32> = c.x.concat();
    let pm: Vec<f32> = c.p.iter().zip(&c.m).flat_map(|(&p, &m)| [p, m]).collect();
    let mut inputs = vec![(lx, bytes_of(c.dtype, &xs)), (lk, i32_bytes(&c.k)), (lp, f32_bytes(&pm))];
    let q = match c.a.post {
        PostSample::None => None,
        PostSample::QSample => {
            let id = g.input("q", DType::F32, &[v, b]).unwrap();
            inputs.push((id, f32_bytes(&c.q.concat())));
            Some(id)
        }
        PostSample::Multinomial => {
            let id = g.input("q", DType::I32, &[4, c.pairs.len()]).unwrap();
            let w: Vec<i32> = c
                .pairs
                .iter()
                .flat_map(|&(s, o)| [s as u32, (s >> 32) as u32, o as u32, (o >> 32) as u32])
                .map(|w| w as i32)
                .collect();
            inputs.push((id, i32_bytes(&w)));
            Some(id)
        }
    };
    let idx = g.top_k_top_p_sample(lx, lk, lp, q, TopKTopP { output: FusedOutput::Index, ..c.a }).unwrap();
    let kept = g.top_k_top_p_sample(lx, lk, lp, q, TopKTopP { output: FusedOutput::Logits, ..c.a }).unwrap();
    (g, inputs, [idx, kept])
}

/// Runs a case on Vulkan and on the CPU; `Err` says where they differ.
fn compare(vk: &mut VulkanBackend, c: &Case, packed: bool) -> Result<Vec<i32>, String> {
    let (g, inputs, outs) = build(c);
    let got = run(vk, &g, &inputs, &outs, packed);
    let mut cpu = cpu::CpuBackend::new();
    let want = run(&mut cpu, &g, &inputs, &outs, packed);
    let (gi, wi) = (to_i32(&got[0]), to_i32(&want[0]));
    if gi != wi {
        let r = gi.iter().zip(&wi).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!(
            "index of row {r}: vulkan {} cpu {} (k {} p {} m {}; {:?} {:?} V {})",
            gi[r],
            wi[r],
            c.k[r],
            c.p[r],
            c.m[r],
            c.dtype,
            c.a,
            c.x[0].len()
        ));
    }
    // The filtered logits bit for bit (NaN rows carry the same NaN on both).
    let (gk, wk) = (to_i32(&got[1]), to_i32(&want[1]));
    if gk != wk {
        let at = gk.iter().zip(&wk).position(|(a, b)| a != b).unwrap_or(0);
        let v = c.x[0].len();
        let r = at / v;
        return Err(format!(
            "filtered logits of row {r} at {}: vulkan {} cpu {} (k {} p {} m {}; {:?} {:?} V {v})",
            at % v,
            f32::from_bits(gk[at] as u32),
            f32::from_bits(wk[at] as u32),
            c.k[r],
            c.p[r],
            c.m[r],
            c.dtype,
            c.a
        ));
    }
    Ok(gi)
}

/// `k` of row `r` (every top-K regime) for rows of `v`.
fn k_of(rng: &mut Rng, r: usize, v: usize, ks: u32) -> i32 {
    match r % 8 {
        0 => 0,
        1 => 1,
        2 => 5,
        3 => v as i32,
        4 => v as i32 + 1,
        5 => ks as i32 + 1,
        6 => -3,
        _ => 1 + rng.below(v.min(60) as u64) as i32,
    }
}

/// `top_p` of row `r` (kept-one, run, skipped).
fn p_of(rng: &mut Rng, r: usize) -> f32 {
    match (r / 2) % 6 {
        0 => 1.0,
        1 => 0.0,
        2 => -0.5,
        3 => 0.5,
        4 => 0.9,
        _ => (0.05 + 0.9 * rng.unit()) as f32,
    }
}

/// `min_p` of row `r` (off, on, kept-one).
fn m_of(rng: &mut Rng, r: usize) -> f32 {
    match r % 5 {
        0 | 3 => 0.0,
        1 => 0.1,
        2 => 1.0,
        _ => (0.05 + 0.6 * rng.unit()) as f32,
    }
}

/// Row `r`'s values: spread logits, tied levels (every fourth row), or probabilities; some rows
/// carry `-inf` (logits mode) and every 11th row of a case with `bad` is a bad row.
fn x_of(rng: &mut Rng, r: usize, v: usize, logits: bool, bad: bool) -> Vec<f32> {
    let tied = r % 4 == 2;
    let mut x: Vec<f32> = (0..v)
        .map(|_| {
            if logits {
                if tied { (rng.below(5) as f32) * 0.5 } else { (rng.unit() * 16.0 - 8.0) as f32 }
            } else if tied {
                rng.below(4) as f32 * 0.125
            } else {
                (rng.unit() * rng.unit()) as f32
            }
        })
        .collect();
    if logits && r % 6 == 5 && v > 3 {
        for i in (0..v).step_by(3) {
            x[i] = f32::NEG_INFINITY;
        }
    }
    if bad && r % 11 == 10 {
        match (r / 11) % 3 {
            0 => x[v / 2] = f32::NAN,
            1 => x[v - 1] = if logits { f32::INFINITY } else { 1.5 },
            _ => x.fill(if logits { f32::NEG_INFINITY } else { -0.25 }),
        }
    }
    x
}

/// A case of `b` rows of `v` cycling every regime.
fn regimes(seed: u64, b: usize, v: usize, dtype: DType, a: TopKTopP) -> Case {
    let mut rng = Rng::new(seed);
    let logits = a.input_is_logits;
    let x: Vec<Vec<f32>> = (0..b).map(|r| x_of(&mut rng, r, v, logits, true)).collect();
    let k = (0..b).map(|r| k_of(&mut rng, r, v, a.ks())).collect();
    let p = (0..b).map(|r| p_of(&mut rng, r)).collect();
    let m = (0..b).map(|r| m_of(&mut rng, r)).collect();
    let q = (0..b).map(|_| (0..v).map(|_| (rng.unit() * 3.0) as f32).collect()).collect();
    let pairs = (0..b.div_ceil(2)).map(|i| (seed ^ 0xABCD, i as u64 * 7 + 1)).collect();
    Case { x, k, p, m, q, dtype, a, pairs }
}

fn attrs(post: PostSample, logits: bool) -> TopKTopP {
    TopKTopP { input_is_logits: logits, ..TopKTopP::new(post) }
}

const POSTS: [PostSample; 3] = [PostSample::None, PostSample::QSample, PostSample::Multinomial];
const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[test]
fn every_regime_dtype_and_post_stage_equals_the_cpu() {
    let Some(mut vk) = vulkan("every_regime_dtype_and_post_stage_equals_the_cpu") else { return };
    let mut n = 0;
    for (vi, &v) in [1usize, 2, 7, 33, 2049, 4097].iter().enumerate() {
        for (di, &dtype) in DTYPES.iter().enumerate() {
            for (pi, &post) in POSTS.iter().enumerate() {
                for logits in [true, false] {
                    let mut a = attrs(post, logits);
                    // ks_max below V on some cases (the skip bound), and top_k_guess spread.
                    a.ks_max = if (vi + pi) % 2 == 0 { 1024 } else { 6 };
                    a.top_k_guess = [32, 0, 1, -4][(vi + di) % 4];
                    let seed = (vi * 100 + di * 10 + pi * 2 + usize::from(logits)) as u64;
                    let c = regimes(seed, 24, v, dtype, a);
                    compare(&mut vk, &c, n % 2 == 0).unwrap_or_else(|e| panic!("case {seed}: {e}"));
                    n += 1;
                }
            }
        }
    }
    assert_eq!(n, 6 * 3 * 3 * 2);
    assert_clean(&vk);
}

#[test]
fn long_rows_equal_the_cpu() {
    let Some(mut vk) = vulkan("long_rows_equal_the_cpu") else { return };
    // 151,936 (a real vocabulary) and 262,144: top-P over the whole row, top-K, unsorted min-P,
    // with each post stage.
    for (i, &v) in [151_936usize, 262_144].iter().enumerate() {
        for (pi, &post) in POSTS.iter().enumerate() {
            let mut rng = Rng::new(7 + i as u64);
            let b = 4;
            let x: Vec<Vec<f32>> = (0..b).map(|r| x_of(&mut rng, r, v, true, false)).collect();
            let c = Case {
                x,
                k: vec![0, 40, -1, 1024],
                p: vec![0.9, 0.8, 1.0, (0.3 + 0.2 * pi as f64) as f32],
                m: vec![0.0, 0.05, 0.02, 0.0],
                q: (0..b).map(|_| (0..v).map(|_| (rng.unit() * 2.0) as f32).collect()).collect(),
                dtype: DTYPES[(i + pi) % 3],
                a: attrs(post, true),
                pairs: vec![(5, 1), (6, 2), (7, 3)],
            };
            compare(&mut vk, &c, pi % 2 == 0).unwrap_or_else(|e| panic!("V {v}: {e}"));
        }
    }
    assert_clean(&vk);
}

#[test]
fn random_cases_equal_the_cpu() {
    let Some(vk) = vulkan("random_cases_equal_the_cpu") else { return };
    let vk = std::cell::RefCell::new(vk);
    let strategy = (
        prop_oneof![1usize..=8, 9usize..=300, 301usize..=5000],
        1usize..=6,
        0usize..3,
        0usize..3,
        any::<bool>(),
        any::<u64>(),
        prop_oneof![Just(1024u32), 1u32..=64, 1025u32..=4096],
        -8i32..=100,
    );
    let mut runner = TestRunner::new(Config { cases: 40, failure_persistence: None, ..Config::default() });
    runner
        .run(&strategy, |(v, b, di, pi, logits, seed, ks_max, guess)| {
            let mut a = attrs(POSTS[pi], logits);
            a.ks_max = ks_max;
            a.top_k_guess = guess;
            let mut rng = Rng::new(seed);
            // Rows in random regimes (not cycled): each row's index into the regime tables is random.
            let mut c = regimes(seed, b, v, DTYPES[di], a);
            for r in 0..b {
                let pick = rng.below(120) as usize;
                c.k[r] = k_of(&mut rng, pick, v, a.ks());
                c.p[r] = p_of(&mut rng, pick);
                c.m[r] = m_of(&mut rng, pick);
                c.x[r] = x_of(&mut rng, pick, v, logits, true);
            }
            compare(&mut vk.borrow_mut(), &c, seed % 2 == 0).map(|_| ()).map_err(TestCaseError::fail)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_clean(&vk.borrow());
}

fn chi2(counts: &[u64], p: &[f64]) -> f64 {
    let n: u64 = counts.iter().sum();
    counts.iter().zip(p).map(|(&c, &pi)| (c as f64 - n as f64 * pi).powi(2) / (n as f64 * pi)).sum()
}

#[test]
fn multinomial_on_vulkan_follows_the_survivor_distribution() {
    let Some(mut vk) = vulkan("multinomial_on_vulkan_follows_the_survivor_distribution") else { return };
    // ln of [.4, .3, .15, .1, .05]: top-K 4 keeps .4, .3, .15, .1 (renormalised by .95); then the
    // unsorted path with min-P 0.3 (keeps prob >= .12: tokens 0, 1, 2).
    let x: Vec<f32> = [0.4f64, 0.3, 0.15, 0.1, 0.05].iter().map(|p| p.ln() as f32).collect();
    let n = 2000;
    let pairs: Vec<(u64, u64)> = (0..n as u64).map(|i| (0x5EED, i)).collect();
    for (k, m, want) in [
        (4, 0.0f32, vec![0.4 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.1 / 0.95]),
        (0, 0.3, vec![0.4 / 0.85, 0.3 / 0.85, 0.15 / 0.85]),
    ] {
        let c = Case {
            x: vec![x.clone(); n],
            k: vec![k; n],
            p: vec![1.0; n],
            m: vec![m; n],
            q: vec![vec![1.0; 5]; n],
            dtype: DType::F32,
            a: attrs(PostSample::Multinomial, true),
            pairs: pairs.clone(),
        };
        let idx = compare(&mut vk, &c, false).unwrap_or_else(|e| panic!("{e}"));
        let mut counts = vec![0u64; want.len()];
        for &i in &idx {
            assert!((0..want.len() as i32).contains(&i), "drew {i} outside the survivors");
            counts[i as usize] += 1;
        }
        // df <= 3: P(chi2 > 30) < 2e-6. (2000 draws: lavapipe sorts each short row as a padded
        // 2048-entry block, so many rows cost minutes.)
        assert!(chi2(&counts, &want) < 30.0, "k {k} m {m}: {counts:?} vs {want:?}");
    }
    assert_clean(&vk);
}

#[test]
fn the_scheduler_places_the_op_on_vulkan() {
    let Some(vk) = vulkan("the_scheduler_places_the_op_on_vulkan") else { return };
    assert!(vk.has_float64(), "lavapipe and the GPUs this runs on have shaderFloat64");
    let c = regimes(3, 4, 50, DType::F32, attrs(PostSample::QSample, true));
    let (mut g, inputs, outs) = build(&c);
    for o in outs {
        g.set_output(o);
    }
    let mut s = sched::Scheduler::new(vec![Box::new(vk), Box::new(cpu::CpuBackend::new())]).unwrap();
    let plan = s.plan(&g).unwrap();
    for o in outs {
        assert_eq!(plan.backend_of(o), "vulkan", "{}", plan.to_text(&g));
    }
    for (id, bytes) in &inputs {
        s.set_input(*id, bytes).unwrap();
    }
    s.compute().unwrap();
    let mut cpu = cpu::CpuBackend::new();
    let want = run(&mut cpu, &g, &inputs, &outs, true);
    assert_eq!(s.read_i32(outs[0]).unwrap(), to_i32(&want[0]));
}
