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

use crate::backend::prelude::*;
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

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
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

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// The fixed temperature of `temp`, and of `temp_ext` with `delta <= 0`.
trait FixedTemp: Sampler {
    fn fixed_t(&self) -> f32;
}

impl FixedTemp for Temp {
    fn fixed_t(&self) -> f32 {
        self.t
    }
}

impl FixedTemp for TempExt {
    fn fixed_t(&self) -> f32 {
        self.t
    }
}

fn fixed_t<S: FixedTemp>(s: &dyn std::any::Any) -> Option<f32> {
    s.downcast_ref::<S>().map(FixedTemp::fixed_t)
}

const FIXED: u32 = 0;
const EXT_LIST: u32 = 1;
const EXT_VOCAB: u32 = 2;
const EXT_MASKED: u32 = 3;

/// The key of a fixed temperature `t` on `form`: nothing for 1, none where it is not finite and
/// positive (llama.cpp keeps only the argmax, or divides by infinity: the CPU runs it).
fn fixed_key<S: FixedTemp>(t: f32, form: Form) -> Option<(StageKey, Form)> {
    if t == 1.0 {
        Some((StageKey::nothing(), form))
    } else if t > 0.0 && t.is_finite() {
        Some((StageKey::new::<S>("temp", FIXED, 0), form))
    } else {
        None
    }
}

/// A fixed temperature: on the vocabulary a pending division (folded into the stage that
/// consumes the row; a second one applies the first), on a list the division.
fn lower_fixed<S: FixedTemp>(cx: &mut Lowering<'_>, rec: Record) -> R<Record> {
    let rec = match rec {
        Record::Vocab { pending, .. } if pending.temp.is_some() => cx.materialize(rec)?,
        r => r,
    };
    let t = cx.param::<S>("t", 1, |s, out| out.f32(s.fixed_t()))?;
    Ok(match rec {
        Record::Vocab { x, touched, pending, unmasked } => {
            let scalar = Scalar::new(cx.stage(), "temp", fixed_t::<S>);
            Record::Vocab { x, touched, pending: Pending { temp: Some((t, scalar)), ..pending }, unmasked }
        }
        Record::List { ids, vals, k, init, sorted } => Record::List { ids, vals: cx.g.div(vals, t)?, k, init, sorted },
        r => r,
    })
}

fn fixed_list_stage<S: FixedTemp>(key: StageKey, stage: usize) -> Option<(graph::ListStage, Field)> {
    (key.variant() == FIXED).then(|| {
        let f = Field::of::<S>(stage, |s, out| {
            out.f32(s.fixed_t());
            out.f32(0.0);
        });
        (graph::ListStage::Temp, f)
    })
}

impl BackendStage for Temp {
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        fixed_key::<Self>(self.t, form)
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
        lower_fixed::<Self>(cx, rec)
    }

    fn list_stage(&self, key: StageKey, stage: usize) -> Option<(graph::ListStage, Field)> {
        fixed_list_stage::<Self>(key, stage)
    }
}

/// With `delta <= 0` this is `temp(t)`; otherwise the dynamic temperature: on a sorted list
/// ([`ext_list`]), on the vocabulary ([`ext_vocab`]) or after a cut on it (the masked row, its
/// finite entries counted).
impl BackendStage for TempExt {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        if self.delta <= 0.0 {
            return fixed_key::<Self>(self.t, form);
        }
        let key = |v| Some((StageKey::new::<Self>(EXT, v, 0), form));
        match form {
            Form::List(_) => key(EXT_LIST),
            Form::Vocab if n_vocab <= 1 => Some((StageKey::nothing(), form)),
            Form::Vocab => key(EXT_VOCAB),
            _ => key(EXT_MASKED),
        }
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        if key.variant() == FIXED {
            return lower_fixed::<Self>(cx, rec);
        }
        match cx.sorted(rec)? {
            Record::Vocab { x, unmasked, .. } => Ok(Record::Vocab {
                x: ext_vocab(cx, x, key.variant() == EXT_MASKED)?,
                touched: true,
                pending: Pending::default(),
                unmasked,
            }),
            Record::List { ids, vals, k, init, .. } => ext_list(cx, ids, vals, k, init),
            r => Ok(r),
        }
    }

    fn list_stage(&self, key: StageKey, stage: usize) -> Option<(graph::ListStage, Field)> {
        fixed_list_stage::<Self>(key, stage)
    }
}

/// `f32 [4, n]`: `min_t`, `max_t - min_t`, `exponent`, and 1 where the exponent is 0
/// (`powf(x, 0) = 1`, which `exp(0 * ln x)` misses at `x = 0`), as rows `[1, n]`.
fn ext_params(cx: &mut Lowering<'_>) -> R<[NodeId; 4]> {
    let par = cx.param::<TempExt>("temp_ext", 4, |s, out| {
        let (min_t, max_t) = s.range();
        out.f32(min_t);
        out.f32(max_t - min_t);
        out.f32(s.exponent);
        out.f32(if s.exponent == 0.0 { 1.0 } else { 0.0 });
    })?;
    cx.param_rows(par)
}

/// The dynamic temperature on a sorted list: the entropy of the softmax over the finite
/// candidates against `ln(len)`, then as temp: `t <= 0` keeps the first (largest) only; with one
/// candidate or none the stage does nothing (`t = 1`).
fn ext_list(cx: &mut Lowering<'_>, ids: NodeId, vals: NodeId, k: usize, init: NodeId) -> R<Record> {
    let n = cx.n();
    let par = ext_params(cx)?;
    let vals = cx.contiguous(vals)?;
    let zero = cx.fill(&[1, 1], 0.0)?;
    let one = cx.fill(&[1, n], 1.0)?;
    // The CPU chain's count: its list still holds entries that were -inf from the
    // start, but not those a stage removed.
    let gone = cx.removed(init, vals)?;
    let n_gone = cx.g.sum_rows(gone)?;
    let len = cx.g.scale_bias(n_gone, -1.0, k as f32)?;
    let (_, _, neg_h) = cx.softmax_entropy(vals)?;
    let h = cx.g.scale(neg_h, -1.0)?;
    let inv_len = cx.g.div(one, len)?;
    let ln_inv = cx.g.log(inv_len)?;
    let max_h = cx.g.scale(ln_inv, -1.0)?;
    let norm = cx.g.div(h, max_h)?;
    let dyn_t = dynamic_temp(cx, norm, par)?;
    let several = cx.g.gt(len, one)?;
    let t = cx.g.where_(several, dyn_t, one)?;
    // t <= 0: the first only, undivided.
    let warm = cx.g.gt(t, zero)?;
    let cold = cx.g.scale_bias(warm, -1.0, 1.0)?;
    let t = cx.g.where_(cold, one, t)?;
    let pos = cx.neg_positions(k)?;
    let neg_one = cx.fill(&[1, 1], -1.0)?;
    let first = cx.g.gt(pos, neg_one)?;
    let not_first = cx.g.scale_bias(first, -1.0, 1.0)?;
    let drop = cx.g.mul(not_first, cold)?;
    let ninf_full = cx.fill(&[k, n], f32::NEG_INFINITY)?;
    let vals = cx.g.where_(drop, ninf_full, vals)?;
    Ok(Record::List { ids, vals: cx.g.div(vals, t)?, k, init, sorted: true })
}

/// `temp_ext` (`delta > 0`) on the vocabulary row `x [n_vocab, n]` (pending
/// transforms applied), as the CPU sampler does on its vocabulary view: the entropy `H` of the
/// softmax over the whole row (zero probabilities add nothing) against `ln n_vocab` (every
/// entry counts, `-inf` ones included), `t = min_t + range (H / ln n)^exponent` (the power as
/// `exp(e ln x)`, `x^0 = 1` kept), and the row divided by `t`; `t <= 0` keeps the first
/// maximum, undivided, and masks every other entry (`-inf`), as llama.cpp's `temp_impl` does.
/// A NaN `t` makes the row NaN (a bad row: the CPU sampler's error).
///
/// `masked` (after a cut on the vocabulary, the masked variant): `n` is the row's
/// count of finite entries (the CPU chain's list), `ln(1 / n)` computed in the graph; with
/// `n <= 1` the stage does nothing (`t = 1`), and the masked entries stay `-inf` (also for
/// `t = +inf`, where the CPU chain's list holds only finite entries).
fn ext_vocab(cx: &mut Lowering<'_>, x: NodeId, masked: bool) -> R<NodeId> {
    let (n, nv) = (cx.n, cx.n_vocab);
    let par = ext_params(cx)?;
    let x = cx.contiguous(x)?;
    let (_, _, _, neg_h) = cx.row_entropy(x)?;
    // norm = H / max_h = (-H) / (-max_h), with max_h = -ln(1 / n) in f32 as the CPU computes it.
    let one = cx.fill(&[1, n], 1.0)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    let (neg_max_h, several) = if masked {
        // Not -inf (a NaN entry counts and stays: the row fails as a bad row).
        let dead = cx.g.equal(x, ninf)?;
        let alive = cx.g.scale_bias(dead, -1.0, 1.0)?;
        let len = cx.g.sum_rows(alive)?;
        let inv = cx.g.div(one, len)?;
        let several = cx.g.gt(len, one)?;
        (cx.g.log(inv)?, Some((alive, several)))
    } else {
        (cx.fill(&[1, 1], (1.0 / nv as f32).ln())?, None)
    };
    let norm = cx.g.div(neg_h, neg_max_h)?;
    let mut dyn_t = dynamic_temp(cx, norm, par)?;
    if let Some((_, several)) = several {
        dyn_t = cx.g.where_(several, dyn_t, one)?;
    }
    // t <= 0 (a NaN t is not: it divides the row into NaN).
    let zero = cx.fill(&[1, 1], 0.0)?;
    let neg_t = cx.g.neg(dyn_t)?;
    let cold = cx.g.ge(neg_t, zero)?;
    let t = cx.g.where_(cold, one, dyn_t)?;
    let at = cx.g.argmax(x)?;
    let at = cx.g.cast(at, DType::F32)?;
    let pos = cx.g.arange(DType::F32, &[nv, n], 0.0, 1.0)?;
    let first = cx.g.equal(pos, at)?;
    let warm = cx.g.scale_bias(cold, -1.0, 1.0)?;
    let keep = cx.g.add(first, warm)?;
    let x = cx.g.where_(keep, x, ninf)?;
    let divided = cx.g.div(x, t)?;
    match several {
        // -inf / +inf would be NaN: the masked entries stay -inf.
        Some((alive, _)) => cx.g.where_(alive, divided, ninf),
        None => Ok(divided),
    }
}

/// temp_ext's dynamic temperature `min_t + range norm^e` (`[1, n]`) for the normalised entropy
/// `norm`, from its parameter rows `[min_t, range, e, e0]` (`e0`: 1 where `e = 0`, keeping
/// `x^0 = 1`), the power as `exp(e ln norm)`: the list form and the vocabulary form alike.
fn dynamic_temp(cx: &mut Lowering<'_>, norm: NodeId, [min_t, range, expo, expo0]: [NodeId; 4]) -> R<NodeId> {
    let one = cx.fill(&[1, cx.n], 1.0)?;
    let ln_norm = cx.g.log(norm)?;
    let e_ln = cx.g.mul(ln_norm, expo)?;
    let pow = cx.g.exp(e_ln)?;
    let pow = cx.g.where_(expo0, one, pow)?;
    let spread = cx.g.mul(range, pow)?;
    cx.g.add(min_t, spread)
}
