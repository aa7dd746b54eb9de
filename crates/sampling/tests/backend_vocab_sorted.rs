//! Backend sampling of the stages whose CPU samplers used to sort the whole vocabulary, on the
//! vocabulary (no `top_k` before them): the dynamic temperature (`temp_ext` with `delta > 0`),
//! mirostat (v1) and locally typical sampling (a mask: a CPU suffix after it continues from the
//! survivors in token order). Every chain's tokens over many steps must equal its
//! CPU chain's, token for token, in one mixed batch, at a small vocabulary and at 151936, on rows
//! of several kinds: spreads from flat to peaked, rows with `-inf` entries from the start, rows
//! of many ties, and a row with one finite entry (entropy 0: a dynamic temperature of 0).
//! Also: on the vocabulary view, the CPU chain's new order keeps every token of a chain whose
//! next stage sorts anyway (`top_k`), against the same chain on the sorted list.

mod vocab_cases;

use sampling::{Candidates, Chain, Sampler, TokenData};
use vocab_cases::{SORTED_CHAINS, SORTED_PLACEMENTS, run, sorted_logits};

#[test]
fn sorted_stages_on_the_vocabulary_match_the_cpu_chain_at_a_small_vocabulary() {
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(1000, 60, &SORTED_CHAINS, sorted_logits, cpu, None), SORTED_PLACEMENTS);
}

#[test]
fn sorted_stages_on_the_vocabulary_match_the_cpu_chain_at_151936() {
    let cpu = Box::new(cpu::CpuBackend::new());
    assert_eq!(run(151_936, 6, &SORTED_CHAINS, sorted_logits, cpu, None), SORTED_PLACEMENTS);
}

/// `spec` on `logits` as an explicit list sorted by logit descending (ties by lower id): the CPU
/// samplers' list paths, which keep llama.cpp's sorted order.
fn sample_sorted_list(chain: &mut Chain, logits: &[f32]) -> Option<u32> {
    let mut list: Vec<TokenData> =
        logits.iter().enumerate().map(|(i, &l)| TokenData { id: i as u32, logit: l, p: 0.0 }).collect();
    list.sort_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
    let mut cur = Candidates::from_list(list, logits.len()).unwrap();
    chain.apply(&mut cur).unwrap();
    cur.selected_token()
}

#[test]
fn the_vocabulary_order_keeps_the_tokens_of_a_chain_that_sorts_next() {
    // temp_ext followed by top_k: the vocabulary view (unsorted) and the sorted list give the same
    // tokens, draw for draw.
    for spec in [
        "temp_ext(t=0.8,delta=0.5,exponent=1);top_k(k=40);dist(seed=3)",
        "temp_ext(t=1.5,delta=1.0,exponent=0.5);top_k(k=5);temp(t=0.7);dist(seed=4)",
    ] {
        let (mut a, mut b) = (Chain::parse(spec).unwrap(), Chain::parse(spec).unwrap());
        for step in 0..400 {
            let x = sorted_logits(1000, step, step / 6);
            let got = a.sample(&x).unwrap();
            let want = sample_sorted_list(&mut b, &x).unwrap();
            assert_eq!(got, want, "`{spec}` step {step}");
            b.accept(want);
        }
    }
}
