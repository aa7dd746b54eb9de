//! A sampler stage defined outside the `sampling` crate, with a CPU form and a backend form:
//! `BanSequences` forbids a set of token sequences. Where the history ends with all but the last
//! token of a banned sequence, that last token gets `-inf`. The history decides, never the
//! logits, so its backend form is a host-computed list of banned tokens (a fixed capacity, padded
//! with -1) added as `-inf` on the vocabulary row with the library's own helper
//! (`Lowering::add_sparse`); it appends only existing graph ops (`graph::Op` is closed) and draws
//! nothing.
//!
//! `cargo run --release -p runner --example ban_sequences [-- --backend vulkan]` decodes a mixed
//! batch (the stage on the backend, a chain that finishes on the CPU, plain chains) and checks every
//! token against each chain run alone on the CPU. `crates/runner/tests/custom_stage.rs` runs it on
//! the CPU and on Vulkan.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use graph::{DType, GraphError, NodeId};
use sampling::backend::{BackendStage, Field, Form, Lowering, Record, SeqConfig, SeqId, Sequences, StageKey, Tail};
use sampling::{Candidates, Chain, Sampler, Token};
use sched::{Backend, Scheduler};

/// Forbids token sequences given the history.
#[derive(Debug, Clone)]
pub struct BanSequences {
    banned: Vec<Vec<Token>>,
    history: Vec<Token>,
}

impl BanSequences {
    /// A stage banning `banned` (empty sequences are ignored).
    pub fn new(banned: Vec<Vec<Token>>) -> Self {
        Self { banned: banned.into_iter().filter(|b| !b.is_empty()).collect(), history: Vec::new() }
    }

    /// The tokens banned after the current history, sorted, without repeats.
    fn banned_now(&self) -> Vec<Token> {
        let mut out: Vec<Token> =
            self.banned.iter().filter(|b| self.history.ends_with(&b[..b.len() - 1])).map(|b| b[b.len() - 1]).collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

const NAME: &str = "ban_sequences";

impl Sampler for BanSequences {
    fn name(&self) -> &'static str {
        NAME
    }

    fn accept(&mut self, token: Token) {
        self.history.push(token);
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> sampling::Result<()> {
        let banned = self.banned_now();
        if let Some(logits) = cur.vocab_logits_mut() {
            for t in banned {
                if let Some(l) = logits.get_mut(t as usize) {
                    *l = f32::NEG_INFINITY;
                }
            }
            return Ok(());
        }
        for e in cur.list_mut(NAME)?.iter_mut().filter(|e| banned.binary_search(&e.id).is_ok()) {
            e.logit = f32::NEG_INFINITY;
        }
        Ok(())
    }

    fn reset(&mut self) {
        self.history.clear();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

impl BackendStage for BanSequences {
    /// On the vocabulary (or after a cut on it); on a candidate list it has no backend form, so
    /// the CPU runs it there. The key's size is the capacity: one banned token per sequence.
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        match form {
            _ if self.banned.is_empty() => Some((StageKey::nothing(), form)),
            Form::Vocab | Form::Masked => Some((StageKey::new::<Self>(NAME, 0, self.banned.len()), form)),
            _ => None,
        }
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> Result<Record, GraphError> {
        let (m, n, stage) = (key.size(), cx.n(), cx.stage());
        // Each row's banned tokens (its own sampler's, every step), padded with -1, and -inf for each.
        let ids = Field::new(move |row, out| {
            let banned = row.stage::<Self>(stage)?.banned_now();
            for j in 0..m {
                out.i32(banned.get(j).map_or(-1, |&t| t as i32));
            }
            Ok(())
        });
        let ids: NodeId = cx.input(&format!("s{stage}.banned"), DType::I32, &[m, n], vec![ids])?;
        let ninf = Field::constant(&vec![f32::NEG_INFINITY; m]);
        let vals = cx.input(&format!("s{stage}.ban"), DType::F32, &[m, n], vec![ninf])?;
        cx.add_sparse(rec, ids, vals)
    }
}

/// Deterministic logits for (step, row): peaked, so that the banned sequences come up.
fn logits_for(v: usize, step: usize, row: usize) -> Vec<f32> {
    let mut s = (step as u64 * 7919 + row as u64 * 104_729) | 1;
    (0..v)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let noise = (s >> 40) as f32 / (1u64 << 24) as f32;
            // Tokens 0..8 dominate: short loops through them.
            if i < 8 { 6.0 + 2.0 * noise } else { noise * 4.0 - 2.0 }
        })
        .collect()
}

/// The chains of the batch: the stage first on the vocabulary, after a cut, after a top-k (a CPU
/// suffix), and a chain without it.
fn chains() -> Vec<Chain> {
    let ban = || BanSequences::new(vec![vec![1, 2], vec![3, 3], vec![5, 6, 7], vec![0]]);
    let parse = |s: &str| Chain::parse(s).expect("a valid SPEC");
    vec![
        Chain::new().with(ban()).with(sampling::samplers::Dist::new(1)),
        {
            let mut c = parse("min_p(p=0.05)");
            c.push(Box::new(ban()));
            c.push(Box::new(sampling::samplers::Dist::new(2)));
            c
        },
        {
            let mut c = parse("top_k(k=6)");
            c.push(Box::new(ban()));
            c.push(Box::new(sampling::samplers::Greedy::new()));
            c
        },
        parse("top_k(k=5);temp(t=0.8);dist(seed=4)"),
    ]
}

/// Decodes `steps` steps of the batch on `backend` (with the CPU as the fallback for CPU
/// suffixes where `backend` is not the CPU),
/// checks every token against each chain alone on the CPU, and returns the placements and the
/// tokens.
pub fn run(backend: Box<dyn Backend>, steps: usize) -> Result<(Vec<String>, Vec<Vec<Token>>), String> {
    let v = 64;
    let chains = chains();
    let n = chains.len();
    let mut refs = chains.clone();
    let mut seqs = Sequences::new(1).map_err(|e| e.to_string())?;
    for (i, c) in chains.into_iter().enumerate() {
        seqs.set(SeqId(i as u32), SeqConfig::new(c));
    }
    let rows: Vec<(SeqId, usize)> = (0..n).map(|i| (SeqId(i as u32), i)).collect();
    let mut g = graph::Graph::new();
    let logits = g.input("logits", DType::F32, &[v, n]).map_err(|e| e.to_string())?;
    let mut tail = Tail::attach(&mut g, logits, &rows, &seqs, &*backend).map_err(|e| e.to_string())?;
    let placements: Vec<String> = tail.placement().into_iter().map(|(_, p)| p).collect();
    let mut backends = vec![backend];
    if backends[0].name() != "cpu" {
        backends.push(Box::new(cpu::CpuBackend::with_threads(1)));
    }
    let mut sched = Scheduler::new(backends).map_err(|e| e.to_string())?;
    sched.plan(&g).map_err(|e| e.to_string())?;
    let mut tokens = vec![Vec::new(); n];
    for step in 0..steps {
        let all: Vec<f32> = (0..n).flat_map(|r| logits_for(v, step, r)).collect();
        sched.set_input_f32(logits, &all).map_err(|e| e.to_string())?;
        tail.set_inputs(&mut sched, &mut seqs).map_err(|e| e.to_string())?;
        sched.compute().map_err(|e| e.to_string())?;
        let out = tail.sample(&mut sched, &mut seqs).map_err(|e| e.to_string())?;
        for (r, chain) in refs.iter_mut().enumerate() {
            chain.set_step(step as u64);
            let want = chain.sample(&logits_for(v, step, r)).map_err(|e| e.to_string())?;
            let got = out.token(r).map_err(|e| e.to_string())?;
            if got != want {
                return Err(format!("step {step}, sequence {r}: backend {got}, CPU chain {want}"));
            }
            tail.accept(&mut seqs, SeqId(r as u32), &[got]).map_err(|e| e.to_string())?;
            tokens[r].push(got);
        }
    }
    Ok((placements, tokens))
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    let vulkan = std::env::args().any(|a| a == "vulkan");
    let backend: Box<dyn Backend> = if vulkan {
        match vulkan::VulkanBackend::new() {
            Ok(vk) => Box::new(vk),
            Err(e) => {
                eprintln!("no Vulkan device: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    } else {
        Box::new(cpu::CpuBackend::new())
    };
    match run(backend, 40) {
        Ok((placements, tokens)) => {
            for (i, (p, t)) in placements.iter().zip(&tokens).enumerate() {
                println!("seq {i}: {p}\n  {t:?}");
            }
            println!("every token equals its chain's on the CPU");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}
