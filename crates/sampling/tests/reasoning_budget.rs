//! The reasoning budget's state machine against llama.cpp's own cases
//! (`tests/test-reasoning-budget.cpp`: when forcing starts and ends, clones mid-count and
//! mid-force, the manual force, the recorded end sequence, UTF-8 completeness), its UTF-8 wait
//! with a vocabulary, its SPEC and its errors. Its backend form runs in the shared
//! `vocab_cases::HISTORY_CHAINS` (CPU backend and Vulkan) and in the verification scenarios of
//! `backend_tail.rs` (drafted outputs).

use sampling::samplers::reasoning_budget::utf8_is_complete;
use sampling::samplers::{BudgetState, ReasoningBudget};
use sampling::{Candidates, Chain, Sampler, SamplingError, TokenData};
use std::sync::Arc;

type Seqs = Vec<Vec<u32>>;

/// The tokens left finite when the stage is applied to llama.cpp's test row (`logit = ln(i + 1)`
/// for ids `0..=max`), as llama.cpp's helper applies it to a `llama_token_data_array`.
fn finite_after_apply(s: &mut ReasoningBudget, max: u32) -> Vec<u32> {
    let list: Vec<TokenData> = (0..=max).map(|i| TokenData { id: i, logit: ((i + 1) as f32).ln(), p: 0.0 }).collect();
    let mut cur = Candidates::from_list(list, max as usize + 1).unwrap();
    s.apply(&mut cur).unwrap();
    cur.output().unwrap().candidates.iter().map(|t| t.id).collect()
}

/// The forced token (the only finite one), as llama.cpp's `get_forced_token`.
fn forced(s: &mut ReasoningBudget, max: u32) -> u32 {
    let f = finite_after_apply(s, max);
    assert_eq!(f.len(), 1, "not forcing exactly one token: {f:?}");
    f[0]
}

/// llama.cpp's `test_reasoning_budget`: feeds `sequence` (apply, then accept, at each position)
/// and returns the first and last positions where exactly one token was left (forcing), stopping
/// where forcing stopped.
fn force_span(
    sequence: &[u32],
    start: &[Vec<u32>],
    end: &[Vec<u32>],
    forced_tokens: &[u32],
    budget: i64,
    initial: BudgetState,
) -> Option<(usize, usize)> {
    let max = sequence
        .iter()
        .chain(start.iter().flatten())
        .chain(end.iter().flatten())
        .chain(forced_tokens)
        .copied()
        .max()
        .unwrap();
    let mut s = ReasoningBudget::new(budget, start, end, forced_tokens, initial, None).unwrap();
    let mut span: Option<(usize, usize)> = None;
    for (i, &t) in sequence.iter().enumerate() {
        let n_finite = finite_after_apply(&mut s, max).len();
        s.accept(t);
        if n_finite == 1 {
            span = Some((span.map_or(i, |sp| sp.0), i));
        } else if span.is_some() {
            break;
        }
    }
    span
}

fn seqs(s: &[&[u32]]) -> Seqs {
    s.iter().map(|x| x.to_vec()).collect()
}

#[test]
fn llama_cpp_state_machine_cases() {
    use BudgetState::*;
    // Test 1: natural end before the budget is spent: never forced.
    assert_eq!(force_span(&[100, 50, 51, 101, 52], &seqs(&[&[100]]), &seqs(&[&[101]]), &[102], 5, Idle), None);
    // Test 2: budget 2 spent by the accept at i = 2: forcing at i = 3 and 4 (102, 101), then done.
    assert_eq!(
        force_span(&[100, 50, 51, 52, 53], &seqs(&[&[100]]), &seqs(&[&[101]]), &[102, 101], 2, Idle),
        Some((3, 4))
    );
    // Test 3: counting with budget 0 is forcing from the start.
    assert_eq!(
        force_span(&[100, 50, 51, 52], &seqs(&[&[100]]), &seqs(&[&[101]]), &[102, 101], 0, Counting),
        Some((0, 1))
    );
    // Test 4: nothing configured: llama.cpp's sampler never forces; here it is an error (below).
    // Test 5: counting from the start with budget 2: forcing at i = 2 and 3.
    assert_eq!(
        force_span(&[50, 51, 52, 53], &seqs(&[&[100]]), &seqs(&[&[101]]), &[102, 101], 2, Counting),
        Some((2, 3))
    );
    // Test 6: a second block re-arms the budget after a natural end: forcing at i = 6 and 7.
    assert_eq!(
        force_span(&[100, 50, 101, 100, 60, 61, 62, 63], &seqs(&[&[100]]), &seqs(&[&[101]]), &[102, 101], 2, Idle),
        Some((6, 7))
    );
    // Test 7: the second of two start sequences (two tokens) opens the block.
    assert_eq!(
        force_span(&[110, 111, 50, 51, 52, 53], &seqs(&[&[100], &[110, 111]]), &seqs(&[&[101]]), &[102, 101], 2, Idle),
        Some((4, 5))
    );
    // Test 8: the second of two end sequences (two tokens) closes it: never forced.
    assert_eq!(
        force_span(&[100, 50, 103, 104, 52], &seqs(&[&[100]]), &seqs(&[&[101], &[103, 104]]), &[102, 101], 5, Idle),
        None
    );
}

#[test]
fn llama_cpp_clone_force_and_end_match_cases() {
    use BudgetState::*;
    let (start, end) = (seqs(&[&[100]]), seqs(&[&[101]]));
    // Clone mid-count: the clone keeps the remaining budget.
    let mut s = ReasoningBudget::new(2, &start, &end, &[102, 101], Idle, None).unwrap();
    s.accept(100);
    s.accept(50);
    let mut c = s.clone();
    c.accept(51);
    assert_eq!(forced(&mut c, 102), 102);
    // Clone mid-force: the clone keeps the force position.
    let mut s = ReasoningBudget::new(0, &start, &end, &[102, 101], Forcing, None).unwrap();
    assert_eq!(forced(&mut s, 102), 102);
    s.accept(102);
    let mut c = s.clone();
    assert_eq!(forced(&mut c, 102), 101);

    // The manual force: from counting it forces the whole sequence, then done.
    let mut s = ReasoningBudget::new(5, &start, &end, &[102, 101], Idle, None).unwrap();
    s.accept(100);
    s.accept(50);
    assert_eq!(s.state(), Counting);
    assert!(s.force());
    assert_eq!(s.state(), Forcing);
    assert_eq!(forced(&mut s, 102), 102);
    s.accept(102);
    assert_eq!(forced(&mut s, 102), 101);
    s.accept(101);
    assert_eq!(s.state(), Done);
    // From idle and from done it does nothing.
    let mut s = ReasoningBudget::new(5, &start, &end, &[102, 101], Idle, None).unwrap();
    assert!(!s.force());
    assert_eq!(s.state(), Idle);
    s.accept(100);
    s.accept(101);
    assert_eq!(s.state(), Done);
    assert!(!s.force());
    assert_eq!(s.state(), Done);
    // From forcing it does nothing, and does not rewind.
    let mut s = ReasoningBudget::new(0, &start, &end, &[102, 101], Forcing, None).unwrap();
    s.accept(102);
    assert!(!s.force());
    assert_eq!(forced(&mut s, 102), 101);

    // The end sequence that closed the block; a new block clears it.
    let end2 = seqs(&[&[101], &[103, 104]]);
    let mut s = ReasoningBudget::new(5, &start, &end2, &[102, 101], Idle, None).unwrap();
    assert_eq!(s.end_match(), None);
    for t in [100, 50, 103, 104] {
        s.accept(t);
    }
    assert_eq!(s.end_match(), Some(&[103, 104][..]));
    s.accept(100);
    assert_eq!(s.end_match(), None);
    // Overlapping end sequences: the longest ending at the token.
    let mut s = ReasoningBudget::new(5, &start, &seqs(&[&[104], &[103, 104]]), &[102, 104], Idle, None).unwrap();
    for t in [100, 103, 104] {
        s.accept(t);
    }
    assert_eq!(s.end_match(), Some(&[103, 104][..]));
    // Forcing records the end sequence the forced tokens end with, only at their end.
    let mut s = ReasoningBudget::new(0, &start, &end2, &[102, 103, 104], Forcing, None).unwrap();
    s.accept(102);
    s.accept(103);
    assert_eq!(s.end_match(), None);
    s.accept(104);
    assert_eq!(s.end_match(), Some(&[103, 104][..]));
    // Forced tokens that end with no end sequence record none.
    let mut s = ReasoningBudget::new(0, &start, &end2, &[102], Forcing, None).unwrap();
    s.accept(102);
    assert_eq!(s.state(), Done);
    assert_eq!(s.end_match(), None);
}

#[test]
fn llama_cpp_utf8_completeness() {
    for s in [&b"hello"[..], b"", b"\xC2\xA0", b"\xE2\x80\x9C", b"\xF0\x9F\x98\x80", b"abc\xC3\xA9", b"hello\xC3\xA9"] {
        assert!(utf8_is_complete(s), "{s:?}");
    }
    for s in [&b"\xC2"[..], b"\xE2\x80", b"\xE2", b"\xF0\x9F\x98", b"\xF0\x9F", b"\xF0", b"\x80", b"hello\xC3"] {
        assert!(!utf8_is_complete(s), "{s:?}");
    }
}

#[test]
fn a_spent_budget_waits_for_a_complete_character_before_forcing() {
    // Tokens 2 and 3 are the two halves of "é" (C3 A9); 4 opens the block, 5 closes it.
    let pieces: Vec<Vec<u8>> =
        vec![b"a".to_vec(), b"b".to_vec(), vec![0xC3], vec![0xA9], b"<t>".to_vec(), b"</t>".to_vec()];
    let vocab = Arc::new(grammar::Vocab::new(pieces, &[]));
    let mk = || ReasoningBudget::new(2, &[vec![4]], &[vec![5]], &[], BudgetState::Idle, Some(vocab.clone())).unwrap();
    let mut s = mk();
    for t in [4, 0, 2] {
        s.accept(t);
    }
    // The budget ran out on half a character: the next token may finish it.
    assert_eq!(s.state(), BudgetState::WaitingUtf8);
    assert_eq!(finite_after_apply(&mut s, 5).len(), 6);
    // llama.cpp tests each token's own text: the lone continuation byte that finishes the
    // character is not complete by itself, so it waits on for a token that is.
    s.accept(3);
    assert_eq!(s.state(), BudgetState::WaitingUtf8);
    s.accept(1);
    assert_eq!(s.state(), BudgetState::Forcing);
    assert_eq!(forced(&mut s, 5), 5, "forced defaults to the first end sequence");
    s.accept(5);
    assert_eq!(s.state(), BudgetState::Done);
    // The end sequence while waiting ends the block by itself.
    let mut s = mk();
    for t in [4, 0, 2, 5] {
        s.accept(t);
    }
    assert_eq!((s.state(), s.end_match()), (BudgetState::Done, Some(&[5u32][..])));
    // Without a vocabulary every token is complete (llama.cpp's `vocab = nullptr`).
    let mut s = ReasoningBudget::new(2, &[vec![4]], &[vec![5]], &[], BudgetState::Idle, None).unwrap();
    for t in [4, 0, 2] {
        s.accept(t);
    }
    assert_eq!(s.state(), BudgetState::Forcing);
}

#[test]
fn the_spec_stage_forces_on_the_vocabulary_view_and_an_unlimited_budget_never_does() {
    // budget=1, counting from the start: after one token, 7 then 8 are forced whatever the logits.
    let mut chain = Chain::parse("reasoning_budget(budget=1,start=3,end=7 8,state=counting);greedy").unwrap();
    let row = [0.0f32, 5.0, 1.0, 2.0, 0.5, 0.0, 0.0, -3.0, -4.0];
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(chain.sample(&row).unwrap()); // sample accepts
    }
    assert_eq!(got, [1, 7, 8, 1, 1]);
    // An unlimited budget (the default -1) tracks blocks but never forces.
    let mut chain = Chain::parse("reasoning_budget(start=1,end=7);greedy").unwrap();
    for _ in 0..5 {
        assert_eq!(chain.sample(&row).unwrap(), 1);
    }
    // A reset returns to the state it was made in (counting), with the whole budget.
    let mut chain = Chain::parse("reasoning_budget(budget=1,start=3,end=7 8,state=counting);greedy").unwrap();
    chain.accept(1);
    chain.reset();
    assert_eq!(chain.sample(&row).unwrap(), 1);
}

#[test]
fn bad_budgets_are_errors_naming_the_stage() {
    for (spec, what) in [
        ("reasoning_budget(budget=4,start=3)", "end"),
        ("reasoning_budget(budget=4,end=3)", "start"),
        ("reasoning_budget(budget=4,start=3,end=| )", "end"),
        ("reasoning_budget(budget=4,start=3,end=5,state=done)", "state"),
        ("reasoning_budget(budget=1.5,start=3,end=5)", "budget"),
        ("reasoning_budget(budget=4,start=3,end=5 x)", "end"),
        ("reasoning_budget(n=4,start=3,end=5)", "n"),
    ] {
        match Chain::parse(spec) {
            Err(SamplingError::Spec { stage_index: 0, stage, message }) => {
                assert_eq!(stage, "reasoning_budget", "{spec}");
                assert!(message.contains(what), "{spec}: {message}");
            }
            other => panic!("{spec}: {other:?}"),
        }
    }
}

#[test]
fn an_unlimited_budget_forced_by_hand_forces_on_the_backend_too() {
    use graph::{DType, Graph};
    use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
    // An unlimited budget counting from the start: greedy takes token 1 until `force()`, then the
    // end sequence 7, 8, on the CPU backend's tail as in the CPU chain.
    let mut stage = ReasoningBudget::new(-1, &[vec![3]], &[vec![7, 8]], &[], BudgetState::Counting, None).unwrap();
    let chain = |s: &ReasoningBudget| Chain::new().with(s.clone()).with(sampling::samplers::Greedy::new());
    let mut seqs = Sequences::new(1).unwrap();
    seqs.set(SeqId(0), SeqConfig::new(chain(&stage)));
    let mut g = Graph::new();
    let logits = g.input("logits", DType::F32, &[9, 1]).unwrap();
    let cpu = cpu::CpuBackend::new();
    let mut tail = Tail::attach(&mut g, logits, &[(SeqId(0), 0)], &seqs, &cpu).unwrap();
    assert_eq!(tail.placement()[0].1, "+reasoning_budget +greedy");
    let mut sched = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
    sched.plan(&g).unwrap();
    let row = [0.0f32, 5.0, 1.0, 2.0, 0.5, 0.0, 0.0, -3.0, -4.0];
    let mut got = Vec::new();
    for step in 0..5 {
        if step == 2 {
            assert!(stage.force());
            seqs.set(SeqId(0), SeqConfig::new(chain(&stage)));
        }
        sched.set_input_f32(logits, &row).unwrap();
        tail.set_inputs(&mut sched, &mut seqs).unwrap();
        sched.compute().unwrap();
        let t = tail.sample(&mut sched, &mut seqs).unwrap().token(0).unwrap();
        tail.accept(&mut seqs, SeqId(0), &[t]).unwrap();
        stage.accept(t);
        got.push(t);
    }
    assert_eq!(got, [1, 1, 7, 8, 1]);
}
