//! Sampler chains: an ordered list of samplers that is itself a [`Sampler`] (llama.cpp's
//! `llama_sampler_chain`), built in code or parsed from a SPEC string ([`crate::chain_spec`]).

use crate::candidates::{Candidates, SampleOutput};
use crate::error::{Result, SamplingError};
use crate::sampler::{Sampler, Token};

/// A chain of samplers applied in order.
#[derive(Debug, Default, Clone)]
pub struct Chain {
    stages: Vec<Box<dyn Sampler>>,
}

impl Chain {
    /// An empty chain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a stage (builder style).
    pub fn with(mut self, s: impl Sampler + 'static) -> Self {
        self.stages.push(Box::new(s));
        self
    }

    /// Appends a boxed stage.
    pub fn push(&mut self, s: Box<dyn Sampler>) {
        self.stages.push(s);
    }

    /// The stages.
    pub fn stages(&self) -> &[Box<dyn Sampler>] {
        &self.stages
    }

    /// The stages, mutable (the backend tail feeds a selecting stage what it drew).
    pub fn stages_mut(&mut self) -> &mut [Box<dyn Sampler>] {
        &mut self.stages
    }

    /// Parses a SPEC string (see [`crate::chain_spec`]); random stages without `seed=` get
    /// [`crate::DEFAULT_SEED`].
    pub fn parse(spec: &str) -> Result<Self> {
        crate::chain_spec::parse(spec, crate::sampler::DEFAULT_SEED)
    }

    /// Runs the chain on a logits row without accepting: returns the surviving candidates and
    /// the selected token (if a stage selected one).
    pub fn run(&mut self, row: &[f32]) -> Result<SampleOutput> {
        let mut cur = Candidates::from_row(row)?;
        self.apply(&mut cur)?;
        cur.output()
    }

    /// Checks that every stage can accept `token`, then accepts it: a grammar stage's refusal
    /// leaves the whole chain as it was.
    pub fn try_accept(&mut self, token: Token) -> Result<()> {
        self.check_accept(token)?;
        self.accept(token);
        Ok(())
    }

    /// llama.cpp's `llama_sampler_sample`: applies the chain to a logits row, accepts the selected
    /// token and returns it. The fast path: only the selected token is computed, no output list.
    pub fn sample(&mut self, row: &[f32]) -> Result<Token> {
        let mut cur = Candidates::from_row(row)?;
        self.apply(&mut cur)?;
        let tok = cur.selected_token().ok_or(SamplingError::NothingSelected)?;
        self.try_accept(tok)?;
        Ok(tok)
    }
}

impl Chain {
    /// Applies the stages from index `start` on (the CPU suffix after a backend prefix).
    ///
    /// With deferred stages (optimistic grammars) among them, the stages first run without those;
    /// if a deferred stage does not allow the token they chose, they run again from the same
    /// candidates with every stage (see [`crate::samplers::grammar`]).
    pub fn apply_from(&mut self, start: usize, cur: &mut Candidates<'_>) -> Result<()> {
        if !self.stages.iter().skip(start).any(|s| s.deferred()) {
            for s in self.stages.iter_mut().skip(start) {
                s.apply(cur)?;
            }
            return Ok(());
        }
        let fresh = cur.clone();
        for s in self.stages.iter_mut().skip(start).filter(|s| !s.deferred()) {
            s.apply(cur)?;
        }
        if let Some(t) = cur.selected_token()
            && self.deferred_allow(start..self.stages.len(), t)?
        {
            return Ok(());
        }
        *cur = fresh;
        self.apply_all_from(start, cur)
    }

    /// Applies every stage from index `start` on, deferred ones included where they stand (an
    /// optimistic grammar masks as a grammar-first one would).
    pub fn apply_all_from(&mut self, start: usize, cur: &mut Candidates<'_>) -> Result<()> {
        for s in self.stages.iter_mut().skip(start) {
            s.apply(cur)?;
        }
        Ok(())
    }

    /// Whether every deferred stage among `stages` allows `token`.
    pub fn deferred_allow(&self, stages: std::ops::Range<usize>, token: Token) -> Result<bool> {
        for s in self.stages[stages].iter().filter(|s| s.deferred()) {
            if !s.allows(token)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether a grammar stage of the chain is complete and allows nothing but end-of-generation
    /// tokens: the sequence is over.
    pub fn must_end(&self) -> Result<bool> {
        for s in &self.stages {
            let any: &dyn std::any::Any = s.as_ref();
            if let Some(g) = any.downcast_ref::<crate::samplers::GrammarStage>()
                && g.must_end()?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Sets the step counter of the stages from index `start` on.
    pub fn set_step_from(&mut self, start: usize, step: u64) {
        for s in self.stages.iter_mut().skip(start) {
            s.set_step(step);
        }
    }
}

impl Sampler for Chain {
    fn name(&self) -> &'static str {
        "chain"
    }

    fn accept(&mut self, token: Token) {
        for s in &mut self.stages {
            s.accept(token);
        }
    }

    fn accept_prompt(&mut self, token: Token) {
        for s in &mut self.stages {
            s.accept_prompt(token);
        }
    }

    fn check_accept(&self, token: Token) -> Result<()> {
        self.stages.iter().try_for_each(|s| s.check_accept(token))
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        self.apply_from(0, cur)
    }

    fn reset(&mut self) {
        for s in &mut self.stages {
            s.reset();
        }
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn set_step(&mut self, step: u64) {
        for s in &mut self.stages {
            s.set_step(step);
        }
    }

    fn step(&self) -> Option<u64> {
        self.stages.iter().find_map(|s| s.step())
    }

    fn set_seed(&mut self, seed: u64) {
        for s in &mut self.stages {
            s.set_seed(seed);
        }
    }

    /// The seed of the last stage (the selecting one, in a chain that selects).
    fn seed(&self) -> Option<u64> {
        self.stages.last().and_then(|s| s.seed())
    }
}
