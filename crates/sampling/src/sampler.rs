//! The sampler interface (llama.cpp's `llama_sampler_i`): name, accept, apply, reset, clone, plus
//! the step counter of the random samplers.
//!
//! # Randomness: seeds and steps
//!
//! Every random sampler draws its uniform numbers from the one counter-based generator,
//! [`graph::philox`], keyed by `(seed, step, element)` (inverse-CDF draws take the 53-bit
//! uniform [`graph::philox::uniform_f64`], coins the 24-bit `f32` one): `dist`, `adaptive_p` and the other final
//! draws use stream [`graph::philox::stream::DRAW`], XTC's coin stream `XTC`, the mirostat samplers
//! stream `MIROSTAT`, always element 0 of the stream. Each random sampler keeps a `step: u64`
//! counter: the k-th draw since construction or [`Sampler::reset`] uses `step = k` (0-based), and
//! [`Sampler::set_step`] sets the step the next draw uses. A random sampler advances its step on
//! every `apply`, also where it needs no number (XTC when disabled or with fewer than two
//! candidates), so step k's number never depends on earlier rows, and a given `(seed, step)`
//! selects the same token on every run and on every backend that implements the same generator.
//!
//! A seed is a plain `u64`; there is no "random seed" value (llama.cpp's `LLAMA_DEFAULT_SEED =
//! 0xFFFFFFFF` means "pick one at random"; here it is just another seed). A SPEC stage without a
//! `seed=` gets [`DEFAULT_SEED`].

use crate::candidates::Candidates;
use crate::error::Result;
use std::any::Any;
use std::fmt;

/// Token id type (index into the vocabulary).
pub type Token = u32;

/// The seed used by random samplers whose seed is not given: reproducibility matters more than
/// variety, so it is a fixed value, not llama.cpp's "random".
pub const DEFAULT_SEED: u64 = 0;

/// A sampler: one stage of a chain, or a chain itself.
///
/// A sampler that can also run as graph ops after the logits describes itself through
/// [`Sampler::backend`] (see [`crate::backend`]); the CPU path is unchanged by it.
pub trait Sampler: Any + Send + fmt::Debug {
    /// Name as used in a SPEC (`top_k`, `dist`, ...).
    fn name(&self) -> &'static str;

    /// Records the token that was finally chosen (penalties, DRY, adaptive-p history).
    fn accept(&mut self, _token: Token) {}

    /// Records a token of the prompt, before anything is generated (llama.cpp's
    /// `common_sampler_accept(smpl, token, false)`, as llama-server's `init_sampler` feeds every
    /// prompt token): penalties and DRY count it, and no random step moves (no draw came before
    /// it). Default: as [`Sampler::accept`]; a grammar and a reasoning budget take generated
    /// tokens only (the budget reads the prompt when it is made) and ignore it.
    fn accept_prompt(&mut self, token: Token) {
        self.accept(token);
    }

    /// Checks that this stage can accept `token` before any stage of a chain accepts it (a
    /// grammar refuses a token it cannot take); accepting must then succeed. Default: any token.
    fn check_accept(&self, _token: Token) -> Result<()> {
        Ok(())
    }

    /// Whether the stage is deferred (an optimistic grammar): a chain first runs without it, and
    /// runs again with it only if it does not [`Sampler::allows`] the token chosen without it.
    fn deferred(&self) -> bool {
        false
    }

    /// Whether a deferred stage allows `token` (the check of an optimistic grammar).
    fn allows(&self, _token: Token) -> Result<bool> {
        Ok(true)
    }

    /// Transforms the candidates: filters, rescales, or selects (sets `selected`).
    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()>;

    /// Returns the sampler to its freshly constructed state (history cleared, step 0).
    fn reset(&mut self) {}

    /// A copy including the current state.
    fn clone_box(&self) -> Box<dyn Sampler>;

    /// Sets the step counter of a random sampler (no-op for deterministic ones).
    fn set_step(&mut self, _step: u64) {}

    /// The current step counter of a random sampler.
    fn step(&self) -> Option<u64> {
        None
    }

    /// Sets the seed of a random sampler (no-op for deterministic ones).
    fn set_seed(&mut self, _seed: u64) {}

    /// The seed of a random sampler (`None` for deterministic ones).
    fn seed(&self) -> Option<u64> {
        None
    }

    /// The sampler's backend form, if it has one (whether it runs on the backend for a given
    /// record, its parameters and the row width is decided when the tail is attached, see
    /// [`crate::backend::Tail::attach`]).
    fn backend(&self) -> Option<&dyn crate::backend::BackendStage> {
        None
    }

    /// Called by the backend tail after this stage selected `token` on the backend, with the
    /// probability its backend form reads back ([`crate::backend::Lowering::feedback`]): what a
    /// stateful selecting stage (mirostat, adaptive-p) would have learnt in its own `apply`.
    fn backend_feedback(&mut self, _token: Token, _selected_p: f32) {}
}

impl Clone for Box<dyn Sampler> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// The uniform number in `[0, 1)` of a random sampler's stream for `(seed, step)`.
#[inline]
pub(crate) fn uniform(seed: u64, step: u64, stream: u64) -> f32 {
    graph::philox::uniform(seed, step, graph::philox::stream::element(stream, 0))
}

/// Seed and step state shared by the random samplers. A draw uses the current step; the step moves
/// on when the sampler accepts a token after drawing ([`Rng::commit`]), so a step that is sampled
/// again before it is accepted (a row resampled, a step recomputed) draws the same numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rng {
    /// The seed.
    pub seed: u64,
    /// The step the next draw uses.
    pub step: u64,
    stream: u64,
    /// A draw was made at `step` and not yet accepted.
    drawn: bool,
}

impl Rng {
    /// A generator for `seed` on `stream`, at step 0.
    pub fn new(seed: u64, stream: u64) -> Self {
        Self { seed, step: 0, stream, drawn: false }
    }

    /// The uniform number of the current step.
    pub fn next_uniform(&mut self) -> f32 {
        self.drawn = true;
        uniform(self.seed, self.step, self.stream)
    }

    /// The uniform number of the current step with 53 random bits ([`graph::philox::uniform_f64`],
    /// the same bits as `Op::Categorical` takes), for an inverse-CDF draw: it resolves
    /// probabilities far below `2^-24`. Its top 24 bits are [`Rng::next_uniform`]'s.
    pub fn next_draw(&mut self) -> f64 {
        self.drawn = true;
        graph::philox::uniform_f64(self.seed, self.step, graph::philox::stream::element(self.stream, 0))
    }

    /// On accept: the next draw uses the next step, if this one drew (accepting a prompt or history
    /// token, with no draw before it, leaves the step where it is).
    pub fn commit(&mut self) {
        if self.drawn {
            self.step += 1;
            self.drawn = false;
        }
    }

    /// Back to step 0 (the sampler's reset).
    pub fn restart(&mut self) {
        self.step = 0;
        self.drawn = false;
    }

    /// Sets the step the next draw uses (a draw since the last accept is forgotten).
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
        self.drawn = false;
    }
}

/// Implements the seed/step part of [`Sampler`] for a struct with an `rng: Rng` field.
macro_rules! rng_methods {
    () => {
        fn set_step(&mut self, step: u64) {
            self.rng.set_step(step);
        }
        fn step(&self) -> Option<u64> {
            Some(self.rng.step)
        }
        fn set_seed(&mut self, seed: u64) {
            self.rng.seed = seed;
        }
        fn seed(&self) -> Option<u64> {
            Some(self.rng.seed)
        }
    };
}
pub(crate) use rng_methods;
