//! Gemma 3 270M (`Q4_K_M`: q5_0, q4_K, q6_K and q8_0 weights, a 262,144-token vocabulary, sliding
//! window layers) against llama.cpp's greedy tokens in `tests/data/gemma3_greedy.json`, by the rules
//! of `common::reference` (a difference only at a near-tie of llama.cpp's own logits; on this model
//! llama.cpp's logits move between its two attention paths by a median of 0.29 to 0.59 per prompt,
//! a 90th percentile of 0.44 to 0.89). One prompt is 833 tokens long, so its generation runs past
//! position 600 and the 512-token window hides the start of the prompt from five layers in six: a
//! model whose layers all attend globally fails it. Vulkan is held to the same reference.

#![allow(clippy::print_stdout)] // the per-case report

mod common;

use common::reference::{self, Case};
use runner::spec::generate;
use runner::{BackendKind, Model, Session, SessionOptions};
use sampling::Chain;
use std::sync::Arc;

fn model() -> Arc<Model> {
    common::gemma3()
}

fn cases() -> Vec<Case> {
    reference::cases(include_str!("data/gemma3_greedy.json"))
}

#[test]
fn the_prompts_tokenize_as_llama_cpp() {
    let m = model();
    reference::check_prompts(&m, &cases());
    assert_eq!((m.config.n_vocab, m.config.n_layer, m.config.arch.name), (262_144, 18, "gemma3"));
    let sliding = m.config.sliding.as_ref().map(|s| (s.window, s.pattern.clone()));
    assert_eq!(sliding, Some((512, runner::config::SwaPattern::Period(6))));
    // the weights are ranges of the mapped file, not copies
    assert!(m.weights.names().all(|n| m.weights.get(n).unwrap().data.is_mapped()));
}

#[test]
fn teacher_forced_argmax_matches_llama_cpp_wherever_its_gap_is_clear() {
    reference::check_teacher_forced(&model(), &cases());
}

#[test]
fn greedy_decoding_matches_llama_cpp_alone_and_batched() {
    reference::check_alone_and_batched(&model(), &cases());
}

#[test]
fn vulkan_decodes_as_llama_cpp() {
    if !common::vulkan_available("vulkan_decodes_as_llama_cpp") {
        return;
    }
    // The embedding table (178 MB of q8_0) exceeds lavapipe's largest buffer (128 MiB): the
    // scheduler leaves what reads it to the CPU, and the rest runs on Vulkan, whose quantized
    // products sum the dequantized weights in f32 (the CPU quantizes the activations to 8 bits as
    // ggml does), so the two may part at a near-tie: each is held to llama.cpp's tokens.
    let m = model();
    let cases: Vec<Case> = cases().into_iter().filter(|c| c.name != "long").collect();
    let prompts: Vec<Vec<u32>> = cases.iter().map(|c| c.prompt.clone()).collect();
    let n = 12;
    let opts = SessionOptions { n_ctx: 64, backend: BackendKind::Vulkan, threads: 2, ..SessionOptions::default() };
    let chains = (0..prompts.len()).map(|_| Chain::parse("greedy").unwrap()).collect();
    let mut s = Session::new(m.clone(), opts, chains).unwrap();
    let got = generate(&mut s, None, &prompts, n, |_| Ok(())).unwrap().tokens;
    for (c, got) in cases.iter().zip(&got) {
        reference::check_free_running(c, got);
    }
    // Every block's q5_0, q4_K, q6_K and q8_0 matrices are read on Vulkan; only the two readers of
    // the embedding table (its get_rows and the tied LM head) run on the CPU.
    let (g, plan) = (s.graph().unwrap(), s.scheduler().current_plan().unwrap());
    let mut on_vulkan = std::collections::BTreeMap::<String, usize>::new();
    let mut on_cpu = 0;
    for (id, n) in g.nodes() {
        if let Some(q) = n.srcs.iter().map(|&x| g.node(x).dtype).find(|d| d.is_quantized()) {
            if plan.backends[plan.nodes[id.index()].backend] == vulkan::NAME {
                *on_vulkan.entry(q.to_string()).or_default() += 1;
            } else {
                on_cpu += 1;
            }
        }
    }
    println!("quantized readers on Vulkan: {on_vulkan:?}, on the CPU: {on_cpu}");
    assert_eq!(on_cpu, 2, "the embedding table's readers");
    assert_eq!(on_vulkan.values().sum::<usize>(), 18 * 7, "18 blocks of 7 matrices");
    assert!(["q5_0", "q4_K", "q6_K", "q8_0"].iter().all(|d| on_vulkan.contains_key(*d)), "{on_vulkan:?}");
}

#[test]
fn batched_logits_equal_alone_bit_for_bit() {
    // llama.cpp's own decoding of these prompts differs between a batch and single runs (its top-10
    // logits by up to 0.49 on Gemma 3, issue 29); ours must not, sliding-window layers included
    // (the long prompt's positions pass the 512-token window). Each sequence is fed its prompt,
    // then 8 of llama.cpp's tokens one by one; every logit of every step is compared.
    let m = model();
    let cases = cases();
    let steps = 8;
    let n_ctx = (cases.iter().map(|c| c.prompt.len()).max().unwrap() + steps + 1).next_multiple_of(64);
    let feed = |c: &Case, i: usize| -> Vec<u32> { if i == 0 { c.prompt.clone() } else { vec![c.want[i - 1]] } };
    let alone: Vec<Vec<Vec<f32>>> = cases
        .iter()
        .map(|c| {
            let mut s = reference::session(&m, 1, n_ctx);
            (0..steps).map(|i| s.eval(&[&feed(c, i)]).unwrap().remove(0)).collect()
        })
        .collect();
    let mut s = reference::session(&m, cases.len(), n_ctx);
    for i in 0..steps {
        let toks: Vec<Vec<u32>> = cases.iter().map(|c| feed(c, i)).collect();
        let refs: Vec<&[u32]> = toks.iter().map(Vec::as_slice).collect();
        let batched = s.eval(&refs).unwrap();
        for ((c, got), want) in cases.iter().zip(&batched).zip(alone.iter().map(|a| &a[i])) {
            let same = got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{}: step {i}: batched logits differ from alone", c.name);
        }
    }
}
