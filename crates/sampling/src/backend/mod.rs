//! Backend sampling: each sequence's sampler chain, as far as it can, runs as graph ops appended
//! right after the logits, on the backend that computed them; only what each row's configuration
//! reserves comes back (a token id, a fixed-`k` candidate list, log-probabilities, or the logits
//! row for a row that finishes on the CPU), and the rest of the chain runs on the CPU.
//!
//! * [`stage`]: the backend form of a sampler ([`BackendStage`], given by
//!   [`crate::Sampler::backend_stage`]) and the structure it appends;
//! * [`build`]: the ops of a group of rows with equal structure (`params`: the values of their
//!   inputs, each step);
//! * [`seqs`]: the registry of sequences ([`Sequences`], [`SeqConfig`]);
//! * [`tail`]: [`Tail`], attaching the groups to a graph (with the capability check on the real
//!   backend and the placement report) and each step's inputs, read-back and CPU suffix;
//! * [`output`]: what a step returns ([`StepOutput`]).
//!
//! ```
//! use graph::{DType, Graph};
//! use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
//! use sampling::Chain;
//!
//! let mut g = Graph::new();
//! let logits = g.input("logits", DType::F32, &[8, 2]).unwrap();
//! let mut seqs = Sequences::new(1).unwrap();
//! seqs.set(SeqId(0), SeqConfig::new(Chain::parse("top_k(k=3);temp(t=0.7);dist(seed=1)").unwrap()));
//! seqs.set(SeqId(1), SeqConfig::new(Chain::parse("dry(multiplier=0.8);dist(seed=2)").unwrap()));
//! let cpu = cpu::CpuBackend::new();
//! let tail = Tail::attach(&mut g, logits, &[(SeqId(0), 0), (SeqId(1), 1)], &seqs, &cpu).unwrap();
//! assert_eq!(tail.placement()[0].1, "+top_k +temp +dist");
//! assert_eq!(tail.placement()[1].1, "-dry -dist");
//! ```

pub mod build;
pub mod output;
mod params;
pub mod seqs;
pub mod stage;
pub mod tail;

pub use build::Extras;
pub use output::{RowOutput, RowResult, StepOutput};
pub use seqs::{SeqConfig, SeqId, Sequences};
pub use stage::{BackendStage, Form, StageKey};
pub use tail::Tail;
