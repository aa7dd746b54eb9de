//! Static-shape tensor DAGs for the graph engine: dtypes, ggml-order shapes and layouts, the closed
//! [`Op`] set with typed parameters, the checking builder, text/DOT dumps, the fixture format and the
//! topology hash. It never touches a device or tensor data.
//!
//! ```
//! use graph::{DType, Graph};
//! let mut g = Graph::new();
//! let logits = g.input("logits", DType::F32, &[32000, 4])?;
//! let scaled = g.scale(logits, 1.0 / 0.8)?;
//! let top = g.top_k(scaled, 40)?;
//! g.set_output(top);
//! assert_eq!(g.node(top).ne(), [40, 4, 1, 1]);
//! # Ok::<(), graph::GraphError>(())
//! ```

mod build;
pub mod dtype;
pub mod dump;
pub mod error;
pub mod fixture;
pub mod fused;
mod graph;
mod hash;
pub mod list_filter;
pub mod node;
pub mod op;
pub mod philox;
pub mod shape;

pub use crate::build::SpecAux;
pub use crate::dtype::{DType, QK, QK_K, bf16, f16};
pub use crate::error::GraphError;
pub use crate::graph::Graph;
pub use crate::hash::Fnv64;
pub use crate::list_filter::{ListStage, ListStages};
pub use crate::node::{Flags, Node, NodeId};
pub use crate::op::{BinaryOp, CompareOp, Op, RopeMode, RopeParams, SortOrder, UnaryOp};
pub use crate::shape::{Layout, MAX_DIMS, Shape};
