//! Helpers shared by the builder's test files: an expected error's message, and its parts.

use graph::{GraphError, NodeId};

/// The message of the error `r` must be.
pub fn msg(r: Result<NodeId, GraphError>) -> String {
    match r {
        Ok(id) => panic!("expected an error, got node {id}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that the message `m` contains every one of `parts`.
pub fn has(m: &str, parts: &[&str]) {
    for p in parts {
        assert!(m.contains(p), "message {m:?} lacks {p:?}");
    }
}
