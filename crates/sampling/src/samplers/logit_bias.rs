//! `logit_bias`: adds a fixed bias to chosen tokens' logits (llama.cpp's
//! `llama_sampler_init_logit_bias`). A bias of `-inf` bans a token; NaN or `+inf`: error. Tokens
//! not among the candidates (or outside the vocabulary) are ignored, as in llama.cpp.

use crate::candidates::Candidates;
use crate::error::{Result, SamplingError};
use crate::sampler::{Sampler, Token};

/// Per-token logit biases.
#[derive(Debug, Clone)]
pub struct LogitBias {
    biases: Vec<(Token, f32)>,
}

const NAME: &str = "logit_bias";

impl LogitBias {
    /// Biases as `(token, bias)` pairs.
    pub fn new(biases: Vec<(Token, f32)>) -> Result<Self> {
        for &(t, b) in &biases {
            if b.is_nan() || b == f32::INFINITY {
                return Err(SamplingError::InvalidParam {
                    stage: NAME,
                    param: "bias",
                    value: format!("{t}={b}"),
                    reason: "must be finite or -inf",
                });
            }
        }
        Ok(Self { biases })
    }
}

impl Sampler for LogitBias {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.biases.is_empty() {
            return Ok(());
        }
        if let Some(logits) = cur.vocab_logits_mut() {
            for &(t, b) in &self.biases {
                if let Some(l) = logits.get_mut(t as usize) {
                    *l += b;
                }
            }
            return Ok(());
        }
        for e in cur.list_mut(NAME)?.iter_mut() {
            for &(t, b) in &self.biases {
                if e.id == t {
                    e.logit += b;
                }
            }
        }
        cur.set_sorted(false);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}
