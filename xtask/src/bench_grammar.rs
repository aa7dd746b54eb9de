//! `cargo xtask bench grammar [--model smollm2|gemma3|FILE.gguf] [--reps N] [--llama-python PY]`:
//! the grammar stage on a
//! model's real vocabulary, over a realistic token stream (a JSON document as the model's
//! tokenizer splits it, replayed token by token).
//!
//! For each grammar (the JSON grammar of `grammars/json.gbnf`, and a JSON schema with nested
//! objects, arrays and enums, `grammars/person.schema.json`, converted to GBNF):
//! - **mask**: the allowed-token mask at every position of the stream, cold (a fresh matcher: every
//!   grammar state met for the first time) and warm (the same stream again: states and masks
//!   cached), p50 and p99, and the cold masks' total over the stream (what a first request pays);
//! - **compile**: parsing the grammar and starting a matcher (the engine precomputes nothing
//!   per grammar; what it precomputes per model, the vocabulary's index and token sets, is
//!   timed once and its memory printed);
//! - **advance**: accepting each token, p50 and p99;
//! - **step**: one backend sampling step on the CPU backend at batch 1 (`grammar;top_k(40);
//!   temp(t=0.8);dist` vs the same chain without the grammar, measured in the same run: the mask,
//!   its upload and the `token_mask` op included), the median over the stream, and the bytes
//!   written per step;
//! - **optimistic**: the CPU chain `grammar(mode=optimistic);greedy` applied to a row whose
//!   maximum is the stream's token (the model's output already fits: one check, no second run)
//!   vs `greedy` alone;
//! - **optimistic on the backend**: the step's chain with the grammar in optimistic mode, on the
//!   CPU backend, on rows whose maximum is the stream's token (fits: no token rejected) and on the
//!   random rows of **step** (nearly every token rejected: each such step runs the second, masked
//!   backend step over the row), vs the chain without the grammar on the same rows, with the
//!   share of tokens the grammar rejected.
//!
//! With `--llama-python PYTHON` (or `$LLAMA_CPP_PYTHON`: an interpreter with llama-cpp-python),
//! llama.cpp's grammar sampler runs in the same bench run on the same vocabulary, GBNF text and
//! stream (`llama_cpp_grammar_peer.py`): its `apply` on a full row (the grammar-first mask; it
//! keeps no cache, so one pass is its cold and warm) and its `accept`, p50 and p99, and the ratios
//! of ours to it.
//!
//! Writes `target/bench/grammar.json`.
#![allow(clippy::print_stdout)]

use anyhow::{Context, Result, bail};
use clap::Parser;
use grammar::{Grammar, Matcher, Vocab};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::samplers::{GrammarMode, GrammarStage, Greedy};
use sampling::{Chain, Sampler};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The JSON grammar.
pub const JSON_GRAMMAR: &str = include_str!("../../grammars/json.gbnf");
/// A JSON schema with nested objects, arrays and enums.
pub const PERSON_SCHEMA: &str = include_str!("../../grammars/person.schema.json");
/// A document both accept, as a model would write it.
pub const PERSON_DOC: &str = include_str!("../../grammars/person.json");

#[derive(Parser, Debug)]
#[command(about = "Benchmark the grammar stage on a model's vocabulary over a replayed JSON document")]
struct Args {
    /// A GGUF model (its vocabulary), or `smollm2` or `gemma3` (262,144 tokens), fetched into
    /// target/models.
    #[arg(long, default_value = "smollm2")]
    model: String,
    /// A Python interpreter with llama-cpp-python, to run llama.cpp's grammar sampler beside ours
    /// (default: $LLAMA_CPP_PYTHON).
    #[arg(long)]
    llama_python: Option<PathBuf>,
    /// Replays of the stream for the step timings (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Output JSON file (default: target/bench/grammar.json in the workspace).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only the step with the JSON grammar (grammar-first) and without it, `--reps` replays,
    /// nothing written: for a profiler (`perf record -e cpu-clock ... --only-step`).
    #[arg(long)]
    only_step: bool,
}

fn percentile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// Mask and advance times over `stream` from a fresh matcher: (cold masks, warm masks, advances),
/// in microseconds.
fn mask_times(g: &Grammar, vocab: &Arc<Vocab>, stream: &[u32]) -> Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut replay = |m: &mut Matcher, adv: &mut Vec<f64>| -> Result<Vec<f64>> {
        let mut times = Vec::with_capacity(stream.len());
        for &t in stream {
            let t0 = Instant::now();
            m.fill_mask(&mut mask)?;
            times.push(us(t0));
            if mask[t as usize / 32] >> (t % 32) & 1 == 0 {
                bail!("the grammar's mask rejects the stream's token {t}: the document does not fit the grammar");
            }
            let t0 = Instant::now();
            m.accept(t)?;
            adv.push(us(t0));
        }
        Ok(times)
    };
    let mut m = Matcher::new(g, Arc::clone(vocab));
    let mut adv = Vec::new();
    let cold = replay(&mut m, &mut adv)?;
    m.reset();
    let warm = replay(&mut m, &mut Vec::new())?;
    Ok((cold, warm, adv))
}

/// A backend sampling step's timings over a stream.
struct Step {
    /// The median time (inputs, compute, read-back), in microseconds.
    us: f64,
    /// Bytes written to the backend per step (the last step's).
    written: u64,
    /// Rows an optimistic grammar checked, and rejected (run again in a second backend step).
    checked: usize,
    resampled: usize,
}

/// A backend sampling step (inputs, compute, read-back) over `stream` on the CPU backend for
/// `chain`, at batch 1: on the same random row every step, or with `fits` on a row whose
/// maximum is the stream's token (raised far above the rest: the model's output already fits).
fn step_time(chain: &Chain, v: usize, stream: &[u32], reps: usize, fits: bool) -> Result<Step> {
    let mut seqs = Sequences::new(1)?;
    seqs.set(SeqId(0), SeqConfig::new(chain.clone()));
    let mut g = graph::Graph::new();
    let x = g.input("logits", graph::DType::F32, &[v, 1])?;
    let cpu = cpu::CpuBackend::new();
    let mut tail = Tail::attach(&mut g, x, &[(SeqId(0), 0)], &seqs, &cpu)?;
    let mut sched = sched::Scheduler::new(vec![Box::new(cpu)])?;
    sched.plan(&g)?;
    let mut logits: Vec<f32> = (0..v).map(|i| graph::philox::uniform(3, 0, i as u64) * 8.0).collect();
    sched.set_input_f32(x, &logits)?;
    let mut times = Vec::new();
    let mut step = Step { us: 0.0, written: 0, checked: 0, resampled: 0 };
    for _ in 0..reps.max(1) {
        seqs.set(SeqId(0), SeqConfig::new(chain.clone()));
        for &t in stream {
            if fits {
                let keep = logits[t as usize];
                logits[t as usize] = 20.0;
                sched.set_input_f32(x, &logits)?;
                logits[t as usize] = keep;
            }
            let t0 = Instant::now();
            let w0 = sched.stats().bytes_from_host;
            tail.set_inputs(&mut sched, &mut seqs)?;
            step.written = sched.stats().bytes_from_host - w0;
            sched.compute()?;
            let out = tail.sample(&mut sched, &mut seqs)?;
            std::hint::black_box(out.token(0)?);
            times.push(us(t0));
            step.checked += out.checked;
            step.resampled += out.resampled;
            tail.accept(&mut seqs, SeqId(0), &[t])?;
        }
    }
    step.us = crate::bench::median(times);
    Ok(step)
}

/// The median time of a CPU chain run on rows whose maximum is the stream's token.
fn optimistic_time(chain: &Chain, v: usize, stream: &[u32], reps: usize) -> Result<f64> {
    let base: Vec<f32> = (0..v).map(|i| graph::philox::uniform(5, 0, i as u64) * 8.0).collect();
    let mut times = Vec::new();
    for _ in 0..reps.max(1) {
        let mut c = chain.clone();
        let mut row = base.clone();
        for &t in stream {
            let keep = row[t as usize];
            row[t as usize] = 20.0;
            let t0 = Instant::now();
            let mut cur = sampling::Candidates::from_row(&row)?;
            c.apply(&mut cur)?;
            let chosen = cur.selected_token();
            times.push(us(t0));
            if chosen != Some(t) {
                bail!("the chain chose {chosen:?}, not the stream's token {t}");
            }
            c.try_accept(t)?;
            row[t as usize] = keep;
        }
    }
    Ok(crate::bench::median(times))
}

/// The llama.cpp peer script (see the module doc).
const PEER: &str = include_str!("llama_cpp_grammar_peer.py");

/// llama.cpp's grammar sampler on `model`'s vocabulary, `grammars` and `stream` (see the module
/// doc), or why not (no interpreter given is such a reason).
fn llama_cpp(
    args: &Args,
    model: &std::path::Path,
    stream: &[u32],
    grammars: &[(&str, String)],
) -> Result<serde_json::Value> {
    let Some(python) = crate::bench::llama_python(args.llama_python.as_deref()) else {
        bail!("no --llama-python or $LLAMA_CPP_PYTHON");
    };
    let input = serde_json::json!({
        "stream": stream,
        "grammars": grammars.iter().map(|(n, t)| (n.to_string(), serde_json::Value::from(t.as_str()))).collect::<serde_json::Map<_, _>>(),
    });
    let file = std::env::temp_dir().join(format!("llama_cpp_grammar-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(&input)?)?;
    let out =
        crate::bench::run_python_peer(&python, PEER, &[model.as_os_str().to_owned(), file.as_os_str().to_owned()]);
    let _ = std::fs::remove_file(&file);
    out
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let path = crate::bench_runner::model_file(&args.model)?.with_context(|| {
        format!("--model {}: a GGUF file, smollm2 or gemma3 (the grammar needs a vocabulary)", args.model)
    })?;
    let g = gguf::Gguf::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let tok = runner::gguf_model::tokenizer(&g)?;
    let vocab = Arc::clone(tok.grammar_vocab());
    let v = vocab.len();
    let mut stream = tok.encode(PERSON_DOC.trim_end())?;
    if tok.adds_bos() {
        stream.remove(0);
    }
    if args.only_step {
        let gr = Grammar::with_vocab(JSON_GRAMMAR, "root", vocab.as_ref())?;
        let stage = GrammarStage::new("grammar", Matcher::new(&gr, Arc::clone(&vocab)), GrammarMode::First);
        let rest = Chain::parse("top_k(k=40);temp(t=0.8);dist(seed=1)")?;
        let mut with = Chain::new().with(stage);
        rest.stages().iter().for_each(|s| with.push(s.clone()));
        let t = step_time(&with, v, &stream, args.reps, false)?;
        let t0 = step_time(&rest, v, &stream, args.reps, false)?;
        println!(
            "step with the json grammar: {:.1} us, without: {:.1} us, ratio {:.2} (medians of {} steps)",
            t.us,
            t0.us,
            t.us / t0.us,
            args.reps * stream.len()
        );
        return Ok(());
    }
    let schema_grammar = schema::to_grammar_str(PERSON_SCHEMA).context("converting grammars/person.schema.json")?;
    println!(
        "grammar stage on {} ({v} tokens), a {}-token JSON document replayed; CPU backend, batch 1",
        path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned()),
        stream.len()
    );
    println!(
        "{:<8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}",
        "grammar",
        "cold p50",
        "cold p99",
        "warm p50",
        "warm p99",
        "adv p50",
        "adv p99",
        "step",
        "no gram.",
        "ratio",
        "optimist.",
        "greedy",
        "ratio"
    );
    // What the vocabulary precomputes once per model for the masks (sorted texts, prefix jumps,
    // token sets): its build time, rebuilt here from the same texts, and the token sets' memory.
    let pieces: Vec<Vec<u8>> = (0..v as u32).map(|t| vocab.piece(t).to_vec()).collect();
    let t0 = Instant::now();
    let rebuilt = Vocab::new(pieces, vocab.eog());
    let vocab_ms = t0.elapsed().as_secs_f64() * 1e3;
    println!(
        "vocabulary index built in {vocab_ms:.0} ms; its token sets for the mask shortcuts: {} KiB",
        rebuilt.shortcut_bytes() / 1024
    );
    drop(rebuilt);
    let grammars = [("json", JSON_GRAMMAR.to_string()), ("schema", schema_grammar)];
    let peer = llama_cpp(&args, &path, &stream, &grammars);
    let mut results = Vec::new();
    let mut backend_rows = Vec::new();
    for (name, text) in grammars {
        // The median of 5 compiles (the first one in a process also pays the allocator's first
        // touches).
        let mut compiles = Vec::new();
        for _ in 0..5 {
            let t0 = Instant::now();
            let gr =
                Grammar::with_vocab(&text, "root", vocab.as_ref()).with_context(|| format!("the {name} grammar"))?;
            drop(Matcher::new(&gr, Arc::clone(&vocab)));
            compiles.push(us(t0));
        }
        let compile_us = crate::bench::median(compiles);
        let gr = Grammar::with_vocab(&text, "root", vocab.as_ref()).with_context(|| format!("the {name} grammar"))?;
        let (cold, warm, adv) = mask_times(&gr, &vocab, &stream)?;
        let cold_total: f64 = cold.iter().sum();
        let stage = |mode| GrammarStage::new("grammar", Matcher::new(&gr, Arc::clone(&vocab)), mode);
        let rest = Chain::parse("top_k(k=40);temp(t=0.8);dist(seed=1)")?;
        let mut with = Chain::new().with(stage(GrammarMode::First));
        rest.stages().iter().for_each(|s| with.push(s.clone()));
        let Step { us: t_with, written: bytes_with, .. } = step_time(&with, v, &stream, args.reps, false)?;
        let Step { us: t_without, written: bytes_without, .. } = step_time(&rest, v, &stream, args.reps, false)?;
        let opt = Chain::new().with(stage(GrammarMode::Optimistic)).with(Greedy::new());
        let t_opt = optimistic_time(&opt, v, &stream, args.reps)?;
        let t_greedy = optimistic_time(&Chain::new().with(Greedy::new()), v, &stream, args.reps)?;
        // The same chain with an optimistic grammar on the backend: on rows that fit (one check)
        // and on random rows (nearly every token rejected: the second, masked step's cost).
        let mut opt_backend = Chain::new().with(stage(GrammarMode::Optimistic));
        rest.stages().iter().for_each(|s| opt_backend.push(s.clone()));
        let fit = step_time(&opt_backend, v, &stream, args.reps, true)?;
        let fit_without = step_time(&rest, v, &stream, args.reps, true)?;
        let random = step_time(&opt_backend, v, &stream, args.reps, false)?;
        let rate = |s: &Step| s.resampled as f64 / s.checked.max(1) as f64;
        backend_rows.push((name, fit.us, fit_without.us, rate(&fit), random.us, t_without, rate(&random)));
        let mut row = serde_json::json!({
            "grammar": name, "vocab": v, "tokens": stream.len(),
            "mask_cold_p50_us": percentile(cold.clone(), 0.5), "mask_cold_p99_us": percentile(cold, 0.99),
            "mask_warm_p50_us": percentile(warm.clone(), 0.5), "mask_warm_p99_us": percentile(warm, 0.99),
            "advance_p50_us": percentile(adv.clone(), 0.5), "advance_p99_us": percentile(adv, 0.99),
            "step_with_grammar_us": t_with, "step_without_us": t_without, "step_ratio": t_with / t_without,
            "bytes_written_with": bytes_with, "bytes_written_without": bytes_without,
            "optimistic_us": t_opt, "greedy_us": t_greedy, "optimistic_ratio": t_opt / t_greedy,
            "compile_us": compile_us, "mask_cold_total_us": cold_total,
            "vocab_build_ms": vocab_ms, "vocab_token_sets_bytes": vocab.shortcut_bytes(),
            "backend_optimistic_fits_us": fit.us, "backend_optimistic_fits_without_us": fit_without.us,
            "backend_optimistic_fits_ratio": fit.us / fit_without.us, "backend_optimistic_fits_rejected": rate(&fit),
            "backend_optimistic_random_us": random.us, "backend_optimistic_random_ratio": random.us / t_without,
            "backend_optimistic_random_rejected": rate(&random),
        });
        let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:<8} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.1} {:>9.1} {:>10.1} {:>10.1} {:>7.2} {:>10.1} {:>10.1} {:>7.2}",
            name,
            f("mask_cold_p50_us"),
            f("mask_cold_p99_us"),
            f("mask_warm_p50_us"),
            f("mask_warm_p99_us"),
            f("advance_p50_us"),
            f("advance_p99_us"),
            t_with,
            t_without,
            t_with / t_without,
            t_opt,
            t_greedy,
            t_opt / t_greedy
        );
        println!(
            "{:<8} compile (parse and matcher, median of 5) {compile_us:.0} us; cold masks over the stream, in all: {cold_total:.0} us",
            ""
        );
        if let Ok(p) = &peer {
            let g = &p["grammars"][name];
            let (ap50, ap99) =
                (g["apply_p50_us"].as_f64().unwrap_or(f64::NAN), g["apply_p99_us"].as_f64().unwrap_or(f64::NAN));
            let (ac50, ac99) =
                (g["accept_p50_us"].as_f64().unwrap_or(f64::NAN), g["accept_p99_us"].as_f64().unwrap_or(f64::NAN));
            println!(
                "{:<8} {ap50:>10.1} {ap99:>10.1} {:>10} {:>10} {ac50:>9.1} {ac99:>9.1}   (llama.cpp: apply on the full row, accept; llama.cpp/ours: cold p50 {:.0}x, cold p99 {:.1}x, warm p50 {:.0}x)",
                "llama",
                "-",
                "-",
                ap50 / f("mask_cold_p50_us"),
                ap99 / f("mask_cold_p99_us"),
                ap50 / f("mask_warm_p50_us"),
            );
            row["llama_cpp"] = g.clone();
        }
        results.push(row);
    }
    if let Err(e) = &peer {
        println!("llama.cpp beside ours: not measured ({e})");
    }
    println!(
        "optimistic on the backend (grammar(mode=optimistic);top_k(40);temp(t=0.8);dist; a rejected row runs a second, masked step):"
    );
    println!(
        "{:<8} {:>10} {:>10} {:>7} {:>9} {:>10} {:>10} {:>7} {:>9}",
        "grammar", "fits", "no gram.", "ratio", "rejected", "random", "no gram.", "ratio", "rejected"
    );
    for (name, fit, fit_without, fit_rate, random, without, random_rate) in backend_rows {
        println!(
            "{:<8} {fit:>10.1} {fit_without:>10.1} {:>7.2} {:>8.1}% {random:>10.1} {without:>10.1} {:>7.2} {:>8.1}%",
            name,
            fit / fit_without,
            100.0 * fit_rate,
            random / without,
            100.0 * random_rate
        );
    }
    println!(
        "(times in us; bytes written per step with the grammar: the mask's {} words and the draws' inputs)",
        vocab.mask_words()
    );
    let llama = peer.as_ref().ok().map(|p| p["llama_cpp_python"].clone());
    let doc = serde_json::json!({ "suite": "grammar", "model": path.display().to_string(), "reps": args.reps,
        "llama_cpp_python": llama, "results": results });
    crate::bench::write_report(args.out.as_deref(), "grammar", &doc)
}
