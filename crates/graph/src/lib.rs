//! Static-shape tensor DAGs.
pub mod philox;
