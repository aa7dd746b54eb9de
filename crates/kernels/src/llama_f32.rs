//! llama.cpp's single-precision arithmetic, replayed where a sampler's *decision* depends on it.
//!
//! llama.cpp computes probabilities in `f32` (`llama_sampler_softmax_impl`): the maximum logit,
//! `expf(logit - max)` for each candidate, summed one after the other in array order, then each
//! divided by that sum; top-p then adds the sorted probabilities one after the other in `f32` and
//! keeps the first prefix whose sum is `>= p`. At a boundary the rounding of those steps decides:
//! with probabilities `[0.1, 0.2, 0.3, 0.4]` and `p = 0.7`, llama.cpp's running sum after two
//! tokens is `0.70000005f >= 0.7f`, so it keeps two, while a sum from a less accurate exponential
//! (our shared polynomial, relative error up to ~2.5e-7) lands just below `0.7f` and keeps three.
//!
//! The fast paths compute in `f64` from the shared polynomial exponential and call into this module
//! when a decision is too close to call (and always on short rows); this module then recomputes
//! exactly what llama.cpp computes: the same operations in the same order, with `f32::exp`, which
//! is the platform's `expf`, the function llama.cpp calls.

/// llama.cpp's softmax over `logits` (in array order, as llama.cpp holds them: any temperature
/// already divided in): returns `(max, sum)`, the maximum logit and `sum(expf(logit - max))` added
/// one after the other in `f32`.
pub fn softmax_sum(logits: impl Iterator<Item = f32> + Clone) -> (f32, f32) {
    let max = logits.clone().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for l in logits {
        sum += (l - max).exp();
    }
    (max, sum)
}

/// llama.cpp's probability of a candidate with logit `logit`, given the softmax's `(max, sum)`.
#[inline]
pub fn prob(logit: f32, max: f32, sum: f32) -> f32 {
    (logit - max).exp() / sum
}

/// llama.cpp's top-p cut: walks the probabilities in sorted order (descending) adding them in
/// `f32`; returns the number kept, the first `i + 1` with `sum >= p` and `i + 1 >= min_keep`, or
/// `None` when the probabilities run out first (llama.cpp then keeps everything).
pub fn top_p_cut(sorted_probs: impl IntoIterator<Item = f32>, p: f32, min_keep: usize) -> Option<usize> {
    let mut cum = 0.0f32;
    for (i, q) in sorted_probs.into_iter().enumerate() {
        cum += q;
        if cum >= p && i + 1 >= min_keep {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_boundary_of_llama_cpp_test_sampling() {
        // tests/test-sampling.cpp: probabilities [0.1, 0.2, 0.3, 0.4], logits ln p, p = 0.7 keeps 2.
        let logits: Vec<f32> = [0.1f32, 0.2, 0.3, 0.4].iter().map(|p| p.ln()).collect();
        let (max, sum) = softmax_sum(logits.iter().copied());
        let sorted: Vec<f32> = logits.iter().rev().map(|&l| prob(l, max, sum)).collect();
        assert_eq!(top_p_cut(sorted.iter().copied(), 0.7, 0), Some(2));
        assert_eq!(top_p_cut(sorted.iter().copied(), 0.8, 0), Some(3));
        assert_eq!(top_p_cut(sorted.iter().copied(), 0.0, 0), Some(1));
        assert_eq!(top_p_cut(sorted.iter().copied(), 0.0, 3), Some(3));
        assert_eq!(top_p_cut(sorted.iter().copied(), 0.99, 0), Some(4));
        assert_eq!(top_p_cut(sorted.iter().copied(), 0.5, 9), None);
    }
}
