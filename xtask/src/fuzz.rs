//! `cargo xtask fuzz [--seconds N] [--target NAME]`: runs every libFuzzer target of `fuzz/` (the
//! GGUF reader, the SPEC chain parser, the graph fixture parser, the `.npy` reader, the tokenizer,
//! the GBNF grammar parser with its matcher, the JSON schema converter)
//! for `N` seconds each, with the sanitizers' pinned nightly toolchain (`sanitize::NIGHTLY`, installed
//! with rustup when missing) and `cargo-fuzz` (installed with `cargo install cargo-fuzz` when
//! missing). Inputs: the committed seeds (`fuzz/seeds/<target>/`) and the working corpus
//! (`fuzz/corpus/<target>/`, not committed, which grows with what the fuzzer finds worth keeping).
//! A crash stops that target and leaves its input in `fuzz/artifacts/<target>/`: fix it, copy the
//! input into the seeds (the stable replay, `xtask/tests/fuzz_corpus.rs`, then runs it in CI) and
//! run again. Ends with each target's result and libFuzzer's last stats line
//! (executions, coverage, corpus size).

use anyhow::{Context, Result, bail};
use clap::Parser;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[derive(Parser, Debug)]
#[command(about = "Run the libFuzzer targets of fuzz/ (nightly, cargo-fuzz)")]
struct Args {
    /// Seconds per target.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Only this target (gguf, spec, fixture, npy, tokenizer, gbnf, json_schema).
    #[arg(long)]
    target: Option<String>,
}

/// The targets, as `fuzz/Cargo.toml` names them.
pub const TARGETS: &[&str] = &["gguf", "spec", "fixture", "npy", "tokenizer", "gbnf", "json_schema"];

fn cargo_fuzz_installed() -> bool {
    crate::sanitize::nightly_cargo()
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let targets: Vec<&str> = match &args.target {
        Some(t) if TARGETS.contains(&t.as_str()) => vec![t.as_str()],
        Some(t) => bail!("no fuzz target `{t}`: one of {}", TARGETS.join(", ")),
        None => TARGETS.to_vec(),
    };
    crate::sanitize::ensure_nightly(true)?;
    if !cargo_fuzz_installed() {
        eprintln!("xtask fuzz: installing cargo-fuzz (cargo install cargo-fuzz --locked)");
        let ok = Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]).status()?.success();
        if !ok {
            bail!("cargo install cargo-fuzz failed");
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut results = Vec::new();
    for t in targets {
        let corpus = dir.join("corpus").join(t);
        std::fs::create_dir_all(&corpus)?;
        let seeds = dir.join("seeds").join(t);
        eprintln!("xtask fuzz: {t} for {} s", args.seconds);
        let mut child = crate::sanitize::nightly_cargo()
            .current_dir(&dir)
            .args(["fuzz", "run", t])
            .arg(&corpus)
            .arg(&seeds)
            .args(["--", &format!("-max_total_time={}", args.seconds), "-rss_limit_mb=4096", "-timeout=10"])
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("running cargo +{} fuzz", crate::sanitize::NIGHTLY))?;
        // libFuzzer reports on stderr: echo it and keep its last stats line.
        let mut last = String::new();
        for line in BufReader::new(child.stderr.take().expect("piped")).lines() {
            let line = line?;
            eprintln!("{line}");
            if line.starts_with('#') && line.contains("cov:") {
                last = line;
            }
        }
        let status = child.wait()?;
        results.push((t, status.success(), last));
    }
    eprintln!("\nxtask fuzz: {} s per target", args.seconds);
    for (t, ok, last) in &results {
        eprintln!("  {t:<11} {}  {last}", if *ok { "no crash" } else { "FAILED (see fuzz/artifacts)" });
    }
    if results.iter().any(|r| !r.1) {
        bail!("a fuzz target failed");
    }
    Ok(())
}
