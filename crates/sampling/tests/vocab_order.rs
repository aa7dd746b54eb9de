//! Known answers of the vocabulary-view paths that keep their survivors in token-id order
//! (docs/SAMPLING.md, "Deliberate differences"): mirostat_v2, xtc, top_n_sigma and min-p's
//! fallback on a `Candidates::from_row` view, beside the same stage on an explicit list (llama.cpp's
//! starting array), which still sorts as llama.cpp does. The llama.cpp cases themselves stay in
//! `known_answers.rs`.

use graph::philox::stream;
use sampling::sampler::Rng;
use sampling::samplers::{MinP, MirostatV2, TopNSigma, Xtc};
use sampling::{Candidates, Sampler, TokenData};

/// The ids of the array after `s` on the vocabulary view of `l`, and whether it is still the view.
fn on_view(s: &mut dyn Sampler, l: &[f32]) -> (Vec<u32>, bool, Option<u32>) {
    let mut c = Candidates::from_row(l).unwrap();
    s.apply(&mut c).unwrap();
    let view = c.is_vocab_view();
    let sel = c.selected_token();
    (c.list("test").unwrap().iter().map(|t| t.id).collect(), view, sel)
}

/// The ids of the array after `s` on `l` given as a list (unsorted, token order).
fn on_list(s: &mut dyn Sampler, l: &[f32]) -> (Vec<u32>, Option<u32>) {
    let list = l.iter().enumerate().map(|(i, &x)| TokenData { id: i as u32, logit: x, p: 0.0 }).collect();
    let mut c = Candidates::from_list(list, l.len()).unwrap();
    s.apply(&mut c).unwrap();
    let sel = c.selected_token();
    (c.list("test").unwrap().iter().map(|t| t.id).collect(), sel)
}

/// The token an inverse-CDF walk over `ids` (weights `exp(l - max)`, f64) picks with `u`.
fn walk(l: &[f32], ids: &[u32], u: f64) -> u32 {
    let w: Vec<f64> = ids.iter().map(|&i| f64::from(l[i as usize]).exp()).collect();
    let target = u * w.iter().sum::<f64>();
    let mut cum = 0.0;
    for (&i, &x) in ids.iter().zip(&w) {
        cum += x;
        if cum > target {
            return i;
        }
    }
    *ids.last().unwrap()
}

#[test]
fn mirostat_v2_on_the_view_keeps_and_draws_in_token_order() {
    // p ~ 0.038, 0.278, 0.014, 0.278, 0.102, 0, 0.062, 0.228: surprise <= mu = 2 tau = 4 bits
    // keeps p >= 1/16: ids 1, 3, 4, 7 (sorted: 1, 3, 7, 4).
    let l = [0.0f32, 2.0, -1.0, 2.0, 1.0, f32::NEG_INFINITY, 0.5, 1.8];
    let max = 2.0f64;
    let sum: f64 = l.iter().map(|&x| (f64::from(x) - max).exp()).sum();
    let want: Vec<u32> =
        (0..l.len() as u32).filter(|&i| -(((f64::from(l[i as usize]) - max).exp() / sum).log2()) <= 4.0).collect();
    assert_eq!(want, vec![1, 3, 4, 7]);
    let mut sorted = want.clone();
    sorted.sort_by(|&a, &b| l[b as usize].total_cmp(&l[a as usize]).then(a.cmp(&b)));
    assert_ne!(sorted, want, "the case must tell the two orders apart");
    let mut differs = 0;
    for seed in 0..64u64 {
        let u = Rng::new(seed, stream::MIROSTAT).next_draw();
        let (ids, view, sel) = on_view(&mut MirostatV2::new(seed, 2.0, 0.1).unwrap(), &l);
        assert_eq!(ids, want, "seed {seed}: the kept tokens in token order");
        assert!(!view);
        assert_eq!(sel, Some(walk(&l, &want, u)), "seed {seed}: the draw walks token order");
        // On a list: llama.cpp's sorted prefix and sorted walk.
        let (ids, sel) = on_list(&mut MirostatV2::new(seed, 2.0, 0.1).unwrap(), &l);
        assert_eq!(ids, sorted, "seed {seed}");
        assert_eq!(sel, Some(walk(&l, &sorted, u)), "seed {seed}");
        differs += usize::from(walk(&l, &sorted, u) != walk(&l, &want, u));
    }
    assert!(differs > 0, "some uniform must pick another token in the other order");
    // Nothing within mu: the most likely token, the lowest id among the tied maxima (1, not 3).
    let (ids, _, sel) = on_view(&mut MirostatV2::new(0, -1.0, 0.1).unwrap(), &l);
    assert_eq!((ids, sel), (vec![1], Some(1)));
}

#[test]
fn xtc_on_the_view_removes_the_same_tokens_and_keeps_token_order() {
    // p = 0.09, 0.67, 0, 0.24, 0: t = 0.1 marks tokens 1 and 3, the last (least likely) 3 stays.
    let l = [1.0f32, 3.0, f32::NEG_INFINITY, 2.0, f32::NEG_INFINITY];
    let (ids, view, _) = on_view(&mut Xtc::new(1.0, 0.1, 4, 0).unwrap(), &l);
    // The -inf entries stay and count for min_keep: 5 - 1 = 4 >= 4.
    assert_eq!((ids, view), (vec![0, 2, 3, 4], false));
    let (ids, _) = on_list(&mut Xtc::new(1.0, 0.1, 4, 0).unwrap(), &l);
    assert_eq!(ids, vec![3, 0, 2, 4], "a list is sorted, as llama.cpp's");
    // min_keep = 5 would leave 4: nothing removed, every token in token order (a list).
    assert_eq!(on_view(&mut Xtc::new(1.0, 0.1, 5, 0).unwrap(), &l).0, vec![0, 1, 2, 3, 4]);
    // Ties at the lowest logit above t: the last in sorted order is the highest id (2), kept.
    let l = [2.0f32, 3.0, 2.0, 0.0];
    let (ids, _, _) = on_view(&mut Xtc::new(1.0, 0.05, 0, 0).unwrap(), &l);
    assert_eq!(ids, vec![2, 3]);
    assert_eq!(on_list(&mut Xtc::new(1.0, 0.05, 0, 0).unwrap(), &l).0, vec![2, 3]);
}

#[test]
fn top_n_sigma_on_the_view_keeps_token_order() {
    let l = [0.5f32, 3.0, f32::NEG_INFINITY, 2.5, -1.0, 2.9, 1.0];
    let (ids, view, _) = on_view(&mut TopNSigma::new(0.5).unwrap(), &l);
    assert!(!view);
    let (mut sorted_ids, _) = on_list(&mut TopNSigma::new(0.5).unwrap(), &l);
    assert!(sorted_ids.windows(2).all(|w| l[w[0] as usize] >= l[w[1] as usize]), "{sorted_ids:?}");
    sorted_ids.sort();
    assert_eq!(ids, sorted_ids, "the same tokens, in token order");
    assert_eq!(ids, vec![1, 3, 5]);
    // n = +inf keeps everything, the -inf entry too: the view stays as it is.
    let (ids, view, _) = on_view(&mut TopNSigma::new(f32::INFINITY).unwrap(), &l);
    assert_eq!((ids.len(), view), (l.len(), true));
    assert_eq!(on_list(&mut TopNSigma::new(f32::INFINITY).unwrap(), &l).0.len(), l.len());
}

#[test]
fn min_p_fallback_on_the_view_keeps_token_order() {
    // Only token 1 passes max + ln 0.9; min_keep = 3: the top 3 {1, 2, 0}.
    let l = [1.0f32, 3.0, 2.0, 0.0];
    assert_eq!(on_view(&mut MinP::new(0.9, 3).unwrap(), &l).0, vec![0, 1, 2]);
    assert_eq!(on_list(&mut MinP::new(0.9, 3).unwrap(), &l).0, vec![1, 2, 0], "a list: llama.cpp's sorted fallback");
    // p > 1: nothing passes, the top max(min_keep, 1).
    assert_eq!(on_view(&mut MinP::new(2.0, 2).unwrap(), &l).0, vec![1, 2]);
    assert_eq!(on_view(&mut MinP::new(2.0, 0).unwrap(), &l).0, vec![1]);
}
