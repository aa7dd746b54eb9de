//! Lazy grammars (llama.cpp's `llama_sampler_init_grammar_lazy_patterns`): every token allowed
//! until a trigger appears in the output; then the grammar takes the text from the trigger on.

use grammar::{Grammar, GrammarError, Matcher, Trigger, Vocab};
use std::sync::Arc;

const TEXTS: [&str; 10] = ["hello", " <tool>", "<tool>", "{", "}", "ab", "c", " wor", "ld", "<eos>"];

fn vocab() -> Arc<Vocab> {
    Arc::new(Vocab::new(TEXTS.iter().map(|t| t.as_bytes().to_vec()).collect(), &[9]))
}

fn id(text: &str) -> u32 {
    TEXTS.iter().position(|t| *t == text).unwrap() as u32
}

fn allowed(m: &Matcher) -> Vec<&'static str> {
    let mask = m.mask().unwrap();
    (0..TEXTS.len()).filter(|&t| mask[t / 32] >> (t % 32) & 1 == 1).map(|t| TEXTS[t]).collect()
}

const TOOL: &str = r#"root ::= "<tool>" "{" [a-c]* "}""#;

fn lazy(triggers: &[Trigger]) -> Matcher {
    Matcher::lazy(&Grammar::new(TOOL).unwrap(), vocab(), triggers).unwrap()
}

#[test]
fn a_word_anywhere_starts_the_grammar_at_the_word() {
    let mut m = lazy(&[Trigger::Word("<tool>".into())]);
    assert!(m.is_awaiting_trigger());
    assert_eq!(allowed(&m).len(), TEXTS.len(), "everything while waiting");
    for t in ["hello", " wor", "ld"] {
        m.accept(id(t)).unwrap();
        assert!(m.is_awaiting_trigger());
    }
    // The token holding the trigger: the grammar takes it from the trigger's first byte.
    m.accept(id(" <tool>")).unwrap();
    assert!(!m.is_awaiting_trigger());
    assert_eq!(allowed(&m), ["{"]);
    for t in ["{", "ab", "c", "}"] {
        m.accept(id(t)).unwrap();
    }
    assert!(m.can_end() && m.must_end().unwrap());
    assert_eq!(allowed(&m), ["<eos>"]);
    m.reset();
    assert!(m.is_awaiting_trigger());
}

#[test]
fn a_word_split_over_tokens_fires_where_it_completes() {
    let v = Arc::new(Vocab::new(vec![b"x <to".to_vec(), b"ol>{".to_vec(), b"}".to_vec(), b"a".to_vec()], &[]));
    let g = Grammar::new(TOOL).unwrap();
    let mut m = Matcher::lazy(&g, v, &[Trigger::Word("<tool>".into())]).unwrap();
    m.accept(0).unwrap();
    assert!(m.is_awaiting_trigger());
    m.accept(1).unwrap();
    assert!(!m.is_awaiting_trigger());
    // "<to" from the first token and "ol>{" from the second were replayed: "}" or "a" next.
    assert!(m.allows(2).unwrap() && m.allows(3).unwrap() && !m.allows(0).unwrap());
}

#[test]
fn a_trigger_token_starts_the_grammar_with_it() {
    let g = Grammar::with_vocab(r#"root ::= <[2]> "{" [a-c]* "}""#, "root", vocab().as_ref()).unwrap();
    let mut m = Matcher::lazy(&g, vocab(), &[Trigger::Token(id("<tool>"))]).unwrap();
    m.accept(id("hello")).unwrap();
    assert!(m.is_awaiting_trigger());
    m.accept(id("<tool>")).unwrap();
    assert_eq!(allowed(&m), ["{"]);
}

#[test]
fn a_full_pattern_must_match_the_whole_output_from_its_start() {
    let mut m = lazy(&[Trigger::PatternFull(r"\s*(<tool>[\s\S]*)".into())]);
    m.accept(id("hello")).unwrap();
    m.accept(id(" <tool>")).unwrap();
    assert!(m.is_awaiting_trigger(), "\"hello <tool>\" does not match from the start");
    let mut m = lazy(&[Trigger::PatternFull(r"\s*(<tool>[\s\S]*)".into())]);
    m.accept(id(" <tool>")).unwrap();
    assert!(!m.is_awaiting_trigger());
    assert_eq!(allowed(&m), ["{"]);
}

#[test]
fn a_trigger_whose_text_the_grammar_rejects_is_an_error_and_waits_on() {
    // The trigger fires on "wor", but the grammar wants "<tool>" there.
    let mut m = lazy(&[Trigger::Word("wor".into())]);
    m.accept(id("hello")).unwrap();
    let e = m.accept(id(" wor")).unwrap_err();
    assert!(matches!(e, GrammarError::Rejected { .. }), "{e}");
    assert!(m.is_awaiting_trigger());
    m.accept(id(" <tool>")).unwrap();
}

#[test]
fn bad_triggers_are_errors() {
    let g = Grammar::new(TOOL).unwrap();
    for (t, what) in [
        (vec![], "needs a trigger"),
        (vec![Trigger::Word(String::new())], "empty"),
        (vec![Trigger::Pattern("(".into())], "bad trigger"),
        (vec![Trigger::Token(99)], "outside the vocabulary"),
    ] {
        let e = Matcher::lazy(&g, vocab(), &t).unwrap_err().to_string();
        assert!(e.contains(what), "{t:?}: {e}");
    }
}
