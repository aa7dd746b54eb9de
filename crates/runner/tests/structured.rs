//! Structured output on SmolLM2-135M-Instruct: sequences under a JSON schema (converted by the
//! `schema` crate, masked by the grammar stage on the backend) produce JSON that parses and
//! satisfies the schema, for 20 seeds in one batch, and end at the model's end-of-generation
//! token; grammar-first and optimistic modes, and backend and CPU sampling, give the same tokens.

mod common;

use runner::Drafter;
use runner::spec::{Ending, generate};
use runner::{BackendKind, Model, Sampling, Session, SessionOptions};
use sampling::Chain;
use sampling::chain_spec::{SpecContext, parse_with};
use sampling::speculative::ngram::NgramDrafter;
use std::sync::Arc;

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "name": { "type": "string", "minLength": 1, "maxLength": 24 },
    "age": { "type": "integer", "minimum": 18, "maximum": 99 },
    "role": { "enum": ["engineer", "designer", "manager"] },
    "skills": { "type": "array", "items": { "enum": ["rust", "python", "gpu", "sql"] }, "maxItems": 3 },
    "active": { "type": "boolean" }
  },
  "required": ["name", "age", "role", "skills", "active"],
  "additionalProperties": false
}"#;

const PROMPT: &str = "<|im_start|>user\nDescribe an employee as JSON.<|im_end|>\n<|im_start|>assistant\n";

fn schema_file() -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("runner-structured-{}.schema.json", std::process::id()));
    std::fs::write(&p, SCHEMA).unwrap();
    p
}

fn chains(m: &Model, specs: &[String]) -> Vec<Chain> {
    let vocab = m.tokenizer.as_ref().map(|t| Arc::clone(t.grammar_vocab()));
    let cx = SpecContext { default_seed: 0, vocab, ..SpecContext::default() };
    specs.iter().map(|s| parse_with(s, &cx).unwrap()).collect()
}

/// Generates up to `n` tokens for each chain of `specs` from [`PROMPT`], in one batch.
fn run(m: &Arc<Model>, specs: &[String], sampling: Sampling, n: usize) -> runner::spec::Generation {
    run_with(m, specs, sampling, n, None)
}

/// [`run`], speculative with `drafter` (drafts of up to [`K`] tokens).
fn run_with(
    m: &Arc<Model>,
    specs: &[String],
    sampling: Sampling,
    n: usize,
    drafter: Option<&mut Drafter>,
) -> runner::spec::Generation {
    let tok = m.tokenizer.as_ref().unwrap();
    let prompt = tok.encode(PROMPT).unwrap();
    let k = if drafter.is_some() { K } else { 0 };
    let opts = SessionOptions {
        n_ctx: runner::spec::cells_needed(prompt.len(), n, k).next_multiple_of(16),
        n_draft_max: k,
        backend: BackendKind::Cpu,
        threads: 2,
        sampling,
        ..SessionOptions::default()
    };
    let mut s = Session::new(m.clone(), opts, chains(m, specs)).unwrap();
    let prompts = vec![prompt; specs.len()];
    generate(&mut s, drafter, &prompts, n, |_| Ok(())).unwrap()
}

/// The most draft tokens a step.
const K: usize = 6;

/// The schema's constraints, checked on the parsed value.
fn check(v: &serde_json::Value) -> Result<(), String> {
    let o = v.as_object().ok_or("not an object")?;
    let keys: Vec<&str> = o.keys().map(String::as_str).collect();
    if keys != ["name", "age", "role", "skills", "active"] {
        return Err(format!("keys {keys:?}"));
    }
    let name = o["name"].as_str().ok_or("name")?;
    if name.chars().count() < 1 || name.chars().count() > 24 {
        return Err(format!("name length {name:?}"));
    }
    let age = o["age"].as_i64().ok_or("age is not an integer")?;
    if !(18..=99).contains(&age) {
        return Err(format!("age {age}"));
    }
    if !["engineer", "designer", "manager"].contains(&o["role"].as_str().ok_or("role")?) {
        return Err(format!("role {}", o["role"]));
    }
    let skills = o["skills"].as_array().ok_or("skills")?;
    if skills.len() > 3 || skills.iter().any(|s| !["rust", "python", "gpu", "sql"].contains(&s.as_str().unwrap_or("")))
    {
        return Err(format!("skills {skills:?}"));
    }
    o["active"].as_bool().ok_or("active")?;
    Ok(())
}

#[test]
fn json_schema_sequences_produce_valid_json_for_20_seeds() {
    let m = common::smollm2();
    let tok = m.tokenizer.as_ref().unwrap();
    let file = schema_file();
    let specs: Vec<String> = (0..20)
        .map(|seed| format!("json_schema(file={});top_k(k=40);temp(t=0.9);dist(seed={seed})", file.display()))
        .collect();
    let g = run(&m, &specs, Sampling::Backend, 120);
    let grammar = grammar::Grammar::new(&schema::to_grammar_str(SCHEMA).unwrap()).unwrap();
    let mut distinct = std::collections::HashSet::new();
    for (seed, toks) in g.tokens.iter().enumerate() {
        // It ends at the end-of-generation token, or where its grammar allows nothing else (after
        // the closing brace's longest run of spaces).
        let body = match g.ended[seed] {
            Some(Ending::EndOfGeneration(t)) => {
                assert_eq!(toks.last(), Some(&t));
                &toks[..toks.len() - 1]
            }
            Some(Ending::GrammarComplete) => &toks[..],
            None => panic!("seed {seed} did not end in {} tokens", toks.len()),
        };
        let text = tok.decode(body).unwrap();
        assert!(grammar.matches(&text), "seed {seed}: the grammar does not accept {text:?}");
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("seed {seed}: {e} in {text:?}"));
        check(&v).unwrap_or_else(|e| panic!("seed {seed}: {e} in {text}"));
        distinct.insert(text);
    }
    assert!(distinct.len() > 10, "the seeds must give different documents ({})", distinct.len());
}

#[test]
fn both_modes_and_both_sampling_paths_give_the_same_tokens() {
    let m = common::smollm2();
    let file = schema_file();
    let spec = |mode: &str, tail: &str| format!("json_schema(file={},mode={mode});{tail}", file.display());
    let specs = vec![
        spec("first", "greedy"),
        spec("optimistic", "greedy"),
        spec("first", "top_k(k=20);temp(t=0.8);dist(seed=7)"),
        spec("optimistic", "top_k(k=20);temp(t=0.8);dist(seed=7)"),
    ];
    let backend = run(&m, &specs, Sampling::Backend, 60);
    let cpu = run(&m, &specs, Sampling::Cpu, 60);
    assert_eq!(backend.tokens, cpu.tokens, "backend vs CPU sampling");
    // Greedy: the optimistic check never changes the argmax the mask keeps.
    assert_eq!(backend.tokens[0], backend.tokens[1], "greedy: grammar-first vs optimistic");
    assert!(backend.tokens[0].len() > 10);
}

#[test]
fn drafted_positions_follow_the_grammar_along_the_draft() {
    // Speculative decoding under a grammar: each drafted position is masked by the grammar
    // advanced along the draft before it, and a rejected draft leaves the grammar where the
    // accepted tokens end. The tokens equal plain decoding's, with backend and CPU sampling.
    let m = common::smollm2();
    let file = schema_file();
    let specs = vec![
        format!("json_schema(file={});greedy", file.display()),
        format!("json_schema(file={},mode=optimistic);top_k(k=10);greedy", file.display()),
    ];
    let plain = run(&m, &specs, Sampling::Backend, 70);
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let mut d = Drafter::Ngram(NgramDrafter::new(1, K, 0.0).unwrap());
        let g = run_with(&m, &specs, sampling, 70, Some(&mut d));
        assert_eq!(g.tokens, plain.tokens, "{sampling:?}");
        assert!(g.drafted > 20 && g.accepted > 0 && g.accepted < g.drafted, "{} of {}", g.accepted, g.drafted);
    }
}
