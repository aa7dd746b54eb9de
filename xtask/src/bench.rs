//! `cargo xtask bench <suite>`: dispatches to the benchmark suites, always in an optimised build.
//!
//! When this binary was built without optimisations, or the suite needs ggml as its peer (`ops` on
//! the CPU) and this binary was built without the `ggml` feature, it re-runs itself through
//! `cargo run --release [--features ggml]`, so `cargo xtask bench ...` always measures release code
//! and only the benchmark that compares against ggml pays for building it (cmake and libclang).
use anyhow::{Context, Result, bail};
use std::process::Command;

const SUITES: &str = "suites: sampling, ops, readback, fused, runner, spec, grammar, serve";

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args: Vec<String> = args.collect();
    let Some(suite) = args.get(1) else {
        bail!("usage: cargo xtask bench <suite> [args]\n{SUITES}");
    };
    let vulkan = args.windows(2).any(|w| w[0] == "--backend" && w[1] == "vulkan")
        || args.iter().any(|a| a == "--backend=vulkan");
    let needs_ggml = suite == "ops" && !vulkan;
    if cfg!(debug_assertions) || (needs_ggml && !cfg!(feature = "ggml")) {
        return rerun_release(&args[1..], needs_ggml);
    }
    let rest = std::iter::once(format!("xtask bench {suite}")).chain(args[2..].iter().cloned());
    match suite.as_str() {
        "sampling" if args.iter().any(|a| a == "--path" || a.starts_with("--path=")) => {
            crate::bench_sampling_graph::run(rest)
        }
        "sampling" => crate::bench_sampling::run(rest),
        "readback" => crate::bench_readback::run(rest),
        "fused" => crate::bench_fused::run(rest),
        "runner" => crate::bench_runner::run(rest),
        "spec" => crate::bench_spec::run(rest),
        "grammar" => crate::bench_grammar::run(rest),
        "serve" => crate::bench_serve::run(rest),
        "ops" if vulkan => crate::bench_vulkan::run(rest),
        #[cfg(feature = "ggml")]
        "ops" => crate::bench_ops::run(rest),
        other => bail!("unknown benchmark suite `{other}`\n{SUITES}"),
    }
}

/// Runs `cargo run --release -p xtask [--features ggml] -- bench ARGS`.
fn rerun_release(args: &[String], ggml: bool) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["run", "--quiet", "--release", "--package", "xtask"]);
    if ggml {
        cmd.args(["--features", "ggml"]);
    }
    let status = cmd.arg("--").arg("bench").args(args).status().context("re-running the benchmarks in release mode")?;
    if !status.success() {
        if ggml {
            bail!(
                "benchmarks failed: {status} (this suite builds ggml-sys-bleedingedge, which needs cmake and \
                 libclang: `cargo xtask ci` installs them, or `apt-get install cmake libclang-dev clang`)"
            );
        }
        bail!("benchmarks failed: {status}");
    }
    Ok(())
}

/// Writes a suite's JSON report to `out`, or to `target/bench/NAME.json` in the workspace, creating
/// the directory; prints where it went.
pub fn write_report(out: Option<&std::path::Path>, name: &str, doc: &serde_json::Value) -> Result<()> {
    let out = out.map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/bench/{name}.json")),
        std::path::Path::to_path_buf,
    );
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&out, serde_json::to_string_pretty(doc)?).with_context(|| format!("writing {}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(())
}

/// Writes a suite's JSON so far to `out` (when given) without a word: long suites call it after
/// each case, so that a run stopped at a time limit (`gpu-report`) keeps the cases it finished.
pub fn write_partial(out: Option<&std::path::Path>, doc: &serde_json::Value) -> Result<()> {
    if let Some(out) = out {
        std::fs::write(out, serde_json::to_string_pretty(doc)?)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// The median of `v` (the upper one of an even count; NaN sorts last): the statistic every suite
/// reports of its repeated measurements.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The Python interpreter of `--llama-python`, or `$LLAMA_CPP_PYTHON`: one with llama-cpp-python,
/// for the suites that measure llama.cpp beside ours in the same run.
pub fn llama_python(arg: Option<&std::path::Path>) -> Option<std::path::PathBuf> {
    arg.map(std::path::Path::to_path_buf).or_else(|| std::env::var_os("LLAMA_CPP_PYTHON").map(Into::into))
}

/// Runs the peer script `script` (its text; written to a temporary file) with `python` and
/// `args`, and parses the one JSON object it prints; an error with the tail of its stderr where
/// it fails.
pub fn run_python_peer(
    python: &std::path::Path,
    script: &str,
    args: &[std::ffi::OsString],
) -> Result<serde_json::Value> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("llama_cpp_peer-{}-{n}.py", std::process::id()));
    std::fs::write(&file, script)?;
    let out = std::process::Command::new(python).arg(&file).args(args).output();
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(|e| anyhow::anyhow!("running {}: {e}", python.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        anyhow::bail!("{} exited with {}: {}", python.display(), out.status, tail.join(" | "));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}
