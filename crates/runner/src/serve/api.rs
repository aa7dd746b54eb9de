//! The OpenAI request bodies: parsed from JSON by hand so that every invalid value is a 400 whose
//! OpenAI-style error body names the field (`temperature: "hot"`, `max_tokens: -5`, `top_p: 7`,
//! malformed JSON), unknown fields ignored as OpenAI does, and absent fields taking
//! llama-server's defaults (see [`super::params`]).

use super::params::SamplingParams;
use serde_json::{Map, Value, json};

/// An error answered to a client: status, message, and the field at fault.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// What is wrong.
    pub message: String,
    /// The request field at fault.
    pub param: Option<String>,
    /// OpenAI's error type (`invalid_request_error`, `server_error`, ...).
    pub kind: &'static str,
}

impl ApiError {
    /// A 400 naming `param`.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        ApiError { status: 400, message: message.into(), param: Some(param.to_string()), kind: "invalid_request_error" }
    }

    /// An error with no field to name.
    pub fn status(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), param: None, kind }
    }

    /// The OpenAI error body.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.status}})
    }
}

/// The fields of a request object, read with their types and ranges checked; `null` counts as
/// absent.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a>(pub &'a Map<String, Value>);

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Fields<'a> {
    /// The value of `key`, `None` where absent or null.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// A number in `lo..=hi`.
    pub fn f32(&self, key: &str, default: f32, lo: f32, hi: f32) -> Result<f32, ApiError> {
        let Some(v) = self.get(key) else { return Ok(default) };
        let x = v
            .as_f64()
            .ok_or_else(|| ApiError::invalid(key, format!("`{key}` must be a number, not {}", type_name(v))))?;
        if !(x.is_finite() && (f64::from(lo)..=f64::from(hi)).contains(&x)) {
            return Err(ApiError::invalid(key, format!("`{key}` must be between {lo} and {hi}, not {x}")));
        }
        Ok(x as f32)
    }

    /// An integer in `lo..=hi`.
    pub fn int(&self, key: &str, default: i64, lo: i64, hi: i64) -> Result<i64, ApiError> {
        let Some(v) = self.get(key) else { return Ok(default) };
        let x = match v {
            Value::Number(n) => {
                n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
            }
            _ => None,
        }
        .ok_or_else(|| ApiError::invalid(key, format!("`{key}` must be an integer, not {}", type_name(v))))?;
        if !(lo..=hi).contains(&x) {
            return Err(ApiError::invalid(key, format!("`{key}` must be between {lo} and {hi}, not {x}")));
        }
        Ok(x)
    }

    /// A boolean.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool, ApiError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(ApiError::invalid(key, format!("`{key}` must be a boolean, not {}", type_name(v)))),
        }
    }

    /// A string.
    pub fn str(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(ApiError::invalid(key, format!("`{key}` must be a string, not {}", type_name(v)))),
        }
    }
}

/// What to generate from.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Text, tokenized with the model's tokenizer.
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
    /// Chat messages (`role`, `content`), rendered with the model's chat template.
    Chat(Vec<Value>),
}

/// A constraint on the output's text.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A GBNF grammar (llama.cpp's `grammar` field).
    Grammar(String),
    /// A JSON schema (`response_format` of type `json_schema`, or llama.cpp's `json_schema`).
    Schema(Value),
}

/// A parsed completion or chat completion request.
#[derive(Debug, Clone)]
pub struct Request {
    /// The prompt.
    pub prompt: Prompt,
    /// Tokens to generate at most (`None`: until the context is full).
    pub max_tokens: Option<usize>,
    /// Choices to generate (each a sequence of its own, seed `seed + index`).
    pub n: usize,
    /// Server-sent events.
    pub stream: bool,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Log-probabilities: `Some(n)` reads back the `n` most likely tokens with each token
    /// (`Some(0)`: the chosen token's only).
    pub logprobs: Option<usize>,
    /// Sampling parameters.
    pub sampling: SamplingParams,
    /// A grammar or schema the output must follow.
    pub constraint: Option<Constraint>,
    /// Never stop at end-of-generation tokens (llama.cpp's `ignore_eos`).
    pub ignore_eos: bool,
    /// Reuse a slot's cells that hold a prefix of the prompt (llama-server's `cache_prompt`,
    /// default true).
    pub cache_prompt: bool,
    /// A reasoning budget (llama-server's `reasoning_budget_tokens` and its tags), where the
    /// budget is not -1.
    pub reasoning: Option<Reasoning>,
    /// With `logprobs`: the probabilities after the sampler chain instead of the raw logits'
    /// log-probabilities (llama-server's `post_sampling_probs`; `/completion` only).
    pub post_sampling: bool,
    /// The slot to run in (llama-server's `id_slot`; `/completion` only): it waits for that slot.
    pub id_slot: Option<usize>,
}

/// A request's reasoning budget: `budget` tokens (0: the block ends as soon as it opens), its tags
/// as given (absent: the vocabulary's `<think>`/`</think>`, see
/// `runner::reasoning::ReasoningTags::resolve`), and the message forced before the end.
#[derive(Debug, Clone, PartialEq)]
pub struct Reasoning {
    /// The budget in tokens.
    pub budget: i64,
    /// `reasoning_budget_start_tag`.
    pub start: Option<String>,
    /// `reasoning_budget_end_tags` (or the one `reasoning_budget_end_tag`); empty: the default.
    pub end: Vec<String>,
    /// `reasoning_budget_message`.
    pub message: Option<String>,
}

/// The most choices a request may ask for.
pub const MAX_N: i64 = 16;
/// The most log-probabilities a token may come with.
pub const MAX_LOGPROBS: i64 = 20;

/// Parses a request body: a JSON object, else a 400.
pub fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::status(400, "invalid_request_error", format!("the body is not valid JSON: {e}")))?;
    match v {
        Value::Object(m) => Ok(m),
        other => Err(ApiError::status(
            400,
            "invalid_request_error",
            format!("the body must be a JSON object, not {}", type_name(&other)),
        )),
    }
}

fn stops(f: &Fields<'_>) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::invalid("stop", "`stop` must be a string or an array of at most 16 non-empty strings");
    match f.get("stop") {
        None => Ok(Vec::new()),
        Some(Value::String(s)) if !s.is_empty() => Ok(vec![s.clone()]),
        Some(Value::Array(a)) if a.len() <= 16 => {
            a.iter().map(|x| x.as_str().filter(|s| !s.is_empty()).map(str::to_string).ok_or_else(bad)).collect()
        }
        Some(_) => Err(bad()),
    }
}

/// The fields both endpoints share.
fn common(f: &Fields<'_>, prompt: Prompt, n_vocab: usize, base: &SamplingParams) -> Result<Request, ApiError> {
    // llama-server's `n_predict` is an alias; -1 (its default) generates until the context ends.
    let key = if f.get("max_tokens").is_some() {
        "max_tokens"
    } else if f.get("max_completion_tokens").is_some() {
        "max_completion_tokens"
    } else {
        "n_predict"
    };
    let max = f.int(key, -1, -1, 1 << 30)?;
    if max == 0 {
        return Err(ApiError::invalid(key, format!("`{key}` must be at least 1 (or -1: until the context is full)")));
    }
    let constraint = constraint(f)?;
    Ok(Request {
        prompt,
        max_tokens: (max >= 0).then_some(max as usize),
        n: f.int("n", 1, 1, MAX_N)? as usize,
        stream: f.bool("stream", false)?,
        stop: stops(f)?,
        logprobs: None,
        sampling: SamplingParams::from_fields_over(f, n_vocab, base)?,
        constraint,
        ignore_eos: f.bool("ignore_eos", false)?,
        cache_prompt: f.bool("cache_prompt", true)?,
        reasoning: reasoning(f)?,
        post_sampling: false,
        id_slot: None,
    })
}

/// llama-server's reasoning budget fields: `reasoning_budget_tokens` (-1, the default: none),
/// `reasoning_budget_start_tag`, `reasoning_budget_end_tags` (an array of strings; or
/// `reasoning_budget_end_tag`, one string) and `reasoning_budget_message`.
fn reasoning(f: &Fields<'_>) -> Result<Option<Reasoning>, ApiError> {
    let budget = f.int("reasoning_budget_tokens", -1, -1, i64::from(i32::MAX))?;
    let start = f.str("reasoning_budget_start_tag")?.map(str::to_string);
    let message = f.str("reasoning_budget_message")?.map(str::to_string);
    let end = match (f.get("reasoning_budget_end_tags"), f.get("reasoning_budget_end_tag")) {
        (Some(v), _) => v
            .as_array()
            .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
            .ok_or_else(|| {
                ApiError::invalid(
                    "reasoning_budget_end_tags",
                    "`reasoning_budget_end_tags` must be an array of strings",
                )
            })?,
        (None, Some(_)) => f.str("reasoning_budget_end_tag")?.map(str::to_string).into_iter().collect(),
        (None, None) => Vec::new(),
    };
    // Empty tags are dropped, as llama-server drops them.
    let end: Vec<String> = end.into_iter().filter(|e| !e.is_empty()).collect();
    Ok((budget >= 0).then_some(Reasoning { budget, start, end, message }))
}

fn constraint(f: &Fields<'_>) -> Result<Option<Constraint>, ApiError> {
    if let Some(g) = f.str("grammar")? {
        return Ok(Some(Constraint::Grammar(g.to_string())));
    }
    if let Some(s) = f.get("json_schema") {
        return Ok(Some(Constraint::Schema(s.clone())));
    }
    let Some(rf) = f.get("response_format") else { return Ok(None) };
    let rf =
        rf.as_object().ok_or_else(|| ApiError::invalid("response_format", "`response_format` must be an object"))?;
    let rf = Fields(rf);
    match rf.str("type").map_err(|_| ApiError::invalid("response_format.type", "must be a string"))? {
        None | Some("text") => Ok(None),
        // Any JSON value (llama-server's json_object): the empty schema.
        Some("json_object") => Ok(Some(Constraint::Schema(rf.get("schema").cloned().unwrap_or_else(|| json!({}))))),
        Some("json_schema") => {
            let js = rf.get("json_schema").and_then(Value::as_object).ok_or_else(|| {
                ApiError::invalid("response_format.json_schema", "`json_schema` must be an object with a `schema`")
            })?;
            let schema = js.get("schema").cloned().unwrap_or_else(|| json!({}));
            Ok(Some(Constraint::Schema(schema)))
        }
        Some(t) => Err(ApiError::invalid(
            "response_format.type",
            format!("`response_format.type` `{t}`: expected text, json_object or json_schema"),
        )),
    }
}

/// A `/v1/completions` request.
pub fn completion(body: &Map<String, Value>, n_vocab: usize, base: &SamplingParams) -> Result<Request, ApiError> {
    let f = Fields(body);
    let bad =
        || ApiError::invalid("prompt", "`prompt` must be a string, an array of token ids, or an array of one string");
    let prompt = match f.get("prompt") {
        None => return Err(ApiError::invalid("prompt", "`prompt` is required")),
        Some(Value::String(s)) => Prompt::Text(s.clone()),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            Prompt::Text(a[0].as_str().unwrap_or_default().to_string())
        }
        Some(Value::Array(a)) if !a.is_empty() => {
            let ids: Option<Vec<u32>> = a.iter().map(|x| x.as_u64().and_then(|t| u32::try_from(t).ok())).collect();
            let ids = ids.ok_or_else(bad)?;
            if let Some(t) = ids.iter().find(|&&t| t as usize >= n_vocab) {
                return Err(ApiError::invalid(
                    "prompt",
                    format!("token {t} is outside the vocabulary of {n_vocab} tokens"),
                ));
            }
            Prompt::Tokens(ids)
        }
        Some(_) => return Err(bad()),
    };
    let mut r = common(&f, prompt, n_vocab, base)?;
    // Completions: `logprobs` is how many (0-20) alternatives come with each token.
    if f.get("logprobs").is_some() {
        r.logprobs = Some(f.int("logprobs", 0, 0, MAX_LOGPROBS)? as usize);
    }
    Ok(r)
}

/// A `/v1/chat/completions` request.
pub fn chat(body: &Map<String, Value>, n_vocab: usize, base: &SamplingParams) -> Result<Request, ApiError> {
    let f = Fields(body);
    let msgs = match f.get("messages") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return Err(ApiError::invalid("messages", "`messages` must be a non-empty array")),
    };
    let mut out = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        let at = format!("messages[{i}]");
        let m = m.as_object().ok_or_else(|| ApiError::invalid(&at, format!("`{at}` must be an object")))?;
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid(&format!("{at}.role"), "a message needs a string `role`"))?;
        // Content: a string, or an array of text parts (joined), as OpenAI allows.
        let content = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => {
                let mut s = String::new();
                for p in parts {
                    match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                        (Some("text"), Some(t)) => s.push_str(t),
                        _ => {
                            return Err(ApiError::invalid(
                                &format!("{at}.content"),
                                "only text content parts are supported",
                            ));
                        }
                    }
                }
                s
            }
            None | Some(Value::Null) => String::new(),
            Some(_) => {
                return Err(ApiError::invalid(
                    &format!("{at}.content"),
                    "`content` must be a string or an array of text parts",
                ));
            }
        };
        out.push(json!({"role": role, "content": content}));
    }
    let mut r = common(&f, Prompt::Chat(out), n_vocab, base)?;
    // Chat: `logprobs` is a boolean and `top_logprobs` how many alternatives.
    if f.bool("logprobs", false)? {
        r.logprobs = Some(f.int("top_logprobs", 0, 0, MAX_LOGPROBS)? as usize);
    } else if f.get("top_logprobs").is_some() {
        return Err(ApiError::invalid("top_logprobs", "`top_logprobs` needs `logprobs: true`"));
    }
    Ok(r)
}
