//! Backend sampling of the vocabulary stages and top-p AFTER a cut on the vocabulary (min-p,
//! top-p, min-p's fallback, typical, top-n-sigma, xtc before them): the record is the masked row,
//! where the CPU chain holds the survivors in token order, so a dynamic temp_ext, mirostat (v1),
//! typical, xtc, top-n-sigma, mirostat_v2, min-p with `min_keep > 1` or `p > 1` and top-p run on
//! the backend there, counting the row's finite entries. Every chain's tokens over many steps
//! equal its CPU chain's in a mixed batch (`vocab_cases::AFTER_CUT`, also run on Vulkan), at a
//! small vocabulary and at 151936; the candidates read back before the draws equal the CPU
//! chain's to 1e-5.

mod vocab_cases;

use vocab_cases::{
    AFTER_CUT, AFTER_CUT_CANDIDATES, AFTER_CUT_PLACEMENTS, bad_rows_of, candidates_of, logits_for, run, sorted_logits,
};

#[test]
fn stages_after_a_cut_match_the_cpu_chain_at_a_small_vocabulary() {
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(1000, 60, &AFTER_CUT, logits_for, cpu, None), AFTER_CUT_PLACEMENTS);
    // Rows with a single finite entry (a cut of one: entropy 0, one candidate) and many ties.
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(1000, 40, &AFTER_CUT, sorted_logits, cpu, None), AFTER_CUT_PLACEMENTS);
}

#[test]
fn stages_after_a_cut_match_the_cpu_chain_at_151936() {
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(151_936, 10, &AFTER_CUT, logits_for, cpu, None), AFTER_CUT_PLACEMENTS);
}

#[test]
fn stages_after_a_cut_read_back_the_cpu_chains_candidates() {
    candidates_of(&AFTER_CUT_CANDIDATES, 1000, 30, Box::new(cpu::CpuBackend::new()), None);
    candidates_of(&AFTER_CUT_CANDIDATES, 151_936, 3, Box::new(cpu::CpuBackend::new()), None);
}

#[test]
fn stages_after_a_cut_fail_bad_rows_alone() {
    bad_rows_of(&AFTER_CUT, 1000, Box::new(cpu::CpuBackend::new()), None);
}
