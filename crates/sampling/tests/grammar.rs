//! The grammar stage (`samplers/grammar.rs`): what it masks on the vocabulary and on a list, its
//! two modes, end-of-generation tokens, refused tokens and steps with nothing allowed, and the
//! backend form against the CPU chain in a mixed batch.

mod grammar_cases;

use grammar_cases::{EOS, JSON, bytes, stage, vocab};
use sampling::samplers::{GrammarMode, Greedy, TopK};
use sampling::{Candidates, Chain, Sampler, SamplingError};

/// A row over `v` tokens whose logits fall with the id (token 0 the most likely).
fn falling(v: usize) -> Vec<f32> {
    (0..v).map(|i| -(i as f32) * 0.01).collect()
}

#[test]
fn the_mask_keeps_exactly_the_tokens_the_grammar_allows() {
    let voc = vocab(600);
    let mut s = stage(JSON, &voc, GrammarMode::First);
    for (i, &t) in bytes("{\"name\": [1, ").iter().enumerate() {
        let row = falling(voc.len());
        let mut cur = Candidates::from_row(&row).unwrap();
        s.apply(&mut cur).unwrap();
        let out = cur.output().unwrap();
        let mask = s.matcher().mask().unwrap();
        let mut kept: Vec<u32> = out.candidates.iter().map(|c| c.id).collect();
        kept.sort_unstable();
        let want: Vec<u32> = (0..voc.len() as u32).filter(|&t| mask[t as usize / 32] >> (t % 32) & 1 == 1).collect();
        assert_eq!(kept, want, "after {i} tokens");
        for &k in &kept {
            assert!(s.matcher().allows(k).unwrap());
        }
        s.check_accept(t).unwrap();
        s.accept(t);
    }
}

#[test]
fn on_a_list_the_grammar_masks_among_the_candidates() {
    let voc = vocab(600);
    // After `{`, a key's quote or a space; the top-k holds tokens the grammar rejects.
    let mut chain = Chain::new().with(TopK::new(50)).with(stage(JSON, &voc, GrammarMode::First)).with(Greedy::new());
    chain.try_accept(u32::from(b'{')).unwrap();
    let mut row = falling(voc.len());
    // Inside the top 50, below the empty token 0 and control bytes, which the grammar rejects, and
    // above the newline (10), which it allows as a space.
    row[u32::from(b'"') as usize] = -0.05;
    let out = chain.run(&row).unwrap();
    assert_eq!(out.selected, Some(u32::from(b'"')));
    assert!(out.candidates.iter().all(|c| chain.stages()[1].allows(c.id).unwrap() || c.id == u32::from(b'"')));
    // Nothing in the top 50 that the grammar allows: a clear error, not a rejected token.
    let mut chain = Chain::new().with(TopK::new(5)).with(stage(JSON, &voc, GrammarMode::First)).with(Greedy::new());
    let e = chain.run(&falling(voc.len())).unwrap_err();
    assert!(matches!(e, SamplingError::Grammar { .. }), "{e}");
    assert!(e.to_string().contains("allows none of the candidates"), "{e}");
}

#[test]
fn end_of_generation_is_allowed_only_where_the_grammar_is_complete() {
    let voc = vocab(400);
    let mut row = falling(voc.len());
    row[EOS as usize] = 10.0;
    let mut chain = Chain::new().with(stage(JSON, &voc, GrammarMode::First)).with(Greedy::new());
    for t in bytes("{\"a\":1") {
        assert_ne!(chain.clone().sample(&row).unwrap(), EOS);
        chain.try_accept(t).unwrap();
    }
    assert_ne!(chain.clone().sample(&row).unwrap(), EOS, "the object is still open");
    chain.try_accept(u32::from(b'}')).unwrap();
    assert_eq!(chain.clone().sample(&row).unwrap(), EOS);
    // Accepting it changes nothing: it is allowed again.
    chain.try_accept(EOS).unwrap();
    assert_eq!(chain.sample(&row).unwrap(), EOS);
}

#[test]
fn a_token_the_grammar_rejects_is_refused_and_changes_nothing() {
    let voc = vocab(400);
    let mut chain = Chain::new().with(stage(JSON, &voc, GrammarMode::First)).with(Greedy::new());
    chain.try_accept(u32::from(b'{')).unwrap();
    let before = chain.stages()[0].allows(u32::from(b'"')).unwrap();
    let e = chain.try_accept(u32::from(b'x')).unwrap_err();
    assert!(e.to_string().contains("rejects token 120"), "{e}");
    assert!(before && chain.stages()[0].allows(u32::from(b'"')).unwrap());
    chain.try_accept(u32::from(b'"')).unwrap();
}

#[test]
fn a_step_with_no_allowed_token_is_an_error_for_that_sequence() {
    // No token of this vocabulary can start a `c`.
    let voc = std::sync::Arc::new(grammar::Vocab::new(vec![b"a".to_vec(), b"b".to_vec(), b"<eos>".to_vec()], &[2]));
    let mut chain = Chain::new().with(stage("root ::= \"c\"", &voc, GrammarMode::First)).with(Greedy::new());
    let e = chain.sample(&falling(voc.len())).unwrap_err();
    assert!(e.to_string().contains("allows no token"), "{e}");
}

#[test]
fn optimistic_mode_gives_the_grammar_first_tokens_on_deterministic_chains() {
    let voc = vocab(1000);
    // (A top-k so short that it could hold no allowed token would make both modes fail alike.)
    for top_k in [0, 400] {
        let chain = |mode| {
            let c = Chain::new();
            let c = if top_k > 0 { c.with(TopK::new(top_k)) } else { c };
            c.with(stage(JSON, &voc, mode)).with(Greedy::new())
        };
        let (mut first, mut opt) = (chain(GrammarMode::First), chain(GrammarMode::Optimistic));
        let mut rejected = 0;
        for step in 0..60 {
            let row = grammar_cases::logits(voc.len(), step, 0);
            let unconstrained = Chain::new().with(Greedy::new()).sample(&row).unwrap();
            // A step at which the top-k holds no allowed token fails alike in both modes.
            let (a, b) = match (first.sample(&row), opt.sample(&row)) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(a), Err(b)) if a == b && step > 10 => break,
                (a, b) => panic!("top_k {top_k}, step {step}: {a:?} vs {b:?}"),
            };
            assert_eq!(a, b, "top_k {top_k}, step {step}");
            rejected += usize::from(unconstrained != a);
            if a == EOS {
                break;
            }
        }
        assert!(rejected > 5, "the rows must make the optimistic pass fail often ({rejected})");
    }
}

#[test]
fn backend_tokens_equal_the_cpu_chain_in_a_mixed_batch() {
    let m = grammar_cases::mixed_batch(Box::new(cpu::CpuBackend::new()), None, 50);
    grammar_cases::check_mixed(&m);
    // Row 0's mask is read through by its top-k (the masked row never written).
    assert_eq!(m.masked_top_k, 1, "{m:?}");
}

#[test]
fn stages_parsed_with_one_context_share_the_grammar_cache() {
    use sampling::chain_spec::{SpecContext, parse_with};
    let dir = std::env::temp_dir().join(format!("sampling-grammar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, other) = (dir.join("json.gbnf"), dir.join("other.gbnf"));
    std::fs::write(&json, JSON).unwrap();
    std::fs::write(&other, "root ::= [a-z]+").unwrap();
    let cx = SpecContext { vocab: Some(vocab(400)), ..SpecContext::default() };
    let parse = |spec: String| parse_with(&spec, &cx).unwrap();
    let a = parse(format!("grammar(file={});greedy", json.display()));
    let b = parse(format!("top_k(k=5);grammar(file={},mode=optimistic);greedy", json.display()));
    let c = parse(format!("grammar(file={});greedy", other.display()));
    let m = |c: &Chain, i: usize| {
        let s: &dyn std::any::Any = c.stages()[i].as_ref();
        s.downcast_ref::<sampling::samplers::GrammarStage>().unwrap().matcher().clone()
    };
    assert!(m(&a, 0).shares_cache_with(&m(&b, 1)), "one grammar, one cache");
    assert!(!m(&a, 0).shares_cache_with(&m(&c, 0)), "another grammar, another cache");
    // Each sequence has its own position: accepting in one moves only that one.
    let mut a = a;
    a.try_accept(u32::from(b'{')).unwrap();
    assert!(b.stages()[1].allows(u32::from(b'{')).unwrap() && !a.stages()[0].allows(u32::from(b'{')).unwrap());
    // Without a vocabulary: a clear error.
    let e = sampling::chain_spec::parse(&format!("grammar(file={})", json.display()), 0).unwrap_err();
    assert!(e.to_string().contains("vocabulary"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_grammar_row_with_nothing_allowed_fails_alone_on_the_backend() {
    use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
    let voc = vocab(400);
    // Token 99999 is outside the vocabulary: this grammar allows nothing.
    let chains = [
        Chain::new().with(stage("root ::= <[99999]>", &voc, GrammarMode::First)).with(Greedy::new()),
        Chain::new().with(stage(JSON, &voc, GrammarMode::First)).with(Greedy::new()),
    ];
    let mut seqs = Sequences::new(1).unwrap();
    for (i, c) in chains.iter().enumerate() {
        seqs.set(SeqId(i as u32), SeqConfig::new(c.clone()));
    }
    let mut g = graph::Graph::new();
    let x = g.input("logits", graph::DType::F32, &[voc.len(), 2]).unwrap();
    let cpu = cpu::CpuBackend::new();
    let mut tail = Tail::attach(&mut g, x, &[(SeqId(0), 0), (SeqId(1), 1)], &seqs, &cpu).unwrap();
    let mut sched = sched::Scheduler::new(vec![Box::new(cpu)]).unwrap();
    sched.plan(&g).unwrap();
    let row = falling(voc.len());
    sched.set_input_f32(x, &[row.clone(), row.clone()].concat()).unwrap();
    tail.set_inputs(&mut sched, &mut seqs).unwrap();
    sched.compute().unwrap();
    let out = tail.sample(&mut sched, &mut seqs).unwrap();
    let e = out.rows[0].result.as_ref().unwrap_err();
    assert!(matches!(e, SamplingError::BadRow { .. }), "{e}");
    assert_eq!(out.rows[1].result.as_ref().unwrap().token, Some(u32::from(b'{')));
    // On the CPU the same row says why.
    let e = chains[0].clone().sample(&row).unwrap_err();
    assert!(e.to_string().contains("allows no token"), "{e}");
}
