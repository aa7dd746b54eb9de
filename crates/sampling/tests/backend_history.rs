//! Backend sampling of the stages whose state is the token history (dry): the shared cases of `vocab_cases::HISTORY_CHAINS` in one mixed batch on the CPU
//! backend, token for token against each chain run alone on the CPU, with every third step first
//! sampled on other logits and not accepted (state moves only on accept). The Vulkan counterpart is
//! in `crates/vulkan/tests/vocab_select.rs`.

mod common;
mod vocab_cases;

use vocab_cases::{HISTORY_CHAINS, HISTORY_PLACEMENTS, run_resampled};

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
    // (the only token that followed an earlier 3), and the backend's candidates (read back from the penalised row) carry the
    // same values.
    use graph::{DType, Graph};
    use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
    use sampling::{Chain, Sampler};
    let spec = "dry(multiplier=1,base=2,allowed_length=1)";
    let history = [1u32, 2, 3, 4, 1, 2, 3];
    let mut chain = Chain::parse(spec).unwrap();
    history.iter().for_each(|&t| chain.accept(t));
    let row = [0.5f32, 0.0, 1.0, -1.0, 0.25, 2.0, 0.0, 0.0];
    let want = chain.clone().run(&row).unwrap().candidates;
    let mut seqs = Sequences::new(1).unwrap();
    seqs.set(SeqId(0), SeqConfig::new(chain).with_candidates());
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[8, 1]).unwrap();
    let cpu = cpu::CpuBackend::new();
    let mut tail = Tail::attach(&mut g, logits, &[(SeqId(0), 0)], &seqs, &cpu).unwrap();
    assert_eq!(tail.placement()[0].1, "+dry");
    let mut sched = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
    sched.plan(&g).unwrap();
    sched.set_input_f32(logits, &row).unwrap();
    tail.set_inputs(&mut sched, &mut seqs).unwrap();
    sched.compute().unwrap();
    let out = tail.sample(&mut sched, &mut seqs).unwrap();
    let got = out.candidates(0).unwrap();
    let logit = |c: &[sampling::TokenData], id: u32| c.iter().find(|t| t.id == id).unwrap().logit;
    assert_eq!(logit(&want, 4), 0.25 - 4.0);
    for t in &want {
        assert_eq!(logit(got, t.id), t.logit, "token {}", t.id);
    }
}
