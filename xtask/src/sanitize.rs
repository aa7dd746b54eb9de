//! `cargo xtask sanitize [--address] [--thread] [--quick]`: the crates with `unsafe` code (the
//! tensor views and SIMD kernels of `kernels` and `cpu`, the scheduler's buffer handling in
//! `sched`) tested under the nightly toolchain's sanitizers, which these machines ship (Miri's
//! components do not download here):
//!
//! - AddressSanitizer (`-Zsanitizer=address`): the unit and integration tests of `kernels`, `cpu`
//!   and `sched`, and the op-conformance suite on the CPU backend (`conformance`'s `cpu` test).
//!   Out-of-bounds reads and writes, use after free, leaks.
//! - ThreadSanitizer (`-Zsanitizer=thread`): the `cpu` tests, whose ops split rows and blocks over
//!   the backend's rayon pool and write disjoint parts of one buffer from several threads. The
//!   standard library is not rebuilt (no `rust-src` here; `-Cunsafe-allow-abi-mismatch=sanitizer`
//!   lets the instrumented crates link against it), so the synchronisation inside `std` is invisible
//!   to the sanitizer: races reported inside std's channel (the test harness's result channel) are
//!   suppressed (`xtask/tsan-suppressions.txt`), nothing else.
//!
//! Each runs in its own target directory (`target/sanitize/<name>`) with `--target` given, so that
//! build scripts and proc macros stay uninstrumented. `--quick` runs only `kernels`' and `sched`'s
//! unit tests under AddressSanitizer (minutes, not a full run). The default is both sanitizers.

use anyhow::{Context, Result, bail};
use clap::Parser;
use std::process::Command;

#[derive(Parser, Debug)]
#[command(about = "Run the crates with unsafe code under AddressSanitizer and ThreadSanitizer (nightly)")]
struct Args {
    /// AddressSanitizer only (with --thread: both).
    #[arg(long)]
    address: bool,
    /// ThreadSanitizer only (with --address: both).
    #[arg(long)]
    thread: bool,
    /// A short AddressSanitizer run: the unit tests of `kernels` and `sched`.
    #[arg(long)]
    quick: bool,
}

/// One sanitizer run: its name, `-Zsanitizer=` value and the `cargo test` selections.
struct Run {
    name: &'static str,
    sanitizer: &'static str,
    selections: Vec<Vec<&'static str>>,
}

/// The compiler flags of a sanitizer run. ThreadSanitizer changes the ABI and nightly refuses to
/// link crates built with it against the uninstrumented standard library unless told to; with no
/// `rust-src` here to rebuild `std` (`-Zbuild-std`), the run says so (`-Cunsafe-allow-abi-mismatch`).
fn flags(sanitizer: &str) -> String {
    match sanitizer {
        "thread" => "-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer".into(),
        s => format!("-Zsanitizer={s}"),
    }
}

/// `cargo +nightly`, through rustup's proxy: without this process's `CARGO` and `RUSTUP_TOOLCHAIN`,
/// which would pin the workspace's own toolchain.
pub(crate) fn nightly_cargo() -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg("+nightly").env_remove("CARGO").env_remove("RUSTUP_TOOLCHAIN");
    cmd
}

/// The host target (sanitizers need an explicit `--target`).
const TARGET: &str = "x86_64-unknown-linux-gnu";

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let both = !args.address && !args.thread;
    let mut runs = Vec::new();
    if args.quick {
        runs.push(Run {
            name: "address",
            sanitizer: "address",
            selections: vec![vec!["-p", "kernels", "-p", "sched", "--lib"]],
        });
    } else {
        if args.address || both {
            runs.push(Run {
                name: "address",
                sanitizer: "address",
                selections: vec![
                    vec!["-p", "kernels", "-p", "cpu", "-p", "sched", "--lib", "--tests"],
                    vec!["-p", "conformance", "--test", "cpu"],
                ],
            });
        }
        if args.thread || both {
            runs.push(Run {
                name: "thread",
                sanitizer: "thread",
                selections: vec![vec!["-p", "cpu", "--lib", "--tests"]],
            });
        }
    }
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut failed = Vec::new();
    for r in &runs {
        for sel in &r.selections {
            let mut cmd = nightly_cargo();
            cmd.current_dir(&workspace)
                .args(["test", "--target", TARGET])
                .args(sel)
                .env("RUSTFLAGS", flags(r.sanitizer))
                .env("RUSTDOCFLAGS", flags(r.sanitizer))
                .env("CARGO_TARGET_DIR", workspace.join("target/sanitize").join(r.name))
                // The tests' own child processes and thread counts as in a plain run.
                .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
                .env(
                    "TSAN_OPTIONS",
                    format!(
                        "halt_on_error=1:second_deadlock_stack=1:suppressions={}",
                        workspace.join("xtask/tsan-suppressions.txt").display()
                    ),
                );
            eprintln!("xtask sanitize: {} sanitizer: cargo +nightly test --target {TARGET} {}", r.name, sel.join(" "));
            let status = cmd.status().context("running cargo +nightly (is a nightly toolchain installed?)")?;
            if !status.success() {
                failed.push(format!("{} sanitizer, {}: {status}", r.name, sel.join(" ")));
            }
        }
    }
    if !failed.is_empty() {
        bail!("sanitizer runs failed:\n  {}", failed.join("\n  "));
    }
    eprintln!("xtask sanitize: clean");
    Ok(())
}
