//! Steps over a range of slots (`Session::step_slots`, what a server's continuous batching runs):
//! a sequence's tokens do not depend on which slot holds it, which other slots share its steps,
//! how its prompt was chunked, or what its slot held before; on both sampling paths.

use graph::DType;
use runner::session::{SlotWork, SlotsOutcome};
use runner::{BackendKind, Config, Model, Sampling, Session, SessionOptions};
use sampling::{Chain, Token};
use std::sync::Arc;

mod common;

fn model() -> Arc<Model> {
    Arc::new(Model::random(Config::tiny(3000), DType::F16, 21).unwrap())
}

const CHAIN: &str = "penalties(last_n=16,repeat=1.3);top_k(k=40);temp(t=1.5);dist(seed=77)";
const OTHER: &str = "top_k(k=5);temp(t=0.7);dist(seed=3)";

fn opts(n_seq: usize, sampling: Sampling) -> SessionOptions {
    SessionOptions { n_seq, n_ctx: 64, kv_dtype: DType::F16, threads: 2, sampling, ..Default::default() }
}

fn tokens(out: &SlotsOutcome) -> Vec<Option<Token>> {
    out.results.iter().map(|r| r.as_ref().map(|r| r.as_ref().unwrap().token)).collect()
}

/// The chain's 12 tokens after `prompt`, alone in a one-slot session.
fn alone(m: &Arc<Model>, sampling: Sampling, prompt: &[Token]) -> Vec<Token> {
    let mut s = Session::new(Arc::clone(m), opts(1, sampling), vec![Chain::parse(CHAIN).unwrap()]).unwrap();
    common::decode(&mut s, prompt, 12)
}

#[test]
fn a_sequence_decodes_the_same_in_any_slot_beside_any_others() {
    let m = model();
    let prompt: Vec<Token> = (0..11).map(|i| (i * 37 + 5) % 3000).collect();
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let want = alone(&m, sampling, &prompt);
        let greedy = Chain::parse("greedy").unwrap();
        let mut s = Session::new(Arc::clone(&m), opts(4, sampling), vec![greedy; 4]).unwrap();
        // Slot 0 runs another chain; slot 1 stays idle; slot 2 takes the sequence, its prompt in
        // chunks of 4 while slot 0 decodes.
        s.set_chain(0, Chain::parse(OTHER).unwrap(), 0).unwrap();
        s.set_chain(2, Chain::parse(CHAIN).unwrap(), 0).unwrap();
        let other_prompt: [Token; 3] = [9, 8, 7];
        let first0 = tokens(&s.step_slots(0, &[SlotWork::Sample(&other_prompt)]).unwrap())[0].unwrap();
        let mut last0 = first0;
        let mut got: Vec<Token> = Vec::new();
        for (i, chunk) in prompt.chunks(4).enumerate() {
            let last = i == prompt.len().div_ceil(4) - 1;
            let w = if last { SlotWork::Sample(chunk) } else { SlotWork::Feed(chunk) };
            let out = s.step_slots(2, &[w]).unwrap();
            if last {
                got.push(tokens(&out)[0].unwrap());
            } else {
                assert_eq!(out.bytes_read, 0, "a prompt chunk reads nothing back");
            }
            // Slot 0 decodes in between, over slots 0..3 with slot 1 idle and slot 2 padding.
            let out = s.step_slots(0, &[SlotWork::Sample(&[last0]), SlotWork::Idle, SlotWork::Idle]).unwrap();
            last0 = tokens(&out)[0].unwrap();
        }
        while got.len() < 12 {
            let a = [last0];
            let b = [*got.last().unwrap()];
            let out = s.step_slots(0, &[SlotWork::Sample(&a), SlotWork::Idle, SlotWork::Sample(&b)]).unwrap();
            let t = tokens(&out);
            assert_eq!(t[1], None, "an idle slot samples nothing");
            last0 = t[0].unwrap();
            got.push(t[2].unwrap());
        }
        assert_eq!(got, want, "{sampling:?}: slot 2 beside slot 0");
        assert_eq!(s.positions()[1], 0, "an idle slot does not move");

        // The slot reused by a new sequence with the same chain: the same tokens again (fresh
        // sampler state, penalties included), now in slot 3 beside nothing.
        s.truncate(2, 0).unwrap();
        s.set_chain(3, Chain::parse(CHAIN).unwrap(), 0).unwrap();
        s.set_chain(2, Chain::parse(CHAIN).unwrap(), 0).unwrap();
        let again = tokens(&s.step_slots(2, &[SlotWork::Sample(&prompt)]).unwrap())[0].unwrap();
        let mut got2 = vec![again];
        while got2.len() < 12 {
            let b = [*got2.last().unwrap()];
            got2.push(tokens(&s.step_slots(2, &[SlotWork::Sample(&b)]).unwrap())[0].unwrap());
        }
        assert_eq!(got2, want, "{sampling:?}: slot 2 reused");
    }
}

#[test]
fn slot_errors_are_values() {
    let m = model();
    let greedy = Chain::parse("greedy").unwrap();
    let mut s = Session::new(Arc::clone(&m), opts(2, Sampling::Backend), vec![greedy; 2]).unwrap();
    let e = s.step_slots(1, &[SlotWork::Idle, SlotWork::Idle]).unwrap_err();
    assert!(e.to_string().contains("slots 1..3"), "{e}");
    let e = s.set_chain(2, Chain::parse("greedy").unwrap(), 0).unwrap_err();
    assert!(e.to_string().contains("sequence 2"), "{e}");
    let e = s.step_slots(0, &[SlotWork::Sample(&[3000])]).unwrap_err();
    assert!(e.to_string().contains("token 3000"), "{e}");
}

#[test]
fn logprobs_come_back_on_both_paths_alike() {
    let m = model();
    let mut per_path = Vec::new();
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let greedy = Chain::parse("greedy").unwrap();
        let mut s = Session::new(Arc::clone(&m), opts(2, sampling), vec![greedy.clone(); 2]).unwrap();
        s.set_chain(1, greedy, 3).unwrap();
        let out = s.step_slots(0, &[SlotWork::Sample(&[1, 2, 3]), SlotWork::Sample(&[4, 5])]).unwrap();
        let r0 = out.results[0].as_ref().unwrap().as_ref().unwrap();
        let r1 = out.results[1].as_ref().unwrap().as_ref().unwrap();
        assert!(r0.logprobs.is_none());
        let lp = r1.logprobs.clone().unwrap();
        assert_eq!(lp.len(), 3);
        assert_eq!(lp[0].0, r1.token, "greedy takes the most likely token");
        assert!(lp.windows(2).all(|w| w[0].1 >= w[1].1) && lp[0].1 <= 0.0);
        per_path.push(lp);
    }
    for (a, b) in per_path[0].iter().zip(&per_path[1]) {
        assert_eq!(a.0, b.0);
        assert!((a.1 - b.1).abs() < 1e-4, "{a:?} vs {b:?}");
    }
}

/// The chosen token's own log-probability is exact wherever it ranks, and the same on both paths:
/// a hot draw (far outside the top 3 read back) and a token forced by a bias, against an f64
/// log-softmax of the logits the same step computes; and so is its rank, against a count.
#[test]
fn the_chosen_tokens_logprob_is_exact_on_both_paths() {
    let m = model();
    let (a, b): ([Token; 3], [Token; 2]) = ([1, 2, 3], [4, 5]);
    let mut reference =
        Session::new(Arc::clone(&m), opts(2, Sampling::Cpu), vec![Chain::parse("greedy").unwrap(); 2]).unwrap();
    let rows = reference.eval(&[&a, &b]).unwrap();
    let log_softmax = |row: &[f32], t: Token| {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
        let lse = max + row.iter().map(|&x| (f64::from(x) - max).exp()).sum::<f64>().ln();
        f64::from(row[t as usize]) - lse
    };
    // The least likely token of slot 1's row, forced.
    let low = (0..3000).min_by(|&x, &y| rows[1][x].total_cmp(&rows[1][y])).unwrap() as Token;
    let mut per_path = Vec::new();
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let greedy = Chain::parse("greedy").unwrap();
        let mut s = Session::new(Arc::clone(&m), opts(2, sampling), vec![greedy.clone(); 2]).unwrap();
        s.set_chain(0, Chain::parse("temp(t=60);dist(seed=9)").unwrap(), 3).unwrap();
        s.set_chain(1, Chain::parse(&format!("logit_bias({low}=100);greedy")).unwrap(), 3).unwrap();
        let out = s.step_slots(0, &[SlotWork::Sample(&a), SlotWork::Sample(&b)]).unwrap();
        let mut got = Vec::new();
        for (i, r) in out.results.iter().enumerate() {
            let r = r.as_ref().unwrap().as_ref().unwrap();
            let lp = r.token_logprob.expect("asked for log-probabilities");
            let top = r.logprobs.as_ref().unwrap();
            assert!(!top.iter().any(|e| e.0 == r.token), "{sampling:?}: slot {i}'s token {} is in its top 3", r.token);
            let want = log_softmax(&rows[i], r.token);
            assert!((f64::from(lp) - want).abs() < 1e-4, "{sampling:?}: slot {i}: {lp} vs {want}");
            // Its rank: 1 + the logits strictly above its own, counted here one by one.
            let own = rows[i][r.token as usize];
            let mut above = 0;
            for &x in &rows[i] {
                if x > own {
                    above += 1;
                }
            }
            assert_eq!(r.token_rank, Some(above + 1), "{sampling:?}: slot {i}'s rank");
            got.push((r.token, lp));
        }
        assert_eq!(got[1].0, low);
        per_path.push(got);
    }
    assert_eq!(
        per_path[0].iter().map(|e| e.0).collect::<Vec<_>>(),
        per_path[1].iter().map(|e| e.0).collect::<Vec<_>>()
    );
    for (x, y) in per_path[0].iter().zip(&per_path[1]) {
        assert!((x.1 - y.1).abs() < 1e-5, "{x:?} vs {y:?}");
    }
}

/// Attention reads the cells in use, in power-of-two buckets (`kv::attended_cells`): a token's
/// logits are the same bits whether its step reads 32 cells (alone) or 256 (beside a sequence at
/// position 189).
#[test]
fn the_cells_attended_do_not_change_a_tokens_logits() {
    let m = model();
    let greedy = Chain::parse("greedy").unwrap();
    let p0: Vec<Token> = (0..11).map(|i| (i * 37 + 5) % 3000).collect();
    let p1: Vec<Token> = (0..189).map(|i| (i * 13 + 1) % 3000).collect();
    let q1: Vec<Token> = (0..11).map(|i| (i * 7 + 3) % 3000).collect();
    let o = |n| SessionOptions { n_ctx: 256, ..opts(n, Sampling::Cpu) };
    let mut alone = Session::new(Arc::clone(&m), o(2), vec![greedy.clone(); 2]).unwrap();
    let a = alone.eval(&[&p0, &q1]).unwrap();
    let mut beside = Session::new(Arc::clone(&m), o(2), vec![greedy; 2]).unwrap();
    beside.eval(&[&[1], &p1]).unwrap();
    beside.truncate(0, 0).unwrap();
    let b = beside.eval(&[&p0, &q1]).unwrap();
    assert_eq!(runner::kv::attended_cells(11, 256), 32);
    assert_eq!(runner::kv::attended_cells(200, 256), 256);
    let diff = a[0].iter().zip(&b[0]).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    assert!(diff == 0.0, "max difference {diff}");
}

/// A ragged step (each slot its own number of tokens, unpadded: a server's prompt chunks beside
/// the others' decode tokens, `kv::StepInputs::ragged`) gives a sequence the same tokens and
/// log-probabilities as running alone, on both sampling paths: its prompt fed in chunks of 4 in
/// the steps where slot 0 decodes one token and slot 3 feeds chunks of 3 (three runs of equal
/// widths, attending separately). (This model's F16 weights give a few ulps between one-row and
/// several-row steps, see `serve::engine`; the quantized SmolLM2 gives the same bits over HTTP,
/// `serve.rs`'s `the_same_tokens_alone_or_among_others`.)
#[test]
fn ragged_steps_give_each_token_the_same_tokens() {
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        ragged_against_alone(BackendKind::Cpu, sampling);
    }
}

/// [`ragged_steps_give_each_token_the_same_tokens`] on Vulkan (lavapipe in CI): the runs'
/// views of the queries and the mask, and their results written into one tensor.
#[test]
fn ragged_steps_give_each_token_the_same_tokens_on_vulkan() {
    if !common::vulkan_available("ragged_steps_give_each_token_the_same_tokens_on_vulkan") {
        return;
    }
    ragged_against_alone(BackendKind::Vulkan, Sampling::Backend);
}

fn ragged_against_alone(backend: BackendKind, sampling: Sampling) {
    let m = model();
    let opts = |n| SessionOptions { backend, ..opts(n, sampling) };
    let prompt: Vec<Token> = (0..11).map(|i| (i * 37 + 5) % 3000).collect();
    let third: Vec<Token> = (0..9).map(|i| (i * 11 + 2) % 3000).collect();
    let result = |out: &SlotsOutcome, i: usize| {
        let r = out.results[i].as_ref().unwrap().as_ref().unwrap();
        (r.token, r.token_logprob.unwrap())
    };
    {
        let chain = || Chain::parse(CHAIN).unwrap();
        let mut one = Session::new(Arc::clone(&m), opts(1), vec![chain()]).unwrap();
        one.set_chain(0, chain(), 1).unwrap();
        let mut want = vec![result(&one.step_slots(0, &[SlotWork::Sample(&prompt)]).unwrap(), 0)];
        while want.len() < 12 {
            let b = [want.last().unwrap().0];
            want.push(result(&one.step_slots(0, &[SlotWork::Sample(&b)]).unwrap(), 0));
        }

        let greedy = Chain::parse("greedy").unwrap();
        let mut s = Session::new(Arc::clone(&m), opts(4), vec![greedy; 4]).unwrap();
        s.set_chain(0, Chain::parse(OTHER).unwrap(), 0).unwrap();
        s.set_chain(2, chain(), 1).unwrap();
        s.set_chain(3, Chain::parse(OTHER).unwrap(), 0).unwrap();
        let mut last0 = tokens(&s.step_slots(0, &[SlotWork::Sample(&[9, 8, 7])]).unwrap())[0].unwrap();
        let mut last3 = None;
        let mut got = Vec::new();
        let chunks: Vec<&[Token]> = prompt.chunks(4).collect();
        let thirds: Vec<&[Token]> = third.chunks(3).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let w2 = if i + 1 == chunks.len() { SlotWork::Sample(chunk) } else { SlotWork::Feed(chunk) };
            let w3 = if i + 1 == thirds.len() { SlotWork::Sample(thirds[i]) } else { SlotWork::Feed(thirds[i]) };
            let out = s.step_slots(0, &[SlotWork::Sample(&[last0]), SlotWork::Idle, w2, w3]).unwrap();
            assert_eq!(out.n_eval, 1 + chunk.len() + thirds[i].len(), "unpadded: only the slots' own tokens");
            last0 = tokens(&out)[0].unwrap();
            if matches!(w2, SlotWork::Sample(_)) {
                got.push(result(&out, 2));
            }
            if matches!(w3, SlotWork::Sample(_)) {
                last3 = tokens(&out)[3];
            }
        }
        assert!(last3.is_some(), "slot 3's prompt ended in one of the ragged steps");
        while got.len() < 12 {
            let (a, b) = ([last0], [got.last().unwrap().0]);
            let out = s.step_slots(0, &[SlotWork::Sample(&a), SlotWork::Idle, SlotWork::Sample(&b)]).unwrap();
            last0 = tokens(&out)[0].unwrap();
            got.push(result(&out, 2));
        }
        let tokens_of = |v: &[(Token, f32)]| v.iter().map(|e| e.0).collect::<Vec<_>>();
        assert_eq!(tokens_of(&got), tokens_of(&want), "{backend:?}, {sampling:?}: slot 2's tokens");
        for (g, w) in got.iter().zip(&want) {
            assert!((g.1 - w.1).abs() < 1e-4, "{backend:?}, {sampling:?}: log-probabilities {g:?} vs {w:?}");
        }
    }
}
