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

    /// llama.cpp's `llama_sampler_sample`: applies the chain to a logits row, accepts the selected
    /// token and returns it. The fast path: only the selected token is computed, no output list.
    pub fn sample(&mut self, row: &[f32]) -> Result<Token> {
        let mut cur = Candidates::from_row(row)?;
        self.apply(&mut cur)?;
        let tok = cur.selected_token().ok_or(SamplingError::NothingSelected)?;
        self.accept(tok);
        Ok(tok)
    }
}

impl Chain {
    /// Applies the stages from index `start` on (the CPU suffix after a backend prefix).
    pub fn apply_from(&mut self, start: usize, cur: &mut Candidates<'_>) -> Result<()> {
        for s in self.stages.iter_mut().skip(start) {
            s.apply(cur)?;
        }
        Ok(())
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

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        for s in &mut self.stages {
            s.apply(cur)?;
        }
        Ok(())
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
