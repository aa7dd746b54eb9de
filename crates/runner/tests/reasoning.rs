//! The reasoning budget in the runner, on SmolLM2 with a synthetic thinking template (the prompt
//! ends in `<think>`, which SmolLM2 spells in several tokens, and `</think>` closes the block):
//! after N generated tokens the end's tokens are forced one a step, the same with backend and CPU
//! sampling, with a sampling chain, with n-gram speculation (drafted outputs past the budget are
//! forced too), and with a budget of 0 and a budget message; the tags' errors.

mod common;

use runner::reasoning::{ReasoningTags, budget_stage, with_budget};
use runner::spec::{self, Drafter};
use runner::{BackendKind, Model, Sampling, Session, SessionOptions};
use sampling::Chain;
use sampling::speculative::ngram::NgramDrafter;
use std::sync::Arc;

/// The prompt's text before the start tag, whose tokens follow (so the prompt ends with them
/// whatever the tokenizer would merge across the boundary).
const BEFORE: &str = "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat. the cat sat on the \
                      mat. the cat sat on the mat.";
const STEPS: usize = 24;
const K: usize = 6;

fn tags() -> ReasoningTags {
    ReasoningTags { start: "<think>".into(), end: vec!["</think>".into()], message: None }
}

fn ids(m: &Model, text: &str) -> Vec<u32> {
    m.tokenizer.as_ref().unwrap().encode(text).unwrap()
}

/// `BEFORE`'s tokens, then `<think>`'s.
fn think_prompt(m: &Model) -> Vec<u32> {
    [ids(m, BEFORE), ids(m, "<think>")].concat()
}

/// `STEPS` tokens of `spec` after [`think_prompt`], with a budget of `budget` (none: no stage) and
/// `tags`, on the CPU backend, with `sampling`, plainly or with n-gram drafts.
fn run(budget: Option<i64>, tags: &ReasoningTags, spec: &str, sampling: Sampling, ngram: bool) -> spec::Generation {
    let m = common::smollm2();
    let prompt = think_prompt(&m);
    let mut chain = Chain::parse(spec).unwrap();
    if let Some(b) = budget {
        chain = with_budget(&chain, budget_stage(m.tokenizer.as_ref().unwrap(), b, tags, &prompt).unwrap());
    }
    let k = if ngram { K } else { 0 };
    let opts = SessionOptions {
        n_ctx: spec::cells_needed(prompt.len(), STEPS, k),
        backend: BackendKind::Cpu,
        threads: 2,
        sampling,
        n_draft_max: k,
        ..SessionOptions::default()
    };
    let mut s = Session::new(Arc::clone(&m), opts, vec![chain]).unwrap();
    let mut drafter = ngram.then(|| Drafter::Ngram(NgramDrafter::new(2, K, 0.75).unwrap()));
    spec::generate(&mut s, drafter.as_mut(), &[prompt], STEPS, |_| Ok(())).unwrap()
}

#[test]
fn the_end_is_forced_after_the_budget_on_the_backend_and_the_cpu_and_with_drafts() {
    let m = common::smollm2();
    let end = ids(&m, "</think>");
    assert!(end.len() > 1, "the end is several tokens: {end:?}");
    let n = 6;
    let free = run(None, &tags(), "greedy", Sampling::Backend, false).tokens[0].clone();
    // The test means something only where the model would not close the block by itself.
    assert!(!free.windows(end.len()).any(|w| w == end), "free run closes the block: {free:?}");
    let want: Vec<u32> = free[..n].iter().chain(&end).copied().collect();
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let got = run(Some(n as i64), &tags(), "greedy", sampling, false).tokens[0].clone();
        assert_eq!(got[..n + end.len()], want[..], "{sampling:?}");
    }
    // With n-gram drafts (the repeated sentence makes them; the forced end rejects what they
    // propose there): the same tokens, drafts accepted.
    let plain = run(Some(n as i64), &tags(), "greedy", Sampling::Backend, false);
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let sp = run(Some(n as i64), &tags(), "greedy", sampling, true);
        assert_eq!(sp.tokens, plain.tokens, "{sampling:?}: speculative vs plain");
        assert!(sp.drafted > 0 && sp.accepted > 0, "{sampling:?}: {sp:?}");
    }
    // A sampling chain: the draws before the budget, then the end, backend and CPU alike.
    let chain = "top_k(k=40);temp(t=0.9);dist(seed=5)";
    let b = run(Some(3), &tags(), chain, Sampling::Backend, false).tokens[0].clone();
    let c = run(Some(3), &tags(), chain, Sampling::Cpu, false).tokens[0].clone();
    assert_eq!(b, c);
    assert_eq!(b[3..3 + end.len()], end[..]);
}

#[test]
fn a_zero_budget_and_a_budget_message() {
    let m = common::smollm2();
    let end = ids(&m, "</think>");
    // Budget 0: the block the prompt opened ends at once.
    let got = run(Some(0), &tags(), "greedy", Sampling::Backend, false).tokens[0].clone();
    assert_eq!(got[..end.len()], end[..]);
    // A message is forced before the end.
    let msg = ReasoningTags { message: Some(" Enough thinking.".into()), ..tags() };
    let forced: Vec<u32> = ids(&m, " Enough thinking.").into_iter().chain(end.iter().copied()).collect();
    let got = run(Some(2), &msg, "greedy", Sampling::Cpu, false).tokens[0].clone();
    assert_eq!(got[2..2 + forced.len()], forced[..]);
    // An unlimited budget never forces: the free run.
    let free = run(None, &tags(), "greedy", Sampling::Backend, false).tokens;
    assert_eq!(run(Some(-1), &tags(), "greedy", Sampling::Backend, false).tokens, free);
}

#[test]
fn a_prompt_opens_a_block_by_its_text_whatever_its_tokens() {
    let m = common::smollm2();
    let tk = m.tokenizer.as_ref().unwrap();
    let t = ReasoningTags { end: vec!["</think>".into(), "</thought>".into()], ..tags() };
    let opens = |text: &str| runner::reasoning::opens_block(tk, &t, &ids(&m, text)).unwrap();
    // `.<think>` is tokenized with a `.<` token: the start tokens are not the prompt's last ones.
    assert!(!ids(&m, "mat.<think>").ends_with(&ids(&m, "<think>")));
    assert!(opens("mat.<think>"));
    assert!(opens("a<think>b</think> c <think> let me see"));
    assert!(!opens("a<think>b</think>"));
    assert!(!opens("a<think>b</thought> done"));
    assert!(!opens("no block at all"));
}

#[test]
fn tags_default_to_think_tokens_only_where_the_vocabulary_has_them() {
    let m = common::smollm2();
    let tk = m.tokenizer.as_ref().unwrap();
    // SmolLM2 has no `<think>` token: the texts must be given.
    let e = ReasoningTags::resolve(tk, None, &[], None).unwrap_err().to_string();
    assert!(e.contains("--reasoning-start"), "{e}");
    let e = ReasoningTags::resolve(tk, Some("<think>"), &[], None).unwrap_err().to_string();
    assert!(e.contains("--reasoning-end"), "{e}");
    let e = ReasoningTags::resolve(tk, Some(""), &["</think>".into()], None).unwrap_err().to_string();
    assert!(e.contains("non-empty"), "{e}");
    let t = ReasoningTags::resolve(tk, Some("<think>"), &["</think>".into(), "</thought>".into()], None).unwrap();
    assert_eq!(t.end.len(), 2);
}
