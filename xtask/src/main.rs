//! `cargo xtask`: the project's developer tasks. Each subcommand lives in its own module and parses
//! its own arguments; this file only dispatches.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod bench_ops;
mod bench_sampling;
mod bench_vulkan;
mod ci;
mod dump;
mod sample;
mod shaders;

use anyhow::{Result, bail};

const USAGE: &str = "usage: cargo xtask <dump|sample|bench|shaders|ci> [args...]
  dump FIXTURE [--format text|dot]     print a graph fixture
  sample --logits F.npy --chain SPEC  run a sampler chain on logits (see docs/SAMPLING.md)
  bench <suite>                        benchmarks (release build)
  ci                                   install what the tests need, then run the whole suite";

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        bail!("{USAGE}");
    }
    let cmd = args.remove(0);
    // clap wants the program name first.
    let sub_args = std::iter::once(format!("xtask {cmd}")).chain(args);
    match cmd.as_str() {
        "dump" => dump::run(sub_args),
        "ci" => ci::run(sub_args),
        "sample" => sample::run(sub_args),
        "bench" => bench::run(sub_args),
        "shaders" => shaders::run(sub_args),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown task `{other}`\n{USAGE}"),
    }
}
