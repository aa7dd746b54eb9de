//! `cargo xtask bench <suite>`: dispatches to the benchmark suites, always in an optimised build.
//!
//! When this binary was built without optimisations it re-runs itself through
//! `cargo run --release`, so `cargo xtask bench ...` always measures release code.
use anyhow::{Context, Result, bail};
use std::process::Command;

const SUITES: &str = "suites: sampling, ops";

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args: Vec<String> = args.collect();
    if cfg!(debug_assertions) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["run", "--quiet", "--release", "--package", "xtask", "--", "bench"])
            .args(&args[1..])
            .status()
            .context("re-running the benchmarks in release mode")?;
        if !status.success() {
            bail!("benchmarks failed: {status}");
        }
        return Ok(());
    }
    let Some(suite) = args.get(1) else {
        bail!("usage: cargo xtask bench <suite> [args]\n{SUITES}");
    };
    let rest = std::iter::once(format!("xtask bench {suite}")).chain(args[2..].iter().cloned());
    match suite.as_str() {
        "sampling" => crate::bench_sampling::run(rest),
        "ops" => crate::bench_ops::run(rest),
        other => bail!("unknown benchmark suite `{other}`\n{SUITES}"),
    }
}
