//! `Mask`: removes the candidates an external predicate rejects (a [`TokenFilter`]: allowed tokens
//! given its state, advanced in `accept`), on the CPU only. Grammars have their own stage with a
//! backend form (`samplers/grammar.rs`); this one is for a runner's own predicate. If the
//! predicate rejects every candidate the stage fails with `AllMasked` rather than letting a later
//! stage pick a rejected token.

use crate::candidates::Candidates;
use crate::error::{Result, SamplingError};
use crate::sampler::{Sampler, Token};
use std::fmt;

/// An external predicate on tokens, with state advanced by accepted tokens.
pub trait TokenFilter: Send + fmt::Debug {
    /// Whether `token` may come next.
    fn allows(&self, token: Token) -> bool;
    /// Advances the state with the accepted token.
    fn accept(&mut self, _token: Token) {}
    /// Returns to the initial state.
    fn reset(&mut self) {}
    /// A copy including the state.
    fn clone_box(&self) -> Box<dyn TokenFilter>;
}

/// Masks candidates by a [`TokenFilter`].
#[derive(Debug)]
pub struct Mask {
    filter: Box<dyn TokenFilter>,
}

impl Mask {
    /// A mask stage over `filter`.
    pub fn new(filter: Box<dyn TokenFilter>) -> Self {
        Self { filter }
    }
}

const NAME: &str = "mask";

impl Sampler for Mask {
    fn name(&self) -> &'static str {
        NAME
    }

    fn accept(&mut self, token: Token) {
        self.filter.accept(token);
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let f = &self.filter;
        let list = cur.list_mut(NAME)?;
        list.retain(|t| f.allows(t.id));
        if list.iter().all(|t| t.logit == f32::NEG_INFINITY) {
            return Err(SamplingError::AllMasked { stage: NAME });
        }
        cur.set_selected(None);
        Ok(())
    }

    fn reset(&mut self) {
        self.filter.reset();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(Mask { filter: self.filter.clone_box() })
    }
}
