//! `cargo xtask bench readback [--backend cpu|vulkan]`: reading back some rows of a logits-sized
//! output through `sched::Scheduler::read_rows`, beside a read of the whole output measured in the
//! same run (the baseline).
//!
//! The graph: logits `[151936, 32]` f32 as an input, `y = scale(logits, 1)` as the output (in
//! device memory; on Vulkan it has a host-visible read-back region), and a consumer of `y` on the
//! same device, as sampling nodes would be. Cases: 1, 4 and 32 rows (`read_rows`) and the whole
//! tensor (`read`), each the median of `--reps` measurements, each averaging as many reads as fit
//! in `--ms` milliseconds; bytes are `Stats::bytes_to_host` per read. On lavapipe (a CPU
//! implementation of Vulkan) the numbers show the scaling only. Writes `target/bench/readback.json`.
#![allow(clippy::print_stdout)]

use anyhow::{Context, Result, bail};
use clap::Parser;
use graph::{DType, Graph};
use sched::{Backend, Scheduler};
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "Benchmark reading back some rows of a [151936, 32] output vs the whole of it")]
struct Args {
    /// Backend holding the output: cpu or vulkan.
    #[arg(long, default_value = "vulkan")]
    backend: String,
    /// Vocabulary size (row length).
    #[arg(long, default_value_t = 151_936)]
    vocab: usize,
    /// Rows (outputs).
    #[arg(long, default_value_t = 32)]
    rows: usize,
    /// Measurements per timing (the median is reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Milliseconds per measurement.
    #[arg(long, default_value_t = 50.0)]
    ms: f64,
    /// Output JSON file (default: target/bench/readback.json in the workspace).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let (backend, device): (Box<dyn Backend>, String) = match args.backend.as_str() {
        "cpu" => (Box::new(cpu::CpuBackend::new()), "host memory".into()),
        "vulkan" => {
            let vk = vulkan::VulkanBackend::new().context("the Vulkan backend")?;
            let name = vk.device_name().to_string();
            (Box::new(vk), name)
        }
        other => bail!("unknown backend `{other}` (cpu or vulkan)"),
    };
    let mut s = Scheduler::new(vec![backend])?;
    let (v, n) = (args.vocab, args.rows);
    let mut g = Graph::new();
    let x = g.input("logits", DType::F32, &[v, n])?;
    let y = g.named("y", |g| g.scale(x, 1.0))?;
    let z = g.named("consumer", |g| g.scale(y, 2.0))?;
    g.set_output(y);
    g.set_output(z);
    s.plan(&g)?;
    let xs: Vec<f32> = (0..v * n).map(|i| graph::philox::uniform(7, 0, i as u64) * 8.0 - 4.0).collect();
    s.set_input_f32(x, &xs)?;
    s.compute()?;
    let mut time = |read: &mut dyn FnMut(&mut Scheduler) -> Result<()>| -> Result<(f64, u64)> {
        let before = s.stats().bytes_to_host;
        read(&mut s)?;
        let bytes = s.stats().bytes_to_host - before;
        let mut t = Vec::new();
        for _ in 0..args.reps.max(1) {
            let start = Instant::now();
            let mut calls = 0u32;
            while calls == 0 || start.elapsed().as_secs_f64() * 1e3 < args.ms {
                read(&mut s)?;
                calls += 1;
            }
            t.push(start.elapsed().as_secs_f64() / f64::from(calls));
        }
        t.sort_by(f64::total_cmp);
        Ok((t[t.len() / 2], bytes))
    };
    let (t_all, b_all) = time(&mut |s| {
        std::hint::black_box(s.read(y)?);
        Ok(())
    })?;
    let mut rows = Vec::new();
    for k in [1usize, 4, 32].into_iter().filter(|&k| k <= n) {
        // spread over the batch, as sampled rows of a mixed batch would be
        let pick: Vec<usize> = (0..k).map(|i| i * n / k).collect();
        let (t, b) = time(&mut |s| {
            std::hint::black_box(s.read_rows(y, &pick)?);
            Ok(())
        })?;
        rows.push((format!("read_rows {k}"), t, b));
    }
    rows.push(("read (whole)".to_string(), t_all, b_all));
    println!("read-back of y [{v}, {n}] f32 on {}: {device}", args.backend);
    println!("{:<16} {:>12} {:>14} {:>10}", "case", "us", "bytes", "x whole");
    for (case, t, b) in &rows {
        println!("{case:<16} {:>12.1} {b:>14} {:>10.3}", t * 1e6, t / t_all);
    }
    let results: Vec<serde_json::Value> = rows
        .iter()
        .map(|(case, t, b)| serde_json::json!({ "case": case, "us": t * 1e6, "bytes": b, "ratio_to_whole": t / t_all }))
        .collect();
    let doc = serde_json::json!({
        "suite": "readback", "backend": args.backend, "vocab": v, "rows": n,
        "reps": args.reps, "ms": args.ms, "results": results,
    });
    crate::bench::write_report(args.out.as_deref(), "readback", &doc)?;
    Ok(())
}
