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

#[test]
fn a_deep_chain_of_rules_is_an_error_or_a_grammar_never_a_stack_overflow() {
    // r0 ::= "v0" | r1, r1 ::= "v1" | r2, ...: each rule reached through the one before it.
    for n in [1_000usize, 20_000] {
        let mut text = String::from("root ::= r0\n");
        for i in 0..n {
            text += &format!("r{i} ::= \"v{i}\" | r{}\n", i + 1);
        }
        text += &format!("r{n} ::= \"end\"\n");
        let t = std::thread::Builder::new().stack_size(2 << 20).spawn(move || match Grammar::new(&text) {
            Ok(g) => {
                let v = Arc::new(Vocab::new(vec![b"v".to_vec(), b"0".to_vec(), b"e".to_vec()], &[]));
                let m = Matcher::new(&g, v);
                m.mask().map(|_| ()).map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        });
        let r = t.unwrap().join().expect("no stack overflow, no panic");
        // a short chain is a grammar; a long one expands through every rule at its start
        if n == 1_000 {
            assert_eq!(r, Ok(()));
        } else {
            assert!(r.unwrap_err().contains("too ambiguous"));
        }
    }
}

#[test]
fn deeply_nested_groups_are_an_error_not_a_stack_overflow() {
    for depth in [grammar::MAX_NESTING, 100_000] {
        let text = format!("root ::= {}\"a\"{}", "(".repeat(depth), ")".repeat(depth));
        let r = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || Grammar::new(&text).map(|g| g.matches("a")).map_err(|e| e.to_string()))
            .unwrap()
            .join()
            .expect("no stack overflow, no panic");
        if depth == grammar::MAX_NESTING {
            assert_eq!(r, Ok(true));
        } else {
            assert!(r.unwrap_err().contains("nest"), "a clear error names the nesting");
        }
    }
}
