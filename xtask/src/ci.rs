//! `cargo xtask ci`: the whole test suite, as CI and developers run it.
//!
//! It first makes sure the system packages the tests need are present (on Debian, as root, it
//! installs the missing ones with `apt-get`; elsewhere it says what is missing and goes on), then runs
//! `cargo test` over the whole workspace with the environment the Vulkan tests expect: the Khronos
//! validation layer on, and, under `CI=true`, Vulkan required (a missing device fails instead of
//! skipping). Every skip goes through `sched::testing::skip`, which prints one line,
//! `SKIPPED <test>: <reason>` (and fails under CI); the run shows the passing tests' output too,
//! counts those lines, and ends with how many tests passed, failed and skipped; any skip under CI
//! fails the run. Then the doc tests, a smoke run of the release `gpu-report`, and the sanitizers'
//! short subset (`cargo xtask sanitize --quick`: AddressSanitizer and ThreadSanitizer with std
//! rebuilt, on a pinned nightly toolchain that a fresh machine lacks, so it is installed first with
//! rustup; see `sanitize.rs`). A sanitizer report fails the run; a toolchain that cannot be had
//! fails it under CI and is a loud skip elsewhere, counted with the others at the end.
//!
//! It also watches the disk: the test build takes a few gigabytes, and a linker that runs out of disk
//! dies with SIGBUS ("ld terminated with signal 7 [Bus error]"), which names nothing. So the free space
//! of the target directory's file system is printed before the build, a warning is given when it is
//! below what the build needs, and a failed run on a nearly full disk says so.

use anyhow::{Context, Result, bail};
use clap::Parser;
use std::process::Command;

/// Debian packages the suite needs: cmake and libclang for `ggml-sys-bleedingedge`; the Vulkan loader,
/// the lavapipe software driver and the validation layers for the Vulkan tests; glslc and spirv-tools
/// for the shader drift test; graphviz to check that DOT dumps render; curl for the server's raw
/// streaming test.
const PACKAGES: &[&str] = &[
    "graphviz",
    "curl",
    "cmake",
    "libclang-dev",
    "clang",
    "libvulkan1",
    "mesa-vulkan-drivers",
    "vulkan-validationlayers",
    "glslc",
    "spirv-tools",
];

#[derive(Parser, Debug)]
#[command(about = "Install what the tests need, then run the whole test suite")]
struct Args {
    /// Do not try to install system packages.
    #[arg(long)]
    no_install: bool,
    /// Extra arguments passed to `cargo test` (after `--`).
    #[arg(last = true)]
    cargo_args: Vec<String>,
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    if !args.no_install {
        install_packages()?;
        python_client()?;
        llama_grammars()?;
    }
    // The runner's SmolLM2 and Gemma 3 tests need the model files: fetch them now (network), not
    // inside a test.
    for name in ["smollm2", "gemma3"] {
        let model = crate::fetch_model::fetch_named(name)
            .with_context(|| format!("fetching the {name} test model (cargo xtask fetch-model {name})"))?;
        eprintln!("xtask ci: test model at {}", model.display());
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let target = target_dir();
    report_free_disk(&target);
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["test", "--workspace", "--all-targets", "--no-fail-fast"]);
    // The server's `openai` client test finds its interpreter here (see `python_client`).
    cmd.env("RUNNER_TEST_PYTHON", target.join("pyenv/bin/python"));
    // llama.cpp's grammars (see `llama_grammars`), where fetched.
    let grammars = target.join(LLAMA_GRAMMARS);
    if grammars.join("json.gbnf").exists() {
        cmd.env("LLAMA_GRAMMARS_DIR", &grammars);
    }
    cmd.args(&args.cargo_args);
    // The passing tests' own output too, so that their `SKIPPED <test>: <reason>` lines
    // (`sched::testing::skip`) can be counted.
    if !args.cargo_args.iter().any(|a| a == "--") {
        cmd.arg("--");
    }
    cmd.arg("--show-output");
    cmd.stdout(std::process::Stdio::piped());
    cmd.env("VK_LOADER_LAYERS_ENABLE", "*validation*");
    if in_ci {
        cmd.env("SAMPLING_REQUIRE_VULKAN", "1");
        // A clean clone is built once: incremental caches would only take disk.
        cmd.env("CARGO_INCREMENTAL", "0");
    }
    eprintln!("xtask ci: running {cmd:?}");
    let mut child = cmd.spawn().context("running cargo test")?;
    let mut tally = Tally::default();
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)) {
            let line = line.context("reading cargo test's output")?;
            println!("{line}");
            tally.read(&line);
        }
    }
    let status = child.wait().context("running cargo test")?;
    eprintln!(
        "xtask ci: {} tests ran: {} passed, {} failed, {} skipped",
        tally.passed + tally.failed,
        tally.passed,
        tally.failed,
        tally.skipped.len()
    );
    for s in &tally.skipped {
        eprintln!("xtask ci:   {s}");
    }
    if in_ci && !tally.skipped.is_empty() {
        bail!("{} tests skipped under CI, where every test must run", tally.skipped.len());
    }
    if !status.success() {
        if let Some(free) = free_bytes(&target).filter(|&f| f < LOW_DISK) {
            bail!(
                "cargo test failed: {status}; the disk of {} has only {} MiB free, so a linker \
                 error (e.g. \"signal 7 [Bus error]\") above is most likely the disk filling up",
                target.display(),
                free >> 20
            );
        }
        bail!("cargo test failed: {status}");
    }
    let mut doc = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    doc.args(["test", "--workspace", "--doc"]);
    let status = doc.status().context("running cargo test --doc")?;
    if !status.success() {
        bail!("cargo test --doc failed: {status}");
    }
    let mut skipped = tally.skipped;
    skipped.extend(gpu_report_smoke(in_ci, &target)?);
    skipped.extend(sanitize_subset(in_ci, !args.no_install)?);
    if skipped.is_empty() {
        eprintln!("xtask ci: all tests passed");
    } else {
        eprintln!("xtask ci: all tests that ran passed; {} skipped:", skipped.len());
        for s in &skipped {
            eprintln!("xtask ci:   {s}");
        }
    }
    Ok(())
}

/// The sanitizers' short subset (`cargo xtask sanitize --quick`, [`crate::sanitize::quick_runs`])
/// on the pinned nightly ([`crate::sanitize::NIGHTLY`]), which a fresh machine lacks: it is
/// installed first with rustup (unless `--no-install`). A sanitizer report fails the run. Without
/// the toolchain, the run fails under CI and, elsewhere, skips loudly: the returned
/// `SKIPPED sanitize --quick: <reason>` line.
fn sanitize_subset(in_ci: bool, install: bool) -> Result<Option<String>> {
    let t = std::time::Instant::now();
    match crate::sanitize::ensure_nightly(install) {
        Ok(()) => {}
        Err(e) if in_ci => {
            return Err(e.context("the sanitizer subset needs the pinned nightly toolchain; under CI it may not skip"));
        }
        Err(e) => {
            let line = format!("SKIPPED sanitize --quick: {e:#}");
            eprintln!("{line}");
            return Ok(Some(line));
        }
    }
    crate::sanitize::run_all(&crate::sanitize::quick_runs())
        .context("the sanitizer subset (cargo xtask sanitize --quick)")?;
    eprintln!("xtask ci: sanitizer subset passed in {:.0} s (toolchain install included)", t.elapsed().as_secs_f64());
    Ok(None)
}

/// The most bytes the release `gpu-report` may take: with the Vulkan loader's packages it must fit
/// well inside the 64 MiB that travels to a GPU machine.
const GPU_REPORT_MAX_BYTES: u64 = 32 << 20;
/// The most seconds `gpu-report --quick` may take on lavapipe.
const GPU_REPORT_QUICK_MAX_S: f64 = 180.0;

/// Builds the release `gpu-report` (the GPU machine's one command), checks its size, and runs
/// `--quick` on this machine's Vulkan device (lavapipe in CI): a smoke test that the binary runs
/// every section and names its device, within [`GPU_REPORT_QUICK_MAX_S`]. Returns the skip line
/// when there is no Vulkan device outside CI.
fn gpu_report_smoke(in_ci: bool, target: &std::path::Path) -> Result<Option<String>> {
    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build.args(["build", "--release", "--package", "xtask", "--bin", "gpu-report"]);
    if !build.status().context("building gpu-report")?.success() {
        bail!("cargo build --release --bin gpu-report failed");
    }
    let bin = target.join("release/gpu-report");
    let bytes = std::fs::metadata(&bin).with_context(|| format!("{}", bin.display()))?.len();
    eprintln!("xtask ci: gpu-report is {:.1} MB (limit {} MB)", bytes as f64 / 1e6, GPU_REPORT_MAX_BYTES >> 20);
    if bytes > GPU_REPORT_MAX_BYTES {
        bail!("gpu-report is {bytes} bytes, over the {GPU_REPORT_MAX_BYTES} that leave room for the Vulkan loader");
    }
    let out = target.join("gpu-report-quick");
    let t = std::time::Instant::now();
    let status = Command::new(&bin).arg("--quick").arg("--out").arg(&out).status().context("running gpu-report")?;
    let secs = t.elapsed().as_secs_f64();
    let report = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
    let device = report.lines().find_map(|l| l.strip_prefix("- device: ")).unwrap_or("(no report)").to_string();
    eprintln!("xtask ci: gpu-report --quick: {status} in {secs:.1} s on {device}");
    if !in_ci && device.starts_with('(') {
        // No Vulkan device outside CI: say so loudly, as the tests' skips do.
        let line = "SKIPPED gpu-report --quick: no Vulkan device here (CI requires one)".to_string();
        eprintln!("{line}");
        return Ok(Some(line));
    }
    if !status.success() || device.starts_with('(') {
        bail!("gpu-report --quick failed ({status}) on {device}: see {}", out.join("report.md").display());
    }
    if secs > GPU_REPORT_QUICK_MAX_S {
        bail!("gpu-report --quick took {secs:.0} s, over its {GPU_REPORT_QUICK_MAX_S} s");
    }
    Ok(None)
}

/// What the test run printed: the counts of `test result:` lines and the skip lines.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
    pub(crate) skipped: Vec<String>,
}

impl Tally {
    /// Reads one line of `cargo test`'s output.
    pub(crate) fn read(&mut self, line: &str) {
        if line.starts_with("SKIPPED ") {
            self.skipped.push(line.to_string());
        } else if let Some(rest) = line.strip_prefix("test result: ") {
            let count = |what: &str| {
                rest.split(';').find_map(|part| part.trim().strip_suffix(what)?.trim().rsplit(' ').next()?.parse().ok())
            };
            self.passed += count(" passed").unwrap_or(0);
            self.failed += count(" failed").unwrap_or(0);
        }
    }
}

/// Disk the test build of a clean clone takes (measured: 2.3 GB with the workspace's profiles, 3.0 GB
/// with the release runner beside it; 6.3 GB before the profiles kept line tables only; the
/// sanitizer subset's two target directories add 1.3 GB, its toolchain 0.7 GB under rustup's
/// home), with a margin.
const BUILD_DISK: u64 = 6 << 30;
/// Below this much free disk after a failure, the failure is most likely the disk.
const LOW_DISK: u64 = 1 << 30;

/// The directory cargo builds into: `CARGO_TARGET_DIR`, else the workspace's `target`.
fn target_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(Into::into)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Free bytes on the file system holding `path` (or its nearest existing ancestor), from `df`.
fn free_bytes(path: &std::path::Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let out = Command::new("df").args(["-Pk"]).arg(existing).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let kib: u64 = text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(kib << 10)
}

fn report_free_disk(target: &std::path::Path) {
    match free_bytes(target) {
        Some(free) if free < BUILD_DISK => eprintln!(
            "xtask ci: WARNING: {} MiB free for {}; a clean test build needs about {} MiB",
            free >> 20,
            target.display(),
            BUILD_DISK >> 20
        ),
        Some(free) => eprintln!("xtask ci: {} MiB free for {}", free >> 20, target.display()),
        None => eprintln!("xtask ci: could not read the free disk space of {}", target.display()),
    }
}

/// The `openai` Python package the server's client test runs (a pinned version, in a virtual
/// environment under the target directory: nothing installed system-wide).
const OPENAI: &str = "openai==3.57.0";

/// Makes `target/pyenv` with [`OPENAI`] unless it is there.
fn python_client() -> Result<()> {
    let env = target_dir().join("pyenv");
    let py = env.join("bin/python");
    let has = |py: &std::path::Path| {
        Command::new(py).args(["-c", "import openai"]).output().is_ok_and(|o| o.status.success())
    };
    if has(&py) {
        return Ok(());
    }
    eprintln!("xtask ci: installing {OPENAI} into {}", env.display());
    let run = |cmd: &mut Command| -> Result<()> {
        let st = cmd.status().with_context(|| format!("running {cmd:?}"))?;
        if !st.success() {
            bail!("{cmd:?} failed: {st}");
        }
        Ok(())
    };
    run(Command::new("python3").args(["-m", "venv"]).arg(&env))?;
    run(Command::new(env.join("bin/pip")).args(["install", "--quiet", "--disable-pip-version-check", OPENAI]))?;
    if !has(&py) {
        bail!("{} cannot import openai after installing it", py.display());
    }
    Ok(())
}

/// `cargo xtask fetch-grammars`: llama.cpp's grammars into `target/llama-grammars` (the
/// virtual environment first, for its pip), and how to run their test.
pub fn fetch_grammars() -> Result<()> {
    python_client()?;
    llama_grammars()?;
    let dir = target_dir().join(LLAMA_GRAMMARS);
    eprintln!("LLAMA_GRAMMARS_DIR={} cargo test -p grammar --test llama_grammars", dir.display());
    Ok(())
}

/// Where llama.cpp's `grammars/*.gbnf` are put, under the target directory.
const LLAMA_GRAMMARS: &str = "llama-grammars";

/// The source archive that vendors llama.cpp, its grammars included: llama-cpp-python's, from
/// PyPI (the package index is what a fresh machine reaches), with its SHA-256.
const LLAMA_SDIST: (&str, &str, &str) = (
    "llama-cpp-python==0.3.36",
    "llama_cpp_python-0.3.36.tar.gz",
    "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
);

/// Puts llama.cpp's `grammars/*.gbnf` in `target/llama-grammars` unless they are there: the
/// source archive downloaded with the virtual environment's pip ([`python_client`] made it),
/// checked against its SHA-256, and only the grammars extracted; the archive is then removed.
/// The grammar crate's `llama_grammars` test reads them (`LLAMA_GRAMMARS_DIR`).
fn llama_grammars() -> Result<()> {
    let target = target_dir();
    let dir = target.join(LLAMA_GRAMMARS);
    if dir.join("json.gbnf").exists() {
        return Ok(());
    }
    let (package, file, sha) = LLAMA_SDIST;
    eprintln!("xtask ci: fetching llama.cpp's grammars ({package}'s source archive) into {}", dir.display());
    let work = target.join("llama-sdist");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let run = |cmd: &mut Command| -> Result<()> {
        let st = cmd.status().with_context(|| format!("running {cmd:?}"))?;
        if !st.success() {
            bail!("{cmd:?} failed: {st}");
        }
        Ok(())
    };
    let pip = target.join("pyenv/bin/pip");
    run(Command::new(&pip)
        .args(["download", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-binary", ":all:", package])
        .arg("-d")
        .arg(&work))?;
    let archive = work.join(file);
    let got = runner::fetch::sha256(&archive).with_context(|| format!("reading {}", archive.display()))?;
    if got != sha {
        bail!("{} has SHA-256 {got}, expected {sha}", archive.display());
    }
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&work)
        .args(["--wildcards", "*/vendor/llama.cpp/grammars/*.gbnf"]))?;
    let from = work.join(file.trim_end_matches(".tar.gz")).join("vendor/llama.cpp/grammars");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&from, &dir).with_context(|| format!("moving {} to {}", from.display(), dir.display()))?;
    std::fs::remove_dir_all(&work)?;
    Ok(())
}

fn is_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

fn install_packages() -> Result<()> {
    if Command::new("dpkg-query").arg("--version").output().is_err() {
        eprintln!("xtask ci: not a Debian system; make sure these are installed: {PACKAGES:?}");
        return Ok(());
    }
    let missing: Vec<&str> = PACKAGES.iter().copied().filter(|p| !is_installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let prefix: &[&str] = if is_root { &[] } else { &["sudo", "-n"] };
    eprintln!("xtask ci: installing {missing:?}");
    let apt = |args: &[&str]| -> Result<()> {
        let mut all: Vec<&str> = prefix.to_vec();
        all.push("apt-get");
        all.extend_from_slice(args);
        let status = Command::new(all[0])
            .args(&all[1..])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .with_context(|| format!("running {all:?}"))?;
        if !status.success() {
            bail!("{all:?} failed: {status}");
        }
        Ok(())
    };
    apt(&["update", "-q"])?;
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend(missing.iter().copied());
    apt(&install)
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn the_tally_counts_results_and_skips() {
        let mut t = Tally::default();
        for line in [
            "test result: ok. 9 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.49s",
            "SKIPPED some_test: no Vulkan device (x)",
            "test result: FAILED. 3 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out; finished in 1s",
            "test skipped_name ... ok",
            "  SKIPPED not at the start",
        ] {
            t.read(line);
        }
        assert_eq!((t.passed, t.failed), (12, 2));
        assert_eq!(t.skipped, ["SKIPPED some_test: no Vulkan device (x)"]);
    }
}
