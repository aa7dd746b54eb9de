//! `logit_bias`: adds a fixed bias to chosen tokens' logits (llama.cpp's
//! `llama_sampler_init_logit_bias`).
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_logit_bias_apply`, which checks
//! nothing):
//! * a bias of `-inf` bans the token; no biases: unchanged (`init_logit_bias` returns the empty
//!   sampler);
//! * a token not among the candidates, outside the vocabulary or negative (a SPEC `-5=1`) is
//!   ignored: llama.cpp looks it up and finds nothing;
//! * a token listed twice: llama.cpp adds every entry whose token still sits at its own index
//!   (`cur_p->data[token].id == token`, always so on the vocabulary), and of the others it
//!   searches for, only the first entry per candidate. Both paths here do the same;
//! * NaN or `+inf` bias: error (the logit would become NaN or `+inf`, which no later stage can
//!   use).

use crate::backend::prelude::*;
use crate::candidates::Candidates;
use crate::error::{Result, invalid};
use crate::sampler::{Sampler, Token};

/// Per-token logit biases.
#[derive(Debug, Clone)]
pub struct LogitBias {
    biases: Vec<(Token, f32)>,
    /// A token is listed twice (then the stage has no list form; see its `BackendStage`).
    repeats: bool,
}

const NAME: &str = "logit_bias";

impl LogitBias {
    /// Biases as `(token, bias)` pairs.
    pub fn new(biases: Vec<(Token, f32)>) -> Result<Self> {
        for &(t, b) in &biases {
            check_bias(i64::from(t), b)?;
        }
        let mut ids: Vec<Token> = biases.iter().map(|b| b.0).collect();
        ids.sort_unstable();
        let repeats = ids.windows(2).any(|w| w[0] == w[1]);
        Ok(Self { biases, repeats })
    }
}

/// Checks one bias: NaN or `+inf` is an error (also for a token that will be ignored).
pub(crate) fn check_bias(token: i64, b: f32) -> Result<()> {
    if b.is_nan() || b == f32::INFINITY {
        return Err(invalid(NAME, "bias", format!("{token}={b}"), "must be finite or -inf"));
    }
    Ok(())
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
        // llama.cpp: an entry whose token sits at its own index is added there; the rest are
        // searched for, the first matching entry per candidate.
        let list = cur.list_mut(NAME)?;
        let mut to_search = Vec::new();
        for &(t, b) in &self.biases {
            match list.get_mut(t as usize) {
                Some(e) if e.id == t => e.logit += b,
                _ => to_search.push((t, b)),
            }
        }
        if !to_search.is_empty() {
            for e in list.iter_mut() {
                if let Some(&(_, b)) = to_search.iter().find(|&&(t, _)| t == e.id) {
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

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// On the vocabulary (or after a cut on it) a `scatter_add` of the `(token, bias)` pairs; on a
/// candidate list the pairs' dense row gathered at the list's ids (`Lowering::add_sparse`).
impl BackendStage for LogitBias {
    /// On a list only without a token listed twice: there llama.cpp's first-match search (which
    /// depends on where each token sits in the list) decides which entries add, which a
    /// data-independent graph cannot replay; the CPU runs such a stage. A `-inf` bias after a cut
    /// leaves `-inf` entries the CPU chain's list holds (`StageKey::keeping_inf`).
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        let key = StageKey::new::<Self>(NAME, 0, self.biases.len());
        match form {
            _ if self.biases.is_empty() => Some((StageKey::nothing(), form)),
            Form::List(_) if self.repeats => None,
            Form::Masked if self.biases.iter().any(|b| b.1 == f32::NEG_INFINITY) => Some((key.keeping_inf(), form)),
            _ => Some((key, form)),
        }
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let (m, n) = (key.size(), cx.n());
        let ids = Field::of::<Self>(cx.stage(), |s, out| s.biases.iter().for_each(|&(t, _)| out.token(t)));
        let vals = Field::of::<Self>(cx.stage(), |s, out| s.biases.iter().for_each(|&(_, b)| out.f32(b)));
        let ids = cx.input(&format!("s{}.bias_ids", cx.stage()), DType::I32, &[m, n], vec![ids])?;
        let vals = cx.input(&format!("s{}.bias", cx.stage()), DType::F32, &[m, n], vec![vals])?;
        cx.add_sparse(rec, ids, vals)
    }
}
