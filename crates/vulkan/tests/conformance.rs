//! The whole op-conformance suite (`crates/conformance`) on the Vulkan backend, through
//! `sched::Scheduler`, with the CPU backend as the oracle and the validation layer recording.
#![allow(clippy::print_stderr)]

mod common;

use conformance::runner::{Oracle, run_suite_on};
use std::sync::{Arc, Mutex};
use vulkan::device::MessageLog;
use vulkan::{Options, VulkanBackend};

#[test]
fn conformance_suite_against_cpu() {
    // Probe first so a missing device skips (or fails under SAMPLING_REQUIRE_VULKAN=1) loudly.
    let Some(probe) = common::vulkan("conformance_suite_against_cpu") else { return };
    drop(probe);
    let log: MessageLog = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    let factory = Box::new(move || {
        let opts = Options { validation: true, log: Some(l2.clone()), ..Options::default() };
        Ok(Box::new(VulkanBackend::with_options(opts)?) as Box<dyn sched::Backend>)
    });
    let oracle = Oracle::Backend(Box::new(|| Ok(Box::new(cpu::CpuBackend::new()) as Box<dyn sched::Backend>)));
    let report = run_suite_on(factory, oracle).expect("suite runs");
    eprintln!("{report}");
    assert!(report.ok(), "conformance failures on vulkan:\n{report}");
    assert!(!report.passed().is_empty(), "no case ran on vulkan");
    let msgs = log.lock().unwrap().clone();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}
