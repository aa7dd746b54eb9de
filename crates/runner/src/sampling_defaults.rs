//! A model's own sampling defaults: the `general.sampling.*` keys of its GGUF (llama.cpp's
//! `LLAMA_MODEL_META_KEY_SAMPLING_*`), read as llama.cpp's `common_init_from_params` reads them and
//! laid over llama-server's defaults ([`SamplingParams::default`]) wherever the user gives no value:
//! `runner` without `--seq` and `runner serve` for a request's absent fields.
//!
//! As in llama.cpp, each value is taken as text (a number of any GGUF type, or a string) and parsed
//! from its start as an integer (`top_k`, `penalty_last_n`, `mirostat`; a float's text is cut at
//! its point, as `strtol` does) or a float (the others); `general.sampling.sequence` is sampler
//! names separated by `;` (llama.cpp's names and aliases; an unknown name or one this chain has no
//! stage for is left out, as llama.cpp does with a warning). Deliberate difference: a value outside
//! the range a request's field accepts (`top_p` above 1, `mirostat` 3, ...) is ignored rather than
//! passed to the sampler; every value left out is listed with why.

use crate::serve::params::{SamplingParams, Stage, stage_named};
use gguf::{Gguf, Value};

/// The keys, in llama.cpp's order.
pub const KEYS: [&str; 12] = [
    "general.sampling.sequence",
    "general.sampling.top_k",
    "general.sampling.top_p",
    "general.sampling.min_p",
    "general.sampling.xtc_probability",
    "general.sampling.xtc_threshold",
    "general.sampling.temp",
    "general.sampling.penalty_last_n",
    "general.sampling.penalty_repeat",
    "general.sampling.mirostat",
    "general.sampling.mirostat_tau",
    "general.sampling.mirostat_eta",
];

/// The values a model file sets (absent keys stay `None`).
#[derive(Debug, Clone, Default, PartialEq)]
#[allow(missing_docs)]
pub struct ModelSampling {
    pub samplers: Option<Vec<Stage>>,
    pub top_k: Option<i64>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub xtc_probability: Option<f32>,
    pub xtc_threshold: Option<f32>,
    pub temp: Option<f32>,
    pub penalty_last_n: Option<i64>,
    pub penalty_repeat: Option<f32>,
    pub mirostat: Option<i64>,
    pub mirostat_tau: Option<f32>,
    pub mirostat_eta: Option<f32>,
    /// `key: why` for every key present but not used (or a sampler name left out of the sequence).
    pub ignored: Vec<String>,
}

/// A value as llama.cpp's `gguf_kv_to_str` writes it, for the keys read here (numbers and
/// strings; `None` for a bool or an array, whose text parses as no number).
fn text(v: &Value) -> Option<String> {
    Some(match v {
        Value::U8(x) => x.to_string(),
        Value::I8(x) => x.to_string(),
        Value::U16(x) => x.to_string(),
        Value::I16(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::I32(x) => x.to_string(),
        Value::U64(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F32(x) => format!("{x:.6}"),
        Value::F64(x) => format!("{x:.6}"),
        Value::Str(s) => s.clone(),
        Value::Bool(_) | Value::Array(_) => return None,
    })
}

/// The integer at the start of `s` (after white space, an optional sign), as `strtol` reads it.
fn leading_int(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (sign, rest) = match t.as_bytes().first() {
        Some(b'-') => (-1, &t[1..]),
        Some(b'+') => (1, &t[1..]),
        _ => (1, t),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse::<i64>().ok().map(|v| sign * v)
}

/// The float at the start of `s` (digits, a point, an exponent), as `strtof` reads a decimal.
fn leading_float(s: &str) -> Option<f32> {
    let t = s.trim_start().as_bytes();
    let mut i = usize::from(matches!(t.first(), Some(b'-' | b'+')));
    let int = t[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    i += int;
    let mut frac = 0;
    if t.get(i) == Some(&b'.') {
        frac = t[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
        i += 1 + frac;
    }
    if int + frac == 0 {
        return None;
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        let j = i + 1 + usize::from(matches!(t.get(i + 1), Some(b'-' | b'+')));
        let exp = t[j.min(t.len())..].iter().take_while(|b| b.is_ascii_digit()).count();
        if exp > 0 {
            i = j + exp;
        }
    }
    std::str::from_utf8(&t[..i]).ok()?.trim_end_matches('.').parse::<f32>().ok()
}

/// The number at `key` as `parse` reads its text, where it lies in `lo..=hi` (else noted in
/// `ignored`, as is a value whose text is no number); `None` for an absent key.
fn number<T: PartialOrd + std::fmt::Display + Copy>(
    g: &Gguf,
    key: &str,
    parse: fn(&str) -> Option<T>,
    lo: T,
    hi: T,
    ignored: &mut Vec<String>,
) -> Option<T> {
    let v = g.get(key)?;
    match text(v).as_deref().and_then(parse) {
        // NaN fails both comparisons: out of range.
        Some(x) if lo <= x && x <= hi => Some(x),
        Some(x) => {
            ignored.push(format!("{key}: {x} is outside {lo}..={hi}"));
            None
        }
        None => {
            ignored.push(format!("{key}: {v:?} is not a number"));
            None
        }
    }
}

impl ModelSampling {
    /// The keys `g` sets.
    pub fn from_gguf(g: &Gguf) -> ModelSampling {
        let mut m = ModelSampling::default();
        let mut ignored = Vec::new();
        let int = |key, lo, hi, ignored: &mut Vec<String>| number(g, key, leading_int, lo, hi, ignored);
        let float = |key, lo, hi, ignored: &mut Vec<String>| number(g, key, leading_float, lo, hi, ignored);
        if let Some(v) = g.get(KEYS[0]) {
            match v {
                Value::Str(s) => {
                    let mut stages = Vec::new();
                    for name in s.split(';').filter(|n| !n.is_empty()) {
                        match stage_named(name) {
                            Some(st) => stages.push(st),
                            None => ignored.push(format!("{}: no stage for the sampler `{name}`", KEYS[0])),
                        }
                    }
                    if stages.is_empty() {
                        ignored.push(format!("{}: {s:?} names no sampler", KEYS[0]));
                    } else {
                        m.samplers = Some(stages);
                    }
                }
                other => ignored.push(format!("{}: {other:?} is not a string", KEYS[0])),
            }
        }
        m.top_k = int(KEYS[1], -1, i64::from(i32::MAX), &mut ignored);
        m.top_p = float(KEYS[2], 0.0, 1.0, &mut ignored);
        m.min_p = float(KEYS[3], 0.0, 1.0, &mut ignored);
        m.xtc_probability = float(KEYS[4], 0.0, 1.0, &mut ignored);
        m.xtc_threshold = float(KEYS[5], 0.0, 1.0, &mut ignored);
        m.temp = float(KEYS[6], -1e3, 1e3, &mut ignored);
        m.penalty_last_n = int(KEYS[7], -1, 1 << 20, &mut ignored);
        m.penalty_repeat = float(KEYS[8], f32::MIN_POSITIVE, 1e3, &mut ignored);
        m.mirostat = int(KEYS[9], 0, 2, &mut ignored);
        m.mirostat_tau = float(KEYS[10], 0.0, 1e3, &mut ignored);
        m.mirostat_eta = float(KEYS[11], 0.0, 1e3, &mut ignored);
        m.ignored = ignored;
        m
    }

    /// Whether the file sets nothing usable.
    pub fn is_empty(&self) -> bool {
        self.set().is_empty()
    }

    /// `(key, value)` for every value the file sets, in [`KEYS`]' order.
    pub fn set(&self) -> Vec<(&'static str, String)> {
        let f = |x: Option<f32>| x.map(|v| format!("{v}"));
        let i = |x: Option<i64>| x.map(|v| v.to_string());
        let seq = self.samplers.as_ref().map(|s| s.iter().map(|st| format!("{st:?}")).collect::<Vec<_>>().join(";"));
        let values = [
            seq,
            i(self.top_k),
            f(self.top_p),
            f(self.min_p),
            f(self.xtc_probability),
            f(self.xtc_threshold),
            f(self.temp),
            i(self.penalty_last_n),
            f(self.penalty_repeat),
            i(self.mirostat),
            f(self.mirostat_tau),
            f(self.mirostat_eta),
        ];
        KEYS.iter().zip(values).filter_map(|(k, v)| v.map(|v| (*k, v))).collect()
    }

    /// `base` with the file's values in place of its own.
    pub fn apply(&self, base: &SamplingParams) -> SamplingParams {
        let mut p = base.clone();
        if let Some(s) = &self.samplers {
            p.samplers = s.clone();
        }
        p.top_k = self.top_k.unwrap_or(p.top_k);
        p.top_p = self.top_p.unwrap_or(p.top_p);
        p.min_p = self.min_p.unwrap_or(p.min_p);
        p.xtc_probability = self.xtc_probability.unwrap_or(p.xtc_probability);
        p.xtc_threshold = self.xtc_threshold.unwrap_or(p.xtc_threshold);
        p.temperature = self.temp.unwrap_or(p.temperature);
        p.repeat_last_n = self.penalty_last_n.unwrap_or(p.repeat_last_n);
        p.repeat_penalty = self.penalty_repeat.unwrap_or(p.repeat_penalty);
        p.mirostat = self.mirostat.unwrap_or(p.mirostat);
        p.mirostat_tau = self.mirostat_tau.unwrap_or(p.mirostat_tau);
        p.mirostat_eta = self.mirostat_eta.unwrap_or(p.mirostat_eta);
        p
    }

    /// Lines saying where the default chain's settings come from: one per value the file sets,
    /// one per value it left out, then that the rest are llama-server's defaults.
    pub fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> =
            self.set().into_iter().map(|(k, v)| format!("{k} = {v} (from the model file)")).collect();
        out.extend(self.ignored.iter().map(|i| format!("ignored {i}")));
        out.push("everything else: llama-server's defaults".into());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gguf::write::Writer;

    fn read(kv: &[(&str, Value)]) -> ModelSampling {
        let w = kv.iter().fold(Writer::default(), |w, (k, v)| w.kv(k, v.clone()));
        ModelSampling::from_gguf(&Gguf::from_bytes("t", w.bytes()).unwrap())
    }

    #[test]
    fn keys_of_any_number_type_or_text_set_the_default_chain() {
        let m = read(&[
            ("general.sampling.sequence", Value::Str("penalties;top-k;nucleus;infill;minp;temp".into())),
            ("general.sampling.top_k", Value::F32(20.7)),
            ("general.sampling.top_p", Value::Str("0.8 (tuned)".into())),
            ("general.sampling.min_p", Value::F64(0.1)),
            ("general.sampling.temp", Value::U8(0)),
            ("general.sampling.penalty_last_n", Value::I32(32)),
            ("general.sampling.penalty_repeat", Value::Str("1.1".into())),
            ("general.sampling.mirostat", Value::U32(3)),
            ("general.sampling.xtc_probability", Value::Bool(true)),
        ]);
        assert_eq!(m.samplers, Some(vec![Stage::Penalties, Stage::TopK, Stage::TopP, Stage::MinP, Stage::Temperature]));
        assert_eq!((m.top_k, m.top_p, m.min_p, m.temp), (Some(20), Some(0.8), Some(0.1), Some(0.0)));
        assert_eq!((m.penalty_last_n, m.penalty_repeat), (Some(32), Some(1.1)));
        assert_eq!((m.mirostat, m.xtc_probability), (None, None));
        assert_eq!(m.ignored.len(), 3, "{:?}", m.ignored);
        assert!(m.ignored.iter().any(|i| i.contains("`infill`")), "{:?}", m.ignored);
        assert!(m.ignored.iter().any(|i| i.starts_with("general.sampling.mirostat:")), "{:?}", m.ignored);
        let p = m.apply(&SamplingParams::default());
        // A temperature of 0 is greedy after the penalties.
        assert_eq!(p.spec(1), "penalties(last_n=32,repeat=1.1,freq=0.0,present=0.0);greedy");
        let hot = read(&[("general.sampling.top_k", Value::I64(5)), ("general.sampling.temp", Value::F32(0.6))]);
        let spec = hot.apply(&SamplingParams::default()).spec(9);
        assert_eq!(spec, "top_k(k=5);top_p(p=0.95,min_keep=0);min_p(p=0.05,min_keep=0);temp(t=0.6);dist(seed=9)");
        sampling::chain_spec::parse(&spec, 0).unwrap();
        assert_eq!(hot.describe()[0], "general.sampling.top_k = 5 (from the model file)");
    }

    #[test]
    fn a_file_without_the_keys_changes_nothing() {
        let m = read(&[("general.architecture", Value::Str("llama".into()))]);
        assert!(m.is_empty() && m.ignored.is_empty());
        assert_eq!(m.apply(&SamplingParams::default()), SamplingParams::default());
        let bad = read(&[("general.sampling.sequence", Value::Str("infill;bogus".into()))]);
        assert!(bad.is_empty());
        assert_eq!(bad.ignored.len(), 3, "{:?}", bad.ignored);
    }

    #[test]
    fn numbers_parse_from_their_start_as_strtol_and_strtof_do() {
        assert_eq!(leading_int(" 20"), Some(20));
        assert_eq!(leading_int("20.700000"), Some(20));
        assert_eq!(leading_int("-1"), Some(-1));
        assert_eq!(leading_int("x1"), None);
        assert_eq!(leading_float("0.95"), Some(0.95));
        assert_eq!(leading_float("0.9abc"), Some(0.9));
        assert_eq!(leading_float("1e-2"), Some(0.01));
        assert_eq!(leading_float("5."), Some(5.0));
        assert_eq!(leading_float(".5"), Some(0.5));
        assert_eq!(leading_float("7e"), Some(7.0));
        assert_eq!(leading_float("abc"), None);
        assert_eq!(leading_float("-"), None);
    }
}
