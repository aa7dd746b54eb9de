//! `cargo xtask sample`: inspects a sampler chain on a logits file (the design brief's contract).
//!
//! ```text
//! cargo xtask sample --logits FILE.npy --chain SPEC [--backend cpu|vulkan] [--path chain|graph]
//!                    [--history 1,2,3] [--step N] [--seed S] [--vocab MODEL.gguf]
//! ```
//!
//! Prints one JSON object per row of the file:
//! `{"row":0,"selected":17,"candidates":[{"id":17,"logit":3.2,"p":0.41},...]}` with the surviving
//! candidates sorted by `p` descending, `p` normalised over them, `selected` null when the chain
//! has no selecting stage. Every row is sampled by its own copy of the chain in the same state:
//! `--history` tokens accepted in order, then the random stages set to step `--step`. `--seed`
//! is the seed of every random stage whose SPEC does not give one.
//!
//! `--path chain` runs the CPU sampler chain. `--path graph` attaches the chain's longest backend
//! prefix after a logits input (`sampling::backend::Tail`, every row its own sequence, candidates
//! reserved), runs it through `sched` on `--backend` (`vulkan`: the Vulkan backend first, the CPU
//! for what it cannot run) and finishes on the CPU; `--placement` prints where each stage ran
//! (`+name` backend, `-name` CPU) and the bytes read back on stderr.
//!
//! `--vocab MODEL.gguf` gives the grammar stages (`grammar`, `json_schema`, `grammar_lazy`) the
//! model's token texts; `--history` tokens advance them too, and a history token a grammar
//! rejects is an error naming it. It also gives DRY's string breakers
//! (`dry(breakers="\n|:|\"|*")`) the token texts and the model's tokenizer.
use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use sampling::{SampleOutput, Sampler};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    Cpu,
    Vulkan,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum PathKind {
    Chain,
    Graph,
}

#[derive(Parser, Debug)]
#[command(about = "Run a sampler chain on a logits file and print the surviving candidates as JSON lines")]
struct Args {
    /// Logits: .npy of f32, f16 or bf16 (void `V2`), shape [n_rows, n_vocab] in C order or 1-D.
    #[arg(long)]
    logits: PathBuf,
    /// Sampler chain SPEC, e.g. "top_k(k=40);top_p(p=0.95);temp(t=0.8);dist(seed=1)".
    #[arg(long)]
    chain: String,
    /// Where the backend prefix runs.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    /// `chain`: the CPU sampler chain; `graph`: backend subgraph, then the CPU for the rest.
    #[arg(long, value_enum, default_value = "chain")]
    path: PathKind,
    /// With `--path graph`: print each stage's placement and the bytes read back on stderr.
    #[arg(long)]
    placement: bool,
    /// Tokens accepted before this step, comma separated.
    #[arg(long, value_delimiter = ',')]
    history: Vec<u32>,
    /// Step of the random stages' draws.
    #[arg(long, default_value_t = 0)]
    step: u64,
    /// Seed for random stages without `seed=` in the SPEC.
    #[arg(long)]
    seed: Option<u64>,
    /// A GGUF model whose vocabulary the grammar stages read token texts from (and DRY's string
    /// breakers, with its tokenizer).
    #[arg(long)]
    vocab: Option<PathBuf>,
}

/// The tokenizer of a GGUF model file.
pub fn load_tokenizer(path: &Path) -> Result<runner::tokenizer::Tokenizer> {
    let g = gguf::Gguf::open(path).with_context(|| format!("opening --vocab {}", path.display()))?;
    runner::gguf_model::tokenizer(&g).with_context(|| format!("the tokenizer of {}", path.display()))
}

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let args = Args::try_parse_from(args)?;
    if args.path == PathKind::Chain && args.backend == Backend::Vulkan {
        bail!("--backend vulkan runs the backend prefix: use it with --path graph (--path chain is the CPU chain)");
    }
    let (rows, n_vocab, data) = read_logits(&args.logits)?;
    let tok = args.vocab.as_deref().map(load_tokenizer).transpose()?;
    let vocab = tok.as_ref().map(|t| std::sync::Arc::clone(t.grammar_vocab()));
    if let Some(v) = &vocab
        && v.len() != n_vocab
    {
        bail!("--vocab has {} tokens but the logits rows {n_vocab}", v.len());
    }
    let cx = sampling::chain_spec::SpecContext {
        default_seed: args.seed.unwrap_or(sampling::DEFAULT_SEED),
        vocab,
        // DRY's string breakers (a quoted value) need the tokenizer.
        tokenizer: tok.as_ref().filter(|_| args.chain.contains('"')).map(|t| t.breaker_tokenizer()),
        ..Default::default()
    };
    let mut chain = sampling::chain_spec::parse_with(&args.chain, &cx)
        .with_context(|| format!("parsing --chain {:?}", args.chain))?;
    for (i, &t) in args.history.iter().enumerate() {
        if t as usize >= n_vocab {
            bail!("--history token {t} is outside the vocabulary of {n_vocab}");
        }
        chain.try_accept(t).with_context(|| format!("--history token {i} ({t})"))?;
    }
    chain.set_step(args.step);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.path == PathKind::Graph {
        let lines = run_graph(&args, chain, rows, n_vocab, &data)?;
        for l in lines {
            writeln!(out, "{l}")?;
        }
        return Ok(());
    }
    for r in 0..rows {
        let row = &data[r * n_vocab..(r + 1) * n_vocab];
        let o = chain.clone().run(row).with_context(|| format!("row {r}"))?;
        writeln!(out, "{}", json_line(r, &o))?;
    }
    Ok(())
}

/// `--path graph`: one sequence per row, the tail attached after a logits input, one step.
fn run_graph(args: &Args, chain: sampling::Chain, rows: usize, n_vocab: usize, data: &[f32]) -> Result<Vec<String>> {
    use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
    let names: Vec<String> = match args.backend {
        Backend::Cpu => vec!["cpu".into()],
        Backend::Vulkan => vec!["vulkan".into(), "cpu".into()],
    };
    let backends = crate::dump::make_backends(&names)?;
    let mut seqs = Sequences::new(1)?;
    for r in 0..rows {
        seqs.set(SeqId(r as u32), SeqConfig::new(chain.clone()).with_candidates());
        seqs.set_step(SeqId(r as u32), args.step)?;
    }
    let mut g = graph::Graph::new();
    let logits = g.input("logits", graph::DType::F32, &[n_vocab, rows])?;
    let map: Vec<(SeqId, usize)> = (0..rows).map(|r| (SeqId(r as u32), r)).collect();
    let mut tail =
        Tail::attach(&mut g, logits, &map, &seqs, backends[0].as_ref()).context("attaching the sampling tail")?;
    let mut sched = sched::Scheduler::new(backends)?;
    sched.plan(&g).context("planning")?;
    sched.set_input_f32(logits, data)?;
    tail.set_inputs(&mut sched, &mut seqs)?;
    sched.compute().context("running the graph")?;
    let step = tail.sample(&mut sched, &mut seqs)?;
    if args.placement {
        eprintln!("{}", tail.describe().trim_end());
        eprintln!("read back {} bytes (reserved {})", step.bytes_read, tail.reserved_bytes());
    }
    let mut lines = Vec::with_capacity(rows);
    for r in 0..rows {
        let o = step.rows[r].result.clone().with_context(|| format!("row {r}"))?;
        let so = SampleOutput { selected: o.token, candidates: o.candidates.unwrap_or_default() };
        lines.push(json_line(r, &so));
    }
    Ok(lines)
}

fn f32_json(x: f32) -> String {
    serde_json::to_string(&x).unwrap_or_else(|_| "null".into())
}

/// One output line of the contract.
fn json_line(row: usize, o: &SampleOutput) -> String {
    let mut s = format!("{{\"row\":{row},\"selected\":");
    match o.selected {
        Some(t) => write!(s, "{t}").ok(),
        None => write!(s, "null").ok(),
    };
    s.push_str(",\"candidates\":[");
    for (i, c) in o.candidates.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        write!(s, "{{\"id\":{},\"logit\":{},\"p\":{}}}", c.id, f32_json(c.logit), f32_json(c.p)).ok();
    }
    s.push_str("]}");
    s
}

/// Reads an .npy logits file (`npy::parse`): returns (rows, n_vocab, row-major f32 data).
pub fn read_logits(path: &Path) -> Result<(usize, usize, Vec<f32>)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let a = npy::parse(&bytes).with_context(|| path.display().to_string())?;
    let (rows, n_vocab) = match a.shape.as_slice() {
        [n] => (1, *n),
        [r, n] => (*r, *n),
        other => bail!("{}: expected shape [n_rows, n_vocab] or [n_vocab], got {other:?}", path.display()),
    };
    if n_vocab == 0 || rows == 0 {
        bail!("{}: empty logits array (shape {:?})", path.display(), a.shape);
    }
    let data: Vec<f32> = match a.data {
        npy::Data::F64(v) => v.into_iter().map(|x| x as f32).collect(),
        ref d => d.f32s().with_context(|| {
            format!("{}: unsupported dtype {} (expected f32, f64, f16 or bf16 stored as V2)", path.display(), d.name())
        })?,
    };
    Ok((rows, n_vocab, data))
}
