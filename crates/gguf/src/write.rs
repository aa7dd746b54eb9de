//! Writes GGUF files (version 2 or 3): the tests' files, valid by default with knobs to break them
//! (a tensor's offset), and a model's file with its metadata changed ([`Writer::from_gguf`]).

use crate::{Gguf, Value};

/// One tensor to write.
#[derive(Debug, Clone)]
pub struct T {
    /// Its name.
    pub name: String,
    /// Element counts, ggml order.
    pub ne: Vec<u64>,
    /// Its ggml type id.
    pub type_id: u32,
    /// Its bytes.
    pub data: Vec<u8>,
    /// Write this offset instead of the computed one.
    pub offset: Option<u64>,
}

/// A file under construction.
#[derive(Debug, Clone)]
pub struct Writer {
    /// The format version.
    pub version: u32,
    /// Metadata, in file order.
    pub kv: Vec<(String, Value)>,
    /// Tensors, in file order.
    pub tensors: Vec<T>,
    /// The alignment used to place data (also written as `general.alignment` when not 32).
    pub alignment: usize,
}

impl Default for Writer {
    fn default() -> Self {
        Writer { version: 3, kv: Vec::new(), tensors: Vec::new(), alignment: 32 }
    }
}

fn str_bytes(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The GGUF type id of a value.
pub fn type_id(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::Str(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

/// A value's payload (without its type id).
pub fn payload(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(b) => out.push(u8::from(*b)),
        Value::Str(s) => str_bytes(out, s),
        Value::Array(a) => {
            out.extend_from_slice(&a.first().map_or(0, type_id).to_le_bytes());
            out.extend_from_slice(&(a.len() as u64).to_le_bytes());
            for e in a {
                payload(out, e);
            }
        }
    }
}

impl Writer {
    /// Appends metadata `key` = `v`.
    pub fn kv(mut self, key: &str, v: Value) -> Self {
        self.kv.push((key.into(), v));
        self
    }

    /// Appends a tensor.
    pub fn tensor(mut self, name: &str, ne: &[u64], type_id: u32, data: Vec<u8>) -> Self {
        self.tensors.push(T { name: name.into(), ne: ne.to_vec(), type_id, data, offset: None });
        self
    }

    /// The file's bytes; the last tensor's data ends the file (no trailing padding).
    pub fn bytes(&self) -> Vec<u8> {
        let mut kv = self.kv.clone();
        if self.alignment != 32 && !kv.iter().any(|(k, _)| k == "general.alignment") {
            kv.push(("general.alignment".into(), Value::U32(self.alignment as u32)));
        }
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(kv.len() as u64).to_le_bytes());
        for (k, v) in &kv {
            str_bytes(&mut out, k);
            out.extend_from_slice(&type_id(v).to_le_bytes());
            payload(&mut out, v);
        }
        let a = self.alignment;
        let mut off = 0u64;
        let mut offsets = Vec::new();
        for t in &self.tensors {
            str_bytes(&mut out, &t.name);
            out.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
            for n in &t.ne {
                out.extend_from_slice(&n.to_le_bytes());
            }
            out.extend_from_slice(&t.type_id.to_le_bytes());
            out.extend_from_slice(&t.offset.unwrap_or(off).to_le_bytes());
            offsets.push(off);
            off = (off + t.data.len() as u64).div_ceil(a as u64) * a as u64;
        }
        if !self.tensors.is_empty() {
            out.resize(out.len().div_ceil(a) * a, 0);
            let start = out.len();
            for (t, o) in self.tensors.iter().zip(offsets) {
                out.resize(start + o as usize, 0);
                out.extend_from_slice(&t.data);
            }
        }
        out
    }
}

impl Writer {
    /// The metadata and tensors of `g`, to write back with changes (`kv` adds or, for a key
    /// already there, replaces; see [`Writer::set`]).
    pub fn from_gguf(g: &Gguf) -> Writer {
        let kv = g.metadata().iter().filter(|(k, _)| k != "general.alignment").cloned().collect();
        let tensors = g
            .tensors()
            .iter()
            .map(|t| {
                let (_, data) = g.tensor(&t.name).expect("a tensor the file lists");
                T {
                    name: t.name.clone(),
                    ne: t.ne.iter().map(|&n| n as u64).collect(),
                    type_id: crate::ggml_type_id(t.dtype),
                    data: data.to_vec(),
                    offset: None,
                }
            })
            .collect();
        Writer { version: g.version(), kv, tensors, alignment: g.alignment() }
    }

    /// Sets `key` to `v`, replacing the value it has.
    pub fn set(mut self, key: &str, v: Value) -> Self {
        self.kv.retain(|(k, _)| k != key);
        self.kv.push((key.into(), v));
        self
    }
}
