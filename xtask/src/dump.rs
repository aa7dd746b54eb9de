//! `cargo xtask dump`: prints a graph fixture (`fixtures/graphs/*.graph`) as text or Graphviz DOT, or,
//! with `--plan`, the scheduler's plan for it on the given backends (splits, causes, copies, buffers).
use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Dot,
}

#[derive(Parser, Debug)]
#[command(about = "Print a graph fixture as text or DOT, or its plan")]
struct Args {
    /// The fixture file.
    fixture: PathBuf,
    /// Output format of the graph dump.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Print the scheduler's plan instead of the graph.
    #[arg(long)]
    plan: bool,
    /// Backends for `--plan`, in preference order (comma separated: cpu, vulkan).
    #[arg(long, value_delimiter = ',', default_value = "cpu")]
    backends: Vec<String>,
    /// Pin a node to a backend for `--plan`: NODE=BACKEND, NODE a fixture name (repeatable).
    #[arg(long = "pin", value_name = "NODE=BACKEND")]
    pins: Vec<String>,
}

/// Builds the named backends, in order, with a clear error for unknown or unavailable ones.
pub fn make_backends(names: &[String]) -> Result<Vec<Box<dyn sched::Backend>>> {
    let mut out: Vec<Box<dyn sched::Backend>> = Vec::new();
    for name in names {
        match name.as_str() {
            "cpu" => out.push(Box::new(cpu::CpuBackend::new())),
            "vulkan" => out.push(Box::new(vulkan::VulkanBackend::new()?)),
            other => bail!("unknown backend `{other}` (expected cpu or vulkan)"),
        }
    }
    if out.is_empty() {
        bail!("no backends given");
    }
    Ok(out)
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let text = std::fs::read_to_string(&args.fixture).with_context(|| format!("reading {}", args.fixture.display()))?;
    let g = graph::fixture::parse(&text).with_context(|| format!("in {}", args.fixture.display()))?;
    if args.plan {
        let mut sched = sched::Scheduler::new(make_backends(&args.backends)?)?;
        for pin in &args.pins {
            let (node, backend) = pin.split_once('=').with_context(|| format!("--pin {pin}: expected NODE=BACKEND"))?;
            let id = g.find(node).with_context(|| format!("--pin {pin}: no node named `{node}` in the fixture"))?;
            sched.pin(id, backend)?;
        }
        let plan = sched.plan(&g)?;
        print!("{}", plan.to_text(&g));
        return Ok(());
    }
    match args.format {
        Format::Text => print!("{}", graph::dump::to_text(&g)),
        Format::Dot => print!("{}", graph::dump::to_dot(&g)),
    }
    Ok(())
}
