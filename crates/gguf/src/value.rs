//! Metadata values: the thirteen GGUF value types, their type ids and descriptions for errors.

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `uint8` (type 0).
    U8(u8),
    /// `int8` (1).
    I8(i8),
    /// `uint16` (2).
    U16(u16),
    /// `int16` (3).
    I16(i16),
    /// `uint32` (4).
    U32(u32),
    /// `int32` (5).
    I32(i32),
    /// `uint64` (10).
    U64(u64),
    /// `int64` (11).
    I64(i64),
    /// `float32` (6).
    F32(f32),
    /// `float64` (12).
    F64(f64),
    /// `bool` (7): a byte, 0 or 1.
    Bool(bool),
    /// `string` (8): u64 length and UTF-8 bytes.
    Str(String),
    /// `array` (9): element type, u64 count, elements (all of the element type).
    Array(Vec<Value>),
}

impl Value {
    /// The GGUF type name (`u32`, `string`, `array`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::Str(_) => "string",
            Value::Array(_) => "array",
        }
    }

    /// The value as an integer, if it is one.
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// A short description for errors: the type and, for scalars, the value (`i32 -5`,
    /// `string "llama"`, `array of 3 string`).
    pub fn describe(&self) -> String {
        match self {
            Value::Str(s) if s.len() > 40 => format!("string of {} bytes", s.len()),
            Value::Str(s) => format!("string {s:?}"),
            Value::Array(v) => match v.first() {
                Some(first) => format!("array of {} {}", v.len(), first.type_name()),
                None => "empty array".into(),
            },
            Value::Bool(b) => format!("bool {b}"),
            Value::F32(x) => format!("f32 {x}"),
            Value::F64(x) => format!("f64 {x}"),
            other => format!("{} {}", other.type_name(), other.as_i128().unwrap_or_default()),
        }
    }
}
