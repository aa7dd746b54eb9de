//! `cargo xtask`: the project's developer tasks. Each subcommand lives in its own module and parses
//! its own arguments; this file only dispatches.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Result, bail};
use std::process::ExitCode;
use xtask::{bench, ci, dump, fetch_model, fused, fuzz, sample, sanitize, shaders};

const USAGE: &str = "usage: cargo xtask <dump|sample|fused|bench|shaders|fetch-model|fetch-grammars|ci|sanitize|fuzz> [args...]
  dump FIXTURE [--format text|dot]     print a graph fixture
  sample --logits F.npy --chain SPEC  run a sampler chain on logits (see docs/SAMPLING.md)
  fused top-k-top-p|random-sample ... the fused sampling ops on .npy files (see docs/FUSED.md)
  bench <suite>                        benchmarks (release build)
  fetch-model [smollm2|gemma3]         download a model into target/models (default: the SmolLM2 test model)
  fetch-grammars                       llama.cpp's grammars/*.gbnf into target/llama-grammars (for a test)
  ci                                   install what the tests need, then run the whole suite
  sanitize [--address] [--thread]      kernels, cpu and sched tests under ASan / TSan (pinned nightly; --quick: CI's subset)
  fuzz [--seconds N] [--target T]      the libFuzzer targets of fuzz/ (nightly, cargo-fuzz)";

/// Runs the task. A failure is reported as its message chain (one cause per line) and exit code
/// 1, never as a backtrace, even with `RUST_BACKTRACE` set: an error here is a user's (a bad SPEC,
/// a bad file). Real bugs panic, and a panic keeps its backtrace.
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(clap) = e.downcast_ref::<clap::Error>() {
                // usage errors, --help and --version print as clap formats them
                clap.exit();
            }
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
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
        "fused" => fused::run(sub_args),
        "bench" => bench::run(sub_args),
        "shaders" => shaders::run(sub_args),
        "fetch-model" => fetch_model::run(sub_args),
        "fetch-grammars" => ci::fetch_grammars(),
        "sanitize" => sanitize::run(sub_args),
        "fuzz" => fuzz::run(sub_args),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown task `{other}`\n{USAGE}"),
    }
}
