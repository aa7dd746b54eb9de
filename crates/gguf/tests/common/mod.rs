//! A small GGUF writer for the tests: valid files by default, and knobs to break them.
#![allow(dead_code)]

use gguf::Value;

/// One tensor to write.
#[derive(Debug, Clone)]
pub struct T {
    pub name: String,
    pub ne: Vec<u64>,
    pub type_id: u32,
    pub data: Vec<u8>,
    /// Write this offset instead of the computed one.
    pub offset: Option<u64>,
}

/// A file under construction.
#[derive(Debug, Clone)]
pub struct Writer {
    pub version: u32,
    pub kv: Vec<(String, Value)>,
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
    pub fn kv(mut self, key: &str, v: Value) -> Self {
        self.kv.push((key.into(), v));
        self
    }

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

/// The f32 bytes of `v`.
pub fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A small valid model-like file: metadata of every type and one tensor of every readable dtype.
pub fn sample() -> Writer {
    let s = |x: &str| Value::Str(x.into());
    Writer::default()
        .kv("general.architecture", s("llama"))
        .kv("llama.block_count", Value::U32(2))
        .kv("llama.context_length", Value::U64(2048))
        .kv("llama.rope.freq_base", Value::F32(100000.0))
        .kv("llama.attention.layer_norm_rms_epsilon", Value::F64(1e-5))
        .kv("small", Value::U8(7))
        .kv("neg", Value::I32(-5))
        .kv("i8", Value::I8(-3))
        .kv("u16", Value::U16(65535))
        .kv("i16", Value::I16(-2))
        .kv("i64", Value::I64(1 << 40))
        .kv("flag", Value::Bool(true))
        .kv("tokenizer.ggml.tokens", Value::Array(vec![s("a"), s("b"), s("Ġc")]))
        .kv("tokenizer.ggml.token_type", Value::Array(vec![Value::I32(1), Value::I32(3), Value::I32(1)]))
        .kv("tokenizer.ggml.scores", Value::Array(vec![Value::F32(0.5), Value::F32(-1.0), Value::F32(0.0)]))
        .kv("empty", Value::Array(vec![]))
        .tensor("f32", &[3, 2], 0, f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
        .tensor("f16", &[4], 1, vec![0, 0x3c, 0, 0x40, 0, 0, 0, 0xbc])
        .tensor("q4_0", &[32, 2], 2, (0..36).collect())
        .tensor("q4_1", &[64], 3, (0..40).collect())
        .tensor("q8_0", &[32, 1, 2], 8, (0..68).map(|i| i as u8).collect())
        .tensor("i32", &[2], 26, vec![1, 0, 0, 0, 2, 0, 0, 0])
        .tensor("bf16", &[2, 2, 1, 1], 30, vec![0x80, 0x3f, 0, 0x40, 0, 0, 0x80, 0xbf])
}
