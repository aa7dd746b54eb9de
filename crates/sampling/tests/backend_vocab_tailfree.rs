//! Backend sampling of tail-free sampling and the softmax stage (`vocab_cases::TAIL_FREE_CHAINS`,
//! also run on Vulkan by `crates/vulkan/tests/vocab_select.rs`): on the vocabulary, on the masked
//! row after a cut, on sorted and unsorted lists. Every chain's tokens over many steps equal its
//! CPU chain's in one mixed batch, at a small vocabulary (on rows of spreads, `-inf` entries, ties
//! and single finite entries) and at 151936; the candidates read back before the draws equal the
//! CPU chain's to 1e-5; rows with a NaN or `+inf` fail alone.

mod vocab_cases;

use vocab_cases::{
    TAIL_FREE_CANDIDATES, TAIL_FREE_CHAINS, TAIL_FREE_PLACEMENTS, bad_rows_of, candidates_of, logits_for, run,
    sorted_logits,
};

#[test]
fn tail_free_and_softmax_match_the_cpu_chain_at_a_small_vocabulary() {
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(1000, 60, &TAIL_FREE_CHAINS, logits_for, cpu, None), TAIL_FREE_PLACEMENTS);
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(1000, 40, &TAIL_FREE_CHAINS, sorted_logits, cpu, None), TAIL_FREE_PLACEMENTS);
}

/// Without the list forms ([`vocab_cases::list_form`]), whose flat top lists of flat long rows
/// the graph's softmax decides otherwise than llama.cpp's `f32` arithmetic.
#[test]
fn tail_free_and_softmax_match_the_cpu_chain_at_151936() {
    let (chains, places) = vocab_cases::tail_free_vocab_chains();
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(151_936, 6, &chains, logits_for, cpu, None), places);
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(151_936, 6, &chains, sorted_logits, cpu, None), places);
}

#[test]
fn tail_free_and_softmax_read_back_the_cpu_chains_candidates() {
    candidates_of(&TAIL_FREE_CANDIDATES, 1000, 30, Box::new(cpu::CpuBackend::new()), None);
    candidates_of(&TAIL_FREE_CANDIDATES, 151_936, 3, Box::new(cpu::CpuBackend::new()), None);
}

#[test]
fn tail_free_and_softmax_fail_bad_rows_alone() {
    bad_rows_of(&TAIL_FREE_CHAINS, 1000, Box::new(cpu::CpuBackend::new()), None);
}
