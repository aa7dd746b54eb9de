//! [`Grammar`]: a parsed and checked grammar (llama.cpp's `llama_grammar_init_impl` checks: every
//! rule defined, a start rule, no left recursion) with the parse stacks it starts from.

use crate::error::{GrammarError, Result};
use crate::parse::{self, TokenLookup};
use crate::rules::{Kind, Rules};
use crate::stacks::{self, Stack};
use std::sync::Arc;

/// A compiled grammar; see the module docs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Grammar {
    pub(crate) rules: Arc<Rules>,
    pub(crate) initial: Vec<Stack>,
    pub(crate) has_tokens: bool,
    text: Arc<str>,
}

impl Grammar {
    /// Parses `text` and starts from its `root` rule. `<text>` tokens need [`Grammar::with_vocab`].
    pub fn new(text: &str) -> Result<Self> {
        Self::build(text, "root", None)
    }

    /// Parses `text`, resolving `<text>` tokens in `vocab`, and starts from rule `root`.
    pub fn with_vocab(text: &str, root: &str, vocab: &dyn TokenLookup) -> Result<Self> {
        Self::build(text, root, Some(vocab))
    }

    fn build(text: &str, root: &str, vocab: Option<&dyn TokenLookup>) -> Result<Self> {
        let rules = parse::parse(text, vocab)?;
        let root_id = rules.id(root).ok_or_else(|| GrammarError::NoRoot { name: root.to_string() })?;
        if let Some(i) = stacks::left_recursion(&rules) {
            return Err(GrammarError::LeftRecursion { name: rules.name(i).to_string() });
        }
        let mut initial = Vec::new();
        let mut budget = stacks::MAX_EXPANSION;
        let rule = rules.rule(root_id);
        let mut pos = rules.start(root_id as u32);
        loop {
            let mut stack = Stack::new();
            if !rules.at(pos).ends_sequence() {
                stack.push(pos);
            }
            stacks::advance(&rules, stack, &mut initial, &mut budget)?;
            while !rules.at(pos).ends_sequence() {
                pos += 1;
            }
            if rules.at(pos).kind == Kind::Alt {
                pos += 1;
            } else {
                break;
            }
        }
        debug_assert!(!rule.is_empty());
        let has_tokens = rules.elems.iter().any(|e| e.is_token());
        Ok(Self { rules: Arc::new(rules), initial, has_tokens, text: text.into() })
    }

    /// The rules, as parsed.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Whether `text` is a complete sentence of the grammar: every character taken by some parse
    /// and one parse complete at the end (the check of llama.cpp's grammar tests). False too
    /// where the grammar is too ambiguous for the matcher
    /// ([`GrammarError::TooManyStacks`]).
    pub fn matches(&self, text: &str) -> bool {
        let mut cur = self.initial.clone();
        for c in text.chars() {
            let mut next = Vec::new();
            let mut budget = stacks::MAX_EXPANSION;
            for st in &cur {
                if stacks::accept_char(&self.rules, st, u32::from(c), &mut next, &mut budget).is_err() {
                    return false;
                }
            }
            if next.is_empty() {
                return false;
            }
            next.sort_unstable();
            next.dedup();
            cur = next;
        }
        cur.iter().any(Vec::is_empty)
    }

    /// The grammar's text.
    pub fn text(&self) -> &str {
        &self.text
    }
}
