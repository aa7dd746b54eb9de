//! `cargo xtask bench ops`: single ops on our CPU backend next to ggml's CPU backend
//! (`ggml-sys-bleedingedge`, llama.cpp b2757) on the same inputs, and next to a plain max-reduction
//! pass over the same data (the memory floor), all measured in the same run.
//!
//! Cases: mul_mat of a 4096x4096 matrix (f32 and f16 weights) by 4096x1 and 4096x32 on all threads;
//! quantized mat-vecs with SmolLM2-135M's shapes (the q8_0 [576, 49152] LM head, q4_1 and q4_0
//! [576, 1536] feed-forward weights, quantized by ggml's quantizer for both sides) on one and all
//! threads, and the q4 weights by 4 and 16 columns (prefill batches); their floor pass reads the
//! weights' quantized bytes;
//! soft_max, argmax, cumsum and top_k(40) on [151936, 1] with one thread and on [151936, 64] with all
//! threads; top_k(40) also on [8192, 1] (ggml's argsort in this version is quadratic, so that is
//! where it is compared). ggml has no cumsum: that column is empty. Two reference rows (`--filter
//! reference`) bound the row ops: the shared exponential's pass alone and a copy of the row. Each timing is the median of
//! `--reps` measurements, each averaging as many calls as fit in `--ms` milliseconds. "passes" is a
//! timing divided by the floor of the same case. `--backend vulkan` hands the same arguments to
//! `bench_vulkan` (the Vulkan backend's suite). Writes `target/bench/ops.json` and prints a table.
#![allow(clippy::print_stdout)]

use anyhow::{Result, bail};
use clap::Parser;
use cpu::CpuBackend;
use ggml_sys_bleedingedge as sys;
use graph::{DType, Graph, NodeId, bf16, f16};
use rayon::prelude::*;
use sched::{Backend, Bindings, MemoryKind, SplitTask, TensorLoc};
use std::hint::black_box;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(about = "Benchmark single ops: our CPU backend vs ggml's CPU vs a max-reduction pass")]
struct Args {
    /// Backend to measure: cpu (this suite) or vulkan.
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// Measurements per timing (the median is reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Milliseconds per measurement (calls are repeated until it is reached).
    #[arg(long, default_value_t = 30.0)]
    ms: f64,
    /// Only cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Output JSON file (default: target/bench/ops.json in the workspace).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// Median seconds per call of `f`.
fn time(args: &Args, mut f: impl FnMut()) -> f64 {
    f();
    let mut v: Vec<f64> = (0..args.reps)
        .map(|_| {
            let t = Instant::now();
            let mut n = 0u32;
            while n == 0 || t.elapsed().as_secs_f64() * 1e3 < args.ms {
                f();
                n += 1;
            }
            t.elapsed().as_secs_f64() / f64::from(n)
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Deterministic inputs from the Philox generator, in `[-4, 4)`.
fn data(n: usize, seed: u64) -> Vec<f32> {
    (0..n).into_par_iter().map(|i| graph::philox::uniform(seed, 0, i as u64) * 8.0 - 4.0).collect()
}

fn bytes_of(dt: DType, v: &[f32]) -> Vec<u8> {
    match dt {
        DType::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::F16 => v.iter().flat_map(|&x| f16::from_f32(x).to_le_bytes()).collect(),
        DType::BF16 => v.iter().flat_map(|&x| bf16::from_f32(x).to_le_bytes()).collect(),
        DType::I32 => v.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
        _ => unreachable!("quantized weights are uploaded as ggml's blocks"),
    }
}

/// ggml's type for a quantized dtype.
fn ggml_type(dt: DType) -> sys::ggml_type {
    match dt {
        DType::Q8_0 => sys::ggml_type_GGML_TYPE_Q8_0,
        DType::Q4_0 => sys::ggml_type_GGML_TYPE_Q4_0,
        DType::Q4_1 => sys::ggml_type_GGML_TYPE_Q4_1,
        other => unreachable!("{other} is not quantized"),
    }
}

/// `v` (rows of `k`) quantized to `dt` by ggml's quantizer.
fn quantize(dt: DType, v: &[f32], k: usize) -> Vec<u8> {
    let rows = v.len() / k;
    let mut out = vec![0u8; dt.row_bytes(k) * rows];
    // SAFETY: plain FFI; `v` holds `rows * k` floats and `out` `rows` rows of `dt`.
    let n = unsafe {
        sys::ggml_quantize_chunk(
            ggml_type(dt),
            v.as_ptr(),
            out.as_mut_ptr().cast(),
            0,
            rows as i64,
            k as i64,
            std::ptr::null(),
        )
    };
    assert_eq!(n, out.len());
    out
}

/// One graph bound on our CPU backend: every storage in its own buffer.
struct Ours {
    be: CpuBackend,
    g: Graph,
    bindings: Bindings,
    nodes: Vec<NodeId>,
}

impl Ours {
    fn new(g: Graph, threads: usize, inputs: &[(NodeId, &[f32])]) -> Result<Ours> {
        let mut be = CpuBackend::with_threads(threads);
        let mut bindings = Bindings::new(g.len());
        for (id, n) in g.nodes() {
            let s = g.storage_of(id);
            if s == id {
                let b = be.alloc(n.layout.extent(n.dtype), MemoryKind::Host)?;
                bindings.bind(id, TensorLoc { buffer: b, offset: 0 });
            } else {
                bindings.bind(id, bindings.loc(s));
            }
        }
        for &(id, v) in inputs {
            let loc = bindings.loc(id);
            be.upload(loc.buffer, loc.offset, &bytes_of(g.node(id).dtype, v))?;
        }
        let nodes = g.nodes().filter(|(_, n)| !matches!(n.op, graph::Op::Input)).map(|(id, _)| id).collect();
        Ok(Ours { be, g, bindings, nodes })
    }

    /// Writes raw bytes (quantized blocks) into `id`'s storage.
    fn upload_bytes(&mut self, id: NodeId, bytes: &[u8]) -> Result<()> {
        let loc = self.bindings.loc(id);
        self.be.upload(loc.buffer, loc.offset, bytes)?;
        Ok(())
    }

    fn run(&mut self) {
        let task = SplitTask { graph: &self.g, nodes: &self.nodes, bindings: &self.bindings };
        self.be.compute(task).expect("compute");
    }
}

/// One ggml graph with its compute plan and work buffer.
struct Ggml {
    ctx: *mut sys::ggml_context,
    gf: *mut sys::ggml_cgraph,
    plan: sys::ggml_cplan,
    _work: Vec<u8>,
}

impl Drop for Ggml {
    fn drop(&mut self) {
        // SAFETY: created by `ggml_init`, freed once.
        unsafe { sys::ggml_free(self.ctx) }
    }
}

/// Which ggml op to build over the input tensor(s).
#[derive(Clone, Copy, Debug)]
enum GgmlOp {
    SoftMax,
    Argmax,
    TopK(usize),
    MulMat,
    /// mul_mat with quantized weights: ggml's type and the blocks.
    MulMatQ(sys::ggml_type),
}

impl Ggml {
    /// `x` (f32 `[n0, n1]`) and, for mul_mat, weights `w` (`[k, m]`, f32 or f16).
    fn new(op: GgmlOp, x: (&[f32], [usize; 2]), w: Option<(&[f32], [usize; 2], bool)>, threads: usize) -> Ggml {
        Ggml::with_quantized(op, x, w, None, threads)
    }

    /// [`Ggml::new`], or for [`GgmlOp::MulMatQ`] with quantized weights `qw` (blocks, `[k, m]`).
    fn with_quantized(
        op: GgmlOp,
        x: (&[f32], [usize; 2]),
        w: Option<(&[f32], [usize; 2], bool)>,
        qw: Option<(&[u8], [usize; 2])>,
        threads: usize,
    ) -> Ggml {
        let data_bytes = x.0.len() * 4 + w.map_or(0, |w| w.0.len() * 4) + qw.map_or(0, |w| w.0.len());
        let params = sys::ggml_init_params {
            mem_size: data_bytes * 2 + (64 << 20),
            mem_buffer: std::ptr::null_mut(),
            no_alloc: false,
        };
        // SAFETY: plain ggml FFI; every tensor lives in this context until `ggml_free`, and the data
        // slices written match the tensors' sizes and types.
        unsafe {
            let ctx = sys::ggml_init(params);
            assert!(!ctx.is_null());
            let ne = [x.1[0] as i64, x.1[1] as i64];
            let xt = sys::ggml_new_tensor(ctx, sys::ggml_type_GGML_TYPE_F32, 2, ne.as_ptr());
            std::slice::from_raw_parts_mut((*xt).data as *mut f32, x.0.len()).copy_from_slice(x.0);
            let out = match op {
                GgmlOp::SoftMax => {
                    sys::ggml_soft_max_ext(ctx, xt, std::ptr::null_mut(), std::ptr::null_mut(), 1.0, 0.0)
                }
                GgmlOp::Argmax => sys::ggml_argmax(ctx, xt),
                GgmlOp::TopK(k) => sys::ggml_top_k(ctx, xt, k as i32),
                GgmlOp::MulMat => {
                    let (wv, wne, half) = w.expect("weights");
                    let ne = [wne[0] as i64, wne[1] as i64];
                    let ty = if half { sys::ggml_type_GGML_TYPE_F16 } else { sys::ggml_type_GGML_TYPE_F32 };
                    let wt = sys::ggml_new_tensor(ctx, ty, 2, ne.as_ptr());
                    if half {
                        let d = std::slice::from_raw_parts_mut((*wt).data as *mut f16, wv.len());
                        d.iter_mut().zip(wv).for_each(|(d, &x)| *d = f16::from_f32(x));
                    } else {
                        std::slice::from_raw_parts_mut((*wt).data as *mut f32, wv.len()).copy_from_slice(wv);
                    }
                    sys::ggml_mul_mat(ctx, wt, xt)
                }
                GgmlOp::MulMatQ(ty) => {
                    let (blocks, wne) = qw.expect("quantized weights");
                    let ne = [wne[0] as i64, wne[1] as i64];
                    let wt = sys::ggml_new_tensor(ctx, ty, 2, ne.as_ptr());
                    assert_eq!(sys::ggml_nbytes(wt), blocks.len());
                    std::slice::from_raw_parts_mut((*wt).data as *mut u8, blocks.len()).copy_from_slice(blocks);
                    sys::ggml_mul_mat(ctx, wt, xt)
                }
            };
            let gf = sys::ggml_new_graph(ctx);
            sys::ggml_build_forward_expand(gf, out);
            let mut plan = sys::ggml_graph_plan(gf, threads as i32);
            let mut work = vec![0u8; plan.work_size.max(1)];
            plan.work_data = work.as_mut_ptr();
            Ggml { ctx, gf, plan, _work: work }
        }
    }

    fn run(&mut self) {
        // SAFETY: graph, plan and work buffer were built together in `new` and are still alive.
        let status = unsafe { sys::ggml_graph_compute(self.gf, &mut self.plan) };
        assert_eq!(status, sys::ggml_status_GGML_STATUS_SUCCESS);
    }
}

/// The memory floor: a max-reduction pass over `rows` rows of `x` on `threads` threads.
fn floor(args: &Args, x: &[f32], row: usize, threads: usize) -> Result<f64> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    Ok(pool.install(|| {
        time(args, || {
            let m = x.par_chunks(row).map(cpu::math::max_f32).reduce(|| f32::NEG_INFINITY, f32::max);
            black_box(m);
        })
    }))
}

/// One table row.
struct Row {
    case: String,
    threads: usize,
    ours: f64,
    ggml: Option<f64>,
    floor: f64,
}

fn row_op(args: &Args, name: &str, n: usize, rows: usize, threads: usize, ggml_n: Option<usize>) -> Result<Row> {
    let x = data(n * rows, 7);
    let mut g = Graph::new();
    let xi = g.input("x", DType::F32, &[n, rows])?;
    let (out, gop) = match name {
        "soft_max" => (g.soft_max(xi, None, 1.0)?, Some(GgmlOp::SoftMax)),
        "argmax" => (g.argmax(xi)?, Some(GgmlOp::Argmax)),
        "cumsum" => (g.cumsum(xi)?, None),
        "top_k(40)" => (g.top_k(xi, 40)?, Some(GgmlOp::TopK(40))),
        other => bail!("unknown op {other}"),
    };
    g.set_output(out);
    let mut ours = Ours::new(g, threads, &[(xi, &x)])?;
    let t_ours = time(args, || ours.run());
    let t_ggml = match (gop, ggml_n) {
        (Some(op), None) => {
            let mut gg = Ggml::new(op, (&x, [n, rows]), None, threads);
            Some(time(args, || gg.run()))
        }
        _ => None,
    };
    let t_floor = floor(args, &x, n, threads)?;
    Ok(Row { case: format!("{name} [{n}, {rows}]"), threads, ours: t_ours, ggml: t_ggml, floor: t_floor })
}

/// Reference rows that bound what the row ops can reach, on one thread over the same kind of row:
/// the shared exponential alone (`kernels::row::sum_exp2`: the part of soft_max no kernel shape
/// avoids) and a copy (one read and one write: cumsum's least traffic).
fn reference_rows(args: &Args, n: usize) -> Result<Vec<Row>> {
    let x = data(n, 7);
    let mut out = vec![0.0f32; n];
    let t_floor = floor(args, &x, n, 1)?;
    let (a, b) = kernels::exp::exp_affine(4.0, 1.0);
    let t_exp = time(args, || {
        black_box(kernels::row::sum_exp2(black_box(&x), a, b));
    });
    let t_copy = time(args, || {
        out.copy_from_slice(black_box(&x));
        black_box(&mut out);
    });
    Ok(vec![
        Row { case: format!("reference: exp pass [{n}, 1]"), threads: 1, ours: t_exp, ggml: None, floor: t_floor },
        Row { case: format!("reference: copy [{n}, 1]"), threads: 1, ours: t_copy, ggml: None, floor: t_floor },
    ])
}

fn mul_mat(args: &Args, k: usize, m: usize, n: usize, half: bool, threads: usize) -> Result<Row> {
    let w = data(k * m, 11);
    let x = data(k * n, 13);
    let mut g = Graph::new();
    let wi = g.param("w", if half { DType::F16 } else { DType::F32 }, &[k, m])?;
    let xi = g.input("x", DType::F32, &[k, n])?;
    let out = g.mul_mat(wi, xi)?;
    g.set_output(out);
    let mut ours = Ours::new(g, threads, &[(wi, &w), (xi, &x)])?;
    let t_ours = time(args, || ours.run());
    let mut gg = Ggml::new(GgmlOp::MulMat, (&x, [k, n]), Some((&w, [k, m], half)), threads);
    let t_ggml = time(args, || gg.run());
    // The floor reads the weights once, as the product must (in their storage size).
    let floor_data: Vec<f32> = if half { w[..w.len() / 2].to_vec() } else { w };
    let t_floor = floor(args, &floor_data, k, threads)?;
    let dt = if half { "f16" } else { "f32" };
    Ok(Row {
        case: format!("mul_mat {dt} [{k}, {m}] x [{k}, {n}]"),
        threads,
        ours: t_ours,
        ggml: Some(t_ggml),
        floor: t_floor,
    })
}

/// A quantized mul_mat `[k, m] x [k, n]` (a mat-vec for `n = 1`, a prefill batch above): both
/// sides multiply the same ggml-quantized blocks; the floor reads the blocks once.
fn mul_mat_quant(args: &Args, dt: DType, k: usize, m: usize, n: usize, threads: usize) -> Result<Row> {
    let w = data(k * m, 17);
    let x = data(k * n, 19);
    let blocks = quantize(dt, &w, k);
    let mut g = Graph::new();
    let wi = g.param("w", dt, &[k, m])?;
    let xi = g.input("x", DType::F32, &[k, n])?;
    let out = g.mul_mat(wi, xi)?;
    g.set_output(out);
    let mut ours = Ours::new(g, threads, &[(xi, &x)])?;
    ours.upload_bytes(wi, &blocks)?;
    let t_ours = time(args, || ours.run());
    let mut gg =
        Ggml::with_quantized(GgmlOp::MulMatQ(ggml_type(dt)), (&x, [k, n]), None, Some((&blocks, [k, m])), threads);
    let t_ggml = time(args, || gg.run());
    let floor_data: Vec<f32> = blocks.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let t_floor = floor(args, &floor_data, k, threads)?;
    Ok(Row {
        case: format!("mul_mat {dt} [{k}, {m}] x [{k}, {n}]"),
        threads,
        ours: t_ours,
        ggml: Some(t_ggml),
        floor: t_floor,
    })
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let argv: Vec<String> = args.collect();
    let args = Args::parse_from(argv.iter().cloned());
    match args.backend.as_str() {
        "cpu" => {}
        "vulkan" => return crate::bench_vulkan::run(argv.into_iter()),
        other => bail!("unknown backend `{other}` (cpu or vulkan)"),
    }
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wanted = |name: &str| args.filter.as_deref().is_none_or(|f| name.contains(f));
    let mut rows = Vec::new();
    const VOCAB: usize = 151_936;
    for op in ["soft_max", "argmax", "cumsum", "top_k(40)"] {
        if !wanted(op) {
            continue;
        }
        // top_k: ggml's quadratic argsort is compared on a short row only.
        let ggml_skip = (op == "top_k(40)").then_some(0);
        rows.push(row_op(&args, op, VOCAB, 1, 1, ggml_skip)?);
        rows.push(row_op(&args, op, VOCAB, 64, all, ggml_skip)?);
        if op == "top_k(40)" {
            rows.push(row_op(&args, op, 8192, 1, 1, None)?);
        }
    }
    if wanted("reference") {
        rows.extend(reference_rows(&args, VOCAB)?);
    }
    if wanted("mul_mat") {
        for half in [false, true] {
            for n in [1, 32] {
                rows.push(mul_mat(&args, 4096, 4096, n, half, all)?);
            }
        }
    }
    if wanted("mul_mat quant") {
        for (dt, m) in [(DType::Q8_0, 49152), (DType::Q4_1, 1536), (DType::Q4_0, 1536)] {
            for threads in [1, all] {
                rows.push(mul_mat_quant(&args, dt, 576, m, 1, threads)?);
            }
        }
        // prefill shapes: a batch of 4 and of 16 columns through the feed-forward weights
        for dt in [DType::Q4_1, DType::Q4_0] {
            for n in [4, 16] {
                for threads in [1, all] {
                    rows.push(mul_mat_quant(&args, dt, 576, 1536, n, threads)?);
                }
            }
        }
    }

    println!(
        "{:<36} {:>7} {:>11} {:>11} {:>11} {:>8} {:>8} {:>9}",
        "case", "threads", "ours us", "ggml us", "floor us", "ours/fl", "ggml/fl", "ours/ggml"
    );
    for r in &rows {
        let g = r.ggml.map_or("-".to_string(), |t| format!("{:.1}", t * 1e6));
        let gf = r.ggml.map_or("-".to_string(), |t| format!("{:.2}", t / r.floor));
        let og = r.ggml.map_or("-".to_string(), |t| format!("{:.2}", r.ours / t));
        println!(
            "{:<36} {:>7} {:>11.1} {:>11} {:>11.1} {:>8.2} {:>8} {:>9}",
            r.case,
            r.threads,
            r.ours * 1e6,
            g,
            r.floor * 1e6,
            r.ours / r.floor,
            gf,
            og
        );
    }
    let results: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "case": r.case, "threads": r.threads, "ours_us": r.ours * 1e6,
                "ggml_us": r.ggml.map(|t| t * 1e6), "floor_us": r.floor * 1e6,
                "ours_passes": r.ours / r.floor, "ggml_passes": r.ggml.map(|t| t / r.floor),
            })
        })
        .collect();
    let doc = serde_json::json!({ "suite": "ops", "reps": args.reps, "ms": args.ms, "results": results });
    crate::bench::write_report(args.out.as_deref(), "ops", &doc)?;
    Ok(())
}
