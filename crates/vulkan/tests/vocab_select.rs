//! The stages on the whole vocabulary with the Vulkan backend holding the logits and the CPU as
//! the fallback: the chains of `sampling/tests/vocab_cases` (mirostat_v2, min_p with
//! `min_keep > 1` or `p > 1`, top_n_sigma and xtc; dynamic temp_ext, mirostat v1 and typical; the
//! stages after a cut; dry and adaptive-p with samples not accepted; tail-free and softmax on
//! every form) in one mixed batch, every token equal to the sequence's CPU chain run alone, the
//! same placement as on the CPU backend, normal and staged memory; the candidates read back before
//! their draws; rows with a NaN or `+inf` failing alone. The validation layer must stay silent.

mod common;
#[path = "../../sampling/tests/vocab_cases/mod.rs"]
mod vocab_cases;

use std::sync::{Arc, Mutex};
use vocab_cases::{
    AFTER_CUT, AFTER_CUT_CANDIDATES, AFTER_CUT_PLACEMENTS, CHAINS, HISTORY_CHAINS, HISTORY_PLACEMENTS, LONG_LISTS,
    PLACEMENTS, SORTED_CHAINS, SORTED_PLACEMENTS, bad_rows, bad_rows_of, candidates, candidates_of, logits_for, run,
    run_resampled, sorted_logits,
};
use vulkan::{Options, VulkanBackend};

/// Runs `f` with a Vulkan backend (validation on, its messages collected) and the CPU fallback,
/// then requires the validation layer to have stayed silent.
fn with_vulkan(staged: bool, f: impl FnOnce(Box<VulkanBackend>, Box<cpu::CpuBackend>)) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let opts = Options { validation: true, staged, log: Some(log.clone()), ..Options::default() };
    let vk = VulkanBackend::with_options(opts).unwrap();
    f(Box::new(vk), Box::new(cpu::CpuBackend::with_threads(1)));
    let msgs = log.lock().unwrap();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}

fn on_vulkan(v: usize, steps: usize, staged: bool) {
    with_vulkan(staged, |vk, cpu| {
        assert_eq!(run(v, steps, &CHAINS, logits_for, vk, Some(cpu)), PLACEMENTS, "staged {staged}")
    });
}

/// [`SORTED_CHAINS`] on Vulkan. On long rows a `top_p` on the vocabulary may keep another nucleus
/// than the CPU's where its cut is a close call (Vulkan sums exactly, the CPU replays llama.cpp's
/// drifting `f32` sums: docs/SAMPLING.md, "Backend sampling: differences from the CPU chain"), so
/// at 151936 the chain that has one is left out.
fn sorted_on_vulkan(v: usize, steps: usize) {
    let keep = |c: &&str| v < 100_000 || !c.contains("top_p");
    let chains: Vec<&str> = SORTED_CHAINS.iter().copied().filter(keep).collect();
    let places: Vec<&str> =
        SORTED_CHAINS.iter().zip(SORTED_PLACEMENTS).filter(|(c, _)| keep(c)).map(|(_, p)| p).collect();
    with_vulkan(false, |vk, cpu| assert_eq!(run(v, steps, &chains, sorted_logits, vk, Some(cpu)), places));
}

#[test]
fn vocabulary_selections_on_vulkan_match_the_cpu_chain() {
    let Some(probe) = common::vulkan("vocabulary_selections_on_vulkan_match_the_cpu_chain") else { return };
    drop(probe);
    on_vulkan(1000, 30, false);
    on_vulkan(1000, 10, true);
}

#[test]
fn vocabulary_selections_on_vulkan_match_the_cpu_chain_at_151936() {
    let Some(probe) = common::vulkan("vocabulary_selections_on_vulkan_match_the_cpu_chain_at_151936") else { return };
    drop(probe);
    on_vulkan(151_936, 2, false);
}

#[test]
fn vocabulary_selections_on_vulkan_read_back_the_cpu_chains_candidates_and_fail_bad_rows_alone() {
    let Some(probe) = common::vulkan("vocabulary_selections_on_vulkan_read_back_the_cpu_chains_candidates") else {
        return;
    };
    drop(probe);
    with_vulkan(false, |vk, cpu| candidates(1000, 20, vk, Some(cpu)));
    with_vulkan(false, |vk, cpu| bad_rows(1000, vk, Some(cpu)));
}

#[test]
fn sorted_stages_on_the_vocabulary_on_vulkan_match_each_chain_alone() {
    let Some(probe) = common::vulkan("sorted_stages_on_the_vocabulary_on_vulkan_match_each_chain_alone") else {
        return;
    };
    drop(probe);
    sorted_on_vulkan(3000, 24);
}

#[test]
fn sorted_stages_on_the_vocabulary_on_vulkan_at_151936() {
    let Some(probe) = common::vulkan("sorted_stages_on_the_vocabulary_on_vulkan_at_151936") else { return };
    drop(probe);
    sorted_on_vulkan(151_936, 2);
}

#[test]
fn long_lists_on_vulkan_match_the_cpu_chain_signed_zeros_included() {
    let Some(probe) = common::vulkan("long_lists_on_vulkan_match_the_cpu_chain_signed_zeros_included") else { return };
    drop(probe);
    let chains: Vec<&str> = LONG_LISTS.iter().cycle().take(12).copied().collect();
    with_vulkan(false, |vk, cpu| {
        let placed = run(1000, 20, &chains, logits_for, vk, Some(cpu));
        assert!(placed.iter().all(|p| !p.contains('-')), "{placed:?}");
    });
}

/// [`AFTER_CUT`] (the vocabulary stages and top-p after a cut on the vocabulary, on the masked
/// row) on Vulkan; at 151936 the chains with a `top_p` are left out, as in [`sorted_on_vulkan`].
fn after_cut_on_vulkan(v: usize, steps: usize, staged: bool) {
    let keep = |c: &&str| v < 100_000 || !c.contains("top_p");
    let chains: Vec<&str> = AFTER_CUT.iter().copied().filter(keep).collect();
    let places: Vec<&str> =
        AFTER_CUT.iter().zip(AFTER_CUT_PLACEMENTS).filter(|(c, _)| keep(c)).map(|(_, p)| p).collect();
    with_vulkan(staged, |vk, cpu| assert_eq!(run(v, steps, &chains, logits_for, vk, Some(cpu)), places));
}

#[test]
fn stages_after_a_cut_on_vulkan_match_the_cpu_chain() {
    let Some(probe) = common::vulkan("stages_after_a_cut_on_vulkan_match_the_cpu_chain") else { return };
    drop(probe);
    after_cut_on_vulkan(1000, 30, false);
    after_cut_on_vulkan(1000, 10, true);
    with_vulkan(false, |vk, cpu| candidates_of(&AFTER_CUT_CANDIDATES, 1000, 20, vk, Some(cpu)));
    with_vulkan(false, |vk, cpu| bad_rows_of(&AFTER_CUT, 1000, vk, Some(cpu)));
}

#[test]
fn stages_after_a_cut_on_vulkan_at_151936() {
    let Some(probe) = common::vulkan("stages_after_a_cut_on_vulkan_at_151936") else { return };
    drop(probe);
    after_cut_on_vulkan(151_936, 2, false);
}

/// Peaked rows at a small vocabulary, so that tokens repeat and DRY penalises (as
/// `sampling/tests/backend_history.rs`).
fn small_logits(v: usize, step: usize, row: usize) -> Vec<f32> {
    logits_for(v, step, row).iter().map(|x| x * 1.5).collect()
}

#[test]
fn history_stages_on_vulkan_match_the_cpu_chain_with_unaccepted_samples() {
    let Some(probe) = common::vulkan("history_stages_on_vulkan_match_the_cpu_chain_with_unaccepted_samples") else {
        return;
    };
    drop(probe);
    with_vulkan(false, |vk, cpu| {
        assert_eq!(run_resampled(64, 40, &HISTORY_CHAINS, small_logits, vk, Some(cpu), 3), HISTORY_PLACEMENTS)
    });
    with_vulkan(true, |vk, cpu| {
        assert_eq!(run_resampled(151_936, 3, &HISTORY_CHAINS, logits_for, vk, Some(cpu), 2), HISTORY_PLACEMENTS)
    });
}

#[test]
fn logprobs_and_candidates_read_back_from_vulkan_equal_the_reference_values() {
    // Values, not only shapes: the top log-probabilities of the raw logits against the f64
    // log-softmax, the candidates against the CPU chain's, the tokens against the CPU chain's. At
    // 151936 without the top-p chain (the last): Vulkan's `top_p_mask` sums exactly where the CPU
    // replays llama.cpp's f32 sums, so on long flat rows its nucleus can differ by a few tokens.
    let test = "logprobs_and_candidates_read_back_from_vulkan_equal_the_reference_values";
    let Some(probe) = common::vulkan(test) else { return };
    drop(probe);
    with_vulkan(false, |vk, cpu| vocab_cases::logprobs_of(&vocab_cases::WITH_LOGPROBS, 8, 1000, 12, vk, Some(cpu)));
    with_vulkan(true, |vk, cpu| {
        vocab_cases::logprobs_of(&vocab_cases::WITH_LOGPROBS[..5], 5, 151_936, 2, vk, Some(cpu))
    });
}

/// `vocab_cases::TAIL_FREE_CHAINS` (tail-free and the softmax stage on the vocabulary, the masked
/// row and lists) on Vulkan: every token equal to the CPU chain's, the candidates read back before
/// the draws, bad rows failing alone; at 151936 without the list forms, and without the top-p
/// chains as [`sorted_on_vulkan`].
#[test]
fn tail_free_and_softmax_on_vulkan_match_the_cpu_chain() {
    use vocab_cases::{TAIL_FREE_CANDIDATES, TAIL_FREE_CHAINS, TAIL_FREE_PLACEMENTS};
    let Some(probe) = common::vulkan("tail_free_and_softmax_on_vulkan_match_the_cpu_chain") else { return };
    drop(probe);
    with_vulkan(false, |vk, cpu| {
        assert_eq!(run(1000, 30, &TAIL_FREE_CHAINS, logits_for, vk, Some(cpu)), TAIL_FREE_PLACEMENTS)
    });
    with_vulkan(true, |vk, cpu| {
        assert_eq!(run(1000, 20, &TAIL_FREE_CHAINS, sorted_logits, vk, Some(cpu)), TAIL_FREE_PLACEMENTS)
    });
    with_vulkan(false, |vk, cpu| candidates_of(&TAIL_FREE_CANDIDATES, 1000, 20, vk, Some(cpu)));
    with_vulkan(false, |vk, cpu| bad_rows_of(&TAIL_FREE_CHAINS, 1000, vk, Some(cpu)));
}

/// [`logits_for`]'s rows 8 times as steep (spreads of 16 to 160 logits): at 151936 the rows of
/// [`logits_for`] and `sorted_logits` put thousands of tokens within a logit of the top, where
/// the second differences tail-free sums are the exponentials' rounding noise, and Vulkan's `exp`
/// is not the CPU's (docs/SAMPLING.md, "Backend sampling: not done yet").
fn peaked_logits(v: usize, step: usize, row: usize) -> Vec<f32> {
    logits_for(v, step, row).iter().map(|x| x * 8.0).collect()
}

#[test]
fn tail_free_and_softmax_on_vulkan_at_151936() {
    let Some(probe) = common::vulkan("tail_free_and_softmax_on_vulkan_at_151936") else { return };
    drop(probe);
    let (chains, places) = vocab_cases::tail_free_vocab_chains();
    let keep = |c: &(&&str, &&str)| !c.0.contains("top_p");
    let (chains, places): (Vec<&str>, Vec<&str>) =
        chains.iter().zip(&places).filter(keep).map(|(c, p)| (*c, *p)).unzip();
    with_vulkan(false, |vk, cpu| assert_eq!(run(151_936, 3, &chains, peaked_logits, vk, Some(cpu)), places));
}

/// Top-p approximated by top-k (`vocab_cases::APPROX_TOP_P`): `top_k` of `N`, the whole row's
/// softmax denominator by two-level sums and the cut on the `N` probabilities' running mass on
/// Vulkan, every token the CPU chain's, at a small vocabulary (normal and staged memory) and at
/// 151936; the candidates read back; bad rows failing alone. At 151936 the chains with an exact
/// top-p on the vocabulary (`top_p_mask`, or `approx_k` past the vocabulary) are left out, as in
/// [`sorted_on_vulkan`].
#[test]
fn top_p_approximated_by_top_k_on_vulkan_matches_the_cpu_chain() {
    use vocab_cases::{APPROX_TOP_P, APPROX_TOP_P_CANDIDATES, APPROX_TOP_P_PLACEMENTS, approx_logits};
    let Some(probe) = common::vulkan("top_p_approximated_by_top_k_on_vulkan_matches_the_cpu_chain") else { return };
    drop(probe);
    for (v, steps, staged) in [(1000, 30, false), (1000, 10, true), (151_936, 2, false)] {
        let exact_on_vocab = |c: &str| c.contains("top_p(p=0.95);") || c.contains("approx_k=200000");
        let keep = |c: &&str| v < 100_000 || !exact_on_vocab(c);
        let chains: Vec<&str> = APPROX_TOP_P.iter().copied().filter(keep).collect();
        let places: Vec<&str> =
            APPROX_TOP_P.iter().zip(APPROX_TOP_P_PLACEMENTS).filter(|(c, _)| keep(c)).map(|(_, p)| p).collect();
        with_vulkan(staged, |vk, cpu| assert_eq!(run(v, steps, &chains, approx_logits, vk, Some(cpu)), places));
    }
    with_vulkan(false, |vk, cpu| candidates_of(&APPROX_TOP_P_CANDIDATES, 1000, 20, vk, Some(cpu)));
    with_vulkan(false, |vk, cpu| bad_rows_of(&APPROX_TOP_P, 1000, vk, Some(cpu)));
}
