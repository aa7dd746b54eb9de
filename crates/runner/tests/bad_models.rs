//! Model files that cannot be run end in one clear error naming the architecture, key or tensor,
//! found while reading the file's index (the file is mapped, nothing is copied or allocated for
//! its tensors first): an unknown architecture, an unsupported dtype, a missing tensor, a tensor of
//! the wrong shape, metadata that contradicts the tensors, a per-layer sliding-window pattern of
//! the wrong element type. The files are a tiny LLaMA-architecture model written by `gguf::write`.

use gguf::Value;
use gguf::write::{T, Writer};
use runner::{Config, Model, Weights};

/// A tiny LLaMA model (`Config::tiny(50)`, f32 weights) as a GGUF writer, without a tokenizer.
fn tiny() -> Writer {
    let cfg = Config::tiny(50);
    let w = Weights::random(&cfg, graph::DType::F32, 1).unwrap();
    let kv = [
        ("general.architecture", Value::Str("llama".into())),
        ("llama.embedding_length", Value::U32(cfg.n_embd as u32)),
        ("llama.block_count", Value::U32(cfg.n_layer as u32)),
        ("llama.attention.head_count", Value::U32(cfg.n_head as u32)),
        ("llama.attention.head_count_kv", Value::U32(cfg.n_head_kv as u32)),
        ("llama.feed_forward_length", Value::U32(cfg.n_ff as u32)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(cfg.rms_eps)),
    ];
    let tensors = w
        .names()
        .map(|n| {
            let t = w.get(n).unwrap();
            T {
                name: n.to_string(),
                ne: t.ne.iter().map(|&x| x as u64).collect(),
                type_id: 0,
                data: t.data.to_vec(),
                offset: None,
            }
        })
        .collect();
    Writer { kv: kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), tensors, ..Writer::default() }
}

/// The error loading `w` gives.
fn error(w: &Writer, name: &str) -> String {
    let path = std::env::temp_dir().join(format!("runner-bad-{}-{name}.gguf", std::process::id()));
    std::fs::write(&path, w.bytes()).unwrap();
    let e = Model::from_gguf(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    e
}

fn has(e: &str, parts: &[&str]) {
    for p in parts {
        assert!(e.contains(p), "{e:?} lacks {p:?}");
    }
}

#[test]
fn the_tiny_file_reads_up_to_its_missing_tokenizer() {
    // the control: the file is sound, only the tokenizer's keys are absent
    has(&error(&tiny(), "sound"), &["tokenizer.ggml.model"]);
}

#[test]
fn an_unknown_architecture_is_named_with_the_ones_that_run() {
    let w = tiny().set("general.architecture", Value::Str("mamba".into()));
    has(&error(&w, "arch"), &["\"mamba\"", "\"llama\"", "\"gemma3\""]);
}

#[test]
fn an_unsupported_dtype_names_the_tensor_and_type() {
    let mut w = tiny();
    let t = w.tensors.iter_mut().find(|t| t.name == "blk.1.attn_q.weight").unwrap();
    (t.type_id, t.data) = (11, vec![0; 110 * 64 * 64 / 256]); // q3_K
    t.ne = vec![256, 16];
    has(&error(&w, "dtype"), &["blk.1.attn_q.weight", "q3_K"]);
}

#[test]
fn a_missing_tensor_is_named() {
    let mut w = tiny();
    w.tensors.retain(|t| t.name != "blk.1.ffn_up.weight");
    has(&error(&w, "missing"), &["blk.1.ffn_up.weight"]);
}

#[test]
fn a_tensor_of_the_wrong_shape_names_both_shapes() {
    let mut w = tiny();
    let t = w.tensors.iter_mut().find(|t| t.name == "blk.0.attn_k.weight").unwrap();
    (t.ne, t.data) = (vec![64, 64], vec![0; 64 * 64 * 4]);
    has(&error(&w, "shape"), &["blk.0.attn_k.weight", "[64, 64]", "[64, 32]"]);
}

#[test]
fn metadata_that_contradicts_the_tensors_names_the_tensor() {
    // the file says width 128; its tensors are 64 wide
    let w = tiny().set("llama.embedding_length", Value::U32(128));
    has(&error(&w, "contradicts"), &["token_embd.weight", "[64, 50]", "[128, 50]"]);
    // more heads than the key/value width allows
    let w = tiny().set("llama.attention.head_count_kv", Value::U32(3));
    has(&error(&w, "heads"), &["n_head", "multiple of n_head_kv"]);
}

#[test]
fn a_sliding_window_pattern_of_the_wrong_element_type_is_refused_by_name() {
    let gemma3 = |pattern: Value| {
        let mut w = tiny()
            .set("general.architecture", Value::Str("gemma3".into()))
            .set("gemma3.attention.sliding_window", Value::U32(8))
            .set("gemma3.attention.sliding_window_pattern", pattern);
        for (k, v) in tiny().kv.iter().filter(|(k, _)| k.starts_with("llama.")) {
            w = w.set(&k.replacen("llama.", "gemma3.", 1), v.clone());
        }
        w
    };
    // the control: a per-layer bool list reads; what fails next is a tensor LLaMA has no use for
    let w = gemma3(Value::Array(vec![Value::Bool(true), Value::Bool(false)]));
    has(&error(&w, "pattern-ok"), &["missing tensor 'blk.0.attn_q_norm.weight'"]);
    let w = gemma3(Value::Array(vec![Value::Str("yes".into())]));
    has(&error(&w, "pattern"), &["gemma3.attention.sliding_window_pattern", "per-layer list must be of bools"]);
}

#[test]
fn an_unsupported_rope_scaling_is_named() {
    let w = tiny().set("llama.rope.scaling.type", Value::Str("longrope".into()));
    has(&error(&w, "longrope"), &["RoPE scaling \"longrope\""]);
    // YaRN needs the context it corrects for; the tiny file has no context_length either
    let w = tiny()
        .set("llama.rope.scaling.type", Value::Str("yarn".into()))
        .set("llama.rope.scaling.factor", Value::F32(4.0));
    has(&error(&w, "yarn"), &["YaRN", "llama.rope.scaling.original_context_length", "llama.context_length"]);
}

#[test]
fn rope_scaling_keys_read_as_llama_cpp_reads_them() {
    let cfg = |w: Writer| runner::gguf_model::config(&gguf::Gguf::from_bytes("tiny", w.bytes()).unwrap()).unwrap();
    // no type: linear, with the factor where there is one (or the older scale_linear key)
    assert_eq!(cfg(tiny()).rope_scaling, runner::config::RopeScaling::NONE);
    let c = cfg(tiny().set("llama.rope.scaling.factor", Value::F32(4.0)));
    assert_eq!((c.rope_scaling.freq_scale, c.rope_scaling.yarn), (0.25, None));
    let c = cfg(tiny().set("llama.rope.scale_linear", Value::F32(2.0)));
    assert_eq!(c.rope_scaling.freq_scale, 0.5);
    // "none" ignores the factor
    let c = cfg(tiny()
        .set("llama.rope.scaling.type", Value::Str("none".into()))
        .set("llama.rope.scaling.factor", Value::F32(4.0)));
    assert_eq!(c.rope_scaling.freq_scale, 1.0);
    // YaRN: ext_factor 1 and the attention factor that cancels ggml's own 1 + 0.1 ln(factor)
    let c = cfg(tiny()
        .set("llama.rope.scaling.type", Value::Str("yarn".into()))
        .set("llama.rope.scaling.factor", Value::F32(8.0))
        .set("llama.context_length", Value::U32(4096)));
    let y = c.rope_scaling.yarn.unwrap();
    assert_eq!((c.rope_scaling.freq_scale, y.ext_factor, y.n_ctx_orig), (0.125, 1.0, 4096));
    assert!((y.attn_factor - 1.0).abs() < 1e-6, "{y:?}");
    let p = c.rope_params(0);
    assert_eq!((p.freq_scale, p.ext_factor, p.beta_fast, p.beta_slow, p.n_ctx_orig), (0.125, 1.0, 32.0, 1.0, 4096));
}
