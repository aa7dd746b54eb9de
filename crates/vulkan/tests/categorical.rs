//! `Op::Categorical` on Vulkan, deterministically: a token whose probability (about 6e-9) is far
//! below what an f32 running sum can resolve, planted behind a mass of about 1.4e5 near the end of
//! a 151936-entry row, is drawn exactly when the uniform falls inside its bracket, and its
//! neighbours are drawn when the uniform falls just before or just after it (by 2^-11..2^-9 of a
//! unit weight). The keys are searched for on the host with `graph::philox::uniform_f64` and the
//! row is built around the uniform they give, so nothing here is statistical. Without and with
//! per-row params (scale 0.5; a min-p cut that removes the planted token). The CPU backend must
//! draw the same indices. Rows longer than the fixed-point sums hold (2^23) are not claimed. The
//! validation layer must stay silent.

mod common;

use common::*;
use graph::philox::{stream, uniform_f64};
use graph::{DType, Graph, NodeId};

const N: usize = 151_936;
/// The planted token's weight against the unit weights of the others (logit 0).
const W_PLANT: f64 = 1.0 / 1024.0;
const SEED: u64 = 0x5EED_CA7E;
const STREAM: u32 = 2;

/// Where the target `u W` must fall relative to the planted token's bracket.
#[derive(Clone, Copy, Debug)]
enum Where {
    /// Inside it (between a quarter and three quarters of its width).
    Inside,
    /// In the unit-weight token just before it, 2^-11..2^-9 short of its start.
    Before,
    /// In the unit-weight token just after it, 2^-11..2^-9 past its end.
    After,
}

/// One row: its keys, its logits, and the index a correct draw returns.
struct Row {
    keys: [i32; 4],
    logits: Vec<f32>,
    plant: usize,
    want: usize,
}

/// Finds a step whose uniform `u > 0.95` and a count `k` of unit-weight tokens such that, with the
/// planted weight `w` (as the f64 exponential of its f32 argument), `u (k + w)` falls `at` the
/// planted token once `k1` unit weights are put before it; builds the row as `-inf` padding, `k1`
/// zeros, the planted logit `x_plant`, and `k - k1` zeros (length `N`, so the planted token sits
/// behind a mass of at least 0.95 * 1.4e5 near the end of the row).
fn row(at: Where, x_plant: f32, w: f64) -> Row {
    let (lo, hi) = match at {
        Where::Inside => (0.25 * w, 0.75 * w),
        Where::Before => (1.0 - 2f64.powi(-9), 1.0 - 2f64.powi(-11)),
        Where::After => (w + 2f64.powi(-11), w + 2f64.powi(-9)),
    };
    for step in 0u64..100_000 {
        let u = uniform_f64(SEED, step, stream::element(u64::from(STREAM), 0));
        if u <= 0.95 {
            continue;
        }
        for k in (N - 3000..N).rev() {
            let t = u * (k as f64 + w);
            let f = t - t.floor();
            if f < lo || f > hi {
                continue;
            }
            let k1 = t.floor() as usize + usize::from(matches!(at, Where::Before));
            if k1 > k || (matches!(at, Where::After) && k1 == k) {
                continue;
            }
            let lead = N - 1 - k;
            let mut logits = vec![f32::NEG_INFINITY; lead];
            logits.extend(std::iter::repeat_n(0.0f32, k1));
            logits.push(x_plant);
            logits.extend(std::iter::repeat_n(0.0f32, k - k1));
            assert_eq!(logits.len(), N);
            let plant = lead + k1;
            let want = match at {
                Where::Inside => plant,
                Where::Before => plant - 1,
                Where::After => plant + 1,
            };
            let keys = [SEED as u32 as i32, (SEED >> 32) as u32 as i32, step as u32 as i32, (step >> 32) as u32 as i32];
            return Row { keys, logits, plant, want };
        }
    }
    panic!("no step found for {at:?}");
}

/// Runs `categorical` over `rows` (with per-row `params` when given) on `be` and returns the draws.
fn draw(be: &mut dyn sched::Backend, rows: &[&Row], params: Option<&[f32]>, packed: bool) -> Vec<i32> {
    let r = rows.len();
    let mut g = Graph::new();
    let x = g.input("logits", DType::F32, &[N, r]).unwrap();
    let k = g.input("keys", DType::I32, &[4, r]).unwrap();
    let mut inputs: Vec<(NodeId, Vec<u8>)> = vec![
        (x, f32_bytes(&rows.iter().flat_map(|row| row.logits.iter().copied()).collect::<Vec<_>>())),
        (k, i32_bytes(&rows.iter().flat_map(|row| row.keys).collect::<Vec<_>>())),
    ];
    let p = params.map(|v| {
        let p = g.input("params", DType::F32, &[2, r]).unwrap();
        inputs.push((p, f32_bytes(v)));
        p
    });
    let y = g.categorical(x, k, p, None, STREAM).unwrap();
    g.set_output(y);
    assert!(be.supports(&g, y), "categorical should be supported");
    to_i32(&run(be, &g, &inputs, &[y], packed)[0])
}

fn check(test: &str, rows: &[&Row], params: Option<&[f32]>, want: &[usize]) {
    let Some(mut vk) = vulkan(test) else { return };
    let want: Vec<i32> = want.iter().map(|&i| i as i32).collect();
    let got = draw(&mut vk, rows, params, true);
    assert_clean(&vk);
    for (i, row) in rows.iter().enumerate() {
        // The planted token is far below f32 resolution of the mass before it (ulp 2^-6 there).
        let before = row.logits[..row.plant].iter().filter(|&&v| v == 0.0).count() as f32;
        assert_eq!(before + W_PLANT as f32, before, "row {i}: the planted weight must vanish in an f32 sum");
    }
    assert_eq!(got, want, "{test}: vulkan draws (planted at {:?})", rows.iter().map(|r| r.plant).collect::<Vec<_>>());
    let cpu = draw(&mut cpu::CpuBackend::new(), rows, params, false);
    assert_eq!(cpu, want, "{test}: cpu draws");
}

#[test]
fn a_token_of_probability_6e_9_behind_the_mass_is_drawn_exactly_in_its_bracket() {
    let x = W_PLANT.ln() as f32;
    let w = f64::from(x).exp();
    let rows = [row(Where::Inside, x, w), row(Where::Before, x, w), row(Where::After, x, w)];
    for r in &rows {
        let total = r.logits.iter().filter(|&&v| v == 0.0).count() as f64 + w;
        let p = w / total;
        assert!(p > 6.0e-9 && p < 7.2e-9, "planted probability {p}");
    }
    let want: Vec<usize> = rows.iter().map(|r| r.want).collect();
    check(
        "a_token_of_probability_6e_9_behind_the_mass_is_drawn_exactly_in_its_bracket",
        &rows.iter().collect::<Vec<_>>(),
        None,
        &want,
    );
}

#[test]
fn scaled_and_cut_rows_keep_the_bracket() {
    // Scale 0.5 with the planted logit doubled: the same weight 2^-10; the fourth row is the first
    // with a min-p cut at max - 10 that removes the planted token (logit about -13.9), so the
    // target (now u k, short of the planted start by about u w - f > w / 5) falls in the token
    // before it.
    let s = 0.5f32;
    let x = (W_PLANT.ln() / f64::from(s)) as f32;
    let w = (f64::from(x) * f64::from(s)).exp();
    let rows = [row(Where::Inside, x, w), row(Where::Before, x, w), row(Where::After, x, w)];
    let want = [rows[0].want, rows[1].want, rows[2].want, rows[0].plant - 1];
    let params = [s, f32::NEG_INFINITY, s, -30.0, s, f32::NEG_INFINITY, s, -10.0];
    let all = [&rows[0], &rows[1], &rows[2], &rows[0]];
    check("scaled_and_cut_rows_keep_the_bracket", &all, Some(&params), &want);
}

#[test]
fn rows_longer_than_the_fixed_point_sums_hold_are_left_to_another_backend() {
    let Some(vk) = vulkan("rows_longer_than_the_fixed_point_sums_hold_are_left_to_another_backend") else { return };
    for (n, ok) in [(1usize << 23, true), ((1 << 23) + 1, false)] {
        let mut g = Graph::new();
        let x = g.input("logits", DType::F32, &[n, 1]).unwrap();
        let k = g.input("keys", DType::I32, &[4, 1]).unwrap();
        let y = g.categorical(x, k, None, None, 0).unwrap();
        assert_eq!(sched::Backend::supports(&vk, &g, y), ok, "row of {n}");
    }
}
