//! llama.cpp's `tests/test-llama-grammar.cpp`, ported to our public API. That test builds a
//! grammar from hand-written rules (an older shape of the arithmetic grammar, rules named like
//! generated ones), checks the parse stacks it starts from, and checks which of the characters
//! `%` (37) to `;` (59) each stack rejects. Our rules cannot be built by hand, and rule names
//! cannot hold `_`, so the same rules are written here as GBNF with `-` in the names (and `""` for
//! an empty last alternate, since a newline after `|` continues the rule); the rules must equal
//! llama.cpp's up to that renaming. The stacks are not public: the test checks their
//! number through the matcher's `Debug` output and their tops through the first characters the
//! matcher allows (the union of what the stacks accept).

use grammar::{Elem, Grammar, Kind, Matcher, Vocab};
use std::collections::BTreeSet;
use std::sync::Arc;

const TEXT: &str = r#"
root ::= root-5
root-1 ::= expr "=" ws term "\n"
expr ::= term expr-7
ws ::= ws-12
term ::= ident | num | "(" ws expr ")" ws
root-5 ::= root-1 root-5 | root-1
expr-6 ::= [-+*/] term
expr-7 ::= expr-6 expr-7 | ""
ident ::= [a-z] ident-10 ws
num ::= num-11 ws
ident-10 ::= [a-z0-9_] ident-10 | ""
num-11 ::= [0-9] num-11 | [0-9]
ws-12 ::= [ \t\n] ws-12 | ""
"#;

/// llama.cpp's rule names by its ids.
const NAMES: [&str; 13] = [
    "root", "root_1", "expr", "ws", "term", "root_5", "expr_6", "expr_7", "ident", "num", "ident_10", "num_11", "ws_12",
];

fn e(kind: Kind, value: u32) -> Elem {
    Elem { kind, value }
}

fn expected_rules() -> Vec<Vec<Elem>> {
    use Kind::*;
    vec![
        vec![e(RuleRef, 5), e(End, 0)],
        vec![e(RuleRef, 2), e(Char, 61), e(RuleRef, 3), e(RuleRef, 4), e(Char, 10), e(End, 0)],
        vec![e(RuleRef, 4), e(RuleRef, 7), e(End, 0)],
        vec![e(RuleRef, 12), e(End, 0)],
        vec![
            e(RuleRef, 8),
            e(Alt, 0),
            e(RuleRef, 9),
            e(Alt, 0),
            e(Char, 40),
            e(RuleRef, 3),
            e(RuleRef, 2),
            e(Char, 41),
            e(RuleRef, 3),
            e(End, 0),
        ],
        vec![e(RuleRef, 1), e(RuleRef, 5), e(Alt, 0), e(RuleRef, 1), e(End, 0)],
        vec![e(Char, 45), e(CharAlt, 43), e(CharAlt, 42), e(CharAlt, 47), e(RuleRef, 4), e(End, 0)],
        vec![e(RuleRef, 6), e(RuleRef, 7), e(Alt, 0), e(End, 0)],
        vec![e(Char, 97), e(CharRngUpper, 122), e(RuleRef, 10), e(RuleRef, 3), e(End, 0)],
        vec![e(RuleRef, 11), e(RuleRef, 3), e(End, 0)],
        vec![
            e(Char, 97),
            e(CharRngUpper, 122),
            e(CharAlt, 48),
            e(CharRngUpper, 57),
            e(CharAlt, 95),
            e(RuleRef, 10),
            e(Alt, 0),
            e(End, 0),
        ],
        vec![e(Char, 48), e(CharRngUpper, 57), e(RuleRef, 11), e(Alt, 0), e(Char, 48), e(CharRngUpper, 57), e(End, 0)],
        vec![e(Char, 32), e(CharAlt, 9), e(CharAlt, 10), e(RuleRef, 12), e(Alt, 0), e(End, 0)],
    ]
}

#[test]
fn hand_written_rules_and_initial_stacks() {
    let g = Grammar::new(TEXT).unwrap();
    let rules = g.rules();
    assert_eq!(rules.len(), NAMES.len());
    // Our id of llama.cpp's rule `i`, and back.
    let ours = |i: usize| rules.id(&NAMES[i].replace('_', "-")).unwrap_or_else(|| panic!("no rule {}", NAMES[i]));
    let theirs = |id: u32| (0..NAMES.len()).find(|&i| ours(i) == id as usize).unwrap() as u32;
    for (i, want) in expected_rules().iter().enumerate() {
        let got: Vec<Elem> = rules
            .rule(ours(i))
            .iter()
            .map(|x| if x.kind == Kind::RuleRef { e(Kind::RuleRef, theirs(x.value)) } else { *x })
            .collect();
        assert_eq!(&got, want, "rule {}", NAMES[i]);
    }

    // llama.cpp starts from 8 stacks: two alternates of `root_5`, times the term's four starts
    // (`(`, two `[0-9]` of `num_11`, `[a-z]`).
    let pieces: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).collect();
    let vocab = Arc::new(Vocab::new(pieces, &[]));
    let m = Matcher::new(&g, Arc::clone(&vocab));
    let debug = format!("{m:?}");
    assert!(debug.contains("stacks: 8"), "{debug}");

    // Per stack llama.cpp rejects, of the characters 37..=59: all but `(` (stacks 0 and 4), all
    // but the digits (stacks 1, 2, 5, 6), all of them (stacks 3 and 7, on `[a-z]`). Their union of
    // accepted characters is what the matcher allows; above 59 the `[a-z]` stacks add letters.
    let mask = m.mask().unwrap();
    let allowed: BTreeSet<u8> = (0u8..128).filter(|&b| mask[usize::from(b) / 32] >> (b % 32) & 1 == 1).collect();
    let in_window: BTreeSet<u8> = allowed.iter().copied().filter(|b| (37..=59).contains(b)).collect();
    let want_window: BTreeSet<u8> = std::iter::once(b'(').chain(b'0'..=b'9').collect();
    assert_eq!(in_window, want_window);
    let want_all: BTreeSet<u8> = want_window.iter().copied().chain(b'a'..=b'z').collect();
    assert_eq!(allowed, want_all);
}
