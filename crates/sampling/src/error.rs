//! The crate's one error type: every failure names the stage (sampler) and, where there is one,
//! the parameter or the position in the row at fault.

use thiserror::Error;

/// Everything that can go wrong while building or running a sampler chain.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SamplingError {
    /// A parameter value outside the sampler's domain (and not an edge value that llama.cpp defines):
    /// at construction, or while a stage runs where a row makes llama.cpp's arithmetic on the
    /// parameter NaN (e.g. `temp(t=inf)` with masked candidates: `-inf / inf`).
    #[error("{stage}: invalid parameter `{param}` = {value}: {reason}")]
    InvalidParam {
        /// Sampler name, as in a SPEC.
        stage: &'static str,
        /// Parameter name, as in a SPEC.
        param: &'static str,
        /// The offending value, printed.
        value: String,
        /// What the valid range is.
        reason: &'static str,
    },
    /// A NaN or +inf logit.
    #[error("{stage}: logit at position {index} (token {token}) is {value}: logits must be finite or -inf")]
    BadLogit {
        /// The stage that found it.
        stage: &'static str,
        /// Position in the candidate array (the token id while the array is still the vocabulary).
        index: usize,
        /// Token id of that position.
        token: u32,
        /// The value (NaN or inf).
        value: f32,
    },
    /// Every candidate is `-inf`: there is nothing to sample from.
    #[error("{stage}: every candidate logit is -inf (all tokens masked)")]
    AllMasked {
        /// The stage that found it.
        stage: &'static str,
    },
    /// An empty candidate array.
    #[error("{stage}: empty candidate array")]
    Empty {
        /// The stage that found it.
        stage: &'static str,
    },
    /// A token id outside the vocabulary where one is required.
    #[error("{stage}: token {token} is outside the vocabulary of {n_vocab}")]
    TokenOutOfRange {
        /// The stage that found it.
        stage: &'static str,
        /// The token id.
        token: u32,
        /// Vocabulary size.
        n_vocab: usize,
    },
    /// The chain ran to the end without a selecting stage (greedy, dist, mirostat, ...).
    #[error(
        "the chain selected no token: end it with a selecting stage (greedy, dist, mirostat, mirostat_v2, adaptive_p)"
    )]
    NothingSelected,
    /// A sequence id the registry does not hold.
    #[error("unknown sequence {seq}: set its sampler configuration first")]
    UnknownSequence {
        /// The id.
        seq: u32,
    },
    /// More output rows for one sequence in a step than the registry allows.
    #[error("sequence {seq} has {n} output rows in this step; at most {max} were configured (Sequences::new)")]
    TooManyOutputs {
        /// The sequence.
        seq: u32,
        /// Rows asked for.
        n: usize,
        /// The configured maximum.
        max: usize,
    },
    /// A bad configuration of the backend sampling tail.
    #[error("invalid configuration: {what} {reason}")]
    InvalidConfig {
        /// What is wrong.
        what: String,
        /// Why.
        reason: &'static str,
    },
    /// Asked for an output that this row's configuration did not reserve (so it was not read back).
    #[error("{what} of output row {row} ({seq}) was not reserved: ask for it in the sequence's SeqConfig")]
    NotReserved {
        /// What was asked for (`"candidates"`, `"logprobs"`, `"logits"`, `"token"`).
        what: &'static str,
        /// The output row.
        row: usize,
        /// The sequence.
        seq: String,
    },
    /// The backend found the row's logits unusable: a NaN or `+inf`, or every token masked.
    #[error(
        "output row {row} ({seq}): the logits hold a NaN or +inf, or every token is masked (found by the backend prefix {stage})"
    )]
    BadRow {
        /// The output row.
        row: usize,
        /// The sequence.
        seq: String,
        /// The backend prefix that found it.
        stage: String,
    },
    /// The tail was built for different sequence configurations than the registry now holds.
    #[error("the sampling tail is stale: {what}; attach a new tail (and re-plan) after changing a chain's structure")]
    StaleTail {
        /// What changed.
        what: String,
    },
    /// Building, planning or running the graph failed.
    #[error("{context}: {message}")]
    Engine {
        /// What was being done.
        context: &'static str,
        /// The underlying error, printed.
        message: String,
    },
    /// Speculative verification was given inputs it cannot verify (see [`crate::speculative`]).
    #[error("speculative verification: {reason}")]
    Verify {
        /// What is wrong.
        reason: String,
    },
    /// A grammar stage's refusal: a token it cannot take, no token allowed, a grammar too
    /// ambiguous, a vocabulary of the wrong size.
    #[error("{stage}: {message}")]
    Grammar {
        /// The stage (`grammar`, `json_schema`, `grammar_lazy`).
        stage: &'static str,
        /// What happened.
        message: String,
    },
    /// A SPEC string that does not parse.
    #[error("SPEC stage {stage_index} (`{stage}`): {message}")]
    Spec {
        /// 0-based index of the stage in the SPEC.
        stage_index: usize,
        /// The stage text (or name).
        stage: String,
        /// What is wrong, naming the parameter.
        message: String,
    },
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, SamplingError>;

/// Checks that a parameter is not NaN; returns an [`SamplingError::InvalidParam`] naming it otherwise.
/// (llama.cpp checks no parameter; what it does with NaN is whatever its comparisons happen to give.)
pub(crate) fn not_nan(stage: &'static str, param: &'static str, v: f32) -> Result<f32> {
    if v.is_nan() {
        return Err(invalid(
            stage,
            param,
            v,
            "must not be NaN: what llama.cpp does with NaN is an accident of its comparisons (all false), not a defined behaviour",
        ));
    }
    Ok(v)
}

/// An [`SamplingError::InvalidParam`] for `stage`'s parameter `param`.
pub(crate) fn invalid(
    stage: &'static str,
    param: &'static str,
    value: impl ToString,
    reason: &'static str,
) -> SamplingError {
    SamplingError::InvalidParam { stage, param, value: value.to_string(), reason }
}
