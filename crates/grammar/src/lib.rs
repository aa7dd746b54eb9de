//! llama.cpp's GBNF grammars for constrained sampling: the parser ([`Grammar`]), the pushdown
//! matcher that moves on accepted tokens and says which tokens may come next ([`Matcher`]), and
//! the vocabulary it reads token texts from ([`Vocab`]).
//!
//! The semantics are llama.cpp's (`src/llama-grammar.cpp`): the same parse (rule ids, generated
//! rules, limits), the same stacks, the same treatment of tokens that split a UTF-8 character,
//! end-of-generation tokens allowed only where the grammar is complete, and lazy grammars with
//! token, word and pattern triggers. What differs is how the allowed-token mask is computed: the
//! sets of parse stacks are interned as states with cached transitions, and the vocabulary is
//! walked in text order so that tokens sharing a prefix share its work (see `engine`), instead of
//! walking every candidate on its own. Deliberate differences: a token is rejected rather than
//! aborting the process; a rejected token leaves the matcher unchanged; a grammar whose parse
//! stacks exceed [`MAX_STACKS`], or take too much work to expand (nested optional rules that
//! multiply the parses), is an error rather than a stall, when it is parsed or matched; a code
//! point decoded as 0 from an overlong sequence counts as a character (llama.cpp ends the
//! token's characters there).

mod engine;
mod error;
mod grammar;
mod matcher;
mod parse;
mod rules;
mod sets;
mod stacks;
mod utf8;
mod vocab;

pub use engine::MAX_STACKS;
pub use error::{GrammarError, Result};
pub use grammar::Grammar;
pub use matcher::{Matcher, Trigger};
pub use parse::{MAX_NESTING, TokenLookup};
pub use rules::{Elem, Kind, Pos, Rules};
pub use utf8::Partial;
pub use vocab::Vocab;
