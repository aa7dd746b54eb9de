//! The `profile` section: where the GPU's time goes inside the steps the other sections time.
//! It turns on per-node timestamps ([`vulkan::profile`]) and runs a few of the suites once at one
//! size each (backend sampling at batch 1 per chain and at batch 64, the fused ops at batch 16,
//! decoding the demo model at batch 1 and random SmolLM2-135M shapes at batch 1 and 16), then sums
//! the recorded node times per op and shapes (the label without its node number): calls, total and
//! median µs, heaviest first. The timestamps sit between nodes, so a node's time includes the
//! barrier before the next one; the suites' own timings printed alongside are slowed by the
//! timestamps and are not the report's.

use super::sections::Ctx;
use super::{require_vulkan, suite};
use anyhow::Result;
use std::collections::BTreeMap;

/// Ops listed per case, heaviest first.
const TOP: usize = 20;

type Run = fn(std::vec::IntoIter<String>) -> Result<()>;

/// (case name, suite, suite name, arguments): a full run's cases, or the quick run's one (lavapipe
/// in CI: one small sampling case).
fn cases(quick: bool) -> Vec<(String, Run, &'static str, Vec<String>)> {
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let sampling = |chain: &str, batch: &str| {
        let args = format!("--path graph --backend vulkan --steps 2 --reps 1 --chains {chain} --batch {batch}");
        (format!("sampling {chain} B={batch}"), crate::bench_sampling_graph::run as Run, "sampling", words(&args))
    };
    let decode = |name: &str, model: &str, batch: &str| {
        let args =
            format!("--backend vulkan --model {model} --batch {batch} --threads 8 --prompt 8 --steps 4 --reps 1");
        (format!("decode {name} B={batch}"), crate::bench_runner::run as Run, "runner", words(&args))
    };
    if quick {
        let args = "--path graph --backend vulkan --vocab 32000 --steps 1 --reps 1 --batch 1";
        return vec![("sampling B=1 (quick)".into(), crate::bench_sampling_graph::run, "sampling", words(args))];
    }
    vec![
        sampling("greedy", "1"),
        sampling("default", "1"),
        sampling("top_p", "1"),
        sampling("dist", "1"),
        sampling("default", "64"),
        ("fused B=16".into(), crate::bench_fused::run, "fused", words("--backend vulkan --batch 16 --reps 1")),
        decode("demo", "random:demo", "1"),
        decode("smollm2", "random:smollm2-135m", "1"),
        decode("smollm2", "random:smollm2-135m", "16"),
    ]
}

/// The op of a node label `"<node> <op>"`.
fn op_of(label: &str) -> &str {
    label.split_once(' ').map_or(label, |(_, op)| op)
}

/// Per op: (calls, total µs, median µs), heaviest first.
fn summarize(times: &[(String, f64)]) -> Vec<(String, usize, f64, f64)> {
    let mut by_op: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (label, us) in times {
        by_op.entry(op_of(label)).or_default().push(*us);
    }
    let mut rows: Vec<_> = by_op
        .into_iter()
        .map(|(op, us)| {
            let total = us.iter().sum::<f64>();
            let n = us.len();
            (op.to_string(), n, total, crate::bench::median(us))
        })
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

pub(super) fn run(cx: &Ctx) -> Result<()> {
    drop(require_vulkan()?);
    vulkan::profile::enable();
    let scratch = std::env::temp_dir().join(format!("gpu-report-profile-{}.json", std::process::id()));
    let mut out = Vec::new();
    for (name, run, suite_name, args) in cases(cx.quick) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        drop(vulkan::profile::take());
        suite(run, suite_name, &args, &scratch)?;
        let times = vulkan::profile::take();
        let total: f64 = times.iter().map(|t| t.1).sum();
        let rows = summarize(&times);
        println!("\nprofile: {name}: {} node times, {total:.0} µs in all", times.len());
        println!("{:>12} {:>7} {:>11} {:>10}  op", "share", "calls", "total µs", "median µs");
        for (op, n, t, m) in rows.iter().take(TOP) {
            println!("{:>11.1}% {n:>7} {t:>11.1} {m:>10.2}  {op}", 100.0 * t / total.max(1e-9));
        }
        out.push(serde_json::json!({
            "case": name, "node_times": times.len(), "total_us": total,
            "ops": rows.iter().take(TOP).map(|(op, n, t, m)| serde_json::json!({
                "op": op, "calls": n, "total_us": t, "median_us": m, "share": t / total.max(1e-9),
            })).collect::<Vec<_>>(),
        }));
    }
    let _ = std::fs::remove_file(&scratch);
    let doc = serde_json::json!({ "cases": out });
    std::fs::write(&cx.out, serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}
