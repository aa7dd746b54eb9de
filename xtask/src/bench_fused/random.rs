//! The `random_sample` table of `cargo xtask bench fused`: the op on B rows of V f32 logits with
//! mixed per-row parameters, against three same-run baselines on the same logits: a read pass
//! (`max_rows`), an exponential pass (`exp`) and the row sort the spec's algorithm starts with
//! (`argsort`, descending). Medians of `--reps` runs of `Scheduler::compute`.
//!
//! Rows cycle through (random, topp, topk, temperature): top-K 50, top-P 0.95 alone (the crossing
//! deep in the row), top-K 1000 with top-P 0.8 and temperature 0.8, neither (topp 1, topk 0,
//! temperature 1.2): every row takes the full path (the argmax path is a read pass).

use super::{scheduler, time};
use anyhow::{Result, bail};
use graph::fused::IndexDType;
use graph::{DType, Graph, SortOrder};

/// Per-row parameters: (random, topp, topk, temperature).
fn params(b: usize) -> Vec<(f32, f32, i32, f32)> {
    let cycle = [(0.37, 0.9, 50, 1.0), (0.81, 0.95, 0, 1.0), (0.5, 0.8, 1000, 0.8), (0.93, 1.0, 0, 1.2)];
    (0..b).map(|r| cycle[r % cycle.len()]).collect()
}

/// The table of one backend.
pub(super) fn bench(backend: &str, v: usize, batch: &[usize], reps: usize) -> Result<Vec<serde_json::Value>> {
    let mut table = Vec::new();
    println!("random_sample (f32 rows), {backend} backend, V = {v}, median of {reps} runs");
    println!(
        "{:>4} {:>12} {:>12} {:>12} {:>12} {:>9} {:>9} {:>9}",
        "B", "fused ms", "read ms", "exp ms", "argsort ms", "fus/read", "fus/exp", "sampled"
    );
    for &b in batch {
        let xs: Vec<f32> = (0..v * b).map(|i| graph::philox::uniform(12, 0, i as u64) * 16.0 - 8.0).collect();
        let ps = params(b);
        let mut g = Graph::new();
        let x = g.input("logits", DType::F32, &[v, b])?;
        let p = g.input("params", DType::F32, &[3, b])?;
        let k = g.input("topk", DType::I32, &[1, b])?;
        let y = g.random_sample(x, p, k, IndexDType::I32, false)?;
        g.set_output(y);
        let (mut s, _) = scheduler(backend)?;
        s.plan(&g)?;
        s.set_input_f32(x, &xs)?;
        s.set_input_f32(p, &ps.iter().flat_map(|t| [t.0, t.1, t.3]).collect::<Vec<_>>())?;
        s.set_input_i32(k, &ps.iter().map(|t| t.2).collect::<Vec<_>>())?;
        let fused = time(&mut s, reps)?;
        let idx = s.read_i32(y)?;
        if idx.iter().any(|&i| i < 0 || i as usize >= v) {
            bail!("random_sample rejected a benchmark row: {idx:?}");
        }
        let base = |which: u8| -> Result<f64> {
            let mut g = Graph::new();
            let x = g.input("logits", DType::F32, &[v, b])?;
            let y = match which {
                0 => g.max_rows(x)?,
                1 => g.unary(graph::UnaryOp::Exp, x)?,
                _ => g.argsort(x, SortOrder::Desc)?,
            };
            g.set_output(y);
            let (mut s, _) = scheduler(backend)?;
            s.plan(&g)?;
            s.set_input_f32(x, &xs)?;
            time(&mut s, reps)
        };
        let (read, exp, sort) = (base(0)?, base(1)?, base(2)?);
        println!(
            "{b:>4} {:>12.3} {:>12.3} {:>12.3} {:>12.3} {:>8.1}x {:>8.2}x {:>5}/{b}",
            fused * 1e3,
            read * 1e3,
            exp * 1e3,
            sort * 1e3,
            fused / read,
            fused / exp,
            idx.len(),
        );
        table.push(serde_json::json!({
            "batch": b, "vocab": v, "fused_s": fused, "read_s": read, "exp_s": exp, "argsort_s": sort,
            "fused_over_read": fused / read, "fused_over_exp": fused / exp, "indices": idx,
        }));
    }
    Ok(table)
}
