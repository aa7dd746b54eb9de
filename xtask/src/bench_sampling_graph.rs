//! `cargo xtask bench sampling --path graph [--backend cpu|vulkan]`: the backend sampling tail
//! (`sampling::backend::Tail`) against the CPU path in the same run, per chain and batch size.
//!
//! Both paths start from the same logits resident on the backend (a parameter uploaded once, as
//! a model's last matmul would leave them). Per step the graph path writes the tail's inputs,
//! computes, reads back what was reserved and finishes rows on the CPU; the CPU path copies every
//! logits row back (`read_with`: in place on the CPU backend) and runs each row's CPU chain; "chain"
//! is the CPU chains alone on host rows (the per-row target compares with it). Timings are the median of `--reps`
//! runs of `--steps` steps (each after one untimed step), the three paths taking turns within
//! each rep; bytes are what each path read back per step, and `d/s/w` the graph path's dispatches,
//! submissions and host fence waits in one step (`sched::WorkCounts`; zero on the CPU backend). The CPU backend runs with
//! `--threads` threads (default 1, so per-row times compare with the single-threaded CPU chain).
//! Writes `target/bench/sampling_graph.json` and prints a table.
#![allow(clippy::print_stdout)]

use crate::bench::median;
use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use sampling::Chain;
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use std::hint::black_box;
use std::time::Instant;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    Cpu,
    Vulkan,
}

#[derive(Parser, Debug)]
#[command(about = "Benchmark backend sampling (graph path) against the CPU path")]
struct Args {
    /// Must be `graph` (the CPU chain bench is `bench sampling` without it).
    #[arg(long)]
    path: String,
    /// The backend that holds the logits and runs the tail.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    /// Vocabulary size.
    #[arg(long, default_value_t = 151_936)]
    vocab: usize,
    /// Batch sizes (output rows per step, one sequence each).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8, 32, 64])]
    batch: Vec<usize>,
    /// Only these chains (names of the table; default: all five).
    #[arg(long, value_delimiter = ',')]
    chains: Vec<String>,
    /// Other chains to measure instead, as `NAME=SPEC` (repeatable; `;` separates a SPEC's stages).
    #[arg(long)]
    spec: Vec<String>,
    /// Steps per measurement.
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// Measurements; the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// CPU backend threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Output JSON file (default: target/bench/sampling_graph.json in the workspace).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// Microseconds per call of `step` over `--steps` calls, after one untimed call (the caches hold
/// what the other paths of the same rep left there).
fn time_rep(args: &Args, mut step: impl FnMut() -> Result<()>) -> Result<f64> {
    step()?;
    let t = Instant::now();
    for _ in 0..args.steps {
        step()?;
    }
    Ok(t.elapsed().as_secs_f64() / args.steps as f64 * 1e6)
}

fn backends(args: &Args) -> Result<Vec<Box<dyn sched::Backend>>> {
    let cpu: Box<dyn sched::Backend> = Box::new(cpu::CpuBackend::with_threads(args.threads));
    Ok(match args.backend {
        Backend::Cpu => vec![cpu],
        Backend::Vulkan => vec![Box::new(vulkan::VulkanBackend::new().context("the Vulkan backend")?), cpu],
    })
}

struct Result1 {
    graph_us: f64,
    cpu_us: f64,
    chain_us: f64,
    graph_bytes: usize,
    cpu_bytes: usize,
    /// Dispatches, submissions and host waits of one graph-path step and one CPU-path step.
    graph_work: sched::WorkCounts,
    cpu_work: sched::WorkCounts,
    placement: String,
}

fn measure(args: &Args, spec: &str, batch: usize, rows: &[f32]) -> Result<Result1> {
    let v = args.vocab;
    let mut seqs = Sequences::new(1)?;
    for s in 0..batch {
        seqs.set(SeqId(s as u32), SeqConfig::new(Chain::parse(spec)?));
    }
    let mut g = graph::Graph::new();
    let logits = g.param("logits", graph::DType::F32, &[v, batch])?;
    let map: Vec<(SeqId, usize)> = (0..batch).map(|r| (SeqId(r as u32), r)).collect();
    let bes = backends(args)?;
    let mut tail = Tail::attach(&mut g, logits, &map, &seqs, bes[0].as_ref())?;
    g.set_output(logits);
    let mut sched = sched::Scheduler::new(bes)?;
    sched.plan(&g)?;
    sched.set_input_f32(logits, &rows[..v * batch])?;
    // Graph path.
    let graph_step = |tail: &mut Tail, sched: &mut sched::Scheduler, seqs: &mut Sequences| -> Result<usize> {
        tail.set_inputs(sched, seqs)?;
        sched.compute()?;
        let out = tail.sample(sched, seqs)?;
        for r in &out.rows {
            let t = r.result.as_ref().map_err(Clone::clone)?.token.context("a token")?;
            tail.accept(seqs, r.seq, &[t])?;
        }
        Ok(out.bytes_read)
    };
    // CPU path: copy every row back, run the chains.
    let mut chains: Vec<Chain> = (0..batch).map(|_| Chain::parse(spec)).collect::<std::result::Result<_, _>>()?;
    let cpu_step = |chains: &mut [Chain], sched: &mut sched::Scheduler| -> Result<usize> {
        let before = sched.stats().bytes_to_host;
        let mut res = Ok(());
        sched.read_with(logits, |bytes| {
            // SAFETY: every bit pattern is an f32; the buffer's alignment is checked below.
            let (pre, data, post) = unsafe { bytes.align_to::<f32>() };
            assert!(pre.is_empty() && post.is_empty(), "the logits read back are not f32-aligned");
            for (r, c) in chains.iter_mut().enumerate() {
                if let Err(e) = c.sample(&data[r * v..(r + 1) * v]).map(black_box) {
                    res = Err(e);
                }
            }
        })?;
        res?;
        Ok((sched.stats().bytes_to_host - before) as usize)
    };
    // The CPU chains alone, on host rows (no copy at all).
    let chain_step = |chains: &mut [Chain]| -> Result<()> {
        for (r, c) in chains.iter_mut().enumerate() {
            black_box(c.sample(&rows[r * v..(r + 1) * v])?);
        }
        Ok(())
    };
    // The counts are of a second step: the first one also creates the pipelines.
    graph_step(&mut tail, &mut sched, &mut seqs)?;
    let w0 = sched.work_counts();
    let graph_bytes = graph_step(&mut tail, &mut sched, &mut seqs)?;
    let w1 = sched.work_counts();
    let cpu_bytes = cpu_step(&mut chains, &mut sched)?;
    let (graph_work, cpu_work) = (w1.since(w0), sched.work_counts().since(w1));
    // The three paths take turns within each rep, so that a change in the machine's load between
    // reps (a shared machine) moves all three alike.
    let (mut gs, mut cs, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.reps {
        gs.push(time_rep(args, || graph_step(&mut tail, &mut sched, &mut seqs).map(black_box).map(drop))?);
        cs.push(time_rep(args, || cpu_step(&mut chains, &mut sched).map(black_box).map(drop))?);
        hs.push(time_rep(args, || chain_step(&mut chains))?);
    }
    let (graph_us, cpu_us, chain_us) = (median(gs), median(cs), median(hs));
    let placement = tail.placement().first().map(|p| p.1.clone()).unwrap_or_default();
    Ok(Result1 { graph_us, cpu_us, chain_us, graph_bytes, cpu_bytes, graph_work, cpu_work, placement })
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    anyhow::ensure!(args.path == "graph", "--path must be graph (or leave it out for the CPU chain bench)");
    let max_batch = args.batch.iter().copied().max().unwrap_or(1);
    let rows: Vec<f32> = crate::bench_sampling::make_rows(args.vocab, max_batch).concat();
    let device = backends(&args)?[0].name().to_string();
    println!(
        "backend sampling, {device} (cpu threads {}), V = {}: µs per step (median of {} x {} steps), bytes read back per step",
        args.threads, args.vocab, args.reps, args.steps
    );
    println!(
        "{:>8} {:>6} {:>10} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10} {:>9}  placement",
        "chain", "batch", "graph µs", "cpu µs", "chain µs", "g/cpu", "g/chain", "graph B", "cpu B", "d/s/w"
    );
    let doc = |results: &[serde_json::Value]| {
        serde_json::json!({
            "suite": "sampling_graph", "backend": device, "cpu_threads": args.threads, "n_vocab": args.vocab,
            "steps": args.steps, "reps": args.reps, "results": results,
        })
    };
    let mut out = Vec::new();
    let custom: Vec<(&str, &str)> = args
        .spec
        .iter()
        .map(|s| s.split_once('=').with_context(|| format!("--spec {s}: expected NAME=SPEC")))
        .collect::<Result<_>>()?;
    let chains: Vec<(&str, &str)> = if custom.is_empty() { crate::bench_sampling::CHAINS.to_vec() } else { custom };
    for &(name, spec) in &chains {
        if !args.chains.is_empty() && !args.chains.iter().any(|c| c == name) {
            continue;
        }
        for &b in &args.batch {
            let r = measure(&args, spec, b, &rows).with_context(|| format!("chain {name}, batch {b}"))?;
            println!(
                "{name:>8} {b:>6} {:>10.1} {:>10.1} {:>10.1} {:>8.2} {:>8.2} {:>10} {:>10} {:>9}  {}",
                r.graph_us,
                r.cpu_us,
                r.chain_us,
                r.graph_us / r.cpu_us,
                r.graph_us / r.chain_us,
                r.graph_bytes,
                r.cpu_bytes,
                format!("{}/{}/{}", r.graph_work.dispatches, r.graph_work.submissions, r.graph_work.host_waits),
                r.placement
            );
            out.push(serde_json::json!({
                "chain": name, "spec": spec, "batch": b, "graph_us_per_step": r.graph_us,
                "cpu_us_per_step": r.cpu_us, "chain_us_per_step": r.chain_us,
                "graph_over_cpu": r.graph_us / r.cpu_us, "graph_over_chain": r.graph_us / r.chain_us,
                "graph_bytes_per_step": r.graph_bytes, "cpu_bytes_per_step": r.cpu_bytes,
                "graph_dispatches_per_step": r.graph_work.dispatches,
                "graph_submissions_per_step": r.graph_work.submissions,
                "graph_host_waits_per_step": r.graph_work.host_waits,
                "graph_submit_us_per_step": r.graph_work.submit_ns as f64 / 1e3,
                "graph_wait_us_per_step": r.graph_work.wait_ns as f64 / 1e3,
                "graph_record_us_per_step": r.graph_work.record_ns as f64 / 1e3,
                "cpu_submissions_per_step": r.cpu_work.submissions,
                "cpu_host_waits_per_step": r.cpu_work.host_waits,
                "placement": r.placement,
            }));
            crate::bench::write_partial(args.out.as_deref(), &doc(&out))?;
        }
    }
    println!();
    crate::bench::write_report(args.out.as_deref(), "sampling_graph", &doc(&out))?;
    Ok(())
}
