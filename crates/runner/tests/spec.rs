//! Speculative decoding in the runner: greedy speculative decoding (n-gram drafts on a repetitive
//! prompt, mixed with a sequence that gets no drafts; a draft model) gives exactly plain greedy
//! decoding's tokens on SmolLM2 over 64 steps, with backend and CPU sampling, on the CPU backend
//! and on Vulkan (skipped loudly without a device), with drafts both accepted and rejected; the KV
//! cache after a rejection (positions, and the next logits equal a session's that never saw the
//! rejected tokens); stochastic speculative decoding on the random model (backend and CPU
//! sampling agree token for token, every token lies in the chain's support); sampled drafting by a
//! draft model, verified with its distributions (backend and CPU verification agree token for
//! token, on the CPU backend and on Vulkan); errors.

#![allow(clippy::print_stderr)] // a skipped Vulkan test says so loudly

mod common;

use graph::DType;
use runner::spec::{self, DraftModel, Drafter, Generation};
use runner::{BackendKind, Config, Model, Sampling, Session, SessionOptions};
use sampling::Chain;
use sampling::speculative::ngram::NgramDrafter;
use std::sync::Arc;

/// Counting: the n-gram drafter's continuations are right within a decade and wrong at its end.
const COUNTING: &str = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,";
const OTHER: &str = "The capital of France is";
const STEPS: usize = 64;
const K: usize = 8;

fn smollm2() -> Arc<Model> {
    common::smollm2()
}

fn prompts(m: &Model, texts: &[&str]) -> Vec<Vec<u32>> {
    texts.iter().map(|t| m.tokenizer.as_ref().unwrap().encode(t).unwrap()).collect()
}

/// On Vulkan the ops reading the quantized weights stay on the CPU (lavapipe runs the `quant`
/// shaders one workgroup per output element: this file's Vulkan test took over 20 minutes with
/// them); the KV cache, attention, norms, RoPE, the activations and the sampling tail run on
/// Vulkan. `tests/smollm2.rs` runs the quantized ops themselves on Vulkan.
fn opts(backend: BackendKind, sampling: Sampling, n_ctx: usize, k: usize) -> SessionOptions {
    SessionOptions {
        n_ctx,
        backend,
        threads: 2,
        sampling,
        n_draft_max: k,
        quantized_on_cpu: backend == BackendKind::Vulkan,
        ..SessionOptions::default()
    }
}

fn chains(specs: &[&str]) -> Vec<Chain> {
    specs.iter().map(|s| Chain::parse(s).unwrap()).collect()
}

/// Generates `STEPS` tokens per prompt with greedy chains, with `drafter` or plainly.
fn run(
    m: &Arc<Model>,
    backend: BackendKind,
    sampling: Sampling,
    ps: &[Vec<u32>],
    drafter: Option<&mut Drafter>,
) -> Generation {
    let n_ctx = spec::cells_needed(ps.iter().map(Vec::len).max().unwrap(), STEPS, K);
    let k = if drafter.is_some() { K } else { 0 };
    let mut s = Session::new(m.clone(), opts(backend, sampling, n_ctx, k), chains(&vec!["greedy"; ps.len()])).unwrap();
    spec::generate(&mut s, drafter, ps, STEPS, |_| Ok(())).unwrap()
}

fn ngram() -> Drafter {
    Drafter::Ngram(NgramDrafter::new(2, K, 0.75).unwrap())
}

/// Greedy n-gram speculation on a batch of the counting prompt and one that drafts little equals
/// plain greedy decoding, with drafts accepted and rejected, in a fixed set of plans.
fn ngram_equals_plain(backend: BackendKind) {
    let m = smollm2();
    let ps = prompts(&m, &[COUNTING, OTHER]);
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let plain = run(&m, backend, sampling, &ps, None);
        let sp = run(&m, backend, sampling, &ps, Some(&mut ngram()));
        assert_eq!(sp.tokens, plain.tokens, "{backend:?} {sampling:?}: speculative vs plain greedy");
        assert!(sp.accepted > 0 && sp.rejections > 0, "{sampling:?}: drafts accepted and rejected: {sp:?}");
        assert!(sp.steps < plain.steps, "{sampling:?}: {} speculative steps vs {} plain", sp.steps, plain.steps);
        // A fixed set of decode shapes, planned once each: plain, and per-sequence widths of 2, 4, 8
        // and K + 1 = 9 (the longest draft plus one, rounded up to a power of two), for each
        // bucket of attended cells the positions pass through.
        let n_ctx = spec::cells_needed(ps.iter().map(Vec::len).max().unwrap(), STEPS, K);
        let shortest = ps.iter().map(Vec::len).min().unwrap();
        let buckets: std::collections::BTreeSet<usize> =
            (shortest + 1..=n_ctx).map(|n| runner::kv::attended_cells(n, n_ctx)).collect();
        let most = 5 * buckets.len() as u64;
        assert!(
            sp.plans_after_prefill <= most,
            "{sampling:?}: {} plans after the prefill (most {most})",
            sp.plans_after_prefill
        );
        eprintln!(
            "{backend:?} {sampling:?}: {} steps (plain {}), {}/{} drafts accepted, {} rejections",
            sp.steps, plain.steps, sp.accepted, sp.drafted, sp.rejections
        );
    }
}

/// A drafter whose drafts keep failing backs off: on "1, 2, ..., 10," the 3-gram lookup proposes
/// continuations of the prompt's own runs that the model never takes. With a fixed depth it
/// drafted 71 tokens in 64 steps (the runner's README example) and accepted none; with `DraftDepth` the depth
/// halves on each miss and drafting pauses, so far fewer tokens are drafted than steps taken, and
/// the tokens are plain greedy decoding's.
#[test]
fn a_drafter_that_keeps_failing_backs_off() {
    let m = smollm2();
    let ps = prompts(&m, &["1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"]);
    let plain = run(&m, BackendKind::Cpu, Sampling::Backend, &ps, None);
    // The runner's drafter (3-grams): on this prompt none of its drafts is taken.
    let mut drafter = Drafter::Ngram(NgramDrafter::new(3, K, 0.75).unwrap());
    let sp = run(&m, BackendKind::Cpu, Sampling::Backend, &ps, Some(&mut drafter));
    assert_eq!(sp.tokens, plain.tokens);
    assert!(sp.drafted > 0, "it drafted at first: {sp:?}");
    assert!(
        sp.drafted * 2 < sp.steps,
        "{} tokens drafted in {} steps ({} accepted)",
        sp.drafted,
        sp.steps,
        sp.accepted
    );
}

#[test]
fn greedy_ngram_speculation_equals_plain_greedy_on_cpu() {
    ngram_equals_plain(BackendKind::Cpu);
}

#[test]
fn greedy_ngram_speculation_equals_plain_greedy_on_vulkan() {
    if !common::vulkan_available("greedy_ngram_speculation_equals_plain_greedy_on_vulkan") {
        return;
    }
    ngram_equals_plain(BackendKind::Vulkan);
}

#[test]
fn greedy_draft_model_speculation_equals_plain_greedy() {
    let m = smollm2();
    let ps = prompts(&m, &[OTHER, COUNTING]);
    let plain = run(&m, BackendKind::Cpu, Sampling::Backend, &ps, None);
    // The draft model: SmolLM2 again, with an f32 KV cache.
    let n_ctx = spec::cells_needed(ps.iter().map(Vec::len).max().unwrap(), STEPS, K);
    let dopts = SessionOptions { n_seq: 2, kv_dtype: DType::F32, ..opts(BackendKind::Cpu, Sampling::Cpu, n_ctx, 0) };
    let mut d = Drafter::Model(Box::new(DraftModel::new(m.clone(), dopts, K, 0.75).unwrap()));
    let sp = run(&m, BackendKind::Cpu, Sampling::Backend, &ps, Some(&mut d));
    assert_eq!(sp.tokens, plain.tokens);
    assert!(sp.accepted > 0 && sp.steps < plain.steps, "{sp:?}");
    eprintln!(
        "draft model: {} steps (plain {}), {}/{} drafts accepted",
        sp.steps, plain.steps, sp.accepted, sp.drafted
    );
}

/// The greedy continuation of `prompt`, `n` tokens, by plain steps.
fn continuation(m: &Arc<Model>, prompt: &[u32], n: usize) -> Vec<u32> {
    let mut s = Session::new(m.clone(), opts(BackendKind::Cpu, Sampling::Cpu, 64, 0), chains(&["greedy"])).unwrap();
    common::decode(&mut s, prompt, n)
}

#[test]
fn a_rejection_rolls_the_kv_cache_back() {
    let m = smollm2();
    let p = &prompts(&m, &[OTHER])[0];
    let c = continuation(&m, p, 4); // " Paris", ".", "\n", "\n"
    let new = |sampling| {
        let mut s = Session::new(m.clone(), opts(BackendKind::Cpu, sampling, 64, 4), chains(&["greedy"])).unwrap();
        assert_eq!(s.step(&[p]).unwrap().tokens, [c[0]]);
        s
    };
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        // A: a draft right at its first token, then three wrong ones.
        let mut a = new(sampling);
        let wrong = [c[2] + 1, 17, 99];
        let o = a.step_spec(&[&[c[0]]], &[&[c[1], wrong[0], wrong[1], wrong[2]]]).unwrap();
        assert_eq!((o.accepted[0], &o.tokens[0][..]), (1, &c[1..3]), "{sampling:?}");
        assert_eq!(a.positions(), [p.len() + 2], "{sampling:?}: the prompt, c0 and c1 are kept");
        // B: the same step shape with only the right draft token (padding where A had the wrong).
        let mut b = new(sampling);
        let o = b.step_spec(&[&[c[0]]], &[&[c[1]]]).unwrap();
        assert_eq!((o.accepted[0], &o.tokens[0][..]), (1, &c[1..3]));
        // The rejected tokens' cells are never attended to: the next logits are B's, bit for bit.
        let la = a.eval(&[&[c[2]]]).unwrap();
        let lb = b.eval(&[&[c[2]]]).unwrap();
        assert_eq!(la, lb, "{sampling:?}: logits after the rejection");
        assert_eq!(a.positions(), [p.len() + 3]);
        // And the next speculative step continues the greedy text.
        let o = a.step_spec(&[&[c[3]]], &[&[]]).unwrap();
        let mut plain =
            Session::new(m.clone(), opts(BackendKind::Cpu, Sampling::Cpu, 64, 0), chains(&["greedy"])).unwrap();
        plain.eval(&[p]).unwrap();
        for &t in &c[..3] {
            plain.eval(&[&[t]]).unwrap();
        }
        let next = plain.step(&[&[c[3]]]).unwrap().tokens[0];
        assert_eq!(o.tokens[0], [next]);
    }
}

/// A random model with a small vocabulary and a prompt that repeats a pattern (the n-gram
/// drafter proposes from it).
fn random_model() -> (Arc<Model>, Vec<u32>) {
    let m = Arc::new(Model::random(Config::tiny(512), DType::F32, 11).unwrap());
    let pattern = [5u32, 77, 300, 12, 9, 401];
    (m, pattern.iter().cycle().take(30).copied().collect())
}

#[test]
fn stochastic_speculation_stays_in_the_support_and_backend_equals_cpu() {
    let (m, prompt) = random_model();
    let chain = "top_k(k=3);temp(t=0.5);dist(seed=7)";
    let n = 40;
    let mut results = Vec::new();
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let o = opts(BackendKind::Cpu, sampling, spec::cells_needed(prompt.len(), n, 4), 4);
        let mut s = Session::new(m.clone(), o, chains(&[chain])).unwrap();
        // p_min 0: the drafter always follows the pattern.
        let mut d = Drafter::Ngram(NgramDrafter::new(1, 4, 0.0).unwrap());
        let g = spec::generate(&mut s, Some(&mut d), std::slice::from_ref(&prompt), n, |_| Ok(())).unwrap();
        assert!(g.drafted > 0, "{g:?}");
        results.push(g);
    }
    assert_eq!(results[0].tokens, results[1].tokens, "backend and CPU verification");
    assert_eq!((results[0].accepted, results[0].drafted), (results[1].accepted, results[1].drafted));
    assert!(results[0].accepted > 0 && results[0].accepted < results[0].drafted, "{:?}", results[0]);
    // Every token is among the target's top 3 at its position (plain evaluation of the text).
    let toks = &results[0].tokens[0];
    let mut plain =
        Session::new(m.clone(), opts(BackendKind::Cpu, Sampling::Cpu, 128, 0), chains(&["greedy"])).unwrap();
    let mut logits = plain.eval(&[&prompt]).unwrap().remove(0);
    for &t in toks {
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        assert!(order[..3].contains(&(t as usize)), "token {t} outside the top 3");
        logits = plain.eval(&[&[t]]).unwrap().remove(0);
    }
    eprintln!(
        "stochastic: {}/{} drafts accepted in {} steps",
        results[0].accepted, results[0].drafted, results[0].steps
    );
}

/// Sampled drafting: a draft model (the target's model again, sampling hotter: its `q` is close to
/// the target's `p` but not equal) samples each draft token with `top_k(k=8);temp(t=1.2);dist`
/// and gives its survivors as `q`; the target
/// verifies with `q` (`spec_verify_sampled` on the backend, `speculative::verify` with
/// `DraftProbs::Sampled` with CPU sampling). Both emit the same tokens and accept the same drafts
/// over 48 tokens, some drafts accepted and some rejected, every token in the target's top-k.
fn sampled_drafting(backend: BackendKind) -> Vec<Generation> {
    let (m, prompt) = random_model();
    let chain = "top_k(k=20);temp(t=0.8);dist(seed=7)";
    let n = 48;
    let mut results = Vec::new();
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let o = SessionOptions { draft_q_len: 8, ..opts(backend, sampling, spec::cells_needed(prompt.len(), n, 4), 4) };
        let mut s = Session::new(m.clone(), o, chains(&[chain])).unwrap();
        let dopts = SessionOptions { n_seq: 1, ..opts(BackendKind::Cpu, Sampling::Cpu, o.n_ctx, 0) };
        let dchain = Chain::parse("top_k(k=8);temp(t=1.2);dist(seed=99)").unwrap();
        let mut d = Drafter::Model(Box::new(DraftModel::sampled(m.clone(), dopts, 4, 0.0, dchain).unwrap()));
        let g = spec::generate(&mut s, Some(&mut d), std::slice::from_ref(&prompt), n, |_| Ok(())).unwrap();
        results.push(g);
    }
    assert_eq!(results[0].tokens, results[1].tokens, "backend and CPU verification");
    assert_eq!((results[0].accepted, results[0].drafted), (results[1].accepted, results[1].drafted));
    assert!(results[0].accepted > 0 && results[0].accepted < results[0].drafted, "{:?}", results[0]);
    results
}

#[test]
fn sampled_draft_model_backend_verification_equals_cpu() {
    let (m, prompt) = random_model();
    let results = sampled_drafting(BackendKind::Cpu);
    // Every token is among the target's top 20 at its position (plain evaluation of the text).
    let toks = &results[0].tokens[0];
    let mut plain =
        Session::new(m.clone(), opts(BackendKind::Cpu, Sampling::Cpu, 128, 0), chains(&["greedy"])).unwrap();
    let mut logits = plain.eval(&[&prompt]).unwrap().remove(0);
    for &t in toks {
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        assert!(order[..20].contains(&(t as usize)), "token {t} outside the top 20");
        logits = plain.eval(&[&[t]]).unwrap().remove(0);
    }
    eprintln!("sampled drafts: {}/{} accepted in {} steps", results[0].accepted, results[0].drafted, results[0].steps);
}

#[test]
fn sampled_draft_model_backend_verification_equals_cpu_on_vulkan() {
    if !common::vulkan_available("sampled_draft_model_backend_verification_equals_cpu_on_vulkan") {
        return;
    }
    let r = sampled_drafting(BackendKind::Vulkan);
    eprintln!("sampled drafts on Vulkan: {}/{} accepted in {} steps", r[0].accepted, r[0].drafted, r[0].steps);
}

#[test]
fn bad_speculative_steps_are_errors() {
    let (m, prompt) = random_model();
    let mk = |chain: &str, k| {
        let mut s =
            Session::new(m.clone(), opts(BackendKind::Cpu, Sampling::Backend, 64, k), chains(&[chain])).unwrap();
        s.step(&[&prompt]).unwrap();
        s
    };
    let e = mk("greedy", 2).step_spec(&[&[1]], &[&[1, 2, 3]]).unwrap_err().to_string();
    assert!(e.contains("draft of 3 tokens") && e.contains("n_draft_max = 2"), "{e}");
    let e = mk("greedy", 2).step_spec(&[&[1]], &[]).unwrap_err().to_string();
    assert!(e.contains("0 drafts"), "{e}");
    // Sampled drafts: one list of distributions per sequence, and on the backend a session that
    // reserves room for them (`draft_q_len`).
    let q = [vec![(1u32, 1.0f32)]];
    let e = mk("dist(seed=1)", 2).step_spec_sampled(&[&[1]], &[&[1]], &[]).unwrap_err().to_string();
    assert!(e.contains("1 drafts and 0 draft distributions"), "{e}");
    let e = mk("dist(seed=1)", 2).step_spec_sampled(&[&[1]], &[&[1]], &[&q]).unwrap_err().to_string();
    assert!(e.contains("reserve no draft distributions"), "{e}");
    // A stateful selector cannot be verified, but decodes plainly in a speculative session.
    let mut s = mk("mirostat_v2(seed=1)", 2);
    let e = s.step_spec(&[&[1]], &[&[1]]).unwrap_err().to_string();
    assert!(e.contains("mirostat_v2"), "{e}");
    let mut s = mk("mirostat_v2(seed=1)", 2);
    assert_eq!(s.step_spec(&[&[1]], &[&[]]).unwrap().tokens[0].len(), 1);
    // A drafter needs a session that verifies drafts.
    let mut d = Drafter::Ngram(NgramDrafter::new(1, 2, 0.0).unwrap());
    let mut s = mk("greedy", 0);
    let e = spec::generate(&mut s, Some(&mut d), std::slice::from_ref(&prompt), 4, |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("n_draft_max = 0"), "{e}");
    // A draft model with another vocabulary is refused.
    let other = Arc::new(Model::random(Config::tiny(300), DType::F32, 1).unwrap());
    let dopts = SessionOptions { n_seq: 1, ..opts(BackendKind::Cpu, Sampling::Cpu, 64, 0) };
    let mut d = Drafter::Model(Box::new(DraftModel::new(other, dopts, 2, 0.75).unwrap()));
    let mut s = mk("greedy", 2);
    let e = spec::generate(&mut s, Some(&mut d), std::slice::from_ref(&prompt), 4, |_| Ok(())).unwrap_err().to_string();
    assert!(e.contains("vocabulary"), "{e}");
}
