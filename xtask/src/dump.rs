//! `cargo xtask dump`: prints a graph fixture as text or Graphviz DOT.
use anyhow::{Result, bail};

pub fn run(_args: impl Iterator<Item = String>) -> Result<()> {
    bail!("dump: not wired yet")
}
