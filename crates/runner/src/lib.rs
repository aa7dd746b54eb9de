//! The reference model runner: a LLaMA-architecture decoder built only from `graph` ops
//! ([`forward`]), run by `sched` on the CPU or Vulkan backend over a KV cache held in state
//! tensors ([`kv`]), a batch of sequences decoded in lockstep with each sequence's sampler chain
//! run as backend sampling ops after the logits ([`session`]). Models come from seeded random
//! weights ([`Model::random`], the default: nothing to download) or from GGUF files; text goes
//! through a [`tokenizer`] built from the GGUF metadata (byte-level BPE, or llama.cpp's SPM).
//!
//! The binary (`cargo run --release -p runner`) is the project's main demo; see its `--help`.

pub mod arch;
pub mod config;
pub mod error;
pub mod fetch;
pub mod forward;
pub mod gguf_model;
pub mod kv;
pub mod model;
pub mod reasoning;
pub mod sampling_defaults;
pub mod serve;
pub mod session;
pub mod spec;
pub mod tokenizer;
pub mod weights;

pub use config::Config;
pub use error::{Result, RunnerError};
pub use kv::CacheSpec;
pub use model::Model;
pub use session::{BackendKind, DraftDist, Sampling, Session, SessionOptions, SpecOutcome, StepOutcome};
pub use spec::{DraftModel, Drafter, Generation};
pub use tokenizer::{TextStream, Tokenizer, TokenizerSpec};
pub use weights::{Tensor, Weights};
