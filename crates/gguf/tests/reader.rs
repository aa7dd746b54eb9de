//! The GGUF reader on files written by the tests' writer: a valid file read back exactly, and
//! every kind of broken file a clear error naming the file (and key or tensor), never a panic.

mod common;

use common::{Writer, f32s, sample};
use gguf::{Gguf, GgufError, Value};
use graph::DType;

fn open(w: &Writer) -> Result<Gguf, GgufError> {
    Gguf::from_bytes("model.gguf", w.bytes())
}

fn err(w: &Writer) -> String {
    match open(w) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

fn has(m: &str, parts: &[&str]) {
    for p in parts {
        assert!(m.contains(p), "message {m:?} lacks {p:?}");
    }
}

#[test]
fn a_valid_file_reads_back_exactly() {
    for version in [2, 3] {
        let w = Writer { version, ..sample() };
        let g = open(&w).unwrap();
        assert_eq!(g.version(), version);
        assert_eq!(g.alignment(), 32);
        assert_eq!(g.metadata().len(), w.kv.len());
        assert_eq!(g.metadata()[0], ("general.architecture".to_string(), Value::Str("llama".into())));
        assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
        assert_eq!(g.get_u32("llama.block_count").unwrap(), 2);
        assert_eq!(g.get_u32("llama.context_length").unwrap(), 2048); // u64 that fits
        assert_eq!(g.get_u32("small").unwrap(), 7);
        assert_eq!(g.get_u32("u16").unwrap(), 65535);
        assert_eq!(g.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
        assert_eq!(g.get_f32("llama.attention.layer_norm_rms_epsilon").unwrap(), 1e-5f64 as f32);
        assert!(g.get_bool("flag").unwrap());
        assert_eq!(g.get("i64"), Some(&Value::I64(1 << 40)));
        assert_eq!(g.get_str_array("tokenizer.ggml.tokens").unwrap(), ["a", "b", "Ġc"]);
        assert_eq!(g.get_i32_array("tokenizer.ggml.token_type").unwrap(), [1, 3, 1]);
        assert_eq!(g.get_f32_array("tokenizer.ggml.scores").unwrap(), [0.5, -1.0, 0.0]);
        assert!(g.get_str_array("empty").unwrap().is_empty());

        let names: Vec<&str> = g.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["f32", "f16", "q4_0", "q4_1", "q8_0", "i32", "bf16"]);
        let dtypes: Vec<DType> = g.tensors().iter().map(|t| t.dtype).collect();
        assert_eq!(dtypes, [DType::F32, DType::F16, DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::I32, DType::BF16]);
        for (t, src) in g.tensors().iter().zip(&w.tensors) {
            assert_eq!(t.offset % 32, 0);
            let (info, bytes) = g.tensor(&t.name).unwrap();
            assert_eq!(info, t);
            assert_eq!(bytes, src.data.as_slice(), "{}", t.name);
            assert_eq!(t.size, src.data.len());
        }
        let (t, b) = g.tensor_expect("f32", &[3, 2]).unwrap();
        assert_eq!((t.ne.as_slice(), b), (&[3usize, 2][..], f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).as_slice()));
        g.tensor_expect("bf16", &[2, 2]).unwrap(); // trailing 1s ignored
        g.tensor_expect("q8_0", &[32, 1, 2]).unwrap();
    }
}

#[test]
fn a_custom_alignment_places_the_data() {
    let w = Writer { alignment: 64, ..sample() };
    let g = open(&w).unwrap();
    assert_eq!(g.alignment(), 64);
    for t in g.tensors() {
        assert_eq!(t.offset % 64, 0);
    }
    assert_eq!(g.tensor("q4_1").unwrap().1, (0..40).collect::<Vec<u8>>().as_slice());
    for bad in [Value::U32(3), Value::U32(0), Value::I32(64)] {
        let w = sample().kv("general.alignment", bad.clone());
        has(&err(&w), &["model.gguf", "general.alignment", "power of two", &bad.describe()]);
    }
}

#[test]
fn lookups_name_the_file_and_the_key_or_tensor() {
    let g = open(&sample()).unwrap();
    has(&g.get_u32("nope").unwrap_err().to_string(), &["model.gguf", "missing metadata key 'nope'"]);
    has(&g.get_u32("neg").unwrap_err().to_string(), &["model.gguf", "'neg'", "i32 -5", "u32"]);
    has(&g.get_u32("general.architecture").unwrap_err().to_string(), &["string \"llama\"", "u32"]);
    has(&g.get_f32("flag").unwrap_err().to_string(), &["'flag'", "bool true", "a number"]);
    has(&g.get_str("small").unwrap_err().to_string(), &["'small'", "u8 7", "a string"]);
    has(&g.get_str_array("tokenizer.ggml.scores").unwrap_err().to_string(), &["array of 3 f32", "strings"]);
    has(&g.get_i32_array("tokenizer.ggml.tokens").unwrap_err().to_string(), &["string \"a\"", "i32"]);
    has(&g.get_f32_array("small").unwrap_err().to_string(), &["u8 7", "array of floats"]);
    has(&g.get_bool("small").unwrap_err().to_string(), &["'small'", "a bool"]);
    let e = g.tensor("output.weight").unwrap_err();
    assert!(matches!(e, GgufError::MissingTensor { .. }));
    has(&e.to_string(), &["model.gguf", "missing tensor 'output.weight'"]);
    let e = g.tensor_expect("f32", &[2, 3]).unwrap_err();
    assert!(matches!(e, GgufError::WrongShape { .. }));
    has(&e.to_string(), &["model.gguf", "tensor 'f32'", "[3, 2]", "expected [2, 3]"]);
    let e = Gguf::open(std::path::Path::new("/nonexistent/x.gguf")).unwrap_err();
    has(&e.to_string(), &["/nonexistent/x.gguf", "cannot read"]);
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample().bytes();
    for n in 0..bytes.len() {
        match Gguf::from_bytes("cut.gguf", bytes[..n].to_vec()) {
            Ok(_) => panic!("a file cut at {n} of {} bytes was accepted", bytes.len()),
            Err(e) => {
                let m = e.to_string();
                assert!(m.starts_with("cut.gguf: "), "cut at {n}: {m}");
            }
        }
    }
    // a cut inside the tensor data names the tensor
    has(
        &format!("{}", Gguf::from_bytes("cut.gguf", bytes[..bytes.len() - 1].to_vec()).unwrap_err()),
        &["tensor 'bf16'", "data section"],
    );
}

#[test]
fn bad_headers() {
    open(&Writer::default()).unwrap(); // no metadata, no tensors: valid
    let mut b = sample().bytes();
    b[0] = b'X';
    has(&Gguf::from_bytes("m.gguf", b).unwrap_err().to_string(), &["m.gguf", "not a GGUF file"]);
    for v in [1, 4, 0x0300_0000] {
        has(&err(&Writer { version: v, ..sample() }), &["model.gguf", &format!("version {v} is not supported")]);
    }
}

/// Bytes of a header with the given counts and nothing after.
fn header(n_tensors: u64, n_kv: u64, rest: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&n_tensors.to_le_bytes());
    b.extend_from_slice(&n_kv.to_le_bytes());
    b.extend_from_slice(rest);
    b
}

#[test]
fn huge_counts_and_lengths_are_refused_before_allocating() {
    let e = |b: Vec<u8>| Gguf::from_bytes("h.gguf", b).unwrap_err().to_string();
    has(&e(header(u64::MAX, 0, &[])), &["h.gguf", "the tensor count", "18446744073709551615 tensors"]);
    has(&e(header(0, 1 << 60, &[])), &["h.gguf", "the metadata count", "count 1152921504606846976"]);
    // a key of length 2^63
    let mut kv = (1u64 << 63).to_le_bytes().to_vec();
    kv.extend_from_slice(&[b'a'; 16]);
    has(&e(header(0, 1, &kv)), &["the key of metadata entry 0", "count 9223372036854775808"]);
    // an array of 2^40 u64
    let mut kv = Vec::new();
    kv.extend_from_slice(&1u64.to_le_bytes());
    kv.push(b'k');
    kv.extend_from_slice(&9u32.to_le_bytes());
    kv.extend_from_slice(&10u32.to_le_bytes());
    kv.extend_from_slice(&(1u64 << 40).to_le_bytes());
    has(&e(header(0, 1, &kv)), &["metadata 'k'", "count 1099511627776"]);
    // arrays nested five deep
    let mut kv = Vec::new();
    kv.extend_from_slice(&1u64.to_le_bytes());
    kv.push(b'k');
    kv.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..5 {
        kv.extend_from_slice(&9u32.to_le_bytes());
        kv.extend_from_slice(&1u64.to_le_bytes());
    }
    kv.extend_from_slice(&[0; 64]);
    has(&e(header(0, 1, &kv)), &["metadata 'k'", "nested deeper than 4"]);
}

#[test]
fn bad_values() {
    let w = sample().kv("general.architecture", Value::U8(1));
    has(&err(&w), &["metadata 'general.architecture'", "appears twice"]);
    // a bool byte of 2, an unknown value type, a non-UTF-8 string: patch the written bytes
    let flag = |w: &Writer| {
        let b = w.bytes();
        let pos = b.windows(4).position(|x| x == b"flag").unwrap() + 4;
        (b, pos)
    };
    let (mut b, pos) = flag(&sample());
    b[pos + 4] = 2;
    has(&Gguf::from_bytes("v.gguf", b).unwrap_err().to_string(), &["v.gguf", "metadata 'flag'", "bool byte 2"]);
    let (mut b, pos) = flag(&sample());
    b[pos] = 13;
    has(&Gguf::from_bytes("v.gguf", b).unwrap_err().to_string(), &["metadata 'flag'", "unknown value type 13"]);
    let w = sample().kv("name", Value::Str("ab".into()));
    let mut b = w.bytes();
    let pos = b.windows(4).position(|x| x == b"name").unwrap() + 4 + 4 + 8;
    b[pos] = 0xff;
    has(&Gguf::from_bytes("v.gguf", b).unwrap_err().to_string(), &["metadata 'name'", "not UTF-8"]);
}

#[test]
fn bad_tensors() {
    let t = |w: Writer, parts: &[&str]| has(&err(&w), &[&["model.gguf"][..], parts].concat());
    t(sample().tensor("k3", &[256], 11, vec![0; 110]), &["tensor 'k3'", "ggml type 11 (q3_K)", "supported"]);
    // a K-quant row is whole blocks of 256
    t(sample().tensor("k4", &[128], 12, vec![0; 72]), &["tensor 'k4'", "ne[0] = 128", "block size 256"]);
    t(sample().tensor("odd", &[256], 99, vec![0; 144]), &["tensor 'odd'", "ggml type 99 (unknown)"]);
    t(sample().tensor("q", &[48], 2, vec![0; 27]), &["tensor 'q'", "ne[0] = 48", "block size 32"]);
    t(sample().tensor("big", &[1 << 62, 1 << 62], 0, vec![]), &["tensor 'big'", "overflows"]);
    t(sample().tensor("huge", &[u64::MAX], 0, vec![]), &["tensor 'huge'", "too large"]);
    t(sample().tensor("dims", &[1, 1, 1, 1, 1], 0, vec![0; 4]), &["tensor 'dims'", "5 dimensions"]);
    t(sample().tensor("none", &[], 0, vec![]), &["tensor 'none'", "0 dimensions"]);
    t(sample().tensor("f32", &[1], 0, vec![0; 4]), &["tensor 'f32'", "appears twice"]);
    let mut w = sample();
    w.tensors[1].offset = Some(w.tensors[1].offset.unwrap_or(32) + 4);
    t(w, &["tensor 'f16'", "not a multiple of the alignment 32"]);
    let mut w = sample();
    w.tensors[0].offset = Some(1 << 20);
    t(w, &["tensor 'f32'", "bytes 1048576..1048600 of the data section"]);
    let mut w = sample();
    w.tensors[0].offset = Some(u64::MAX - 31);
    t(w, &["tensor 'f32'", "of the data section"]);
}

#[test]
fn a_file_written_back_with_changed_metadata_reads_the_same_tensors() {
    let g = gguf::Gguf::from_bytes("sample", sample().bytes()).unwrap();
    let bytes = Writer::from_gguf(&g).set("small", Value::U8(9)).kv("added", Value::F32(0.5)).bytes();
    let h = gguf::Gguf::from_bytes("changed", bytes).unwrap();
    assert_eq!(h.get_u32("small").unwrap(), 9);
    assert_eq!(h.get_f32("added").unwrap(), 0.5);
    assert_eq!(h.metadata().len(), g.metadata().len() + 1);
    assert_eq!(h.tensors().len(), g.tensors().len());
    for t in g.tensors() {
        assert_eq!(h.tensor(&t.name).unwrap().1, g.tensor(&t.name).unwrap().1, "{}", t.name);
    }
}
