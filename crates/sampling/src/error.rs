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
