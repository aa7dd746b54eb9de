//! Backend sampling of the stages whose vocabulary-view paths keep their survivors in token-id
//! order (their vocabulary forms in `samplers/`): mirostat_v2, min_p with `min_keep > 1` or `p > 1`,
//! top_n_sigma and xtc on the whole vocabulary, on the CPU backend (`vocab_cases`, also run on
//! Vulkan), at a small vocabulary over 60 steps and at 151936.

mod vocab_cases;

use vocab_cases::{CHAINS, PLACEMENTS, bad_rows, candidates, logits_for, run};

#[test]
fn vocabulary_selections_match_the_cpu_chain_at_a_small_vocabulary() {
    assert_eq!(run(1000, 60, &CHAINS, logits_for, Box::new(cpu::CpuBackend::new()), None), PLACEMENTS);
}

#[test]
fn vocabulary_selections_match_the_cpu_chain_at_151936() {
    assert_eq!(run(151_936, 4, &CHAINS, logits_for, Box::new(cpu::CpuBackend::new()), None), PLACEMENTS);
}

#[test]
fn vocabulary_selections_read_back_the_cpu_chains_candidates() {
    candidates(1000, 30, Box::new(cpu::CpuBackend::new()), None);
    candidates(151_936, 3, Box::new(cpu::CpuBackend::new()), None);
}

#[test]
fn vocabulary_selections_fail_bad_rows_alone() {
    bad_rows(1000, Box::new(cpu::CpuBackend::new()), None);
}
