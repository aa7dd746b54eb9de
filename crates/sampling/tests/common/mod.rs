//! Helpers shared by the integration tests: running a chain on both candidate representations,
//! deterministic test logits, and an independent f64 reference of the truncating samplers.
#![allow(dead_code)]

use sampling::{Candidates, Chain, SampleOutput, Sampler, TokenData};

/// Runs `spec` on `logits` through the vocabulary view (fast paths).
pub fn run_view(spec: &str, logits: &[f32]) -> SampleOutput {
    Chain::parse(spec).unwrap().run(logits).unwrap()
}

/// Runs `spec` on `logits` given as an explicit list (llama.cpp's starting array: slow paths).
pub fn run_list(spec: &str, logits: &[f32]) -> SampleOutput {
    let mut chain = Chain::parse(spec).unwrap();
    let list = logits.iter().enumerate().map(|(i, &l)| TokenData { id: i as u32, logit: l, p: 0.0 }).collect();
    let mut cur = Candidates::from_list(list, logits.len()).unwrap();
    chain.apply(&mut cur).unwrap();
    cur.output().unwrap()
}

/// Runs on both representations, checks they agree, returns one.
pub fn run_both(spec: &str, logits: &[f32]) -> SampleOutput {
    let a = run_view(spec, logits);
    let b = run_list(spec, logits);
    assert_eq!(ids(&a), ids(&b), "view and list paths disagree for `{spec}`");
    for (x, y) in a.candidates.iter().zip(&b.candidates) {
        assert!((x.p - y.p).abs() < 1e-5, "p differs for `{spec}`: {x:?} vs {y:?}");
    }
    assert_eq!(a.selected, b.selected, "selected differs for `{spec}`");
    a
}

/// Surviving ids in output order.
pub fn ids(o: &SampleOutput) -> Vec<u32> {
    o.candidates.iter().map(|t| t.id).collect()
}

/// Surviving ids, sorted.
pub fn id_set(o: &SampleOutput) -> Vec<u32> {
    let mut v = ids(o);
    v.sort_unstable();
    v
}

/// Probability of token `id` in the output.
pub fn p_of(o: &SampleOutput, id: u32) -> f32 {
    o.candidates.iter().find(|t| t.id == id).map_or(0.0, |t| t.p)
}

/// Logit of token `id` in the output.
pub fn logit_of(o: &SampleOutput, id: u32) -> f32 {
    o.candidates.iter().find(|t| t.id == id).map(|t| t.logit).unwrap()
}

/// Asserts the output's probabilities, by id, within 1e-5.
pub fn assert_probs(o: &SampleOutput, want: &[(u32, f64)]) {
    assert_eq!(o.candidates.len(), want.len(), "survivors: {:?}, want {:?}", ids(o), want);
    for &(id, p) in want {
        let got = p_of(o, id);
        assert!((f64::from(got) - p).abs() < 1e-5, "token {id}: p = {got}, want {p}");
    }
}

/// `ln` of each probability: logits whose softmax is exactly `ps` (up to rounding).
pub fn logits_of(ps: &[f64]) -> Vec<f32> {
    ps.iter().map(|p| p.ln() as f32).collect()
}

/// Deterministic pseudo-normal logits (Box-Muller over Philox uniforms) times `scale`.
pub fn gaussian_logits(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let u1 = graph::philox::uniform(seed, 1, i as u64).max(1e-7);
            let u2 = graph::philox::uniform(seed, 2, i as u64);
            scale * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
        })
        .collect()
}

/// `n` deterministic logits uniform in `[-scale / 2, scale / 2)` from an xorshift state seeded with
/// `state` (cheap, for many rows of many steps).
pub fn xorshift_logits(n: usize, state: u64, scale: f32) -> Vec<f32> {
    let mut s = state | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
        })
        .collect()
}

/// A reference candidate: id and logit, probabilities in f64.
#[derive(Debug, Clone, Copy)]
pub struct R {
    pub id: u32,
    pub logit: f32,
}

pub fn ref_all(logits: &[f32]) -> Vec<R> {
    logits.iter().enumerate().map(|(i, &l)| R { id: i as u32, logit: l }).collect()
}

fn sort_desc(v: &mut [R]) {
    v.sort_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
}

/// llama.cpp top-k, independently written: sort, truncate.
pub fn ref_top_k(mut v: Vec<R>, k: i32) -> Vec<R> {
    if k <= 0 {
        return v;
    }
    sort_desc(&mut v);
    v.truncate(k as usize);
    v
}

/// llama.cpp top-p with llama.cpp's `f32` arithmetic, whose rounding decides at boundaries:
/// softmax over the current set in its current order (max, `expf(l - max)` added one by one in
/// f32, each divided by that sum), then sorted and added one by one in f32; the smallest prefix
/// whose sum is `>= p` (and at least `min_keep` long).
pub fn ref_top_p(mut v: Vec<R>, p: f32, min_keep: usize) -> Vec<R> {
    if p >= 1.0 {
        return v;
    }
    let max = v.iter().fold(f32::NEG_INFINITY, |m, r| m.max(r.logit));
    let mut sum = 0.0f32;
    for r in &v {
        sum += (r.logit - max).exp();
    }
    sort_desc(&mut v);
    let mut cum = 0.0f32;
    for i in 0..v.len() {
        cum += (v[i].logit - max).exp() / sum;
        if cum >= p && i + 1 >= min_keep {
            v.truncate(i + 1);
            return v;
        }
    }
    v
}

/// llama.cpp min-p: keep logit >= max + ln p (threshold in f32 as llama.cpp computes it).
pub fn ref_min_p(mut v: Vec<R>, p: f32, min_keep: usize) -> Vec<R> {
    if p <= 0.0 {
        return v;
    }
    let max = v.iter().fold(f32::NEG_INFINITY, |m, r| m.max(r.logit));
    let thr = max + p.ln();
    let kept: Vec<R> = v.iter().copied().filter(|r| r.logit >= thr).collect();
    if !kept.is_empty() && kept.len() >= min_keep {
        return kept;
    }
    sort_desc(&mut v);
    v.truncate(min_keep.max(kept.len()).max(1));
    v
}

pub fn ref_ids(v: &[R]) -> Vec<u32> {
    let mut ids: Vec<u32> = v.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    ids
}

/// Exact softmax in f64.
pub fn softmax64(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    let w: Vec<f64> = logits.iter().map(|&x| (f64::from(x) - f64::from(max)).exp()).collect();
    let s: f64 = w.iter().sum();
    w.into_iter().map(|x| x / s).collect()
}

/// Draws `n` tokens from a freshly parsed chain at steps 0..n (one chain, advancing).
pub fn draws(spec: &str, logits: &[f32], n: usize) -> Vec<u32> {
    let mut chain = Chain::parse(spec).unwrap();
    (0..n)
        .map(|_| {
            let mut cur = Candidates::from_row(logits).unwrap();
            chain.apply(&mut cur).unwrap();
            let t = cur.selected_token().unwrap();
            // the draws' step moves on accept
            chain.accept(t);
            t
        })
        .collect()
}

/// Chi-squared statistic and degrees of freedom of `counts` against `probs`, merging the bins
/// whose expected count is below 5 into one.
pub fn chi2(counts: &[u64], probs: &[f64]) -> (f64, usize) {
    let n: u64 = counts.iter().sum();
    let n = n as f64;
    let mut stat = 0.0;
    let mut bins = 0usize;
    let (mut rest_obs, mut rest_exp) = (0.0, 0.0);
    for (&c, &p) in counts.iter().zip(probs) {
        let e = p * n;
        if e < 5.0 {
            rest_obs += c as f64;
            rest_exp += e;
        } else {
            stat += (c as f64 - e).powi(2) / e;
            bins += 1;
        }
    }
    if rest_exp > 0.0 {
        stat += (rest_obs - rest_exp).powi(2) / rest_exp.max(1e-9);
        bins += 1;
    }
    (stat, bins.saturating_sub(1))
}

/// Upper 0.1% point of chi-squared with `df` degrees of freedom (Wilson-Hilferty).
pub fn chi2_crit(df: usize) -> f64 {
    let k = df as f64;
    let z = 3.090_2; // 0.999 quantile of N(0, 1)
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

pub fn counts_of(tokens: &[u32], n: usize) -> Vec<u64> {
    let mut c = vec![0u64; n];
    for &t in tokens {
        c[t as usize] += 1;
    }
    c
}

/// Chi-squared critical values at p = 0.001 for 1..=15 degrees of freedom.
pub const CHI2_999: [f64; 15] =
    [10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70];

/// [`chi2`] of emitted tokens against a target that gives some tokens probability 0: one of
/// those emitted fails outright (an infinite statistic).
pub fn chi2_on_support(counts: &[u64], p: &[f64]) -> (f64, usize) {
    if counts.iter().zip(p).any(|(&c, &p)| p == 0.0 && c > 0) {
        return (f64::INFINITY, 1);
    }
    chi2(counts, p)
}

/// A draw from `q` (`(token, weight)` pairs, normalised here) with a uniform `u` of its own (not
/// the verifier's streams).
pub fn draw_from(q: &[(u32, f32)], u: f64) -> u32 {
    let total: f64 = q.iter().map(|e| f64::from(e.1)).sum();
    let mut cum = 0.0;
    for &(t, w) in q {
        cum += f64::from(w) / total;
        if u < cum {
            return t;
        }
    }
    q.last().unwrap().0
}

/// A candidate list of the whole `row` in a shuffled order (entry `j` holds token `(5 j + 3) mod
/// V`; `V` must not be a multiple of 5), the entries `removed(j)` removed (`-inf`, id -1): the
/// list's values, its ids, and each token's probability under the list's softmax (`m` the
/// row's maximum, subtracted first), 0 for a removed token.
pub fn shuffled_list(row: &[f32], m: f32, removed: impl Fn(usize) -> bool) -> (Vec<f32>, Vec<i32>, Vec<f64>) {
    let v = row.len();
    let order: Vec<usize> = (0..v).map(|i| (i * 5 + 3) % v).collect();
    let list_x: Vec<f32> =
        order.iter().enumerate().map(|(j, &i)| if removed(j) { f32::NEG_INFINITY } else { row[i] }).collect();
    let list_ids: Vec<i32> = order.iter().enumerate().map(|(j, &i)| if removed(j) { -1 } else { i as i32 }).collect();
    let wl: Vec<f64> =
        list_x.iter().map(|&x| if x == f32::NEG_INFINITY { 0.0 } else { f64::from(x - m).exp() }).collect();
    let tl: f64 = wl.iter().sum();
    let mut pl = vec![0.0; v];
    for (j, &i) in order.iter().enumerate() {
        pl[i] = wl[j] / tl;
    }
    (list_x, list_ids, pl)
}

/// A vocabulary of `texts` (token `i`'s text) and a tokenizer for DRY's string breakers over it:
/// greedy longest match of the texts (an unmatched byte skipped), no space prefix, no
/// `clean_spaces`: a stand-in for a model's tokenizer, which llama.cpp's breaker processing only
/// asks for the tails.
pub fn breaker_vocab(texts: &[&str]) -> (std::sync::Arc<grammar::Vocab>, sampling::samplers::BreakerTokenizer) {
    let pieces: Vec<Vec<u8>> = texts.iter().map(|t| t.as_bytes().to_vec()).collect();
    let vocab = std::sync::Arc::new(grammar::Vocab::new(pieces.clone(), &[]));
    let tokenize = move |text: &[u8]| {
        let mut out = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let best = (0..pieces.len())
                .filter(|&t| !pieces[t].is_empty() && text[i..].starts_with(&pieces[t]))
                .max_by_key(|&t| (pieces[t].len(), std::cmp::Reverse(t)));
            match best {
                Some(t) => {
                    out.push(t as u32);
                    i += pieces[t].len();
                }
                None => i += 1,
            }
        }
        out
    };
    let tok = sampling::samplers::BreakerTokenizer {
        add_space_prefix: false,
        clean_spaces: false,
        tokenize: std::sync::Arc::new(tokenize),
    };
    (vocab, tok)
}
