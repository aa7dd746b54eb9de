//! The whole op-conformance suite (`crates/conformance`) on the Vulkan backend, through
//! `sched::Scheduler`, with the CPU backend as the oracle and the validation layer recording; and
//! the row reductions, soft_max, rms_norm and mul_mat cases again on the shared-memory variants
//! (`Options::no_subgroups`) that devices without subgroup arithmetic run. The fused sampling
//! ops' cases (`sample/`) and the fixture graphs (`fixture/`) must all run on Vulkan (none
//! declined), and every op must run on Vulkan in at least one case.
#![allow(clippy::print_stderr)]

mod common;

use conformance::runner::{Oracle, SchedTarget, run_cases};
use std::sync::{Arc, Mutex};
use vulkan::device::MessageLog;
use vulkan::{Options, VulkanBackend};

/// A Vulkan backend factory with `opts` (validation on, messages into `log`).
fn factory(opts: Options, log: &MessageLog) -> conformance::runner::BackendFactory {
    let log = log.clone();
    Box::new(move || {
        let opts = Options { validation: true, log: Some(log.clone()), ..opts.clone() };
        Ok(Box::new(VulkanBackend::with_options(opts)?) as Box<dyn sched::Backend>)
    })
}

fn cpu_oracle() -> Oracle {
    Oracle::Backend(Box::new(|| Ok(Box::new(cpu::CpuBackend::new()) as Box<dyn sched::Backend>)))
}

#[test]
fn conformance_suite_against_cpu() {
    // Probe first so a missing device skips (or fails under SAMPLING_REQUIRE_VULKAN=1) loudly.
    let Some(probe) = common::vulkan("conformance_suite_against_cpu") else { return };
    drop(probe);
    let log: MessageLog = Arc::new(Mutex::new(Vec::new()));
    // CONFORMANCE_FILTER=sample/ runs only the cases whose name contains "sample/".
    let cases = conformance::cases::matching(std::env::var("CONFORMANCE_FILTER").ok().as_deref());
    let mut target = SchedTarget::new(factory(Options::default(), &log)).expect("the device opened once already");
    let mut oracle = cpu_oracle().into_target().expect("the CPU backend starts");
    let report = run_cases(&cases, &mut target, oracle.as_mut());
    eprintln!("{report}");
    assert!(report.ok(), "conformance failures on vulkan:\n{report}");
    assert!(!report.passed().is_empty(), "no case ran on vulkan");
    // The fused sampling ops (every regime, dtype and post stage, V up to 262,144) and the whole
    // fixture graphs (an MLP, attention with KV-cache views, a sampling tail) all run on Vulkan:
    // none is declined to leave the comparison to nothing.
    let declined: Vec<&str> = report
        .skipped()
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| n.starts_with("sample/") || n.starts_with("fixture/"))
        .collect();
    assert!(declined.is_empty(), "cases declined by vulkan: {declined:?}");
    // Every op runs on Vulkan in at least one case: a new `graph::Op` without a Vulkan
    // implementation (declined everywhere, so its cases are only skipped) fails here.
    if std::env::var_os("CONFORMANCE_FILTER").is_none() {
        let passed: std::collections::BTreeSet<&str> = report.passed().iter().map(|r| r.name.as_str()).collect();
        let mut ran = std::collections::BTreeSet::new();
        for c in cases.iter().filter(|c| passed.contains(c.name.as_str())) {
            for (_, n) in c.build().expect("the case built for the run").graph.nodes() {
                ran.insert(n.op.name());
            }
        }
        let missing: Vec<&str> = conformance::ops::names().into_iter().filter(|op| !ran.contains(op)).collect();
        assert!(missing.is_empty(), "ops that no case ran on vulkan: {missing:?}\n{report}");
    }
    let msgs = log.lock().unwrap().clone();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}

#[test]
fn shared_memory_variants_without_subgroups() {
    let opts = Options { no_subgroups: true, ..Options::default() };
    let Some(probe) = common::vulkan_with("shared_memory_variants_without_subgroups", opts.clone()) else { return };
    assert!(!probe.uses_subgroups());
    drop(probe);
    // The families whose shaders have a subgroup and a shared-memory reduction; the batch-64 rows
    // of the longest lengths are left to the full suite's run.
    let families = ["reduce/sum_rows/", "reduce/max_rows/", "reduce/argmax/", "softmax/", "norm/rms_norm/", "mul_mat/"];
    let cases: Vec<_> = conformance::cases::all()
        .into_iter()
        .filter(|c| families.iter().any(|f| c.name.starts_with(f)))
        .filter(|c| !c.name.contains("x64") && !c.name.contains("262144"))
        .collect();
    assert!(cases.len() > 50, "{} cases", cases.len());
    let log: MessageLog = Arc::new(Mutex::new(Vec::new()));
    let mut target = SchedTarget::new(factory(opts, &log)).expect("the device opened once already");
    let mut oracle = cpu_oracle().into_target().expect("the CPU backend starts");
    let report = run_cases(&cases, &mut target, oracle.as_mut());
    eprintln!("{report}");
    assert!(report.ok(), "failures without subgroups:\n{report}");
    assert!(report.skipped().is_empty(), "these families all run on Vulkan:\n{report}");
    let msgs = log.lock().unwrap().clone();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}

#[test]
fn a_descriptor_set_per_dispatch() {
    // Devices without VK_KHR_push_descriptor allocate a descriptor set per dispatch: the whole-graph
    // fixtures and the sampling rows run that way too, against the CPU, validation on.
    let opts = Options { descriptor_sets: true, ..Options::default() };
    let Some(probe) = common::vulkan_with("a_descriptor_set_per_dispatch", opts.clone()) else { return };
    assert!(!probe.uses_push_descriptors());
    drop(probe);
    let cases: Vec<_> = conformance::cases::all()
        .into_iter()
        .filter(|c| c.name.starts_with("fixture/") || c.name.starts_with("sort/top_k/blocks/4097"))
        .collect();
    assert!(cases.len() >= 5, "{} cases", cases.len());
    let log: MessageLog = Arc::new(Mutex::new(Vec::new()));
    let mut target = SchedTarget::new(factory(opts, &log)).expect("the device opened once already");
    let mut oracle = cpu_oracle().into_target().expect("the CPU backend starts");
    let report = run_cases(&cases, &mut target, oracle.as_mut());
    eprintln!("{report}");
    assert!(report.ok(), "failures with descriptor sets:\n{report}");
    assert!(report.skipped().is_empty(), "these cases all run on Vulkan:\n{report}");
    let msgs = log.lock().unwrap().clone();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}
