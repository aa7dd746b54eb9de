//! `cargo xtask bench sampling`: the CPU sampler chains against a plain max-reduction pass.
use anyhow::{Result, bail};

pub fn run(_args: impl Iterator<Item = String>) -> Result<()> {
    bail!("bench sampling: not wired yet")
}
