//! `cargo xtask bench ops --backend vulkan`: single ops on the Vulkan backend, each beside a
//! device-to-device copy of its input measured in the same run (the memory floor: a `cont` of the
//! same tensor, one read and one write, through the same submit-and-wait path).
//!
//! Cases: argmax, soft_max, top_k(40) and cumsum on [151936, 1] and [151936, 64], and mul_mat of a
//! 4096x4096 matrix (f32 and f16 weights) by [4096, 1] (its floor copies the weights). Each timing
//! is the median of `--reps` measurements of compute + synchronize, each averaging as many calls as
//! fit in `--ms` milliseconds; "x floor" is the op's time over its floor's. On lavapipe (a CPU
//! implementation of Vulkan) the numbers show scaling only. Writes `target/bench/ops_vulkan.json`.
#![allow(clippy::print_stdout)]

use anyhow::{Context, Result, bail};
use clap::Parser;
use graph::{DType, Graph, NodeId};
use sched::{Backend, Bindings, MemoryKind, SplitTask, TensorLoc};
use std::time::Instant;
use vulkan::VulkanBackend;

#[derive(Parser, Debug)]
#[command(about = "Benchmark single ops on the Vulkan backend beside a copy of their input")]
struct Args {
    /// Backend (this suite is `vulkan`).
    #[arg(long, default_value = "vulkan")]
    backend: String,
    /// Measurements per timing (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Milliseconds per measurement (calls are repeated until it is reached).
    #[arg(long, default_value_t = 30.0)]
    ms: f64,
    /// Only cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Output JSON file (default: target/bench/ops_vulkan.json in the workspace).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// One graph bound on the Vulkan backend, every storage in its own device buffer.
struct Bound {
    g: Graph,
    bindings: Bindings,
    nodes: Vec<NodeId>,
    buffers: Vec<sched::BufferId>,
}

impl Bound {
    fn new(be: &mut VulkanBackend, g: Graph, inputs: &[(NodeId, Vec<u8>)]) -> Result<Bound> {
        let mut bindings = Bindings::new(g.len());
        let mut buffers = Vec::new();
        for (id, n) in g.nodes() {
            let s = g.storage_of(id);
            if s == id {
                let b = be.alloc(n.layout.extent(n.dtype).max(4), MemoryKind::Device)?;
                buffers.push(b);
                bindings.bind(id, TensorLoc { buffer: b, offset: 0 });
            } else {
                bindings.bind(id, bindings.loc(s));
            }
        }
        for (id, bytes) in inputs {
            let loc = bindings.loc(*id);
            be.upload(loc.buffer, loc.offset, bytes)?;
        }
        let nodes = g.nodes().filter(|(_, n)| !matches!(n.op, graph::Op::Input)).map(|(id, _)| id).collect();
        Ok(Bound { g, bindings, nodes, buffers })
    }

    fn run(&self, be: &mut VulkanBackend) -> Result<()> {
        be.compute(SplitTask { graph: &self.g, nodes: &self.nodes, bindings: &self.bindings })?;
        be.synchronize()?;
        Ok(())
    }

    fn free(self, be: &mut VulkanBackend) -> Result<()> {
        for b in self.buffers {
            be.free(b)?;
        }
        Ok(())
    }
}

/// A graph and its input bytes.
type Built = (Graph, Vec<(NodeId, Vec<u8>)>);

/// Median seconds per call.
fn time(args: &Args, be: &mut VulkanBackend, b: &Bound) -> Result<f64> {
    b.run(be)?;
    let mut v = Vec::new();
    for _ in 0..args.reps.max(1) {
        let t = Instant::now();
        let mut n = 0u32;
        while n == 0 || t.elapsed().as_secs_f64() * 1e3 < args.ms {
            b.run(be)?;
            n += 1;
        }
        v.push(t.elapsed().as_secs_f64() / f64::from(n));
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

fn data(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64).flat_map(|i| (graph::philox::uniform(seed, 0, i) * 8.0 - 4.0).to_le_bytes()).collect()
}

/// Times `op` applied to an input of `dtype` `shape`, and a `cont` copy of `copy_of` (the input
/// itself, or for mul_mat the weights).
fn case(
    args: &Args,
    be: &mut VulkanBackend,
    name: String,
    inputs: &[(&str, DType, Vec<usize>)],
    build: impl Fn(&mut Graph, &[NodeId]) -> Result<NodeId>,
) -> Result<(String, f64, f64)> {
    let mk = |copy: bool| -> Result<Built> {
        let mut g = Graph::new();
        let mut ids = Vec::new();
        let mut vals = Vec::new();
        for (i, (nm, dt, shape)) in inputs.iter().enumerate() {
            let id = g.input(nm, *dt, shape)?;
            let n: usize = shape.iter().product();
            let bytes = data(n, i as u64 + 1);
            let bytes = match dt {
                DType::F32 => bytes,
                DType::F16 => bytes
                    .chunks_exact(4)
                    .flat_map(|c| graph::f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes())
                    .collect(),
                other => bail!("bench inputs are f32 or f16, not {other}"),
            };
            ids.push(id);
            vals.push((id, bytes));
        }
        let out = if copy { g.cont(ids[0])? } else { build(&mut g, &ids)? };
        g.set_output(out);
        Ok((g, vals))
    };
    let (g, vals) = mk(false)?;
    let op = Bound::new(be, g, &vals)?;
    let t_op = time(args, be, &op).with_context(|| format!("running {name}"))?;
    op.free(be)?;
    let (g, vals) = mk(true)?;
    let floor = Bound::new(be, g, &vals)?;
    let t_floor = time(args, be, &floor)?;
    floor.free(be)?;
    Ok((name, t_op, t_floor))
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::parse_from(args);
    if args.backend != "vulkan" {
        bail!("bench_vulkan runs the vulkan backend only (got --backend {})", args.backend);
    }
    let mut be = VulkanBackend::new().context("opening the Vulkan backend")?;
    println!("device: {} (subgroups: {})", be.device_name(), be.uses_subgroups());
    let wanted = |name: &str| args.filter.as_deref().is_none_or(|f| name.contains(f));
    const VOCAB: usize = 151_936;
    let mut rows = Vec::new();
    for op in ["argmax", "soft_max", "top_k(40)", "cumsum"] {
        for batch in [1usize, 64] {
            let name = format!("{op} [{VOCAB}, {batch}]");
            if !wanted(&name) {
                continue;
            }
            let build = |g: &mut Graph, ids: &[NodeId]| -> Result<NodeId> {
                Ok(match op {
                    "argmax" => g.argmax(ids[0])?,
                    "soft_max" => g.soft_max(ids[0], None, 1.0)?,
                    "top_k(40)" => g.top_k(ids[0], 40)?,
                    _ => g.cumsum(ids[0])?,
                })
            };
            rows.push(case(&args, &mut be, name, &[("x", DType::F32, vec![VOCAB, batch])], build)?);
        }
    }
    for wd in [DType::F32, DType::F16] {
        let name = format!("mul_mat {wd} [4096, 4096] x [4096, 1]");
        if !wanted(&name) {
            continue;
        }
        let inputs = [("w", wd, vec![4096, 4096]), ("x", DType::F32, vec![4096, 1])];
        rows.push(case(&args, &mut be, name, &inputs, |g, ids| Ok(g.mul_mat(ids[0], ids[1])?))?);
    }
    println!("{:<40} {:>12} {:>12} {:>9}", "case", "op (us)", "copy (us)", "x floor");
    let mut json = Vec::new();
    for (name, t, f) in &rows {
        println!("{name:<40} {:>12.1} {:>12.1} {:>9.2}", t * 1e6, f * 1e6, t / f);
        json.push(serde_json::json!({"case": name, "op_s": t, "copy_s": f, "ratio": t / f}));
    }
    let doc = serde_json::json!({"device": be.device_name(), "cases": json});
    crate::bench::write_report(args.out.as_deref(), "ops_vulkan", &doc)?;
    Ok(())
}
