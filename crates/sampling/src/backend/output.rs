//! What one step produced, per output row: the token, and what the row's configuration reserved
//! (candidates, log-probabilities, the logits row for a row finished on the CPU). A getter for
//! something not reserved is [`SamplingError::NotReserved`], never stale data: a [`StepOutput`]
//! holds only what was read back in its own step.

use super::seqs::SeqId;
use crate::candidates::TokenData;
use crate::error::{Result, SamplingError};
use crate::sampler::Token;

/// One output row's result.
#[derive(Debug, Clone, PartialEq)]
pub struct RowOutput {
    /// The selected token (`None` for a chain without a selecting stage).
    pub token: Option<Token>,
    /// Surviving candidates, `p` normalised over them, sorted by `p` descending (if reserved).
    pub candidates: Option<Vec<TokenData>>,
    /// `(token, log p)` of the most likely tokens of the raw logits (if reserved).
    pub logprobs: Option<Vec<(Token, f32)>>,
    /// The selected token's own log-probability under the raw logits, exact wherever it ranks
    /// (with `logprobs`: gathered on the backend where the prefix selected it, else from its
    /// logits row and the row's max and ln-sum read back once the host chose it, in the same f32
    /// arithmetic).
    pub token_logprob: Option<f32>,
    /// The selected token's rank among the raw logits, with `token_logprob`: 1 + how many
    /// logits are strictly greater than its own (tied tokens share a rank; see
    /// [`crate::candidates::rank`]). Counted on the backend where the prefix selected the token,
    /// else on its raw logits row read back.
    pub token_rank: Option<u32>,
    /// The logits row after the backend prefix (only for rows finished on the CPU from it).
    pub logits: Option<Vec<f32>>,
}

/// One output row: which sequence and output index it is, and its result (a bad row fails alone).
#[derive(Debug, Clone, PartialEq)]
pub struct RowResult {
    /// The sequence.
    pub seq: SeqId,
    /// Index among the sequence's outputs this step (0 for plain decoding).
    pub output: usize,
    /// The row's outputs, or why it has none.
    pub result: Result<RowOutput>,
}

/// Everything a step read back.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    /// Per output row of the logits, in row order.
    pub rows: Vec<RowResult>,
    /// Bytes copied to the host for this step (the scheduler's count).
    pub bytes_read: usize,
    /// Rows whose token an optimistic grammar checked on the host (a deferred stage in the
    /// backend prefix).
    pub checked: usize,
    /// Of those, the rows whose optimistic grammar rejected the token the backend chose: their
    /// chain ran again, the grammar masking, in a second backend step over their logits where the
    /// first step left them (4 bytes more read back per row, never the logits row). `resampled /
    /// checked` is the rejection rate.
    pub resampled: usize,
}

impl StepOutput {
    fn row(&self, row: usize) -> Result<&RowOutput> {
        let r = self.rows.get(row).ok_or(SamplingError::InvalidConfig {
            what: format!("output row {row}"),
            reason: "is not a row of this step",
        })?;
        r.result.as_ref().map_err(Clone::clone)
    }

    fn not_reserved(&self, what: &'static str, row: usize) -> SamplingError {
        SamplingError::NotReserved { what, row, seq: self.rows[row].seq.to_string() }
    }

    /// The token selected for `row`.
    pub fn token(&self, row: usize) -> Result<Token> {
        self.row(row)?.token.ok_or(SamplingError::NothingSelected)
    }

    /// The surviving candidates of `row`.
    pub fn candidates(&self, row: usize) -> Result<&[TokenData]> {
        self.row(row)?.candidates.as_deref().ok_or_else(|| self.not_reserved("candidates", row))
    }

    /// The top log-probabilities of `row`.
    pub fn logprobs(&self, row: usize) -> Result<&[(Token, f32)]> {
        self.row(row)?.logprobs.as_deref().ok_or_else(|| self.not_reserved("logprobs", row))
    }

    /// The selected token's log-probability under the raw logits, of `row` (reserved with the
    /// top log-probabilities).
    pub fn token_logprob(&self, row: usize) -> Result<f32> {
        self.row(row)?.token_logprob.ok_or_else(|| self.not_reserved("logprobs", row))
    }

    /// The selected token's rank among the raw logits of `row` (1 + how many are strictly
    /// greater; reserved with the top log-probabilities).
    pub fn token_rank(&self, row: usize) -> Result<u32> {
        self.row(row)?.token_rank.ok_or_else(|| self.not_reserved("logprobs", row))
    }

    /// The logits row of `row` (read back only where the row finished on the CPU from it).
    pub fn logits(&self, row: usize) -> Result<&[f32]> {
        self.row(row)?.logits.as_deref().ok_or_else(|| self.not_reserved("logits", row))
    }

    /// The tokens of `seq`'s outputs, in output order (stopping at the first row without one).
    pub fn tokens_of(&self, seq: SeqId) -> Vec<Token> {
        let mut rows: Vec<&RowResult> = self.rows.iter().filter(|r| r.seq == seq).collect();
        rows.sort_by_key(|r| r.output);
        rows.iter().map_while(|r| r.result.as_ref().ok().and_then(|o| o.token)).collect()
    }
}
