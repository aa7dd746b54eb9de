//! A reader of GGUF files (versions 2 and 3), the ggml ecosystem's model format, treating the file
//! as untrusted input: every count, length, offset and size is checked against the file before it
//! is used or allocated, and every error names the file (and the key or tensor).
//!
//! # API summary
//!
//! ```text
//! Gguf::open(path) -> Result<Gguf, GgufError>                 // maps the file (no copy)
//! Gguf::from_bytes(name, bytes) -> Result<Gguf, GgufError>   // owns the bytes
//! g.version() -> u32                       g.alignment() -> usize      g.name() -> &str
//! g.metadata() -> &[(String, Value)]       // in file order
//! g.get(key) -> Option<&Value>
//! g.get_u32(key) / g.get_f32(key) / g.get_str(key) / g.get_bool(key)     -> Result<_, GgufError>
//! g.get_str_array(key) -> Result<Vec<&str>>   g.get_i32_array(key) / g.get_f32_array(key) -> Result<Vec<_>>
//! g.tensors() -> &[TensorInfo]             // name, dtype: graph::DType, ne (ggml order), offset, size
//! g.tensor(name) -> Result<(&TensorInfo, &[u8])>                 // MissingTensor
//! g.tensor_expect(name, &[ne0, ne1]) -> Result<(&TensorInfo, &[u8])>   // WrongShape
//! g.data_of(&info) -> Bytes                // a tensor's data as a shared handle (no copy)
//! write::Writer::from_gguf(&g).set(key, value).bytes() -> Vec<u8>   // a file written back, changed
//! ```
//!
//! Getters accept what fits: `get_u32` any integer type whose value fits in a u32, `get_f32` f32,
//! f64 or an integer, `get_i32_array` an array of integers that fit in i32, `get_f32_array` an array
//! of floats. A missing key is [`GgufError::MissingKey`], another type [`GgufError::WrongType`]
//! (naming the file, the key, the type found and the type expected).
//!
//! Checked on open: the magic `GGUF`, version 2 or 3, the tensor and metadata counts against the
//! bytes that remain, every string and array length likewise (array nesting at most 4 deep),
//! strings are UTF-8, bool bytes are 0 or 1, no key or tensor name appears twice,
//! `general.alignment` (default 32) is a u32 power of two, each tensor has 1 to 4 dimensions, a
//! known ggml type (f32 0, f16 1, q4_0 2, q4_1 3, q5_0 6, q5_1 7, q8_0 8, q4_K 12, q5_K 13,
//! q6_K 14, i32 26, bf16 30; others are
//! [`GgufError::UnknownDType`] naming the tensor and type id), `ne[0]` a multiple of its block
//! size, a byte size that does not overflow, and an aligned offset whose data lies inside the data
//! section.
//!
//! Modules: `parse` (the reader), `value` ([`Value`]), `tensor` ([`TensorInfo`], ggml type ids),
//! `bytes` ([`Bytes`]: the file mapped or owned), `error` ([`GgufError`]).

mod bytes;
mod error;
mod parse;
mod tensor;
mod value;
pub mod write;

pub use bytes::Bytes;
pub use error::GgufError;
pub use parse::DEFAULT_ALIGNMENT;
pub use tensor::{TensorInfo, ggml_type_id};
pub use value::Value;

use std::collections::HashMap;
use std::path::Path;

/// A parsed GGUF file and its bytes.
#[derive(Debug)]
pub struct Gguf {
    name: String,
    bytes: Bytes,
    version: u32,
    metadata: Vec<(String, Value)>,
    keys: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    names: HashMap<String, usize>,
    alignment: usize,
    data_start: usize,
}

impl Gguf {
    /// Maps and parses the file at `path` (errors name it as given); tensor data is read from the
    /// mapping, never copied ([`Gguf::data_of`]).
    pub fn open(path: &Path) -> Result<Gguf, GgufError> {
        let name = path.display().to_string();
        let bytes = Bytes::map(path).map_err(|source| GgufError::Io { file: name.clone(), source })?;
        Gguf::parse(&name, bytes)
    }

    /// Parses `bytes`; `name` is the file name errors give.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Gguf, GgufError> {
        Gguf::parse(name, Bytes::from(bytes))
    }

    fn parse(name: &str, bytes: Bytes) -> Result<Gguf, GgufError> {
        let p = parse::parse(name, &bytes)?;
        Ok(Gguf {
            name: name.to_string(),
            bytes,
            version: p.version,
            metadata: p.metadata,
            keys: p.keys,
            tensors: p.tensors,
            names: p.names,
            alignment: p.alignment,
            data_start: p.data_start,
        })
    }

    /// The file name errors give.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The alignment of the data section and its tensors.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Every metadata entry, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.keys.get(key).map(|&i| &self.metadata[i].1)
    }

    fn need(&self, key: &str) -> Result<&Value, GgufError> {
        self.get(key).ok_or_else(|| GgufError::MissingKey { file: self.name.clone(), key: key.into() })
    }

    fn wrong(&self, key: &str, expected: &'static str, found: &Value) -> GgufError {
        GgufError::WrongType { file: self.name.clone(), key: key.into(), expected, found: found.describe() }
    }

    /// `key` as a u32: any integer type whose value fits.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        let v = self.need(key)?;
        v.as_i128().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| self.wrong(key, "an integer in u32 range", v))
    }

    /// `key` as an f32: an f32, an f64 (rounded) or an integer.
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        match self.need(key)? {
            Value::F32(x) => Ok(*x),
            Value::F64(x) => Ok(*x as f32),
            v => v.as_i128().map(|i| i as f32).ok_or_else(|| self.wrong(key, "a number", v)),
        }
    }

    /// `key` as a bool.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        match self.need(key)? {
            Value::Bool(b) => Ok(*b),
            v => Err(self.wrong(key, "a bool", v)),
        }
    }

    /// `key` as a string.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.need(key)? {
            Value::Str(s) => Ok(s),
            v => Err(self.wrong(key, "a string", v)),
        }
    }

    fn array(&self, key: &str, expected: &'static str) -> Result<&[Value], GgufError> {
        match self.need(key)? {
            Value::Array(a) => Ok(a),
            v => Err(self.wrong(key, expected, v)),
        }
    }

    /// `key` as an array of strings (token texts, merges).
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        const E: &str = "an array of strings";
        let a = self.array(key, E)?;
        a.iter()
            .map(|v| match v {
                Value::Str(s) => Ok(s.as_str()),
                _ => Err(self.wrong(key, E, &Value::Array(a.to_vec()))),
            })
            .collect()
    }

    /// `key` as an array of i32 (token types): integers that fit.
    pub fn get_i32_array(&self, key: &str) -> Result<Vec<i32>, GgufError> {
        const E: &str = "an array of integers in i32 range";
        let a = self.array(key, E)?;
        a.iter().map(|v| v.as_i128().and_then(|i| i32::try_from(i).ok()).ok_or_else(|| self.wrong(key, E, v))).collect()
    }

    /// `key` as an array of f32 (token scores): f32 or f64 elements.
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>, GgufError> {
        const E: &str = "an array of floats";
        let a = self.array(key, E)?;
        a.iter()
            .map(|v| match v {
                Value::F32(x) => Ok(*x),
                Value::F64(x) => Ok(*x as f32),
                _ => Err(self.wrong(key, E, v)),
            })
            .collect()
    }

    /// The tensor index, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor `name` and its bytes.
    pub fn tensor(&self, name: &str) -> Result<(&TensorInfo, &[u8]), GgufError> {
        let &i = self
            .names
            .get(name)
            .ok_or_else(|| GgufError::MissingTensor { file: self.name.clone(), tensor: name.into() })?;
        let t = &self.tensors[i];
        let start = self.data_start + t.offset;
        // in bounds: checked when the file was parsed
        Ok((t, &self.bytes[start..start + t.size]))
    }

    /// The data of tensor `t` (one of [`Gguf::tensors`]) as a handle sharing the file's bytes.
    pub fn data_of(&self, t: &TensorInfo) -> Bytes {
        let start = self.data_start + t.offset;
        // in bounds: checked when the file was parsed
        self.bytes.slice(start..start + t.size)
    }

    /// The tensor `name` and its bytes, which must have shape `ne` (ggml order; trailing 1s on
    /// either side are ignored).
    pub fn tensor_expect(&self, name: &str, ne: &[usize]) -> Result<(&TensorInfo, &[u8]), GgufError> {
        let (t, b) = self.tensor(name)?;
        let trim = |v: &[usize]| {
            let n = v.iter().rposition(|&x| x != 1).map_or(0, |i| i + 1);
            v[..n].to_vec()
        };
        if trim(&t.ne) != trim(ne) {
            return Err(GgufError::WrongShape {
                file: self.name.clone(),
                tensor: name.into(),
                found: t.ne.clone(),
                expected: ne.to_vec(),
            });
        }
        Ok((t, b))
    }
}
