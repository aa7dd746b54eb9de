//! The grammar stage on Vulkan: the mixed batch of `sampling/tests/grammar_cases` (grammar-first
//! rows masking the vocabulary and a top-k's list with the packed mask and `token_mask`, a plain
//! row, an optimistic grammar finishing on the CPU) with the Vulkan backend holding the logits,
//! every token equal to its chain's on the CPU. The validation layer must stay silent.

mod common;
#[path = "../../sampling/tests/grammar_cases/mod.rs"]
mod grammar_cases;

use std::sync::{Arc, Mutex};
use vulkan::{Options, VulkanBackend};

#[test]
fn grammar_rows_on_vulkan_match_the_cpu_chain() {
    let Some(probe) = common::vulkan("grammar_rows_on_vulkan_match_the_cpu_chain") else { return };
    drop(probe);
    let log = Arc::new(Mutex::new(Vec::new()));
    let opts = Options { validation: true, log: Some(log.clone()), ..Options::default() };
    let vk = VulkanBackend::with_options(opts).unwrap();
    let (placements, written, resampled) =
        grammar_cases::mixed_batch(Box::new(vk), Some(Box::new(cpu::CpuBackend::with_threads(1))), 50);
    assert_eq!(placements[0], "+grammar +top_k +temp +dist");
    assert_eq!(placements[1], "+top_k +grammar +dist");
    assert_eq!(placements[4], "+grammar +greedy");
    assert!(resampled > 5, "{resampled}");
    assert!(written >= 3 * 32 * 4, "{written}");
    let msgs = log.lock().unwrap();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}
