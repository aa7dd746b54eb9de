//! The GBNF parser: grammar text to [`Rules`], as llama.cpp's `llama_grammar_parser` parses it
//! (the same rule ids, generated rule names and element sequences, so that its parser tests
//! hold), with errors that name the line and column.
//!
//! The language: `name ::= alternates` rules separated by newlines; alternates separated by `|`;
//! sequences of `"literals"`, `[classes]` (`^` inverts, `a-z` ranges), `.` (any character),
//! rule references, `(groups)`, and tokens `<[id]>`, `<text>` (a vocabulary's token whose text is
//! exactly that) and their inverses `!<...>`; postfix `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`;
//! escapes `\x..`, `\u....`, `\U........`, `\t`, `\r`, `\n`, `\\`, `\"`, `\[`, `\]`, `\-`;
//! comments from `#` to the end of the line. Repetitions are rewritten into generated rules as
//! llama.cpp rewrites them, within its limits (2000 repetitions; 2000 generated rules for nested
//! repetitions).

use crate::error::GrammarError;
use crate::rules::{Elem, Kind, Rules};
use std::collections::HashMap;

/// llama.cpp's `MAX_REPETITION_THRESHOLD`.
const MAX_REPETITION: u64 = 2000;

/// Looks a token up by its text, for `<text>` tokens in a grammar.
pub trait TokenLookup {
    /// The id of the token whose text is exactly `text`.
    fn token_id(&self, text: &str) -> Option<u32>;
}

type R<T> = std::result::Result<T, String>;

struct Parser<'a> {
    src: &'a [u8],
    vocab: Option<&'a dyn TokenLookup>,
    symbol_ids: HashMap<String, u32>,
    names: Vec<String>,
    rules: Vec<Vec<Elem>>,
    /// Where the error is (a byte offset).
    err_at: usize,
    /// Parenthesized groups open around the current position (at most [`MAX_NESTING`]).
    depth: usize,
}

/// The deepest nesting of parenthesized groups a grammar may have: each level is a recursive
/// call of the parser, and the parser must not run out of stack on a client's grammar (llama.cpp
/// sets no limit). Grammars that people write, and those `json_schema` writes, nest a few levels.
pub const MAX_NESTING: usize = 256;

fn is_digit(c: u8) -> bool {
    c.is_ascii_digit()
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

impl<'a> Parser<'a> {
    /// The byte at `i`, 0 at the end (the C string's terminator).
    fn at(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    fn fail<T>(&mut self, at: usize, msg: impl Into<String>) -> R<T> {
        self.err_at = at;
        Err(msg.into())
    }

    fn symbol_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.symbol_ids.get(name) {
            return id;
        }
        let id = self.symbol_ids.len() as u32;
        self.symbol_ids.insert(name.to_string(), id);
        self.names.push(name.to_string());
        id
    }

    fn generate_symbol_id(&mut self, base: &str) -> u32 {
        let id = self.symbol_ids.len() as u32;
        let name = format!("{base}_{id}");
        if self.symbol_ids.insert(name.clone(), id).is_none() {
            self.names.push(name);
        }
        id
    }

    fn add_rule(&mut self, id: u32, rule: Vec<Elem>) {
        let id = id as usize;
        if self.rules.len() <= id {
            self.rules.resize(id + 1, Vec::new());
        }
        self.rules[id] = rule;
    }

    fn space(&self, mut pos: usize, newline_ok: bool) -> usize {
        loop {
            match self.at(pos) {
                b' ' | b'\t' => pos += 1,
                b'\r' | b'\n' if newline_ok => pos += 1,
                b'#' => {
                    while !matches!(self.at(pos), 0 | b'\r' | b'\n') {
                        pos += 1;
                    }
                }
                _ => return pos,
            }
        }
    }

    fn name(&mut self, pos: usize) -> R<usize> {
        let mut end = pos;
        while is_word(self.at(end)) {
            end += 1;
        }
        if end == pos {
            return self.fail(pos, "expecting a name");
        }
        Ok(end)
    }

    fn int(&mut self, pos: usize) -> R<(u64, usize)> {
        let mut end = pos;
        while is_digit(self.at(end)) {
            end += 1;
        }
        if end == pos {
            return self.fail(pos, "expecting an integer");
        }
        let digits = std::str::from_utf8(&self.src[pos..end]).unwrap_or("0");
        match digits.parse::<u64>() {
            Ok(v) => Ok((v, end)),
            Err(_) => self.fail(pos, "integer out of range"),
        }
    }

    fn hex(&mut self, pos: usize, size: usize) -> R<(u32, usize)> {
        let mut value: u32 = 0;
        let mut p = pos;
        while p < pos + size {
            let c = self.at(p);
            let d = match c {
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                b'0'..=b'9' => c - b'0',
                _ => break,
            };
            value = (value << 4).wrapping_add(u32::from(d));
            p += 1;
        }
        if p != pos + size {
            return self.fail(pos, format!("expecting {size} hex chars"));
        }
        Ok((value, p))
    }

    /// One UTF-8 character, decoded as llama.cpp's single-character `decode_utf8` does (a
    /// malformed sequence decodes to whatever its bits give, never past the end).
    fn utf8(&self, pos: usize) -> (u32, usize) {
        const LEN: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
        let first = self.at(pos);
        let len = LEN[usize::from(first >> 4)];
        let mut value = u32::from(first) & ((1u32 << (8 - len)) - 1);
        let mut p = pos + 1;
        while p < pos + len && self.at(p) != 0 {
            value = (value << 6) + (u32::from(self.at(p)) & 0x3f);
            p += 1;
        }
        (value, p)
    }

    fn char(&mut self, pos: usize) -> R<(u32, usize)> {
        match self.at(pos) {
            b'\\' => match self.at(pos + 1) {
                b'x' => self.hex(pos + 2, 2),
                b'u' => self.hex(pos + 2, 4),
                b'U' => self.hex(pos + 2, 8),
                b't' => Ok((u32::from(b'\t'), pos + 2)),
                b'r' => Ok((u32::from(b'\r'), pos + 2)),
                b'n' => Ok((u32::from(b'\n'), pos + 2)),
                c @ (b'\\' | b'"' | b'[' | b']' | b'-') => Ok((u32::from(c), pos + 2)),
                _ => self.fail(pos, "unknown escape"),
            },
            0 => self.fail(pos, "unexpected end of input"),
            _ => Ok(self.utf8(pos)),
        }
    }

    fn token(&mut self, pos: usize) -> R<(u32, usize)> {
        let start = pos;
        if self.at(pos) != b'<' {
            return self.fail(pos, "expecting '<'");
        }
        let mut p = pos + 1;
        if self.at(p) == b'[' {
            p += 1;
            let (id, end) = self.int(p)?;
            let Ok(id) = u32::try_from(id) else { return self.fail(p, "token id out of range") };
            p = end;
            if self.at(p) != b']' {
                return self.fail(p, "expecting ']'");
            }
            p += 1;
            if self.at(p) != b'>' {
                return self.fail(p, "expecting '>'");
            }
            return Ok((id, p + 1));
        }
        let Some(vocab) = self.vocab else { return self.fail(start, "no vocabulary to look the token up in") };
        while !matches!(self.at(p), 0 | b'>') {
            p += 1;
        }
        if self.at(p) != b'>' {
            return self.fail(p, "expecting '>'");
        }
        p += 1;
        let text = String::from_utf8_lossy(&self.src[start..p]).into_owned();
        match vocab.token_id(&text) {
            Some(id) => Ok((id, p)),
            None => self.fail(start, format!("invalid token '{text}': no token of the vocabulary has that text")),
        }
    }

    fn alternates(&mut self, pos: usize, rule_name: &str, rule_id: u32, nested: bool) -> R<usize> {
        let mut rule = Vec::new();
        let mut pos = self.sequence(pos, rule_name, &mut rule, nested)?;
        while self.at(pos) == b'|' {
            rule.push(Elem::new(Kind::Alt, 0));
            pos = self.space(pos + 1, true);
            pos = self.sequence(pos, rule_name, &mut rule, nested)?;
        }
        rule.push(Elem::new(Kind::End, 0));
        self.add_rule(rule_id, rule);
        Ok(pos)
    }

    /// Rewrites the last symbol of `rule` (from `last_start`) into `min..=max` repetitions
    /// (`max` None: unbounded), as llama.cpp's `handle_repetitions`.
    #[allow(clippy::too_many_arguments)]
    fn repeat(
        &mut self,
        at: usize,
        rule_name: &str,
        rule: &mut Vec<Elem>,
        last_start: usize,
        n_prev_rules: &mut u64,
        min: u64,
        max: Option<u64>,
    ) -> R<()> {
        if last_start == rule.len() {
            return self.fail(at, "expecting an item before */+/?/{");
        }
        // llama.cpp's count of optional copies wraps around here (it would try to make about 2^64
        // rules); a maximum below the minimum is refused.
        if let Some(m) = max.filter(|&m| m < min) {
            return self.fail(at, format!("the maximum repetition count {m} is below the minimum {min}"));
        }
        let prev: Vec<Elem> = rule[last_start..].to_vec();
        let total = match max {
            Some(m) if m > 0 => m,
            _ if min > 0 => min,
            _ => 1,
        };
        if n_prev_rules.saturating_mul(total) >= MAX_REPETITION {
            return self.fail(
                at,
                "the number of rules that are going to be repeated multiplied by the new repetition exceeds sane \
                 defaults (2000): reduce the number of repetitions or the rule's complexity",
            );
        }
        if min == 0 {
            rule.truncate(last_start);
        } else {
            for _ in 1..min {
                rule.extend_from_slice(&prev);
            }
        }
        let n_opt = max.map_or(1, |m| m.saturating_sub(min));
        let mut last_rec = 0;
        for i in 0..n_opt {
            let mut rec = prev.clone();
            let id = self.generate_symbol_id(rule_name);
            if i > 0 || max.is_none() {
                rec.push(Elem::new(Kind::RuleRef, if max.is_none() { id } else { last_rec }));
            }
            rec.push(Elem::new(Kind::Alt, 0));
            rec.push(Elem::new(Kind::End, 0));
            self.add_rule(id, rec);
            last_rec = id;
        }
        if n_opt > 0 {
            rule.push(Elem::new(Kind::RuleRef, last_rec));
        }
        *n_prev_rules = n_prev_rules.saturating_mul(total);
        Ok(())
    }

    fn sequence(&mut self, src: usize, rule_name: &str, rule: &mut Vec<Elem>, nested: bool) -> R<usize> {
        let mut last_start = rule.len();
        let mut pos = src;
        let mut n_prev_rules: u64 = 1;
        loop {
            let c = self.at(pos);
            match c {
                0 => break,
                b'"' => {
                    pos += 1;
                    last_start = rule.len();
                    n_prev_rules = 1;
                    while self.at(pos) != b'"' {
                        if self.at(pos) == 0 {
                            return self.fail(pos, "unexpected end of input");
                        }
                        let (ch, next) = self.char(pos)?;
                        pos = next;
                        rule.push(Elem::new(Kind::Char, ch));
                    }
                    pos = self.space(pos + 1, nested);
                }
                b'[' => {
                    pos += 1;
                    let mut start = Kind::Char;
                    if self.at(pos) == b'^' {
                        pos += 1;
                        start = Kind::CharNot;
                    }
                    last_start = rule.len();
                    n_prev_rules = 1;
                    while self.at(pos) != b']' {
                        if self.at(pos) == 0 {
                            return self.fail(pos, "unexpected end of input");
                        }
                        let (ch, next) = self.char(pos)?;
                        pos = next;
                        let kind = if last_start < rule.len() { Kind::CharAlt } else { start };
                        rule.push(Elem::new(kind, ch));
                        if self.at(pos) == b'-' && self.at(pos + 1) != b']' {
                            if self.at(pos + 1) == 0 {
                                return self.fail(pos + 1, "unexpected end of input");
                            }
                            let (end, next) = self.char(pos + 1)?;
                            pos = next;
                            rule.push(Elem::new(Kind::CharRngUpper, end));
                        }
                    }
                    pos = self.space(pos + 1, nested);
                }
                b'<' | b'!' => {
                    let mut kind = Kind::Token;
                    if c == b'!' {
                        kind = Kind::TokenNot;
                        pos += 1;
                    }
                    let (id, end) = self.token(pos)?;
                    last_start = rule.len();
                    n_prev_rules = 1;
                    rule.push(Elem::new(kind, id));
                    pos = self.space(end, nested);
                }
                c if is_word(c) => {
                    let end = self.name(pos)?;
                    let name = String::from_utf8_lossy(&self.src[pos..end]).into_owned();
                    let id = self.symbol_id(&name);
                    pos = self.space(end, nested);
                    last_start = rule.len();
                    n_prev_rules = 1;
                    rule.push(Elem::new(Kind::RuleRef, id));
                }
                b'(' => {
                    if self.depth == MAX_NESTING {
                        return self.fail(pos, format!("groups nest more than {MAX_NESTING} levels deep"));
                    }
                    pos = self.space(pos + 1, true);
                    let before = self.symbol_ids.len() as u64;
                    let sub = self.generate_symbol_id(rule_name);
                    self.depth += 1;
                    let after = self.alternates(pos, rule_name, sub, true);
                    self.depth -= 1;
                    pos = after?;
                    n_prev_rules = (self.symbol_ids.len() as u64).saturating_sub(before).max(1);
                    last_start = rule.len();
                    rule.push(Elem::new(Kind::RuleRef, sub));
                    if self.at(pos) != b')' {
                        return self.fail(pos, "expecting ')'");
                    }
                    pos = self.space(pos + 1, nested);
                }
                b'.' => {
                    last_start = rule.len();
                    n_prev_rules = 1;
                    rule.push(Elem::new(Kind::CharAny, 0));
                    pos = self.space(pos + 1, nested);
                }
                b'*' | b'+' | b'?' => {
                    let at = pos;
                    pos = self.space(pos + 1, nested);
                    let (min, max) = match c {
                        b'*' => (0, None),
                        b'+' => (1, None),
                        _ => (0, Some(1)),
                    };
                    self.repeat(at, rule_name, rule, last_start, &mut n_prev_rules, min, max)?;
                }
                b'{' => {
                    let at = pos;
                    pos = self.space(pos + 1, nested);
                    if !is_digit(self.at(pos)) {
                        return self.fail(pos, "expecting an int");
                    }
                    let (min, end) = self.int(pos)?;
                    pos = self.space(end, nested);
                    let mut max = None;
                    if self.at(pos) == b'}' {
                        max = Some(min);
                        pos = self.space(pos + 1, nested);
                    } else if self.at(pos) == b',' {
                        pos = self.space(pos + 1, nested);
                        if is_digit(self.at(pos)) {
                            let (m, end) = self.int(pos)?;
                            max = Some(m);
                            pos = self.space(end, nested);
                        }
                        if self.at(pos) != b'}' {
                            return self.fail(pos, "expecting '}'");
                        }
                        pos = self.space(pos + 1, nested);
                    } else {
                        return self.fail(pos, "expecting ','");
                    }
                    if min > MAX_REPETITION {
                        return self.fail(at, "the number of repetitions exceeds sane defaults (2000)");
                    }
                    // llama.cpp: a maximum above the limit means no maximum.
                    let max = max.filter(|&m| m <= MAX_REPETITION);
                    self.repeat(at, rule_name, rule, last_start, &mut n_prev_rules, min, max)?;
                }
                _ => break,
            }
        }
        Ok(pos)
    }

    fn rule(&mut self, src: usize) -> R<usize> {
        let name_end = self.name(src)?;
        let mut pos = self.space(name_end, false);
        let name = String::from_utf8_lossy(&self.src[src..name_end]).into_owned();
        let id = self.symbol_id(&name);
        if !(self.at(pos) == b':' && self.at(pos + 1) == b':' && self.at(pos + 2) == b'=') {
            return self.fail(pos, "expecting ::=");
        }
        pos = self.space(pos + 3, true);
        pos = self.alternates(pos, &name, id, false)?;
        match self.at(pos) {
            b'\r' => pos += if self.at(pos + 1) == b'\n' { 2 } else { 1 },
            b'\n' => pos += 1,
            0 => {}
            _ => return self.fail(pos, "expecting newline or end"),
        }
        Ok(self.space(pos, true))
    }

    fn line_col(&self, at: usize) -> (usize, usize) {
        let before = &self.src[..at.min(self.src.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        let col = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
        (line, col)
    }
}

/// Parses `text` (`vocab` resolves `<text>` tokens) into its rules.
pub(crate) fn parse(text: &str, vocab: Option<&dyn TokenLookup>) -> Result<Rules, GrammarError> {
    // The C parser reads up to the first NUL.
    let src = text.as_bytes();
    let src = &src[..src.iter().position(|&b| b == 0).unwrap_or(src.len())];
    let mut p =
        Parser { src, vocab, symbol_ids: HashMap::new(), names: Vec::new(), rules: Vec::new(), err_at: 0, depth: 0 };
    let mut run = || -> R<()> {
        let mut pos = p.space(0, true);
        while p.at(pos) != 0 {
            pos = p.rule(pos)?;
        }
        Ok(())
    };
    if let Err(msg) = run() {
        let (line, column) = p.line_col(p.err_at);
        let near: String = String::from_utf8_lossy(&p.src[p.err_at.min(p.src.len())..]).chars().take(24).collect();
        return Err(GrammarError::Parse { line, column, message: msg, near });
    }
    // Every referenced rule must be defined.
    let mut names = p.names;
    names.resize(p.symbol_ids.len().max(p.rules.len()), String::new());
    let defined = |id: usize| p.rules.get(id).is_some_and(|r| !r.is_empty());
    if let Some((_, name)) = names.iter().enumerate().find(|&(id, _)| !defined(id)) {
        return Err(GrammarError::UndefinedRule { name: name.clone() });
    }
    if p.rules.is_empty() {
        return Err(GrammarError::Empty);
    }
    Ok(Rules::new(&p.rules, names))
}
