//! `cargo xtask bench serve [--model smollm2] [--clients 1,4,16] [--requests N] [--max-tokens N]
//! [--parallel 16] [--threads 2] [--llama-server PATH] [--server-log FILE]
//! [--runner-arg ARG]... [--baseline-runner PATH]`: a bounded load generator on loopback
//! against `runner serve` (the release binary, built first), and against `llama-server` on the
//! same GGUF with the same `--parallel` and threads when one is given (`--llama-server`, or
//! `LLAMA_SERVER`; build it from llama.cpp's source: `cmake -B build -DLLAMA_CURL=OFF && cmake
//! --build build --target llama-server`); without one the bench says so and runs ours alone.
//!
//! Each server first answers one request that is not measured (warm). For each client count:
//! every client sends `--requests` streamed completions one after another
//! (fixed prompts, `max_tokens` tokens each with `ignore_eos`, seeded sampling with llama-server's
//! default chain), and the bench stops when all are answered. Reported: requests/s and generated
//! tokens/s over the wall time, time to first token and inter-token latency p50/p99 (from the
//! arrival of the streamed chunks), and the server's peak resident memory (`VmHWM`). The two
//! servers run one after the other in the same invocation, so their ratios are same-run ratios.
//!
//! Writes `target/bench/serve.json`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Context, Result, bail};
use clap::Parser;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(about = "Load-test runner serve beside llama-server (when given) on loopback")]
struct Args {
    /// A GGUF model, or `smollm2` (fetched into target/models).
    #[arg(long, default_value = "smollm2")]
    model: String,
    /// Concurrent clients, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    clients: Vec<usize>,
    /// Requests each client sends, one after another.
    #[arg(long, default_value_t = 4)]
    requests: usize,
    /// Tokens generated per request.
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// Slots of each server.
    #[arg(long, default_value_t = 16)]
    parallel: usize,
    /// CPU threads of each server.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Context cells per slot.
    #[arg(long, default_value_t = 512)]
    ctx: usize,
    /// A llama-server binary to measure beside ours (default: $LLAMA_SERVER).
    #[arg(long)]
    llama_server: Option<PathBuf>,
    /// Output JSON file (default: target/bench/serve.json in the workspace).
    #[arg(long)]
    out: Option<PathBuf>,
    /// An extra argument for our server (repeat for several), e.g. `--runner-arg=--prefill-apart`.
    #[arg(long, allow_hyphen_values = true)]
    runner_arg: Vec<String>,
    /// Write our server's log here, at `RUST_LOG=runner=debug` (a line per step: its kind,
    /// slots, tokens and times); by default its output is discarded.
    #[arg(long)]
    server_log: Option<PathBuf>,
    /// A second `runner` binary (another commit's build, say) measured in the same run after
    /// ours, as `baseline` rows, with the same `--runner-arg`s; the ratios of ours to it are
    /// printed. Build both in the same checkout path: two builds of one source at two paths can
    /// differ in speed by their code generation alone (`docs/BENCHMARKS.md`).
    #[arg(long)]
    baseline_runner: Option<PathBuf>,
}

/// Prints our tokens/s over `name`'s, per client count (`ours` starts with our rows, in the order
/// `theirs` has them).
fn print_ratios(name: &str, ours: &[serde_json::Value], theirs: &[serde_json::Value]) {
    for (o, t) in ours.iter().zip(theirs) {
        let r = o["tokens_per_s"].as_f64().unwrap_or(f64::NAN) / t["tokens_per_s"].as_f64().unwrap_or(f64::NAN);
        println!("clients {}: runner / {name} tokens/s = {r:.2}", o["clients"]);
    }
}

/// One client's view of one streamed request.
struct Timing {
    ttft: f64,
    gaps: Vec<f64>,
    tokens: usize,
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A raw HTTP/1.1 request (no keep-alive); the response's body reader after the headers, and
/// the status.
fn request(port: u16, method: &str, path: &str, body: &str) -> Result<(u16, BufReader<TcpStream>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(600)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).context("no HTTP status")?;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
    }
    Ok((status, r))
}

/// One streamed completion, timed from the send.
fn streamed(port: u16, body: &str) -> Result<Timing> {
    let t0 = Instant::now();
    let (status, mut r) = request(port, "POST", "/v1/completions", body)?;
    if status != 200 {
        let mut rest = String::new();
        let _ = r.read_to_string(&mut rest);
        bail!("status {status}: {rest}");
    }
    let (mut ttft, mut last, mut gaps, mut tokens) = (None, 0.0, Vec::new(), 0);
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        // Chunked transfer: size lines and data lines interleave; only data lines count.
        let Some(data) = line.trim_end().strip_prefix("data: ") else { continue };
        if data == "[DONE]" {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(data).with_context(|| format!("chunk {data}"))?;
        let has_text = v["choices"][0]["text"].as_str().is_some_and(|t| !t.is_empty())
            || v["content"].as_str().is_some_and(|t| !t.is_empty());
        if has_text {
            let now = t0.elapsed().as_secs_f64() * 1e3;
            match ttft {
                None => ttft = Some(now),
                Some(_) => gaps.push(now - last),
            }
            last = now;
            tokens += 1;
        }
    }
    Ok(Timing { ttft: ttft.unwrap_or(f64::NAN), gaps, tokens })
}

fn wait_healthy(port: u16, child: &mut Child, what: &str) -> Result<()> {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait()? {
            bail!("{what} exited while starting: {st}");
        }
        if let Ok((200, _)) = request(port, "GET", "/health", "") {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(120) {
            bail!("{what} did not answer /health within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The peak resident memory of a process, in MiB (`VmHWM`).
fn peak_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().trim_end_matches(" kB").trim().to_string()))
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// The load at `clients` concurrent clients against the server on `port`.
fn load(port: u16, clients: usize, args: &Args) -> Result<serde_json::Value> {
    let t0 = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (requests, max_tokens) = (args.requests, args.max_tokens);
            std::thread::spawn(move || -> Result<Vec<Timing>> {
                (0..requests)
                    .map(|r| {
                        let body = serde_json::json!({
                            "prompt": format!("Once upon a time, in a village by the sea, lived a child called number {c}."),
                            "max_tokens": max_tokens, "n_predict": max_tokens, "ignore_eos": true, "stream": true,
                            "seed": (c * 1000 + r) as u64, "temperature": 0.8, "cache_prompt": false,
                        });
                        streamed(port, &body.to_string())
                    })
                    .collect()
            })
        })
        .collect();
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().map_err(|_| anyhow::anyhow!("a client panicked"))??);
    }
    let wall = t0.elapsed().as_secs_f64();
    let tokens: usize = all.iter().map(|t| t.tokens).sum();
    let mut ttft: Vec<f64> = all.iter().map(|t| t.ttft).collect();
    let mut gaps: Vec<f64> = all.iter().flat_map(|t| t.gaps.iter().copied()).collect();
    Ok(serde_json::json!({
        "clients": clients, "requests": all.len(), "tokens": tokens, "wall_s": wall,
        "requests_per_s": all.len() as f64 / wall, "tokens_per_s": tokens as f64 / wall,
        "ttft_p50_ms": percentile(&mut ttft, 0.5), "ttft_p99_ms": percentile(&mut ttft, 0.99),
        "itl_p50_ms": percentile(&mut gaps, 0.5), "itl_p99_ms": percentile(&mut gaps, 0.99),
    }))
}

/// Runs every client count against a server started by `cmd`, then stops it.
fn measure(name: &str, mut cmd: Command, port: u16, args: &Args) -> Result<Vec<serde_json::Value>> {
    // Standard error stays where the caller sent it (`--server-log`), else is discarded.
    let logged = cmd.get_envs().any(|(k, _)| k == "RUST_LOG");
    if !logged {
        cmd.stderr(Stdio::null());
    }
    let mut child = cmd.stdout(Stdio::null()).spawn().with_context(|| format!("starting {name}"))?;
    let result = (|| {
        wait_healthy(port, &mut child, name)?;
        // One request first, not measured: both servers are measured warm (ours builds and plans
        // a step shape the first time it meets it).
        let warm = serde_json::json!({"prompt": "Warm up.", "max_tokens": 8, "n_predict": 8, "stream": true});
        streamed(port, &warm.to_string())?;
        let mut rows = Vec::new();
        for &c in &args.clients {
            let mut row = load(port, c, args)?;
            row["server"] = serde_json::json!(name);
            row["peak_mib"] = serde_json::json!(peak_mib(child.id()));
            let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
            println!(
                "{:<13} {:>7} {:>9.2} {:>9.1} {:>9.1} {:>9.1} {:>8.1} {:>8.1} {:>8.0}",
                name,
                c,
                f("requests_per_s"),
                f("tokens_per_s"),
                f("ttft_p50_ms"),
                f("ttft_p99_ms"),
                f("itl_p50_ms"),
                f("itl_p99_ms"),
                f("peak_mib")
            );
            rows.push(row);
        }
        Ok(rows)
    })();
    // SIGTERM first (ours exits 0 on it), then make sure.
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).stderr(Stdio::null()).status();
    let t0 = Instant::now();
    while child.try_wait()?.is_none() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    result
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let model = if args.model == "smollm2" {
        runner::fetch::smollm2(&root.join("target/models"))?
    } else {
        PathBuf::from(&args.model)
    };
    eprintln!("building target/release/runner ...");
    let st = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--release", "-p", "runner", "--bin", "runner"])
        .current_dir(&root)
        .status()?;
    if !st.success() {
        bail!("building the runner failed");
    }
    println!(
        "model {}, --parallel {}, {} threads, {} requests per client of {} tokens (streamed, ignore_eos)",
        model.display(),
        args.parallel,
        args.threads,
        args.requests,
        args.max_tokens
    );
    println!(
        "{:<13} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "server", "clients", "req/s", "tok/s", "ttft p50", "ttft p99", "itl p50", "itl p99", "peak MiB"
    );
    let serve = |bin: &Path, port: u16| {
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--model"]).arg(&model).args([
            "--port",
            &port.to_string(),
            "--parallel",
            &args.parallel.to_string(),
            "--threads",
            &args.threads.to_string(),
            "--ctx",
            &args.ctx.to_string(),
            "--queue",
            "1024",
        ]);
        cmd.args(&args.runner_arg);
        cmd
    };
    let port = free_port()?;
    let mut ours = serve(&root.join("target/release/runner"), port);
    if let Some(log) = &args.server_log {
        let file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        ours.env("RUST_LOG", "runner=debug").stderr(file);
    }
    let mut rows = measure("runner", ours, port, &args)?;
    if let Some(bin) = &args.baseline_runner {
        if !bin.exists() {
            bail!("the baseline runner {} does not exist", bin.display());
        }
        let port = free_port()?;
        let theirs = measure("baseline", serve(bin, port), port, &args)?;
        print_ratios("baseline", &rows, &theirs);
        rows.extend(theirs);
    }
    let llama = args.llama_server.clone().or_else(|| std::env::var_os("LLAMA_SERVER").map(PathBuf::from));
    match llama {
        Some(bin) if bin.exists() => {
            let port = free_port()?;
            let mut cmd = Command::new(&bin);
            cmd.arg("-m").arg(&model).args([
                "--port",
                &port.to_string(),
                "--host",
                "127.0.0.1",
                "-np",
                &args.parallel.to_string(),
                "-t",
                &args.threads.to_string(),
                "-tb",
                &args.threads.to_string(),
                "-c",
                &(args.ctx * args.parallel).to_string(),
                "--no-webui",
            ]);
            // A llama-server that fails (a build for another CPU, a flag it lacks) costs its rows,
            // not ours.
            match measure("llama-server", cmd, port, &args) {
                Ok(theirs) => {
                    print_ratios("llama-server", &rows, &theirs);
                    rows.extend(theirs);
                }
                Err(e) => println!("llama-server failed: {e:#}"),
            }
        }
        Some(bin) => println!("llama-server {} does not exist: measured ours alone", bin.display()),
        None => println!(
            "no llama-server (--llama-server PATH or LLAMA_SERVER; build it from llama.cpp's source): measured ours alone"
        ),
    }
    let doc = serde_json::json!({
        "suite": "serve", "model": model.display().to_string(), "parallel": args.parallel, "threads": args.threads,
        "requests_per_client": args.requests, "max_tokens": args.max_tokens, "results": rows,
    });
    crate::bench::write_report(args.out.as_deref(), "serve", &doc)
}
