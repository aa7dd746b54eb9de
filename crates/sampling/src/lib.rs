//! LLM token samplers with llama.cpp's semantics, on the CPU: the [`Sampler`] interface
//! (llama.cpp's `llama_sampler_i`), every sampler ([`samplers`]), [`Chain`]s built in code or
//! parsed from a SPEC string ([`chain_spec`]), and the [`Candidates`] array they work on.
//!
//! The common chains never build a vocabulary-sized `(id, logit, p)` array and never sort the
//! vocabulary: the first truncating or selecting stage reads the raw logits row directly with the
//! vectorised kernels of [`kernels`] (see [`candidates`] for the representation).
//!
//! Randomness comes from [`graph::philox`] keyed by `(seed, step)`; see [`sampler`] for the step
//! and seed rules. `docs/SAMPLING.md` documents every sampler and its edge values.
//!
//! ```
//! use sampling::{Chain, Sampler, samplers::*};
//! let logits = [1.0f32, 3.0, 2.0, 0.5];
//! let mut chain = Chain::new().with(TopK::new(2)).with(Temp::new(0.8).unwrap()).with(Dist::new(7));
//! let tok = chain.sample(&logits).unwrap();
//! assert!(tok == 1 || tok == 2);
//! let mut same = Chain::parse("top_k(k=2);temp(t=0.8);dist(seed=7)").unwrap();
//! assert_eq!(same.sample(&logits).unwrap(), tok);
//! ```

#![warn(missing_docs)]

pub mod backend;
pub mod candidates;
pub mod chain;
pub mod chain_spec;
pub mod error;
pub mod kernels;
pub mod sampler;
pub mod samplers;
pub mod speculative;

pub use candidates::{Candidates, SampleOutput, TokenData};
pub use chain::Chain;
pub use error::{Result, SamplingError};
pub use sampler::{DEFAULT_SEED, Rng, Sampler, Token};
