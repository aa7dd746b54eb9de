//! `gpu-report`: every measurement that matters on a GPU machine, in one command that needs no
//! cargo there (see `xtask::gpu_report` and docs/BENCHMARKS.md, "On a GPU").
#![allow(clippy::print_stderr)]

use std::process::ExitCode;

fn main() -> ExitCode {
    match xtask::gpu_report::main(std::env::args()) {
        Ok(code) => code,
        Err(e) => {
            if let Some(clap) = e.downcast_ref::<clap::Error>() {
                clap.exit();
            }
            eprintln!("gpu-report: {e:#}");
            ExitCode::FAILURE
        }
    }
}
