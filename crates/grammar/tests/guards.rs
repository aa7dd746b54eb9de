//! Guard rails: grammars whose matching would blow up are refused with a clear error, never a
//! stalled batch: left recursion at parse time, an explosion of parse stacks while matching,
//! repetition counts beyond llama.cpp's limits.

use grammar::{Grammar, GrammarError, MAX_STACKS, Matcher, Vocab};
use std::sync::Arc;

#[test]
fn an_explosion_of_parse_stacks_is_an_error_not_a_stall() {
    // After n "a"s every sequence of n pending "b"s and "c"s is a parse: 2^n distinct stacks.
    let g = Grammar::new(r#"root ::= "a" root "b" | "a" root "c" | "d""#).unwrap();
    let v = Arc::new(Vocab::new(vec![b"a".to_vec(), b"b".to_vec(), b"d".to_vec()], &[]));
    let mut m = Matcher::new(&g, v);
    let mut err = None;
    for i in 0..20 {
        // The mask looks one character ahead, so it meets the limit first.
        if let Err(e) = m.mask().and_then(|_| m.accept(0)) {
            err = Some((i, e));
            break;
        }
    }
    let (i, e) = err.expect("the stacks must hit the limit within 20 tokens");
    assert_eq!(e, GrammarError::TooManyStacks { limit: MAX_STACKS });
    assert!(i >= 10, "2^12 = 4096 stacks fit ({i})");
    assert!(e.to_string().contains("too ambiguous"), "{e}");
    // The matcher is where it was: a token that needs no more stacks still goes through.
    m.accept(2).unwrap();
    m.accept(1).unwrap();
}

#[test]
fn left_recursion_and_huge_repetitions_are_refused() {
    for (text, what) in [
        ("root ::= root \"a\" | \"b\"", "left recursion"),
        ("root ::= x\nx ::= \"\" | x \"a\"", "left recursion"),
        ("root ::= \"a\"{2001}", "exceeds sane defaults"),
        ("root ::= \"a\"{5,3}", "below the minimum"),
    ] {
        let e = Grammar::new(text).unwrap_err().to_string();
        assert!(e.contains(what), "{text:?}: {e}");
    }
}

#[test]
fn nested_optional_rules_are_refused_quickly_not_expanded_for_ever() {
    // Ten levels of `a? a?`: 2^10 ways to reach each character, expanded again from every stack.
    let mut text = String::from("root ::= a0\n");
    for i in 0..10 {
        text += &format!("a{i} ::= a{}? a{}?\n", i + 1, i + 1);
    }
    text += "a10 ::= \"x\"\n";
    match Grammar::new(&text) {
        Err(e) => assert_eq!(e, GrammarError::TooManyStacks { limit: MAX_STACKS }),
        Ok(g) => assert!(!g.matches("xxxx"), "too ambiguous to match, so no match"),
    }
    // The left-recursion check explores each rule once: 18 levels of it take no time to refuse.
    let mut text = String::from("root ::= a0\n");
    for i in 0..17 {
        text += &format!("a{i} ::= a{}? a{}?\n", i + 1, i + 1);
    }
    text += "a17 ::= a1\n";
    let e = Grammar::new(&text).unwrap_err();
    assert!(matches!(e, GrammarError::LeftRecursion { .. }), "{e}");
}
