//! The grammar crate's error: parse errors with their line and column, grammars llama.cpp refuses
//! (undefined rules, no root, left recursion), and the matcher's refusals (a rejected token, an
//! explosion of parse stacks).

use thiserror::Error;

/// What went wrong with a grammar or a token given to it.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum GrammarError {
    /// The text does not parse.
    #[error("grammar parse error at line {line}, column {column}: {message} (near {near:?})")]
    Parse {
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What was expected.
        message: String,
        /// The text from the error on.
        near: String,
    },
    /// The grammar has no rule.
    #[error("the grammar is empty: it has no rule")]
    Empty,
    /// A rule is referenced but never defined.
    #[error("undefined rule '{name}'")]
    UndefinedRule {
        /// Its name.
        name: String,
    },
    /// The start rule is missing.
    #[error("the grammar has no '{name}' rule to start from")]
    NoRoot {
        /// The start rule's name.
        name: String,
    },
    /// A rule can reach itself without consuming a character (llama.cpp refuses these too: its
    /// pushdown matcher would loop).
    #[error("left recursion: rule '{name}' can reach itself without consuming input")]
    LeftRecursion {
        /// The rule.
        name: String,
    },
    /// The grammar's state cannot accept this token.
    #[error("the grammar rejects token {token} ({piece:?}) here")]
    Rejected {
        /// The token id.
        token: u32,
        /// Its text.
        piece: String,
    },
    /// The grammar is so ambiguous that the number of parse stacks explodes, or the work of
    /// finding them (see `MAX_STACKS`).
    #[error("the grammar is too ambiguous: more than {limit} parse stacks at once, or too many to expand")]
    TooManyStacks {
        /// The limit.
        limit: usize,
    },
    /// A token id outside the vocabulary.
    #[error("token {token} is outside the vocabulary of {n_vocab} tokens")]
    UnknownToken {
        /// The id.
        token: u32,
        /// The vocabulary's size.
        n_vocab: usize,
    },
    /// A lazy grammar's trigger pattern is not a valid regular expression, or a trigger is empty.
    #[error("bad trigger {trigger:?}: {reason}")]
    BadTrigger {
        /// The trigger.
        trigger: String,
        /// Why.
        reason: String,
    },
}

/// The crate's result.
pub type Result<T> = std::result::Result<T, GrammarError>;
