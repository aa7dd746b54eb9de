//! The n-gram drafter: proposes the continuation of the sequence's last `n` tokens that followed
//! the same `n` tokens most often earlier in its own context (llama.cpp's `ngram-simple` family),
//! token by token, while that continuation's share of the matches (its "top probability") stays
//! at least `p_min` (llama.cpp's `--draft-p-min`, 0.75). Deterministic: verify its drafts with
//! [`super::DraftProbs::Deterministic`].
//!
//! Each drafted token is appended to the context for the next lookup, so a repeated pattern is
//! followed through. The lookup scans the context (`O(len n)` per token), which at the context
//! lengths of a decode loop costs microseconds beside a forward pass.

use crate::error::{Result, SamplingError};
use crate::sampler::Token;

/// Drafts tokens from n-gram matches in the sequence's own context.
#[derive(Debug, Clone, PartialEq)]
pub struct NgramDrafter {
    n: usize,
    max_draft: usize,
    p_min: f32,
}

impl NgramDrafter {
    /// Matches the last `n` tokens (`n >= 1`), drafts at most `max_draft` tokens, and stops where
    /// the best continuation has less than `p_min` of the matches (`0 <= p_min <= 1`).
    pub fn new(n: usize, max_draft: usize, p_min: f32) -> Result<Self> {
        let bad = |param: &'static str, value: String, reason: &'static str| {
            Err(SamplingError::InvalidParam { stage: "ngram", param, value, reason })
        };
        if n == 0 {
            return bad("n", n.to_string(), "must be at least 1");
        }
        if !(0.0..=1.0).contains(&p_min) {
            return bad("p_min", p_min.to_string(), "must be in [0, 1]");
        }
        Ok(Self { n, max_draft, p_min })
    }

    /// Up to `max_draft` tokens continuing `context` (empty when the last `n` tokens never
    /// occurred before with a continuation, or the best one is below `p_min`).
    pub fn draft(&self, context: &[Token]) -> Vec<Token> {
        let mut ext = context.to_vec();
        let mut out = Vec::new();
        while out.len() < self.max_draft {
            let Some((tok, share)) = self.best_continuation(&ext) else { break };
            if share < self.p_min {
                break;
            }
            ext.push(tok);
            out.push(tok);
        }
        out
    }

    /// The most frequent token following earlier occurrences of the last `n` tokens of `ctx`
    /// (ties: the one that occurred most recently), and its share of those occurrences.
    fn best_continuation(&self, ctx: &[Token]) -> Option<(Token, f32)> {
        let n = self.n;
        if ctx.len() <= n {
            return None;
        }
        let key = &ctx[ctx.len() - n..];
        // (token, count, latest position), in order of first sight.
        let mut seen: Vec<(Token, u32, usize)> = Vec::new();
        let mut total = 0u32;
        for end in n..ctx.len() {
            if &ctx[end - n..end] != key {
                continue;
            }
            let next = ctx[end];
            total += 1;
            match seen.iter_mut().find(|e| e.0 == next) {
                Some(e) => {
                    e.1 += 1;
                    e.2 = end;
                }
                None => seen.push((next, 1, end)),
            }
        }
        let best = seen.iter().max_by_key(|e| (e.1, e.2))?;
        Some((best.0, best.1 as f32 / total as f32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_a_repeated_pattern() {
        // "1 , 2 , 3 , 4 , 1 , 2 , 3 , 4 , 1 ," as tokens: the pattern continues "2 , 3 , 4".
        let comma = 9;
        let ctx: Vec<Token> = [1, 2, 3, 4, 1, 2, 3, 4, 1].iter().flat_map(|&t| [t, comma]).collect();
        let d = NgramDrafter::new(2, 5, 0.75).unwrap();
        assert_eq!(d.draft(&ctx), [2, comma, 3, comma, 4]);
        assert_eq!(NgramDrafter::new(2, 2, 0.75).unwrap().draft(&ctx), [2, comma]);
        assert_eq!(NgramDrafter::new(2, 0, 0.75).unwrap().draft(&ctx), Vec::<Token>::new());
    }

    #[test]
    fn stops_where_the_continuation_is_uncertain() {
        // After "5 6" came 7 twice and 8 once: share 2/3.
        let ctx = [5, 6, 7, 5, 6, 8, 5, 6, 7, 0, 5, 6];
        assert_eq!(NgramDrafter::new(2, 4, 0.75).unwrap().draft(&ctx), Vec::<Token>::new());
        let d = NgramDrafter::new(2, 1, 0.6).unwrap().draft(&ctx);
        assert_eq!(d, [7]);
        // A tie goes to the most recent continuation: after "1", 2 then 3.
        assert_eq!(NgramDrafter::new(1, 1, 0.5).unwrap().draft(&[1, 2, 1, 3, 1]), [3]);
    }

    #[test]
    fn no_match_or_a_short_context_drafts_nothing() {
        let d = NgramDrafter::new(3, 4, 0.0).unwrap();
        assert!(d.draft(&[1, 2, 3]).is_empty());
        assert!(d.draft(&[1, 2, 3, 4, 5, 6]).is_empty());
        assert!(d.draft(&[]).is_empty());
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(NgramDrafter::new(0, 4, 0.75).unwrap_err().to_string().contains("`n`"));
        assert!(NgramDrafter::new(2, 4, 1.5).unwrap_err().to_string().contains("`p_min`"));
        assert!(NgramDrafter::new(2, 4, f32::NAN).unwrap_err().to_string().contains("`p_min`"));
    }
}
