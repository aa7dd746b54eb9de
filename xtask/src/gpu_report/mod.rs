//! `gpu-report [--out DIR] [--quick] [--only NAME,...]`: the one command to run on a GPU machine.
//!
//! It measures, in one short run, what the project needs to know about a real GPU, and writes
//! `DIR/report.md` (tables to paste into docs/BENCHMARKS.md) and `DIR/report.json` (everything,
//! every section's full JSON included). Each section runs in a child process of this binary
//! (`--section NAME`) under a time limit, so that a section that fails, hangs or loses the device
//! costs only itself: the report says which, and the others still run. Sections
//! ([`sections::SECTIONS`]): the device and its limits; host round trips to it, with where their
//! host time goes (`latency.rs`); the op-conformance suite on it against the
//! CPU backend; backend sampling at V = 151,936 and 262,144 against the CPU path; the fused ops;
//! read-back of some rows against the whole; speculative verification against one draw; decoding
//! with random models shaped as the demo model, SmolLM2-135M and Gemma 3 270M; the CPU chains;
//! per-op GPU times from timestamps (`profile.rs`).
//!
//! `--quick` runs every section once at its smallest size (the CI smoke test on lavapipe: it
//! proves the binary runs and names its device, it measures nothing). The exit status is non-zero
//! when a section failed or ran out of time.

mod latency;
mod markdown;
pub mod profile;
pub mod sections;

use anyhow::{Context, Result, bail};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "gpu-report", about = "Measure backend sampling, the fused ops and decoding on this machine's GPU")]
struct Args {
    /// Directory of the report (created): report.md, report.json and sections/NAME.json.
    #[arg(long, default_value = "gpu-report")]
    out: PathBuf,
    /// Every section once at its smallest size (a smoke test, not a measurement).
    #[arg(long)]
    quick: bool,
    /// Only these sections (names as in the report; default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run one section in this process (what the parent runs in each child).
    #[arg(long, hide = true)]
    section: Option<String>,
}

/// How a section ended.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    Ok,
    Failed(String),
    TimedOut(u64),
}

/// Runs the report (or, with `--section`, one section); returns the exit code.
pub fn main(args: impl Iterator<Item = String>) -> Result<ExitCode> {
    let args = Args::try_parse_from(args)?;
    let dir = args.out.join("sections");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Some(name) = &args.section {
        let s = sections::find(name)?;
        (s.run)(&sections::Ctx { out: dir.join(format!("{name}.json")), quick: args.quick })?;
        return Ok(ExitCode::SUCCESS);
    }
    for o in &args.only {
        sections::find(o)?;
    }
    let exe = std::env::current_exe().context("finding this binary to run its sections")?;
    let started = Instant::now();
    let mut results = Vec::new();
    for s in sections::SECTIONS {
        if !args.only.is_empty() && !args.only.iter().any(|o| o == s.name) {
            continue;
        }
        if args.quick && s.full_only {
            continue;
        }
        let limit = if args.quick { s.limit_s.1 } else { s.limit_s.0 };
        println!("\n=== gpu-report: {} ({}; limit {limit} s) ===", s.name, s.title);
        let json_path = dir.join(format!("{}.json", s.name));
        let _ = std::fs::remove_file(&json_path);
        let t = Instant::now();
        let mut cmd = Command::new(&exe);
        cmd.args(["--section", s.name, "--out"]).arg(&args.out);
        if args.quick {
            cmd.arg("--quick");
        }
        let status = run_child(cmd, Duration::from_secs(limit));
        let secs = t.elapsed().as_secs_f64();
        let data = std::fs::read_to_string(&json_path)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .unwrap_or(serde_json::Value::Null);
        println!("=== {}: {status:?} in {secs:.1} s ===", s.name);
        results.push((s, status, secs, data));
    }
    let total = started.elapsed().as_secs_f64();
    let md = markdown::report(&results, total, args.quick);
    let doc = serde_json::json!({
        "quick": args.quick,
        "seconds": total,
        "sections": results.iter().map(|(s, status, secs, data)| serde_json::json!({
            "name": s.name, "title": s.title, "status": format!("{status:?}"), "seconds": secs, "data": data,
        })).collect::<Vec<_>>(),
    });
    write(&args.out.join("report.md"), &md)?;
    write(&args.out.join("report.json"), &serde_json::to_string_pretty(&doc)?)?;
    println!("\n{md}");
    println!("gpu-report: wrote {} and report.json in {total:.1} s", args.out.join("report.md").display());
    let failed: Vec<&str> = results.iter().filter(|r| r.1 != Status::Ok).map(|r| r.0.name).collect();
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        println!("gpu-report: sections not completed: {}", failed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Runs `cmd` (output inherited) and kills it after `limit`.
fn run_child(mut cmd: Command, limit: Duration) -> Status {
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Status::Failed(format!("could not start: {e}")),
    };
    let t = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Status::Ok,
            Ok(Some(s)) => return Status::Failed(s.to_string()),
            Ok(None) if t.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Status::TimedOut(limit.as_secs());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Status::Failed(format!("waiting: {e}")),
        }
    }
}

/// Runs a benchmark suite's `run` with `args` (the program name first), writing its JSON to
/// `out`: the sections are the `cargo xtask bench` suites with the GPU's sizes.
pub(crate) fn suite(
    run: fn(std::vec::IntoIter<String>) -> Result<()>,
    name: &str,
    args: &[&str],
    out: &Path,
) -> Result<()> {
    let mut v: Vec<String> =
        std::iter::once(format!("gpu-report {name}")).chain(args.iter().map(|a| a.to_string())).collect();
    v.push("--out".into());
    v.push(out.to_str().context("a UTF-8 report path")?.into());
    run(v.into_iter())
}

/// Fails unless a Vulkan device opens (the sections that measure it need one).
pub(crate) fn require_vulkan() -> Result<vulkan::VulkanBackend> {
    match vulkan::VulkanBackend::new() {
        Ok(vk) => Ok(vk),
        Err(e) => bail!("no Vulkan device: {e}"),
    }
}
