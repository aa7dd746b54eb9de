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
/// its list; a plain chain with no grammar; greedy under the grammar; and the same greedy chain
/// in optimistic mode (checked on the host, a rejected row run again on the CPU).
pub fn chains(vocab: &Arc<Vocab>) -> Vec<Chain> {
    let g = |mode| stage(JSON, vocab, mode);
    vec![
        Chain::new().with(g(GrammarMode::First)).with(TopK::new(20)).with(Temp::new(0.9).unwrap()).with(Dist::new(5)),
        Chain::new().with(TopK::new(60)).with(g(GrammarMode::First)).with(Dist::new(6)),
        Chain::new().with(TopK::new(10)).with(Dist::new(7)),
        Chain::new().with(g(GrammarMode::First)).with(Greedy::new()),
        Chain::new().with(g(GrammarMode::Optimistic)).with(Greedy::new()),
    ]
}

/// Runs [`chains`] as one batch for `steps` steps on `backend` (with `fallback` for CPU suffixes):
/// every row's token equals its chain's on the CPU, the grammar rows' text stays a prefix the
/// grammar accepts, a grammar row that completes ends with the EOS token, and each row reads back
/// only its token but a resampled row its logits row too. Returns the placements, the bytes
/// written to the backend per step and the rows the optimistic grammar sent back to the CPU.
pub fn mixed_batch(
    backend: Box<dyn Backend>,
    fallback: Option<Box<dyn Backend>>,
    steps: usize,
) -> (Vec<String>, u64, usize) {
    let v = 1000;
    let voc = vocab(v);
    let mut refs = chains(&voc);
    let n = refs.len();
    let mut seqs = Sequences::new(1).unwrap();
    for (i, c) in refs.iter().enumerate() {
        seqs.set(SeqId(i as u32), SeqConfig::new(c.clone()));
    }
    let rows: Vec<(SeqId, usize)> = (0..n).map(|i| (SeqId(i as u32), i)).collect();
    let mut g = graph::Graph::new();
    let x = g.input("logits", graph::DType::F32, &[v, n]).unwrap();
    let mut tail = Tail::attach(&mut g, x, &rows, &seqs, &*backend).unwrap();
    let mut sched = Scheduler::new([backend].into_iter().chain(fallback).collect()).unwrap();
    sched.plan(&g).unwrap();
    let placements: Vec<String> = tail.placement().into_iter().map(|(_, p)| p).collect();
    let mut texts = vec![Vec::<u8>::new(); n];
    let mut done = vec![false; n];
    let mut written = 0;
    let mut resampled = 0;
    for step in 0..steps {
        let all: Vec<f32> = (0..n).flat_map(|r| logits(v, step, r)).collect();
        sched.set_input_f32(x, &all).unwrap();
        let w0 = sched.stats().bytes_from_host;
        tail.set_inputs(&mut sched, &mut seqs).unwrap();
        written = sched.stats().bytes_from_host - w0;
        sched.compute().unwrap();
        let out = tail.sample(&mut sched, &mut seqs).unwrap();
        resampled += out.resampled;
        assert_eq!(out.bytes_read, 4 * n + out.resampled * 4 * v, "step {step}");
        for r in 0..n {
            if done[r] {
                continue;
            }
            refs[r].set_step(step as u64);
            let want = refs[r].sample(&logits(v, step, r)).unwrap();
            let got = out.rows[r].result.as_ref().unwrap().token.unwrap();
            assert_eq!(got, want, "step {step}, row {r} ({})", placements[r]);
            tail.accept(&mut seqs, SeqId(r as u32), &[got]).unwrap();
            if r == 2 {
                continue;
            }
            if got == EOS {
                assert!(Grammar::new(JSON).unwrap().matches(&String::from_utf8_lossy(&texts[r])), "row {r}");
                done[r] = true;
            } else {
                texts[r].extend_from_slice(voc.piece(got));
            }
        }
    }
    (placements, written, resampled)
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
