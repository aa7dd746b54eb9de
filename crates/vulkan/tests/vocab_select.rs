//! The on-vocabulary selection stages (`sampling`'s `backend/vocab_select.rs`: mirostat_v2, min_p
//! with `min_keep > 1` or `p > 1`, top_n_sigma, xtc) with the Vulkan backend holding the logits
//! and the CPU as the fallback: the chains of `sampling/tests/vocab_select_cases` in one mixed
//! batch, every token equal to the sequence's CPU chain run alone, the same placement as on the CPU
//! backend (every stage of theirs on Vulkan), normal and staged memory; the candidates read back
//! before their draws; rows with a NaN or `+inf` failing alone. The validation layer must stay
//! silent.

mod common;
#[path = "../../sampling/tests/vocab_select_cases/mod.rs"]
mod vocab_select_cases;

use std::sync::{Arc, Mutex};
use vocab_select_cases::{CHAINS, PLACEMENTS, bad_rows, candidates, run};
use vulkan::{Options, VulkanBackend};

/// Runs `f` with a Vulkan backend (validation on, its messages collected) and the CPU fallback,
/// then requires the validation layer to have stayed silent.
fn with_vulkan(staged: bool, f: impl FnOnce(Box<VulkanBackend>, Box<cpu::CpuBackend>)) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let opts = Options { validation: true, staged, log: Some(log.clone()), ..Options::default() };
    let vk = VulkanBackend::with_options(opts).unwrap();
    f(Box::new(vk), Box::new(cpu::CpuBackend::with_threads(1)));
    let msgs = log.lock().unwrap();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}

fn on_vulkan(v: usize, steps: usize, staged: bool) {
    with_vulkan(staged, |vk, cpu| assert_eq!(run(v, steps, &CHAINS, vk, Some(cpu)), PLACEMENTS, "staged {staged}"));
}

#[test]
fn vocabulary_selections_on_vulkan_match_the_cpu_chain() {
    let Some(probe) = common::vulkan("vocabulary_selections_on_vulkan_match_the_cpu_chain") else { return };
    drop(probe);
    on_vulkan(1000, 30, false);
    on_vulkan(1000, 10, true);
}

#[test]
fn vocabulary_selections_on_vulkan_match_the_cpu_chain_at_151936() {
    let Some(probe) = common::vulkan("vocabulary_selections_on_vulkan_match_the_cpu_chain_at_151936") else { return };
    drop(probe);
    on_vulkan(151_936, 2, false);
}

#[test]
fn vocabulary_selections_on_vulkan_read_back_the_cpu_chains_candidates_and_fail_bad_rows_alone() {
    let Some(probe) = common::vulkan("vocabulary_selections_on_vulkan_read_back_the_cpu_chains_candidates") else {
        return;
    };
    drop(probe);
    with_vulkan(false, |vk, cpu| candidates(1000, 20, vk, Some(cpu)));
    with_vulkan(false, |vk, cpu| bad_rows(1000, vk, Some(cpu)));
}
