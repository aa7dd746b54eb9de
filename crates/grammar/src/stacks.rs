//! The pushdown semantics on parse stacks, as llama.cpp's grammar defines them: expanding a
//! stack until its top is a terminal (`advance`), matching a character or a partial UTF-8
//! sequence against a character class, and moving stacks over a code point (`accept_char`).
//!
//! A stack is a list of positions (bottom first); its top is the next element to match. An empty
//! stack means the grammar is complete along that parse.

use crate::engine::MAX_STACKS;
use crate::error::{GrammarError, Result};
use crate::rules::{Kind, Pos, Rules};
use crate::utf8::Partial;
use rustc_hash::FxHashSet as HashSet;

/// The most stacks the expansions ([`advance`]) of one call may pass through together: one
/// mask, check or accept of a matcher (every transition it computes), the start of a grammar,
/// one character of [`Grammar::matches`](crate::Grammar::matches). A cold mask of the JSON
/// grammars of `cargo xtask bench grammar` over a 49k-token vocabulary needs under 8k; a
/// grammar that needs this much (nested optional rules that multiply the parses, each
/// expanded again from every stack and for every character) is as pathological as one whose
/// states exceed [`MAX_STACKS`], and would stall llama.cpp.
pub(crate) const MAX_EXPANSION: usize = 64 * MAX_STACKS;

/// One parse stack.
pub type Stack = Vec<Pos>;

/// Expands `stack` into the stacks whose tops are terminals (characters or tokens) or that are
/// empty, appending them to `out` (llama.cpp's `llama_grammar_advance_stack`). Unlike llama.cpp,
/// `out` is not searched for each new stack (a quadratic cost over the many stacks of an
/// ambiguous grammar): it may hold duplicates, which the caller removes (a state is a sorted,
/// deduplicated set). Each stack it passes through takes one from `budget` (see
/// [`MAX_EXPANSION`]). Error: one stack expands into more than [`MAX_STACKS`] stacks, or the
/// budget runs out.
pub(crate) fn advance(rules: &Rules, stack: Stack, out: &mut Vec<Stack>, budget: &mut usize) -> Result<()> {
    let mut todo = vec![stack];
    let mut seen: HashSet<Stack> = HashSet::default();
    let mut added = 0usize;
    while let Some(cur) = todo.pop() {
        if !seen.insert(cur.clone()) {
            continue;
        }
        if added > MAX_STACKS || *budget == 0 {
            return Err(GrammarError::TooManyStacks { limit: MAX_STACKS });
        }
        *budget -= 1;
        let Some(&top) = cur.last() else {
            out.push(cur);
            added += 1;
            continue;
        };
        let e = rules.at(top);
        match e.kind {
            Kind::RuleRef => {
                let mut sub = rules.start(e.value);
                loop {
                    let mut next: Stack = cur[..cur.len() - 1].to_vec();
                    if !rules.at(top + 1).ends_sequence() {
                        next.push(top + 1);
                    }
                    if !rules.at(sub).ends_sequence() {
                        next.push(sub);
                    }
                    todo.push(next);
                    while !rules.at(sub).ends_sequence() {
                        sub += 1;
                    }
                    if rules.at(sub).kind == Kind::Alt {
                        sub += 1;
                    } else {
                        break;
                    }
                }
            }
            Kind::Char | Kind::CharNot | Kind::CharAny | Kind::Token | Kind::TokenNot => {
                out.push(cur);
                added += 1;
            }
            // A stack never rests on the end of an alternate or inside a class.
            Kind::End | Kind::Alt | Kind::CharAlt | Kind::CharRngUpper => {
                unreachable!("a parse stack rests on {:?}", e.kind)
            }
        }
    }
    Ok(())
}

/// Whether `chr` matches the class at `pos`, and the position after the class (llama.cpp's
/// `llama_grammar_match_char`).
pub(crate) fn match_char(rules: &Rules, mut pos: Pos, chr: u32) -> (bool, Pos) {
    let first = rules.at(pos);
    let positive = matches!(first.kind, Kind::Char | Kind::CharAny);
    debug_assert!(positive || first.kind == Kind::CharNot);
    let mut found = false;
    loop {
        let e = rules.at(pos);
        let next = rules.at(pos + 1);
        if next.kind == Kind::CharRngUpper {
            found = found || (e.value <= chr && chr <= next.value);
            pos += 2;
        } else if e.kind == Kind::CharAny {
            found = true;
            pos += 1;
        } else {
            found = found || e.value == chr;
            pos += 1;
        }
        if rules.at(pos).kind != Kind::CharAlt {
            break;
        }
    }
    (found == positive, pos)
}

/// Whether some completion of the partial UTF-8 sequence `partial` could match the class at
/// `pos` (llama.cpp's `llama_grammar_match_partial_char`).
pub(crate) fn match_partial(rules: &Rules, mut pos: Pos, partial: Partial) -> bool {
    let first = rules.at(pos);
    let positive = matches!(first.kind, Kind::Char | Kind::CharAny);
    let (value, n_remain) = (partial.value, partial.n_remain);
    // An invalid sequence, or a 7-bit character split over two bytes (overlong).
    if n_remain < 0 || (n_remain == 1 && value < 2) {
        return false;
    }
    let shift = 6 * n_remain as u32;
    let mut low = value.checked_shl(shift).unwrap_or(0);
    let high = low | ((1u32 << shift) - 1);
    if low == 0 {
        if n_remain == 2 {
            low = 1 << 11;
        } else if n_remain == 3 {
            low = 1 << 16;
        }
    }
    loop {
        let e = rules.at(pos);
        let next = rules.at(pos + 1);
        if next.kind == Kind::CharRngUpper {
            if e.value <= high && low <= next.value {
                return positive;
            }
            pos += 2;
        } else if e.kind == Kind::CharAny {
            return true;
        } else {
            if low <= e.value && e.value <= high {
                return positive;
            }
            pos += 1;
        }
        if rules.at(pos).kind != Kind::CharAlt {
            break;
        }
    }
    !positive
}

/// Whether the class at `pos` may match some code point in `low..=high`: exactly for a
/// positive class (an element or range meets the interval, or it is `.`); always for a negated
/// one (a sound over-approximation for pruning).
pub(crate) fn may_match_range(rules: &Rules, mut pos: Pos, low: u32, high: u32) -> bool {
    if rules.at(pos).kind == Kind::CharNot {
        return true;
    }
    loop {
        let e = rules.at(pos);
        let next = rules.at(pos + 1);
        if next.kind == Kind::CharRngUpper {
            if e.value <= high && low <= next.value {
                return true;
            }
            pos += 2;
        } else if e.kind == Kind::CharAny {
            return true;
        } else {
            if low <= e.value && e.value <= high {
                return true;
            }
            pos += 1;
        }
        if rules.at(pos).kind != Kind::CharAlt {
            return false;
        }
    }
}

/// The stacks `stack` becomes after the code point `chr` (none where it cannot take it; a stack
/// whose top is a token never takes a character), appended to `out` (llama.cpp's
/// `llama_grammar_accept_chr`); `budget` as for [`advance`].
pub(crate) fn accept_char(
    rules: &Rules,
    stack: &[Pos],
    chr: u32,
    out: &mut Vec<Stack>,
    budget: &mut usize,
) -> Result<()> {
    let Some(&top) = stack.last() else { return Ok(()) };
    if rules.at(top).is_token() {
        return Ok(());
    }
    let (ok, after) = match_char(rules, top, chr);
    if ok {
        let mut next: Stack = stack[..stack.len() - 1].to_vec();
        if !rules.at(after).ends_sequence() {
            next.push(after);
        }
        advance(rules, next, out, budget)?;
    }
    Ok(())
}

/// The stacks `stack` (whose top is a token element) becomes after token `token`, appended to
/// `out`; nothing where the element does not match it; `budget` as for [`advance`].
pub(crate) fn accept_token_elem(
    rules: &Rules,
    stack: &[Pos],
    token: u32,
    out: &mut Vec<Stack>,
    budget: &mut usize,
) -> Result<()> {
    let Some(&top) = stack.last() else { return Ok(()) };
    if token_matches(rules, top, token) {
        let mut next: Stack = stack[..stack.len() - 1].to_vec();
        if !rules.at(top + 1).ends_sequence() {
            next.push(top + 1);
        }
        advance(rules, next, out, budget)?;
    }
    Ok(())
}

/// Whether the token element at `pos` matches `token` (llama.cpp's `llama_grammar_match_token`).
pub(crate) fn token_matches(rules: &Rules, pos: Pos, token: u32) -> bool {
    let e = rules.at(pos);
    match e.kind {
        Kind::Token => e.value == token,
        Kind::TokenNot => e.value != token,
        _ => false,
    }
}

/// The rule may derive the empty string / left recursion, as llama.cpp's
/// `llama_grammar_detect_left_recursion`: the first rule from which a search finds a rule that
/// reaches itself before consuming anything, if any. The depth-first search keeps its own stack
/// (a frame per rule being explored), so a chain of many thousands of rules, each reached from
/// the one before, needs no deep call stack.
pub(crate) fn left_recursion(rules: &Rules) -> Option<usize> {
    let n = rules.len();
    let mut visited = vec![false; n];
    let mut in_progress = vec![false; n];
    let mut may_be_empty = vec![false; n];
    /// A rule being explored: its id, the element to look at next, and whether a reference
    /// there is still at the start of its alternate (only empty-deriving rules before it).
    struct Frame {
        rule: usize,
        at: usize,
        recurse: bool,
    }
    // Marks rule `i` in progress, notes whether an alternate of it is empty, and gives its frame.
    let enter = |i: usize, in_progress: &mut [bool], may_be_empty: &mut [bool]| {
        in_progress[i] = true;
        let mut at_start = true;
        for e in rules.rule(i) {
            if e.ends_sequence() {
                if at_start {
                    may_be_empty[i] = true;
                    break;
                }
                at_start = true;
            } else {
                at_start = false;
            }
        }
        Frame { rule: i, at: 0, recurse: true }
    };
    for root in 0..n {
        if visited[root] {
            continue;
        }
        let mut frames = vec![enter(root, &mut in_progress, &mut may_be_empty)];
        while let Some(f) = frames.last_mut() {
            let rule = rules.rule(f.rule);
            let Some(e) = rule.get(f.at) else {
                // every element looked at: no cycle through this rule
                in_progress[f.rule] = false;
                visited[f.rule] = true;
                frames.pop();
                if let Some(parent) = frames.last_mut() {
                    // back at the reference that entered the rule
                    let r = rules.rule(parent.rule)[parent.at].value as usize;
                    parent.recurse = may_be_empty[r];
                    parent.at += 1;
                }
                continue;
            };
            if e.kind == Kind::RuleRef && f.recurse {
                let r = e.value as usize;
                if in_progress[r] {
                    return Some(root);
                }
                if visited[r] {
                    // explored already, no cycle (llama.cpp explores it again from every
                    // reference: exponential time for rules that refer twice to an empty rule)
                    f.recurse = may_be_empty[r];
                    f.at += 1;
                } else {
                    frames.push(enter(r, &mut in_progress, &mut may_be_empty));
                }
            } else {
                f.recurse = e.ends_sequence();
                f.at += 1;
            }
        }
    }
    None
}
