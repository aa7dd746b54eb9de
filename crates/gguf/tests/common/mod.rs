//! The tests' sample file, written with `gguf::write`.
#![allow(dead_code)]

use gguf::Value;
pub use gguf::write::Writer;

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
