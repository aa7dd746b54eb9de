//! Greedy decoding under a grammar against llama.cpp's own grammar sampler on SmolLM2-135M:
//! `tests/data/llama_grammar_greedy.json` holds, per case, the grammar, the prompt, llama.cpp's
//! prompt tokens, the tokens it chose (its grammar sampler on the full row, then the argmax) and,
//! at each step, the gap between the masked row's two largest logits. Ours must choose the same
//! tokens; a divergence is allowed only at a near-tie of llama.cpp's logits (a gap below
//! [`NEAR_TIE`]: its logits move by about 0.2 between batch shapes), where the comparison stops.
//! Free-running decoding stops comparing at the first near-tie, so each case is also replayed
//! teacher-forced: llama.cpp's tokens are fed one by one, each must be one our grammar accepts,
//! and at every step with a clear gap our grammar-masked argmax must be llama.cpp's token.
//! The cases: JSON (`grammars/json.gbnf`), the person schema converted by the `schema` crate, a
//! bounded list, and an answer with alternatives. The reference was made with llama.cpp through
//! llama-cpp-python 0.3.36 (see the data file's `generated_by`).

#![allow(clippy::print_stdout)] // the per-case report

mod common;

use runner::spec::generate;
use runner::{BackendKind, Sampling, Session, SessionOptions};
use sampling::Chain;
use sampling::chain_spec::{SpecContext, parse_with};
use std::sync::Arc;

/// A gap between llama.cpp's two best logits below which our choice may differ.
const NEAR_TIE: f64 = 0.5;

#[test]
fn greedy_grammar_decoding_matches_llama_cpp() {
    let m = common::smollm2();
    let tok = m.tokenizer.as_ref().unwrap();
    let data: serde_json::Value =
        serde_json::from_str(include_str!("data/llama_grammar_greedy.json")).expect("the reference data");
    let dir = std::env::temp_dir().join(format!("runner-llama-grammar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut report = Vec::new();
    for (i, case) in data["cases"].as_array().unwrap().iter().enumerate() {
        let name = case["name"].as_str().unwrap();
        let ids =
            |k: &str| -> Vec<u32> { case[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect() };
        let (want, prompt_ids) = (ids("tokens"), ids("prompt_tokens"));
        let margins: Vec<f64> = case["margins"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let prompt = tok.encode(case["prompt"].as_str().unwrap()).unwrap();
        assert_eq!(prompt, prompt_ids, "{name}: the prompt's tokens");
        let file = dir.join(format!("{i}.gbnf"));
        std::fs::write(&file, case["grammar"].as_str().unwrap()).unwrap();
        for sampling in [Sampling::Backend, Sampling::Cpu] {
            let cx = SpecContext { vocab: Some(Arc::clone(tok.grammar_vocab())), ..SpecContext::default() };
            let chain = parse_with(&format!("grammar(file={});greedy", file.display()), &cx).unwrap();
            let n = want.len();
            let opts = SessionOptions {
                n_ctx: (prompt.len() + n + 1).next_multiple_of(16),
                backend: BackendKind::Cpu,
                threads: 2,
                sampling,
                ..SessionOptions::default()
            };
            let mut s = Session::new(m.clone(), opts, vec![chain]).unwrap();
            let g = generate(&mut s, None, std::slice::from_ref(&prompt), n, |_| Ok(())).unwrap();
            let got = &g.tokens[0];
            match got.iter().zip(&want).position(|(a, b)| a != b) {
                None => {
                    // Where the grammar is complete and allows only an end, the runner ends the
                    // sequence; llama.cpp samples the end-of-generation token there.
                    let rest = &want[got.len()..];
                    let ended = g.ended[0] == Some(runner::spec::Ending::GrammarComplete);
                    assert!(
                        rest.is_empty() || (ended && rest.len() == 1 && tok.is_eog(rest[0])),
                        "{name} ({sampling:?}): ended early at {got:?}"
                    );
                    report.push(format!("{name} ({sampling:?}): {} tokens equal", got.len()));
                }
                Some(at) => {
                    assert!(
                        margins[at] < NEAR_TIE,
                        "{name} ({sampling:?}): token {at} is {} where llama.cpp chose {} with a clear margin of {}",
                        got[at],
                        want[at],
                        margins[at]
                    );
                    report.push(format!("{name} ({sampling:?}): equal up to a near-tie at {at} (gap {})", margins[at]));
                }
            }
        }
        // Teacher-forced: every step of llama.cpp's path.
        let cx = SpecContext { vocab: Some(Arc::clone(tok.grammar_vocab())), ..SpecContext::default() };
        let mut chain = parse_with(&format!("grammar(file={});greedy", file.display()), &cx).unwrap();
        let opts = SessionOptions {
            n_ctx: (prompt.len() + want.len() + 1).next_multiple_of(16),
            backend: BackendKind::Cpu,
            threads: 2,
            sampling: Sampling::Cpu,
            ..SessionOptions::default()
        };
        let mut s = Session::new(m.clone(), opts, vec![Chain::parse("greedy").unwrap()]).unwrap();
        let mut logits = s.eval(&[&prompt]).unwrap().remove(0);
        let (mut clear, mut ties) = (0, 0);
        for (at, &t) in want.iter().enumerate() {
            let ours = chain.run(&logits).unwrap().selected.unwrap();
            if margins[at] >= NEAR_TIE {
                assert_eq!(
                    ours, t,
                    "{name}, teacher-forced step {at}: llama.cpp chose {t} with a gap of {}",
                    margins[at]
                );
                clear += 1;
            } else {
                ties += usize::from(ours != t);
            }
            chain
                .try_accept(t)
                .unwrap_or_else(|e| panic!("{name}, step {at}: our grammar refuses llama.cpp's {t}: {e}"));
            if at + 1 < want.len() {
                logits = s.eval(&[&[t]]).unwrap().remove(0);
            }
        }
        report.push(format!(
            "{name} (teacher-forced): {} tokens, {clear} clear steps equal, {ties} near-ties differ",
            want.len()
        ));
    }
    std::fs::remove_dir_all(&dir).ok();
    println!("{}", report.join("\n"));
}
