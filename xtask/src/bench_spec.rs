//! `cargo xtask bench spec`: speculative decoding. (1) The runner's decode tokens/s with and
//! without n-gram speculation on a repetitive prompt (counting "1, 2, ..., 8," three times over and
//! on), greedy, one
//! sequence, with the acceptance rate: SmolLM2 where its GGUF is in `target/models` (or
//! `--model`), else the random demo model (whose random text the drafter rarely predicts).
//! Medians of `--reps` runs. (2) The cost of verifying 8 draft tokens against one plain backend
//! draw at V = 151936: the backend sampling tail over 9 output rows with a draft set (each row's
//! draw the verifier's decision, `spec_verify`), the tokens read back and the accepted prefix
//! taken (`accept_rows`), against the same tail over 1 row, read back and accepted (the logits
//! are a graph input, so only the sampling is timed), for greedy, a top-k list, the whole
//! vocabulary and a top-p mask, on `--backend` (the CPU backend, or Vulkan with the CPU beside it).
//! Writes `target/bench/spec.json`.
#![allow(clippy::print_stdout)]

use crate::bench::median;
use anyhow::{Context, Result, bail};
use clap::Parser;
use runner::spec::{self, Drafter, Generation};
use runner::{BackendKind, Model, Sampling, Session, SessionOptions};
use sampling::Chain;
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::speculative::accept_rows;
use sampling::speculative::ngram::NgramDrafter;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "Benchmark speculative decoding: runner tokens/s with and without n-gram drafts; verification cost")]
struct Args {
    /// `auto` (SmolLM2 if its GGUF is in target/models, else the random model), `smollm2`,
    /// `random`, or a GGUF path.
    #[arg(long, default_value = "auto")]
    model: String,
    /// Backend: cpu or vulkan.
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// CPU threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Tokens generated per run.
    #[arg(long, default_value_t = 64)]
    tokens: usize,
    /// Runs per case (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// The most draft tokens per step.
    #[arg(long, default_value_t = 8)]
    draft_max: usize,
    /// The n-gram drafter's match length.
    #[arg(long, default_value_t = 3)]
    ngram_n: usize,
    /// Calls per verification measurement (the median of `--reps` measurements).
    #[arg(long, default_value_t = 50)]
    calls: usize,
    /// Measure only the verification cost (no model is loaded).
    #[arg(long)]
    verify_only: bool,
    /// Output JSON file (default: target/bench/spec.json in the workspace).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

const COUNTING: &str = "1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3,";
const V: usize = 151_936;

fn model_and_prompt(spec: &str) -> Result<(Model, Vec<u32>)> {
    let smollm2 = crate::fetch_model::models_dir().join(runner::fetch::SMOLLM2_FILE);
    let m = match spec {
        "auto" if smollm2.exists() => Model::from_gguf(&smollm2)?,
        "auto" | "random" => crate::bench_runner::load_model("random")?,
        other => crate::bench_runner::load_model(other)?,
    };
    let prompt = match &m.tokenizer {
        Some(t) => t.encode(COUNTING)?,
        // The random model: a repeated pattern of token ids.
        None => [17u32, 4242, 9, 151_000, 77].iter().cycle().take(40).copied().collect(),
    };
    Ok((m, prompt))
}

fn decode(args: &Args, m: &Arc<Model>, prompt: &[u32], backend: BackendKind, ngram: bool) -> Result<Generation> {
    let k = if ngram { args.draft_max } else { 0 };
    let opts = SessionOptions {
        n_ctx: spec::cells_needed(prompt.len(), args.tokens, k),
        backend,
        threads: args.threads,
        sampling: Sampling::Backend,
        n_draft_max: k,
        ..SessionOptions::default()
    };
    let mut s = Session::new(m.clone(), opts, vec![Chain::parse("greedy")?])?;
    let mut d = ngram.then(|| NgramDrafter::new(args.ngram_n, k, 0.75).map(Drafter::Ngram)).transpose()?;
    Ok(spec::generate(&mut s, d.as_mut(), &[prompt.to_vec()], args.tokens, |_| Ok(()))?)
}

/// Microseconds per call of the backend tail for one sequence over `n_out` rows (`n_out - 1`
/// draft tokens verified, or a plain draw when 1), median of `reps` measurements.
fn verify_cost(args: &Args, chain: &str, n_out: usize, rows: &[f32]) -> Result<(f64, usize)> {
    let mut seqs = Sequences::new(n_out)?;
    seqs.set(SeqId(0), SeqConfig::new(Chain::parse(chain)?));
    let mut g = graph::Graph::new();
    let logits = g.input("logits", graph::DType::F32, &[V, n_out])?;
    let map: Vec<(SeqId, usize)> = (0..n_out).map(|j| (SeqId(0), j)).collect();
    let cpu: Box<dyn sched::Backend> = Box::new(cpu::CpuBackend::with_threads(args.threads));
    let backends = match crate::bench_runner::backend_kind(&args.backend)? {
        BackendKind::Cpu => vec![cpu],
        BackendKind::Vulkan => vec![Box::new(vulkan::VulkanBackend::new()?) as Box<dyn sched::Backend>, cpu],
    };
    let mut tail = Tail::attach(&mut g, logits, &map, &seqs, backends[0].as_ref())?;
    let mut sched = sched::Scheduler::new(backends)?;
    sched.plan(&g)?;
    sched.set_input_f32(logits, &rows[..V * n_out])?;
    // Drafts: each row's own greedy token, so every draft is checked to the end.
    let draft: Vec<u32> = rows
        .chunks(V)
        .take(n_out - 1)
        .map(|r| r.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |x| x.0 as u32))
        .collect();
    let mut bytes = 0;
    let mut call = |seqs: &mut Sequences| -> Result<()> {
        seqs.set_draft(SeqId(0), &draft)?;
        tail.set_inputs(&mut sched, seqs)?;
        sched.compute()?;
        let out = tail.sample(&mut sched, seqs)?;
        bytes = out.bytes_read;
        let mut emitted = Vec::with_capacity(n_out);
        for r in &out.rows {
            let o = r.result.as_ref().map_err(Clone::clone)?;
            emitted.push(o.token.context("a token")?);
        }
        let tokens = if n_out == 1 {
            emitted
        } else {
            accept_rows(&seqs.get(SeqId(0)).context("registered")?.chain, &emitted, &draft)?.tokens
        };
        tail.accept(seqs, SeqId(0), &tokens)?;
        black_box(tokens);
        Ok(())
    };
    call(&mut seqs)?;
    let mut times = Vec::with_capacity(args.reps);
    for _ in 0..args.reps {
        let t = Instant::now();
        for _ in 0..args.calls {
            call(&mut seqs)?;
        }
        times.push(t.elapsed().as_secs_f64() * 1e6 / args.calls as f64);
    }
    Ok((median(times), bytes))
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let backend = crate::bench_runner::backend_kind(&args.backend)?;
    if args.reps == 0 || args.tokens < 2 || args.calls == 0 || args.draft_max == 0 {
        bail!("--reps, --calls and --draft-max must be positive and --tokens at least 2");
    }
    let (decode_doc, model_name) = if args.verify_only { (None, None) } else { decode_cases(&args, backend)? };
    // Verification cost at V = 151936.
    let rows: Vec<f32> =
        (0..V * 9).map(|i| (graph::philox::uniform_f64(5, 0, i as u64) * 20.0 - 10.0) as f32).collect();
    println!(
        "\nverifying {} drafts vs one plain backend draw, V = {V}, backend {}, {} CPU thread(s)",
        args.draft_max, args.backend, args.threads
    );
    println!(
        "{:>40} | {:>10} {:>10} {:>7} | {:>8} {:>8}",
        "chain", "plain us", "verify us", "ratio", "bytes 1", "bytes 9"
    );
    let mut verify = Vec::new();
    for chain in [
        "greedy",
        "top_k(k=40);temp(t=0.8);dist(seed=1)",
        "temp(t=0.8);dist(seed=1)",
        "top_p(p=0.9);temp(t=0.8);dist(seed=1)",
    ] {
        let (plain, b1) = verify_cost(&args, chain, 1, &rows)?;
        let (ver, b9) = verify_cost(&args, chain, args.draft_max + 1, &rows)?;
        println!("{chain:>40} | {plain:>10.1} {ver:>10.1} {:>6.2}x | {b1:>8} {b9:>8}", ver / plain);
        verify.push(serde_json::json!({
            "chain": chain, "plain_us": plain, "verify_us": ver, "ratio": ver / plain,
            "bytes_plain": b1, "bytes_verify": b9,
        }));
    }
    let doc = serde_json::json!({
        "model": model_name, "backend": args.backend, "threads": args.threads, "tokens": args.tokens,
        "decode": decode_doc, "verify_drafts": args.draft_max, "vocab": V, "verify": verify,
    });
    crate::bench::write_report(args.out.as_deref(), "spec", &doc)
}

/// Decode tokens/s without and with n-gram speculation: the cases as JSON (with the prompt length
/// and the speed-up) and the model's name.
fn decode_cases(args: &Args, backend: BackendKind) -> Result<(Option<serde_json::Value>, Option<String>)> {
    let (m, prompt) = model_and_prompt(&args.model)?;
    let m = Arc::new(m);
    println!(
        "model: {}, prompt of {} tokens, {} tokens generated, greedy, {} thread(s), backend {}",
        m.name,
        prompt.len(),
        args.tokens,
        args.threads,
        args.backend
    );
    println!(
        "{:>22} | {:>10} {:>6} {:>8} {:>8} {:>11} {:>6}",
        "decode", "tokens/s", "steps", "drafted", "accepted", "acceptance", "plans"
    );
    let mut cases = Vec::new();
    let mut tps = [0.0; 2];
    for (i, ngram) in [false, true].into_iter().enumerate() {
        let runs: Vec<Generation> =
            (0..args.reps).map(|_| decode(args, &m, &prompt, backend, ngram)).collect::<Result<_>>()?;
        if runs.iter().any(|r| r.tokens != runs[0].tokens) {
            bail!("greedy runs produced different tokens");
        }
        let t = median(runs.iter().map(Generation::tokens_per_s).collect());
        tps[i] = t;
        let g = &runs[0];
        let name = if ngram { format!("ngram (n={}, k={})", args.ngram_n, args.draft_max) } else { "plain".into() };
        println!(
            "{name:>22} | {t:>10.1} {:>6} {:>8} {:>8} {:>10.1}% {:>6}",
            g.steps,
            g.drafted,
            g.accepted,
            100.0 * g.acceptance(),
            g.plans_after_prefill
        );
        cases.push(serde_json::json!({
            "mode": name, "tokens_per_s": t, "steps": g.steps, "drafted": g.drafted,
            "accepted": g.accepted, "acceptance": g.acceptance(), "plans_after_prefill": g.plans_after_prefill,
        }));
    }
    println!("speed-up: {:.2}x", tps[1] / tps[0]);
    let doc = serde_json::json!({ "prompt_tokens": prompt.len(), "cases": cases, "speed_up": tps[1] / tps[0] });
    Ok((Some(doc), Some(m.name.clone())))
}
