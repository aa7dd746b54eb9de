//! Backend sampling: each sequence's sampler chain, as far as it can, runs as graph ops appended
//! right after the logits, on the backend that computed them; only what each row's configuration
//! reserves comes back (a token id, a fixed-`k` candidate list, log-probabilities, or the logits
//! row for a row that finishes on the CPU), and the rest of the chain runs on the CPU.
//!
//! * [`stage`]: the stage interface, [`BackendStage`] (a sampler's backend form, given by
//!   [`crate::Sampler::backend`]), its [`StageKey`], the [`Form`]s of the flowing record and the
//!   typed per-step inputs ([`Field`]); each stage's own ops live in its sampler's file;
//! * `lower`: the [`Lowering`] context stages append with, and its shared helpers;
//! * `group`: the group driver (a group's stages in order, fused list runs, its outputs);
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
//! // The logits of two sequences, [n_vocab, 2] (a model's last node; here an input).
//! let mut g = Graph::new();
//! let logits = g.input("logits", DType::F32, &[8, 2]).unwrap();
//! let mut seqs = Sequences::new(1).unwrap();
//! seqs.set(SeqId(0), SeqConfig::new(Chain::parse("top_k(k=3);temp(t=0.7);dist(seed=1)").unwrap()));
//! seqs.set(SeqId(1), SeqConfig::new(Chain::parse("temp(t=0);dist(seed=2)").unwrap()));
//! let cpu = cpu::CpuBackend::new();
//! let mut tail = Tail::attach(&mut g, logits, &[(SeqId(0), 0), (SeqId(1), 1)], &seqs, &cpu).unwrap();
//! // `temp(t=0)` has no backend form (llama.cpp keeps only the argmax): it finishes on the CPU.
//! assert_eq!(tail.placement()[0].1, "+top_k +temp +dist");
//! assert_eq!(tail.placement()[1].1, "-temp -dist");
//!
//! // Plan once; every step writes the logits and the tail's inputs, computes, reads back.
//! let mut sched = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
//! sched.plan(&g).unwrap();
//! let row = [0.1f32, 2.0, -1.0, 0.5, 3.0, 0.0, 1.5, -2.0];
//! sched.set_input_f32(logits, &[row, row].concat()).unwrap();
//! tail.set_inputs(&mut sched, &mut seqs).unwrap();
//! sched.compute().unwrap();
//! let out = tail.sample(&mut sched, &mut seqs).unwrap();
//! let (a, b) = (out.token(0).unwrap(), out.token(1).unwrap());
//! assert!([4, 1, 6].contains(&a)); // among the top 3
//! assert_eq!(b, 4); // the argmax
//! // The backend row read back its token (4 bytes), the CPU row its logits (4 * 8 bytes).
//! assert_eq!(out.bytes_read, 4 + 4 * 8);
//! tail.accept(&mut seqs, SeqId(0), &[a]).unwrap();
//! tail.accept(&mut seqs, SeqId(1), &[b]).unwrap();
//! ```

mod group;
mod lower;
pub mod output;
pub mod seqs;
pub mod stage;
pub mod tail;

pub use lower::{Lowering, Pending, Record};
pub use output::{RowOutput, RowResult, StepOutput};
pub use seqs::{SeqConfig, SeqId, Sequences};
pub use stage::{BackendStage, Field, Form, Out, Row, Scalar, StageKey};
pub use tail::Tail;

/// What a stage's backend form imports (the samplers' files).
pub(crate) mod prelude {
    pub(crate) use super::lower::R;
    pub(crate) use super::stage::{BackendStage, Field, Form, Scalar, StageKey};
    pub(crate) use super::{Lowering, Pending, Record};
    pub(crate) use graph::{DType, NodeId};
}
