//! `cargo xtask sanitize [--address] [--thread] [--quick] [--no-install]`: the crates with `unsafe`
//! code (the tensor views and SIMD kernels of `kernels` and `cpu`) and `sched`, whose executor hands
//! their buffers around (it has no `unsafe` of its own), tested under the sanitizers of a pinned nightly toolchain ([`NIGHTLY`]), with the
//! standard library rebuilt under the same sanitizer (`-Zbuild-std`, from the toolchain's `rust-src`
//! component), so that std's own code is checked and its synchronisation is seen:
//!
//! - AddressSanitizer (`-Zsanitizer=address`): the unit and integration tests of `kernels`, `cpu`
//!   and `sched`, and the op-conformance suite on the CPU backend (`conformance`'s `cpu` test).
//!   Out-of-bounds reads and writes, use after free, leaks.
//! - ThreadSanitizer (`-Zsanitizer=thread`): the tests of `cpu`, whose ops split rows and blocks over
//!   the backend's thread team and write disjoint parts of one buffer from several threads, of
//!   `sched`, and the op-conformance suite on the CPU backend (every op on a pool of two threads or
//!   more). No suppressions: with std instrumented, its channels, mutexes and `Arc` are modelled.
//!   The runner is not run here: its server's test build takes about 5 minutes more, and tokio's
//!   I/O driver then stops the first test with a report whose ordering goes through the kernel's
//!   epoll (a socket's readiness slot written at registration, read by the driver thread after
//!   `epoll_wait`), which ThreadSanitizer cannot see; only a suppression would let it go on.
//!
//! The toolchain is pinned by date, so that a run here and a run on CI's fresh machine use the same
//! compiler and sanitizer runtimes; when it (or its `rust-src`) is missing, it is installed with
//! `rustup toolchain install` (a download: 8 to 21 s on the project's machines), unless `--no-install` is given.
//!
//! Each sanitizer builds into its own target directory (`<target>/sanitize/<name>`, under
//! `CARGO_TARGET_DIR` when set) with `--target` given, so that build scripts and proc macros stay
//! uninstrumented. `--quick` is the short subset that `cargo xtask ci` runs ([`quick_runs`]): under
//! both sanitizers, the unit tests of `kernels` and the CPU backend checked against a second CPU
//! backend over the conformance cases, both on two-thread pools. The default is both sanitizers, in
//! full. Each selection's tests and time are printed at the end; any sanitizer report fails its test
//! binary and so the run.

use anyhow::{Context, Result, bail};
use clap::Parser;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The nightly toolchain of the sanitizers and the fuzzer: a dated one, so that every machine runs
/// the same compiler, std sources and sanitizer runtimes. 2026-05-20 is the nightly these machines
/// shipped as `nightly` (rustc 1.97.0-nightly e50aa6fba 2026-05-19).
pub const NIGHTLY: &str = "nightly-2026-05-20";

#[derive(Parser, Debug)]
#[command(
    about = "Run the crates with unsafe code under AddressSanitizer and ThreadSanitizer (pinned nightly, std rebuilt)"
)]
struct Args {
    /// AddressSanitizer only (with --thread: both).
    #[arg(long)]
    address: bool,
    /// ThreadSanitizer only (with --address: both).
    #[arg(long)]
    thread: bool,
    /// The short subset that `cargo xtask ci` runs (both sanitizers, a few tests each).
    #[arg(long)]
    quick: bool,
    /// Fail instead of installing the pinned nightly toolchain when it is missing.
    #[arg(long)]
    no_install: bool,
}

/// One sanitizer run: its name, `-Zsanitizer=` value and the `cargo test` selections.
#[derive(Debug)]
pub struct Run {
    name: &'static str,
    sanitizer: &'static str,
    selections: Vec<Vec<&'static str>>,
}

/// The short subset (`--quick`, and `cargo xtask ci`), the same tests under both sanitizers: the
/// unit tests of `kernels` (the SIMD row kernels), and the CPU backend checked against a second CPU
/// backend over the op-conformance cases, both on two-thread pools, so that every op's kernels and
/// tensor views run and every op's row split runs on two threads (`conformance`'s
/// `cpu_backend_as_the_oracle`). Both sanitizers then build one small set of crates (`cpu`'s own
/// test targets would also build ggml for their differential tests, `sched`'s its snapshot and
/// property-test crates, and `sched` has no `unsafe`); the rebuilt std dominates the time.
pub fn quick_runs() -> Vec<Run> {
    let selections = || {
        vec![
            vec!["-p", "kernels", "--lib"],
            vec!["-p", "conformance", "--test", "cpu", "--", "--exact", "cpu_backend_as_the_oracle"],
        ]
    };
    vec![
        Run { name: "address", sanitizer: "address", selections: selections() },
        Run { name: "thread", sanitizer: "thread", selections: selections() },
    ]
}

/// The full runs of one or both sanitizers.
fn full_runs(address: bool, thread: bool) -> Vec<Run> {
    let mut runs = Vec::new();
    if address {
        runs.push(Run {
            name: "address",
            sanitizer: "address",
            selections: vec![
                vec!["-p", "kernels", "-p", "cpu", "-p", "sched", "--lib", "--tests"],
                vec!["-p", "conformance", "--test", "cpu"],
            ],
        });
    }
    if thread {
        runs.push(Run {
            name: "thread",
            sanitizer: "thread",
            selections: vec![
                vec!["-p", "cpu", "-p", "sched", "--lib", "--tests"],
                vec!["-p", "conformance", "--test", "cpu"],
            ],
        });
    }
    runs
}

/// `cargo +NIGHTLY`, through rustup's proxy: without this process's `CARGO` and `RUSTUP_TOOLCHAIN`,
/// which would pin the workspace's own toolchain.
pub(crate) fn nightly_cargo() -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg(format!("+{NIGHTLY}")).env_remove("CARGO").env_remove("RUSTUP_TOOLCHAIN");
    cmd
}

/// The sysroot of [`NIGHTLY`], or `None` when it is not installed (never installing it: rustup's
/// auto-install is turned off for the question).
fn nightly_sysroot() -> Option<PathBuf> {
    let out = Command::new("rustup")
        .args(["run", NIGHTLY, "rustc", "--print", "sysroot"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env("RUSTUP_AUTO_INSTALL", "0")
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// What is missing of [`NIGHTLY`] with `rust-src`, or `None` when both are there.
fn nightly_missing() -> Option<String> {
    match nightly_sysroot() {
        None => Some(format!("the {NIGHTLY} toolchain is not installed")),
        Some(root) if !root.join("lib/rustlib/src/rust/library/Cargo.lock").is_file() => {
            Some(format!("{NIGHTLY} has no rust-src component (std's sources, for -Zbuild-std)"))
        }
        Some(_) => None,
    }
}

/// Makes sure [`NIGHTLY`] and its `rust-src` are installed: when one is missing and `install` is
/// set, runs `rustup toolchain install NIGHTLY --profile minimal --component rust-src` (a download
/// of a few hundred megabytes) and says how long it took; otherwise an error naming what is missing
/// and the command that installs it.
pub fn ensure_nightly(install: bool) -> Result<()> {
    let Some(missing) = nightly_missing() else {
        return Ok(());
    };
    let args = ["toolchain", "install", NIGHTLY, "--profile", "minimal", "--component", "rust-src"];
    if !install {
        bail!("{missing}: install it with `rustup {}`", args.join(" "));
    }
    eprintln!("xtask sanitize: {missing}; running rustup {}", args.join(" "));
    let t = Instant::now();
    let status = Command::new("rustup")
        .args(args)
        .env_remove("RUSTUP_TOOLCHAIN")
        .status()
        .context("running rustup (is rustup installed?)")?;
    if !status.success() {
        bail!("rustup {} failed: {status} ({missing})", args.join(" "));
    }
    eprintln!("xtask sanitize: installed {NIGHTLY} with rust-src in {:.0} s", t.elapsed().as_secs_f64());
    if let Some(still) = nightly_missing() {
        bail!("after rustup {}: {still}", args.join(" "));
    }
    Ok(())
}

/// The host target (sanitizers and `-Zbuild-std` need an explicit `--target`).
const TARGET: &str = "x86_64-unknown-linux-gnu";

/// The directory cargo builds into: `CARGO_TARGET_DIR`, else the workspace's `target`.
fn target_dir(workspace: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), PathBuf::from)
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let runs = if args.quick {
        quick_runs()
    } else {
        let both = !args.address && !args.thread;
        full_runs(args.address || both, args.thread || both)
    };
    ensure_nightly(!args.no_install)?;
    run_all(&runs)
}

/// Runs `runs` (the pinned nightly must be installed: [`ensure_nightly`]), prints each selection's
/// tests and time, and fails when any selection failed.
pub fn run_all(runs: &[Run]) -> Result<()> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = target_dir(&workspace);
    let mut results = Vec::new();
    for r in runs {
        let rustflags = format!("-Zsanitizer={}", r.sanitizer);
        for sel in &r.selections {
            let mut cmd = nightly_cargo();
            cmd.current_dir(&workspace)
                .args(["test", "--no-fail-fast", "-Zbuild-std", "--target", TARGET])
                .args(sel)
                .env("RUSTFLAGS", &rustflags)
                .env("RUSTDOCFLAGS", &rustflags)
                .env("CARGO_TARGET_DIR", target.join("sanitize").join(r.name))
                // Any report stops the test binary with a failure.
                .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
                .env("TSAN_OPTIONS", "halt_on_error=1:second_deadlock_stack=1")
                .stdout(Stdio::piped());
            let shown = format!(
                "{} sanitizer: cargo +{NIGHTLY} test --no-fail-fast -Zbuild-std --target {TARGET} {}",
                r.name,
                sel.join(" ")
            );
            eprintln!("xtask sanitize: {shown}");
            let t = Instant::now();
            let mut child = cmd.spawn().with_context(|| format!("running {shown}"))?;
            let mut tally = crate::ci::Tally::default();
            if let Some(out) = child.stdout.take() {
                for line in BufReader::new(out).lines() {
                    let line = line.context("reading cargo test's output")?;
                    println!("{line}");
                    tally.read(&line);
                }
            }
            let status = child.wait().with_context(|| format!("running {shown}"))?;
            results.push((shown, status, tally, t.elapsed().as_secs_f64()));
        }
    }
    eprintln!("\nxtask sanitize: {NIGHTLY}, std rebuilt with each sanitizer");
    for (shown, status, tally, secs) in &results {
        let verdict = if status.success() { "ok".to_string() } else { format!("FAILED ({status})") };
        eprintln!(
            "  {verdict}: {} passed, {} failed, {secs:.0} s (build included): {shown}",
            tally.passed, tally.failed
        );
    }
    let failed: Vec<&str> = results.iter().filter(|r| !r.1.success()).map(|r| r.0.as_str()).collect();
    if !failed.is_empty() {
        bail!("sanitizer runs failed (the sanitizer's report is above its test's output):\n  {}", failed.join("\n  "));
    }
    eprintln!("xtask sanitize: clean");
    Ok(())
}
