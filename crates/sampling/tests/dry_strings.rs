//! DRY with string sequence breakers end to end over a 64-token vocabulary (`common::breaker_vocab`:
//! texts with llama.cpp's default breakers `\n`, `:`, `"`, `*` inside and around them, and a
//! multi-token `User:`): the chain parsed from `dry(breakers="\n|:|\"|*|User:")` equals, step for
//! step, the chain given the same breakers as token ids (the map llama.cpp's processing makes), on
//! the CPU and as a backend tail on the CPU backend in one batch; and the breakers matter (the
//! tokens differ from DRY without breakers). The map itself is checked against llama.cpp's code in
//! `known_answers.rs` and against llama.cpp on real vocabularies in
//! `crates/runner/tests/dry_breakers.rs`.

mod common;
mod vocab_cases;

use sampling::backend::{SeqConfig, SeqId};
use sampling::chain_spec::{SpecContext, parse_with};
use sampling::samplers::dry_breakers::from_vocab;
use sampling::{Chain, Sampler};

const V: usize = 64;
const BREAKERS: [&str; 5] = ["\n", ":", "\"", "*", "User:"];

fn texts() -> Vec<String> {
    let mut t: Vec<String> = (b'a'..=b'z').map(|c| (c as char).to_string()).collect();
    for s in [
        ":", "\n", "\"", "*", "a:", ":b", "c\n", "\n\n", "d*", "*e", "\"f", "g\"", "Us", "er", "User", "User:", "U",
        "se", "r", "x:", "\n:", "ab", "cd",
    ] {
        t.push(s.to_string());
    }
    let mut i = 0;
    while t.len() < V {
        t.push(format!("{}{}", (b'a' + (i % 26) as u8) as char, (b'z' - (i / 26) as u8) as char));
        i += 1;
    }
    t
}

/// Peaked rows, so that tokens repeat and DRY penalises.
fn small_logits(v: usize, step: usize, row: usize) -> Vec<f32> {
    vocab_cases::logits_for(v, step, row).iter().map(|x| x * 1.5).collect()
}

#[test]
fn string_breakers_match_their_token_ids_on_the_cpu_and_the_backend() {
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (vocab, tok) = common::breaker_vocab(&refs);
    let bytes: Vec<&[u8]> = BREAKERS.iter().map(|b| b.as_bytes()).collect();
    let entries = from_vocab(&bytes, &vocab, &tok).unwrap();
    // Single-token breakers, and `User:` as "User" ":", "Us" "er" ":" and "U" "se" "r" ":" ...
    assert!(entries.iter().any(|(h, t)| texts[*h as usize] == "User" && t.len() == 1), "{entries:?}");
    let ids: Vec<String> = entries
        .iter()
        .map(|(h, t)| std::iter::once(h).chain(t).map(u32::to_string).collect::<Vec<_>>().join(" "))
        .collect();
    let cx = SpecContext { vocab: Some(vocab), tokenizer: Some(tok), ..SpecContext::default() };
    let dry = "multiplier=1.5,base=1.75,allowed_length=1,last_n=32";
    let quoted = sampling::chain_spec::quote(&BREAKERS);
    assert_eq!(quoted, r#""\n|:|\"|*|User:""#);
    let chains: Vec<Chain> = [
        format!("dry({dry},breakers={quoted});dist(seed=5)"),
        format!("dry({dry},breakers={});dist(seed=5)", ids.join("|")),
        format!("top_k(k=20);dry({dry},breakers={quoted});temp(t=0.9);dist(seed=6)"),
        format!("dry({dry});dist(seed=5)"),
    ]
    .iter()
    .map(|s| parse_with(s, &cx).unwrap_or_else(|e| panic!("{s}: {e}")))
    .collect();
    let n = chains.len();
    let cpu = Box::new(cpu::CpuBackend::new());
    let mut b = vocab_cases::Batch::of(V, chains, SeqConfig::new, cpu, None);
    let mut tokens = vec![Vec::new(); n];
    for step in 0..80 {
        let all: Vec<f32> = (0..n).flat_map(|r| small_logits(V, step, r)).collect();
        let out = b.step(&all);
        let vocab_cases::Batch { seqs, refs, tail, .. } = &mut b;
        for row in &out.rows {
            let r = row.seq.0 as usize;
            refs[r].set_step(seqs.step(row.seq).unwrap());
            let want = refs[r].sample(&small_logits(V, step, r)).unwrap();
            assert_eq!(row.result.as_ref().unwrap().token, Some(want), "step {step} chain {r} ({})", tail.describe());
            tail.accept(seqs, row.seq, &[want]).unwrap();
            tokens[r].push(want);
        }
    }
    assert_eq!(b.seqs.step(SeqId(0)), b.seqs.step(SeqId(1)));
    // Each row's logits depend on its index: the string chain (row 0) and the token-id chain
    // (row 1) are compared on the same logits, CPU alone.
    let run = |spec: &str| {
        let mut c = parse_with(spec, &cx).unwrap();
        (0..80)
            .map(|step| {
                c.set_step(step as u64);
                c.sample(&small_logits(V, step, 0)).unwrap()
            })
            .collect::<Vec<u32>>()
    };
    let strings = run(&format!("dry({dry},breakers={quoted});dist(seed=5)"));
    assert_eq!(strings, tokens[0]);
    assert_eq!(strings, run(&format!("dry({dry},breakers={});dist(seed=5)", ids.join("|"))));
    assert_ne!(strings, run(&format!("dry({dry});dist(seed=5)")), "the breakers change the tokens");
}
