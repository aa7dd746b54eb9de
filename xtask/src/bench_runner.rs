//! `cargo xtask bench runner`: the reference runner end to end. Prefill and decode tokens/s at
//! batch 1, 4 and 16 on 1 and 2 CPU threads (or Vulkan), each batch sampled through the backend
//! sampling tail and through the CPU chain (logits copied back), with the bytes read back per step;
//! beside a same-run baseline, one plain read pass over the model's weights (a batch-1 decode step
//! reads them once, so that pass is its memory floor).
//!
//! Per case: a session of `batch` sequences (the default mix of chains cycled), a prefill of
//! `--prompt` tokens per sequence timed `--reps` times (rewinding between runs; the plan is
//! cached), then `--steps` decode steps; reported are medians (prefill) and the median decode step.
//! `d/s/w` is the last decode step's dispatches, submissions and host fence waits (`sched::WorkCounts`,
//! all zero on the CPU backend). Writes `target/bench/runner.json`.
//!
//! With `--llama-python PYTHON` (or `$LLAMA_CPP_PYTHON`: an interpreter with llama-cpp-python
//! installed) and a model file, llama.cpp runs in the same bench run on the same file, threads,
//! batch, prompt length and steps (`llama_cpp_peer.py`: every sequence's prompt in one
//! `llama_decode`, then one token per sequence a step), and each batch and thread count's
//! backend-sampling row is followed by llama.cpp's and the ratios.
#![allow(clippy::print_stdout)]

use anyhow::{Result, bail};
use clap::Parser;
use graph::DType;
use runner::{BackendKind, Config, Model, Sampling, Session, SessionOptions};
use sampling::Chain;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "Benchmark the reference runner: prefill/decode tokens/s, backend vs CPU sampling")]
struct Args {
    /// Model: `random` (the demo model), `random:NAME` (a random model shaped as a real one, see
    /// `random_models`: demo, tiny, smollm2-135m, gemma3-270m), `smollm2` or `gemma3` (fetched
    /// into target/models), or a GGUF path.
    #[arg(long, default_value = "random")]
    model: String,
    /// Backend: cpu or vulkan.
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// Batch sizes (sequences).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    batch: Vec<usize>,
    /// CPU thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Prompt tokens per sequence.
    #[arg(long, default_value_t = 32)]
    prompt: usize,
    /// Decode steps per case.
    #[arg(long, default_value_t = 24)]
    steps: usize,
    /// Prefill repetitions (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Output JSON file (default: target/bench/runner.json in the workspace).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// A Python interpreter with llama-cpp-python, to run llama.cpp beside ours at each batch size
    /// (default: $LLAMA_CPP_PYTHON; a model file only).
    #[arg(long)]
    llama_python: Option<std::path::PathBuf>,
}

/// The llama.cpp peer script (see the module doc).
const PEER: &str = include_str!("llama_cpp_peer.py");

/// llama.cpp's prefill and decode tokens/s at `batch` sequences on `model` through `python`, or
/// why not.
fn llama_cpp(
    python: &std::path::Path,
    model: &std::path::Path,
    threads: usize,
    batch: usize,
    args: &Args,
) -> Result<serde_json::Value> {
    let mut a = vec![model.as_os_str().to_owned()];
    a.extend([threads, args.prompt, args.steps, args.reps, batch].map(|v| v.to_string().into()));
    crate::bench::run_python_peer(python, PEER, &a)
}

/// llama.cpp's row beside ours at `batch` and `threads` (when `--llama-python` or
/// `$LLAMA_CPP_PYTHON` is given and the model is a file), with our/llama.cpp ratios.
fn peer_row(
    args: &Args,
    (batch, threads): (usize, usize),
    decode: f64,
    prefill: f64,
    rows: &mut Vec<serde_json::Value>,
) -> Result<()> {
    let python = crate::bench::llama_python(args.llama_python.as_deref());
    let (Some(python), Some(file)) = (python, model_file(&args.model)?) else {
        return Ok(());
    };
    match llama_cpp(&python, &file, threads, batch, args) {
        Ok(v) => {
            let (p, d) =
                (v["prefill_tokens_per_s"].as_f64().unwrap_or(0.0), v["decode_tokens_per_s"].as_f64().unwrap_or(0.0));
            println!(
                "{batch:>5} {threads:>7} {:>8} | {p:>12.1} | {d:>11.1}   (llama.cpp {}; ours/llama.cpp: prefill {:.2}x, decode {:.2}x)",
                "llama",
                v["llama_cpp_python"].as_str().unwrap_or("?"),
                prefill / p,
                decode / d
            );
            rows.push(serde_json::json!({"batch": batch, "threads": threads, "sampling": "llama.cpp", "llama_cpp": v,
                "prefill_ratio": prefill / p, "decode_ratio": decode / d}));
        }
        Err(e) => println!("llama.cpp beside ours: not measured ({e})"),
    }
    Ok(())
}

/// The file a `--model` value names, where it names one.
pub(crate) fn model_file(spec: &str) -> Result<Option<std::path::PathBuf>> {
    Ok(match spec {
        "random" => None,
        _ if spec.starts_with("random:") => None,
        "smollm2" | "gemma3" => Some(crate::fetch_model::fetch_named(spec)?),
        path => Some(path.into()),
    })
}

const CHAINS: [&str; 4] = [
    "greedy",
    "penalties;dry;top_n_sigma;top_k(k=40);typical;top_p(p=0.95);min_p(p=0.05);xtc;temp(t=0.8);dist(seed=1)",
    "penalties(last_n=64,repeat=1.1,freq=0.1,present=0.1);top_k(k=40);temp(t=0.7);dist(seed=2)",
    "top_k(k=40);dry(multiplier=0.8,base=1.75,allowed_length=2,last_n=64);temp(t=0.9);dist(seed=3)",
];

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One plain read pass over every weight byte (summing 8-byte words), median of 5.
fn weight_pass(m: &Model) -> Duration {
    let tensors: Vec<&[u8]> = m.weights.names().map(|n| &m.weights.get(n).expect("listed").data[..]).collect();
    let runs = (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut acc = 0u64;
            for d in &tensors {
                for c in d.chunks_exact(8) {
                    acc = acc.wrapping_add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
                }
            }
            std::hint::black_box(acc);
            t.elapsed()
        })
        .collect();
    median(runs)
}

pub(crate) fn load_model(spec: &str) -> Result<Model> {
    match (spec, model_file(spec)?) {
        (_, Some(path)) => Ok(Model::from_gguf(&path)?),
        ("random", None) => Ok(Model::random(Config::demo(), DType::F16, 42)?),
        _ => crate::random_models::make(&spec["random:".len()..], 42),
    }
}

/// The runner backend a `--backend` value names.
pub(crate) fn backend_kind(name: &str) -> Result<BackendKind> {
    Ok(match name {
        "cpu" => BackendKind::Cpu,
        "vulkan" => BackendKind::Vulkan,
        b => bail!("--backend `{b}`: cpu or vulkan"),
    })
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let backend = backend_kind(&args.backend)?;
    if args.reps == 0 || args.steps == 0 || args.prompt == 0 {
        bail!("--reps, --steps and --prompt must be positive");
    }
    let model = Arc::new(load_model(&args.model)?);
    let floor = weight_pass(&model);
    println!("model: {}", model.name);
    println!(
        "baseline: one read pass over {:.1} MB of weights: {:.2} ms ({:.1} GB/s)",
        model.weights.bytes() as f64 / 1e6,
        floor.as_secs_f64() * 1e3,
        model.weights.bytes() as f64 / floor.as_secs_f64() / 1e9
    );
    println!(
        "{:>5} {:>7} {:>8} | {:>12} | {:>11} {:>10} {:>9} {:>9} {:>11} {:>11}",
        "batch",
        "threads",
        "sampling",
        "prefill t/s",
        "decode t/s",
        "step ms",
        "graph ms",
        "sample ms",
        "bytes/step",
        "d/s/w"
    );
    let doc = |rows: &[serde_json::Value]| {
        serde_json::json!({
            "model": model.name, "backend": args.backend, "prompt": args.prompt, "steps": args.steps,
            "weights_bytes": model.weights.bytes(), "weight_read_pass_ms": floor.as_secs_f64() * 1e3,
            "cases": rows,
        })
    };
    let mut rows = Vec::new();
    let n_vocab = model.config.n_vocab as u32;
    for &batch in &args.batch {
        for &threads in &args.threads {
            for sampling in [Sampling::Backend, Sampling::Cpu] {
                let chains: Vec<Chain> =
                    (0..batch).map(|i| Chain::parse(CHAINS[i % CHAINS.len()])).collect::<Result<_, _>>()?;
                let opts = SessionOptions {
                    n_ctx: (args.prompt + args.steps + 1).next_multiple_of(16),
                    backend,
                    threads,
                    sampling,
                    ..SessionOptions::default()
                };
                let mut s = Session::new(model.clone(), opts, chains)?;
                let prompts: Vec<Vec<u32>> = (0..batch)
                    .map(|b| (0..args.prompt).map(|j| ((b * 7919 + j * 104_729 + 13) as u32) % n_vocab).collect())
                    .collect();
                let refs: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
                let mut pre = Vec::new();
                let mut last = Vec::new();
                for _ in 0..args.reps {
                    s.rewind();
                    let t = Instant::now();
                    last = s.step(&refs)?.tokens;
                    pre.push(t.elapsed());
                }
                let pre = median(pre);
                let (mut steps, mut graph, mut sample) = (Vec::new(), Vec::new(), Vec::new());
                let mut bytes = 0;
                let mut work = sched::WorkCounts::default();
                for _ in 0..args.steps {
                    let one: Vec<[u32; 1]> = last.iter().map(|&t| [t]).collect();
                    let refs: Vec<&[u32]> = one.iter().map(|x| x.as_slice()).collect();
                    let w0 = s.scheduler().work_counts();
                    let t = Instant::now();
                    let out = s.step(&refs)?;
                    steps.push(t.elapsed());
                    work = s.scheduler().work_counts().since(w0);
                    graph.push(out.graph_time);
                    sample.push(out.sample_time);
                    bytes = out.bytes_read;
                    last = out.tokens;
                }
                let (step, graph, sample) = (median(steps), median(graph), median(sample));
                let prefill_tps = (batch * args.prompt) as f64 / pre.as_secs_f64();
                let decode_tps = batch as f64 / step.as_secs_f64();
                let name = if sampling == Sampling::Backend { "backend" } else { "cpu" };
                println!(
                    "{batch:>5} {threads:>7} {name:>8} | {prefill_tps:>12.1} | {decode_tps:>11.1} {:>10.2} {:>9.2} {:>9.3} {bytes:>11} {:>11}",
                    step.as_secs_f64() * 1e3,
                    graph.as_secs_f64() * 1e3,
                    sample.as_secs_f64() * 1e3,
                    format!("{}/{}/{}", work.dispatches, work.submissions, work.host_waits),
                );
                rows.push(serde_json::json!({
                    "batch": batch, "threads": threads, "sampling": name,
                    "prefill_tokens_per_s": prefill_tps, "decode_tokens_per_s": decode_tps,
                    "decode_step_ms": step.as_secs_f64() * 1e3, "graph_ms": graph.as_secs_f64() * 1e3,
                    "sampling_ms": sample.as_secs_f64() * 1e3, "bytes_read_per_step": bytes,
                    "dispatches_per_step": work.dispatches, "submissions_per_step": work.submissions,
                    "host_waits_per_step": work.host_waits,
                    "record_ms_per_step": work.record_ns as f64 / 1e6,
                    "submit_ms_per_step": work.submit_ns as f64 / 1e6,
                }));
                crate::bench::write_partial(args.out.as_deref(), &doc(&rows))?;
                if sampling == Sampling::Backend {
                    peer_row(&args, (batch, threads), decode_tps, prefill_tps, &mut rows)?;
                }
            }
        }
    }
    crate::bench::write_report(args.out.as_deref(), "runner", &doc(&rows))
}
