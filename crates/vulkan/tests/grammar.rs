//! The grammar stage on Vulkan: the mixed batch of `sampling/tests/grammar_cases` (grammar-first
//! rows masking the vocabulary and a top-k's list with the packed mask and `token_mask`, a plain
//! row, optimistic grammars whose rejected rows run a second, masked step on Vulkan over the
//! logits where the first step left them) with the Vulkan backend holding the logits, every token
//! equal to its chain's on the CPU. The validation layer must stay silent.

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
    let m = grammar_cases::mixed_batch(Box::new(vk), Some(Box::new(cpu::CpuBackend::with_threads(1))), 50);
    grammar_cases::check_mixed(&m);
    // Vulkan has no masked top-k: the mask and the top-k lower apart there.
    assert_eq!(m.masked_top_k, 0, "{m:?}");
    let msgs = log.lock().unwrap();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}
