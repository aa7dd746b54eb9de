//! The HTTP side: axum routes for `/v1/completions`, `/v1/chat/completions` (both with
//! server-sent events when `stream` is set, `usage` in the final chunk), `/v1/models`,
//! `/health` and `/metrics`, and llama-server's own endpoints ([`super::native`]); each request
//! parsed ([`super::api`]), tokenized (chat messages through the model's chat template), mapped
//! onto chains (one per choice, a grammar stage first where it asks for a grammar or schema, in
//! llama.cpp's optimistic mode as llama-server runs it) and queued for the batching loop; a full
//! queue answers 503 with `Retry-After`.

use super::api::{self, ApiError, Constraint, Prompt, Request};
use super::engine::{Event, Job, TokenLogprob};
use super::metrics::Metrics;
use super::params::SamplingParams;
use super::template::ChatTemplate;
use crate::model::Model;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sampling::Chain;
use sampling::samplers::{GrammarMode, GrammarStage};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The batching loop's queue.
    pub jobs: SyncSender<Job>,
    /// The model (its tokenizer, vocabulary size).
    pub model: Arc<Model>,
    /// The model's id in responses.
    pub name: String,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The chat template, where the model has one.
    pub template: Option<ChatTemplate>,
    /// Cells per slot.
    pub n_ctx: usize,
    /// Slots (`--parallel`).
    pub n_slots: usize,
    /// What a request's absent sampling fields take: the model file's `general.sampling.*` over
    /// llama-server's defaults.
    pub sampling: SamplingParams,
    /// Grammars at their start by their text, shared by the requests that use them (their
    /// clones share one engine's cache of states and masks).
    grammars: Mutex<HashMap<String, grammar::Matcher>>,
    /// What requests' SPECs parse with: the vocabulary and tokenizer (DRY's string breakers),
    /// and the breakers' token sequences so far.
    spec_cx: sampling::chain_spec::SpecContext,
    ids: AtomicU64,
}

/// The answer when the batching loop dropped a sequence without ending it (it stopped abnormally).
pub(super) const LOST: &str = "the server lost the sequence: its batching loop stopped";

/// The most grammars kept compiled.
const MAX_GRAMMARS: usize = 64;

impl AppState {
    /// The state for `model`'s server.
    pub fn new(
        jobs: SyncSender<Job>,
        model: Arc<Model>,
        metrics: Arc<Metrics>,
        n_ctx: usize,
        n_slots: usize,
    ) -> Result<Self, String> {
        let tok = model.tokenizer.as_ref().ok_or("the model has no tokenizer")?;
        let text = |t: Option<u32>| t.map(|t| String::from_utf8_lossy(tok.grammar_vocab().piece(t)).into_owned());
        let template = match &model.chat_template {
            Some(src) => Some(ChatTemplate::new(
                src,
                &text(tok.bos()).unwrap_or_default(),
                &text(tok.eos()).unwrap_or_default(),
            )?),
            None => None,
        };
        let name = model.name.trim_end_matches(".gguf").to_string();
        let spec_cx = spec_context(tok);
        Ok(AppState {
            jobs,
            sampling: model.sampling.apply(&SamplingParams::default()),
            model,
            name,
            metrics,
            template,
            n_ctx,
            n_slots,
            grammars: Mutex::new(HashMap::new()),
            spec_cx,
            ids: AtomicU64::new(1),
        })
    }

    pub(super) fn tokenizer(&self) -> &crate::Tokenizer {
        self.model.tokenizer.as_ref().expect("checked in AppState::new")
    }
}

/// The routes over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/health", get(|| async { axum::Json(json!({"status": "ok"})) }))
        .route("/metrics", get(metrics))
        .route("/tokenize", post(super::native::tokenize))
        .route("/detokenize", post(super::native::detokenize))
        .route("/props", get(super::native::props))
        .route("/completion", post(super::native::completion))
        .with_state(state)
}

pub(super) fn error(st: &AppState, e: ApiError) -> Response {
    if (400..500).contains(&e.status) {
        Metrics::add(&st.metrics.bad_requests, 1);
    }
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (status, axum::Json(e.body())).into_response();
    if e.status == 503 {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

async fn models(State(st): State<Arc<AppState>>) -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": st.name, "object": "model", "created": 0, "owned_by": "runner",
                  "meta": {"n_vocab": st.model.config.n_vocab, "n_ctx_slot": st.n_ctx}}],
    }))
    .into_response()
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], st.metrics.render()).into_response()
}

async fn completions(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let n_vocab = st.model.config.n_vocab;
    match api::object(&body).and_then(|b| api::completion(&b, n_vocab, &st.sampling)) {
        Ok(req) => generate(st, req, false).await,
        Err(e) => error(&st, e),
    }
}

async fn chat_completions(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let n_vocab = st.model.config.n_vocab;
    match api::object(&body).and_then(|b| api::chat(&b, n_vocab, &st.sampling)) {
        Ok(req) => generate(st, req, true).await,
        Err(e) => error(&st, e),
    }
}

/// The prompt's tokens.
fn prompt_tokens(st: &AppState, prompt: &Prompt) -> Result<Vec<u32>, ApiError> {
    let tok = st.tokenizer();
    let enc = |text: &str| tok.encode(text).map_err(|e| ApiError::invalid("prompt", e.to_string()));
    let ids = match prompt {
        Prompt::Tokens(ids) => ids.clone(),
        Prompt::Text(s) => enc(s)?,
        Prompt::Chat(msgs) => {
            let t = st
                .template
                .as_ref()
                .ok_or_else(|| ApiError::invalid("messages", "the model has no chat template: use /v1/completions"))?;
            enc(&t.render(msgs)?)?
        }
    };
    let field = if matches!(prompt, Prompt::Chat(_)) { "messages" } else { "prompt" };
    if ids.is_empty() {
        return Err(ApiError::invalid(field, "the prompt is empty"));
    }
    if ids.len() >= st.n_ctx {
        return Err(ApiError::invalid(
            field,
            format!(
                "the prompt has {} tokens; a slot's context holds {} (leave room for one token)",
                ids.len(),
                st.n_ctx
            ),
        ));
    }
    Ok(ids)
}

/// The grammar stage of a constraint, its matcher shared with earlier requests of the same text.
fn grammar_stage(st: &AppState, c: &Constraint) -> Result<GrammarStage, ApiError> {
    let (field, name, text) = match c {
        Constraint::Grammar(g) => ("grammar", "grammar", g.clone()),
        Constraint::Schema(s) => {
            let g = schema::to_grammar(s).map_err(|e| ApiError::invalid("response_format", e.to_string()))?;
            ("response_format", "json_schema", g)
        }
    };
    let mut map = st.grammars.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let m = match map.get(&text) {
        Some(m) => m.clone(),
        None => {
            let g = grammar::Grammar::new(&text).map_err(|e| ApiError::invalid(field, e.to_string()))?;
            let m = grammar::Matcher::new(&g, Arc::clone(st.tokenizer().grammar_vocab()));
            // The first mask now (kept in the shared matcher), so that a grammar too ambiguous to
            // start is this request's 400, not a failed sequence's 500 once it runs.
            m.mask().map_err(|e| ApiError::invalid(field, e.to_string()))?;
            if map.len() >= MAX_GRAMMARS {
                map.clear();
            }
            map.insert(text, m.clone());
            m
        }
    };
    Ok(GrammarStage::new(name, m, GrammarMode::Optimistic))
}

/// What a request's sampling SPEC parses with: the model's vocabulary and tokenizer.
fn spec_context(tok: &crate::tokenizer::Tokenizer) -> sampling::chain_spec::SpecContext {
    sampling::chain_spec::SpecContext {
        vocab: Some(Arc::clone(tok.grammar_vocab())),
        tokenizer: Some(tok.breaker_tokenizer()),
        ..Default::default()
    }
}

/// The chain of a request that sets no sampling field (the model's defaults over
/// llama-server's): what the server reserves its steps' memory with.
pub fn default_chain(model: &Model) -> Result<Chain, String> {
    let tok = model.tokenizer.as_ref().ok_or("the model has no tokenizer")?;
    let spec = model.sampling.apply(&SamplingParams::default()).spec(0);
    sampling::chain_spec::parse_with(&spec, &spec_context(tok))
        .map_err(|e| format!("the default sampling chain `{spec}`: {e}"))
}

/// Choice `i`'s chain (its reasoning budget first, counting where `prompt` leaves a block open).
fn chain(st: &AppState, req: &Request, prompt: &[u32], seed: u64) -> Result<Chain, ApiError> {
    let mut spec = req.sampling.spec(seed);
    if req.ignore_eos {
        let eog: Vec<String> = st.tokenizer().grammar_vocab().eog().iter().map(u32::to_string).collect();
        if !eog.is_empty() {
            spec = format!("ignore_eos(eos={});{spec}", eog.join(" "));
        }
    }
    let cx = sampling::chain_spec::SpecContext { default_seed: seed, ..st.spec_cx.clone() };
    let base = sampling::chain_spec::parse_with(&spec, &cx).map_err(|e| {
        ApiError::status(400, "invalid_request_error", format!("the sampling fields make no chain: {e}"))
    })?;
    let mut c = Chain::new();
    if let Some(r) = &req.reasoning {
        let tk = st.tokenizer();
        let tags = crate::reasoning::ReasoningTags::resolve(tk, r.start.as_deref(), &r.end, r.message.as_deref())
            .map_err(|_| {
                let field = if r.start.is_none() { "reasoning_budget_start_tag" } else { "reasoning_budget_end_tags" };
                ApiError::invalid(
                    field,
                    format!(
                        "a reasoning budget needs non-empty start and end tags: give `{field}` (the model's \
                         vocabulary has no `<think>`/`</think>` tokens to default to)"
                    ),
                )
            })?;
        let stage = crate::reasoning::budget_stage(tk, r.budget, &tags, prompt)
            .map_err(|e| ApiError::invalid("reasoning_budget_tokens", e.to_string()))?;
        c.push(Box::new(stage));
    }
    if let Some(con) = &req.constraint {
        c.push(Box::new(grammar_stage(st, con)?));
    }
    for s in base.stages() {
        c.push(s.clone());
    }
    Ok(c)
}

/// The prompt's tokens and one chain per choice (seeds `seed`, `seed + 1`, ...), made on a
/// blocking thread of the runtime's pool (`tokio::task::spawn_blocking`): tokenizing a long
/// prompt and compiling a grammar or JSON schema may take long, and the runtime's own threads
/// keep serving the other connections meanwhile.
async fn prepare(st: &Arc<AppState>, req: &Arc<Request>, seed: u64) -> Result<(Vec<u32>, Vec<Chain>), ApiError> {
    let (st, req) = (Arc::clone(st), Arc::clone(req));
    tokio::task::spawn_blocking(move || {
        let prompt = prompt_tokens(&st, &req.prompt)?;
        let chains = (0..req.n)
            .map(|i| chain(&st, &req, &prompt, seed.wrapping_add(i as u64)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((prompt, chains))
    })
    .await
    .map_err(|e| ApiError::status(500, "server_error", format!("preparing the request failed: {e}")))?
}

/// Queues the request's choices (`chains`, one each) for the batching loop: their events come on
/// the receiver; a full queue is a 503.
fn enqueue(
    st: &AppState,
    req: &Request,
    prompt: &[u32],
    chains: Vec<Chain>,
) -> Result<UnboundedReceiver<Event>, ApiError> {
    let (tx, rx) = unbounded_channel();
    for (index, chain) in chains.into_iter().enumerate() {
        let job = Job {
            index,
            prompt: prompt.to_vec(),
            chain,
            logprobs: req.logprobs,
            max_tokens: req.max_tokens,
            stop: req.stop.clone(),
            ignore_eos: req.ignore_eos,
            cache_prompt: req.cache_prompt,
            post_sampling: req.post_sampling,
            id_slot: req.id_slot,
            events: tx.clone(),
        };
        st.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = st.jobs.try_send(job) {
            st.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            Metrics::add(&st.metrics.rejected, 1);
            let why = match e {
                TrySendError::Full(_) => "the server is busy: its queue is full, retry later",
                TrySendError::Disconnected(_) => "the server is shutting down",
            };
            return Err(ApiError::status(503, "server_error", why));
        }
    }
    Metrics::add(&st.metrics.requests, 1);
    Ok(rx)
}

/// A request on its way: its seed (its own, or a fresh one per request), its prompt tokens, and
/// the receiver of its choices' events.
pub(super) struct Started {
    pub req: Arc<Request>,
    pub seed: u64,
    pub prompt: Vec<u32>,
    pub rx: UnboundedReceiver<Event>,
}

/// Draws the request's seed where it has none, prepares its prompt and chains ([`prepare`]) and
/// queues its choices ([`enqueue`]).
pub(super) async fn start(st: &Arc<AppState>, req: Request) -> Result<Started, ApiError> {
    let seed = req.sampling.seed.unwrap_or_else(|| u64::from(rand::random::<u32>()));
    let req = Arc::new(req);
    let (prompt, chains) = prepare(st, &req, seed).await?;
    let rx = enqueue(st, &req, &prompt, chains)?;
    Ok(Started { req, seed, prompt, rx })
}

/// Queues the request's choices and answers: all at once, or as server-sent events.
async fn generate(st: Arc<AppState>, req: Request, chat: bool) -> Response {
    let Started { req, seed, prompt, rx } = match start(&st, req).await {
        Ok(s) => s,
        Err(e) => return error(&st, e),
    };
    let id = st.ids.fetch_add(1, Ordering::Relaxed);
    let meta = Meta {
        id: format!("{}-{id}", if chat { "chatcmpl" } else { "cmpl" }),
        created: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        model: st.name.clone(),
        chat,
        seed,
        n: req.n,
        prompt_tokens: prompt.len(),
    };
    if req.stream { stream(meta, rx) } else { collect(st, meta, rx).await }
}

/// What every response chunk repeats.
#[derive(Debug, Clone)]
struct Meta {
    id: String,
    created: u64,
    model: String,
    chat: bool,
    seed: u64,
    n: usize,
    prompt_tokens: usize,
}

impl Meta {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.chat, chunk) {
            (true, true) => "chat.completion.chunk",
            (true, false) => "chat.completion",
            (false, _) => "text_completion",
        }
    }

    fn wrap(&self, chunk: bool, choices: Vec<Value>, usage: Option<Value>) -> Value {
        let mut v = json!({
            "id": self.id, "object": self.object(chunk), "created": self.created, "model": self.model,
            "system_fingerprint": "runner", "seed": self.seed, "choices": choices,
        });
        if let Some(u) = usage {
            v["usage"] = u;
        }
        v
    }

    fn usage(&self, completion: usize) -> Value {
        // The prompt counts once, whatever `n` (as OpenAI counts it).
        json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
               "total_tokens": self.prompt_tokens + completion})
    }
}

/// The log-probabilities of tokens in the chat format (`content` entries) or the completions
/// format (`tokens`, `token_logprobs`, `top_logprobs`).
fn logprobs_json(chat: bool, lps: &[TokenLogprob]) -> Value {
    if chat {
        let content: Vec<Value> = lps
            .iter()
            .map(|l| {
                let top: Vec<Value> =
                    l.top.iter().map(|a| json!({"token": a.token, "logprob": a.value, "bytes": a.bytes})).collect();
                json!({"token": l.token, "logprob": l.value, "bytes": l.bytes, "top_logprobs": top})
            })
            .collect();
        json!({"content": content})
    } else {
        let top: Vec<Value> = lps
            .iter()
            .map(|l| Value::Object(l.top.iter().map(|a| (a.token.clone(), json!(a.value))).collect()))
            .collect();
        json!({
            "tokens": lps.iter().map(|l| l.token.clone()).collect::<Vec<_>>(),
            "token_logprobs": lps.iter().map(|l| l.value).collect::<Vec<_>>(),
            "top_logprobs": top,
        })
    }
}

/// The whole answer once every choice is done.
async fn collect(st: Arc<AppState>, meta: Meta, mut rx: UnboundedReceiver<Event>) -> Response {
    let n = meta.n;
    let mut text = vec![String::new(); n];
    let mut lps: Vec<Vec<TokenLogprob>> = vec![Vec::new(); n];
    let mut finish = vec![None; n];
    let mut completion = 0;
    let mut asked_logprobs = false;
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Delta { index, text: t, logprobs, .. } => {
                text[index] += &t;
                asked_logprobs |= !logprobs.is_empty();
                lps[index].extend(logprobs);
            }
            Event::Done { index, finish: f, completion_tokens, .. } => {
                finish[index] = Some(f.reason());
                completion += completion_tokens;
            }
            Event::Failed { message, .. } => {
                let status = if message.contains("shutting down") { 503 } else { 500 };
                return error(&st, ApiError::status(status, "server_error", message));
            }
        }
    }
    if finish.iter().any(Option::is_none) {
        // The loop dropped a sequence without a word (it ended abnormally).
        return error(&st, ApiError::status(500, "server_error", LOST));
    }
    let choices = (0..n)
        .map(|i| {
            let lp = if asked_logprobs { logprobs_json(meta.chat, &lps[i]) } else { Value::Null };
            if meta.chat {
                json!({"index": i, "message": {"role": "assistant", "content": text[i]}, "logprobs": lp, "finish_reason": finish[i]})
            } else {
                json!({"index": i, "text": text[i], "logprobs": lp, "finish_reason": finish[i]})
            }
        })
        .collect();
    axum::Json(meta.wrap(false, choices, Some(meta.usage(completion)))).into_response()
}

/// Server-sent events: a chunk per event, then one with the usage, then `[DONE]`.
fn stream(meta: Meta, rx: UnboundedReceiver<Event>) -> Response {
    struct S {
        rx: UnboundedReceiver<Event>,
        meta: Meta,
        completion: usize,
        finished: usize,
        started: Vec<bool>,
        done: bool,
    }
    let s = S { rx, started: vec![false; meta.n], meta, completion: 0, finished: 0, done: false };
    let events = futures_util::stream::unfold(s, |mut s| async move {
        if s.done {
            return None;
        }
        let data = match s.rx.recv().await {
            // The tokens of a stop string's end come with no text: nothing to send.
            Some(Event::Delta { text, logprobs, .. }) if text.is_empty() && logprobs.is_empty() => {
                return Some((Ok(Vec::new()), s));
            }
            Some(Event::Delta { index, text, logprobs, .. }) => {
                let lp = if logprobs.is_empty() { Value::Null } else { logprobs_json(s.meta.chat, &logprobs) };
                let choice = if s.meta.chat {
                    let mut delta = json!({"content": text});
                    if !std::mem::replace(&mut s.started[index], true) {
                        delta["role"] = json!("assistant");
                    }
                    json!({"index": index, "delta": delta, "logprobs": lp, "finish_reason": null})
                } else {
                    json!({"index": index, "text": text, "logprobs": lp, "finish_reason": null})
                };
                s.meta.wrap(true, vec![choice], None).to_string()
            }
            Some(Event::Done { index, finish, completion_tokens, .. }) => {
                s.completion += completion_tokens;
                s.finished += 1;
                let choice = if s.meta.chat {
                    json!({"index": index, "delta": {}, "logprobs": null, "finish_reason": finish.reason()})
                } else {
                    json!({"index": index, "text": "", "logprobs": null, "finish_reason": finish.reason()})
                };
                s.meta.wrap(true, vec![choice], None).to_string()
            }
            Some(Event::Failed { message, .. }) => {
                s.done = true;
                ApiError::status(500, "server_error", message).body().to_string()
            }
            None if s.finished < s.meta.n => {
                s.done = true;
                ApiError::status(500, "server_error", LOST).body().to_string()
            }
            None => {
                s.done = true;
                let usage = s.meta.usage(s.completion);
                let last = s.meta.wrap(true, Vec::new(), Some(usage)).to_string();
                // The usage chunk, then the end marker, in one SSE write each.
                return Some((
                    Ok::<_, Infallible>(vec![SseEvent::default().data(last), SseEvent::default().data("[DONE]")]),
                    s,
                ));
            }
        };
        Some((Ok(vec![SseEvent::default().data(data)]), s))
    });
    let flat = futures_util::StreamExt::flat_map(events, |r: Result<Vec<SseEvent>, Infallible>| {
        futures_util::stream::iter(r.unwrap_or_default().into_iter().map(Ok::<_, Infallible>))
    });
    Sse::new(flat).keep_alive(KeepAlive::default()).into_response()
}
