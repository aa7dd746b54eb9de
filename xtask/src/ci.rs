//! `cargo xtask ci`: the whole test suite, as CI and developers run it.
//!
//! It first makes sure the system packages the tests need are present (on Debian, as root, it
//! installs the missing ones with `apt-get`; elsewhere it says what is missing and goes on), then runs
//! `cargo test` over the whole workspace with the environment the Vulkan tests expect: the Khronos
//! validation layer on, and, under `CI=true`, Vulkan required (a missing device fails instead of
//! skipping).

use anyhow::{Context, Result, bail};
use clap::Parser;
use std::process::Command;

/// Debian packages the suite needs: cmake and libclang for `ggml-sys-bleedingedge`; the Vulkan loader,
/// the lavapipe software driver and the validation layers for the Vulkan tests; glslc and spirv-tools
/// for the shader drift test; graphviz to check that DOT dumps render.
const PACKAGES: &[&str] = &[
    "graphviz",
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
    }
    // The runner's SmolLM2 tests need the model file: fetch it now (network), not inside a test.
    let model = crate::fetch_model::fetch().context("fetching the SmolLM2 test model (cargo xtask fetch-model)")?;
    eprintln!("xtask ci: test model at {}", model.display());
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["test", "--workspace", "--all-targets", "--no-fail-fast"]);
    cmd.args(&args.cargo_args);
    cmd.env("VK_LOADER_LAYERS_ENABLE", "*validation*");
    if in_ci {
        cmd.env("SAMPLING_REQUIRE_VULKAN", "1");
    }
    eprintln!("xtask ci: running {cmd:?}");
    let status = cmd.status().context("running cargo test")?;
    if !status.success() {
        bail!("cargo test failed: {status}");
    }
    let mut doc = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    doc.args(["test", "--workspace", "--doc"]);
    let status = doc.status().context("running cargo test --doc")?;
    if !status.success() {
        bail!("cargo test --doc failed: {status}");
    }
    eprintln!("xtask ci: all tests passed");
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
