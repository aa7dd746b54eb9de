//! Graph reuse on the CPU backend: 100 steps of the `sampling_tail` fixture through `sched` make one
//! plan and one allocation round, and every step's sampled tokens and probabilities match the
//! conformance suite's f64 reference interpreter on that step's inputs (which change every step,
//! and so do the tokens).

use cpu::CpuBackend;
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

fn bytes<T: Copy, const N: usize>(v: &[T], le: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| le(x)).collect()
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
        let keys: Vec<i32> = seeds
            .iter()
            .flat_map(|&seed| [seed as u32 as i32, (seed >> 32) as u32 as i32, step as u32 as i32, 0])
            .collect();
        let inputs = [
            (n_logits, bytes(&l, f32::to_le_bytes)),
            (n_inv_t, bytes(&inv_t, f32::to_le_bytes)),
            (n_keys, bytes(&keys, i32::to_le_bytes)),
        ];
        for (id, b) in &inputs {
            s.set_input(*id, b).unwrap();
        }
        s.compute().unwrap();
        let tokens = s.read_i32(n_token).unwrap();
        let probs = s.read_f32(n_probs).unwrap();
        // The conformance suite's f64 reference interpreter on this step's inputs.
        let want = conformance::reference::run(&g, &inputs, &[n_token, n_probs]).unwrap();
        assert_eq!(tokens.len(), ROWS);
        let want_tokens: Vec<i32> = want[0].iter().map(|&t| t as i32).collect();
        assert_eq!(tokens, want_tokens, "step {step}");
        assert_eq!(probs.len(), want[1].len());
        for (i, (&got, &exp)) in probs.iter().zip(&want[1]).enumerate() {
            assert!(
                (f64::from(got) - exp).abs() <= 1e-5 + 1e-4 * exp,
                "step {step}: probs[{i}] = {got}, expected {exp}"
            );
        }
        seen.insert(tokens);
    }
    let st = s.stats();
    assert_eq!((st.plans, st.allocations, st.steps), (1, 1, 100));
    assert_eq!(st.bytes_between_backends, 0);
    assert_eq!(st.bytes_to_host, 100 * (ROWS * 4 + K * ROWS * 4) as u64);
    assert!(seen.len() > 90, "tokens barely change with the inputs: {} distinct of 100", seen.len());
}
