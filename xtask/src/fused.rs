//! `cargo xtask fused`: the fused sampling ops on `.npy` files, as `shared/contracts/fused-cli.md`
//! specifies (flags, defaults, dtypes, output, errors).
//!
//! ```text
//! cargo xtask fused top-k-top-p --logits L.npy --top-k K.npy --top-p P.npy [--min-p M.npy]
//!       [--q Q.npy] [--post-sample none|qsample|multinomial] [--input-is-logits true|false]
//!       [--eps E] [--ks-max N] [--top-k-guess N] [--need-logits OUT.npy] [--backend cpu|vulkan]
//! cargo xtask fused random-sample --logits L.npy --random R --topp P --topk K --temperature T
//!       [--index-dtype i8|i16|i32|i64|u8|u16|u32|u64] [--backend cpu|vulkan]
//! ```
//!
//! Each builds a graph of one `top_k_top_p_sample` / `random_sample` node (two with
//! `--need-logits`), runs it through `sched` on `--backend` (`vulkan`: the Vulkan backend first,
//! the CPU for what it cannot run) and prints one JSON line. Inputs are checked here first, so
//! every error of the contract is a message, never a -1 from the op. With `GGS_FUSED_PLAN=FILE`
//! the plan (each node's backend) is also written to FILE.

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use graph::fused::{FusedOutput, IndexDType, PostSample, TopKTopP};
use graph::{DType, Graph};
use npy::{Data, Npy};
use std::path::{Path, PathBuf};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    Cpu,
    Vulkan,
}

#[derive(Parser, Debug)]
#[command(about = "The fused sampling ops on .npy files (see docs/FUSED.md)")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Ascend's npu_top_k_top_p_sample.
    TopKTopP(TkpArgs),
    /// InfiniCore's random_sample.
    RandomSample(RsArgs),
}

#[derive(clap::Args, Debug)]
struct TkpArgs {
    /// Logits [B, V]: f32, f16 or bf16 (void `V2`).
    #[arg(long)]
    logits: PathBuf,
    /// top_k: i32 [B] or [B, 1].
    #[arg(long)]
    top_k: PathBuf,
    /// top_p: the logits' dtype, [B] or [B, 1].
    #[arg(long)]
    top_p: PathBuf,
    /// min_ps: the logits' dtype, [B] or [B, 1] (absent: min-P off).
    #[arg(long)]
    min_p: Option<PathBuf>,
    /// q: qsample f32 [B, V]; multinomial i64 [R, 2] (seed, offset).
    #[arg(long)]
    q: Option<PathBuf>,
    /// none, qsample or multinomial (case-insensitive).
    #[arg(long, default_value = "qsample", value_parser = parse_post)]
    post_sample: PostSample,
    /// true: logits (softmax); false: probabilities as stored.
    #[arg(long, default_value = "true", value_parser = parse_bool, action = clap::ArgAction::Set)]
    input_is_logits: bool,
    /// Added to q in qSample's division.
    #[arg(long, default_value = "1e-8", allow_negative_numbers = true)]
    eps: f32,
    /// Upper bound of a valid top_k (clamped to 1024).
    #[arg(long, default_value = "1024", allow_negative_numbers = true)]
    ks_max: i64,
    /// Speed hint of top-P (never changes a result).
    #[arg(long, default_value = "32", allow_negative_numbers = true)]
    top_k_guess: i64,
    /// Writes the filtered logits, f32 [B, V], here.
    #[arg(long)]
    need_logits: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
}

#[derive(clap::Args, Debug)]
struct RsArgs {
    /// Logits [n]: f16, bf16, f32 or f64.
    #[arg(long)]
    logits: PathBuf,
    /// random_val in [0, 1).
    #[arg(long, allow_negative_numbers = true)]
    random: f32,
    /// topp (>= 0).
    #[arg(long, allow_negative_numbers = true)]
    topp: f32,
    /// topk (<= 0: no limit).
    #[arg(long, allow_negative_numbers = true)]
    topk: i32,
    /// temperature (>= 0).
    #[arg(long, allow_negative_numbers = true)]
    temperature: f32,
    /// The result's integer dtype.
    #[arg(long, default_value = "i32", value_parser = parse_index)]
    index_dtype: IndexDType,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
}

fn parse_post(s: &str) -> Result<PostSample, String> {
    PostSample::parse(s).ok_or_else(|| format!("unknown post_sample `{s}` (expected none, qsample or multinomial)"))
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("`{s}` is not true or false")),
    }
}

fn parse_index(s: &str) -> Result<IndexDType, String> {
    IndexDType::parse(s)
        .ok_or_else(|| format!("unknown index dtype `{s}` (expected i8, i16, i32, i64, u8, u16, u32 or u64)"))
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    let line = match args.cmd {
        Cmd::TopKTopP(a) => top_k_top_p(&a)?,
        Cmd::RandomSample(a) => random_sample(&a)?,
    };
    println!("{line}");
    Ok(())
}

// ---------------------------------------------------------------- .npy files

/// Reads an .npy file of any of the contract's dtypes (`npy::parse`), the flag and path named in
/// an error.
fn read_npy(path: &Path, flag: &str) -> Result<Npy> {
    let bytes = std::fs::read(path).with_context(|| format!("{flag}: cannot read file {}", path.display()))?;
    npy::parse(&bytes).with_context(|| format!("{flag}: {}", path.display()))
}

/// Writes f32 `[rows, cols]` as a version 1.0 .npy file (`'<f4'`, C order).
fn write_npy_f32(path: &Path, rows: usize, cols: usize, vals: &[f32]) -> Result<()> {
    std::fs::write(path, npy::write_f32(rows, cols, vals))
        .with_context(|| format!("--need-logits: cannot write {}", path.display()))
}

/// A per-row file: `[B]` or `[B, 1]`.
fn per_row(npy: &Npy, flag: &str, b: usize) -> Result<()> {
    let ok = matches!(npy.shape.as_slice(), [n] | [n, 1] if *n == b);
    if !ok {
        bail!("{flag}: shape {:?} does not match the batch: expected [{b}] or [{b}, 1] (length B = {b})", npy.shape);
    }
    Ok(())
}

// ---------------------------------------------------------------- top-k-top-p

fn top_k_top_p(a: &TkpArgs) -> Result<String> {
    let logits = read_npy(&a.logits, "--logits")?;
    let [b, v] = match logits.shape.as_slice() {
        [b, v] => [*b, *v],
        other => bail!("--logits: expected a 2-D array [B, V], got shape {other:?}"),
    };
    if b == 0 || v == 0 {
        bail!("--logits: empty array (shape [{b}, {v}]): B and V must be at least 1");
    }
    let dtype = match logits.data {
        Data::F32(_) => DType::F32,
        Data::F16(_) => DType::F16,
        Data::BF16(_) => DType::BF16,
        ref d => bail!("--logits: dtype {} is not supported (expected f32, f16 or bf16)", d.name()),
    };
    let x = logits.data.f32s().expect("a float dtype");
    let top_k = read_npy(&a.top_k, "--top-k")?;
    let Data::I32(ks) = &top_k.data else { bail!("--top-k: top_k must be i32, got {}", top_k.data.name()) };
    per_row(&top_k, "--top-k", b)?;
    let same_dtype = |npy: &Npy, flag: &str| -> Result<Vec<f32>> {
        let ok = matches!(
            (&npy.data, dtype),
            (Data::F32(_), DType::F32) | (Data::F16(_), DType::F16) | (Data::BF16(_), DType::BF16)
        );
        if !ok {
            bail!("{flag}: dtype {} must be the logits' dtype {dtype}", npy.data.name());
        }
        per_row(npy, flag, b)?;
        Ok(npy.data.f32s().expect("a float dtype"))
    };
    let top_p = same_dtype(&read_npy(&a.top_p, "--top-p")?, "--top-p")?;
    let min_p = match &a.min_p {
        Some(p) => same_dtype(&read_npy(p, "--min-p")?, "--min-p")?,
        None => vec![0.0; b],
    };
    // Effective post stage: none without q; `none` ignores q.
    let post = if a.q.is_none() { PostSample::None } else { a.post_sample };
    if a.ks_max <= 0 {
        bail!("--ks-max: ks_max = {} must be positive", a.ks_max);
    }
    if !a.eps.is_finite() {
        bail!("--eps: {} is NaN or infinite", a.eps);
    }
    for (name, vals) in [("top_p", &top_p), ("min_p", &min_p)] {
        if let Some(r) = vals.iter().position(|p| p.is_nan() || *p == f32::INFINITY) {
            bail!("{name}[{r}] = {} is NaN or +inf", vals[r]);
        }
    }
    for r in 0..b {
        let row = &x[r * v..(r + 1) * v];
        if let Some(i) = row.iter().position(|t| t.is_nan() || *t == f32::INFINITY) {
            bail!("--logits: row {r} holds {} at index {i} (NaN and +inf are not allowed)", row[i]);
        }
        if a.input_is_logits {
            if row.iter().all(|&t| t == f32::NEG_INFINITY) {
                bail!("--logits: row {r} is all -inf (no token can be sampled)");
            }
        } else if let Some(i) = row.iter().position(|t| !(0.0..=1.0).contains(t)) {
            bail!(
                "--logits: row {r} holds {} at index {i}: with --input-is-logits false values must lie in [0, 1]",
                row[i]
            );
        }
    }
    let mut g = Graph::new();
    let lx = g.input("logits", dtype, &[v, b])?;
    let lk = g.input("top_k", DType::I32, &[1, b])?;
    let lp = g.input("params", DType::F32, &[2, b])?;
    let mut inputs: Vec<(graph::NodeId, Vec<u8>)> = vec![
        (lx, logits_bytes(&logits.data)),
        (lk, ks.iter().flat_map(|k| k.to_le_bytes()).collect()),
        (lp, (0..b).flat_map(|r| [top_p[r], min_p[r]]).flat_map(f32::to_le_bytes).collect()),
    ];
    let q = match post {
        PostSample::None => None,
        PostSample::QSample => {
            let path = a.q.as_ref().expect("post is none without q");
            let qn = read_npy(path, "--q")?;
            let Data::F32(qv) = &qn.data else {
                bail!("--q: qsample q must be f32 [{b}, {v}], got {} {:?}", qn.data.name(), qn.shape)
            };
            if qn.shape != [b, v] {
                bail!("--q: qsample q must be f32 [{b}, {v}] (the logits' shape), got shape {:?}", qn.shape);
            }
            if let Some(i) = qv.iter().position(|t| t.is_nan() || *t == f32::INFINITY) {
                bail!("--q: element {i} is {} (NaN and +inf are not allowed)", qv[i]);
            }
            let id = g.input("q", DType::F32, &[v, b])?;
            inputs.push((id, qv.iter().flat_map(|t| t.to_le_bytes()).collect()));
            Some(id)
        }
        PostSample::Multinomial => {
            let path = a.q.as_ref().expect("post is none without q");
            let qn = read_npy(path, "--q")?;
            let Data::I64(pairs) = &qn.data else {
                bail!("--q: multinomial q must be i64 [R, 2] (seed, offset), got {} {:?}", qn.data.name(), qn.shape)
            };
            let r = match qn.shape.as_slice() {
                [r, 2] if *r >= 1 => *r,
                other => bail!("--q: multinomial q must be i64 [R, 2] with R >= 1 (seed, offset), got shape {other:?}"),
            };
            let id = g.input("q", DType::I32, &[4, r])?;
            let words: Vec<u8> = pairs
                .chunks_exact(2)
                .flat_map(|p| {
                    let (s, o) = (p[0] as u64, p[1] as u64);
                    [s as u32, (s >> 32) as u32, o as u32, (o >> 32) as u32]
                })
                .flat_map(u32::to_le_bytes)
                .collect();
            inputs.push((id, words));
            Some(id)
        }
    };
    let attrs = TopKTopP {
        eps: a.eps,
        ks_max: u32::try_from(a.ks_max).unwrap_or(u32::MAX),
        top_k_guess: a.top_k_guess.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
        input_is_logits: a.input_is_logits,
        post,
        output: FusedOutput::Index,
    };
    let idx = g.top_k_top_p_sample(lx, lk, lp, q, attrs)?;
    g.set_output(idx);
    let kept = match &a.need_logits {
        Some(_) => {
            let id = g.top_k_top_p_sample(lx, lk, lp, q, TopKTopP { output: FusedOutput::Logits, ..attrs })?;
            g.set_output(id);
            Some(id)
        }
        None => None,
    };
    let mut sched = scheduler(a.backend)?;
    plan(&mut sched, &g)?;
    for (id, bytes) in &inputs {
        sched.set_input(*id, bytes)?;
    }
    sched.compute().context("running the graph")?;
    let picked = sched.read_i32(idx)?;
    if let Some(r) = picked.iter().position(|&i| i < 0) {
        bail!("row {r} could not be sampled");
    }
    if let (Some(path), Some(id)) = (&a.need_logits, kept) {
        write_npy_f32(path, b, v, &sched.read_f32(id)?)?;
    }
    let list: Vec<String> = picked.iter().map(i32::to_string).collect();
    Ok(format!("{{\"select_idx\":[{}]}}", list.join(",")))
}

/// The little-endian bytes of a float array.
fn logits_bytes(d: &Data) -> Vec<u8> {
    match d {
        Data::F32(v) => v.iter().flat_map(|t| t.to_le_bytes()).collect(),
        Data::F16(v) => v.iter().flat_map(|t| t.to_bits().to_le_bytes()).collect(),
        Data::BF16(v) => v.iter().flat_map(|t| t.to_bits().to_le_bytes()).collect(),
        Data::F64(v) => v.iter().flat_map(|t| t.to_le_bytes()).collect(),
        Data::I32(v) => v.iter().flat_map(|t| t.to_le_bytes()).collect(),
        Data::I64(v) => v.iter().flat_map(|t| t.to_le_bytes()).collect(),
    }
}

/// Environment variable naming a file the plan's text is written to (which backend runs each
/// node): how a test sees that `--backend vulkan` ran the op on Vulkan. Not part of the CLI
/// contract; stdout and stderr are unchanged.
const PLAN_ENV: &str = "GGS_FUSED_PLAN";

/// Plans `g`, writing the plan to `$GGS_FUSED_PLAN` when it is set.
fn plan(sched: &mut sched::Scheduler, g: &Graph) -> Result<()> {
    let plan = sched.plan(g).context("planning")?;
    if let Some(path) = std::env::var_os(PLAN_ENV) {
        std::fs::write(&path, plan.to_text(g))
            .with_context(|| format!("writing the plan to {} (${PLAN_ENV})", Path::new(&path).display()))?;
    }
    Ok(())
}

fn scheduler(backend: Backend) -> Result<sched::Scheduler> {
    let names: Vec<String> = match backend {
        Backend::Cpu => vec!["cpu".into()],
        Backend::Vulkan => vec!["vulkan".into(), "cpu".into()],
    };
    Ok(sched::Scheduler::new(crate::dump::make_backends(&names)?)?)
}

// ---------------------------------------------------------------- random-sample

fn random_sample(a: &RsArgs) -> Result<String> {
    let logits = read_npy(&a.logits, "--logits")?;
    let n = match logits.shape.as_slice() {
        [n] => *n,
        other => bail!("--logits: expected a 1-D array [n], got shape {other:?}"),
    };
    if n == 0 {
        bail!("--logits: empty array: n must be at least 1");
    }
    let x: Vec<f64> = match &logits.data {
        Data::F64(v) => v.clone(),
        d => match d.f32s() {
            Some(v) => v.into_iter().map(f64::from).collect(),
            None => bail!("--logits: dtype {} is not supported (expected f16, bf16, f32 or f64)", d.name()),
        },
    };
    for (name, val) in [("--random", a.random), ("--topp", a.topp), ("--temperature", a.temperature)] {
        if val.is_nan() {
            bail!("{name} is NaN");
        }
    }
    if !(0.0..1.0).contains(&a.random) {
        bail!("--random: random = {} must lie in [0, 1)", a.random);
    }
    if a.topp < 0.0 {
        bail!("--topp: topp = {} must not be negative", a.topp);
    }
    if a.temperature < 0.0 {
        bail!("--temperature: temperature = {} must not be negative", a.temperature);
    }
    if (n - 1) as u64 > a.index_dtype.max() {
        bail!(
            "index overflow: {n} logits need indices up to {}, above the {} maximum {}",
            n - 1,
            a.index_dtype,
            a.index_dtype.max()
        );
    }
    if let Some(i) = x.iter().position(|t| t.is_nan()) {
        bail!("--logits: element {i} is NaN");
    }
    let argmax = a.random == 0.0 || a.topp == 0.0 || a.topk == 1 || a.temperature == 0.0;
    if !argmax {
        if let Some(i) = x.iter().position(|&t| t == f64::INFINITY) {
            bail!("--logits: element {i} is +inf (not allowed on the full path)");
        }
        if x.iter().all(|&t| t == f64::NEG_INFINITY) {
            bail!("--logits: every element is -inf (nothing to sample on the full path)");
        }
    }
    let mut g = Graph::new();
    let f64_rows = matches!(logits.data, Data::F64(_));
    let (lx, bytes) = match &logits.data {
        Data::F64(_) => (g.input("x", DType::I32, &[2 * n, 1])?, logits_bytes(&logits.data)),
        Data::F32(_) => (g.input("x", DType::F32, &[n, 1])?, logits_bytes(&logits.data)),
        Data::F16(_) => (g.input("x", DType::F16, &[n, 1])?, logits_bytes(&logits.data)),
        Data::BF16(_) => (g.input("x", DType::BF16, &[n, 1])?, logits_bytes(&logits.data)),
        _ => unreachable!("checked above"),
    };
    let lp = g.input("params", DType::F32, &[3, 1])?;
    let lk = g.input("topk", DType::I32, &[1, 1])?;
    let y = g.random_sample(lx, lp, lk, a.index_dtype, f64_rows)?;
    g.set_output(y);
    let mut sched = scheduler(a.backend)?;
    plan(&mut sched, &g)?;
    sched.set_input(lx, &bytes)?;
    sched.set_input_f32(lp, &[a.random, a.topp, a.temperature])?;
    sched.set_input_i32(lk, &[a.topk])?;
    sched.compute().context("running the graph")?;
    let i = sched.read_i32(y)?[0];
    if i < 0 {
        bail!("the row could not be sampled");
    }
    Ok(format!("{{\"index\":{i}}}"))
}
