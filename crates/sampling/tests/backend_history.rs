//! Backend sampling of the stages whose state is the token history (dry) or what they selected
//! (adaptive-p): the shared cases of `vocab_cases::HISTORY_CHAINS` in one mixed batch on the CPU
//! backend, token for token against each chain run alone on the CPU, with every third step first
//! sampled on other logits and not accepted (state moves only on accept). The Vulkan counterpart is
//! in `crates/vulkan/tests/vocab_select.rs`.

mod common;
mod vocab_cases;

use sampling::backend::{SeqConfig, SeqId};
use sampling::{Chain, Sampler};
use vocab_cases::{Batch, HISTORY_CHAINS, HISTORY_PLACEMENTS, run_resampled};

/// Peaked rows at a small vocabulary, so that tokens repeat and DRY penalises.
fn small_logits(v: usize, step: usize, row: usize) -> Vec<f32> {
    vocab_cases::logits_for(v, step, row).iter().map(|x| x * 1.5).collect()
}

#[test]
fn history_stages_match_the_cpu_chain_over_60_steps_with_unaccepted_samples() {
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run_resampled(64, 60, &HISTORY_CHAINS, small_logits, cpu, None, 3), HISTORY_PLACEMENTS);
}

#[test]
fn history_stages_match_the_cpu_chain_at_151936() {
    let cpu = Box::new(cpu::CpuBackend::new());
    let placed = run_resampled(151_936, 8, &HISTORY_CHAINS, vocab_cases::logits_for, cpu, None, 3);
    assert_eq!(placed, HISTORY_PLACEMENTS);
}

#[test]
fn dry_penalises_on_the_backend_as_on_the_cpu() {
    // The cases above are worth something only where DRY penalised: on this history the CPU
    // sampler moves token 4 by -4 (it would extend a repeat of 3 tokens, allowed 1: 1 * 2^(3 - 1))
    // (the only token that followed an earlier 3), and the backend's candidates (read back from
    // the penalised row) carry the same values.
    let mut chain = Chain::parse("dry(multiplier=1,base=2,allowed_length=1)").unwrap();
    [1u32, 2, 3, 4, 1, 2, 3].iter().for_each(|&t| chain.accept(t));
    let row = [0.5f32, 0.0, 1.0, -1.0, 0.25, 2.0, 0.0, 0.0];
    let want = chain.clone().run(&row).unwrap().candidates;
    let cpu = Box::new(cpu::CpuBackend::new());
    let mut b = Batch::of(8, vec![chain], |c| SeqConfig::new(c).with_candidates(), cpu, None);
    assert_eq!(b.placements(), ["+dry"]);
    let out = b.step(&row);
    let got = out.candidates(0).unwrap();
    let logit = |c: &[sampling::TokenData], id: u32| c.iter().find(|t| t.id == id).unwrap().logit;
    assert_eq!(logit(&want, 4), 0.25 - 4.0);
    for t in &want {
        assert_eq!(logit(got, t.id), t.logit, "token {}", t.id);
    }
}

/// The state `get` reads from stage 1 of `spec` after `unaccepted` samples on other logits (none
/// accepted) and then one sample accepted, on the backend (a tail on the CPU backend) or by the
/// CPU chain alone.
fn state_after(spec: &str, get: fn(&dyn std::any::Any) -> f32, backend: bool, unaccepted: usize) -> f32 {
    let v = 500;
    let row = |step: usize| vocab_cases::logits_for(v, step, 0);
    let state = |chain: &Chain| get(chain.stages()[1].as_ref());
    if !backend {
        let mut chain = Chain::parse(spec).unwrap();
        for i in 0..unaccepted {
            chain.run(&row(100 + i)).unwrap();
        }
        // No `set_step`: the draws' step moves on accept only (`sampling::sampler::Rng`).
        chain.sample(&row(0)).unwrap();
        return state(&chain);
    }
    let mut b = Batch::new(v, &[spec], SeqConfig::new, Box::new(cpu::CpuBackend::new()), None);
    assert!(!b.placements()[0].contains('-'), "{:?}", b.placements());
    for i in 0..unaccepted {
        b.step(&row(100 + i));
    }
    let t = b.step(&row(0)).token(0).unwrap();
    b.accept(0, t);
    state(&b.seqs.get(SeqId(0)).unwrap().chain)
}

/// Sampling N times without accepting, then sampling once and accepting, leaves the state of
/// sampling once and accepting, on the CPU chain and on the backend alike; and that state moved.
fn moves_only_on_accept(spec: &str, get: fn(&dyn std::any::Any) -> f32, initial: f32) {
    for backend in [false, true] {
        let once = state_after(spec, get, backend, 0);
        assert_ne!(once, initial, "{spec}: the state moved (backend {backend})");
        for n in [1, 3] {
            assert_eq!(state_after(spec, get, backend, n), once, "{spec}: backend {backend}, {n} unaccepted samples");
        }
    }
}

#[test]
fn adaptive_p_state_moves_only_on_accept() {
    use sampling::samplers::AdaptiveP;
    let average = |s: &dyn std::any::Any| s.downcast_ref::<AdaptiveP>().unwrap().average();
    moves_only_on_accept("top_k(k=20);adaptive_p(target=0.2,decay=0.5,seed=7)", average, 0.2);
}

#[test]
fn mirostat_state_moves_only_on_accept() {
    use sampling::samplers::{Mirostat, MirostatV2};
    let mu = |s: &dyn std::any::Any| s.downcast_ref::<Mirostat>().unwrap().mu();
    moves_only_on_accept("top_k(k=20);mirostat(tau=3,eta=0.1,m=10,seed=8)", mu, 6.0);
    let mu2 = |s: &dyn std::any::Any| s.downcast_ref::<MirostatV2>().unwrap().mu();
    moves_only_on_accept("top_k(k=20);mirostat_v2(tau=3,eta=0.1,seed=9)", mu2, 6.0);
    moves_only_on_accept("min_p(p=0.05);mirostat_v2(tau=3,eta=0.1,seed=10)", mu2, 6.0);
}

/// Every random stage's step (its draws' counter) moves on accept only: sampling a row again and
/// again without accepting draws the same token each time, and after one accept the chain stands
/// where sampling once and accepting leaves it; accepting a prompt token, with no draw before it,
/// moves nothing.
#[test]
fn random_stages_step_moves_only_on_accept() {
    let v = 500;
    let row = |step: usize| vocab_cases::logits_for(v, step, 0);
    for spec in [
        "temp(t=0.8);dist(seed=5)",
        "xtc(p=0.5,t=0.05,seed=3);temp(t=0.9);dist(seed=4)",
        "top_k(k=20);mirostat_v2(tau=3,eta=0.1,seed=9)",
        "top_k(k=20);mirostat(tau=3,eta=0.1,m=10,seed=8)",
        "top_k(k=20);adaptive_p(target=0.2,decay=0.5,seed=7)",
    ] {
        let mut once = Chain::parse(spec).unwrap();
        let want = once.sample(&row(0)).unwrap();
        assert_eq!(once.step(), Some(1), "{spec}: one accepted draw moves the step");
        let mut again = Chain::parse(spec).unwrap();
        again.accept(17); // a prompt token: no draw before it
        assert_eq!(again.step(), Some(0), "{spec}: accepting without a draw");
        for _ in 0..3 {
            assert_eq!(again.run(&row(0)).unwrap().selected, Some(want), "{spec}: unaccepted draws repeat");
        }
        assert_eq!(again.sample(&row(0)).unwrap(), want, "{spec}");
        assert_eq!(again.step(), once.step(), "{spec}");
        // and the next accepted draws follow alike
        for i in 1..5 {
            assert_eq!(again.sample(&row(i)).unwrap(), once.sample(&row(i)).unwrap(), "{spec}, draw {i}");
        }
    }
}

#[test]
fn logprobs_and_candidates_read_back_values_on_the_cpu_backend() {
    let cpu = Box::new(cpu::CpuBackend::new());
    vocab_cases::logprobs_of(&vocab_cases::WITH_LOGPROBS, 8, 1000, 12, cpu, None);
}
