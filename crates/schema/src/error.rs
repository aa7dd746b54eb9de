//! The one error type of the crate.

/// Why a schema could not be converted.
///
/// Every variant but [`SchemaError::Json`] names the place in the schema as a JSON pointer
/// (RFC 6901; the empty string is the whole document): the offending keyword where there is one
/// (`/properties/age/minimum`), else the schema that holds it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The text is not JSON (from [`crate::to_grammar_str`]); `line` and `column` count from 1.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json { line: usize, column: usize, message: String },
    /// A keyword (or keyword value) that constrains the instance but that the converter cannot
    /// express, where llama.cpp's converter would silently ignore it or emit a wrong grammar.
    #[error("{}: {message}", place(pointer))]
    Unsupported { pointer: String, message: String },
    /// A value that is not valid JSON Schema (a `type` that names no type, a negative
    /// `minLength`, an empty `enum`, bounds no value can satisfy, ...).
    #[error("{}: {message}", place(pointer))]
    Invalid { pointer: String, message: String },
    /// A `$ref` that is not a local `#/...` pointer, or that points at nothing.
    #[error("{}: reference `{reference}` {message}", place(pointer))]
    Reference { pointer: String, reference: String, message: String },
    /// A `pattern` outside the regular-expression subset that the converter translates;
    /// `offset` counts characters from the start of the pattern (0 is its `^`).
    #[error("{}: pattern `{pattern}`, at character {offset}: {message}", place(pointer))]
    Pattern { pointer: String, pattern: String, offset: usize, message: String },
}

impl SchemaError {
    /// The JSON pointer of the offending place; `None` for [`SchemaError::Json`].
    pub fn pointer(&self) -> Option<&str> {
        match self {
            SchemaError::Json { .. } => None,
            SchemaError::Unsupported { pointer, .. }
            | SchemaError::Invalid { pointer, .. }
            | SchemaError::Reference { pointer, .. }
            | SchemaError::Pattern { pointer, .. } => Some(pointer),
        }
    }

    pub(crate) fn unsupported(pointer: &str, message: impl Into<String>) -> Self {
        SchemaError::Unsupported { pointer: pointer.to_owned(), message: message.into() }
    }

    pub(crate) fn invalid(pointer: &str, message: impl Into<String>) -> Self {
        SchemaError::Invalid { pointer: pointer.to_owned(), message: message.into() }
    }

    pub(crate) fn reference(pointer: &str, reference: &str, message: impl Into<String>) -> Self {
        SchemaError::Reference { pointer: pointer.to_owned(), reference: reference.to_owned(), message: message.into() }
    }
}

/// How a pointer reads in a message: the root has the empty pointer, which would read as nothing.
fn place(pointer: &str) -> String {
    if pointer.is_empty() { "at the schema root".to_owned() } else { format!("at {pointer}") }
}
