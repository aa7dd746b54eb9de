//! The parser cases of llama.cpp's `tests/test-grammar-parser.cpp`, checked against our parser:
//! for each grammar text, the symbol table (rule name to id, generated rules included) and every
//! rule's element sequence must be exactly llama.cpp's, and the texts llama.cpp refuses must be
//! refused here too. The grammar texts and expectations are llama.cpp's test data; the code is
//! ours. A few cases of our own at the end check error positions and the printer.

use grammar::{Elem, Grammar, GrammarError, Kind};

// Element constructors, to keep the expectations close to llama.cpp's tables.
fn ch(c: char) -> Elem {
    Elem { kind: Kind::Char, value: c as u32 }
}
fn not(c: char) -> Elem {
    Elem { kind: Kind::CharNot, value: c as u32 }
}
fn calt(c: char) -> Elem {
    Elem { kind: Kind::CharAlt, value: c as u32 }
}
fn upto(c: char) -> Elem {
    Elem { kind: Kind::CharRngUpper, value: c as u32 }
}
fn rref(id: u32) -> Elem {
    Elem { kind: Kind::RuleRef, value: id }
}
fn alt() -> Elem {
    Elem { kind: Kind::Alt, value: 0 }
}
fn end() -> Elem {
    Elem { kind: Kind::End, value: 0 }
}
fn tok(id: u32) -> Elem {
    Elem { kind: Kind::Token, value: id }
}
fn tok_not(id: u32) -> Elem {
    Elem { kind: Kind::TokenNot, value: id }
}

/// Parses `text` and checks its symbol table and its rules (all rules' elements, in rule id order,
/// each rule's `End` included) against llama.cpp's.
fn expect_parse(text: &str, symbols: &[(&str, usize)], elems: &[Elem]) {
    let g = Grammar::new(text).unwrap_or_else(|e| panic!("grammar failed to parse: {e}\n{text}"));
    let rules = g.rules();
    let mut ours: Vec<(String, usize)> = (0..rules.len()).map(|i| (rules.name(i).to_string(), i)).collect();
    ours.sort();
    let mut theirs: Vec<(String, usize)> = symbols.iter().map(|&(n, i)| (n.to_string(), i)).collect();
    theirs.sort();
    assert_eq!(ours, theirs, "symbol ids differ for grammar:{text}\nparsed:\n{rules}");
    for &(name, id) in symbols {
        assert_eq!(rules.id(name), Some(id), "id of {name}");
    }
    let flat: Vec<Elem> = (0..rules.len()).flat_map(|i| rules.rule(i).iter().copied()).collect();
    assert_eq!(flat, elems, "elements differ for grammar:{text}\nparsed:\n{rules}");
}

/// The text must be refused by the parser (a parse error, not a later check).
fn expect_parse_failure(text: &str) -> GrammarError {
    match Grammar::new(text) {
        Ok(g) => panic!("grammar should have failed to parse:{text}\nparsed:\n{}", g.rules()),
        Err(e @ GrammarError::Parse { .. }) => e,
        Err(e) => panic!("grammar should have failed in the parser, not with: {e}\n{text}"),
    }
}

#[test]
fn failures() {
    let cases = [
        "\n        root ::= \"a\"{,}\"\n    ",
        "\n        root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}\n    ",
        "\n        root ::= \"a\"{,10}\"\n    ",
        "\n        root ::= \"a\"{5000}\n    ",
        "\n        root ::= \"a\"{5000,}\n    ",
        "\n        root ::= \"a\"{5000,6000}\n    ",
    ];
    for text in cases {
        expect_parse_failure(text);
    }
}

#[test]
fn failure_positions() {
    // `{` followed by `,`: the integer is missing where the comma is (line 2: the text starts with
    // a newline; 8 spaces of indent, then `root ::= "a"{` is 13 characters).
    let e = expect_parse_failure("\n        root ::= \"a\"{,}\"\n    ");
    assert!(matches!(e, GrammarError::Parse { line: 2, column: 22, .. }), "{e:?}");
    // Too many repetitions: reported at the `{`.
    let e = expect_parse_failure("\n        root ::= \"a\"{5000}\n    ");
    assert!(matches!(e, GrammarError::Parse { line: 2, column: 21, .. }), "{e:?}");
    // The nested repetitions are refused at the second level's `{` (the first `{0,99}` is fine).
    let e = expect_parse_failure("root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}");
    assert!(matches!(e, GrammarError::Parse { line: 1, column: 29, .. }), "{e:?}");
    // Our own: an unterminated literal, a missing `::=`, an unknown escape, a bad hex escape, an
    // unclosed group, columns counted in characters.
    let e = expect_parse_failure("root ::= \"abc");
    assert!(matches!(e, GrammarError::Parse { line: 1, column: 14, .. }), "{e:?}");
    let e = expect_parse_failure("root ::= \"a\"\nnext := \"b\"");
    assert!(matches!(e, GrammarError::Parse { line: 2, column: 6, .. }), "{e:?}");
    let e = expect_parse_failure("root ::= \"\\q\"");
    assert!(matches!(e, GrammarError::Parse { line: 1, column: 11, .. }), "{e:?}");
    let e = expect_parse_failure("root ::= [\\x4]");
    assert!(matches!(e, GrammarError::Parse { line: 1, column: 13, .. }), "{e:?}");
    let e = expect_parse_failure("root ::= (\"a\" \"b\"\n");
    assert!(matches!(e, GrammarError::Parse { line: 2, column: 1, .. }), "{e:?}");
    let e = expect_parse_failure("root ::= \"é\" )");
    assert!(matches!(e, GrammarError::Parse { line: 1, column: 14, .. }), "{e:?}");
    let e = expect_parse_failure("root ::= \"a\"*+? x ::= \"b\"");
    assert!(matches!(e, GrammarError::Parse { line: 1, column: 19, .. }), "{e:?}");
}

#[test]
fn repetition_bounds() {
    // A maximum above the limit means no maximum.
    expect_parse(
        "\n        root ::= \"a\"{0,5000}\n    ",
        &[("root", 0), ("root_1", 1)],
        &[rref(1), end(), ch('a'), rref(1), alt(), end()],
    );
    expect_parse(
        "\n        root ::= \"a\"{3,5000}\n    ",
        &[("root", 0), ("root_1", 1)],
        &[ch('a'), ch('a'), ch('a'), rref(1), end(), ch('a'), rref(1), alt(), end()],
    );
}

#[test]
fn literals_and_classes() {
    expect_parse("\n        root  ::= \"a\"\n    ", &[("root", 0)], &[ch('a'), end()]);
    expect_parse(
        "\n        root  ::= \"a\" | [bdx-z] | [^1-3]\n    ",
        &[("root", 0)],
        &[ch('a'), alt(), ch('b'), calt('d'), calt('x'), upto('z'), alt(), not('1'), upto('3'), end()],
    );
}

#[test]
fn quantifiers() {
    expect_parse(
        "\n        root  ::= a+\n        a     ::= \"a\"\n    ",
        &[("a", 1), ("root", 0), ("root_2", 2)],
        &[rref(1), rref(2), end(), ch('a'), end(), rref(1), rref(2), alt(), end()],
    );
    expect_parse(
        "\n        root  ::= \"a\"+\n    ",
        &[("root", 0), ("root_1", 1)],
        &[ch('a'), rref(1), end(), ch('a'), rref(1), alt(), end()],
    );
    expect_parse(
        "\n        root  ::= a?\n        a     ::= \"a\"\n    ",
        &[("a", 1), ("root", 0), ("root_2", 2)],
        &[rref(2), end(), ch('a'), end(), rref(1), alt(), end()],
    );
    expect_parse(
        "\n        root  ::= \"a\"?\n    ",
        &[("root", 0), ("root_1", 1)],
        &[rref(1), end(), ch('a'), alt(), end()],
    );
    expect_parse(
        "\n        root  ::= a*\n        a     ::= \"a\"\n    ",
        &[("a", 1), ("root", 0), ("root_2", 2)],
        &[rref(2), end(), ch('a'), end(), rref(1), rref(2), alt(), end()],
    );
    expect_parse(
        "\n        root  ::= \"a\"*\n    ",
        &[("root", 0), ("root_1", 1)],
        &[rref(1), end(), ch('a'), rref(1), alt(), end()],
    );
    expect_parse("\n        root  ::= \"a\"{2}\n    ", &[("root", 0)], &[ch('a'), ch('a'), end()]);
    expect_parse(
        "\n        root  ::= \"a\"{2,}\n    ",
        &[("root", 0), ("root_1", 1)],
        &[ch('a'), ch('a'), rref(1), end(), ch('a'), rref(1), alt(), end()],
    );
    expect_parse("\n        root  ::= \"a\"{ 4}\n    ", &[("root", 0)], &[ch('a'), ch('a'), ch('a'), ch('a'), end()]);
    expect_parse(
        "\n        root  ::= \"a\"{2,4}\n    ",
        &[("root", 0), ("root_1", 1), ("root_2", 2)],
        &[
            // root
            ch('a'),
            ch('a'),
            rref(2),
            end(),
            // root_1
            ch('a'),
            alt(),
            end(),
            // root_2
            ch('a'),
            rref(1),
            alt(),
            end(),
        ],
    );
}

#[test]
fn arithmetic() {
    expect_parse(
        "\n        root  ::= (expr \"=\" term \"\\n\")+\n        expr  ::= term ([-+*/] term)*\n        term  ::= [0-9]+\n    ",
        &[
            ("expr", 2),
            ("expr_5", 5),
            ("expr_6", 6),
            ("root", 0),
            ("root_1", 1),
            ("root_4", 4),
            ("term", 3),
            ("term_7", 7),
        ],
        &[
            // root
            rref(1),
            rref(4),
            end(),
            // root_1
            rref(2),
            ch('='),
            rref(3),
            ch('\n'),
            end(),
            // expr
            rref(3),
            rref(6),
            end(),
            // term
            ch('0'),
            upto('9'),
            rref(7),
            end(),
            // root_4
            rref(1),
            rref(4),
            alt(),
            end(),
            // expr_5
            ch('-'),
            calt('+'),
            calt('*'),
            calt('/'),
            rref(3),
            end(),
            // expr_6
            rref(5),
            rref(6),
            alt(),
            end(),
            // term_7
            ch('0'),
            upto('9'),
            rref(7),
            alt(),
            end(),
        ],
    );
}

#[test]
fn arithmetic_with_identifiers() {
    let text = "\n        root  ::= (expr \"=\" ws term \"\\n\")+\n        expr  ::= term ([-+*/] term)*\n        term  ::= ident | num | \"(\" ws expr \")\" ws\n        ident ::= [a-z] [a-z0-9_]* ws\n        num   ::= [0-9]+ ws\n        ws    ::= [ \\t\\n]*\n    ";
    expect_parse(
        text,
        &[
            ("expr", 2),
            ("expr_6", 6),
            ("expr_7", 7),
            ("ident", 8),
            ("ident_10", 10),
            ("num", 9),
            ("num_11", 11),
            ("root", 0),
            ("root_1", 1),
            ("root_5", 5),
            ("term", 4),
            ("ws", 3),
            ("ws_12", 12),
        ],
        &[
            // root
            rref(1),
            rref(5),
            end(),
            // root_1
            rref(2),
            ch('='),
            rref(3),
            rref(4),
            ch('\n'),
            end(),
            // expr
            rref(4),
            rref(7),
            end(),
            // ws
            rref(12),
            end(),
            // term
            rref(8),
            alt(),
            rref(9),
            alt(),
            ch('('),
            rref(3),
            rref(2),
            ch(')'),
            rref(3),
            end(),
            // root_5
            rref(1),
            rref(5),
            alt(),
            end(),
            // expr_6
            ch('-'),
            calt('+'),
            calt('*'),
            calt('/'),
            rref(4),
            end(),
            // expr_7
            rref(6),
            rref(7),
            alt(),
            end(),
            // ident
            ch('a'),
            upto('z'),
            rref(10),
            rref(3),
            end(),
            // num
            ch('0'),
            upto('9'),
            rref(11),
            rref(3),
            end(),
            // ident_10
            ch('a'),
            upto('z'),
            calt('0'),
            upto('9'),
            calt('_'),
            rref(10),
            alt(),
            end(),
            // num_11
            ch('0'),
            upto('9'),
            rref(11),
            alt(),
            end(),
            // ws_12
            ch(' '),
            calt('\t'),
            calt('\n'),
            rref(12),
            alt(),
            end(),
        ],
    );
}

#[test]
fn tokens() {
    expect_parse(
        "\n        root  ::= <[1000]> !<[1001]> <[1001]>\n    ",
        &[("root", 0)],
        &[tok(1000), tok_not(1001), tok(1001), end()],
    );
}

// Our own: the printer writes llama.cpp's `llama_grammar_parser::print` format.
#[test]
fn printer() {
    let g = Grammar::new("root  ::= \"a\" | [bdx-z] | [^1-3]").unwrap();
    assert_eq!(g.rules().to_string(), "root ::= [a] | [bdx-z] | [^1-3] \n");
    let g = Grammar::new("root ::= x+ <[7]> !<[8]>\nx ::= \"\\u00e9\" [\\n] .").unwrap();
    assert_eq!(
        g.rules().to_string(),
        // llama.cpp closes a class only when the next element is not `.`, hence `[<U+000A>.]`.
        "root ::= x root_2 <[7]> !<[8]> \nx ::= [<U+00E9>] [<U+000A>.] \nroot_2 ::= x root_2 | \n"
    );
}
