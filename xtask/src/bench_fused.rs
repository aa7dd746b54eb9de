//! `cargo xtask bench fused`: `top_k_top_p_sample` on each `--backend` (cpu, vulkan), B in {1, 16, 64} rows of
//! V = 151,936 logits with mixed per-row parameters, against the same semantics composed from
//! primitive graph ops (argsort, get_rows, soft_max, cumsum, compare, where, max_rows, div,
//! argmax) and against two same-run baselines on the same logits: a read pass (`max_rows`) and an
//! exponential pass (`exp`). Each timing is the median of `--reps` runs of `Scheduler::compute`
//! (inputs set once). On Vulkan (the Vulkan backend first, the CPU for what it declines) each graph's
//! compute dispatches are counted too (`sched::WorkCounts` across one compute). Writes
//! `target/bench/fused.json`.
//!
//! Rows cycle through (k, p, min_p): top-K with k in {1, 20, 50, 1024}, top-P alone with p in
//! {0.5, 0.9, 0.95}, top-K + top-P, min-P 0 or 0.05; post stage qSample (q i.i.d. Exp(1)). Every
//! row is sorted (top-K or `p < 1`), the case the composed graph expresses (it receives per row
//! the effective k: `V` where top-K is skipped).
//!
//! A second table (`random`) times `random_sample` on the same sizes against its own same-run read,
//! exp and argsort passes; `--ops` picks the tables.
#![allow(clippy::print_stdout)]

mod random;

use anyhow::{Result, bail};
use clap::Parser;
use graph::fused::{PostSample, TopKTopP};
use graph::{DType, Graph, NodeId, SortOrder};
use sched::Scheduler;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "Benchmark the fused top-k/top-p sampling op against its composition from primitives")]
struct Args {
    /// Vocabulary size.
    #[arg(long, default_value_t = 151_936)]
    vocab: usize,
    /// Batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    batch: Vec<usize>,
    /// Runs per timing (the median is reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Backends to measure (`cpu`, `vulkan`); vulkan is skipped with a note where no device opens.
    #[arg(long, value_delimiter = ',', default_value = "cpu,vulkan")]
    backend: Vec<String>,
    /// Ops to measure (`top-k-top-p`, `random-sample`).
    #[arg(long, value_delimiter = ',', default_value = "top-k-top-p,random-sample")]
    ops: Vec<String>,
    /// Output JSON file (default: target/bench/fused.json in the workspace).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// Per-row parameters: (k, p, min_p).
fn params(b: usize) -> Vec<(i32, f32, f32)> {
    let cycle = [
        (50, 1.0, 0.0),
        (0, 0.9, 0.0),
        (20, 0.8, 0.05),
        (0, 0.95, 0.05),
        (1024, 0.9, 0.0),
        (1, 1.0, 0.0),
        (0, 0.5, 0.0),
        (40, 0.95, 0.05),
    ];
    (0..b).map(|r| cycle[r % cycle.len()]).collect()
}

/// Median seconds of `reps` computes.
fn time(s: &mut Scheduler, reps: usize) -> Result<f64> {
    s.compute()?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        s.compute()?;
        t.push(start.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// A scheduler on `backend`, and whether it counts dispatches (Vulkan does, the CPU does not).
fn scheduler(backend: &str) -> Result<(Scheduler, bool)> {
    match backend {
        "cpu" => Ok((Scheduler::new(vec![Box::new(cpu::CpuBackend::new())])?, false)),
        "vulkan" => {
            let vk = vulkan::VulkanBackend::new()?;
            Ok((Scheduler::new(vec![Box::new(vk), Box::new(cpu::CpuBackend::new())])?, true))
        }
        other => bail!("unknown backend {other} (cpu or vulkan)"),
    }
}

/// Dispatches of one compute (`sched::WorkCounts`; 0 on the CPU backend).
fn dispatches(s: &mut Scheduler) -> Result<u64> {
    let before = s.work_counts();
    s.compute()?;
    Ok(s.work_counts().since(before).dispatches)
}

/// How many nodes of the planned graph run on each backend, e.g. `vulkan 3, cpu 1`.
fn placement(s: &Scheduler, g: &Graph) -> String {
    let Some(plan) = s.current_plan() else { return String::new() };
    let mut counts: Vec<(String, usize)> = Vec::new();
    for (id, n) in g.nodes() {
        if n.op == graph::Op::Input || n.op.is_view() {
            continue;
        }
        let b = plan.backend_of(id).to_string();
        match counts.iter_mut().find(|(name, _)| *name == b) {
            Some((_, c)) => *c += 1,
            None => counts.push((b, 1)),
        }
    }
    counts.iter().map(|(b, c)| format!("{b} {c}")).collect::<Vec<_>>().join(", ")
}

/// The composed graph: returns (logits, keff, peff, meff, q, token).
fn composed(g: &mut Graph, v: usize, b: usize, eps: f32) -> Result<[NodeId; 6]> {
    let x = g.input("logits", DType::F32, &[v, b])?;
    let keff = g.input("keff", DType::F32, &[1, b])?;
    let peff = g.input("peff", DType::F32, &[1, b])?;
    let meff = g.input("meff", DType::F32, &[1, b])?;
    let q = g.input("q", DType::F32, &[v, b])?;
    let sidx = g.argsort(x, SortOrder::Desc)?;
    let x3 = g.reshape(x, &[1, v, b])?;
    let sorted = g.get_rows(x3, sidx)?;
    let sorted = g.reshape(sorted, &[v, b])?;
    let pos = g.arange(DType::F32, &[v, b], 0.0, 1.0)?;
    let ninf = g.fill(DType::F32, &[1, 1], f32::NEG_INFINITY)?;
    let zero = g.fill(DType::F32, &[1, 1], 0.0)?;
    let removed_k = g.ge(pos, keff)?;
    let keep_k = g.scale_bias(removed_k, -1.0, 1.0)?;
    let masked = g.where_(keep_k, sorted, ninf)?;
    let probs = g.soft_max(masked, None, 1.0)?;
    let cum = g.cumsum(probs)?;
    let excl = g.sub(cum, probs)?;
    let removed_p = g.gt(excl, peff)?;
    let keep_p = g.scale_bias(removed_p, -1.0, 1.0)?;
    let kept = g.where_(keep_p, probs, zero)?;
    let mx = g.max_rows(kept)?;
    let thr = g.mul(mx, meff)?;
    let keep_m = g.ge(kept, thr)?;
    let kept = g.where_(keep_m, kept, zero)?;
    let qe = g.scale_bias(q, 1.0, eps)?;
    let ratio = g.div(kept, qe)?;
    let best = g.argmax(ratio)?;
    let s3 = g.reshape(sidx, &[1, v, b])?;
    let best = g.reshape(best, &[1, b])?;
    let token = g.get_rows(s3, best)?;
    g.set_output(token);
    Ok([x, keff, peff, meff, q, token])
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let v = args.vocab;
    let mut reports = Vec::new();
    for backend in &args.backend {
        if backend == "vulkan"
            && let Err(e) = vulkan::VulkanBackend::new()
        {
            println!("vulkan: skipped, no device ({e})");
            continue;
        }
        let mut report = serde_json::json!({ "backend": backend });
        for op in &args.ops {
            match op.as_str() {
                "top-k-top-p" => report["rows"] = bench(backend, v, &args)?.into(),
                "random-sample" => {
                    report["random_sample"] = random::bench(backend, v, &args.batch, args.reps)?.into();
                }
                other => bail!("unknown op {other} (top-k-top-p or random-sample)"),
            }
        }
        reports.push(report);
    }
    crate::bench::write_report(args.out.as_deref(), "fused", &serde_json::json!({ "backends": reports }))
}

/// The table of one backend.
fn bench(backend: &str, v: usize, args: &Args) -> Result<Vec<serde_json::Value>> {
    let mut table = Vec::new();
    let device = match backend {
        "vulkan" => format!(" ({})", vulkan::VulkanBackend::new()?.device_name()),
        _ => String::new(),
    };
    println!("top_k_top_p_sample (qSample), {backend} backend{device}, V = {v}, median of {} runs", args.reps);
    println!(
        "{:>4} {:>12} {:>12} {:>12} {:>12} {:>9} {:>9} {:>9} {:>14}",
        "B", "fused ms", "composed ms", "read ms", "exp ms", "comp/fus", "fus/read", "agree", "dispatches f/c"
    );
    for &b in &args.batch {
        let xs: Vec<f32> = (0..v * b).map(|i| graph::philox::uniform(11, 0, i as u64) * 16.0 - 8.0).collect();
        let qs: Vec<f32> = (0..v * b).map(|i| -(1.0 - graph::philox::uniform(11, 1, i as u64)).ln()).collect();
        let ps = params(b);
        // fused
        let mut g = Graph::new();
        let x = g.input("logits", DType::F32, &[v, b])?;
        let k = g.input("top_k", DType::I32, &[1, b])?;
        let p = g.input("params", DType::F32, &[2, b])?;
        let q = g.input("q", DType::F32, &[v, b])?;
        let a = TopKTopP::new(PostSample::QSample);
        let y = g.top_k_top_p_sample(x, k, p, Some(q), a)?;
        g.set_output(y);
        let (mut s, _) = scheduler(backend)?;
        s.plan(&g)?;
        let fused_on = placement(&s, &g);
        s.set_input_f32(x, &xs)?;
        s.set_input_i32(k, &ps.iter().map(|t| t.0).collect::<Vec<_>>())?;
        s.set_input_f32(p, &ps.iter().flat_map(|t| [t.1, t.2]).collect::<Vec<_>>())?;
        s.set_input_f32(q, &qs)?;
        let fused = time(&mut s, args.reps)?;
        let fused_dispatches = dispatches(&mut s)?;
        let fused_idx = s.read_i32(y)?;
        // composed
        let mut g = Graph::new();
        let [cx, ck, cp, cm, cq, tok] = composed(&mut g, v, b, a.eps)?;
        let (mut s, counts) = scheduler(backend)?;
        s.plan(&g)?;
        let comp_on = placement(&s, &g);
        s.set_input_f32(cx, &xs)?;
        let runs = |k: i32| k >= 1 && (k as usize) <= v.min(a.ks() as usize);
        s.set_input_f32(ck, &ps.iter().map(|t| if runs(t.0) { t.0 as f32 } else { v as f32 }).collect::<Vec<_>>())?;
        s.set_input_f32(cp, &ps.iter().map(|t| if t.1 >= 1.0 { 2.0 } else { t.1.max(0.0) }).collect::<Vec<_>>())?;
        s.set_input_f32(cm, &ps.iter().map(|t| t.2).collect::<Vec<_>>())?;
        s.set_input_f32(cq, &qs)?;
        let comp = time(&mut s, args.reps)?;
        let comp_dispatches = dispatches(&mut s)?;
        let comp_idx = s.read_i32(tok)?;
        let agree = fused_idx.iter().zip(&comp_idx).filter(|(a, b)| a == b).count();
        if fused_idx.iter().any(|&i| i < 0) {
            bail!("the fused op rejected a benchmark row: {fused_idx:?}");
        }
        // baselines: a read pass and an exp pass over the same logits
        let base = |exp: bool| -> Result<f64> {
            let mut g = Graph::new();
            let x = g.input("logits", DType::F32, &[v, b])?;
            let y = if exp { g.unary(graph::UnaryOp::Exp, x)? } else { g.max_rows(x)? };
            g.set_output(y);
            let (mut s, _) = scheduler(backend)?;
            s.plan(&g)?;
            s.set_input_f32(x, &xs)?;
            time(&mut s, args.reps)
        };
        let read = base(false)?;
        let exp = base(true)?;
        println!(
            "{b:>4} {:>12.3} {:>12.3} {:>12.3} {:>12.3} {:>8.1}x {:>8.1}x {:>5}/{b} {:>14}",
            fused * 1e3,
            comp * 1e3,
            read * 1e3,
            exp * 1e3,
            comp / fused,
            fused / read,
            agree,
            if counts { format!("{fused_dispatches}/{comp_dispatches}") } else { "-".into() },
        );
        if backend != "cpu" {
            println!("     placement: fused [{fused_on}], composed [{comp_on}]");
        }
        table.push(serde_json::json!({
            "batch": b, "vocab": v, "fused_s": fused, "composed_s": comp, "read_s": read, "exp_s": exp,
            "composed_over_fused": comp / fused, "fused_over_read": fused / read, "indices_agree": agree,
            "fused_dispatches": fused_dispatches, "composed_dispatches": comp_dispatches,
            "fused_placement": fused_on, "composed_placement": comp_on,
        }));
    }
    Ok(table)
}
