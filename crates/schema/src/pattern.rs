//! `pattern` regular expressions as grammar rules, translated as llama.cpp's converter
//! translates them, and the checks that keep to the subset it translates faithfully.
//!
//! The translation walks the pattern once: runs of plain characters become string literals
//! (adjacent ones merged), `.` the `dot` rule, `[...]` classes are copied, `(...)` and `(?:...)`
//! groups recurse, `|` separates alternatives, and `*`, `+`, `?`, `{m,n}` apply to the item before
//! them (a non-literal item under `{m,n}` gets its own rule, `name-1`, `name-2`, ...). A
//! character followed by a quantifier is split off its literal so the quantifier applies to it
//! alone.
//!
//! Refused, where llama.cpp would emit a wrong or unparsable grammar or drop part of the
//! pattern: a pattern not anchored as `^...$`; anchors, lookarounds, named groups, inline flags
//! and backreferences inside it; escapes that have no meaning in the grammar (`\d`, `\w`, `\s`,
//! `\b`, `\/`, ...); `+?` and `{m,n}?` (read as an optional repetition, a different language)
//! and other stacked quantifiers; quantifiers with nothing to repeat; unbalanced `(`, `)`, `[`,
//! `{`, and stray `]`, `}`; empty classes and POSIX classes; a quantifier right after an escape
//! or `"` inside a longer literal, or after a `\x..`/`\u....` escape (llama.cpp would repeat
//! the wrong part); `*` or `+` after a group with an empty alternative (`(a|)*`: llama.cpp
//! writes a left-recursive rule, which grammar parsers refuse).

use crate::rules::{Rules, repetition};
use std::collections::HashMap;

/// A pattern the translation refuses: where (characters from the start of the pattern) and why.
#[derive(Debug)]
pub(crate) struct PatternError {
    pub(crate) offset: usize,
    pub(crate) message: String,
}

type Result<T> = std::result::Result<T, PatternError>;

/// How deep groups may nest (the translation recurses per group).
const MAX_GROUP_DEPTH: usize = 64;

/// The `dot` rule: any character but a line break.
const DOT: &str = r"[^\x0A\x0D]";

/// Characters that end a run of literal characters.
fn is_special(c: char) -> bool {
    matches!(c, '|' | '.' | '(' | ')' | '[' | ']' | '{' | '}' | '*' | '+' | '?')
}

/// Characters whose escape (`\.`) stands for the character itself in a literal.
fn is_escaped_special(c: char) -> bool {
    matches!(c, '^' | '$' | '.' | '[' | ']' | '(' | ')' | '|' | '{' | '}' | '*' | '+' | '?')
}

fn is_quantifier(c: Option<&char>) -> bool {
    matches!(c, Some('*' | '+' | '?' | '{'))
}

/// Translates `pattern` into a rule named `name` (adding helper rules on the way) and returns
/// the rule's name.
pub(crate) fn translate(pattern: &str, name: &str, rules: &mut Rules) -> Result<String> {
    let chars: Vec<char> = pattern.chars().collect();
    if chars.first() != Some(&'^') || chars.len() < 2 || chars.last() != Some(&'$') {
        return Err(PatternError {
            offset: 0,
            message: "the pattern must start with `^` and end with `$` (llama.cpp's converter \
                      only translates fully anchored patterns)"
                .to_owned(),
        });
    }
    let mut t = Translator { chars: chars[1..chars.len() - 1].to_vec(), i: 0, name, sub_rules: HashMap::new(), rules };
    let (body, _) = t.sequence(None, 0)?;
    Ok(t.rules.add(name, &format!("\"\\\"\" ({body}) \"\\\"\" space")))
}

/// How an item of a sequence may be quantified.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A literal, class, group or the dot.
    Atom,
    /// The `|` between alternatives.
    Bar,
    /// An item under `*` or `?`: a lazy `?` may follow (it keeps the language).
    StarOrOptional,
    /// An item under `+`, `{m,n}` or a lazy quantifier: nothing may follow.
    Closed,
    /// A group with an empty alternative (`(a|)`, `()`): an atom that takes no `*` or `+`, whose
    /// rule would be left-recursive (the grammar parser refuses it, llama.cpp's too; under
    /// `{m,}` the group gets a rule of its own, which is not).
    EmptyAltGroup,
}

struct Item {
    text: String,
    literal: bool,
    shape: Shape,
}

struct Translator<'a> {
    /// The pattern between `^` and `$`.
    chars: Vec<char>,
    i: usize,
    name: &'a str,
    /// Rules made for items under `{m,n}`, by item text.
    sub_rules: HashMap<String, String>,
    rules: &'a mut Rules,
}

impl Translator<'_> {
    fn fail<T>(&self, at: usize, message: impl Into<String>) -> Result<T> {
        Err(PatternError {
            // +1 for the `^` cut off the front.
            offset: at + 1,
            message: message.into(),
        })
    }

    /// A sequence up to the end of the pattern, or up to and including the `)` that closes the
    /// group opened at `open`; and whether one of its alternatives is empty.
    fn sequence(&mut self, open: Option<usize>, depth: usize) -> Result<(String, bool)> {
        let mut seq: Vec<Item> = Vec::new();
        let len = self.chars.len();
        while self.i < len {
            let c = self.chars[self.i];
            match c {
                '.' => {
                    let dot = self.rules.add("dot", DOT);
                    seq.push(Item { text: dot, literal: false, shape: Shape::Atom });
                    self.i += 1;
                }
                '(' => {
                    let at = self.i;
                    self.i += 1;
                    if self.chars.get(self.i) == Some(&'?') {
                        if self.chars.get(self.i + 1) == Some(&':') {
                            self.i += 2;
                        } else {
                            return self.fail(
                                at,
                                "lookarounds, named groups and inline flags `(?...)` are not \
                                 supported (only `(?:...)`)",
                            );
                        }
                    }
                    if depth >= MAX_GROUP_DEPTH {
                        return self.fail(at, "groups nest too deeply");
                    }
                    let (inner, empty_alt) = self.sequence(Some(at), depth + 1)?;
                    let shape = if empty_alt { Shape::EmptyAltGroup } else { Shape::Atom };
                    seq.push(Item { text: format!("({inner})"), literal: false, shape });
                }
                ')' => {
                    if open.is_none() {
                        return self.fail(self.i, "unbalanced `)`");
                    }
                    self.i += 1;
                    let empty_alt = has_empty_alternative(&seq);
                    return Ok((join(seq), empty_alt));
                }
                '[' => {
                    let class = self.class()?;
                    seq.push(Item { text: class, literal: false, shape: Shape::Atom });
                }
                '|' => {
                    seq.push(Item { text: "|".to_owned(), literal: false, shape: Shape::Bar });
                    self.i += 1;
                }
                '*' | '+' | '?' => {
                    let shape = self.quantifiable(&seq, c)?;
                    let last = seq.last_mut().expect("checked by quantifiable");
                    last.text = format!("{}{c}", rule_text(last));
                    last.literal = false;
                    last.shape = shape;
                    self.i += 1;
                }
                '{' => self.counted(&mut seq)?,
                _ => self.literal(&mut seq)?,
            }
        }
        if let Some(at) = open {
            return self.fail(at, "unbalanced `(`: no `)` closes it");
        }
        let empty_alt = has_empty_alternative(&seq);
        Ok((join(seq), empty_alt))
    }

    /// Whether the last item of `seq` may take quantifier `q`, and the shape it gets.
    fn quantifiable(&self, seq: &[Item], q: char) -> Result<Shape> {
        let Some(last) = seq.last() else {
            return self.fail(self.i, format!("`{q}` has nothing to repeat"));
        };
        match last.shape {
            Shape::Bar => self.fail(self.i, format!("`{q}` has nothing to repeat")),
            Shape::EmptyAltGroup if matches!(q, '*' | '+') => self.unbounded_empty_alt(q),
            Shape::Atom | Shape::EmptyAltGroup => Ok(match q {
                '*' | '?' => Shape::StarOrOptional,
                _ => Shape::Closed,
            }),
            Shape::StarOrOptional if q == '?' => Ok(Shape::Closed),
            Shape::StarOrOptional | Shape::Closed => self.fail(
                self.i,
                format!(
                    "`{q}` after another quantifier is not supported (only the lazy `*?` and \
                     `??` are: llama.cpp would read `+?` and `{{m,n}}?` as optional repetitions)"
                ),
            ),
        }
    }

    /// The refusal of `q` (`*` or `+`) after a group with an empty alternative.
    fn unbounded_empty_alt<T>(&self, q: char) -> Result<T> {
        self.fail(
            self.i,
            format!(
                "`{q}` after a group with an empty alternative is not supported (its grammar rule \
                 would be left-recursive, which grammar parsers refuse): leave the empty \
                 alternative out (`(a|)*` is `(a)*`)"
            ),
        )
    }

    /// `{m}`, `{m,}`, `{,n}` or `{m,n}` after an item.
    fn counted(&mut self, seq: &mut [Item]) -> Result<()> {
        let open = self.i;
        let len = self.chars.len();
        self.i += 1;
        let mut body = String::new();
        while self.i < len && self.chars[self.i] != '}' {
            body.push(self.chars[self.i]);
            self.i += 1;
        }
        if self.i >= len {
            return self.fail(open, "unbalanced `{`: no `}` closes it");
        }
        self.i += 1;
        let parts: Vec<&str> = body.split(',').collect();
        let number = |s: &str| -> Option<u32> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse::<u32>().ok().filter(|&n| n < i32::MAX as u32)
        };
        let bad = |this: &Self| {
            this.fail(
                open,
                format!("`{{{body}}}` is not a repetition count (`{{m}}`, `{{m,}}`, `{{,n}}` or `{{m,n}}`)"),
            )
        };
        let (min, max) = match parts.as_slice() {
            [n] => match number(n) {
                Some(n) => (n, Some(n)),
                None => return bad(self),
            },
            [lo, hi] => {
                let lo = if lo.is_empty() { Some(0) } else { number(lo) };
                // `{m,}`: no maximum (`Some(None)`); `None` is a bad count.
                let hi = if hi.is_empty() { Some(None) } else { number(hi).map(Some) };
                match (lo, hi) {
                    (Some(lo), Some(hi)) => (lo, hi),
                    _ => return bad(self),
                }
            }
            _ => return bad(self),
        };
        if max.is_some_and(|m| m < min) {
            return self.fail(open, format!("`{{{body}}}`: the minimum exceeds the maximum"));
        }
        // The position for messages is the `{`.
        let saved = self.i;
        self.i = open;
        let checked = self.quantifiable(seq, '{');
        self.i = saved;
        checked?;
        let last = seq.last_mut().expect("checked by quantifiable");
        let item = if last.literal {
            format!("\"{}\"", last.text)
        } else {
            match self.sub_rules.get(&last.text) {
                Some(id) => id.clone(),
                None => {
                    let id = self.rules.add(&format!("{}-{}", self.name, self.sub_rules.len() + 1), &last.text);
                    self.sub_rules.insert(last.text.clone(), id.clone());
                    id
                }
            }
        };
        last.text = repetition(&item, min, max, "");
        last.literal = false;
        last.shape = Shape::Closed;
        Ok(())
    }

    /// A `[...]` class, copied as it is once checked.
    fn class(&mut self) -> Result<String> {
        let open = self.i;
        let len = self.chars.len();
        let mut out = String::from("[");
        self.i += 1;
        let mut body_start = self.i;
        if self.chars.get(self.i) == Some(&'^') {
            out.push('^');
            self.i += 1;
            body_start = self.i;
        }
        while self.i < len && self.chars[self.i] != ']' {
            let c = self.chars[self.i];
            if c == '\\' {
                let Some(&next) = self.chars.get(self.i + 1) else {
                    return self.fail(open, "unbalanced `[`: no `]` closes it");
                };
                match next {
                    '\\' | ']' | '[' | '-' | '"' | 't' | 'n' | 'r' => {}
                    'x' => self.hex_digits(self.i, 2)?,
                    'u' => self.hex_digits(self.i, 4)?,
                    _ => return self.fail(self.i, bad_escape(next, true)),
                }
                out.push('\\');
                out.push(next);
                self.i += 2;
            } else {
                if c == '[' && self.chars.get(self.i + 1) == Some(&':') {
                    return self.fail(self.i, "POSIX classes like `[:alpha:]` are not supported");
                }
                out.push(c);
                self.i += 1;
            }
        }
        if self.i >= len {
            return self.fail(open, "unbalanced `[`: no `]` closes it");
        }
        if self.i == body_start {
            return self.fail(
                open,
                "an empty class (`[]` or `[^]`) is not supported: the class ends at the first \
                 `]`; write `\\]` for the character",
            );
        }
        out.push(']');
        self.i += 1;
        Ok(out)
    }

    /// Checks that the escape at `at` (`\x` or `\u`) is followed by `count` hex digits.
    fn hex_digits(&self, at: usize, count: usize) -> Result<()> {
        let digits = self.chars.get(at + 2..at + 2 + count);
        if digits.is_some_and(|d| d.iter().all(|c| c.is_ascii_hexdigit())) {
            Ok(())
        } else {
            self.fail(at, format!("`\\{}` must be followed by exactly {count} hex digits", self.chars[at + 1]))
        }
    }

    /// A run of literal characters (and escapes), as one literal item.
    fn literal(&mut self, seq: &mut Vec<Item>) -> Result<()> {
        let start = self.i;
        let len = self.chars.len();
        let mut lit = String::new();
        while self.i < len {
            let c = self.chars[self.i];
            let next = self.chars.get(self.i + 1).copied();
            if c == '\\' && self.i + 1 < len {
                let e = next.expect("checked above");
                let after = self.i + 2;
                if is_escaped_special(e) {
                    if !lit.is_empty() && is_quantifier(self.chars.get(after)) {
                        return self.quantified_escape(after);
                    }
                    lit.push(e);
                } else {
                    match e {
                        't' | 'n' | 'r' | '\\' | '"' | '-' => {
                            if !lit.is_empty() && is_quantifier(self.chars.get(after)) {
                                return self.quantified_escape(after);
                            }
                        }
                        'x' | 'u' => {
                            let count = if e == 'x' { 2 } else { 4 };
                            self.hex_digits(self.i, count)?;
                            if is_quantifier(self.chars.get(after + count)) {
                                return self.fail(
                                    after + count,
                                    format!(
                                        "a quantifier right after a `\\{e}` escape is not \
                                         supported (llama.cpp would split the escape); use a \
                                         group: `(\\{e}..)`"
                                    ),
                                );
                            }
                        }
                        _ => return self.fail(self.i, bad_escape(e, false)),
                    }
                    lit.push('\\');
                    lit.push(e);
                }
                self.i += 2;
            } else if c == '"' {
                if !lit.is_empty() && is_quantifier(self.chars.get(self.i + 1)) {
                    return self.quantified_escape(self.i + 1);
                }
                lit.push_str("\\\"");
                self.i += 1;
            } else if !is_special(c)
                && (self.i == len - 1 || lit.is_empty() || next == Some('.') || next.is_some_and(|n| !is_special(n)))
            {
                match c {
                    '\\' => return self.fail(self.i, "the pattern ends with a lone `\\`"),
                    '^' | '$' => {
                        return self.fail(
                            self.i,
                            format!(
                                "`{c}` inside the pattern is not supported (only the outer \
                                 `^...$` anchors are); write `\\{c}` for the character"
                            ),
                        );
                    }
                    _ => {}
                }
                lit.push(c);
                self.i += 1;
            } else {
                break;
            }
        }
        if lit.is_empty() {
            if self.i == start {
                let c = self.chars[self.i];
                return self.fail(self.i, format!("unbalanced `{c}`; write `\\{c}` for the character"));
            }
        } else {
            seq.push(Item { text: lit, literal: true, shape: Shape::Atom });
        }
        Ok(())
    }

    fn quantified_escape<T>(&self, at: usize) -> Result<T> {
        self.fail(
            at,
            "a quantifier right after an escaped character or `\"` that follows other literal \
             characters is not supported (llama.cpp would repeat the whole literal); put the \
             character in a group: `(\\.)+`",
        )
    }
}

/// Why an escape is refused, with the usual way around it.
fn bad_escape(e: char, in_class: bool) -> String {
    let hint = match e {
        'd' => "use `[0-9]`".to_owned(),
        'D' => "use `[^0-9]`".to_owned(),
        'w' => "use `[a-zA-Z0-9_]`".to_owned(),
        'W' => "use `[^a-zA-Z0-9_]`".to_owned(),
        's' => "use `[ \\t\\n\\r]`".to_owned(),
        'S' => "use `[^ \\t\\n\\r]`".to_owned(),
        'b' | 'B' if !in_class => "word boundaries are not supported".to_owned(),
        '1'..='9' | 'k' => "backreferences are not supported".to_owned(),
        'p' | 'P' => "Unicode property classes are not supported".to_owned(),
        c if c.is_ascii_alphanumeric() => "this escape is not supported".to_owned(),
        c => format!("write `{c}` without the backslash"),
    };
    format!(
        "the escape `\\{e}` has no equivalent in the grammar{}: {hint}",
        if in_class { " inside a class" } else { "" }
    )
}

/// A literal item as grammar text.
fn rule_text(item: &Item) -> String {
    if item.literal { format!("\"{}\"", item.text) } else { item.text.clone() }
}

/// Whether a sequence has an empty alternative: it is empty, or starts or ends with `|`, or has
/// two `|` in a row.
fn has_empty_alternative(seq: &[Item]) -> bool {
    let bar = |i: &Item| i.shape == Shape::Bar;
    seq.first().is_none_or(bar) || seq.last().is_some_and(bar) || seq.windows(2).any(|w| bar(&w[0]) && bar(&w[1]))
}

/// The items of a sequence as grammar text, adjacent literals merged.
fn join(seq: Vec<Item>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut pending = String::new();
    for item in seq {
        if item.literal {
            pending.push_str(&item.text);
        } else {
            if !pending.is_empty() {
                parts.push(format!("\"{pending}\""));
                pending.clear();
            }
            parts.push(item.text);
        }
    }
    if !pending.is_empty() {
        parts.push(format!("\"{pending}\""));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pattern: &str) -> std::result::Result<String, String> {
        let mut rules = Rules::new();
        translate(pattern, "root", &mut rules)
            .map(|_| rules.format())
            .map_err(|e| format!("{}: {}", e.offset, e.message))
    }

    #[test]
    fn lazy_star_and_optional_keep_their_text() {
        let g = run("^a*?b??$").unwrap();
        assert!(g.contains(r#"root ::= "\"" ("a"*? "b"??) "\"" space"#), "{g}");
    }

    #[test]
    fn refusals() {
        let refused = [
            ("abc", 0),
            ("^abc", 0),
            ("^a\\d$", 2),
            ("^a(?=b)$", 2),
            ("^a+?$", 3),
            ("^a{2}?$", 5),
            ("^a{2,1}$", 2),
            ("^a{x}$", 2),
            ("^*a$", 1),
            ("^a|*$", 3),
            ("^(ab$", 1),
            ("^ab)$", 3),
            ("^[ab$", 1),
            ("^a]$", 2),
            ("^a}$", 2),
            ("^[]$", 1),
            ("^[\\d]$", 2),
            ("^[[:alpha:]]$", 2),
            ("^ab\\.+$", 5),
            ("^a\"+$", 3),
            ("^\\x41+$", 5),
            ("^\\x4$", 1),
            ("^a^b$", 2),
            ("^a\\$", 2),
            ("^a\\/b$", 2),
            ("^a\\1$", 2),
        ];
        for (p, at) in refused {
            match run(p) {
                Ok(g) => panic!("{p} translated: {g}"),
                Err(e) => assert!(e.starts_with(&format!("{at}:")), "{p}: {e}"),
            }
        }
    }

    #[test]
    fn supported_escapes() {
        let g = run(r#"^\.+\x41b\t[\]\-a-z\u00e9]"$"#).unwrap();
        assert!(g.contains(r#"root ::= "\"" ("."+ "\x41b\t" [\]\-a-z\u00e9] "\"") "\"" space"#), "{g}");
    }
}
