//! A request's sampling fields mapped onto a sampler chain, as llama-server builds its chain
//! (`common/sampling.cpp`): logit biases first, then the `samplers` order (default
//! `penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature`) and `dist`, or the
//! temperature and mirostat (v1 or v2) where `mirostat` is set. A temperature of 0 or less picks
//! the most likely token (`greedy` after the biases, penalties and DRY).
//!
//! Absent fields take llama-server's defaults (`common_params_sampling`): `temperature` 0.8,
//! `top_k` 40, `top_p` 0.95, `min_p` 0.05, `typical_p` 1, `repeat_last_n` 64, `repeat_penalty` 1,
//! `presence_penalty` 0, `frequency_penalty` 0, `dry_multiplier` 0, `dry_base` 1.75,
//! `dry_allowed_length` 2, `dry_penalty_last_n` -1, `xtc_probability` 0, `xtc_threshold` 0.1,
//! `top_n_sigma` -1, `mirostat` 0, `mirostat_tau` 5, `mirostat_eta` 0.1, `min_keep` 0,
//! `dry_sequence_breakers` `["\n", ":", "\"", "*"]` (a non-empty array of strings, as
//! llama-server requires; turned into token sequences over the model's vocabulary as llama.cpp's
//! DRY does, `sampling::samplers::dry_breakers`); `seed` absent or -1: a fresh random seed per
//! request (returned in the response). Stages at their disabled values add nothing to the
//! chain.

use super::api::{ApiError, Fields};
use serde_json::Value;

/// One stage of the `samplers` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Repetition, frequency and presence penalties.
    Penalties,
    /// DRY.
    Dry,
    /// Top-n-sigma.
    TopNSigma,
    /// Top-k.
    TopK,
    /// Locally typical sampling.
    Typical,
    /// Top-p.
    TopP,
    /// Min-p.
    MinP,
    /// XTC.
    Xtc,
    /// Temperature.
    Temperature,
}

const DEFAULT_ORDER: [Stage; 9] = [
    Stage::Penalties,
    Stage::Dry,
    Stage::TopNSigma,
    Stage::TopK,
    Stage::Typical,
    Stage::TopP,
    Stage::MinP,
    Stage::Xtc,
    Stage::Temperature,
];

/// The stage a sampler name means, as llama.cpp's `common_sampler_types_from_names` reads it:
/// the canonical names, their kebab-case and no-underscore forms, `nucleus`, `temp` and `typ`
/// (and `typical_p`, `typical`). `None` for a name this chain has no stage for (`infill`,
/// `adaptive_p`) or does not know.
pub(crate) fn stage_named(name: &str) -> Option<Stage> {
    Some(match name.replace(['-', '_'], "").as_str() {
        "penalties" => Stage::Penalties,
        "dry" => Stage::Dry,
        "topnsigma" => Stage::TopNSigma,
        "topk" => Stage::TopK,
        "typp" | "typ" | "typicalp" | "typical" => Stage::Typical,
        "topp" | "nucleus" => Stage::TopP,
        "minp" => Stage::MinP,
        "xtc" => Stage::Xtc,
        "temperature" | "temp" => Stage::Temperature,
        _ => return None,
    })
}

impl Stage {
    /// llama.cpp's canonical name (`common_sampler_type_to_str`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Penalties => "penalties",
            Stage::Dry => "dry",
            Stage::TopNSigma => "top_n_sigma",
            Stage::TopK => "top_k",
            Stage::Typical => "typ_p",
            Stage::TopP => "top_p",
            Stage::MinP => "min_p",
            Stage::Xtc => "xtc",
            Stage::Temperature => "temperature",
        }
    }
}

/// The sampling fields of a request.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct SamplingParams {
    pub temperature: f32,
    pub dynatemp_range: f32,
    pub dynatemp_exponent: f32,
    pub top_k: i64,
    pub top_p: f32,
    pub min_p: f32,
    pub typical_p: f32,
    pub min_keep: i64,
    pub repeat_last_n: i64,
    pub repeat_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub dry_multiplier: f32,
    pub dry_base: f32,
    pub dry_allowed_length: i64,
    pub dry_penalty_last_n: i64,
    pub dry_sequence_breakers: Vec<String>,
    pub xtc_probability: f32,
    pub xtc_threshold: f32,
    pub top_n_sigma: f32,
    pub mirostat: i64,
    pub mirostat_tau: f32,
    pub mirostat_eta: f32,
    /// `None`: draw one per request.
    pub seed: Option<u64>,
    /// `(token, bias)`; `-inf` bans.
    pub logit_bias: Vec<(u32, f32)>,
    /// The order of the chain's stages.
    pub samplers: Vec<Stage>,
}

impl Default for SamplingParams {
    /// llama-server's defaults (see the module documentation).
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            dynatemp_range: 0.0,
            dynatemp_exponent: 1.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            min_keep: 0,
            repeat_last_n: 64,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            dry_multiplier: 0.0,
            dry_base: 1.75,
            dry_allowed_length: 2,
            dry_penalty_last_n: -1,
            dry_sequence_breakers: ["\n", ":", "\"", "*"].map(String::from).to_vec(),
            xtc_probability: 0.0,
            xtc_threshold: 0.1,
            top_n_sigma: -1.0,
            mirostat: 0,
            mirostat_tau: 5.0,
            mirostat_eta: 0.1,
            seed: None,
            logit_bias: Vec::new(),
            samplers: DEFAULT_ORDER.to_vec(),
        }
    }
}

impl SamplingParams {
    /// The sampling fields of `f`, over a vocabulary of `n_vocab` tokens; absent fields take
    /// llama-server's defaults.
    pub fn from_fields(f: &Fields<'_>, n_vocab: usize) -> Result<Self, ApiError> {
        Self::from_fields_over(f, n_vocab, &SamplingParams::default())
    }

    /// The sampling fields of `f`; absent fields take `base`'s values (the model's own defaults,
    /// `crate::sampling_defaults`, over llama-server's). The seed and logit biases come from `f`
    /// alone.
    pub fn from_fields_over(f: &Fields<'_>, n_vocab: usize, base: &SamplingParams) -> Result<Self, ApiError> {
        let seed = f.int("seed", -1, -1, i64::MAX)?;
        let samplers = match f.get("samplers") {
            None => base.samplers.clone(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().and_then(stage_named))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    ApiError::invalid(
                        "samplers",
                        "`samplers` must be an array of penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature",
                    )
                })?,
            Some(_) => return Err(ApiError::invalid("samplers", "`samplers` must be an array of sampler names")),
        };
        let dry_sequence_breakers = match f.get("dry_sequence_breakers") {
            None => base.dry_sequence_breakers.clone(),
            Some(v) => v
                .as_array()
                .and_then(|a| a.iter().map(|s| s.as_str().map(String::from)).collect::<Option<Vec<_>>>())
                .filter(|a| !a.is_empty())
                .ok_or_else(|| {
                    ApiError::invalid(
                        "dry_sequence_breakers",
                        "`dry_sequence_breakers` must be a non-empty array of strings",
                    )
                })?,
        };
        let b = base;
        let repeat_penalty = f.f32("repeat_penalty", b.repeat_penalty, 0.0, 1e3)?;
        if repeat_penalty == 0.0 {
            // A positive logit divided by 0 would become +inf (the penalties stage refuses it).
            return Err(ApiError::invalid("repeat_penalty", "`repeat_penalty` must be above 0"));
        }
        Ok(SamplingParams {
            temperature: f.f32("temperature", b.temperature, -1e3, 1e3)?,
            dynatemp_range: f.f32("dynatemp_range", b.dynatemp_range, 0.0, 1e3)?,
            dynatemp_exponent: f.f32("dynatemp_exponent", b.dynatemp_exponent, 0.0, 1e3)?,
            top_k: f.int("top_k", b.top_k, -1, n_vocab as i64)?,
            top_p: f.f32("top_p", b.top_p, 0.0, 1.0)?,
            min_p: f.f32("min_p", b.min_p, 0.0, 1.0)?,
            typical_p: f.f32("typical_p", b.typical_p, 0.0, 1.0)?,
            min_keep: f.int("min_keep", b.min_keep, 0, n_vocab as i64)?,
            repeat_last_n: f.int("repeat_last_n", b.repeat_last_n, -1, 1 << 20)?,
            repeat_penalty,
            presence_penalty: f.f32("presence_penalty", b.presence_penalty, -2.0, 2.0)?,
            frequency_penalty: f.f32("frequency_penalty", b.frequency_penalty, -2.0, 2.0)?,
            dry_multiplier: f.f32("dry_multiplier", b.dry_multiplier, 0.0, 1e3)?,
            dry_base: f.f32("dry_base", b.dry_base, 1.0, 1e3)?,
            dry_allowed_length: f.int("dry_allowed_length", b.dry_allowed_length, 0, 1 << 20)?,
            dry_penalty_last_n: f.int("dry_penalty_last_n", b.dry_penalty_last_n, -1, 1 << 20)?,
            dry_sequence_breakers,
            xtc_probability: f.f32("xtc_probability", b.xtc_probability, 0.0, 1.0)?,
            xtc_threshold: f.f32("xtc_threshold", b.xtc_threshold, 0.0, 1.0)?,
            top_n_sigma: f.f32("top_n_sigma", b.top_n_sigma, -1.0, 1e3)?,
            mirostat: f.int("mirostat", b.mirostat, 0, 2)?,
            mirostat_tau: f.f32("mirostat_tau", b.mirostat_tau, 0.0, 1e3)?,
            mirostat_eta: f.f32("mirostat_eta", b.mirostat_eta, 0.0, 1e3)?,
            seed: (seed >= 0).then_some(seed as u64),
            logit_bias: logit_bias(f, n_vocab)?,
            samplers,
        })
    }

    /// The chain as a SPEC (`sampling::chain_spec`), its random stages seeded with `seed`; DRY's
    /// breakers are strings, so the SPEC parses with the model's vocabulary and tokenizer
    /// (`SpecContext::vocab`, `SpecContext::tokenizer`).
    pub fn spec(&self, seed: u64) -> String {
        let mut st: Vec<String> = Vec::new();
        if !self.logit_bias.is_empty() {
            let b: Vec<String> = self.logit_bias.iter().map(|(t, b)| format!("{t}={}", num(*b))).collect();
            st.push(format!("logit_bias({})", b.join(",")));
        }
        let penalties = format!(
            "penalties(last_n={},repeat={},freq={},present={})",
            self.repeat_last_n,
            num(self.repeat_penalty),
            num(self.frequency_penalty),
            num(self.presence_penalty)
        );
        let dry = format!(
            "dry(multiplier={},base={},allowed_length={},last_n={},breakers={})",
            num(self.dry_multiplier),
            num(self.dry_base),
            self.dry_allowed_length,
            self.dry_penalty_last_n,
            sampling::chain_spec::quote(&self.dry_sequence_breakers)
        );
        let temp = if self.dynatemp_range > 0.0 {
            format!(
                "temp_ext(t={},delta={},exponent={})",
                num(self.temperature),
                num(self.dynatemp_range),
                num(self.dynatemp_exponent)
            )
        } else {
            format!("temp(t={})", num(self.temperature))
        };
        if self.mirostat > 0 {
            st.push(temp);
            let (tau, eta) = (num(self.mirostat_tau), num(self.mirostat_eta));
            st.push(if self.mirostat == 1 {
                format!("mirostat(tau={tau},eta={eta},m=100,seed={seed})")
            } else {
                format!("mirostat_v2(tau={tau},eta={eta},seed={seed})")
            });
            return st.join(";");
        }
        if self.temperature <= 0.0 {
            // The most likely token after what changes logits; the filters cannot change it.
            for s in &self.samplers {
                match s {
                    Stage::Penalties if self.penalties_on() => st.push(penalties.clone()),
                    Stage::Dry if self.dry_multiplier > 0.0 => st.push(dry.clone()),
                    _ => {}
                }
            }
            st.push("greedy".into());
            return st.join(";");
        }
        let keep = self.min_keep;
        for s in &self.samplers {
            match s {
                Stage::Penalties if self.penalties_on() => st.push(penalties.clone()),
                Stage::Dry if self.dry_multiplier > 0.0 => st.push(dry.clone()),
                Stage::TopNSigma if self.top_n_sigma > 0.0 => {
                    st.push(format!("top_n_sigma(n={})", num(self.top_n_sigma)))
                }
                Stage::TopK if self.top_k > 0 => st.push(format!("top_k(k={})", self.top_k)),
                Stage::Typical if self.typical_p < 1.0 => {
                    st.push(format!("typical(p={},min_keep={keep})", num(self.typical_p)))
                }
                Stage::TopP if self.top_p < 1.0 => st.push(format!("top_p(p={},min_keep={keep})", num(self.top_p))),
                Stage::MinP if self.min_p > 0.0 => st.push(format!("min_p(p={},min_keep={keep})", num(self.min_p))),
                Stage::Xtc if self.xtc_probability > 0.0 => st.push(format!(
                    "xtc(p={},t={},min_keep={keep},seed={seed})",
                    num(self.xtc_probability),
                    num(self.xtc_threshold)
                )),
                Stage::Temperature => st.push(temp.clone()),
                _ => {}
            }
        }
        st.push(format!("dist(seed={seed})"));
        st.join(";")
    }

    /// The fields as llama-server's `generation_settings` (and `/props`'s
    /// `default_generation_settings.params`) name them, with `n_predict` (-1: no limit); an
    /// absent seed is llama.cpp's `LLAMA_DEFAULT_SEED`, 4294967295.
    pub fn to_json(&self, n_predict: i64) -> Value {
        serde_json::json!({
            "seed": self.seed.unwrap_or(u64::from(u32::MAX)),
            "temperature": self.temperature,
            "dynatemp_range": self.dynatemp_range,
            "dynatemp_exponent": self.dynatemp_exponent,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "top_n_sigma": self.top_n_sigma,
            "xtc_probability": self.xtc_probability,
            "xtc_threshold": self.xtc_threshold,
            "typical_p": self.typical_p,
            "repeat_last_n": self.repeat_last_n,
            "repeat_penalty": self.repeat_penalty,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "dry_multiplier": self.dry_multiplier,
            "dry_base": self.dry_base,
            "dry_allowed_length": self.dry_allowed_length,
            "dry_penalty_last_n": self.dry_penalty_last_n,
            "dry_sequence_breakers": self.dry_sequence_breakers,
            "mirostat": self.mirostat,
            "mirostat_tau": self.mirostat_tau,
            "mirostat_eta": self.mirostat_eta,
            "max_tokens": n_predict,
            "n_predict": n_predict,
            "min_keep": self.min_keep,
            "logit_bias": self.logit_bias.iter().map(|&(t, b)| serde_json::json!([t, if b == f32::NEG_INFINITY { Value::Bool(false) } else { serde_json::json!(b) }])).collect::<Vec<_>>(),
            "samplers": self.samplers.iter().map(|s| s.name()).collect::<Vec<_>>(),
        })
    }

    fn penalties_on(&self) -> bool {
        self.repeat_last_n != 0
            && (self.repeat_penalty != 1.0 || self.frequency_penalty != 0.0 || self.presence_penalty != 0.0)
    }
}

/// A number as the SPEC parser reads it back exactly (`-inf` for a ban).
fn num(x: f32) -> String {
    if x == f32::NEG_INFINITY { "-inf".into() } else { format!("{x:?}") }
}

/// OpenAI's `{"token id": bias}` object, or llama.cpp's `[[id, bias], ...]` (a bias of `false`
/// bans the token).
fn logit_bias(f: &Fields<'_>, n_vocab: usize) -> Result<Vec<(u32, f32)>, ApiError> {
    let bad = |m: String| ApiError::invalid("logit_bias", m);
    let id = |t: Option<u64>| -> Result<u32, ApiError> {
        t.and_then(|t| u32::try_from(t).ok())
            .filter(|&t| (t as usize) < n_vocab)
            .ok_or_else(|| bad(format!("`logit_bias` keys must be token ids below {n_vocab}")))
    };
    let bias = |v: &Value| -> Result<f32, ApiError> {
        match v {
            Value::Bool(false) => Ok(f32::NEG_INFINITY),
            Value::Number(n) => n
                .as_f64()
                .filter(|b| (-100.0..=100.0).contains(b))
                .map(|b| b as f32)
                .ok_or_else(|| bad("a logit bias must be between -100 and 100".into())),
            _ => Err(bad("a logit bias must be a number, or false to ban the token".into())),
        }
    };
    match f.get("logit_bias") {
        None => Ok(Vec::new()),
        Some(Value::Object(m)) => m.iter().map(|(k, v)| Ok((id(k.parse().ok())?, bias(v)?))).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|p| match p.as_array().map(Vec::as_slice) {
                Some([t, b]) => Ok((id(t.as_u64())?, bias(b)?)),
                _ => Err(bad("`logit_bias` pairs must be [token id, bias]".into())),
            })
            .collect(),
        Some(_) => Err(bad("`logit_bias` must be an object of token id to bias".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Result<SamplingParams, ApiError> {
        SamplingParams::from_fields(&Fields(v.as_object().unwrap()), 1000)
    }

    /// Parses a SPEC as the server does, over a small vocabulary (DRY's string breakers need one):
    /// token `i`'s text is `TEXTS[i]`, tokenized by greedy longest match.
    fn parse(spec: &str) -> sampling::Result<sampling::Chain> {
        const TEXTS: [&str; 8] = ["a", "b", "\n", ":", "\"", "*", "a:", ":\n"];
        let pieces: Vec<Vec<u8>> = TEXTS.iter().map(|t| t.as_bytes().to_vec()).collect();
        let vocab = std::sync::Arc::new(grammar::Vocab::new(pieces.clone(), &[]));
        let tokenize = move |text: &[u8]| {
            let (mut out, mut i) = (Vec::new(), 0);
            while i < text.len() {
                match (0..pieces.len()).filter(|&t| text[i..].starts_with(&pieces[t])).max_by_key(|&t| pieces[t].len())
                {
                    Some(t) => {
                        out.push(t as u32);
                        i += pieces[t].len();
                    }
                    None => i += 1,
                }
            }
            out
        };
        let cx = sampling::chain_spec::SpecContext {
            vocab: Some(vocab),
            tokenizer: Some(sampling::samplers::BreakerTokenizer {
                add_space_prefix: false,
                clean_spaces: false,
                tokenize: std::sync::Arc::new(tokenize),
            }),
            ..Default::default()
        };
        sampling::chain_spec::parse_with(spec, &cx)
    }

    #[test]
    fn defaults_are_llama_servers_chain() {
        assert_eq!(params(json!({})).unwrap(), SamplingParams::default());
        let p = params(json!({})).unwrap();
        assert_eq!(p.spec(7), "top_k(k=40);top_p(p=0.95,min_keep=0);min_p(p=0.05,min_keep=0);temp(t=0.8);dist(seed=7)");
        assert_eq!(p.seed, None);
        parse(&p.spec(7)).unwrap();
    }

    #[test]
    fn absent_fields_take_the_models_defaults() {
        let base = SamplingParams {
            temperature: 0.3,
            top_k: 7,
            samplers: vec![Stage::TopK, Stage::Temperature],
            ..SamplingParams::default()
        };
        let over = |v: Value| SamplingParams::from_fields_over(&Fields(v.as_object().unwrap()), 1000, &base).unwrap();
        assert_eq!(over(json!({})).spec(2), "top_k(k=7);temp(t=0.3);dist(seed=2)");
        assert_eq!(over(json!({"top_k": 3, "temperature": 0.9})).spec(2), "top_k(k=3);temp(t=0.9);dist(seed=2)");
        assert_eq!(
            over(json!({"samplers": ["min-p", "topk", "temp"]})).samplers,
            [Stage::MinP, Stage::TopK, Stage::Temperature]
        );
    }

    #[test]
    fn fields_map_onto_stages_in_the_samplers_order() {
        let p = params(json!({
            "temperature": 0.5, "top_k": 0, "repeat_penalty": 1.1, "presence_penalty": 0.5,
            "logit_bias": {"5": -1.5, "9": false}, "samplers": ["min_p", "temperature", "penalties"],
            "seed": 3, "unknown": "ignored"
        }))
        .unwrap();
        assert_eq!(
            p.spec(3),
            "logit_bias(5=-1.5,9=-inf);min_p(p=0.05,min_keep=0);temp(t=0.5);penalties(last_n=64,repeat=1.1,freq=0.0,present=0.5);dist(seed=3)"
        );
        parse(&p.spec(3)).unwrap();
        let g = params(json!({"temperature": 0, "frequency_penalty": 1})).unwrap();
        assert_eq!(g.spec(1), "penalties(last_n=64,repeat=1.0,freq=1.0,present=0.0);greedy");
        let m = params(json!({"mirostat": 2, "temperature": 0.7})).unwrap();
        assert_eq!(m.spec(4), "temp(t=0.7);mirostat_v2(tau=5.0,eta=0.1,seed=4)");
        for p in [g, m] {
            parse(&p.spec(1)).unwrap();
        }
    }

    /// Every value the fields accept, at the edges of its range, makes a chain (a bad one is a
    /// 400 naming its field, never a chain that fails to parse).
    #[test]
    fn every_accepted_value_makes_a_chain() {
        let edges: &[(&str, &[Value])] = &[
            ("temperature", &[json!(-1000), json!(0), json!(1e-6), json!(1000)]),
            ("dynatemp_range", &[json!(0), json!(0.5), json!(1000)]),
            ("dynatemp_exponent", &[json!(0), json!(1000)]),
            ("top_k", &[json!(-1), json!(0), json!(1), json!(1000)]),
            ("top_p", &[json!(0), json!(1e-6), json!(1)]),
            ("min_p", &[json!(0), json!(1)]),
            ("typical_p", &[json!(0), json!(0.5), json!(1)]),
            ("min_keep", &[json!(0), json!(1000)]),
            ("repeat_last_n", &[json!(-1), json!(0), json!(1 << 20)]),
            ("repeat_penalty", &[json!(1e-6), json!(1000)]),
            ("presence_penalty", &[json!(-2), json!(2)]),
            ("frequency_penalty", &[json!(-2), json!(2)]),
            ("dry_multiplier", &[json!(0), json!(1000)]),
            ("dry_base", &[json!(1), json!(1000)]),
            ("dry_allowed_length", &[json!(0), json!(1 << 20)]),
            ("dry_penalty_last_n", &[json!(-1), json!(0), json!(1 << 20)]),
            ("xtc_probability", &[json!(0), json!(1)]),
            ("xtc_threshold", &[json!(0), json!(1)]),
            ("top_n_sigma", &[json!(-1), json!(0), json!(1000)]),
            ("mirostat", &[json!(0), json!(1), json!(2)]),
            ("mirostat_tau", &[json!(0), json!(1000)]),
            ("mirostat_eta", &[json!(0), json!(1000)]),
        ];
        let mut failures = Vec::new();
        for (field, values) in edges {
            for v in *values {
                // With the stages that the field only tunes switched on.
                let body = json!({field.to_string(): v, "repeat_penalty": if *field == "repeat_penalty" { v.clone() } else { json!(1.1) },
                                  "dry_multiplier": if *field == "dry_multiplier" { v.clone() } else { json!(0.8) },
                                  "xtc_probability": if *field == "xtc_probability" { v.clone() } else { json!(0.5) },
                                  "mirostat": if *field == "mirostat" { v.clone() } else if field.starts_with("mirostat") { json!(2) } else { json!(0) }});
                let p = params(body.clone()).unwrap_or_else(|e| panic!("{body}: {e:?}"));
                if let Err(e) = parse(&p.spec(1)) {
                    failures.push(format!("{field} = {v}: {} -> {e}", p.spec(1)));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// DRY's breakers: llama-server's default strings, or the request's, into the SPEC quoted.
    #[test]
    fn dry_sequence_breakers_are_strings() {
        let p = params(json!({"dry_multiplier": 0.8, "temperature": 0})).unwrap();
        assert_eq!(
            p.spec(1),
            r#"dry(multiplier=0.8,base=1.75,allowed_length=2,last_n=-1,breakers="\n|:|\"|*");greedy"#
        );
        parse(&p.spec(1)).unwrap();
        let p =
            params(json!({"dry_multiplier": 0.8, "temperature": 0, "dry_sequence_breakers": ["a:", "x|y;z", "\\"]}))
                .unwrap();
        assert_eq!(p.dry_sequence_breakers, ["a:", "x|y;z", "\\"]);
        assert_eq!(
            p.spec(1),
            r#"dry(multiplier=0.8,base=1.75,allowed_length=2,last_n=-1,breakers="a:|x\|y;z|\\");greedy"#
        );
        parse(&p.spec(1)).unwrap();
        // Without DRY, no stage (and no breakers) at all.
        assert!(!params(json!({"dry_sequence_breakers": ["q"]})).unwrap().spec(1).contains("dry"));
    }

    #[test]
    fn bad_values_name_their_field() {
        for (body, field) in [
            (json!({"temperature": "hot"}), "temperature"),
            (json!({"top_p": 7}), "top_p"),
            (json!({"top_k": 1.5}), "top_k"),
            (json!({"seed": -5}), "seed"),
            (json!({"logit_bias": {"x": 1}}), "logit_bias"),
            (json!({"logit_bias": {"4000": 1}}), "logit_bias"),
            (json!({"samplers": ["top_k", "bogus"]}), "samplers"),
            (json!({"mirostat": 3}), "mirostat"),
            (json!({"repeat_penalty": 0}), "repeat_penalty"),
            (json!({"dry_sequence_breakers": []}), "dry_sequence_breakers"),
            (json!({"dry_sequence_breakers": "\n"}), "dry_sequence_breakers"),
            (json!({"dry_sequence_breakers": ["\n", 5]}), "dry_sequence_breakers"),
        ] {
            let e = params(body.clone()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(field), "{body}: {e:?}");
            assert_eq!(e.status, 400);
        }
    }
}
