//! `cargo xtask dump`: prints a graph fixture (`fixtures/graphs/*.graph`) as text or Graphviz DOT.
use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Dot,
}

#[derive(Parser, Debug)]
#[command(about = "Print a graph fixture as text or DOT")]
struct Args {
    /// The fixture file.
    fixture: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let text = std::fs::read_to_string(&args.fixture).with_context(|| format!("reading {}", args.fixture.display()))?;
    let g = graph::fixture::parse(&text).with_context(|| format!("in {}", args.fixture.display()))?;
    match args.format {
        Format::Text => print!("{}", graph::dump::to_text(&g)),
        Format::Dot => print!("{}", graph::dump::to_dot(&g)),
    }
    Ok(())
}
