//! The f64 reference of `spec_verify_sampled` (`graph::Op::SpecVerifySampled`): one row's
//! acceptance test and residual draw, exactly as the op's doc comment states them, both as the
//! oracle's result and as the [`DrawRow`] that [`crate::compare::Cmp::Draw`] checks a backend's
//! result against (the acceptance test with its close calls, then the residual's brackets).

use super::kernels::{self, Weights};
use crate::compare::{Accept, DrawRow};

/// One row of a `spec_verify_sampled` node as the reference reads it.
#[derive(Debug, Clone)]
pub(super) struct SampledRow {
    /// The logits (or list values).
    pub x: Vec<f64>,
    /// The draw's uniform (the op's stream).
    pub u: f64,
    /// The acceptance uniform (`SPECULATIVE`).
    pub a: f64,
    /// Scale and threshold offset (1 and -inf without params).
    pub s: f64,
    /// See `s`.
    pub off: f64,
    /// The draft token (-1: none).
    pub draft: i64,
    /// The draft distribution's token ids.
    pub q_ids: Vec<f64>,
    /// The draft distribution's weights.
    pub q_probs: Vec<f64>,
    /// With `ids`: each entry's token id.
    pub tokens: Option<Vec<f64>>,
}

impl SampledRow {
    /// The entry of token `t`: `t` on the vocabulary, the first entry holding `t` on a list.
    fn entry_of(&self, t: i64) -> Option<usize> {
        if t < 0 {
            return None;
        }
        match &self.tokens {
            None => usize::try_from(t).ok().filter(|&e| e < self.x.len()),
            Some(ids) => ids.iter().position(|&v| v == t as f64),
        }
    }

    /// The row as the draw checker sees it: the acceptance test of the draft entry (if the draft
    /// token has one) and the residual's running sums and target, or the plain draw's where the
    /// residual is empty or there is no draft. Empty sums where the row gives -1.
    pub fn draw_row(&self) -> DrawRow {
        let ids = self.tokens.clone();
        let none = || DrawRow { cum: Vec::new(), target: 0.0, accept: None, ids: self.tokens.clone() };
        let q = if self.draft >= 0 {
            match self.normalised_q() {
                Some(q) => Some(q),
                None => return none(),
            }
        } else {
            None
        };
        let cum = match kernels::categorical_weights(&self.x, self.s, self.off) {
            Weights::None => return none(),
            Weights::First(i) => {
                let cum = (0..self.x.len()).map(|j| if j < i { 0.0 } else { 1.0 }).collect();
                return DrawRow { cum, target: 0.5, accept: None, ids };
            }
            Weights::Cumulative(cum) => cum,
        };
        let total = cum.last().copied().unwrap_or(0.0);
        let Some(q) = q else {
            return DrawRow { target: self.u * total, cum, accept: None, ids };
        };
        let w: Vec<f64> = cum.iter().enumerate().map(|(i, &c)| if i == 0 { c } else { c - cum[i - 1] }).collect();
        // `q` per entry (merged) and `q(d)` over the ids equal to `d`.
        let mut qe = vec![0.0f64; w.len()];
        let mut qd = 0.0f64;
        for (&t, &p) in self.q_ids.iter().zip(&q) {
            let t = t as i64;
            if t == self.draft {
                qd += p;
            }
            if let Some(e) = self.entry_of(t) {
                qe[e] += p;
            }
        }
        let accept = self.entry_of(self.draft).map(|e| Accept { entry: e, a_w: self.a * qd * total, w_e: w[e], total });
        let mut sum = 0.0;
        let residual: Vec<f64> = w
            .iter()
            .zip(&qe)
            .map(|(&wi, &qi)| {
                sum += (wi - qi * total).max(0.0);
                sum
            })
            .collect();
        if sum > 0.0 {
            DrawRow { cum: residual, target: self.u * sum, accept, ids }
        } else {
            // `q` covers `p`: the draw from `p`.
            DrawRow { target: self.u * total, cum, accept, ids }
        }
    }

    /// `q_j / Q` per pair, `None` for a bad `q` (a weight not finite and `>= 0`, or `Q = 0`).
    fn normalised_q(&self) -> Option<Vec<f64>> {
        if self.q_probs.iter().any(|p| !(p.is_finite() && *p >= 0.0)) {
            return None;
        }
        let total: f64 = self.q_probs.iter().sum();
        (total > 0.0).then(|| self.q_probs.iter().map(|p| p / total).collect())
    }

    /// The oracle's result: the accepted draft entry, else the first entry whose running sum
    /// exceeds the target (the last with a positive weight if none does), -1 for a bad row; with
    /// ids the chosen entry's token id.
    pub fn value(&self) -> f64 {
        let row = self.draw_row();
        if row.cum.is_empty() {
            return -1.0;
        }
        let at = match row.accept {
            Some(acc) if acc.a_w < acc.w_e => acc.entry,
            _ => {
                let mut last = None;
                let mut prev = 0.0;
                let mut found = None;
                for (i, &c) in row.cum.iter().enumerate() {
                    if c > prev {
                        last = Some(i);
                        if c > row.target {
                            found = Some(i);
                            break;
                        }
                    }
                    prev = c;
                }
                match found.or(last) {
                    Some(i) => i,
                    None => return -1.0,
                }
            }
        };
        match &self.tokens {
            Some(t) => t[at],
            None => at as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SampledRow;

    fn row(draft: i64, a: f64, u: f64, q_ids: &[f64], q_probs: &[f64]) -> SampledRow {
        SampledRow {
            x: vec![0.0; 4],
            u,
            a,
            s: 1.0,
            off: f64::NEG_INFINITY,
            draft,
            q_ids: q_ids.to_vec(),
            q_probs: q_probs.to_vec(),
            tokens: None,
        }
    }

    /// The CPU kernel's exact cases: p = 1/4 each, q = (1/2, 1/2, 0, 0).
    #[test]
    fn acceptance_and_residual() {
        assert_eq!(row(0, 0.49, 0.0, &[0.0, 1.0], &[1.0, 1.0]).value(), 0.0);
        assert_eq!(row(0, 0.51, 0.25, &[0.0, 1.0], &[1.0, 1.0]).value(), 2.0);
        assert_eq!(row(0, 0.51, 0.75, &[0.0, 1.0], &[1.0, 1.0]).value(), 3.0);
        // Duplicates merge, padding counts in Q only.
        assert_eq!(row(0, 0.6, 0.0, &[0.0, -1.0, 0.0, 99.0], &[1.0, 0.0, 1.0, 2.0]).value(), 1.0);
        // Bad q: -1; no draft: the plain draw.
        assert_eq!(row(0, 0.5, 0.5, &[0.0], &[f64::NAN]).value(), -1.0);
        assert_eq!(row(-1, 0.5, 0.6, &[0.0], &[f64::NAN]).value(), 2.0);
        // A list: token 5 at entry 2.
        let mut r = row(5, 0.0, 0.9, &[5.0], &[1.0]);
        r.tokens = Some(vec![7.0, 3.0, 5.0, 1.0]);
        // q(5) = 1 > p = 1/4: accepted iff a < 1/4.
        assert_eq!(r.value(), 5.0);
        r.a = 0.3;
        // Residual (1/4, 1/4, 0, 1/4): u 0.9 -> entry 3 (token 1).
        assert_eq!(r.value(), 1.0);
    }
}
