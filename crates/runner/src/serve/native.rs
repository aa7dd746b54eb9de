//! llama-server's own (non-OpenAI) endpoints, with its field names and shapes (its
//! `tools/server/README.md` and `server-context.cpp`): `POST /tokenize` (`content`,
//! `add_special`, `with_pieces`), `POST /detokenize` (`tokens`), `GET /props` (the default
//! generation settings, `total_slots`, `model_path`, `chat_template`, `bos_token`, `eos_token`)
//! and `POST /completion` (`prompt` as text or token ids, `n_predict`, `stream`,
//! `return_tokens` and the sampling fields of the OpenAI endpoints; the answer's `content`,
//! `tokens`, `stop`, `stop_type`, `stopping_word`, `tokens_predicted`, `tokens_evaluated`,
//! `generation_settings`). Bad input is an OpenAI-style 400 naming the field, as on the OpenAI
//! endpoints.

use super::api::{self, ApiError, Fields, Prompt};
use super::engine::{Event, Finish};
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
/// the BOS token first where the model's tokenizer adds one.
pub async fn tokenize(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let s = Arc::clone(&st);
    let r = blocking(move || {
        let b = api::object(&body)?;
        let f = Fields(&b);
        let content = f.str("content")?.ok_or_else(|| ApiError::invalid("content", "`content` is required"))?;
        let add_special = f.bool("add_special", false)?;
        let with_pieces = f.bool("with_pieces", false)?;
        let tok = s.tokenizer();
        let mut ids = tok.encode(content).map_err(|e| ApiError::invalid("content", e.to_string()))?;
        // `encode` puts the BOS first where the model asks for it (`adds_bos`).
        if tok.adds_bos() && !add_special && !ids.is_empty() {
            ids.remove(0);
        }
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
}

impl Native {
    /// The final answer (llama-server's `to_json_non_oaicompat`).
    fn last(&self, content: &str, tokens: &[u32], finish: Finish, word: Option<&str>, predicted: usize) -> Value {
        let stop_type = match (finish, word) {
            (Finish::Length, _) => "limit",
            (Finish::Stop, Some(_)) => "word",
            (Finish::Stop, None) => "eos",
        };
        json!({
            "index": 0,
            "content": content,
            "tokens": if self.return_tokens { tokens.to_vec() } else { Vec::new() },
            "stop": true,
            "model": self.model,
            "tokens_predicted": predicted,
            "tokens_evaluated": self.prompt_tokens,
            "generation_settings": self.settings,
            "prompt": self.prompt,
            "has_new_line": content.contains('\n'),
            "truncated": false,
            "stop_type": stop_type,
            "stopping_word": word.unwrap_or_default(),
        })
    }
}

/// `POST /completion`: llama.cpp's completion API over one sequence (see the module docs).
pub async fn completion(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let parsed = api::object(&body).and_then(|b| {
        let mut r = api::completion(&b, st.model.config.n_vocab, &st.sampling)?;
        let f = Fields(&b);
        let return_tokens = f.bool("return_tokens", false)?;
        // One sequence; log-probabilities (`n_probs`) are not answered here.
        r.n = 1;
        r.logprobs = None;
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
    let native = Native {
        model: st.name.clone(),
        prompt: prompt_text,
        prompt_tokens: prompt.len(),
        settings: sampling.to_json(n_predict),
        return_tokens,
    };
    if req.stream { stream(native, rx) } else { collect(st, native, rx).await }
}

async fn collect(st: Arc<AppState>, n: Native, mut rx: UnboundedReceiver<Event>) -> Response {
    let (mut content, mut tokens) = (String::new(), Vec::new());
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Delta { text, tokens: t, .. } => {
                content += &text;
                tokens.extend(t);
            }
            Event::Done { finish, completion_tokens, stopping_word, .. } => {
                return axum::Json(n.last(&content, &tokens, finish, stopping_word.as_deref(), completion_tokens))
                    .into_response();
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
            Some(Event::Delta { text, tokens, .. }) => {
                s.predicted += tokens.len();
                json!({"index": 0, "content": text, "tokens": tokens, "stop": false,
                       "tokens_predicted": s.predicted, "tokens_evaluated": s.n.prompt_tokens})
            }
            Some(Event::Done { finish, completion_tokens, stopping_word, .. }) => {
                s.done = true;
                s.n.last("", &[], finish, stopping_word.as_deref(), completion_tokens)
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
