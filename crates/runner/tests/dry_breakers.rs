//! DRY with string sequence breakers against llama.cpp's own DRY on real vocabularies:
//! `data/dry_breakers.json` (written by `data/dry_breakers_ref.py` through llama-cpp-python
//! 0.3.36) holds, per case, a model (SmolLM2-135M: byte-level BPE, `smollm`; Gemma 3 270M:
//! SentencePiece), the breakers as strings, a history, and every token llama.cpp's
//! `llama_sampler_init_dry(vocab, ..., breakers)` penalised after accepting that history, with
//! its penalty. Ours is the same breakers as a quoted SPEC value (`dry(breakers="...")`) parsed
//! with the runner's vocabulary and tokenizer of the same file; it must penalise exactly the same
//! tokens by exactly the same amounts. The breaker sets: llama.cpp's default (`\n`, `:`, `"`,
//! `*`, single bytes: no tokenizer needed), multi-byte ones (tails tokenized, control-token
//! texts), and non-ASCII, over-long (cut at 40 bytes), long-tailed (cut at 20 tokens) and
//! escape-needing ones.

mod common;

use runner::Tokenizer;
use sampling::Chain;
use sampling::candidates::{Candidates, TokenData};
use sampling::chain_spec::{SpecContext, parse_with, quote};
use std::collections::HashMap;
use std::sync::Arc;

fn tokenizer(model: &str) -> Tokenizer {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/models");
    let path = match model {
        "smollm2" => runner::fetch::smollm2(&dir).expect("fetching SmolLM2 (or `cargo xtask fetch-model`)"),
        "gemma3" => common::gemma3_path(),
        m => panic!("unknown model {m}"),
    };
    runner::gguf_model::tokenizer(&gguf::Gguf::open(&path).unwrap()).unwrap()
}

/// The penalties the DRY stage of `chain` (stage 0) gives after `history`, on an all-zero row.
fn penalties(chain: &Chain, history: &[u32], n_vocab: usize) -> Vec<(u32, f32)> {
    let mut c = chain.clone();
    for &t in history {
        c.try_accept(t).unwrap();
    }
    let list = (0..n_vocab as u32).map(|id| TokenData { id, logit: 0.0, p: 0.0 }).collect();
    let mut cur = Candidates::from_list(list, n_vocab).unwrap();
    c.stages_mut()[0].apply(&mut cur).unwrap();
    let mut out: Vec<(u32, f32)> =
        cur.list("test").unwrap().iter().filter(|e| e.logit != 0.0).map(|e| (e.id, -e.logit)).collect();
    out.sort_by_key(|e| e.0);
    out
}

#[test]
fn string_breakers_penalise_as_llama_cpp() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dry_breakers.json");
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let dry = format!(
        "multiplier={},base={},allowed_length={},last_n={}",
        data["multiplier"], data["base"], data["allowed_length"], data["last_n"]
    );
    let mut toks: HashMap<String, (Tokenizer, SpecContext)> = HashMap::new();
    // (model, breakers) -> (with the breakers, without any).
    let mut chains: HashMap<String, (Chain, Chain)> = HashMap::new();
    let (mut checked, mut penalised, mut cut) = (0, 0, 0);
    let mut failures = Vec::new();
    for (i, case) in data["cases"].as_array().unwrap().iter().enumerate() {
        let model = case["model"].as_str().unwrap();
        let breakers: Vec<&str> = case["breakers"].as_array().unwrap().iter().map(|b| b.as_str().unwrap()).collect();
        let (tok, cx) = toks.entry(model.to_string()).or_insert_with(|| {
            let tok = tokenizer(model);
            let cx = SpecContext {
                vocab: Some(Arc::clone(tok.grammar_vocab())),
                tokenizer: Some(tok.breaker_tokenizer()),
                ..SpecContext::default()
            };
            (tok, cx)
        });
        let n_vocab = tok.n_vocab();
        let spec = format!("dry({dry},breakers={})", quote(&breakers));
        let (with, without) = chains.entry(format!("{model} {spec}")).or_insert_with(|| {
            let with = parse_with(&spec, cx).unwrap_or_else(|e| panic!("{spec}: {e}"));
            (with, parse_with(&format!("dry({dry})"), cx).unwrap())
        });
        let history: Vec<u32> =
            case["history"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
        let want: Vec<(u32, f32)> = case["penalties"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_f64().unwrap() as f32))
            .collect();
        let got = penalties(with, &history, n_vocab);
        if got != want {
            failures.push(format!(
                "case {i} ({model}, {breakers:?}, history {history:?}):\n  llama.cpp {want:?}\n  ours      {got:?}"
            ));
        }
        checked += 1;
        penalised += usize::from(!want.is_empty());
        cut += usize::from(penalties(without, &history, n_vocab) != want);
    }
    assert!(failures.is_empty(), "{} of {checked} cases differ:\n{}", failures.len(), failures.join("\n"));
    // The reference exercises the breakers: many cases penalise, and in many the breakers change
    // what is penalised.
    assert!(checked >= 150 && penalised >= 100 && cut >= 40, "{checked} cases, {penalised} penalising, {cut} cut");
}
