//! Speculative verification on the CPU: which of a sequence's draft tokens the target model
//! accepts, keeping the output distributed exactly as the target's chain would sample it.
//!
//! The target has computed logits at the `n + 1` positions after the sequence's last token
//! (the `n` draft tokens fed in after it). [`verify`] walks the positions in order with the
//! sequence's own chain, which at position `i` has accepted every token emitted before it
//! (penalties and DRY see them) and uses step `s + i` (`s` the chain's step at the call):
//!
//! * **greedy** chains (ending in `greedy`): the chain's token at position `i` is emitted; the walk
//!   goes on while it equals the draft token. The output is exactly plain greedy decoding's.
//! * **sampling** chains (ending in `dist`): `p` is the chain's filtered distribution at the
//!   position (its surviving candidates), `q` the distribution the drafter drew the draft token
//!   `d` from ([`DraftProbs`]). `d` is accepted when `u q(d) < p(d)`, `u` the 53-bit uniform of
//!   `(seed, s + i)` on the [`stream::SPECULATIVE`] stream: with probability `min(1, p(d)/q(d))`.
//!   At the first rejection the emitted token is drawn from the residual `max(0, p - q)`
//!   (normalised) by inverse CDF over the candidates in the chain's order (as its `dist` walks
//!   them) with the uniform of the `DRAW` stream at that step; if every draft token is
//!   accepted, the bonus token at position `n` is the chain's own draw there, exactly what plain
//!   decoding would draw. The emitted
//!   token at every position is distributed as `p` (the standard speculative-sampling argument;
//!   tested statistically). llama.cpp accepts only draft tokens equal to its own sample.
//!
//! Randomness is keyed by position: a token emitted at step `t` depends only on the keys of `t`,
//! never on how many drafts were tried or rejected, and the chain ends at step `s + emitted`, so
//! a rejected draft changes nothing later. On return the chain has accepted every emitted token.
//!
//! On the backend (backend sampling with a draft set): each output's `dist` is the graph op
//! `spec_verify`, which makes this decision for one-hot drafts where the logits are, or, for a
//! sampled draft given with its distribution (`Sequences::set_draft_sampled`, in `Sequences`
//! made with room for it), `spec_verify_sampled`, which takes `q` as `(token, probability)`
//! pairs; only tokens come back, and [`accept_rows`] takes the accepted prefix from them.
//!
//! Drafting: [`ngram::NgramDrafter`] proposes tokens from the sequence's own context.
//!
//! Chains whose selecting stage keeps state learnt from its draws (mirostat, mirostat_v2,
//! adaptive_p) are refused: their distribution at position `i` depends on the probability of the
//! token drawn at `i - 1` under their own truncation, which a verifier that did not draw it
//! cannot supply.

pub mod ngram;

use crate::chain::Chain;
use crate::error::{Result, SamplingError};
use crate::sampler::{Sampler, Token};
use graph::philox::{self, stream};

/// What the verifier knows of the distribution each draft token was drawn from.
#[derive(Debug, Clone, Copy)]
pub enum DraftProbs<'a> {
    /// Each draft token was chosen deterministically (an n-gram lookup, a greedy draft model):
    /// `q` is one-hot at the token.
    Deterministic,
    /// For each draft position, the drafter's distribution as `(token, probability)` pairs (its
    /// chain's surviving candidates; tokens absent have probability 0). Normalised here.
    Sampled(&'a [Vec<(Token, f32)>]),
}

/// The outcome of verifying one sequence's draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// How many draft tokens were accepted (a prefix of the draft).
    pub accepted: usize,
    /// The emitted tokens: the accepted draft tokens, then one more (the target's token at the
    /// first rejected position, or the bonus token after a fully accepted draft).
    pub tokens: Vec<Token>,
}

/// How the chain selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Selector {
    Greedy,
    Dist(u64),
}

fn refuse(reason: String) -> SamplingError {
    SamplingError::Verify { reason }
}

fn selector(chain: &Chain) -> Result<Selector> {
    match chain.stages().last() {
        Some(s) if s.name() == "greedy" => Ok(Selector::Greedy),
        Some(s) if s.name() == "dist" => Ok(Selector::Dist(s.seed().expect("dist has a seed"))),
        Some(s) => Err(refuse(format!(
            "the chain ends in `{}`: only chains ending in `greedy` or `dist` can be verified (a stateful selector learns from its own draws)",
            s.name()
        ))),
        None => Err(refuse("the chain is empty: it selects no token".into())),
    }
}

/// A normalised draft distribution: `(token, probability)` pairs.
type Normalised = Vec<(Token, f64)>;

/// `q(d)` of draft position `i` and the whole normalised `q` (`None`: one-hot at `d`).
fn draft_q(probs: &DraftProbs<'_>, i: usize, d: Token) -> Result<(f64, Option<Normalised>)> {
    let DraftProbs::Sampled(all) = probs else { return Ok((1.0, None)) };
    let dist = &all[i];
    let mut total = 0.0f64;
    for &(t, q) in dist {
        if !(q >= 0.0 && q.is_finite()) {
            return Err(refuse(format!("draft position {i}: probability {q} of token {t} is not finite and >= 0")));
        }
        total += f64::from(q);
    }
    let q: Vec<(Token, f64)> = dist.iter().map(|&(t, q)| (t, f64::from(q) / total)).collect();
    let qd: f64 = q.iter().filter(|e| e.0 == d).map(|e| e.1).sum();
    if qd.is_nan() || qd <= 0.0 {
        return Err(refuse(format!(
            "draft position {i}: the draft token {d} has probability 0 in the distribution it was drawn from"
        )));
    }
    Ok((qd, Some(q)))
}

/// Verifies `draft` (`n` tokens) against the target logits rows `target` (`n + 1` rows: row `i`
/// is the target's prediction for position `i`), with the sequence's `chain` in its current
/// state. See the module documentation for the rules. Errors: a row count that is not `n + 1`,
/// draft distributions for a number of positions other than `n`, a draft token outside the
/// vocabulary or with zero draft probability, a chain that does not end in `greedy` or `dist`,
/// and whatever the chain reports for a bad row (the chain has then accepted the tokens emitted
/// before the failing position, and its step is that position's).
pub fn verify(chain: &mut Chain, target: &[&[f32]], draft: &[Token], probs: DraftProbs<'_>) -> Result<Verdict> {
    let n_vocab = target.first().map_or(0, |r| r.len());
    let sel = check(chain, target.len(), draft, probs, n_vocab)?;
    let step0 = chain.step().unwrap_or(0);
    let mut tokens = Vec::with_capacity(draft.len() + 1);
    for (i, row) in target.iter().enumerate() {
        let step = step0 + i as u64;
        chain.set_step(step);
        let emitted = match (sel, draft.get(i)) {
            // The bonus position, and every greedy position: the chain's own token.
            (_, None) | (Selector::Greedy, Some(_)) => chain.sample(row)?,
            (Selector::Dist(seed), Some(&d)) => {
                let mut cur = crate::candidates::Candidates::from_row(row)?;
                chain.apply(&mut cur)?;
                let t = decide(&cur.in_order()?, d, i, probs, seed, step)?;
                chain.try_accept(t)?;
                t
            }
        };
        tokens.push(emitted);
        if draft.get(i) != Some(&emitted) {
            break;
        }
    }
    chain.set_step(step0 + tokens.len() as u64);
    Ok(Verdict { accepted: tokens.len() - 1, tokens })
}

/// The verdict of backend verification: `tokens[i]` is what backend sampling emitted for output
/// `i` of a sequence whose step set `draft` ([`crate::backend::Sequences::set_draft`]): with
/// the draft, each output's draw is already the verifier's decision at that position (greedy
/// chains: the chain's token; sampling chains: `graph::Op::SpecVerify`, the draft token if
/// accepted, else the residual draw, on the backend or in the CPU suffix). The accepted count is
/// the length of the prefix where the emitted token is the draft token; the verdict's tokens are
/// that prefix and the next emitted token. `chain` is the sequence's chain (its selector is
/// checked: stateful selectors are refused as by [`verify`]); it is not changed (accept the
/// verdict's tokens with [`crate::backend::Tail::accept`]). The same rule serves deterministic
/// drafts (`graph::Op::SpecVerify`, or a one-entry `q`) and sampled ones
/// (`graph::Op::SpecVerifySampled` with the `q` given to `Sequences::set_draft_sampled`).
pub fn accept_rows(chain: &Chain, tokens: &[Token], draft: &[Token]) -> Result<Verdict> {
    check(chain, tokens.len(), draft, DraftProbs::Deterministic, usize::MAX)?;
    let accepted = tokens.iter().zip(draft).take_while(|(t, d)| t == d).count();
    Ok(Verdict { accepted, tokens: tokens[..=accepted].to_vec() })
}

/// The token a sampling chain emits at a drafted position whose surviving candidates are `p`
/// (normalised, in the chain's order) for a deterministic draft `d`, at `step` of `seed`: the
/// rule of [`verify`] for one position (used by backend sampling's CPU suffixes).
pub(crate) fn decide_deterministic(p: &[crate::TokenData], d: Token, seed: u64, step: u64) -> Result<Token> {
    decide(p, d, 0, DraftProbs::Deterministic, seed, step)
}

/// [`decide_deterministic`] for a draft token `d` drawn from `q` (`(token, probability)` pairs,
/// normalised here): the rule of [`verify`] with [`DraftProbs::Sampled`] for one position.
pub(crate) fn decide_sampled(
    p: &[crate::TokenData],
    d: Token,
    q: &[(Token, f32)],
    seed: u64,
    step: u64,
) -> Result<Token> {
    let all = [q.to_vec()];
    decide(p, d, 0, DraftProbs::Sampled(&all), seed, step)
}

/// The seed of `chain`'s `dist`, if the chain ends in one (the chains whose drafted positions
/// are decided by the acceptance test).
pub(crate) fn dist_seed(chain: &Chain) -> Option<u64> {
    match selector(chain) {
        Ok(Selector::Dist(seed)) => Some(seed),
        _ => None,
    }
}

/// The checks both verifiers make before they start; the chain's selector.
fn check(chain: &Chain, rows: usize, draft: &[Token], probs: DraftProbs<'_>, n_vocab: usize) -> Result<Selector> {
    let n = draft.len();
    if rows != n + 1 {
        return Err(refuse(format!("{n} draft tokens need {} target rows, got {rows}", n + 1)));
    }
    if let DraftProbs::Sampled(d) = probs
        && d.len() != n
    {
        return Err(refuse(format!("{n} draft tokens need {n} draft distributions, got {}", d.len())));
    }
    if let Some(&d) = draft.iter().find(|&&d| d as usize >= n_vocab) {
        return Err(SamplingError::TokenOutOfRange { stage: "verify", token: d, n_vocab });
    }
    selector(chain)
}

/// The token emitted at draft position `i` (step `step`) of a sampling chain whose surviving
/// candidates there are `p`: the draft token `d` if the acceptance test passes, else the residual
/// draw.
fn decide(p: &[crate::TokenData], d: Token, i: usize, probs: DraftProbs<'_>, seed: u64, step: u64) -> Result<Token> {
    let (qd, q) = draft_q(&probs, i, d)?;
    let pd = p.iter().find(|c| c.id == d).map_or(0.0, |c| f64::from(c.p));
    let u = philox::uniform_f64(seed, step, stream::element(stream::SPECULATIVE, 0));
    Ok(if u * qd < pd { d } else { residual_draw(p, d, q.as_deref(), seed, step) })
}

/// A draw from `max(0, p - q)` (`q`: one-hot at `d` when `None`), normalised, by inverse CDF over
/// the candidates in their order (the order the chain's `dist` and the backend's draw walk) with
/// the `DRAW` uniform of `(seed, step)`. Where rounding
/// leaves no residual mass (`p` equal to `q`, when a rejection cannot happen in exact arithmetic)
/// the draw is from `p`.
fn residual_draw(p: &[crate::TokenData], d: Token, q: Option<&[(Token, f64)]>, seed: u64, step: u64) -> Token {
    let q_of = |t: Token| match q {
        None => f64::from(u8::from(t == d)),
        Some(q) => q.iter().filter(|e| e.0 == t).map(|e| e.1).sum(),
    };
    let mut r: Vec<(Token, f64)> = p.iter().map(|c| (c.id, (f64::from(c.p) - q_of(c.id)).max(0.0))).collect();
    if r.iter().all(|e| e.1 == 0.0) {
        r = p.iter().map(|c| (c.id, f64::from(c.p))).collect();
    }
    let total: f64 = r.iter().map(|e| e.1).sum();
    let target = philox::uniform_f64(seed, step, stream::element(stream::DRAW, 0)) * total;
    let mut cum = 0.0;
    for &(t, w) in &r {
        cum += w;
        if target < cum {
            return t;
        }
    }
    r.iter().rev().find(|e| e.1 > 0.0).expect("p has a positive candidate").0
}
