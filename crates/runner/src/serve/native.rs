//! llama-server's own (non-OpenAI) endpoints, with its field names and shapes (its
//! `tools/server/README.md` and `server-context.cpp`): `POST /tokenize` (`content`,
//! `add_special`, `with_pieces`), `POST /detokenize` (`tokens`), `GET /props` (the default
//! generation settings, `total_slots`, `model_path`, `chat_template`, `bos_token`, `eos_token`)
//! and `POST /completion` (`prompt` as text or token ids, `n_predict`, `stream`,
//! `return_tokens`, `n_probs`, `post_sampling_probs`, `id_slot` and the sampling fields of the
//! OpenAI endpoints; the answer's `content`, `tokens`, `id_slot`, `stop`, `stop_type`,
//! `stopping_word`, `tokens_predicted`, `tokens_evaluated`, `tokens_cached`,
//! `generation_settings`, `timings` and `completion_probabilities`). Bad input is an
//! OpenAI-style 400 naming the field, as on the OpenAI endpoints.

use super::api::{self, ApiError, Fields, Prompt};
use super::engine::{Event, Finish, Timings, TokenLogprob};
use super::http::{AppState, LOST, Started, error, start};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedReceiver;

/// Runs `f` on the runtime's blocking pool (tokenizing megabytes takes long).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, ApiError> + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::status(500, "server_error", format!("the request's work failed: {e}")))?
}

/// A token's text as llama.cpp's `common_token_to_piece` gives it (special tokens rendered).
fn piece_bytes(st: &AppState, t: u32) -> &[u8] {
    st.tokenizer().grammar_vocab().piece(t)
}

/// `POST /tokenize`: `{"tokens": [ids]}`, or with `with_pieces` `[{"id", "piece"}]` where a
/// piece is its text, or its bytes where they are not UTF-8. `add_special` (default false) puts
/// the BOS token first where the model's tokenizer adds one; `parse_special` (default true)
/// false tokenizes special tokens' texts as text.
pub async fn tokenize(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let s = Arc::clone(&st);
    let r = blocking(move || {
        let b = api::object(&body)?;
        let f = Fields(&b);
        let content = f.str("content")?.ok_or_else(|| ApiError::invalid("content", "`content` is required"))?;
        let add_special = f.bool("add_special", false)?;
        let with_pieces = f.bool("with_pieces", false)?;
        let parse_special = f.bool("parse_special", true)?;
        let ids = s
            .tokenizer()
            .encode_with(content, add_special, parse_special)
            .map_err(|e| ApiError::invalid("content", e.to_string()))?;
        let tokens: Vec<Value> = if with_pieces {
            ids.iter()
                .map(|&id| {
                    let b = piece_bytes(&s, id);
                    let piece = match std::str::from_utf8(b) {
                        Ok(text) => json!(text),
                        Err(_) => json!(b),
                    };
                    json!({"id": id, "piece": piece})
                })
                .collect()
        } else {
            ids.iter().map(|&id| json!(id)).collect()
        };
        Ok(json!({"tokens": tokens}))
    })
    .await;
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error(&st, e),
    }
}

/// The token ids of `key`, each below the vocabulary's size.
fn token_ids(f: &Fields<'_>, key: &str, n_vocab: usize) -> Result<Vec<u32>, ApiError> {
    let bad = || ApiError::invalid(key, format!("`{key}` must be an array of token ids below {n_vocab}"));
    let a = f.get(key).ok_or_else(|| ApiError::invalid(key, format!("`{key}` is required")))?;
    let a = a.as_array().ok_or_else(bad)?;
    a.iter()
        .map(|x| x.as_u64().and_then(|t| u32::try_from(t).ok()).filter(|&t| (t as usize) < n_vocab).ok_or_else(bad))
        .collect()
}

/// `POST /detokenize`: `{"content": text}`, the tokens' pieces one after the other (as
/// llama-server's `tokens_to_str`; bytes that are not UTF-8 become U+FFFD).
pub async fn detokenize(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let s = Arc::clone(&st);
    let r = blocking(move || {
        let b = api::object(&body)?;
        let ids = token_ids(&Fields(&b), "tokens", s.model.config.n_vocab)?;
        let bytes: Vec<u8> = ids.iter().flat_map(|&t| piece_bytes(&s, t).to_vec()).collect();
        Ok(json!({"content": String::from_utf8_lossy(&bytes)}))
    })
    .await;
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error(&st, e),
    }
}

/// `GET /props`: llama-server's server properties, the fields this server has.
pub async fn props(State(st): State<Arc<AppState>>) -> Response {
    let tok = st.tokenizer();
    let text =
        |t: Option<u32>| t.map(|t| String::from_utf8_lossy(piece_bytes(&st, t)).into_owned()).unwrap_or_default();
    let path = st.model.path.as_ref().map_or_else(|| st.model.name.clone(), |p| p.display().to_string());
    axum::Json(json!({
        "default_generation_settings": {"n_ctx": st.n_ctx, "params": st.sampling.to_json(-1)},
        "total_slots": st.n_slots,
        "model_alias": st.name,
        "model_path": path,
        "chat_template": st.model.chat_template.clone().unwrap_or_default(),
        "bos_token": text(tok.bos()),
        "eos_token": text(tok.eos()),
        "modalities": {"vision": false, "audio": false, "video": false},
        "build_info": format!("runner {}", env!("CARGO_PKG_VERSION")),
        "is_sleeping": false,
    }))
    .into_response()
}

/// What a `/completion` answer repeats.
struct Native {
    model: String,
    prompt: String,
    prompt_tokens: usize,
    settings: Value,
    return_tokens: bool,
    /// `post_sampling_probs`: entries of probabilities after the chain.
    post_sampling: bool,
}

/// How the final answer ended, and the sequence's counts.
struct End<'a> {
    finish: Finish,
    word: Option<&'a str>,
    predicted: usize,
    slot: usize,
    timings: Timings,
    tokens_cached: usize,
}

/// llama-server's `timings` object (`server_slot_stats::to_json`): the prompt's and the
/// generation's counts and milliseconds, per token and per second over the decode steps (the
/// first token comes with the prompt: `predicted_n - 1` steps), 0 where a divisor is 0; the
/// draft counts where there were drafts.
fn timings_json(t: &Timings) -> Value {
    // Whole microseconds, as llama-server's clock.
    let ms = |d: std::time::Duration| d.as_micros() as f64 / 1e3;
    let (prompt_ms, predicted_ms) = (ms(t.prompt), ms(t.predicted));
    let per = |ms: f64, n: usize| if n > 0 { ms / n as f64 } else { 0.0 };
    let rate = |ms: f64, n: usize| if ms > 0.0 { 1e3 / ms * n as f64 } else { 0.0 };
    let steps = t.predicted_n.saturating_sub(1);
    let mut v = json!({
        "cache_n": t.cached,
        "prompt_n": t.prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": per(prompt_ms, t.prompt_n),
        "prompt_per_second": rate(prompt_ms, t.prompt_n),
        "predicted_n": t.predicted_n,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": per(predicted_ms, steps),
        "predicted_per_second": rate(predicted_ms, steps),
    });
    if t.drafted > 0 {
        v["draft_n"] = json!(t.drafted);
        v["draft_n_accepted"] = json!(t.accepted);
    }
    v
}

impl Native {
    /// `completion_probabilities` (llama-server's `probs_vector_to_json`): per token its `id`,
    /// `token`, `bytes` and `logprob` with `top_logprobs` (each `id`, `token`, `bytes`,
    /// `logprob`), and its `rank` among the raw logits (an addition: llama-server has none); with
    /// `post_sampling_probs`, `prob` and `top_probs` instead, and no rank.
    fn probs(&self, lps: &[TokenLogprob]) -> Value {
        let (value, top_key) = if self.post_sampling { ("prob", "top_probs") } else { ("logprob", "top_logprobs") };
        let text = |bytes: &[u8]| String::from_utf8_lossy(valid_prefix(bytes)).into_owned();
        lps.iter()
            .map(|l| {
                let top: Vec<Value> = l
                    .top
                    .iter()
                    .map(|a| json!({"id": a.id, "token": text(&a.bytes), "bytes": a.bytes, value: a.value}))
                    .collect();
                let mut e =
                    json!({"id": l.id, "token": text(&l.bytes), "bytes": l.bytes, value: l.value, top_key: top});
                if let Some(r) = l.rank {
                    e["rank"] = json!(r);
                }
                e
            })
            .collect()
    }

    /// The final answer (llama-server's `to_json_non_oaicompat`); `probs` where asked for and
    /// not streaming.
    fn last(&self, content: &str, tokens: &[u32], end: &End<'_>, probs: Option<&[TokenLogprob]>) -> Value {
        let stop_type = match (end.finish, end.word) {
            (Finish::Length, _) => "limit",
            (Finish::Stop, Some(_)) => "word",
            (Finish::Stop, None) => "eos",
        };
        let mut v = json!({
            "index": 0,
            "content": content,
            "tokens": if self.return_tokens { tokens.to_vec() } else { Vec::new() },
            "id_slot": end.slot,
            "stop": true,
            "model": self.model,
            "tokens_predicted": end.predicted,
            "tokens_evaluated": self.prompt_tokens,
            "generation_settings": self.settings,
            "prompt": self.prompt,
            "has_new_line": content.contains('\n'),
            "truncated": false,
            "stop_type": stop_type,
            "stopping_word": end.word.unwrap_or_default(),
            "tokens_cached": end.tokens_cached,
            "timings": timings_json(&end.timings),
        });
        if let Some(p) = probs.filter(|p| !p.is_empty()) {
            v["completion_probabilities"] = self.probs(p);
        }
        v
    }
}

/// The longest prefix of `b` that is valid UTF-8 (llama-server's `validate_utf8` cut: a token
/// that ends inside a character shows the characters before it).
fn valid_prefix(b: &[u8]) -> &[u8] {
    match std::str::from_utf8(b) {
        Ok(_) => b,
        Err(e) => &b[..e.valid_up_to()],
    }
}

/// `POST /completion`: llama.cpp's completion API over one sequence (see the module docs).
pub async fn completion(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let parsed = api::object(&body).and_then(|b| {
        let mut r = api::completion(&b, st.model.config.n_vocab, &st.sampling)?;
        let f = Fields(&b);
        let return_tokens = f.bool("return_tokens", false)?;
        r.n = 1;
        // `n_probs` (llama-server reads `logprobs` where it is absent, as `api::completion` did).
        if f.get("n_probs").is_some() {
            r.logprobs = Some(f.int("n_probs", 0, 0, api::MAX_LOGPROBS)? as usize);
        }
        r.logprobs = r.logprobs.filter(|&n| n > 0);
        r.post_sampling = f.bool("post_sampling_probs", false)?;
        // -1 (the default): any slot; a larger number wraps around the slots, as llama-server's.
        let id_slot = f.int("id_slot", -1, -1, i64::from(i32::MAX))?;
        r.id_slot = (id_slot >= 0).then(|| id_slot as usize % st.n_slots);
        let n_predict = r.max_tokens.map_or(-1, |m| m as i64);
        Ok((r, return_tokens, n_predict))
    });
    let (req, return_tokens, n_predict) = match parsed {
        Ok(p) => p,
        Err(e) => return error(&st, e),
    };
    let Started { req, seed, prompt, rx } = match start(&st, req).await {
        Ok(s) => s,
        Err(e) => return error(&st, e),
    };
    let prompt_text = match &req.prompt {
        Prompt::Text(t) => t.clone(),
        _ => String::from_utf8_lossy(&prompt.iter().flat_map(|&t| piece_bytes(&st, t).to_vec()).collect::<Vec<_>>())
            .into_owned(),
    };
    let mut sampling = req.sampling.clone();
    sampling.seed = Some(seed);
    let mut settings = sampling.to_json(n_predict);
    settings["n_probs"] = json!(req.logprobs.unwrap_or(0));
    settings["post_sampling_probs"] = json!(req.post_sampling);
    let native = Native {
        model: st.name.clone(),
        prompt: prompt_text,
        prompt_tokens: prompt.len(),
        settings,
        return_tokens,
        post_sampling: req.post_sampling,
    };
    if req.stream { stream(native, rx) } else { collect(st, native, rx).await }
}

async fn collect(st: Arc<AppState>, n: Native, mut rx: UnboundedReceiver<Event>) -> Response {
    let (mut content, mut tokens, mut probs) = (String::new(), Vec::new(), Vec::new());
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Delta { text, tokens: t, logprobs, .. } => {
                content += &text;
                tokens.extend(t);
                probs.extend(logprobs);
            }
            Event::Done { finish, completion_tokens, stopping_word, slot, timings, tokens_cached, .. } => {
                // As llama-server, the entries of the stop word's tokens (as many as it has
                // tokenized alone) are left out.
                if let Some(w) = &stopping_word {
                    let k = st.tokenizer().encode_with(w, false, true).map_or(0, |t| t.len());
                    probs.truncate(probs.len() - k.min(probs.len()));
                }
                let word = stopping_word.as_deref();
                let end = End { finish, word, predicted: completion_tokens, slot, timings, tokens_cached };
                return axum::Json(n.last(&content, &tokens, &end, Some(&probs))).into_response();
            }
            Event::Failed { message, .. } => {
                let status = if message.contains("shutting down") { 503 } else { 500 };
                return error(&st, ApiError::status(status, "server_error", message));
            }
        }
    }
    error(&st, ApiError::status(500, "server_error", LOST))
}

/// Server-sent events as llama-server sends them for `/completion`: a `data:` object per piece
/// (`content`, its `tokens`, `stop: false`), then the final answer (`stop: true`, empty
/// `content`), and no `[DONE]`.
fn stream(n: Native, rx: UnboundedReceiver<Event>) -> Response {
    struct S {
        rx: UnboundedReceiver<Event>,
        n: Native,
        predicted: usize,
        done: bool,
    }
    let s = S { rx, n, predicted: 0, done: false };
    let events = futures_util::stream::unfold(s, |mut s| async move {
        if s.done {
            return None;
        }
        let data = match s.rx.recv().await {
            Some(Event::Delta { text, tokens, slot, logprobs, .. }) => {
                s.predicted += tokens.len();
                let mut v = json!({"index": 0, "content": text, "tokens": tokens, "stop": false, "id_slot": slot,
                       "tokens_predicted": s.predicted, "tokens_evaluated": s.n.prompt_tokens});
                if !logprobs.is_empty() {
                    v["completion_probabilities"] = s.n.probs(&logprobs);
                }
                v
            }
            Some(Event::Done { finish, completion_tokens, stopping_word, slot, timings, tokens_cached, .. }) => {
                s.done = true;
                let word = stopping_word.as_deref();
                let end = End { finish, word, predicted: completion_tokens, slot, timings, tokens_cached };
                s.n.last("", &[], &end, None)
            }
            Some(Event::Failed { message, .. }) => {
                s.done = true;
                ApiError::status(500, "server_error", message).body()
            }
            None => {
                s.done = true;
                ApiError::status(500, "server_error", LOST).body()
            }
        };
        Some((Ok::<_, Infallible>(SseEvent::default().data(data.to_string())), s))
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}
