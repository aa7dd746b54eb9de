//! The runner's reasoning budget (`--reasoning-budget N`, llama.cpp's flag): a
//! `sampling::samplers::ReasoningBudget` stage put first in each sequence's chain (where llama.cpp's
//! `common_sampler_sample` applies it: before the chain), its start, end and forced sequences
//! tokenized from texts. A prompt whose text leaves a block open (its last start text comes after
//! its last end text) starts the stage counting from the first generated token; llama.cpp accepts
//! the generation prompt's tokens into it to the same end, but a tokenizer may merge the start
//! text with the text before it (SmolLM2 spells `.<think>` with a `.<` token), which the
//! token match would miss.
//!
//! The texts are given (`--reasoning-start`, `--reasoning-end`, repeatable), or, where the
//! vocabulary has the tokens `<think>` and `</think>` (Qwen 3, DeepSeek R1 and their kin), those.
//! llama.cpp takes them from the chat template; this runner has none. The forced sequence is the
//! budget message's tokens (`--reasoning-budget-message`, none by default) and then the first end
//! text's, as llama.cpp's `reasoning_budget_forced`.

use crate::error::{Result, RunnerError};
use crate::tokenizer::Tokenizer;
use grammar::TokenLookup;
use sampling::samplers::{BudgetState, ReasoningBudget};
use std::sync::Arc;

/// The texts that open and close a thinking block, and the message forced before the end.
#[derive(Debug, Clone, Default)]
pub struct ReasoningTags {
    /// The text that opens a block.
    pub start: String,
    /// The texts that close one (the first is forced when the budget is spent).
    pub end: Vec<String>,
    /// Forced before the end text when the budget is spent (llama.cpp's
    /// `--reasoning-budget-message`).
    pub message: Option<String>,
}

impl ReasoningTags {
    /// `start` and `end` as given, else `<think>` and `</think>` where both are tokens of the
    /// vocabulary; an error naming the options otherwise.
    pub fn resolve(tk: &Tokenizer, start: Option<&str>, end: &[String], message: Option<&str>) -> Result<Self> {
        let vocab = tk.grammar_vocab();
        let has = |t: &str| vocab.as_ref().token_id(t).is_some();
        let start = match start {
            Some(s) => s.to_string(),
            None if has("<think>") => "<think>".to_string(),
            None => return Err(missing("--reasoning-start TEXT (the vocabulary has no `<think>` token)")),
        };
        let end = if !end.is_empty() {
            end.to_vec()
        } else if has("</think>") {
            vec!["</think>".to_string()]
        } else {
            return Err(missing("--reasoning-end TEXT (the vocabulary has no `</think>` token)"));
        };
        if start.is_empty() || end.iter().any(String::is_empty) {
            return Err(missing("non-empty start and end texts"));
        }
        Ok(Self { start, end, message: message.map(str::to_string) })
    }
}

fn missing(what: &str) -> RunnerError {
    RunnerError::Session { what: "--reasoning-budget".to_string(), reason: format!("needs {what}") }
}

/// `text`'s tokens without the BOS token the model may put first (special tokens matched whole).
fn tokens(tk: &Tokenizer, text: &str) -> Result<Vec<u32>> {
    let mut ids = tk.encode(text)?;
    if tk.adds_bos() && !ids.is_empty() {
        ids.remove(0);
    }
    Ok(ids)
}

/// Whether `prompt`'s text leaves a block open: its last start text after its last end text.
pub fn opens_block(tk: &Tokenizer, tags: &ReasoningTags, prompt: &[u32]) -> Result<bool> {
    let text = tk.decode(prompt)?;
    let last_end = tags.end.iter().filter_map(|e| text.rfind(e.as_str()).map(|i| i + e.len())).max();
    Ok(text.rfind(tags.start.as_str()).is_some_and(|s| last_end.is_none_or(|e| s + tags.start.len() > e)))
}

/// The stage for a budget of `budget` tokens (negative: unlimited) with `tags`, counting from the
/// start where `prompt` leaves a block open ([`opens_block`]).
pub fn budget_stage(tk: &Tokenizer, budget: i64, tags: &ReasoningTags, prompt: &[u32]) -> Result<ReasoningBudget> {
    let start = vec![tokens(tk, &tags.start)?];
    let end = tags.end.iter().map(|e| tokens(tk, e)).collect::<Result<Vec<_>>>()?;
    let mut forced = match &tags.message {
        Some(m) => tokens(tk, m)?,
        None => Vec::new(),
    };
    forced.extend_from_slice(&end[0]);
    let vocab = Some(Arc::clone(tk.grammar_vocab()));
    let state = if opens_block(tk, tags, prompt)? { BudgetState::Counting } else { BudgetState::Idle };
    ReasoningBudget::new(budget, &start, &end, &forced, state, vocab)
        .map_err(RunnerError::sampling("the reasoning budget".to_string()))
}

/// `chain` with `stage` put first.
pub fn with_budget(chain: &sampling::Chain, stage: ReasoningBudget) -> sampling::Chain {
    let mut out = sampling::Chain::new().with(stage);
    for s in chain.stages() {
        out.push(s.clone());
    }
    out
}
