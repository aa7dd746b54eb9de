//! The cases of llama.cpp's `tests/test-grammar-integration.cpp`, checked against our grammar: the
//! strings each grammar must accept and reject, the grammars that must fail to build (missing root,
//! undefined rule, left recursion, runaway repetition). One test per llama.cpp test function; each
//! reports every string that went wrong, by grammar and string. The grammar texts and strings are
//! llama.cpp's test data; the code is ours.
//!
//! llama.cpp's helper feeds a string one code point at a time (each as token 0 whose text is that
//! character; a token marker in the string as that token with the text `<[id]>`) and asks that
//! every step leave some parse stack and that a parse be complete at the end. Here every string is
//! checked three ways, which must all agree with llama.cpp's expectation:
//! - `Grammar::matches` (strings without tokens only),
//! - a [`Matcher`] fed one token per character (ids from 100 on, never named by these grammars, so
//!   they behave as llama.cpp's token 0 does) and `<[id]>` tokens for the markers, ending with
//!   `can_end`, where at every step `allows(t)` must agree with whether `accept(t)` succeeds,
//! - a [`Matcher`] fed the whole string as one token (strings without tokens only).
//!
//! Not here: the 33 cases that llama.cpp builds from a JSON schema (`test_schema`; 11 of
//! `test_simple_grammar`, all 22 of `test_json_schema`). They need the converter, and live in
//! `crates/schema/tests/integration.rs`.

use grammar::{Grammar, GrammarError, Matcher, Vocab};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A part of an input: text, or a token by id (llama.cpp's `token(id)` marker).
#[derive(Clone, Copy)]
enum Part<'a> {
    S(&'a str),
    T(u32),
}
use Part::{S, T};

/// Token ids below this are the `<[id]>` tokens; characters and whole strings come after.
const MARKERS: u32 = 100;

struct TestVocab {
    vocab: Arc<Vocab>,
    chars: Vec<char>,
    wholes: Vec<String>,
    eog: u32,
}

impl TestVocab {
    fn new(inputs: &[&[Part<'_>]]) -> Self {
        let mut pieces: Vec<Vec<u8>> = (0..MARKERS).map(|i| format!("<[{i}]>").into_bytes()).collect();
        let mut chars = BTreeSet::new();
        let mut wholes = BTreeSet::new();
        for input in inputs {
            for part in *input {
                if let S(s) = part {
                    chars.extend(s.chars());
                }
            }
            if let Some(s) = plain(input)
                && !s.is_empty()
            {
                wholes.insert(s);
            }
        }
        let chars: Vec<char> = chars.into_iter().collect();
        let wholes: Vec<String> = wholes.into_iter().collect();
        pieces.extend(chars.iter().map(|c| c.to_string().into_bytes()));
        pieces.extend(wholes.iter().map(|s| s.clone().into_bytes()));
        let eog = pieces.len() as u32;
        pieces.push(b"</s>".to_vec());
        Self { vocab: Arc::new(Vocab::new(pieces, &[eog])), chars, wholes, eog }
    }

    fn char_token(&self, c: char) -> u32 {
        MARKERS + self.chars.binary_search(&c).unwrap() as u32
    }

    fn whole_token(&self, s: &str) -> u32 {
        MARKERS + (self.chars.len() + self.wholes.binary_search(&s.to_string()).unwrap()) as u32
    }
}

/// The input as plain text, if it has no token marker.
fn plain(input: &[Part<'_>]) -> Option<String> {
    let mut out = String::new();
    for part in input {
        match part {
            S(s) => out.push_str(s),
            T(_) => return None,
        }
    }
    Some(out)
}

fn describe(input: &[Part<'_>]) -> String {
    let mut out = String::new();
    for part in input {
        match part {
            S(s) => out.push_str(&s.escape_debug().to_string()),
            T(id) => out.push_str(&format!("⟨{id}⟩")),
        }
    }
    format!("\"{out}\"")
}

/// Feeds `input` token by token (one per character); whether the grammar accepted all and can end.
/// Errors describe a disagreement between `allows` and `accept`.
fn match_tokens(g: &Grammar, tv: &TestVocab, input: &[Part<'_>]) -> Result<bool, String> {
    let mut m = Matcher::new(g, Arc::clone(&tv.vocab));
    let mut tokens = Vec::new();
    for part in input {
        match part {
            S(s) => tokens.extend(s.chars().map(|c| tv.char_token(c))),
            T(id) => tokens.push(*id),
        }
    }
    for (i, &t) in tokens.iter().enumerate() {
        let allowed = m.allows(t).map_err(|e| e.to_string())?;
        let accepted = m.accept(t).is_ok();
        if allowed != accepted {
            return Err(format!("at token {i} ({t}): allows says {allowed} but accept says {accepted}"));
        }
        if !accepted {
            return Ok(false);
        }
    }
    let can_end = m.can_end();
    if m.allows(tv.eog).map_err(|e| e.to_string())? != can_end {
        return Err(format!("at the end: the end-of-generation token disagrees with can_end ({can_end})"));
    }
    Ok(can_end)
}

/// llama.cpp's `test_grammar`: every passing string must match and every failing one must not.
/// Returns one line per problem.
fn check(desc: &str, text: &str, passing: &[&[Part<'_>]], failing: &[&[Part<'_>]]) -> Vec<String> {
    let g = match Grammar::new(text) {
        Ok(g) => g,
        Err(e) => return vec![format!("{desc}: the grammar does not build: {e}")],
    };
    let all: Vec<&[Part<'_>]> = passing.iter().chain(failing).copied().collect();
    let tv = TestVocab::new(&all);
    let mut problems = Vec::new();
    for (input, want) in passing.iter().map(|i| (i, true)).chain(failing.iter().map(|i| (i, false))) {
        let name = describe(input);
        let verdict = |got: bool| if got { "matched" } else { "did not match" };
        if let Some(s) = plain(input) {
            let got = g.matches(&s);
            if got != want {
                problems.push(format!(
                    "{desc}: {name}: Grammar::matches {} (llama.cpp: {})",
                    verdict(got),
                    verdict(want)
                ));
            }
            if !s.is_empty() {
                let mut m = Matcher::new(&g, Arc::clone(&tv.vocab));
                let got = m.accept(tv.whole_token(&s)).is_ok() && m.can_end();
                if got != want {
                    problems.push(format!(
                        "{desc}: {name}: the matcher fed it as one token {} (llama.cpp: {})",
                        verdict(got),
                        verdict(want)
                    ));
                }
            }
        }
        match match_tokens(&g, &tv, input) {
            Ok(got) if got != want => problems.push(format!(
                "{desc}: {name}: the matcher fed it token by token {} (llama.cpp: {})",
                verdict(got),
                verdict(want)
            )),
            Ok(_) => {}
            Err(e) => problems.push(format!("{desc}: {name}: {e}")),
        }
    }
    problems
}

fn assert_none(problems: Vec<String>) {
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

/// Plain strings as inputs.
macro_rules! strs {
    ($($s:expr),* $(,)?) => { &[$(&[S($s)] as &[Part<'_>]),*] };
}

#[test]
fn simple_grammar() {
    let mut problems = check(
        "simple grammar",
        "\n            root ::= expr\n            expr ::= term (\"+\" term)*\n            term ::= number\n            number ::= [0-9]+",
        strs!["42", "1+2+3+4+5", "123+456"],
        strs!["+", "/ 3", "1+2+3+4+5+", "12a45"],
    );
    problems.extend(check(
        "simple grammar with tokens",
        "\n            root ::= <[10]> content <[11]>\n            content ::= (!<[11]>)*",
        &[
            &[T(10), S("hello world"), T(11)],
            &[T(10), S("text with "), T(12), S(" other tokens "), T(13), S(" mixed in"), T(11)],
            &[T(10), T(11)],
            &[T(10), T(12), T(13), T(14), T(15), T(11)],
            &[T(10), S("a"), T(11)],
        ],
        &[
            &[T(10), S("missing end token")],
            &[T(10)],
            &[S("missing start token"), T(11)],
            &[T(10), T(11), T(11)],
            &[T(11), S("wrong order"), T(10)],
        ],
    ));
    assert_none(problems);
}

#[test]
fn complex_grammar() {
    let mut problems = check(
        "medium complexity grammar",
        r#"
            root ::= expression
            expression ::= term ws (("+"|"-") ws term)*
            term ::= factor ws (("*"|"/") ws factor)*
            factor ::= number | variable | "(" expression ")" | function-call
            number ::= [0-9]+
            variable ::= [a-zA-Z_][a-zA-Z0-9_]*
            function-call ::= variable ws "(" (expression ("," ws expression)*)? ")"
            ws ::= [ \t\n\r]?"#,
        strs![
            "42",
            "1*2*3*4*5",
            "x",
            "x+10",
            "x1+y2",
            "(a+b)*(c-d)",
            "func()",
            "func(x,y+2)",
            "a*(b+c)-d/e",
            "f(g(x),h(y,z))",
            "x + 10",
            "x1 + y2",
            "(a + b) * (c - d)",
            "func()",
            "func(x, y + 2)",
            "a * (b + c) - d / e",
            "f(g(x), h(y, z))",
            "123+456",
            "123*456*789-123/456+789*123",
            "123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456",
        ],
        strs![
            "+",
            "/ 3x",
            "x + + y",
            "a * / b",
            "func(,)",
            "func(x y)",
            "(a + b",
            "x + y)",
            "a + b * (c - d",
            "42 +",
            "x +",
            "x + 10 +",
            "(a + b) * (c - d",
            "func(",
            "func(x, y + 2",
            "a * (b + c) - d /",
            "f(g(x), h(y, z)",
            "123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456/",
        ],
    );
    problems.extend(check(
        "complex grammar with tokens",
        "\n            root ::= reasoning+ content tool-call*\n            reasoning ::= <[10]> (!<[11]>)* <[11]>\n            content ::= <[20]> (!<[21]>)* <[21]>\n            tool-call ::= <[12]> name <[13]> args <[14]>\n            name ::= (!<[13]>)+\n            args ::= (!<[14]>)*",
        &[
            &[
                T(10),
                S("I am thinking"),
                T(11),
                T(20),
                S("hello world!"),
                T(21),
                T(12),
                S("search"),
                T(13),
                S("query=test"),
                T(14),
            ],
            &[
                T(10),
                S("reasoning 1"),
                T(11),
                T(10),
                S("reasoning 2"),
                T(11),
                T(20),
                T(21),
                T(12),
                S("tool"),
                T(13),
                T(14),
            ],
            &[T(10), T(11), T(20), S("content"), T(21)],
            &[
                T(10),
                S("think"),
                T(12),
                S(" nested"),
                T(11),
                T(20),
                T(10),
                S("more content"),
                T(21),
                T(12),
                S("fn"),
                T(13),
                S("x=1,y=2"),
                T(14),
                T(12),
                S("fn2"),
                T(13),
                T(14),
            ],
            &[
                T(10),
                S("reasoning"),
                T(11),
                T(10),
                S("more"),
                T(11),
                T(10),
                S("even more"),
                T(11),
                T(20),
                S("text"),
                T(21),
                T(12),
                S("a"),
                T(13),
                S("b"),
                T(14),
                T(12),
                S("c"),
                T(13),
                S("d"),
                T(14),
            ],
        ],
        &[
            &[T(20), S("content only"), T(21)],
            &[T(10), S("no closing reasoning")],
            &[T(10), T(11), T(20), S("no closing content")],
            &[T(10), T(11), T(20), T(21), T(12), S("incomplete tool")],
            &[T(10), T(11), T(11), T(20), T(21)],
        ],
    ));
    assert_none(problems);
}

#[test]
fn special_chars() {
    assert_none(check(
        "special characters",
        "\n            root ::= ... \"abc\" ...\n            ",
        strs!["abcabcabc", "aaaabcccc", "🔵🟠✅abc❌🟠🔵"],
        strs!["aaabcccc", "aaaaabcccc", "aaaabccc", "aaaabccccc", "🔵🟠✅❌abc❌✅🟠🔵", "🔵🟠abc🟠🔵"],
    ));
}

#[test]
fn quantifiers() {
    let long_a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let long_ab = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab";
    let mut problems = Vec::new();
    problems.extend(check(
        "* quantifier",
        "root ::= \"a\"*",
        strs!["", "a", "aaaaa", "aaaaaaaaaaaaaaaaaa", long_a],
        strs!["b", "ab", "aab", "ba", long_ab],
    ));
    problems.extend(check(
        "+ quantifier",
        "root ::= \"a\"+",
        strs!["a", "aaaaa", "aaaaaaaaaaaaaaaaaa", long_a],
        strs!["", "b", "ab", "aab", "ba", long_ab],
    ));
    problems.extend(check("? quantifier", "root ::= \"a\"?", strs!["", "a"], strs!["b", "ab", "aa", "ba"]));
    problems.extend(check(
        "mixed quantifiers",
        "\n            root ::= cons+ vowel* cons? (vowel cons)*\n            vowel ::= [aeiouy]\n            cons ::= [bcdfghjklmnpqrstvwxyz]\n            ",
        strs!["yes", "no", "noyes", "crwth", "four", "bryyyy"],
        strs!["yess", "yesno", "forty", "catyyy"],
    ));
    problems.extend(check(
        "simple exact repetition",
        "\n            root ::= [ab]{4}\n        ",
        strs!["aaaa", "bbbb", "abab"],
        strs!["a", "b", "aaaaa"],
    ));
    problems.extend(check(
        "simple min repetition",
        "\n            root ::= [ab]{4,}\n        ",
        strs!["aaaa", "aaaaab", "bbbb", "ababab"],
        strs!["", "aba"],
    ));
    problems.extend(check(
        "simple max repetition",
        "\n            root ::= [ab]{0,4}\n        ",
        strs!["", "a", "aa", "aaa", "aaab"],
        strs!["aaaaa"],
    ));
    problems.extend(check(
        "min / max repetition",
        "\n            root ::= (\"0x\" [A-F0-9]{2} \" \"?){3,5}\n        ",
        strs!["0xFF 0x12 0xAB", "0xFF 0x12 0xAB 0x00 0x00"],
        strs!["", "0xFF", "0xFF 0x12", "0xFF 0x12 0xAB 0x00 0x00 0x00"],
    ));
    problems.extend(check(
        "segfault",
        "\n            root ::= ( [x]* )*\n        ",
        strs!["", "x", "xx"],
        strs!["y", "yy"],
    ));
    assert_none(problems);

    // "hang": llama.cpp gives it no string; its repetitions exceed the parser's limit, so it must
    // fail to build, and promptly.
    let hang = "\n            root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}\n        ";
    let e = Grammar::new(hang).expect_err("the nested repetitions must be refused");
    assert!(matches!(e, GrammarError::Parse { .. }), "{e}");
}

#[test]
fn failure_missing_root() {
    let text = "\n        rot ::= expr\n        expr ::= term (\"+\" term)*\n        term ::= number\n        number ::= [0-9]+";
    // It parses (another start rule can be named) but has no `root`.
    let vocab = Vocab::new(Vec::new(), &[]);
    let g = Grammar::with_vocab(text, "rot", &vocab).expect("the grammar parses");
    assert_eq!(g.rules().id("root"), None);
    match Grammar::new(text) {
        Err(GrammarError::NoRoot { name }) => assert_eq!(name, "root"),
        other => panic!("expected a missing root, got {other:?}"),
    }
}

#[test]
fn failure_missing_reference() {
    let text = "root ::= expr\n        expr ::= term (\"+\" term)*\n        term ::= numero\n        number ::= [0-9]+";
    match Grammar::new(text) {
        Err(GrammarError::UndefinedRule { name }) => assert_eq!(name, "numero"),
        other => panic!("expected an undefined rule, got {other:?}"),
    }
}

#[test]
fn failure_left_recursion() {
    let cases = [
        ("simple", "root ::= \"a\" | root \"a\""),
        ("medium", "\n        root ::= asdf\n        asdf ::= \"a\" | asdf \"a\"\n        "),
        (
            "hard",
            "\n        root ::= asdf\n        asdf ::= \"a\" | foo \"b\"\n        foo ::= \"c\" | asdf \"d\" | \"e\"",
        ),
        (
            "hardest",
            "\n        root ::= asdf\n        asdf ::= \"a\" | foo \"b\"\n        foo ::= \"c\" | empty asdf \"d\" | \"e\"\n        empty ::= \"blah\" | ",
        ),
    ];
    let mut problems = Vec::new();
    for (name, text) in cases {
        match Grammar::new(text) {
            Err(GrammarError::LeftRecursion { .. }) => {}
            other => problems.push(format!("{name}: expected left recursion, got {other:?}")),
        }
    }
    assert_none(problems);
}

// Not a test of llama.cpp's test suite: the grammar its `grammars/README.md` shows as the JSON-schema
// converter's output for an array of 10 to 100 `{name, age}` objects (rules before `root`, an
// empty first alternate, nested bounded repetitions). The strings are ours.
#[test]
fn readme_schema_output() {
    let text = r#"char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
item ::= "{" space item-name-kv "," space item-age-kv "}" space
item-age ::= ([0-9] | ([1-8] [0-9] | [9] [0-9]) | "1" ([0-4] [0-9] | [5] "0")) space
item-age-kv ::= "\"age\"" space ":" space item-age
item-name ::= "\"" char{1,100} "\"" space
item-name-kv ::= "\"name\"" space ":" space item-name
root ::= "[" space item ("," space item){9,99} "]" space
space ::= | " " | "\n" [ \t]{0,20}
"#;
    let people = |ages: &[&str]| -> String {
        let items: Vec<String> =
            ages.iter().enumerate().map(|(i, a)| format!("{{\"name\": \"P\\u00e9rson {i}\", \"age\": {a}}}")).collect();
        format!("[{}]", items.join(", "))
    };
    let ten = ["0", "7", "42", "99", "100", "149", "150", "18", "65", "3"];
    let good = [people(&ten), people(&[ten.as_slice(), &ten].concat()), people(&ten).replace(", ", ",\n    ")];
    let mut nine = people(&ten[..9]);
    let bad = [
        std::mem::take(&mut nine),
        people(&["151", "7", "42", "99", "100", "149", "150", "18", "65", "3"]),
        people(&["07", "7", "42", "99", "100", "149", "150", "18", "65", "3"]),
        people(&ten).replacen("P\\u00e9rson 0", "", 1),
        people(&ten).replacen("\"name\"", "\"nom\"", 1),
    ];
    let good: Vec<Vec<Part<'_>>> = good.iter().map(|s| vec![S(s)]).collect();
    let bad: Vec<Vec<Part<'_>>> = bad.iter().map(|s| vec![S(s)]).collect();
    let good: Vec<&[Part<'_>]> = good.iter().map(Vec::as_slice).collect();
    let bad: Vec<&[Part<'_>]> = bad.iter().map(Vec::as_slice).collect();
    assert_none(check("README schema output", text, &good, &bad));
}
