//! The plain reference of the fused sampling ops, written from the specs
//! (`shared/contracts/fused-ops-spec-digest.md`) for obvious correctness: every row is sorted in
//! full (value descending, index ascending, a stable sort), every stage is applied literally, in
//! f64 with the f64 exponential.

use graph::fused::TopKTopP;
use std::cmp::Ordering;

/// The post stage of one row.
#[derive(Debug, Clone, Copy)]
pub enum RefPost<'a> {
    /// The largest probability.
    None,
    /// qSample with this q row (`[V]`).
    QSample(&'a [f64]),
    /// Multinomial with this uniform (from `graph::fused::multinomial_uniform`).
    Multinomial(f64),
}

/// One row's result: the index and which tokens survived the filters.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked {
    /// The selected token.
    pub index: usize,
    /// `kept[v]`: token `v` survived top-K, top-P and min-P.
    pub kept: Vec<bool>,
}

/// Every index of `x` in the order value descending, index ascending (no NaN).
pub fn order(x: &[f64]) -> Vec<usize> {
    let mut o: Vec<usize> = (0..x.len()).collect();
    o.sort_by(|&a, &b| x[b].partial_cmp(&x[a]).unwrap_or(Ordering::Equal));
    o
}

/// `top_k_top_p_sample` on one row, `None` for a bad row.
pub fn top_k_top_p_row(x: &[f64], k: i64, p: f64, m: f64, a: &TopKTopP, post: RefPost<'_>) -> Option<Picked> {
    let v = x.len();
    if p.is_nan() || p == f64::INFINITY || m.is_nan() || m == f64::INFINITY || x.iter().any(|t| t.is_nan()) {
        return None;
    }
    if a.input_is_logits {
        if x.contains(&f64::INFINITY) || x.iter().all(|&t| t == f64::NEG_INFINITY) {
            return None;
        }
    } else if !x.iter().all(|t| (0.0..=1.0).contains(t)) {
        return None;
    }
    let ord = order(x);
    // top-K
    let top_k_runs = k >= 1 && (k as u64) <= (v as u64).min(u64::from(a.ks()));
    let sorted = top_k_runs || p < 1.0;
    let cand: Vec<usize> = if top_k_runs {
        ord[..k as usize].to_vec()
    } else if sorted {
        ord.clone()
    } else {
        (0..v).collect()
    };
    // probabilities over the candidates (softmax in logits mode, as stored otherwise)
    let prob: Vec<f64> = if a.input_is_logits {
        let mx = cand.iter().map(|&i| x[i]).fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = cand.iter().map(|&i| (x[i] - mx).exp()).collect();
        let z: f64 = e.iter().sum();
        e.iter().map(|t| t / z).collect()
    } else {
        cand.iter().map(|&i| x[i]).collect()
    };
    let mut alive = vec![true; cand.len()];
    // top-P (only sorted rows reach p < 1)
    if p <= 0.0 {
        alive.iter_mut().skip(1).for_each(|t| *t = false);
    } else if p < 1.0 {
        let mut excl = 0.0;
        for j in 0..cand.len() {
            alive[j] = excl <= p;
            excl += prob[j];
        }
    }
    // min-P
    let first_alive = |alive: &[bool]| -> usize {
        // the survivor that comes first in the order value descending, index ascending
        (0..cand.len())
            .filter(|&j| alive[j])
            .min_by(|&a, &b| x[cand[b]].partial_cmp(&x[cand[a]]).unwrap_or(Ordering::Equal).then(cand[a].cmp(&cand[b])))
            .expect("a survivor")
    };
    if m >= 1.0 {
        let f = first_alive(&alive);
        alive.iter_mut().enumerate().for_each(|(j, t)| *t = j == f);
    } else if m > 0.0 {
        let maxp = (0..cand.len()).filter(|&j| alive[j]).map(|j| prob[j]).fold(f64::NEG_INFINITY, f64::max);
        for j in 0..cand.len() {
            alive[j] = alive[j] && prob[j] >= maxp * m;
        }
    }
    let first = first_alive(&alive);
    let pick = match post {
        RefPost::None => {
            // largest probability, lowest index on ties
            let mut best = first;
            for j in 0..cand.len() {
                if alive[j] && (prob[j] > prob[best] || (prob[j] == prob[best] && cand[j] < cand[best])) {
                    best = j;
                }
            }
            best
        }
        RefPost::QSample(q) => {
            let mut best: Option<(usize, f64)> = None;
            for j in 0..cand.len() {
                if alive[j] {
                    let col = if sorted { j } else { cand[j] };
                    let r = prob[j] / (q[col] + f64::from(a.eps));
                    if best.is_none_or(|(_, b)| r > b) {
                        best = Some((j, r));
                    }
                }
            }
            best.expect("a survivor").0
        }
        RefPost::Multinomial(u) => {
            let mut surv: Vec<usize> = (0..cand.len()).filter(|&j| alive[j]).collect();
            surv.sort_by_key(|&j| cand[j]);
            let total: f64 = surv.iter().map(|&j| prob[j]).sum();
            let target = u * total;
            let mut run = 0.0;
            let mut chosen = None;
            for &j in &surv {
                if prob[j] > 0.0 {
                    run += prob[j];
                    chosen = Some(j);
                    if run > target {
                        break;
                    }
                }
            }
            chosen.unwrap_or(first)
        }
    };
    let mut kept = vec![false; v];
    for j in 0..cand.len() {
        if alive[j] {
            kept[cand[j]] = true;
        }
    }
    Some(Picked { index: cand[pick], kept })
}

/// `random_sample` on one row, `None` for a bad row: the sorting algorithm of the spec, literally.
pub fn random_sample_row(x: &[f64], random: f64, topp: f64, temperature: f64, topk: i64) -> Option<usize> {
    let n = x.len();
    if random.is_nan() || topp.is_nan() || temperature.is_nan() || x.iter().any(|t| t.is_nan()) {
        return None;
    }
    if !(0.0..1.0).contains(&random) || topp < 0.0 || temperature < 0.0 {
        return None;
    }
    let ord = order(x);
    if random == 0.0 || topp == 0.0 || topk == 1 || temperature == 0.0 {
        return Some(ord[0]);
    }
    let x0 = x[ord[0]];
    if x0.is_infinite() {
        return None;
    }
    let mut c = Vec::with_capacity(n);
    let mut run = 0.0;
    for (i, &t) in ord.iter().enumerate() {
        run += if i == 0 { 1.0 } else { ((x[t] - x0) / temperature).exp() };
        c.push(run);
    }
    let kk = if topk <= 0 || topk as u64 >= n as u64 { n } else { topk as usize };
    let threshold = random * (topp * c[n - 1]).min(c[kk - 1]);
    let i = c.iter().position(|&ci| ci >= threshold).unwrap_or(n - 1);
    Some(ord[i])
}
