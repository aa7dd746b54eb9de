//! Tiny random models against llama.cpp, for what no real model file here has: Qwen 3
//! (`arch/qwen3.rs`), LLaMA with linear RoPE scaling, with LLaMA 3's per-pair RoPE frequency
//! factors (`rope_freqs.weight`) and with YaRN, Gemma 3 with its sliding-window layers given as
//! a per-layer array, and Gemma 3 with linear RoPE scaling (NeoX pairs; its sliding layers
//! unscaled). `tests/data/tiny_arch.json` (made by `tests/data/tiny_arch_ref.py`, whose
//! header says how) holds each model's recipe (GGUF metadata, tensors and their generators) and
//! llama.cpp's logits after each token of a fixed sequence fed one per step. This test writes the
//! same GGUF from the recipe with `gguf::write` (the generators are the script's, and each tensor's
//! FNV-1a hash must match the script's), loads it and feeds the same tokens one per step on the CPU,
//! and again on Vulkan where a device opens (lavapipe here; skipped loudly otherwise).
//!
//! Checked: every logit at the recorded positions within [`LOGIT_TOL`] of llama.cpp's, and the
//! argmax at every position equal to llama.cpp's wherever its top-2 gap exceeds [`ARGMAX_GAP`].
//! Both sides keep the KV cache in f16; llama.cpp rounds the attention's queries and weights to
//! f16 against its f16 cache where we compute in f32, which is most of the difference.
#![allow(clippy::print_stdout)]

use gguf::Value;
use gguf::write::{T, Writer};
use runner::{BackendKind, Model, Sampling, Session, SessionOptions};
use serde_json::Value as J;
use std::sync::Arc;

/// The largest difference allowed between one of our logits and llama.cpp's (the logits spread
/// with a standard deviation of about 1.1).
const LOGIT_TOL: f64 = 0.02;
/// Argmaxes must agree where llama.cpp's two largest logits are further apart than this.
const ARGMAX_GAP: f64 = 0.05;

fn fixture() -> J {
    serde_json::from_str(include_str!("data/tiny_arch.json")).unwrap()
}

fn splitmix64(x: u64) -> u64 {
    let x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let z = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Element `j` of tensor `t` from its generator (the script's `values`).
fn value(gen_: &J, seed: u64, t: u64, j: u64) -> f64 {
    let k = (splitmix64((seed << 48) ^ (t << 32) ^ j) >> 53) as f64 - 1024.0;
    match gen_["kind"].as_str().unwrap() {
        "uniform" => gen_["amp"].as_f64().unwrap() * k / 1024.0,
        "norm" => 1.0 + k / 4096.0,
        "freqs" => 1.0 + j as f64 / 2.0,
        other => panic!("generator {other}"),
    }
}

fn fnv1a(bytes: &[u8]) -> String {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    format!("{h:016x}")
}

fn kv_value(ty: &str, v: &J) -> Value {
    let arr = |f: &dyn Fn(&J) -> Value| Value::Array(v.as_array().unwrap().iter().map(f).collect());
    match ty {
        "u32" => Value::U32(v.as_u64().unwrap() as u32),
        "f32" => Value::F32(v.as_f64().unwrap() as f32),
        "str" => Value::Str(v.as_str().unwrap().to_string()),
        "bool" => Value::Bool(v.as_bool().unwrap()),
        "str_array" => arr(&|x| Value::Str(x.as_str().unwrap().to_string())),
        "f32_array" => arr(&|x| Value::F32(x.as_f64().unwrap() as f32)),
        "i32_array" => arr(&|x| Value::I32(x.as_i64().unwrap() as i32)),
        "bool_array" => arr(&|x| Value::Bool(x.as_bool().unwrap())),
        other => panic!("kv type {other}"),
    }
}

/// The GGUF file of a recipe, written with the crate's writer.
fn write_model(m: &J, seed: u64) -> Vec<u8> {
    let kv = m["kv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_str().unwrap().to_string(), kv_value(e[1].as_str().unwrap(), &e[2])))
        .collect();
    let tensors = m["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(t, spec)| {
            let ne: Vec<u64> = spec["ne"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
            let n: u64 = ne.iter().product();
            let f16 = spec["dtype"] == "f16";
            let mut data = Vec::new();
            for j in 0..n {
                let v = value(&spec["gen"], seed, t as u64, j);
                if f16 {
                    data.extend_from_slice(&half::f16::from_f64(v).to_le_bytes());
                } else {
                    data.extend_from_slice(&(v as f32).to_le_bytes());
                }
            }
            let name = spec["name"].as_str().unwrap();
            assert_eq!(fnv1a(&data), spec["fnv"].as_str().unwrap(), "{name}: the generators drifted from the script's");
            T { name: name.to_string(), ne, type_id: u32::from(f16), data, offset: None }
        })
        .collect();
    Writer { kv, tensors, ..Writer::default() }.bytes()
}

/// Our logits after each token of `tokens`, fed one per step on `backend`.
fn logits(m: &Arc<Model>, tokens: &[u32], backend: BackendKind) -> Vec<Vec<f32>> {
    let opts = SessionOptions { n_ctx: 64, backend, threads: 2, sampling: Sampling::Cpu, ..SessionOptions::default() };
    let mut s = Session::new(m.clone(), opts, vec![sampling::Chain::parse("greedy").unwrap()]).unwrap();
    tokens.iter().map(|&t| s.eval(&[&[t]]).unwrap().remove(0)).collect()
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

/// Loads the fixture's model `name` and checks it against llama.cpp on the CPU; returns the
/// largest logit difference.
fn check(name: &str) -> f64 {
    check_on(name, BackendKind::Cpu)
}

/// [`check`] on `backend`.
fn check_on(name: &str, backend: BackendKind) -> f64 {
    let f = fixture();
    let seed = f["seed"].as_u64().unwrap();
    let m = f["models"].as_array().unwrap().iter().find(|m| m["name"] == name).unwrap();
    let path = std::env::temp_dir().join(format!("runner-tiny-{}-{name}.gguf", std::process::id()));
    std::fs::write(&path, write_model(m, seed)).unwrap();
    let model = Model::from_gguf(&path);
    std::fs::remove_file(&path).unwrap();
    let model = Arc::new(model.unwrap());
    let tokens: Vec<u32> = f["tokens"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
    let ours = logits(&model, &tokens, backend);
    let positions: Vec<usize> =
        f["positions"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
    let mut worst = (0.0f64, 0, 0);
    for (row, &p) in m["logits"].as_array().unwrap().iter().zip(&positions) {
        let want: Vec<f64> = row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(want.len(), ours[p].len(), "{name}: vocabulary size");
        for (i, (&w, &g)) in want.iter().zip(&ours[p]).enumerate() {
            let d = (f64::from(g) - w).abs();
            if d > worst.0 {
                worst = (d, p, i);
            }
        }
    }
    let differ: Vec<usize> = (0..ours.len())
        .filter(|&p| {
            let want = m["argmax"][p].as_u64().unwrap() as usize;
            m["margins"][p].as_f64().unwrap() > ARGMAX_GAP && argmax(&ours[p]) != want
        })
        .collect();
    let ties = (0..ours.len()).filter(|&p| m["margins"][p].as_f64().unwrap() <= ARGMAX_GAP).count();
    println!(
        "{name} ({backend:?}): largest logit difference {:.5} (position {}, token {}); argmax differs at {} of {} clear positions ({ties} near-ties skipped)",
        worst.0,
        worst.1,
        worst.2,
        differ.len(),
        ours.len() - ties
    );
    assert!(differ.is_empty(), "{name}: our argmax differs from llama.cpp's at positions {differ:?}");
    assert!(worst.0 <= LOGIT_TOL, "{name}: logit {} at position {} differs by {}", worst.2, worst.1, worst.0);
    worst.0
}

#[test]
fn qwen3_matches_llama_cpp() {
    check("qwen3");
}

#[test]
fn llama_with_linear_rope_scaling_matches_llama_cpp() {
    check("llama_linear");
}

#[test]
fn llama_with_rope_freqs_matches_llama_cpp() {
    check("llama_rope_freqs");
}

#[test]
fn llama_with_yarn_matches_llama_cpp() {
    check("llama_yarn");
}

#[test]
fn gemma3_with_per_layer_sliding_pattern_matches_llama_cpp() {
    check("gemma3_swa_layers");
}

#[test]
fn gemma3_with_linear_rope_scaling_on_its_global_layers_matches_llama_cpp() {
    check("gemma3_linear");
}

#[test]
fn every_tiny_model_matches_llama_cpp_on_vulkan() {
    if let Err(e) = vulkan::VulkanBackend::new() {
        sched::testing::skip("every_tiny_model_matches_llama_cpp_on_vulkan", format!("no Vulkan device ({e})"));
        return;
    }
    for name in ["qwen3", "llama_linear", "llama_rope_freqs", "llama_yarn", "gemma3_swa_layers", "gemma3_linear"] {
        check_on(name, BackendKind::Vulkan);
    }
}
