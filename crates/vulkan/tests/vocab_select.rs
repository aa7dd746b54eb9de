//! The on-vocabulary selection stages (`sampling`'s `backend/vocab_select.rs`: mirostat_v2, min_p
//! with `min_keep > 1` or `p > 1`, top_n_sigma, xtc) with the Vulkan backend holding the logits
//! and the CPU as the fallback: the chains of `sampling/tests/vocab_select_cases` in one mixed
//! batch, every token equal to the sequence's CPU chain run alone, the same placement as on the CPU
//! backend (every stage of theirs on Vulkan), normal and staged memory. The validation layer must
//! stay silent.

mod common;
#[path = "../../sampling/tests/vocab_select_cases/mod.rs"]
mod vocab_select_cases;

use std::sync::{Arc, Mutex};
use vocab_select_cases::{CHAINS, PLACEMENTS, run};
use vulkan::{Options, VulkanBackend};

fn on_vulkan(v: usize, steps: usize, staged: bool) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let opts = Options { validation: true, staged, log: Some(log.clone()), ..Options::default() };
    let vk = VulkanBackend::with_options(opts).unwrap();
    let placements = run(v, steps, &CHAINS, Box::new(vk), Some(Box::new(cpu::CpuBackend::with_threads(1))));
    assert_eq!(placements, PLACEMENTS, "staged {staged}");
    let msgs = log.lock().unwrap();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
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
