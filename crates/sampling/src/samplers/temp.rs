//! `temp` and `temp_ext`: temperature scaling (llama.cpp's `llama_sampler_init_temp` and
//! `llama_sampler_init_temp_ext`, "dynamic temperature").
//!
//! `temp(t)` divides every logit by `t`. On the vocabulary view the division is deferred (a
//! pending divisor that the next kernel applies on the fly), so `temp` itself costs nothing.
//!
//! `temp_ext(t, delta, exponent)`: with `delta > 0` the temperature is
//! `min_t + (max_t - min_t) * (H / ln n)^exponent` with `min_t = max(0, t - delta)`,
//! `max_t = t + delta` and `H` the entropy of the softmax over the `n` candidates (zero
//! probabilities contribute nothing); then the probabilities are recomputed. With `delta <= 0` it
//! is `temp(t)`. One candidate or none: unchanged. On the vocabulary view it never sorts: the
//! entropy over the row in token order, the row divided in place, still a vocabulary view (a
//! deliberate difference, docs/SAMPLING.md: a later `dist` walks token-id order).
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_temp_impl`,
//! `llama_sampler_init_temp`, `llama_sampler_temp_ext_apply`):
//! * `t <= 0`, `-inf` included (a dynamic temperature too): only the first maximum survives
//!   (`temp_impl` keeps its logit and sets the others to `-inf`; here they are removed, see
//!   docs/SAMPLING.md, "Deliberate differences");
//! * `t = 1`: unchanged (`init_temp` returns the empty sampler);
//! * `t = +inf`: every finite logit becomes `logit / inf = ±0`, a uniform distribution; a masked
//!   (`-inf`) candidate would become `-inf / inf = NaN` in llama.cpp, so that case is an error
//!   (`InvalidParam` for `t`, raised when the stage runs);
//! * `temp_ext`: `delta <= 0`, `-inf` included, is `temp(t)`; `delta = +inf` gives `max_t = inf`
//!   and a dynamic temperature of `inf` (see `t = +inf`) unless the entropy is 0; an `exponent`
//!   of any sign or `±inf` is used as `powf` uses it (e.g. `exponent < 0` with `H = 0`:
//!   `powf(0, exponent) = inf`). `t` and `delta` whose range `max_t - min_t` is NaN (`t = +inf`
//!   with a finite `delta > 0`: `inf - inf`; `t = -inf` with `delta = +inf`) are errors at
//!   construction, and a dynamic temperature that comes out NaN for a row (`0 * inf` or
//!   `inf * 0` in the formula) is an error when the stage runs: llama.cpp would divide every
//!   logit by NaN;
//! * NaN `t`, `delta` or `exponent`: error (llama.cpp's `temp <= 0` and `delta > 0` tests would
//!   both be false: accidental).
//!
//! After a cut on the vocabulary (the CPU chain's token-order list that stands for the masked row,
//! `Candidates::cut_len`) a dynamic `temp_ext` runs the vocabulary view's form on the list, `n` its
//! finite entries, never sorting it (docs/SAMPLING.md, "Deliberate differences").

use crate::candidates::{Candidates, TokenData, check_list, check_scan};
use crate::error::{Result, invalid, not_nan};
use crate::kernels;
use crate::sampler::Sampler;

/// Applies temperature `t` as llama.cpp's `llama_sampler_temp_impl` does. `what` describes the
/// temperature for an error (the parameter, or how a dynamic temperature came about).
pub(crate) fn temp_impl(
    stage: &'static str,
    cur: &mut Candidates<'_>,
    t: f32,
    what: &dyn Fn() -> String,
) -> Result<()> {
    if t.is_nan() {
        return Err(invalid(stage, "t", what(), "the temperature is NaN: llama.cpp would divide every logit by NaN"));
    }
    if t <= 0.0 {
        if let Some((row, div)) = cur.vocab_row() {
            let (i, m, bad) = kernels::argmax(row);
            check_scan(stage, row, bad, m)?;
            let logit = if div == 1.0 { m } else { m / div };
            cur.set_list(vec![TokenData { id: i as u32, logit, p: 0.0 }], true);
            return Ok(());
        }
        let list = cur.list_mut(stage)?;
        check_list(stage, list)?;
        let mut best = 0;
        for (i, t) in list.iter().enumerate().skip(1) {
            if t.logit > list[best].logit {
                best = i;
            }
        }
        let keep = list[best];
        cur.set_list(vec![keep], true);
        return Ok(());
    }
    if t == f32::INFINITY {
        // Every finite logit becomes ±0; llama.cpp would make a masked one NaN.
        let list = cur.list_mut(stage)?;
        check_list(stage, list)?;
        if list.iter().any(|e| e.logit == f32::NEG_INFINITY) {
            return Err(invalid(
                stage,
                "t",
                what(),
                "an infinite temperature with masked (-inf) candidates: llama.cpp computes -inf / inf = NaN",
            ));
        }
        for e in list.iter_mut() {
            e.logit /= t;
        }
        return Ok(());
    }
    if cur.vocab_row().is_some() {
        cur.set_div(t);
        return Ok(());
    }
    for e in cur.list_mut(stage)?.iter_mut() {
        e.logit /= t;
    }
    Ok(())
}

/// Temperature.
#[derive(Debug, Clone)]
pub struct Temp {
    t: f32,
}

impl Temp {
    /// Temperature `t` (`t <= 0`: keep only the max, as in llama.cpp; `+inf`: uniform; NaN:
    /// error).
    pub fn new(t: f32) -> Result<Self> {
        not_nan("temp", "t", t)?;
        Ok(Self { t })
    }
}

impl Sampler for Temp {
    fn name(&self) -> &'static str {
        "temp"
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        temp_impl("temp", cur, self.t, &|| self.t.to_string())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        Some(crate::backend::BackendStage::Temp { t: self.t })
    }
}

/// Dynamic temperature.
#[derive(Debug, Clone)]
pub struct TempExt {
    t: f32,
    delta: f32,
    exponent: f32,
}

const EXT: &str = "temp_ext";

impl TempExt {
    /// Dynamic temperature around `t` with range `delta` and `exponent` (none NaN; with
    /// `delta > 0`, `max_t - min_t` must not be NaN).
    pub fn new(t: f32, delta: f32, exponent: f32) -> Result<Self> {
        not_nan(EXT, "t", t)?;
        not_nan(EXT, "delta", delta)?;
        not_nan(EXT, "exponent", exponent)?;
        let s = Self { t, delta, exponent };
        if delta > 0.0 {
            let (min_t, max_t) = s.range();
            if (max_t - min_t).is_nan() {
                return Err(invalid(
                    EXT,
                    if t == f32::INFINITY { "t" } else { "delta" },
                    format!("t = {t}, delta = {delta}"),
                    "the temperature range max_t - min_t = (t + delta) - max(0, t - delta) is NaN",
                ));
            }
        }
        Ok(s)
    }

    /// llama.cpp's `min_temp = max(0, t - delta)` and `max_temp = t + delta` (`std::max` returns
    /// 0 for a NaN `t - delta`, as `f32::max` does).
    fn range(&self) -> (f32, f32) {
        ((self.t - self.delta).max(0.0), self.t + self.delta)
    }

    /// The dynamic temperature for the normalised entropy `norm`.
    fn dynamic(&self, norm: f32) -> f32 {
        let (min_t, max_t) = self.range();
        min_t + (max_t - min_t) * norm.powf(self.exponent)
    }

    /// How the dynamic temperature `dyn_t` came about, for an error.
    fn describe(&self, dyn_t: f32, norm: f32) -> String {
        let (min_t, max_t) = self.range();
        format!(
            "{dyn_t} (the dynamic temperature {min_t} + ({max_t} - {min_t}) * {norm}^{} of t = {}, delta = {})",
            self.exponent, self.t, self.delta
        )
    }

    /// On the vocabulary view (at least two tokens): the entropy of the softmax over the whole
    /// row in vocabulary order (every token counts for `max_entropy`, `-inf` ones included, as in
    /// the list), then the row divided by the dynamic temperature in place, still a vocabulary
    /// view in vocabulary order, never sorted (docs/SAMPLING.md, "Deliberate differences"). A
    /// temperature `<= 0` keeps the first maximum and sets every other token to `-inf`, as
    /// llama.cpp's `temp_impl` does (the view keeps its size, so a later stage counts the whole
    /// vocabulary as llama.cpp's would); NaN is an error, and so is `+inf` with a `-inf` token
    /// (see the module documentation).
    fn apply_vocab(&self, cur: &mut Candidates<'_>, max_entropy: f32) -> Result<()> {
        cur.flush_div();
        let (row, _) = cur.vocab_row().expect("a vocabulary view");
        let (max, bad) = kernels::max_bad(row);
        check_scan(EXT, row, bad, max)?;
        let norm = entropy(row, max) as f32 / max_entropy;
        let dyn_t = self.dynamic(norm);
        if dyn_t.is_nan() || (dyn_t == f32::INFINITY && row.contains(&f32::NEG_INFINITY)) {
            // temp_impl's errors.
            return temp_impl(EXT, cur, dyn_t, &|| self.describe(dyn_t, norm));
        }
        let (first, _, _) = kernels::argmax(row);
        let row = cur.vocab_logits_mut().expect("a vocabulary view");
        if dyn_t <= 0.0 {
            for (i, x) in row.iter_mut().enumerate() {
                if i != first {
                    *x = f32::NEG_INFINITY;
                }
            }
        } else {
            for x in row.iter_mut() {
                *x /= dyn_t;
            }
        }
        Ok(())
    }
}

impl TempExt {
    /// After a cut on the vocabulary (a token-order list of `n >= 2` finite entries, standing for
    /// the masked row): the vocabulary view's form over the list, `n` the list's length (the
    /// masked row's finite entries), the entropy summed in token order in `f64` as on the view
    /// (the masked entries add nothing), the list divided in place (still in token order), and a
    /// temperature `<= 0` keeping the first maximum only.
    fn apply_cut(&self, cur: &mut Candidates<'_>, n: usize) -> Result<()> {
        let max_entropy = -(1.0 / n as f32).ln();
        let list = cur.list_mut(EXT)?;
        check_list(EXT, list)?;
        let logits: Vec<f32> = list.iter().map(|t| t.logit).collect();
        let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        let norm = entropy(&logits, max) as f32 / max_entropy;
        let dyn_t = self.dynamic(norm);
        if dyn_t.is_nan() {
            return temp_impl(EXT, cur, dyn_t, &|| self.describe(dyn_t, norm));
        }
        if dyn_t <= 0.0 {
            let first = logits.iter().position(|&x| x == max).unwrap_or(0);
            let keep = list[first];
            list.clear();
            list.push(keep);
        } else {
            for t in list.iter_mut() {
                t.logit /= dyn_t;
            }
        }
        cur.set_selected(None);
        Ok(())
    }
}

/// The entropy (in `f64`) of the softmax of `logits` (maximum `max`), with the CPU chain's
/// softmax arithmetic (`Candidates::softmax`): f32 exponentials, an f64 sum, `p` scaled by its
/// f32 inverse; `-inf` entries and zero probabilities add nothing (an f32 running sum over a
/// whole vocabulary drifts, so the sum is `f64`).
fn entropy(logits: &[f32], max: f32) -> f64 {
    let e: Vec<f32> = logits.iter().map(|&x| kernels::exp_neg(x - max)).collect();
    let sum: f64 = e.iter().map(|&v| f64::from(v)).sum();
    let inv = (1.0 / sum) as f32;
    let mut entropy = 0.0f64;
    for &v in &e {
        let p = v * inv;
        if p > 0.0 {
            // `ln p` of the f32 `p` (a one-hot row's `p = 1` gives exactly 0: entropy 0).
            entropy -= f64::from(p) * f64::from(p.ln());
        }
    }
    entropy
}

impl Sampler for TempExt {
    fn name(&self) -> &'static str {
        EXT
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.delta <= 0.0 {
            return temp_impl(EXT, cur, self.t, &|| self.t.to_string());
        }
        if let Some(n) = cur.cut_len() {
            return if n <= 1 { Ok(()) } else { self.apply_cut(cur, n) };
        }
        if cur.len() <= 1 {
            return Ok(());
        }
        // llama.cpp: -logf(1.0f / size).
        let max_entropy = -(1.0 / cur.len() as f32).ln();
        if cur.vocab_row().is_some() {
            return self.apply_vocab(cur, max_entropy);
        }
        cur.softmax(EXT, true)?;
        let list = cur.list(EXT)?;
        let mut entropy = 0.0f32;
        for t in list {
            if t.p > 0.0 {
                entropy -= t.p * t.p.ln();
            }
        }
        let dyn_t = self.dynamic(entropy / max_entropy);
        temp_impl(EXT, cur, dyn_t, &|| self.describe(dyn_t, entropy / max_entropy))?;
        let list = cur.list_mut(EXT)?;
        let max = f64::from(list[0].logit);
        let mut sum = 0.0f64;
        for t in list.iter_mut() {
            let p = (f64::from(t.logit) - max).exp();
            t.p = p as f32;
            sum += p;
        }
        for t in list.iter_mut() {
            t.p = (f64::from(t.p) / sum) as f32;
        }
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    /// With `delta <= 0` this is `temp(t)`; otherwise the dynamic temperature (on a list or the
    /// vocabulary).
    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        if self.delta <= 0.0 {
            return Some(crate::backend::BackendStage::Temp { t: self.t });
        }
        let (min_t, max_t) = self.range();
        Some(crate::backend::BackendStage::TempExt { min_t, range: max_t - min_t, exponent: self.exponent })
    }
}
