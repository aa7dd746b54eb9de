//! Greedy decoding against llama.cpp: the reference files `tests/data/{model}_greedy.json` (made by
//! `tests/data/greedy_ref.py`, whose command each file records) hold, per prompt, llama.cpp's
//! prompt tokens, its 64 greedy tokens, each step's gap between its two largest logits, and how far
//! its own logits move at each step between its two attention paths (`flash_attention_moves`).
//!
//! A step's choice may differ from llama.cpp's only at a near-tie of llama.cpp's own logits: where
//! its top-1 minus top-2 gap is below [`NEAR_TIE`] or below the 90th percentile of those moves on
//! that prompt ([`Case::noise`]: its flash attention rounds the queries to f16 and accumulates the
//! values in f16; the reference is its other path, which rounds the queries and the attention
//! weights to f16 for its f16 cache, where ours computes in f32).
#![allow(dead_code, clippy::print_stdout)]

use runner::spec::generate;
use runner::{BackendKind, Model, Sampling, Session, SessionOptions};
use sampling::Chain;
use std::sync::Arc;

/// A gap between llama.cpp's two best logits below which our choice may differ (its logits move by
/// about 0.2 between batch shapes), whatever its flash-attention path says.
pub const NEAR_TIE: f64 = 0.25;

/// One prompt of a reference file.
pub struct Case {
    pub name: String,
    pub text: String,
    pub prompt: Vec<u32>,
    pub want: Vec<u32>,
    pub margins: Vec<f64>,
    /// The 90th percentile of llama.cpp's per-step logit moves between its attention paths.
    pub noise: f64,
}

impl Case {
    /// Whether step `i` is a near-tie of llama.cpp's logits (see the module doc).
    pub fn near_tie(&self, i: usize) -> bool {
        self.margins[i] < NEAR_TIE.max(self.noise)
    }
}

/// The 90th percentile of `v` (the element at rank `0.9 * len`).
fn p90(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() * 9 / 10).min(v.len() - 1)]
}

/// The cases of a reference file's text.
pub fn cases(json: &str) -> Vec<Case> {
    let data: serde_json::Value = serde_json::from_str(json).unwrap();
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
    };
    let floats =
        |v: &serde_json::Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|m| m.as_f64().unwrap()).collect() };
    data["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            text: c["prompt"].as_str().unwrap().to_string(),
            prompt: ids(&c["prompt_tokens"]),
            want: ids(&c["tokens"]),
            margins: floats(&c["margins"]),
            noise: p90(floats(&c["flash_attention_moves"])),
        })
        .collect()
}

/// A CPU session of `n_seq` greedy sequences of `n_ctx` cells, sampling on the backend.
pub fn session(m: &Arc<Model>, n_seq: usize, n_ctx: usize) -> Session {
    let opts = SessionOptions {
        n_ctx,
        backend: BackendKind::Cpu,
        threads: 2,
        sampling: Sampling::Backend,
        ..SessionOptions::default()
    };
    Session::new(m.clone(), opts, (0..n_seq).map(|_| Chain::parse("greedy").unwrap()).collect()).unwrap()
}

/// Every prompt tokenizes to llama.cpp's prompt tokens.
pub fn check_prompts(m: &Model, cases: &[Case]) {
    let tok = m.tokenizer.as_ref().unwrap();
    for c in cases {
        assert_eq!(tok.encode(&c.text).unwrap(), c.prompt, "{}", c.name);
    }
}

/// Teacher-forced: llama.cpp's tokens fed one by one; every step chooses its token or is a near-tie.
pub fn check_teacher_forced(m: &Arc<Model>, cases: &[Case]) {
    for c in cases {
        let mut s = session(m, 1, (c.prompt.len() + c.want.len() + 1).next_multiple_of(64));
        let mut got = vec![s.step(&[&c.prompt]).unwrap().tokens[0]];
        for &t in &c.want[..c.want.len() - 1] {
            got.push(s.step(&[&[t]]).unwrap().tokens[0]);
        }
        let differ: Vec<usize> = (0..got.len()).filter(|&i| got[i] != c.want[i]).collect();
        let report: Vec<String> = differ.iter().map(|&i| format!("step {i} (gap {:.3})", c.margins[i])).collect();
        println!(
            "{}: {} of {} steps differ (llama.cpp's noise {:.3}): {}",
            c.name,
            differ.len(),
            got.len(),
            c.noise,
            report.join(", ")
        );
        for i in differ {
            assert!(
                c.near_tie(i),
                "{}: step {i}: ours {} llama.cpp {} with a clear gap {} (llama.cpp's own noise {})",
                c.name,
                got[i],
                c.want[i],
                c.margins[i],
                c.noise
            );
        }
    }
}

/// Free-running, each prompt alone then all in one batch: alone, our tokens equal llama.cpp's up to
/// the first step where they differ, which must be a near-tie; batched, each sequence's tokens equal
/// its tokens alone.
pub fn check_alone_and_batched(m: &Arc<Model>, cases: &[Case]) {
    let n = cases[0].want.len();
    let n_ctx = (cases.iter().map(|c| c.prompt.len()).max().unwrap() + n + 1).next_multiple_of(64);
    let mut alone = Vec::new();
    for c in cases {
        let mut s = session(m, 1, n_ctx);
        let g = generate(&mut s, None, std::slice::from_ref(&c.prompt), n, |_| Ok(())).unwrap();
        check_free_running(c, &g.tokens[0]);
        alone.push(g.tokens[0].clone());
    }
    let mut s = session(m, cases.len(), n_ctx);
    let prompts: Vec<Vec<u32>> = cases.iter().map(|c| c.prompt.clone()).collect();
    let g = generate(&mut s, None, &prompts, n, |_| Ok(())).unwrap();
    assert_eq!(g.tokens, alone, "batched against alone");
}

/// Free-running tokens `got` equal llama.cpp's up to their first difference, a near-tie.
pub fn check_free_running(c: &Case, got: &[u32]) {
    let agree = got.iter().zip(&c.want).take_while(|(a, b)| a == b).count();
    println!("{}: {agree} of {} tokens as llama.cpp", c.name, got.len());
    if agree < got.len() {
        assert!(c.near_tie(agree), "{}: diverges at {agree} with a clear gap {}", c.name, c.margins[agree]);
    }
}
