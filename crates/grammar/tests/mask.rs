//! Mask-level tests of ours: at many states of several grammars (reached by accepting tokens),
//! `Matcher::mask` must equal a brute-force oracle of llama.cpp's semantics, `allows(t)` must equal
//! the mask bit of every token, and `accept` must succeed exactly where llama.cpp's accept keeps a
//! parse stack.
//!
//! The oracle is written here from llama.cpp's definitions (`src/llama-grammar.cpp`) over the
//! public [`Rules`], sharing no code with the crate: parse stacks of (rule, index) positions,
//! expanded to terminals; token texts decoded from the partial UTF-8 state as llama.cpp decodes
//! them; a token allowed when it is end-of-generation and some stack is empty, or when its text
//! is non-empty and some stack takes all its complete characters (a token element on top takes
//! the token by id as long as characters remain) and ends with no partial character left on an
//! empty or token stack, or with a partial character that can still complete to one the next
//! class matches (llama.cpp's `match_partial_char`, negated classes included). So the mask
//! rejects invalid UTF-8 tokens and tokens ending in a character no class can take, while
//! `accept` takes them (it keeps the stacks waiting on a character); the walk accepts such
//! tokens too and compares both sides' states after them.
//!
//! Where llama.cpp decodes a code point 0 from an overlong sequence it stops the token there
//! (documented difference, see the crate docs): the oracle calls such tokens undefined and the
//! walk never accepts them.

use grammar::{Elem, Grammar, Kind, Matcher, Rules, Vocab};
use std::collections::HashSet;
use std::sync::Arc;

type Pos = (usize, usize);
type Stack = Vec<Pos>;

/// A partial UTF-8 character: its bits and the bytes still to come (-1 after invalid UTF-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Part {
    value: u32,
    n_remain: i32,
}

struct Oracle<'r> {
    rules: &'r Rules,
}

impl Oracle<'_> {
    fn at(&self, p: Pos) -> Elem {
        self.rules.rule(p.0)[p.1]
    }

    fn ends(&self, p: Pos) -> bool {
        matches!(self.at(p).kind, Kind::End | Kind::Alt)
    }

    fn is_token(&self, p: Pos) -> bool {
        matches!(self.at(p).kind, Kind::Token | Kind::TokenNot)
    }

    fn push_new(out: &mut Vec<Stack>, s: Stack) {
        if !out.contains(&s) {
            out.push(s);
        }
    }

    /// Expands `stack` until its top is a terminal (or it is empty).
    fn advance(&self, stack: Stack, out: &mut Vec<Stack>) {
        let mut todo = vec![stack];
        let mut seen = HashSet::new();
        while let Some(cur) = todo.pop() {
            if !seen.insert(cur.clone()) {
                continue;
            }
            let Some(&top) = cur.last() else {
                Self::push_new(out, cur);
                continue;
            };
            let el = self.at(top);
            match el.kind {
                Kind::RuleRef => {
                    let r = el.value as usize;
                    let mut i = 0;
                    loop {
                        let mut next = cur[..cur.len() - 1].to_vec();
                        if !self.ends((top.0, top.1 + 1)) {
                            next.push((top.0, top.1 + 1));
                        }
                        if !self.ends((r, i)) {
                            next.push((r, i));
                        }
                        todo.push(next);
                        while !self.ends((r, i)) {
                            i += 1;
                        }
                        if self.at((r, i)).kind == Kind::Alt {
                            i += 1;
                        } else {
                            break;
                        }
                    }
                }
                Kind::Char | Kind::CharNot | Kind::CharAny | Kind::Token | Kind::TokenNot => Self::push_new(out, cur),
                k => panic!("a stack on {k:?}"),
            }
        }
    }

    fn initial(&self, root: usize) -> Vec<Stack> {
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            let mut s = Stack::new();
            if !self.ends((root, i)) {
                s.push((root, i));
            }
            self.advance(s, &mut out);
            while !self.ends((root, i)) {
                i += 1;
            }
            if self.at((root, i)).kind == Kind::Alt {
                i += 1;
            } else {
                return out;
            }
        }
    }

    /// Whether the class at `p` takes `c`, and the position after the class.
    fn match_char(&self, mut p: Pos, c: u32) -> (bool, Pos) {
        let positive = matches!(self.at(p).kind, Kind::Char | Kind::CharAny);
        let mut found = false;
        loop {
            let el = self.at(p);
            let next = self.at((p.0, p.1 + 1));
            if next.kind == Kind::CharRngUpper {
                found |= el.value <= c && c <= next.value;
                p.1 += 2;
            } else if el.kind == Kind::CharAny {
                found = true;
                p.1 += 1;
            } else {
                found |= el.value == c;
                p.1 += 1;
            }
            if self.at(p).kind != Kind::CharAlt {
                return (found == positive, p);
            }
        }
    }

    /// Whether some completion of `part` could satisfy the class at `p` (llama.cpp's test).
    fn match_partial(&self, mut p: Pos, part: Part) -> bool {
        let positive = matches!(self.at(p).kind, Kind::Char | Kind::CharAny);
        if part.n_remain < 0 || (part.n_remain == 1 && part.value < 2) {
            return false;
        }
        let bits = 6 * part.n_remain as u32;
        let mut low = part.value << bits;
        let high = low | ((1 << bits) - 1);
        if low == 0 {
            low = match part.n_remain {
                2 => 1 << 11,
                3 => 1 << 16,
                _ => low,
            };
        }
        loop {
            let el = self.at(p);
            let next = self.at((p.0, p.1 + 1));
            if next.kind == Kind::CharRngUpper {
                if el.value <= high && low <= next.value {
                    return positive;
                }
                p.1 += 2;
            } else if el.kind == Kind::CharAny {
                return true;
            } else {
                if low <= el.value && el.value <= high {
                    return positive;
                }
                p.1 += 1;
            }
            if self.at(p).kind != Kind::CharAlt {
                return !positive;
            }
        }
    }

    fn token_matches(&self, p: Pos, t: u32) -> bool {
        let el = self.at(p);
        match el.kind {
            Kind::Token => el.value == t,
            Kind::TokenNot => el.value != t,
            _ => false,
        }
    }

    fn accept_char(&self, stack: &Stack, c: u32, out: &mut Vec<Stack>) {
        let Some(&top) = stack.last() else { return };
        if self.is_token(top) {
            return;
        }
        let (ok, after) = self.match_char(top, c);
        if ok {
            let mut next = stack[..stack.len() - 1].to_vec();
            if !self.ends(after) {
                next.push(after);
            }
            self.advance(next, out);
        }
    }

    /// Whether `stack` lets token `t` (decoded as `cps` ending in `part`) through.
    fn stack_allows(&self, stack: &Stack, cps: &[u32], part: Part, t: u32) -> bool {
        let Some(&top) = stack.last() else { return cps.is_empty() && part.n_remain == 0 };
        if self.is_token(top) {
            return if cps.is_empty() { part.n_remain == 0 } else { self.token_matches(top, t) };
        }
        let Some((&c, rest)) = cps.split_first() else {
            return part.n_remain == 0 || self.match_partial(top, part);
        };
        let (ok, after) = self.match_char(top, c);
        if !ok {
            return false;
        }
        let mut next = stack[..stack.len() - 1].to_vec();
        if !self.ends(after) {
            next.push(after);
        }
        let mut next_stacks = Vec::new();
        self.advance(next, &mut next_stacks);
        next_stacks.iter().any(|s| self.stack_allows(s, rest, part, t))
    }
}

/// llama.cpp's decoding of a token text after a partial character: its complete code points and
/// the partial character it ends in; invalid UTF-8 gives no code point and `n_remain == -1`.
fn decode(piece: &[u8], start: Part) -> (Vec<u32>, Part) {
    const LEN: [i32; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];
    let invalid = (Vec::new(), Part { value: 0, n_remain: -1 });
    let mut cps = Vec::new();
    let (mut value, mut n_remain) = (start.value, start.n_remain);
    let mut i = 0;
    while i < piece.len() && n_remain > 0 {
        if piece[i] >> 6 != 2 {
            return invalid;
        }
        value = (value << 6) + u32::from(piece[i] & 0x3f);
        i += 1;
        n_remain -= 1;
    }
    if start.n_remain > 0 && n_remain == 0 {
        cps.push(value);
    }
    while i < piece.len() {
        n_remain = LEN[usize::from(piece[i] >> 4)] - 1;
        if n_remain < 0 {
            return invalid;
        }
        value = u32::from(piece[i]) & ((1 << (7 - n_remain)) - 1);
        i += 1;
        while i < piece.len() && n_remain > 0 {
            value = (value << 6) + u32::from(piece[i] & 0x3f);
            i += 1;
            n_remain -= 1;
        }
        if n_remain == 0 {
            cps.push(value);
        }
    }
    (cps, Part { value, n_remain })
}

/// One side of the oracle: llama.cpp's grammar state (stacks and partial character).
#[derive(Clone)]
struct State {
    stacks: Vec<Stack>,
    part: Part,
}

struct World<'r> {
    oracle: Oracle<'r>,
    /// Token texts cut at their first NUL, as llama.cpp reads them.
    pieces: Vec<Vec<u8>>,
    eog: Vec<u32>,
}

impl World<'_> {
    fn can_end(&self, s: &State) -> bool {
        s.stacks.iter().any(Vec::is_empty)
    }

    /// Whether llama.cpp's mask allows `t` in `s`; `None` where a code point 0 is decoded (the
    /// documented difference).
    fn allows(&self, s: &State, t: u32) -> Option<bool> {
        if self.eog.contains(&t) {
            return Some(self.can_end(s));
        }
        let piece = &self.pieces[t as usize];
        if piece.is_empty() {
            return Some(false);
        }
        let (cps, part) = decode(piece, s.part);
        if cps.contains(&0) {
            return None;
        }
        Some(s.stacks.iter().any(|st| self.oracle.stack_allows(st, &cps, part, t)))
    }

    /// llama.cpp's accept: the new state, or `None` where no stack is left (it throws); `Err` for
    /// a token with a code point 0.
    fn accept(&self, s: &State, t: u32) -> Result<Option<State>, ()> {
        if self.eog.contains(&t) {
            return Ok(self.can_end(s).then(|| s.clone()));
        }
        let (cps, part) = decode(&self.pieces[t as usize], s.part);
        if cps.contains(&0) {
            return Err(());
        }
        let mut out: Vec<Stack> = Vec::new();
        for st in &s.stacks {
            let Some(&top) = st.last() else { continue };
            if self.oracle.is_token(top) {
                if self.oracle.token_matches(top, t) {
                    let mut next = st[..st.len() - 1].to_vec();
                    if !self.oracle.ends((top.0, top.1 + 1)) {
                        next.push((top.0, top.1 + 1));
                    }
                    self.oracle.advance(next, &mut out);
                }
                continue;
            }
            let mut cur = vec![st.clone()];
            for &c in &cps {
                let mut next = Vec::new();
                for x in &cur {
                    self.oracle.accept_char(x, c, &mut next);
                }
                cur = next;
                if cur.is_empty() {
                    break;
                }
            }
            for x in cur {
                Oracle::push_new(&mut out, x);
            }
        }
        Ok((!out.is_empty()).then_some(State { stacks: out, part }))
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The test vocabulary: an end-of-generation token, every byte 0x01..=0xFF alone, ASCII words,
/// whole and split multi-byte characters, invalid UTF-8, empty and NUL-cut texts; `extra` last.
fn test_pieces(extra: &[&str]) -> (Vec<Vec<u8>>, Vec<u32>) {
    let mut pieces: Vec<Vec<u8>> = vec![b"</s>".to_vec()];
    pieces.extend((1u8..=0xff).map(|b| vec![b]));
    let words = [
        "true", "false", "null", "nu", "{\"", "\":", "\",", "\": ", ", ", ",", "[1", "[]", "{}", "12", "345", "0.5",
        "-1", "e+", "E-3", "()", "(1", "+1", "*2", "/", "  ", "\n  ", " \t", "abc", "ab", "a", "x", "\"a\"", "\\n",
        "\\u00", "f(", "sin(", "x_1", "_", "1)", "))", "<", ">", "<a", "b>", "> <",
    ];
    pieces.extend(words.iter().map(|w| w.as_bytes().to_vec()));
    let e = "é".as_bytes();
    let euro = "€".as_bytes();
    let smile = "😀".as_bytes();
    let han = "中".as_bytes();
    let utf8: Vec<Vec<u8>> = vec![
        e.to_vec(),
        [b"\"", e].concat(),
        [e, b"\""].concat(),
        [b"a", e].concat(),
        [e, b"a"].concat(),
        [e, b"b"].concat(),
        euro.to_vec(),
        euro[..2].to_vec(),
        euro[1..].to_vec(),
        [b"x", &euro[..1]].concat(),
        smile.to_vec(),
        smile[..2].to_vec(),
        smile[..3].to_vec(),
        smile[1..].to_vec(),
        smile[2..].to_vec(),
        [b"x", &smile[..2]].concat(),
        "αβ".as_bytes().to_vec(),
        "α".as_bytes().to_vec(),
        "ω!".as_bytes().to_vec(),
        "α!".as_bytes()[..1].to_vec(),
        han.to_vec(),
        han[..2].to_vec(),
        "中文".as_bytes().to_vec(),
        "x中".as_bytes().to_vec(),
        "丁a".as_bytes().to_vec(),
        "<é".as_bytes().to_vec(),
        "\"€\"".as_bytes().to_vec(),
        "é€".as_bytes().to_vec(),
        // Invalid UTF-8: a continuation byte as a lead, inside a token.
        b"a\x80".to_vec(),
        // A lead byte followed by ASCII: llama.cpp takes the bytes inside a token unchecked.
        b"\xc3a".to_vec(),
        // Empty, empty after the NUL cut, cut to "a".
        Vec::new(),
        b"\0abc".to_vec(),
        b"a\0b".to_vec(),
    ];
    pieces.extend(utf8);
    pieces.extend(extra.iter().map(|w| w.as_bytes().to_vec()));
    let eog = vec![0];
    (pieces, eog)
}

fn mask_bit(mask: &[u32], t: u32) -> bool {
    mask[(t / 32) as usize] >> (t % 32) & 1 == 1
}

/// What a walk went through.
#[derive(Debug, Default)]
struct Seen {
    /// States compared.
    states: usize,
    /// States inside a character (a token ended in a partial one).
    partial: usize,
    /// States where the grammar could end.
    can_end: usize,
    /// Tokens the mask rejected but accept took.
    accepted_rejected: usize,
    /// Tokens both rejected.
    refused: usize,
    /// Distinct masks.
    masks: usize,
}

/// Walks `g` with random tokens (mostly allowed ones), comparing the matcher with the oracle at
/// every state.
fn walk(name: &str, g: &Grammar, pieces: &[Vec<u8>], eog: &[u32], steps: usize, seed: u64) -> Seen {
    let vocab = Arc::new(Vocab::new(pieces.to_vec(), eog));
    let cut: Vec<Vec<u8>> = pieces.iter().map(|p| p.iter().copied().take_while(|&b| b != 0).collect()).collect();
    let world = World { oracle: Oracle { rules: g.rules() }, pieces: cut, eog: eog.to_vec() };
    let root = g.rules().id("root").unwrap();
    let start = State { stacks: world.oracle.initial(root), part: Part::default() };
    let n = pieces.len() as u32;
    let mut rng = Rng(seed);
    let mut m = Matcher::new(g, Arc::clone(&vocab));
    let mut s = start.clone();
    let mut path: Vec<u32> = Vec::new();
    let mut seen = Seen::default();
    let mut masks = HashSet::new();
    let show = |path: &[u32]| -> String {
        let text: Vec<u8> = path.iter().flat_map(|&t| world.pieces[t as usize].clone()).collect();
        format!("{} after {path:?} ({:?})", name, String::from_utf8_lossy(&text))
    };
    for _ in 0..steps {
        // Compare the state.
        let mask = m.mask().unwrap();
        let mut wrong = Vec::new();
        let mut allowed = Vec::new();
        for t in 0..n {
            let bit = mask_bit(&mask, t);
            assert_eq!(m.allows(t).unwrap(), bit, "{}: allows({t}) differs from the mask bit", show(&path));
            match world.allows(&s, t) {
                Some(want) if want != bit => wrong.push(format!(
                    "token {t} {:?}: ours {bit}, llama.cpp {want}",
                    String::from_utf8_lossy(&pieces[t as usize])
                )),
                _ => {}
            }
            if bit && !eog.contains(&t) {
                allowed.push(t);
            }
        }
        assert!(wrong.is_empty(), "{}: the mask differs:\n{}", show(&path), wrong.join("\n"));
        assert!(n.is_multiple_of(32) || mask[n as usize / 32] >> (n % 32) == 0, "bits past the vocabulary");
        assert_eq!(m.can_end(), world.can_end(&s), "{}: can_end", show(&path));
        assert_eq!(m.must_end().unwrap(), world.can_end(&s) && allowed.is_empty(), "{}: must_end", show(&path));
        seen.states += 1;
        seen.partial += usize::from(s.part.n_remain > 0);
        seen.can_end += usize::from(world.can_end(&s));
        masks.insert(mask.clone());

        // Move: mostly an allowed token, sometimes any token; start over where nothing is allowed.
        if allowed.is_empty() || path.len() > 40 {
            m.reset();
            s = start.clone();
            path.clear();
            continue;
        }
        let t = if rng.below(5) == 0 { rng.below(n as usize) as u32 } else { allowed[rng.below(allowed.len())] };
        let Ok(want) = world.accept(&s, t) else { continue };
        let before = m.mask().unwrap();
        match (m.accept(t), want) {
            (Ok(()), Some(next)) => {
                seen.accepted_rejected += usize::from(!mask_bit(&before, t));
                s = next;
                path.push(t);
            }
            (Err(_), None) => {
                seen.refused += 1;
                assert_eq!(m.mask().unwrap(), before, "{}: a rejected token {t} moved the matcher", show(&path));
            }
            (got, want) => panic!(
                "{}: accept({t} {:?}): ours {got:?}, llama.cpp {}",
                show(&path),
                String::from_utf8_lossy(&pieces[t as usize]),
                if want.is_some() { "keeps a stack" } else { "has no stack left" }
            ),
        }
    }
    seen.masks = masks.len();
    seen
}

/// The walk must have been through enough kinds of state to mean something.
fn assert_coverage(seen: &Seen, states: usize) {
    assert!(seen.states >= states, "{seen:?}");
    assert!(seen.partial > 0 && seen.can_end > 0 && seen.accepted_rejected > 0 && seen.refused > 0, "{seen:?}");
    assert!(seen.masks >= 10, "{seen:?}");
}

const JSON: &str = r#"
root   ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* )? ws "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]*
"#;

const ARITHMETIC: &str = r#"
root   ::= expr
expr   ::= term ( ws [-+] ws term )*
term   ::= factor ( ws [*/] ws factor )*
factor ::= "-"? ( number | "(" ws expr ws ")" | ident ( "(" ws args? ws ")" )? )
number ::= [0-9]+ ( "." [0-9]+ )?
args   ::= expr ( ws "," ws expr )*
ident  ::= [a-z_] [a-z0-9_]*
ws     ::= " "?
"#;

// Inverted classes, `.`, ranges above ASCII, and characters that tokens split.
const CLASSES: &str = r#"
root ::= "<" item{1,6} ">" ( " " root )?
item ::= [^a-z<>\n"é€ ] | "é" [a-c] | [α-ω]{1,2} "!" | "\"" . . "\"" | [丁-丏] [^丁-龥] | "€" [^😀] | "x" [^<]
"#;

#[test]
fn json_masks() {
    let (pieces, eog) = test_pieces(&[]);
    let g = Grammar::new(JSON).unwrap();
    assert_coverage(&walk("json", &g, &pieces, &eog, 400, 0x9e37_79b9_7f4a_7c15), 400);
}

#[test]
fn arithmetic_masks() {
    let (pieces, eog) = test_pieces(&[]);
    let g = Grammar::new(ARITHMETIC).unwrap();
    assert_coverage(&walk("arithmetic", &g, &pieces, &eog, 400, 0x2545_f491_4f6c_dd1d), 400);
}

#[test]
fn class_masks() {
    let (pieces, eog) = test_pieces(&[]);
    let g = Grammar::new(CLASSES).unwrap();
    assert_coverage(&walk("classes", &g, &pieces, &eog, 500, 0x1234_5678_9abc_def1), 500);
}

// Strings whose contents loop on most ASCII characters (the walk's shortcut) but not on every
// character from U+0080 up: one excludes a range of accented letters, one takes only Greek and
// ASCII, one everything; a token of wide characters is taken unwalked only where all of them
// lead back to the string.
const STRINGS: &str = r#"
root ::= ( "<" [^"<>é-ü]* ">" | "\"" [^"α-ω]* "\"" | "(" [ -~α-ω]* ")" | "'" [^']* "'" ) ( " " root )?
"#;

// Strings with a length bound (a JSON schema's `maxLength`): every character leads to a new state
// that counts what is left, the walk's chain shortcut; one bound shorter than some tokens.
const BOUNDED: &str = r#"
root ::= ( "\"" [^"\\]{0,7} "\"" | "<" [ -;=?-~]{2,4} ">" | "(" [a-z ]{1,12} ")" ) ( "," root )?
"#;

#[test]
fn bounded_string_masks() {
    let (pieces, eog) = test_pieces(&["abcdefgh", "abcdefg", "abcdef", "a b c", "12345678901", "\"ab\"", "abcd>"]);
    let g = Grammar::new(BOUNDED).unwrap();
    assert_coverage(&walk("bounded", &g, &pieces, &eog, 400, 0x5eed_0b0d_1e55_0001), 200);
}

#[test]
fn wide_string_masks() {
    let (pieces, eog) = test_pieces(&["αβγ", "aαb", "ü", "aé", "é!", "中中", "(αβ", "<ab", "'é'", "\"ω\""]);
    let g = Grammar::new(STRINGS).unwrap();
    assert_coverage(&walk("strings", &g, &pieces, &eog, 400, 0x0bad_5eed_1234_5678), 200);
}

#[test]
fn token_masks() {
    // Token elements by text (`<think>`) and by id, next to characters.
    let (pieces, eog) = test_pieces(&["<think>", "</think>", "<tool>"]);
    let vocab = Vocab::new(pieces.clone(), &eog);
    let tool = pieces.iter().position(|p| p == b"<tool>").unwrap();
    let text = format!(
        "root ::= <think> body </think> answer | answer\nbody ::= (!</think>)*\nanswer ::= [a-z ]+ ( <[{tool}]> \"(\" [^)]* \")\" )?"
    );
    let g = Grammar::with_vocab(&text, "root", &vocab).unwrap();
    assert_coverage(&walk("tokens", &g, &pieces, &eog, 400, 0xdead_beef_cafe_f00d), 400);
}

#[test]
fn partial_characters() {
    // Targeted states: a split "é", "€" and "😀" against classes that can and cannot finish them.
    let (pieces, eog) = test_pieces(&[]);
    let vocab = Arc::new(Vocab::new(pieces.clone(), &eog));
    let byte = |b: u8| u32::from(b); // the token of a single byte is its value
    let cases: [(&str, &[u8]); 6] = [
        ("root ::= \"é\" \"x\"", &[0xc3]),
        ("root ::= [^é] \"x\"", &[0xc3]),
        ("root ::= [à-ï]+", &[0xc3]),
        ("root ::= \"€\"", &[0xe2, 0x82]),
        ("root ::= [^😀-😏]", &[0xf0, 0x9f]),
        ("root ::= . .", &[0xf0, 0x9f, 0x98]),
    ];
    for (text, prefix) in cases {
        let g = Grammar::new(text).unwrap();
        let world = World { oracle: Oracle { rules: g.rules() }, pieces: pieces.clone(), eog: eog.clone() };
        let mut s = State { stacks: world.oracle.initial(0), part: Part::default() };
        let mut m = Matcher::new(&g, Arc::clone(&vocab));
        for (i, &b) in prefix.iter().enumerate() {
            let t = byte(b);
            let next = world.accept(&s, t).unwrap();
            assert_eq!(m.accept(t).is_ok(), next.is_some(), "{text}: byte {i}");
            let Some(next) = next else { break };
            s = next;
            let mask = m.mask().unwrap();
            for t in 0..pieces.len() as u32 {
                if let Some(want) = world.allows(&s, t) {
                    assert_eq!(
                        mask_bit(&mask, t),
                        want,
                        "{text} after {:x?}: token {t} {:?}",
                        &prefix[..=i],
                        pieces[t as usize]
                    );
                }
            }
        }
    }
}

// Classes whose characters and range bounds sit on the edges of the blocks of code points that
// one UTF-8 lead byte starts (0xC2: U+0080-U+00BF, 0xC3: U+00C0-U+00FF, 0xDF: up to U+07FF,
// 0xE0: U+0800 up, 0xF0: U+10000 up), where the walk skips every token whose next character
// begins with a lead byte no class can take.
const LEAD_EDGES: &str = r#"
root ::= ( [¿-À] | "߿" | [ࠀ-ࠁ] | [𐀀] | "a" [^é] | [¡] [Ā] ) root?
"#;

#[test]
fn lead_byte_edge_masks() {
    let extra = ["¿", "À", "¿À", "߿", "ࠀ", "ࠁ߿", "𐀀", "a¿", "aé", "aè", "¡Ā", "¡", "Ā", "¿a", "߿ࠀ𐀀"];
    let (pieces, eog) = test_pieces(&extra);
    let g = Grammar::new(LEAD_EDGES).unwrap();
    let seen = walk("lead edges", &g, &pieces, &eog, 300, 0x0123_4567_89ab_cdef);
    assert!(seen.states >= 300 && seen.masks >= 5, "{seen:?}");
}

// Length-bounded strings whose classes take some characters from U+0080 up and not others
// (several intervals above ASCII): the chain shortcut takes a token of whole wide characters
// only where every one of them leads on at each step.
const BOUNDED_WIDE: &str = r#"
root ::= ( "\"" [^"α-ω]{0,6} "\"" | "<" [à-ÿa-z]{1,5} ">" | "(" [^)]{2,3} ")" ) ( "," root )?
"#;

#[test]
fn bounded_wide_string_masks() {
    let extra = ["αβ", "aé", "éé", "ééé", "àb", "ab", "abc", "abcd", "ω", "é)", "aéb", "éàé", "ü", "中中", "\"é", "<é"];
    let (pieces, eog) = test_pieces(&extra);
    let g = Grammar::new(BOUNDED_WIDE).unwrap();
    assert_coverage(&walk("bounded wide", &g, &pieces, &eog, 400, 0x0b0b_1e55_5eed_0002), 200);
}
