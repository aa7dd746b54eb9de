//! Graph reuse on the CPU backend: 100 steps of the `sampling_tail` fixture through `sched` make one
//! plan and one allocation round, and every step's sampled tokens and probabilities match a host
//! reference computed from that step's inputs (which change every step, and so do the tokens).

use cpu::CpuBackend;
use graph::philox;
use sched::Scheduler;

const VOCAB: usize = 1000;
const ROWS: usize = 4;
const K: usize = 40;

/// Deterministic pseudo-random logits in [-4, 4) for a step (xorshift).
fn logits(step: u64) -> Vec<f32> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64 ^ (step.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
    (0..VOCAB * ROWS)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect()
}

struct Reference {
    /// Per row: the candidate tokens that are acceptable (one, or neighbours when the draw falls
    /// within rounding distance of a CDF step).
    tokens: Vec<Vec<i32>>,
    probs: Vec<f32>,
}

/// The fixture's computation on the host, following the ops' documented semantics.
fn reference(logits: &[f32], inv_t: &[f32], seeds: &[u64], step: u64) -> Reference {
    let mut tokens = Vec::new();
    let mut probs = Vec::new();
    for r in 0..ROWS {
        let scaled: Vec<f32> = logits[r * VOCAB..(r + 1) * VOCAB].iter().map(|&l| l * inv_t[r]).collect();
        let mut ids: Vec<usize> = (0..VOCAB).collect();
        ids.sort_by(|&a, &b| scaled[b].total_cmp(&scaled[a]).then(a.cmp(&b)));
        let top: Vec<f32> = ids[..K].iter().map(|&i| scaled[i]).collect();
        let max = top.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = top.iter().map(|&v| (v - max).exp()).collect();
        let sum: f32 = e.iter().sum();
        let p: Vec<f32> = e.iter().map(|&v| v / sum).collect();
        let mut cdf = Vec::with_capacity(K);
        let mut acc = 0.0f32;
        for &v in &p {
            acc += v;
            cdf.push(acc);
        }
        let u = philox::uniform(seeds[r], step, philox::stream::element(0, 0));
        let target = u * cdf[K - 1];
        let pick = cdf.iter().position(|&c| c > target).unwrap_or(0);
        let close = |c: f32| (c - target).abs() < 1e-5;
        let lo = if pick > 0 && close(cdf[pick - 1]) { pick - 1 } else { pick };
        let hi = if pick + 1 < K && close(cdf[pick]) { pick + 1 } else { pick };
        tokens.push((lo..=hi).map(|j| ids[j] as i32).collect());
        probs.extend(p);
    }
    Reference { tokens, probs }
}

#[test]
fn a_hundred_steps_of_the_sampling_tail_plan_once_and_follow_their_inputs() {
    let path = format!("{}/../../fixtures/graphs/sampling_tail.graph", env!("CARGO_MANIFEST_DIR"));
    let g = graph::fixture::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let (n_logits, n_inv_t, n_keys) = (g.find("logits").unwrap(), g.find("inv_t").unwrap(), g.find("keys").unwrap());
    let (n_token, n_probs) = (g.find("token").unwrap(), g.find("probs").unwrap());
    let mut s = Scheduler::new(vec![Box::new(CpuBackend::with_threads(2))]).unwrap();
    let inv_t = [1.0f32, 0.5, 2.0, 1.25];
    let seeds = [1u64, 42, 0xDEAD_BEEF_0000_0001, 7];
    let mut seen = std::collections::HashSet::new();
    for step in 0..100u64 {
        s.plan(&g).unwrap();
        let l = logits(step);
        s.set_input_f32(n_logits, &l).unwrap();
        s.set_input_f32(n_inv_t, &inv_t).unwrap();
        let keys: Vec<i32> = seeds
            .iter()
            .flat_map(|&seed| [seed as u32 as i32, (seed >> 32) as u32 as i32, step as u32 as i32, 0])
            .collect();
        s.set_input_i32(n_keys, &keys).unwrap();
        s.compute().unwrap();
        let tokens = s.read_i32(n_token).unwrap();
        let probs = s.read_f32(n_probs).unwrap();
        let want = reference(&l, &inv_t, &seeds, step);
        assert_eq!(tokens.len(), ROWS);
        for (r, (tok, ok)) in tokens.iter().zip(&want.tokens).enumerate() {
            assert!(ok.contains(tok), "step {step} row {r}: token {tok} not in {ok:?}");
        }
        for (i, (&got, &exp)) in probs.iter().zip(&want.probs).enumerate() {
            assert!((got - exp).abs() <= 1e-5 + 1e-4 * exp, "step {step}: probs[{i}] = {got}, expected {exp}");
        }
        seen.insert(tokens);
    }
    let st = s.stats();
    assert_eq!((st.plans, st.allocations, st.steps), (1, 1, 100));
    assert_eq!(st.bytes_between_backends, 0);
    assert_eq!(st.bytes_to_host, 100 * (ROWS * 4 + K * ROWS * 4) as u64);
    assert!(seen.len() > 90, "tokens barely change with the inputs: {} distinct of 100", seen.len());
}
