//! `RunnerError`: every way the runner fails, as values naming what failed (config field, tensor,
//! file, key, sequence), wrapping the engine crates' errors with what the runner was doing.

use graph::GraphError;
use sampling::SamplingError;
use sched::SchedError;

/// The runner's result type.
pub type Result<T, E = RunnerError> = std::result::Result<T, E>;

/// Errors of the runner library.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// A model configuration value is out of range or inconsistent.
    #[error("model config: {field} = {value}: {reason}")]
    Config {
        /// The field.
        field: &'static str,
        /// Its value, as text.
        value: String,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A session option is out of range.
    #[error("session: {what}: {reason}")]
    Session {
        /// The option or argument.
        what: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A weight tensor is missing, or has the wrong dtype or shape.
    #[error("weights: tensor '{name}': {reason}")]
    Weight {
        /// Tensor name (GGUF naming).
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A token id outside the vocabulary.
    #[error("token {token} of sequence {seq} is outside the vocabulary of {n_vocab} tokens")]
    Token {
        /// The sequence.
        seq: usize,
        /// The token.
        token: u32,
        /// Vocabulary size.
        n_vocab: usize,
    },
    /// A sequence would run past its KV cache.
    #[error("sequence {seq}: {needed} positions needed, the KV cache holds {n_ctx} per sequence")]
    ContextFull {
        /// The sequence.
        seq: usize,
        /// Positions the step needs.
        needed: usize,
        /// Cache size per sequence.
        n_ctx: usize,
    },
    /// Building the forward graph failed (a bug or an unsupported shape).
    #[error("building the forward graph ({what}): {source}")]
    Graph {
        /// What was being built.
        what: String,
        /// The builder's error.
        source: Box<GraphError>,
    },
    /// The scheduler or a backend failed.
    #[error("{what}: {source}")]
    Sched {
        /// What the runner was doing.
        what: &'static str,
        /// The scheduler's error.
        source: Box<SchedError>,
    },
    /// Sampling failed.
    #[error("sampling ({what}): {source}")]
    Sampling {
        /// What the runner was doing.
        what: String,
        /// The sampling error.
        source: Box<SamplingError>,
    },
    /// A requested backend cannot be used.
    #[error("backend {backend}: {reason}")]
    Backend {
        /// The backend asked for.
        backend: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The tokenizer metadata is missing, unsupported or inconsistent.
    #[error("tokenizer: {what}: {reason}")]
    Tokenizer {
        /// The key or step.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// Reading a GGUF file failed (the error names the file and the key or tensor).
    #[error("{source}")]
    Gguf {
        /// The reader's error.
        source: Box<gguf::GgufError>,
    },
    /// A GGUF model this runner cannot run.
    #[error("model {file}: {reason}")]
    Unsupported {
        /// The file.
        file: String,
        /// What is not supported.
        reason: String,
    },
    /// Fetching or unpacking a model failed.
    #[error("fetching {what}: {reason}")]
    Fetch {
        /// What was being fetched.
        what: String,
        /// What went wrong.
        reason: String,
    },
}

impl RunnerError {
    /// Wraps a scheduler error with what the runner was doing.
    pub(crate) fn sched(what: &'static str) -> impl FnOnce(SchedError) -> RunnerError {
        move |source| RunnerError::Sched { what, source: Box::new(source) }
    }

    /// Wraps a GGUF reader error.
    pub(crate) fn gguf(source: gguf::GgufError) -> RunnerError {
        RunnerError::Gguf { source: Box::new(source) }
    }

    /// Wraps a graph error with what was being built.
    pub(crate) fn graph(what: String) -> impl FnOnce(GraphError) -> RunnerError {
        move |source| RunnerError::Graph { what, source: Box::new(source) }
    }

    /// Wraps a sampling error with what the runner was doing.
    pub(crate) fn sampling(what: String) -> impl FnOnce(SamplingError) -> RunnerError {
        move |source| RunnerError::Sampling { what, source: Box::new(source) }
    }
}
