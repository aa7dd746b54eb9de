//! `cargo xtask sample`: inspects a sampler chain on a logits file (the design brief's contract).
use anyhow::{Result, bail};

pub fn run(_args: impl Iterator<Item = String>) -> Result<()> {
    bail!("sample: not wired yet")
}
