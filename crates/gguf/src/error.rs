//! The crate's error type: every variant names the file, and the key or tensor where there is one.

/// What went wrong reading a GGUF file or looking something up in it.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The first four bytes are not `GGUF`.
    #[error("{file}: not a GGUF file (magic {magic:02x?}, expected \"GGUF\")")]
    BadMagic {
        /// The file.
        file: String,
        /// The bytes found (fewer when the file is shorter).
        magic: Vec<u8>,
    },
    /// A version other than 2 or 3.
    #[error("{file}: GGUF version {version} is not supported (2 or 3)")]
    UnsupportedVersion {
        /// The file.
        file: String,
        /// The version found.
        version: u32,
    },
    /// The file ends inside a structure.
    #[error("{file}: truncated: {what} needs bytes {at}..{end}, the file has {len}")]
    Truncated {
        /// The file.
        file: String,
        /// What was being read (`the key of metadata entry 3`, `tensor 'x' data`, ...).
        what: String,
        /// Where it starts.
        at: u64,
        /// Where it would end.
        end: u64,
        /// The file's length.
        len: u64,
    },
    /// A malformed structure: an impossible count, a bad string, a bad value type, a duplicate key,
    /// a bad alignment.
    #[error("{file}: {what}: {msg}")]
    Invalid {
        /// The file.
        file: String,
        /// What was being read.
        what: String,
        /// What is wrong.
        msg: String,
    },
    /// A tensor of a ggml type this engine does not read.
    #[error(
        "{file}: tensor '{tensor}' has ggml type {type_id} ({type_name}); supported: f32 (0), f16 (1), q4_0 (2), q4_1 (3), q8_0 (8), i32 (26), bf16 (30)"
    )]
    UnknownDType {
        /// The file.
        file: String,
        /// The tensor.
        tensor: String,
        /// ggml's type id.
        type_id: u32,
        /// ggml's name for it, or `unknown`.
        type_name: &'static str,
    },
    /// A tensor whose shape, offset or size is impossible.
    #[error("{file}: tensor '{tensor}': {msg}")]
    BadTensor {
        /// The file.
        file: String,
        /// The tensor.
        tensor: String,
        /// What is wrong.
        msg: String,
    },
    /// A metadata key that the file does not have.
    #[error("{file}: missing metadata key '{key}'")]
    MissingKey {
        /// The file.
        file: String,
        /// The key.
        key: String,
    },
    /// A metadata value of another type than asked for.
    #[error("{file}: metadata key '{key}' is {found}, expected {expected}")]
    WrongType {
        /// The file.
        file: String,
        /// The key.
        key: String,
        /// What the getter accepts.
        expected: &'static str,
        /// What the file has.
        found: String,
    },
    /// A tensor that the file does not have.
    #[error("{file}: missing tensor '{tensor}'")]
    MissingTensor {
        /// The file.
        file: String,
        /// The tensor.
        tensor: String,
    },
    /// A tensor of another shape than expected.
    #[error("{file}: tensor '{tensor}' has shape {found:?}, expected {expected:?} (ggml order)")]
    WrongShape {
        /// The file.
        file: String,
        /// The tensor.
        tensor: String,
        /// Its shape.
        found: Vec<usize>,
        /// The expected shape.
        expected: Vec<usize>,
    },
}
