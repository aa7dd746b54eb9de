//! A model file's `general.sampling.*` keys become its sequences' default chain: SmolLM2 written
//! back with `top_k` 1 and a temperature (the four sequences, one prompt, then draw the same
//! tokens), and a key that is out of range is ignored and said to be; `--seq` still wins.

mod common;

use gguf::Value;
use std::process::Command;

fn smollm2_with(keys: &[(&str, Value)], name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/models");
    let src = runner::fetch::smollm2(&dir).expect("fetching SmolLM2 (network needed once)");
    let g = gguf::Gguf::open(&src).unwrap();
    let w = keys.iter().fold(gguf::write::Writer::from_gguf(&g), |w, (k, v)| w.set(k, v.clone()));
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, w.bytes()).unwrap();
    path
}

fn run(model: &std::path::Path, extra: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["--model", model.to_str().unwrap(), "--steps", "6", "--threads", "2", "--quiet"])
        .args(extra)
        .output()
        .expect("running the runner binary");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "runner failed: {}\n{out}", String::from_utf8_lossy(&o.stderr));
    out
}

fn tokens(out: &str) -> Vec<&str> {
    (0..4)
        .map(|s| {
            let p = format!("seq {s}: \"");
            out.lines().find(|l| l.starts_with(&p)).unwrap_or_else(|| panic!("no {p} in:\n{out}"))
        })
        .map(|l| l.split_once(": ").unwrap().1)
        .collect()
}

#[test]
fn the_model_files_sampling_keys_are_the_default_chain() {
    let path = smollm2_with(
        &[
            ("general.sampling.top_k", Value::I32(1)),
            ("general.sampling.temp", Value::F32(0.7)),
            ("general.sampling.mirostat", Value::U32(7)),
        ],
        "smollm2-sampling-keys.gguf",
    );
    let out = run(&path, &[]);
    for want in [
        "general.sampling.top_k = 1 (from the model file)",
        "general.sampling.temp = 0.7 (from the model file)",
        "ignored general.sampling.mirostat: 7 is outside 0..=2",
        "everything else: llama-server's defaults",
    ] {
        assert!(out.contains(want), "no {want:?} in:\n{out}");
    }
    // top_k 1: every sequence (same prompt, different seeds) draws the most likely token.
    let t = tokens(&out);
    assert!(t.iter().all(|x| *x == t[0]), "{t:?}");
    // --seq replaces the default chain.
    let out = run(&path, &["--seq", "0:temp(t=1.5);dist(seed=1)", "--seq", "1:temp(t=1.5);dist(seed=2)"]);
    assert!(!out.contains("from the model file"), "{out}");
}

#[test]
fn a_file_without_the_keys_gets_llama_servers_chain() {
    let m = common::smollm2();
    assert!(m.sampling.is_empty() && m.sampling.ignored.is_empty(), "{:?}", m.sampling);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/models");
    let out = run(&runner::fetch::smollm2(&dir).unwrap(), &[]);
    assert!(out.contains("the model's default chain") && !out.contains("from the model file"), "{out}");
}

#[test]
fn the_server_fills_a_requests_absent_fields_from_the_model_file() {
    use runner::serve::engine::EngineOptions;
    use runner::serve::{ServeOptions, spawn};
    let path = smollm2_with(&[("general.sampling.top_k", Value::I32(1))], "smollm2-serve-top-k-1.gguf");
    let model = std::sync::Arc::new(runner::Model::from_gguf(&path).unwrap());
    let session = runner::SessionOptions { n_seq: 2, n_ctx: 128, threads: 2, ..Default::default() };
    let opts = ServeOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        engine: EngineOptions { session, chunk: 16, batch: 32, queue: 8, ngram: None, prefill_apart: false },
    };
    let server = spawn(model, opts).unwrap();
    let complete = |body: serde_json::Value| -> String {
        let url = format!("http://{}/v1/completions", server.addr());
        let r: serde_json::Value = ureq::post(&url).send_json(body).unwrap().into_json().unwrap();
        r["choices"][0]["text"].as_str().unwrap().to_string()
    };
    // The model's top_k of 1: any seed gives the most likely tokens.
    let texts: Vec<String> = (1..=4)
        .map(|seed| complete(serde_json::json!({"prompt": "Once upon a time", "max_tokens": 8, "seed": seed})))
        .collect();
    assert!(texts.iter().all(|t| *t == texts[0]), "{texts:?}");
    // A request's own top_k (and a hot temperature) wins over the file's.
    let hot: Vec<String> = (1..=4)
        .map(|seed| {
            complete(serde_json::json!({"prompt": "Once upon a time", "max_tokens": 8, "seed": seed,
                                        "top_k": 40, "top_p": 1.0, "min_p": 0.0, "temperature": 5.0}))
        })
        .collect();
    assert!(hot.iter().any(|t| *t != hot[0]), "{hot:?}");
}
