//! `cargo xtask bench sampling`: the CPU sampler chains against a plain max-reduction pass over
//! the same rows, measured in the same run, reported as microseconds per row and as "passes"
//! (chain time / max-pass time); plus batch-64 throughput across all cores (rayon).
//!
//! Logits: for each vocabulary size, rows of LLM-like logits made from the Philox generator:
//! every token `N(0, 1)`, plus 64 "likely" tokens at `15 - 0.25 j + N(0, 0.5)` (j = 0..63) at
//! pseudo-random positions, so top-p(0.95) keeps a few dozen tokens and min-p(0.05) about a dozen.
//! Single-thread timings rotate over 8 rows so the row is not cache-hot (8 rows of 128256 f32 are
//! 4 MiB, past L2); each timing is the best of several repetitions (the machine is shared).
//! Writes `target/bench/sampling.json` and prints a table.
#![allow(clippy::print_stdout)]

use anyhow::{Context, Result};
use clap::Parser;
use rayon::prelude::*;
use sampling::Chain;
use std::hint::black_box;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "Benchmark the CPU sampler chains against a max-reduction pass")]
struct Args {
    /// Vocabulary sizes.
    #[arg(long, value_delimiter = ',', default_values_t = [32000usize, 128256, 151936, 262144])]
    vocab: Vec<usize>,
    /// Seconds per single measurement (each is repeated `--reps` times, best kept).
    #[arg(long, default_value_t = 0.15)]
    seconds: f64,
    /// Repetitions per measurement.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Batch size of the multi-core measurement (0 skips it).
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Output JSON file (default: target/bench/sampling.json in the workspace).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// The chains of the issue, with their names in the table.
pub const CHAINS: &[(&str, &str)] = &[
    ("greedy", "greedy"),
    ("default", "top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist(seed=1)"),
    ("top_p", "top_p(p=0.95);temp(t=0.8);dist(seed=1)"),
    ("min_p", "min_p(p=0.05);temp(t=0.8);dist(seed=1)"),
    ("dist", "temp(t=0.8);dist(seed=1)"),
];

const ROTATE: usize = 8;

/// LLM-like logits (see the module documentation).
pub fn make_rows(n_vocab: usize, n_rows: usize) -> Vec<Vec<f32>> {
    (0..n_rows)
        .into_par_iter()
        .map(|r| {
            let seed = 1000 + r as u64;
            let normal = |i: u64, s: u64| {
                let u1 = graph::philox::uniform(seed, s, i).max(1e-7);
                let u2 = graph::philox::uniform(seed, s + 1, i);
                (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
            };
            let mut row: Vec<f32> = (0..n_vocab as u64).map(|i| normal(i, 0)).collect();
            for j in 0..64u64 {
                let pos = (graph::philox::bits(seed, 7, j)[0] as usize) % n_vocab;
                row[pos] = 15.0 - 0.25 * j as f32 + 0.5 * normal(j, 10);
            }
            row
        })
        .collect()
}

/// Best-of-`reps` seconds per call of `f(i)` over `iters` calls.
fn time(reps: usize, iters: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        best = best.min(t.elapsed().as_secs_f64() / iters as f64);
    }
    best
}

/// Calls per measurement so one measurement lasts about `seconds`.
fn calibrate(seconds: f64, mut f: impl FnMut(usize)) -> usize {
    let t = Instant::now();
    let mut n = 0;
    while t.elapsed().as_secs_f64() < seconds / 4.0 {
        f(n);
        n += 1;
    }
    (n * 4).max(ROTATE)
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let threads = rayon::current_num_threads();
    // The workspace's one feature probe (AVX2, FMA and F16C: what the kernels' fast paths need).
    let avx2 = kernels::has_avx2_fma();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("CPU sampler chains: {cpu}, {threads} threads, AVX2+FMA kernels: {avx2}");
    println!("single thread, rows rotating over {ROTATE}; 'passes' = chain time / max-pass time on the same rows");
    let mut header = format!("{:>8} {:>10}", "V", "max µs");
    for (name, _) in CHAINS {
        header.push_str(&format!(" {:>16}", format!("{name} µs (×)")));
    }
    println!("{header}");
    let mut results = Vec::new();
    for &v in &args.vocab {
        let rows = make_rows(v, ROTATE.max(args.batch));
        let base_iters = calibrate(args.seconds, |i| {
            black_box(sampling::kernels::max_bad(black_box(&rows[i % ROTATE])));
        });
        let base = time(args.reps, base_iters, |i| {
            black_box(sampling::kernels::max_bad(black_box(&rows[i % ROTATE])));
        });
        let mut line = format!("{v:>8} {:>10.2}", base * 1e6);
        let mut chains_json = Vec::new();
        for (name, spec) in CHAINS {
            let mut chain = Chain::parse(spec).context("bench chain")?;
            let iters = calibrate(args.seconds, |i| {
                black_box(chain.sample(black_box(&rows[i % ROTATE])).expect("sample"));
            });
            let t = time(args.reps, iters, |i| {
                black_box(chain.sample(black_box(&rows[i % ROTATE])).expect("sample"));
            });
            let ratio = t / base;
            line.push_str(&format!(" {:>16}", format!("{:.1} ({:.2})", t * 1e6, ratio)));
            let mut batch_rows_per_s = serde_json::Value::Null;
            if args.batch > 0 {
                let batch = &rows[..args.batch];
                let mut chains: Vec<Chain> = (0..args.batch).map(|_| Chain::parse(spec).expect("spec")).collect();
                let mut run_batch = || {
                    chains.par_iter_mut().zip(batch.par_iter()).for_each(|(c, r)| {
                        black_box(c.sample(r).expect("sample"));
                    });
                };
                run_batch();
                let n = calibrate(args.seconds, |_| run_batch());
                let tb = time(args.reps, n.div_ceil(ROTATE), |_| run_batch());
                batch_rows_per_s = serde_json::json!(args.batch as f64 / tb);
            }
            chains_json.push(serde_json::json!({
                "name": name, "spec": spec, "us_per_row": t * 1e6, "passes": ratio,
                "batch": args.batch, "batch_rows_per_s": batch_rows_per_s,
            }));
        }
        println!("{line}");
        results.push(serde_json::json!({ "n_vocab": v, "max_pass_us": base * 1e6, "chains": chains_json }));
    }
    if args.batch > 0 {
        println!("\nbatch {} across {threads} threads (rows/s):", args.batch);
        let mut h = format!("{:>8}", "V");
        for (name, _) in CHAINS {
            h.push_str(&format!(" {name:>12}"));
        }
        println!("{h}");
        for r in &results {
            let mut l = format!("{:>8}", r["n_vocab"]);
            for c in r["chains"].as_array().into_iter().flatten() {
                l.push_str(&format!(" {:>12.0}", c["batch_rows_per_s"].as_f64().unwrap_or(0.0)));
            }
            println!("{l}");
        }
    }
    let doc = serde_json::json!({
        "suite": "sampling", "cpu": cpu, "threads": threads, "avx2_fma": avx2,
        "rotate_rows": ROTATE, "reps": args.reps, "results": results,
    });
    println!();
    crate::bench::write_report(args.out.as_deref(), "sampling", &doc)?;
    Ok(())
}
