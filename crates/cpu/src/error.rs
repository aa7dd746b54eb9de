//! The CPU backend's error enum: what a kernel can fail with at run time (it is turned into
//! `sched::BackendError::Compute`, which names the node and op).

/// A kernel failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuError {
    /// A row id outside the indexed dimension (`get_rows`, `set_rows`).
    #[error("id {id} at position {pos:?} of ids {ids_shape} is out of range for {rows} rows of {of}")]
    IdOutOfRange {
        /// The offending id.
        id: i32,
        /// Its index `[j, i1, i2]` in the ids tensor.
        pos: [usize; 3],
        /// Shape of the ids tensor.
        ids_shape: String,
        /// Number of rows that may be indexed.
        rows: usize,
        /// Shape of the indexed tensor.
        of: String,
    },
    /// A tensor's address or strides are not a multiple of its element size.
    #[error("{role} tensor at byte offset {offset} with strides {nb:?} is not aligned to its element size {size}")]
    Misaligned {
        /// Which operand.
        role: &'static str,
        /// The byte offset (buffer offset plus layout offset).
        offset: usize,
        /// Byte strides.
        nb: [usize; 4],
        /// Element size.
        size: usize,
    },
    /// A combination the dispatcher has no kernel for (`supports` said no).
    #[error("unsupported: {0}")]
    Unsupported(String),
}
