//! The sections of `gpu-report`, in the order they run: what each measures, with which sizes in a
//! full run and in `--quick`, and its time limit. Most are `cargo xtask bench` suites called with
//! the GPU's sizes (their modules document the method); `device` and `conformance` are written here,
//! `latency` in its own module.

use super::{require_vulkan, suite};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Instant;

/// What a section is given.
#[derive(Debug)]
pub struct Ctx {
    /// Where the section writes its JSON.
    pub out: PathBuf,
    /// `--quick`: the smallest size, once.
    pub quick: bool,
}

/// One section of the report.
#[derive(Debug)]
pub struct Section {
    /// Name (`--only`, the JSON file, the report's heading).
    pub name: &'static str,
    /// What it measures, in a few words.
    pub title: &'static str,
    /// Time limits in seconds: (full, quick).
    pub limit_s: (u64, u64),
    /// Not run in `--quick` (a second size of a section that `--quick` runs once already).
    pub full_only: bool,
    /// Runs it.
    pub run: fn(&Ctx) -> Result<()>,
}

const fn section(name: &'static str, title: &'static str, limit_s: (u64, u64), run: fn(&Ctx) -> Result<()>) -> Section {
    Section { name, title, limit_s, full_only: false, run }
}

/// Every section. The full run's limits add up to 293 s (the whole report took 150-160 s on an
/// H100, each section well inside its limit); `--quick`'s to 330 s (on lavapipe it takes seconds).
pub const SECTIONS: &[Section] = &[
    section("device", "the Vulkan device, its driver and limits", (10, 20), device),
    section(
        "latency",
        "one host round trip to the device: downloads, uploads, a one-op step",
        (10, 20),
        super::latency::run,
    ),
    section("conformance", "the op-conformance suite on the device, CPU backend as oracle", (30, 60), conformance),
    section("sampling-151936", "backend sampling vs the CPU path, V = 151936", (40, 60), sampling_151936),
    Section {
        full_only: true,
        ..section("sampling-262144", "backend sampling vs the CPU path, V = 262144", (55, 0), sampling_262144)
    },
    section("fused", "top_k_top_p_sample and random_sample vs a read of the logits", (30, 30), fused),
    section("readback", "reading back 1, 4, 32 rows vs the whole output", (8, 20), readback),
    section("spec-verify", "verifying 8 drafts vs one plain draw", (15, 30), spec_verify),
    section("decode-demo", "decoding, the demo model (tiny in --quick)", (10, 40), decode_demo),
    Section {
        full_only: true,
        ..section("decode-smollm2-135m", "decoding, random SmolLM2-135M shapes (q8_0/q4_1)", (20, 0), decode_smollm2)
    },
    Section {
        full_only: true,
        ..section("decode-gemma3-270m", "decoding, random Gemma 3 270M shapes (q8_0)", (20, 0), decode_gemma3)
    },
    section("cpu-chains", "the CPU sampler chains on this machine's CPU (context)", (10, 20), cpu_chains),
    section("profile", "where the GPU's time goes: per-op times from timestamps", (35, 30), super::profile::run),
];

/// The section called `name`.
pub fn find(name: &str) -> Result<&'static Section> {
    SECTIONS.iter().find(|s| s.name == name).with_context(|| {
        let names: Vec<&str> = SECTIONS.iter().map(|s| s.name).collect();
        format!("no section `{name}`: one of {}", names.join(", "))
    })
}

fn write_json(cx: &Ctx, doc: &serde_json::Value) -> Result<()> {
    std::fs::write(&cx.out, serde_json::to_string_pretty(doc)?).with_context(|| format!("writing {}", cx.out.display()))
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn device(cx: &Ctx) -> Result<()> {
    let vk = require_vulkan()?;
    let i = vk.device_info();
    let doc = serde_json::json!({
        "name": i.name, "type": i.device_type, "driver": i.driver,
        "driver_version_raw": i.driver_version, "api_version": i.api_version,
        "vendor_id": format!("{:#06x}", i.vendor_id), "device_id": format!("{:#06x}", i.device_id),
        "subgroup_size": i.subgroup_size, "subgroup_shaders": i.subgroups_used, "shaderFloat64": i.float64,
        "push_descriptors": i.push_descriptors,
        "max_workgroup_invocations": i.max_workgroup_invocations,
        "max_workgroup_size": format!("{:?}", i.max_workgroup_size),
        "max_workgroup_count": format!("{:?}", i.max_workgroup_count),
        "max_shared_memory_bytes": i.max_shared_memory, "max_storage_buffer_range": i.max_storage_buffer_range,
        "timestamp_period_ns": i.timestamp_period, "validation_layer": i.validation,
        "host_cpu": cpu_name(), "host_threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "binary": env!("CARGO_PKG_VERSION"),
    });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    write_json(cx, &doc)
}

fn conformance(cx: &Ctx) -> Result<()> {
    use conformance::runner::{Oracle, SchedTarget, run_cases};
    drop(require_vulkan()?);
    // --quick: the whole-graph fixtures (an MLP, attention over a KV cache, a sampling tail).
    let cases = if cx.quick { conformance::cases::matching(Some("fixture/")) } else { conformance::cases::all() };
    let factory: conformance::runner::BackendFactory =
        Box::new(|| Ok(Box::new(vulkan::VulkanBackend::new()?) as Box<dyn sched::Backend>));
    let mut target = SchedTarget::new(factory)?;
    let oracle = Oracle::Backend(Box::new(|| Ok(Box::new(cpu::CpuBackend::new()) as Box<dyn sched::Backend>)));
    let mut oracle = oracle.into_target()?;
    let t = Instant::now();
    let report = run_cases(&cases, &mut target, oracle.as_mut());
    println!("{report}");
    let lines = |filter: &str| -> Vec<String> {
        report
            .table()
            .lines()
            .filter(|l| l.starts_with(filter))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    let doc = serde_json::json!({
        "summary": report.summary(),
        "passed": report.passed().len(), "failed": report.failures().len(), "skipped": report.skipped().len(),
        "seconds": t.elapsed().as_secs_f64(),
        "failures": lines("FAIL").into_iter().chain(lines("ERROR")).collect::<Vec<_>>(),
        "skips": lines("SKIP"),
    });
    write_json(cx, &doc)?;
    anyhow::ensure!(report.ok(), "{} conformance failures on the device", report.failures().len());
    Ok(())
}

fn sampling(cx: &Ctx, vocab: &str) -> Result<()> {
    require_vulkan()?;
    let args: &[&str] = if cx.quick {
        &["--path", "graph", "--backend", "vulkan", "--vocab", vocab, "--batch", "1", "--steps", "1", "--reps", "1"]
    } else {
        &[
            "--path",
            "graph",
            "--backend",
            "vulkan",
            "--vocab",
            vocab,
            "--batch",
            "1,8,64,256",
            "--steps",
            "4",
            "--reps",
            "3",
        ]
    };
    suite(crate::bench_sampling_graph::run, "sampling", args, &cx.out)
}

fn sampling_151936(cx: &Ctx) -> Result<()> {
    sampling(cx, "151936")
}

fn sampling_262144(cx: &Ctx) -> Result<()> {
    sampling(cx, "262144")
}

fn fused(cx: &Ctx) -> Result<()> {
    require_vulkan()?;
    let args: &[&str] = if cx.quick {
        &["--backend", "vulkan", "--batch", "1", "--reps", "1"]
    } else {
        &["--backend", "vulkan", "--batch", "1,16,64,256", "--reps", "7"]
    };
    suite(crate::bench_fused::run, "fused", args, &cx.out)
}

fn readback(cx: &Ctx) -> Result<()> {
    require_vulkan()?;
    let args: &[&str] =
        if cx.quick { &["--backend", "vulkan", "--reps", "1", "--ms", "2"] } else { &["--backend", "vulkan"] };
    suite(crate::bench_readback::run, "readback", args, &cx.out)
}

fn spec_verify(cx: &Ctx) -> Result<()> {
    require_vulkan()?;
    let args: &[&str] = if cx.quick {
        &["--verify-only", "--backend", "vulkan", "--calls", "2", "--reps", "1"]
    } else {
        &["--verify-only", "--backend", "vulkan", "--calls", "50", "--reps", "5"]
    };
    suite(crate::bench_spec::run, "spec", args, &cx.out)
}

fn decode(cx: &Ctx, model: &str) -> Result<()> {
    require_vulkan()?;
    let args: &[&str] = if cx.quick {
        &[
            "--backend",
            "vulkan",
            "--model",
            "random:tiny",
            "--batch",
            "1",
            "--threads",
            "2",
            "--prompt",
            "4",
            "--steps",
            "2",
            "--reps",
            "1",
        ]
    } else {
        &[
            "--backend",
            "vulkan",
            "--model",
            model,
            "--batch",
            "1,4,16",
            "--threads",
            "8",
            "--prompt",
            "32",
            "--steps",
            "12",
            "--reps",
            "3",
        ]
    };
    suite(crate::bench_runner::run, "runner", args, &cx.out)
}

fn decode_demo(cx: &Ctx) -> Result<()> {
    decode(cx, "random:demo")
}

fn decode_smollm2(cx: &Ctx) -> Result<()> {
    decode(cx, "random:smollm2-135m")
}

fn decode_gemma3(cx: &Ctx) -> Result<()> {
    decode(cx, "random:gemma3-270m")
}

fn cpu_chains(cx: &Ctx) -> Result<()> {
    let args: &[&str] = if cx.quick {
        &["--vocab", "32000", "--seconds", "0.01", "--reps", "1", "--batch", "0"]
    } else {
        &["--vocab", "151936,262144", "--seconds", "0.05", "--reps", "3", "--batch", "64"]
    };
    suite(crate::bench_sampling::run, "sampling", args, &cx.out)
}

#[cfg(test)]
mod tests {
    use super::SECTIONS;

    #[test]
    fn the_full_runs_limits_leave_a_rerun_inside_ten_minutes() {
        let full: u64 = SECTIONS.iter().map(|s| s.limit_s.0).sum();
        assert!(full < 300, "the full run's limits add up to {full} s");
        let names: std::collections::BTreeSet<&str> = SECTIONS.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), SECTIONS.len(), "section names are unique");
    }
}
