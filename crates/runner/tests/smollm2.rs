//! SmolLM2-135M-Instruct (Q4_1 GGUF, fetched into `target/models` if absent) against llama.cpp's
//! public reference: greedy, no BOS, "The capital of France is" tokenizes to
//! [504, 3575, 282, 4649, 314] and continues 7042 " Paris", 30 ".", 198 "\n", 198 "\n", 504 "The";
//! alone and batched with other sequences at other positions, with backend and CPU sampling, on
//! the CPU backend (and on Vulkan where a device exists). And five prompts of llama.cpp's own
//! greedy decoding, 64 tokens each (`tests/data/smollm2_greedy.json`, one prompt 832 tokens long),
//! teacher-forced and free-running, alone and batched, by the rules of `common::reference`.

#![allow(clippy::print_stderr, clippy::print_stdout)] // a skipped Vulkan test says so loudly; reports

mod common;

use runner::{BackendKind, Model, Sampling, Session, SessionOptions};
use sampling::Chain;
use std::sync::Arc;

const PROMPT: &str = "The capital of France is";
const PROMPT_IDS: [u32; 5] = [504, 3575, 282, 4649, 314];
const CONTINUATION: [u32; 5] = [7042, 30, 198, 198, 504];

fn model() -> Arc<Model> {
    common::smollm2()
}

fn reference_cases() -> Vec<common::reference::Case> {
    common::reference::cases(include_str!("data/smollm2_greedy.json"))
}

#[test]
fn five_prompts_tokenize_and_decode_as_llama_cpp_teacher_forced() {
    let (m, cases) = (model(), reference_cases());
    common::reference::check_prompts(&m, &cases);
    common::reference::check_teacher_forced(&m, &cases);
}

#[test]
fn five_prompts_decode_as_llama_cpp_alone_and_batched() {
    common::reference::check_alone_and_batched(&model(), &reference_cases());
}

/// Generates `n` tokens per sequence (the first from the prompt's logits).
fn generate(
    m: &Arc<Model>,
    backend: BackendKind,
    sampling: Sampling,
    seqs: &[(&str, &str)],
    n: usize,
) -> Vec<Vec<u32>> {
    let tok = m.tokenizer.as_ref().unwrap();
    let prompts: Vec<Vec<u32>> = seqs.iter().map(|(p, _)| tok.encode(p).unwrap()).collect();
    let chains: Vec<Chain> = seqs.iter().map(|(_, c)| Chain::parse(c).unwrap()).collect();
    let opts = SessionOptions { n_ctx: 64, backend, threads: 2, sampling, ..SessionOptions::default() };
    let mut s = Session::new(m.clone(), opts, chains).unwrap();
    let refs: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); seqs.len()];
    let mut last = s.step(&refs).unwrap().tokens;
    for _ in 0..n {
        for (o, t) in out.iter_mut().zip(&last) {
            o.push(*t);
        }
        let one: Vec<[u32; 1]> = last.iter().map(|&t| [t]).collect();
        let refs: Vec<&[u32]> = one.iter().map(|x| x.as_slice()).collect();
        last = s.step(&refs).unwrap().tokens;
    }
    out
}

/// The training context comes from the file (`llama.context_length`), and a run past it is warned
/// about, not one within it.
#[test]
fn the_training_context_is_read_and_warned_past() {
    let m = model();
    assert_eq!(m.config.n_ctx_train, Some(8192));
    assert_eq!(runner::spec::context_warning(8192, &m.config), None);
    let w = runner::spec::context_warning(200_016, &m.config).expect("past the training context");
    assert!(w.contains("200016") && w.contains("8192"), "{w}");
}

#[test]
fn the_tokenizer_matches_llama_cpp() {
    let m = model();
    let t = m.tokenizer.as_ref().unwrap();
    assert_eq!(t.encode(PROMPT).unwrap(), PROMPT_IDS);
    assert_eq!(t.decode(&CONTINUATION).unwrap(), " Paris.\n\nThe");
    for text in
        ["Hello, world! 1234", "  two  spaces\tand tabs\n", "naïve café 日本 🙂", "<|im_start|>user\nhi<|im_end|>"]
    {
        assert_eq!(t.decode(&t.encode(text).unwrap()).unwrap(), text);
    }
    // SmolLM's pre-tokenizer splits digits one by one.
    assert_eq!(t.encode("1234").unwrap().len(), 4);
    assert_eq!(m.config.n_vocab, 49152);
    assert!(m.config.tied_embeddings);
}

#[test]
fn greedy_decoding_matches_llama_cpp_alone_and_batched() {
    let m = model();
    let alone = generate(&m, BackendKind::Cpu, Sampling::Backend, &[(PROMPT, "greedy")], 5);
    assert_eq!(alone[0], CONTINUATION);
    let batch = [
        ("Once upon a time", "top_k(k=40);top_p(p=0.9);temp(t=0.8);dist(seed=1)"),
        (PROMPT, "greedy"),
        ("The quick brown fox jumps over the lazy dog. The", "penalties(last_n=16,repeat=1.2);greedy"),
    ];
    let backend = generate(&m, BackendKind::Cpu, Sampling::Backend, &batch, 5);
    assert_eq!(backend[1], CONTINUATION);
    let cpu = generate(&m, BackendKind::Cpu, Sampling::Cpu, &batch, 5);
    assert_eq!(backend, cpu, "backend and CPU sampling");
}

#[test]
fn greedy_decoding_matches_llama_cpp_on_vulkan() {
    if !common::vulkan_available("greedy_decoding_matches_llama_cpp_on_vulkan") {
        return;
    }
    let m = model();
    let out = generate(&m, BackendKind::Vulkan, Sampling::Backend, &[(PROMPT, "greedy")], 5);
    assert_eq!(out[0], CONTINUATION);
    // The quantized weights and the get_rows / mul_mat that read them run on Vulkan (the `quant`
    // shader family), none on the CPU, and no copy moves a weight between the backends.
    let opts = SessionOptions { n_ctx: 64, backend: BackendKind::Vulkan, threads: 2, ..SessionOptions::default() };
    let mut s = Session::new(m.clone(), opts, vec![Chain::parse("greedy").unwrap()]).unwrap();
    s.step(&[&PROMPT_IDS]).unwrap();
    let (g, plan) = (s.graph().unwrap(), s.scheduler().current_plan().unwrap());
    let mut readers = 0;
    for (id, n) in g.nodes() {
        let quantized = n.dtype.is_quantized() || n.srcs.iter().any(|&x| g.node(x).dtype.is_quantized());
        if quantized {
            let on = &plan.backends[plan.nodes[id.index()].backend];
            assert_eq!(on, vulkan::NAME, "{} runs on {on}", g.describe(id));
            readers += usize::from(!n.dtype.is_quantized());
        }
    }
    // 30 layers of 7 weight matrices, the embedding's get_rows and the tied LM head
    assert_eq!(readers, 30 * 7 + 2, "quantized readers");
    for c in plan.splits.iter().flat_map(|s| &s.copies) {
        assert!(!g.node(c.storage).dtype.is_quantized(), "weight copied: {}", c.name);
    }
}
