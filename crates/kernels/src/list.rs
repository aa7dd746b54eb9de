//! The cuts of the list stages on a candidate list sorted by logit (descending), as the CPU
//! sampler chain decides them, for the CPU backend's `list_filter` op: top-p in llama.cpp's `f32`
//! arithmetic ([`crate::llama_f32`], which the chain's `top_p` on a list calls), min-p the walk
//! the chain's `min_p` on a sorted list calls too (`sampling::samplers::min_p`; the sampling
//! crate's `tests/list_filter.rs` checks the op against the chain bit for bit).

use crate::llama_f32;

/// How many entries of the list `logits` (in list order) llama.cpp's `top_p(p, min_keep)` keeps:
/// the softmax in `f32` over the whole list (entries of `-inf` add nothing), then the running `f32`
/// sum of the probabilities in list order, up to the first entry where it reaches `p` with at
/// least `min_keep` kept; the whole list if it never does. The caller handles `p >= 1` (the
/// chain's top-p does nothing there).
pub fn top_p_kept(logits: &[f32], p: f32, min_keep: usize) -> usize {
    let (max, sum) = llama_f32::softmax_sum(logits.iter().copied());
    llama_f32::top_p_cut(logits.iter().map(|&l| llama_f32::prob(l, max, sum)), p, min_keep).unwrap_or(logits.len())
}

/// How many entries of a sorted list of `n` entries (`logit(i)` the `i`-th) llama.cpp's sorted
/// `min_p` (and the chain's `min_p` on a sorted list) keeps with threshold `logit(0) + ln_p` (in `f32`): walking from position 1, the first
/// position `i >= min_keep` below the threshold ends the list (the first entry always stays).
pub fn min_p_kept(n: usize, logit: impl Fn(usize) -> f32, ln_p: f32, min_keep: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let thr = logit(0) + ln_p;
    let mut i = 1;
    while i < n {
        if logit(i) < thr && i >= min_keep {
            break;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_small_lists() {
        // llama.cpp's tests/test-sampling.cpp boundary: probabilities [0.4, 0.3, 0.2, 0.1], p = 0.7
        // keeps 2 in its f32 arithmetic.
        let l: Vec<f32> = [0.4f32, 0.3, 0.2, 0.1].iter().map(|p| p.ln()).collect();
        assert_eq!(top_p_kept(&l, 0.7, 0), 2);
        assert_eq!(top_p_kept(&l, 0.0, 0), 1);
        assert_eq!(top_p_kept(&l, 0.0, 3), 3);
        assert_eq!(top_p_kept(&l, 0.5, 9), 4);
        let with_inf = [l[0], l[1], f32::NEG_INFINITY, f32::NEG_INFINITY];
        assert_eq!(top_p_kept(&with_inf, 0.99, 0), 2, "a -inf entry adds nothing; the sum of two is 1");
        fn at(v: &[f32]) -> impl Fn(usize) -> f32 + '_ {
            move |i| v[i]
        }
        let v = [3.0f32, 2.0, 1.0, 0.0];
        assert_eq!(min_p_kept(4, at(&v), -1.0, 0), 2, "2.0 >= 3 - 1 stays, 1.0 goes");
        assert_eq!(min_p_kept(4, at(&v), -1.0, 3), 3);
        assert_eq!(min_p_kept(4, at(&v), 1.0, 0), 1, "ln p > 0: the first only");
        assert_eq!(min_p_kept(4, at(&v), f32::NEG_INFINITY, 0), 4);
        assert_eq!(min_p_kept(0, at(&v), 0.0, 0), 0);
    }
}
