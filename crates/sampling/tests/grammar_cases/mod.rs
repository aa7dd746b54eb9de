//! Shared cases of the grammar stage: a small vocabulary with the awkward tokens (every byte, so
//! tokens that split a UTF-8 character; JSON punctuation and words; an end-of-generation token),
//! a JSON grammar, logits that often prefer tokens the grammar rejects, and a mixed batch of
//! grammar and plain rows checked step by step against the CPU chain. `crates/vulkan/tests/
//! grammar.rs` includes this file (`#[path]`) to run the same batch on Vulkan.
#![allow(dead_code)]

use grammar::{Grammar, Matcher, Vocab};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::samplers::{Dist, GrammarMode, GrammarStage, Greedy, Temp, TopK};
use sampling::{Chain, Sampler, Token};
use sched::{Backend, Scheduler};
use std::sync::Arc;

/// A JSON grammar (objects, arrays, strings with escapes, numbers, literals; optional spaces).
pub const JSON: &str = r#"
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
"#;

/// The end-of-generation token of [`vocab`].
pub const EOS: Token = 256;

/// Every byte (token `b` is byte `b`; token 0 is empty, as a NUL piece is), the EOS token, JSON
/// punctuation and words, characters whole and split, and filler words up to `n` tokens.
pub fn vocab(n: usize) -> Arc<Vocab> {
    let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    pieces.push(b"<|im_end|>".to_vec());
    for w in [
        "{\"", "\":", "\": ", "\",", "\"}", "\"]", "{}", "[]", "true", "false", "null", " \"", "\", \"", "name", "age",
        "12", "345", "0.5", "-1", "e10", "\\n", "\\\"", "\\u00e9", "é", "€", "日本", "😀", "},", "],", "\n  ", "  ",
        ": [", "], \"", "tr", "ue", "fa", "lse", "nu", "ll",
    ] {
        pieces.push(w.as_bytes().to_vec());
    }
    pieces.push("€".as_bytes()[..2].to_vec()); // a token ending inside a character
    pieces.push("😀".as_bytes()[1..].to_vec()); // a token that can only continue one
    let mut i = 0u64;
    while pieces.len() < n {
        let len = 1 + (graph::philox::bits(7, i, 0)[0] % 6) as usize;
        let w: Vec<u8> = (0..len)
            .map(|j| b"abcdefxyz\":{}[], 019"[(graph::philox::bits(7, i, 1 + j as u64)[0] % 20) as usize])
            .collect();
        pieces.push(w);
        i += 1;
    }
    Arc::new(Vocab::new(pieces, &[EOS]))
}

/// A grammar stage over `text` (rule `root`) and `vocab`.
pub fn stage(text: &str, vocab: &Arc<Vocab>, mode: GrammarMode) -> GrammarStage {
    let g = Grammar::with_vocab(text, "root", vocab.as_ref()).unwrap();
    GrammarStage::new("grammar", Matcher::new(&g, Arc::clone(vocab)), mode)
}

/// Logits for `step` and `row` over `v` tokens: noise, with the grammar's likely tokens raised
/// only some of the time, so that the unconstrained choice is often one the grammar rejects.
pub fn logits(v: usize, step: usize, row: usize) -> Vec<f32> {
    (0..v)
        .map(|i| {
            let u = graph::philox::uniform(99 + row as u64, step as u64, i as u64);
            let boost = if i > 256 && i < 300 && (step + i).is_multiple_of(3) { 2.0 } else { 0.0 };
            4.0 * u + boost
        })
        .collect()
}

/// The chains of the mixed batch: grammar first then a random draw; a top-k with the grammar on
/// its list; a plain chain with no grammar; greedy under the grammar; then the optimistic rows
/// (checked on the host, a rejected row run again, masked, in a second backend step): greedy,
/// a top-k and temperature draw, a top-k with the grammar on its list, and greedy again (another
/// row, so that the rejected rows make varying sets).
pub fn chains(vocab: &Arc<Vocab>) -> Vec<Chain> {
    let g = |mode| stage(JSON, vocab, mode);
    vec![
        Chain::new().with(g(GrammarMode::First)).with(TopK::new(20)).with(Temp::new(0.9).unwrap()).with(Dist::new(5)),
        Chain::new().with(TopK::new(60)).with(g(GrammarMode::First)).with(Dist::new(6)),
        Chain::new().with(TopK::new(10)).with(Dist::new(7)),
        Chain::new().with(g(GrammarMode::First)).with(Greedy::new()),
        Chain::new().with(g(GrammarMode::Optimistic)).with(Greedy::new()),
        Chain::new()
            .with(g(GrammarMode::Optimistic))
            .with(TopK::new(20))
            .with(Temp::new(0.9).unwrap())
            .with(Dist::new(8)),
        Chain::new().with(TopK::new(200)).with(g(GrammarMode::Optimistic)).with(Dist::new(9)),
        Chain::new().with(g(GrammarMode::Optimistic)).with(Greedy::new()),
    ]
}

/// The first optimistic row of [`chains`]; every row from it on is optimistic, and reserves
/// [`LOGPROBS`] log-probabilities.
pub const FIRST_OPTIMISTIC: usize = 4;

/// The log-probabilities the optimistic rows reserve.
pub const LOGPROBS: usize = 2;

/// What [`mixed_batch`] saw.
#[derive(Debug)]
pub struct Mixed {
    /// Each row's placement.
    pub placements: Vec<String>,
    /// Bytes written to the backend in the last step.
    pub written: u64,
    /// Rows the optimistic grammars sent to a second step, over all steps.
    pub resampled: usize,
    /// Steps whose rows the optimistic grammars all accepted.
    pub no_second_step: usize,
    /// Distinct sets of rejected rows (side tails).
    pub rejected_sets: usize,
    /// The scheduler's side steps and plans made.
    pub side_steps: u64,
    pub plans: u64,
    /// Steps, and rows sampled in all.
    pub steps: usize,
    pub rows: usize,
    /// Masked `top_k` nodes in the step's graph (a grammar's mask read through by the top-k
    /// after it, where the backend runs that form).
    pub masked_top_k: usize,
}

/// The log-softmax of `row` at `t`.
pub fn log_softmax(row: &[f32], t: Token) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = row.iter().map(|&x| f64::from(x - max).exp()).sum();
    row[t as usize] - max - sum.ln() as f32
}

/// Runs [`chains`] as one batch for `steps` steps on `backend` (with `fallback` for CPU suffixes):
/// every row's token equals its chain's on the CPU, the grammar rows' text stays a prefix the
/// grammar accepts, a grammar row that completes ends with the EOS token, and each row reads back
/// only its token (and an optimistic row its log-probabilities), a row the optimistic grammar
/// rejected 4 bytes more of token from its second step and 16 of its new token's
/// log-probability and rank and the top one's, never its logits row.
pub fn mixed_batch(backend: Box<dyn Backend>, fallback: Option<Box<dyn Backend>>, steps: usize) -> Mixed {
    let v = 1000;
    let voc = vocab(v);
    let mut refs = chains(&voc);
    let n = refs.len();
    let mut seqs = Sequences::new(1).unwrap();
    for (i, c) in refs.iter().enumerate() {
        let cfg = SeqConfig::new(c.clone());
        let cfg = if i >= FIRST_OPTIMISTIC { cfg.with_logprobs(LOGPROBS) } else { cfg };
        seqs.set(SeqId(i as u32), cfg);
    }
    let rows: Vec<(SeqId, usize)> = (0..n).map(|i| (SeqId(i as u32), i)).collect();
    let mut g = graph::Graph::new();
    let x = g.input("logits", graph::DType::F32, &[v, n]).unwrap();
    let mut tail = Tail::attach(&mut g, x, &rows, &seqs, &*backend).unwrap();
    let masked_top_k = g.nodes().filter(|(_, n)| matches!(n.op, graph::Op::TopK { masked: true, .. })).count();
    let mut sched = Scheduler::new([backend].into_iter().chain(fallback).collect()).unwrap();
    sched.plan(&g).unwrap();
    let placements: Vec<String> = tail.placement().into_iter().map(|(_, p)| p).collect();
    let mut texts = vec![Vec::<u8>::new(); n];
    let mut done = vec![false; n];
    let (mut written, mut resampled, mut no_second_step) = (0, 0, 0);
    let mut sets = std::collections::BTreeSet::new();
    let plans0 = sched.stats().plans;
    for step in 0..steps {
        let all: Vec<f32> = (0..n).flat_map(|r| logits(v, step, r)).collect();
        sched.set_input_f32(x, &all).unwrap();
        let w0 = sched.stats().bytes_from_host;
        tail.set_inputs(&mut sched, &mut seqs).unwrap();
        written = sched.stats().bytes_from_host - w0;
        sched.compute().unwrap();
        let out = tail.sample(&mut sched, &mut seqs).unwrap();
        assert!(!sched.in_side(), "the step's plan is current again");
        resampled += out.resampled;
        no_second_step += usize::from(out.resampled == 0);
        // A rejected row (every optimistic row has log-probabilities) reads from its second step
        // 4 bytes of token, 4 of its new token's log-probability, 4 of its rank and 8 of the top
        // one (a row that fails there, a finished one, reads none).
        let (base, per) = (tail.reserved_bytes(), 4 + 4 + 4 + 8);
        if done.iter().all(|d| !d) {
            assert_eq!(out.bytes_read, base + per * out.resampled, "step {step}");
        } else {
            assert!((base..=base + per * out.resampled).contains(&out.bytes_read), "step {step}");
        }
        let mut rejected = Vec::new();
        for r in 0..n {
            if done[r] {
                continue;
            }
            let row = logits(v, step, r);
            // The chain's choice without its deferred stages (what the first step chose).
            let mut unconstrained = Chain::new();
            for s in refs[r].stages().iter().filter(|s| !s.deferred()) {
                unconstrained.push(s.clone());
            }
            unconstrained.set_step(step as u64);
            let unconstrained = unconstrained.run(&row).unwrap().selected;
            refs[r].set_step(step as u64);
            let want = refs[r].sample(&row).unwrap();
            let got = out.rows[r].result.as_ref().unwrap();
            let t = got.token.unwrap();
            assert_eq!(t, want, "step {step}, row {r} ({})", placements[r]);
            if r >= FIRST_OPTIMISTIC {
                // The token's own log-probability, of the token finally chosen.
                let lp = got.token_logprob.unwrap();
                assert!((lp - log_softmax(&row, t)).abs() < 1e-4, "step {step}, row {r}: {lp}");
                let above = row.iter().filter(|&&x| x > row[t as usize]).count();
                assert_eq!(got.token_rank, Some(above as u32 + 1), "step {step}, row {r}: the token's rank");
                assert_eq!(got.logprobs.as_ref().unwrap().len(), LOGPROBS);
                if unconstrained != Some(t) {
                    rejected.push(r);
                }
            }
            tail.accept(&mut seqs, SeqId(r as u32), &[t]).unwrap();
            if r == 2 {
                continue;
            }
            if t == EOS {
                assert!(Grammar::new(JSON).unwrap().matches(&String::from_utf8_lossy(&texts[r])), "row {r}");
                done[r] = true;
            } else {
                texts[r].extend_from_slice(voc.piece(t));
            }
        }
        if done.iter().all(|d| !d) {
            assert_eq!(rejected.len(), out.resampled, "step {step}: rejected rows {rejected:?}");
        }
        if !rejected.is_empty() {
            sets.insert(rejected);
        }
    }
    let st = sched.stats();
    Mixed {
        placements,
        written,
        resampled,
        no_second_step,
        rejected_sets: sets.len(),
        side_steps: st.side_steps,
        plans: st.plans - plans0,
        steps,
        rows: n,
        masked_top_k,
    }
}

/// What every backend's [`mixed_batch`] must show: the placements (an optimistic grammar appends
/// nothing to the step: the host checks), optimistic checks that fail often and in varying sets
/// of rows, each failing step one side step whose plans are cached, and the masks uploaded.
pub fn check_mixed(m: &Mixed) {
    let p = &m.placements;
    assert_eq!(p[0], "+grammar +top_k +temp +dist");
    assert_eq!(p[1], "+top_k +grammar +dist");
    assert_eq!(p[3], "+grammar +greedy");
    assert_eq!(p[4], "+grammar +greedy", "an optimistic grammar appends nothing: the host checks");
    assert_eq!(p[5], "+grammar +top_k +temp +dist");
    assert_eq!(p[6], "+top_k +grammar +dist");
    assert!(m.resampled > 10, "the rows must make the optimistic check fail often ({m:?})");
    assert!(m.rejected_sets >= 3, "the rejected rows must vary ({m:?})");
    assert_eq!(m.side_steps as usize, m.steps - m.no_second_step, "one side step per step with a rejection");
    // One plan for the step and one per shape of second step (at most one per set of rows: the
    // later steps with the same set plan nothing).
    assert!(m.plans as usize <= 1 + m.rejected_sets, "{m:?}");
    assert!(m.plans < m.side_steps, "{m:?}");
    // Three rows upload a 32-word mask each (1000 tokens), besides the random draws' counters.
    assert!(m.written >= 3 * 32 * 4, "{}", m.written);
}

/// Accepts `tokens` on a fresh matcher of `text` over `vocab`.
pub fn advanced(text: &str, vocab: &Arc<Vocab>, tokens: &[Token]) -> Matcher {
    let g = Grammar::with_vocab(text, "root", vocab.as_ref()).unwrap();
    let mut m = Matcher::new(&g, Arc::clone(vocab));
    for &t in tokens {
        m.accept(t).unwrap();
    }
    m
}

/// The tokens of `text` as single bytes (token `b` is byte `b`).
pub fn bytes(text: &str) -> Vec<Token> {
    text.bytes().map(Token::from).collect()
}

/// Runs a chain on the CPU for its name in dumps.
pub fn names(c: &Chain) -> String {
    c.stages().iter().map(|s| s.name()).collect::<Vec<_>>().join(";")
}
