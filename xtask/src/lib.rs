//! The developer tasks as a library: every `cargo xtask` subcommand and benchmark suite, shared by
//! the two binaries of this package, `xtask` (`src/main.rs`, the dispatcher) and `gpu-report`
//! (`src/bin/gpu-report.rs`, the one-command measurement of a GPU machine, which runs the same suites
//! without cargo).
#![allow(clippy::print_stdout, clippy::print_stderr)]

pub mod bench;
pub mod bench_fused;
pub mod bench_grammar;
#[cfg(feature = "ggml")]
pub mod bench_ops;
pub mod bench_readback;
pub mod bench_runner;
pub mod bench_sampling;
pub mod bench_sampling_graph;
pub mod bench_serve;
pub mod bench_spec;
pub mod bench_vulkan;
pub mod ci;
pub mod dump;
pub mod fetch_model;
pub mod fused;
pub mod fuzz;
pub mod gpu_report;
pub mod random_models;
pub mod sample;
pub mod sanitize;
pub mod shaders;
