//! `runner serve` over real HTTP on loopback, with SmolLM2: the OpenAI endpoints, streaming
//! (read raw with `curl`), errors, the same tokens for a seeded request alone or among others
//! that join and leave (and proof from `/metrics` that they shared steps), clients that go away,
//! a full queue, a barrage of malformed requests, exact log-probabilities, the prompt fed to the
//! chain, slow requests prepared off the runtime's threads, and llama-server's own endpoints
//! (`/tokenize`, `/detokenize`, `/props`, `/completion`).
#![allow(clippy::print_stderr)]

mod common;

use runner::serve::engine::EngineOptions;
use runner::serve::{ServeOptions, Server, spawn};
use runner::{Sampling, SessionOptions};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn server(parallel: usize, queue: usize, sampling: Sampling) -> Server {
    server_with(parallel, queue, sampling, None)
}

/// A server, with n-gram speculation `(n, most drafts)` where given.
fn server_with(parallel: usize, queue: usize, sampling: Sampling, ngram: Option<(usize, usize)>) -> Server {
    let session = SessionOptions {
        n_seq: parallel,
        n_ctx: 256,
        threads: 2,
        sampling,
        n_draft_max: ngram.map_or(0, |g| g.1),
        ..Default::default()
    };
    let opts = ServeOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        engine: EngineOptions { session, chunk: 16, batch: 32, queue, ngram, prefill_apart: false },
    };
    spawn(common::smollm2(), opts).unwrap()
}

fn url(s: &Server, path: &str) -> String {
    format!("http://{}{path}", s.addr())
}

/// POSTs `body`; the status and the JSON answer.
fn post(s: &Server, path: &str, body: &str) -> (u16, Value) {
    let r = ureq::post(&url(s, path)).set("Content-Type", "application/json").send_string(body);
    let resp = match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{path}: {e}"),
    };
    let status = resp.status();
    let text = resp.into_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}")))
}

fn metric(s: &Server, name: &str) -> f64 {
    let text = ureq::get(&url(s, "/metrics")).call().unwrap().into_string().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("runner_{name} ")))
        .unwrap_or_else(|| panic!("no metric {name} in\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn completions_chat_models_health_and_metrics() {
    let s = server(2, 8, Sampling::Backend);
    let h: Value = ureq::get(&url(&s, "/health")).call().unwrap().into_json().unwrap();
    assert_eq!(h["status"], "ok");
    let m: Value = ureq::get(&url(&s, "/v1/models")).call().unwrap().into_json().unwrap();
    assert_eq!(m["data"][0]["id"], "SmolLM2-135M-Instruct.Q4_1");

    let (st, r) =
        post(&s, "/v1/completions", r#"{"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0}"#);
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["object"], "text_completion");
    assert_eq!(r["choices"][0]["finish_reason"], "length");
    assert_eq!(r["usage"]["completion_tokens"], 6);
    assert_eq!(r["usage"]["prompt_tokens"], 5);
    assert!(r["choices"][0]["text"].as_str().unwrap().contains("Paris"), "{r}");

    // Chat, through the GGUF's template; an absent seed is drawn and returned.
    let body = json!({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 12, "n": 2});
    let (st, r) = post(&s, "/v1/chat/completions", &body.to_string());
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["object"], "chat.completion");
    assert_eq!(r["choices"].as_array().unwrap().len(), 2);
    assert_eq!(r["choices"][1]["message"]["role"], "assistant");
    assert!(r["seed"].as_u64().is_some());
    // The template's prompt: system, user and the assistant's start, special tokens as one each.
    assert!(r["usage"]["prompt_tokens"].as_u64().unwrap() < 40, "{r}");

    // Log-probabilities: the chosen token's and the top 3, in the chat format.
    let body = json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0,
                      "logprobs": true, "top_logprobs": 3});
    let (_, r) = post(&s, "/v1/chat/completions", &body.to_string());
    let content = r["choices"][0]["logprobs"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 3, "{r}");
    for c in content {
        let top = c["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3);
        assert_eq!(c["token"], top[0]["token"], "greedy takes the most likely token");
        assert_eq!(c["logprob"], top[0]["logprob"]);
    }

    let text = ureq::get(&url(&s, "/metrics")).call().unwrap().into_string().unwrap();
    assert!(text.contains("# TYPE runner_tokens_generated_total counter"), "{text}");
    assert!(metric(&s, "tokens_generated_total") >= 6.0 + 3.0);
    assert_eq!(
        metric(&s, "bytes_read_back_last_step"),
        4.0 + 8.0 * 20.0 + 4.0 + 4.0,
        "token, the 20 logprobs, the token's own and its rank read back"
    );
    s.stop().unwrap();
}

#[test]
fn structured_output_and_stop_strings() {
    let s = server(2, 8, Sampling::Backend);
    let schema = json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                        "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"]});
    for seed in 0..3 {
        let body = json!({"messages": [{"role": "user", "content": "A person, as JSON."}], "max_tokens": 60,
                          "seed": seed, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}});
        let (st, r) = post(&s, "/v1/chat/completions", &body.to_string());
        assert_eq!(st, 200, "{r}");
        let text = r["choices"][0]["message"]["content"].as_str().unwrap();
        let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("seed {seed}: {e}: {text:?}"));
        assert!(v["name"].is_string() && v["age"].is_u64(), "{v}");
        assert_eq!(r["choices"][0]["finish_reason"], "stop", "the grammar completed");
    }
    // A stop string: the text ends before it, finish_reason stop.
    let (_, free) = post(&s, "/v1/completions", r#"{"prompt": "1, 2, 3, 4,", "max_tokens": 12, "temperature": 0}"#);
    let free = free["choices"][0]["text"].as_str().unwrap().to_string();
    let cut = free.find('7').expect("counting goes on past 7");
    let (_, r) = post(
        &s,
        "/v1/completions",
        r#"{"prompt": "1, 2, 3, 4,", "max_tokens": 12, "temperature": 0, "stop": ["7", "zzz"]}"#,
    );
    assert_eq!(r["choices"][0]["text"].as_str().unwrap(), &free[..cut], "{r}");
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    // A GBNF grammar.
    let body = json!({"prompt": "Answer:", "grammar": "root ::= (\"yes\" | \"no\") \".\"", "max_tokens": 10});
    let (_, r) = post(&s, "/v1/completions", &body.to_string());
    let t = r["choices"][0]["text"].as_str().unwrap();
    assert!(t == "yes." || t == "no.", "{r}");
    s.stop().unwrap();
}

/// A streamed completion read raw with curl: data lines, the usage chunk, `[DONE]`.
/// DRY with llama-server's default breakers and with a request's own strings: the chain is made
/// (over the model's vocabulary and tokenizer) and DRY changes a greedy continuation of a
/// repeating pattern.
#[test]
fn dry_sequence_breakers_as_strings() {
    let s = server(1, 4, Sampling::Backend);
    let ask = |extra: &str| {
        let body = format!(r#"{{"prompt": "1, 2, 3, 1, 2, 3, 1, 2, 3,", "max_tokens": 16, "temperature": 0{extra}}}"#);
        let (st, r) = post(&s, "/v1/completions", &body);
        assert_eq!(st, 200, "{body}: {r}");
        r["choices"][0]["text"].as_str().unwrap().to_string()
    };
    let plain = ask("");
    let dry = ask(r#", "dry_multiplier": 4, "dry_allowed_length": 1"#);
    let custom =
        ask(r#", "dry_multiplier": 4, "dry_allowed_length": 1, "dry_sequence_breakers": ["\n", " 3,", "x|y;z"]"#);
    eprintln!("plain {plain:?}\ndry {dry:?}\ncustom {custom:?}");
    assert_ne!(plain, dry, "DRY acts on the repeating output");
}

#[test]
fn a_reasoning_budget_forces_the_end_tag() {
    // llama-server's reasoning budget fields: the prompt opens a block (its text ends in
    // `<think>`), and after 3 tokens `</think>` comes forced, on the backend; without a budget the
    // model never writes it. Bad values are 400s naming the field.
    let s = server(2, 4, Sampling::Backend);
    let ask = |extra: &str| {
        let body = format!(
            r#"{{"prompt": "the cat sat on the mat. the cat sat on the mat.<think>", "max_tokens": 12, "temperature": 0{extra}}}"#
        );
        let (st, r) = post(&s, "/v1/completions", &body);
        (st, r)
    };
    let (st, free) = ask("");
    assert_eq!(st, 200, "{free}");
    let free = free["choices"][0]["text"].as_str().unwrap().to_string();
    assert!(!free.contains("</think>"), "{free:?}");
    let tags = r#", "reasoning_budget_start_tag": "<think>", "reasoning_budget_end_tags": ["</think>"]"#;
    let (st, r) = ask(&format!(r#", "reasoning_budget_tokens": 3{tags}"#));
    assert_eq!(st, 200, "{r}");
    let text = r["choices"][0]["text"].as_str().unwrap();
    let at = text.find("</think>").unwrap_or_else(|| panic!("no forced end in {text:?} (free: {free:?})"));
    assert!(free.starts_with(&text[..at]), "the 3 tokens before the end are the free run's: {text:?} {free:?}");
    let (st, r) = ask(&format!(r#", "reasoning_budget_tokens": 0, "reasoning_budget_message": " Done."{tags}"#));
    assert_eq!(st, 200, "{r}");
    assert!(r["choices"][0]["text"].as_str().unwrap().starts_with(" Done.</think>"), "{r}");
    for (extra, field) in [
        (r#", "reasoning_budget_tokens": -5"#.to_string(), "reasoning_budget_tokens"),
        (
            r#", "reasoning_budget_tokens": 2, "reasoning_budget_end_tags": [1]"#.to_string(),
            "reasoning_budget_end_tags",
        ),
        // SmolLM2 has no `<think>` token: the tags must be given.
        (r#", "reasoning_budget_tokens": 2"#.to_string(), "reasoning_budget_start_tag"),
        (
            r#", "reasoning_budget_tokens": 2, "reasoning_budget_start_tag": "<think>""#.to_string(),
            "reasoning_budget_end_tags",
        ),
    ] {
        let (st, r) = ask(&extra);
        assert_eq!(st, 400, "{extra}: {r}");
        assert_eq!(r["error"]["param"], field, "{extra}: {r}");
    }
}

#[test]
fn streaming_with_curl() {
    let s = server(2, 8, Sampling::Backend);
    let body = r#"{"prompt": "Once upon a time", "max_tokens": 5, "stream": true, "seed": 4}"#;
    let out = match std::process::Command::new("curl")
        .args(["-sN", &url(&s, "/v1/completions"), "-H", "Content-Type: application/json", "-d", body])
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            sched::testing::skip("streaming_with_curl", format!("no curl ({e})"));
            return;
        }
    };
    let text = String::from_utf8(out.stdout).unwrap();
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], 5, "{text}");
    assert!(chunks.iter().any(|c| c["choices"][0]["finish_reason"] == "length"));
    // The streamed text is the non-streamed text of the same request.
    let streamed: String = chunks.iter().filter_map(|c| c["choices"][0]["text"].as_str()).collect();
    let (_, whole) = post(&s, "/v1/completions", &body.replace("\"stream\": true", "\"stream\": false"));
    assert_eq!(streamed, whole["choices"][0]["text"].as_str().unwrap());
    s.stop().unwrap();
}

/// A seeded request's text alone, then among 15 others with other chains and lengths that
/// join at staggered times (4 slots, so they queue, join and leave around it): the same text.
#[test]
fn the_same_tokens_alone_or_among_others() {
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let s = server(4, 32, sampling);
        let body = json!({"prompt": "In the middle of the forest there was", "max_tokens": 24, "seed": 11,
                          "temperature": 1.1, "top_k": 50, "repeat_penalty": 1.2, "logprobs": 1});
        let (st, alone) = post(&s, "/v1/completions", &body.to_string());
        assert_eq!(st, 200, "{alone}");
        let shared0 = metric(&s, "decode_steps_shared_total");
        let mixed0 = metric(&s, "decode_steps_with_prompt_total");
        let addr = s.addr();
        let others: Vec<_> = (0..15)
            .map(|i| {
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(37 * i as u64 % 200));
                    let b = json!({"prompt": format!("Story number {i}:"), "max_tokens": 4 + (i * 7) % 20,
                                   "seed": i, "temperature": 0.5 + 0.1 * i as f64, "min_p": 0.1});
                    let r = ureq::post(&format!("http://{addr}/v1/completions")).send_string(&b.to_string()).unwrap();
                    assert_eq!(r.status(), 200);
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150));
        let (_, among) = post(&s, "/v1/completions", &body.to_string());
        for o in others {
            o.join().unwrap();
        }
        let shared = metric(&s, "decode_steps_shared_total") - shared0;
        assert_eq!(among["choices"][0]["text"], alone["choices"][0]["text"], "{sampling:?}");
        assert_eq!(among["choices"][0]["logprobs"]["tokens"], alone["choices"][0]["logprobs"]["tokens"]);
        // The same bits: each token's log-probability (the forward pass over quantized weights is
        // batch-invariant, ragged steps included).
        let lps = |v: &Value| v["choices"][0]["logprobs"]["token_logprobs"].clone();
        assert_eq!(lps(&among), lps(&alone), "{sampling:?}");
        // The requests really ran together: most decode steps sampled several sequences.
        assert!(shared >= 24.0, "{sampling:?}: only {shared} shared decode steps");
        // And prompts were evaluated in the same steps as others decoded (ragged steps).
        let mixed = metric(&s, "decode_steps_with_prompt_total") - mixed0;
        assert!(mixed >= 1.0, "{sampling:?}: no decode step evaluated a prompt beside");
        s.stop().unwrap();
    }
}

/// The server reserves its largest step at start (`Session::reserve`): a burst of requests with
/// the default sampling, prompts long enough to be chunked, chunks beside decoding slots, and
/// log-probabilities, allocates no buffer after it.
#[test]
fn after_the_reserve_at_start_steps_allocate_nothing() {
    let s = server(4, 32, Sampling::Backend);
    let at_start = metric(&s, "buffer_allocations");
    assert!(at_start >= 1.0, "the reserve planned and allocated");
    let addr = s.addr();
    let burst: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(40 * i as u64));
                let words = "the quick brown fox jumps over the lazy dog ".repeat(1 + i % 4);
                let mut b = json!({"prompt": format!("{i}: {words}"), "max_tokens": 6 + i});
                if i % 3 == 0 {
                    b["logprobs"] = json!(2);
                }
                let r = ureq::post(&format!("http://{addr}/v1/completions")).send_string(&b.to_string()).unwrap();
                assert_eq!(r.status(), 200);
            })
        })
        .collect();
    for t in burst {
        t.join().unwrap();
    }
    assert!(metric(&s, "decode_steps_with_prompt_total") >= 1.0, "chunks ran beside decoding slots");
    assert_eq!(metric(&s, "buffer_allocations"), at_start, "a step allocated after the reserve");
    s.stop().unwrap();
}

/// `ln softmax(row)[t]` in f64.
fn log_softmax(row: &[f32], t: usize) -> f64 {
    let max = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
    let lse = max + row.iter().map(|&x| (f64::from(x) - max).exp()).sum::<f64>().ln();
    f64::from(row[t]) - lse
}

/// The raw logits after `prompt`, computed in this process (an independent forward pass).
fn logits_after(prompt: &[u32]) -> Vec<f32> {
    let opts = SessionOptions { n_seq: 1, n_ctx: 256, threads: 2, sampling: Sampling::Cpu, ..Default::default() };
    let greedy = sampling::Chain::parse("greedy").unwrap();
    let mut s = runner::Session::new(common::smollm2(), opts, vec![greedy]).unwrap();
    s.eval(&[prompt]).unwrap().remove(0)
}

/// Every chosen token comes with its exact log-probability of the raw logits, however unlikely
/// (never `null`): the least likely token forced by a bias, against an f64 log-softmax of this
/// process's own forward pass, and a hot seeded draw's tokens (below the 20 most likely), on both
/// sampling paths alike.
#[test]
fn the_chosen_tokens_logprob_is_exact_however_unlikely() {
    let prompt: Vec<u32> = vec![504, 3575, 282, 4649, 314];
    let row = logits_after(&prompt);
    let low = (0..row.len()).min_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
    let want = log_softmax(&row, low);
    let mut hot_per_path = Vec::new();
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let s = server(2, 8, sampling);
        let body = json!({"prompt": prompt, "max_tokens": 1, "temperature": 0, "logit_bias": {low.to_string(): 100},
                          "logprobs": 20});
        let (st, r) = post(&s, "/v1/completions", &body.to_string());
        assert_eq!(st, 200, "{r}");
        let lp = &r["choices"][0]["logprobs"];
        let got = lp["token_logprobs"][0].as_f64().unwrap_or_else(|| panic!("{sampling:?}: {lp}"));
        assert!((got - want).abs() < 1e-3, "{sampling:?}: {got} vs {want}");
        let top = lp["top_logprobs"][0].as_object().unwrap();
        assert_eq!(top.len(), 20);
        assert!(top.values().all(|v| v.as_f64().unwrap() > got + 5.0), "{sampling:?}: far below the top 20");
        // Chat format too: a hot draw's tokens, every one with a number.
        let body = json!({"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8,
                          "temperature": 3.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": 5,
                          "logprobs": true, "top_logprobs": 20});
        let (st, r) = post(&s, "/v1/chat/completions", &body.to_string());
        assert_eq!(st, 200, "{r}");
        let content = r["choices"][0]["logprobs"]["content"].as_array().unwrap().clone();
        assert!(!content.is_empty());
        let mut below = 0;
        for c in &content {
            let lp = c["logprob"].as_f64().unwrap_or_else(|| panic!("{sampling:?}: null logprob in {c}"));
            let top = c["top_logprobs"].as_array().unwrap();
            if !top.iter().any(|t| t["token"] == c["token"]) {
                below += 1;
                assert!(lp <= top[19]["logprob"].as_f64().unwrap() + 1e-6, "{c}");
            }
        }
        assert!(below > 0, "{sampling:?}: the hot draw should pick some token below the top 20");
        hot_per_path.push(content);
        s.stop().unwrap();
    }
    for (a, b) in hot_per_path[0].iter().zip(&hot_per_path[1]) {
        assert_eq!(a["token"], b["token"]);
        assert!((a["logprob"].as_f64().unwrap() - b["logprob"].as_f64().unwrap()).abs() < 1e-4, "{a} vs {b}");
    }
}

/// Greedy tokens after `prompt` with `chain`, the prompt fed to the chain first or not.
fn greedy_run(prompt: &[u32], chain: &str, feed: bool, n: usize) -> Vec<u32> {
    let opts = SessionOptions { n_seq: 1, n_ctx: 256, threads: 2, sampling: Sampling::Cpu, ..Default::default() };
    let mut s = runner::Session::new(common::smollm2(), opts, vec![sampling::Chain::parse(chain).unwrap()]).unwrap();
    if feed {
        s.accept_prompt(0, prompt).unwrap();
    }
    common::decode(&mut s, prompt, n)
}

/// The prompt's tokens are fed to the request's chain, as llama-server's `init_sampler` does: a
/// strong presence penalty keeps every prompt token out of the output from the first token on
/// (without the feed, greedy SmolLM2 writes some: they are penalised only once generated), on
/// both sampling paths, with the prompt evaluated in chunks and reused from a slot's cells.
#[test]
fn the_prompt_is_fed_to_the_chain() {
    let text = "1, 2, 3, 4, 5, 6, 7, 8,";
    let tok = common::smollm2().tokenizer.clone().unwrap();
    let prompt = tok.encode(text).unwrap();
    // The tokens the prompt repeats (`,` and ` `), penalised by 2 + 2 x (at least 7) with the feed.
    let repeated: Vec<u32> = prompt.iter().copied().filter(|t| prompt.iter().filter(|&u| u == t).count() > 1).collect();
    let chain = "penalties(last_n=64,repeat=1.0,freq=2.0,present=2.0);greedy";
    let unfed = greedy_run(&prompt, chain, false, 8);
    let fed = greedy_run(&prompt, chain, true, 8);
    assert!(unfed.iter().any(|t| repeated.contains(t)), "without the feed a repeated prompt token comes: {unfed:?}");
    assert!(!fed.iter().any(|t| repeated.contains(t)), "{fed:?} holds a repeated prompt token ({prompt:?})");
    let want = tok.decode(&fed).unwrap();
    assert_ne!(want, tok.decode(&unfed).unwrap());
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let s = server(2, 8, sampling);
        let body = json!({"prompt": text, "max_tokens": 8, "temperature": 0, "presence_penalty": 2.0,
                          "frequency_penalty": 2.0});
        // Twice: the second reuses the first's cells (all but the last prompt token).
        for round in 0..2 {
            let (st, r) = post(&s, "/v1/completions", &body.to_string());
            assert_eq!(st, 200, "{r}");
            assert_eq!(r["choices"][0]["text"], want.as_str(), "{sampling:?}, round {round}");
        }
        assert!(metric(&s, "prompt_tokens_cached_total") >= (prompt.len() - 1) as f64);
        s.stop().unwrap();
    }
}

#[test]
fn a_client_that_goes_away_frees_its_slot() {
    let s = server(1, 8, Sampling::Backend);
    let mut c = std::net::TcpStream::connect(s.addr()).unwrap();
    let body = r#"{"prompt": "Once upon a time", "max_tokens": 200, "stream": true, "ignore_eos": true}"#;
    write!(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut buf = [0u8; 2048];
    let n = c.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("200 OK"));
    drop(c);
    let t0 = Instant::now();
    while metric(&s, "sequences_cancelled_total") < 1.0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "the slot was not freed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(metric(&s, "tokens_generated_total") < 200.0);
    // The one slot serves the next request.
    let (st, _) = post(&s, "/v1/completions", r#"{"prompt": "Hello", "max_tokens": 2}"#);
    assert_eq!(st, 200);
    s.stop().unwrap();
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let s = server(1, 1, Sampling::Backend);
    let addr = s.addr();
    let clients: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(move || {
                let b = r#"{"prompt": "Hello", "max_tokens": 30, "ignore_eos": true}"#;
                match ureq::post(&format!("http://{addr}/v1/completions")).send_string(b) {
                    Ok(r) => (r.status(), None),
                    Err(ureq::Error::Status(c, r)) => (c, r.header("Retry-After").map(str::to_string)),
                    Err(e) => panic!("{e}"),
                }
            })
        })
        .collect();
    let results: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert!(results.iter().any(|r| r.0 == 200), "{results:?}");
    let busy: Vec<_> = results.iter().filter(|r| r.0 == 503).collect();
    assert!(!busy.is_empty(), "{results:?}");
    assert!(busy.iter().all(|r| r.1.as_deref() == Some("1")), "{results:?}");
    s.stop().unwrap();
}

#[test]
fn malformed_requests_get_4xx_and_the_server_keeps_serving() {
    let s = server(2, 8, Sampling::Backend);
    let fixed: Vec<(String, &str)> = vec![
        (r#"{"prompt": "x", "temperature": "hot"}"#.into(), "temperature"),
        (r#"{"prompt": "x", "max_tokens": -5}"#.into(), "max_tokens"),
        (r#"{"prompt": "x", "max_tokens": 0}"#.into(), "max_tokens"),
        (r#"{"prompt": "x", "top_p": 7}"#.into(), "top_p"),
        (r#"{"prompt": "x", "n": 0}"#.into(), "n"),
        (r#"{"prompt": [1, 2, 999999]}"#.into(), "prompt"),
        (r#"{"prompt": "x", "stop": [""]}"#.into(), "stop"),
        (r#"{"prompt": "x", "logit_bias": {"a": 1}}"#.into(), "logit_bias"),
        (r#"{"prompt": "x", "grammar": "root ::= ("}"#.into(), "grammar"),
        (r#"{"prompt": "x", "response_format": {"type": "xml"}}"#.into(), "response_format.type"),
        (r#"{"prompt": "x", "dry_multiplier": 0.8, "dry_sequence_breakers": []}"#.into(), "dry_sequence_breakers"),
        (r#"{"prompt": "x", "dry_sequence_breakers": ["a", 1]}"#.into(), "dry_sequence_breakers"),
        (format!(r#"{{"prompt": "{}"}}"#, "word ".repeat(400)), "prompt"),
    ];
    // Grammars that would blow up: 5,000 alternatives to start from (too many parse stacks), a
    // chain of 20,000 rules each reached from the one before, 100,000 nested groups (the last two
    // once overflowed the stack and aborted the server).
    let alternatives = (0..5000).map(|i| format!("\"a{i}\"")).collect::<Vec<_>>().join(" | ");
    let chain: String = (0..20_000).map(|i| format!("r{i} ::= \"v{i}\" | r{}\n", i + 1)).collect();
    let fixed: Vec<(String, &str)> = fixed
        .into_iter()
        .chain(
            [
                format!("root ::= {alternatives}"),
                format!("root ::= r0\n{chain}r20000 ::= \"end\""),
                format!("root ::= {}\"a\"{}", "(".repeat(100_000), ")".repeat(100_000)),
            ]
            .map(|g| (json!({"prompt": "x", "grammar": g}).to_string(), "grammar")),
        )
        .collect();
    for (body, field) in &fixed {
        let (st, r) = post(&s, "/v1/completions", body);
        let shown: String = body.chars().take(200).collect();
        assert_eq!(st, 400, "{shown}: {r}");
        assert_eq!(r["error"]["param"], *field, "{shown}: {r}");
        assert_eq!(r["error"]["type"], "invalid_request_error");
    }
    // Malformed JSON, invalid UTF-8, wrong types everywhere, a 10 MB body: 1000 in all.
    let mut rng = 12345u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let fields =
        ["prompt", "max_tokens", "temperature", "top_k", "seed", "stop", "n", "logprobs", "stream", "samplers"];
    let values =
        [r#""x""#, "-3", "1e400", "[]", "{}", "null", "true", r#"[1, "a"]"#, "99999999999999999999", r#""\ud800""#];
    for i in 0..1000 {
        let body: Vec<u8> = match i % 4 {
            0 => format!(r#"{{"prompt": "a", "{}": {}"#, fields[next() as usize % 10], values[next() as usize % 10])
                .into_bytes(),
            1 => vec![b'{', 0xff, 0xfe, b'}'],
            2 => format!(
                r#"{{"{}": {}, "prompt": {}}}"#,
                fields[next() as usize % 10],
                values[next() as usize % 10],
                values[next() as usize % 10]
            )
            .into_bytes(),
            _ => format!(r#"[{}]"#, values[next() as usize % 10]).into_bytes(),
        };
        let r = ureq::post(&url(&s, "/v1/completions")).send_bytes(&body);
        let code = match r {
            Ok(r) => r.status(),
            Err(ureq::Error::Status(c, _)) => c,
            Err(e) => panic!("{e}"),
        };
        // A body that happens to be valid may be served (200); nothing else but a 4xx.
        assert!(code == 200 || (400..500).contains(&code), "{}: {code}", String::from_utf8_lossy(&body));
    }
    // A 10 MB body: 413 (the server may answer and close before the client has sent it all).
    let big = vec![b' '; 10 << 20];
    match ureq::post(&url(&s, "/v1/completions")).send_bytes(&big) {
        Err(ureq::Error::Status(c, _)) => assert_eq!(c, 413),
        Err(ureq::Error::Transport(t)) => eprintln!("the 10 MB body was cut off: {t}"),
        Ok(r) => panic!("a 10 MB body was served: {}", r.status()),
    }
    let (st, _) = post(&s, "/v1/completions", r#"{"prompt": "Hello", "max_tokens": 2}"#);
    assert_eq!(st, 200);
    s.stop().unwrap();
}

/// The binary: `runner serve` answers, and SIGTERM cancels the stream in flight (the client gets
/// an error event and the end of the stream) and exits 0.
#[test]
fn sigterm_cancels_in_flight_requests_and_exits_zero() {
    common::smollm2();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/models");
    let model = runner::fetch::smollm2(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["serve", "--model"])
        .arg(&model)
        .args(["--port", &port.to_string(), "--parallel", "2", "--ctx", "512", "--threads", "2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let t0 = Instant::now();
    while ureq::get(&format!("{base}/health")).call().is_err() {
        assert!(t0.elapsed() < Duration::from_secs(60), "the server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let client = std::thread::spawn(move || {
        let body = r#"{"prompt": "Once upon a time", "max_tokens": 400, "stream": true, "ignore_eos": true}"#;
        let r = ureq::post(&format!("{base}/v1/completions")).send_string(body).unwrap();
        let mut text = String::new();
        let _ = r.into_reader().read_to_string(&mut text);
        text
    });
    let m = format!("http://127.0.0.1:{port}/metrics");
    let generated = || -> f64 {
        let t = ureq::get(&m).call().unwrap().into_string().unwrap();
        t.lines().find_map(|l| l.strip_prefix("runner_tokens_generated_total ")).unwrap().parse().unwrap()
    };
    while generated() < 3.0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no tokens");
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t1.elapsed() < Duration::from_secs(30), "SIGTERM did not stop the server");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let text = client.join().unwrap();
    assert!(text.contains("shutting down"), "the stream ends with the reason: {text}");
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(out.contains("serving") && out.contains("stopped"), "{out}");
}

/// The official `openai` Python client (in `target/pyenv`, which `cargo xtask ci` makes; or the
/// interpreter in `RUNNER_TEST_PYTHON`) runs `tests/data/openai_client.py` against the server.
#[test]
fn the_openai_python_client_works() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("RUNNER_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target/pyenv/bin/python"));
    let has =
        std::process::Command::new(&python).args(["-c", "import openai"]).output().is_ok_and(|o| o.status.success());
    if !has {
        sched::testing::skip(
            "the_openai_python_client_works",
            format!("no Python with the openai package at {} (cargo xtask ci installs it)", python.display()),
        );
        return;
    }
    let s = server(2, 8, Sampling::Backend);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openai_client.py");
    let out = std::process::Command::new(&python).arg(&script).arg(format!("http://{}", s.addr())).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("openai client: ok"), "{stdout}");
    s.stop().unwrap();
}

/// `--spec ngram`: requests draft from their own context and verify on the backend, drafts
/// accepted (counted in /metrics) and steps saved. A greedy request's text is the server's text
/// without speculation (always); the seeded sampling requests' texts are too, here (their drafts
/// are their likeliest tokens; in general speculation keeps a sampling request's distribution,
/// not its exact tokens). Deterministic: fixed seeds and a batch-invariant forward.
#[test]
fn ngram_speculation_gives_the_same_text() {
    let counting = "1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3,";
    let bodies = [
        json!({"prompt": counting, "max_tokens": 40, "temperature": 0}),
        json!({"prompt": counting, "max_tokens": 40, "seed": 3, "temperature": 0.7, "top_k": 20}),
        json!({"prompt": "Tell me about the sea.", "max_tokens": 20, "seed": 9}),
    ];
    let texts = |s: &Server| -> Vec<Value> {
        let addr = s.addr();
        let hs: Vec<_> = bodies
            .iter()
            .map(|b| {
                let b = b.to_string();
                std::thread::spawn(move || {
                    let r = ureq::post(&format!("http://{addr}/v1/completions")).send_string(&b).unwrap();
                    r.into_json::<Value>().unwrap()["choices"][0]["text"].clone()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    };
    let plain = server(4, 8, Sampling::Backend);
    let want = texts(&plain);
    plain.stop().unwrap();
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let s = server_with(4, 8, sampling, Some((3, 8)));
        assert_eq!(texts(&s), want, "{sampling:?}");
        let (drafted, accepted) = (metric(&s, "draft_tokens_total"), metric(&s, "draft_tokens_accepted_total"));
        assert!(accepted > 10.0 && drafted >= accepted, "{sampling:?}: {accepted} of {drafted} drafts accepted");
        assert!(metric(&s, "decode_steps_total") < 60.0, "{sampling:?}: speculation saves steps");
        s.stop().unwrap();
    }
}

/// `cache_prompt` (default on): a prompt that repeats or extends a finished sequence's tokens
/// reuses its slot's cells (counted in /metrics) and gives the same text as a run that
/// evaluates the whole prompt.
#[test]
fn a_prompt_that_extends_a_finished_one_reuses_its_cells() {
    let s = server(2, 8, Sampling::Backend);
    let p = "The quick brown fox jumps over the lazy dog. The quick brown fox";
    let body = |prompt: &str, cache: bool| {
        json!({"prompt": prompt, "max_tokens": 8, "temperature": 0, "cache_prompt": cache}).to_string()
    };
    let (_, a) = post(&s, "/v1/completions", &body(p, true));
    let n_prompt = a["usage"]["prompt_tokens"].as_f64().unwrap();
    let c0 = metric(&s, "prompt_tokens_cached_total");
    let (_, b) = post(&s, "/v1/completions", &body(p, true));
    assert_eq!(b["choices"][0]["text"], a["choices"][0]["text"]);
    let c1 = metric(&s, "prompt_tokens_cached_total");
    assert_eq!(c1 - c0, n_prompt - 1.0, "all but the last prompt token came from the cells");
    // The next turn: the prompt, the answer and more.
    let p2 = format!("{p}{} And then", a["choices"][0]["text"].as_str().unwrap());
    let (_, with) = post(&s, "/v1/completions", &body(&p2, true));
    let c2 = metric(&s, "prompt_tokens_cached_total");
    assert!(c2 - c1 >= n_prompt - 1.0, "the first turn's cells were reused ({} tokens)", c2 - c1);
    let (_, without) = post(&s, "/v1/completions", &body(&p2, false));
    assert_eq!(metric(&s, "prompt_tokens_cached_total"), c2, "cache_prompt false reuses nothing");
    assert_eq!(with["choices"][0]["text"], without["choices"][0]["text"]);
    s.stop().unwrap();
}

/// A request's slow preparation (tokenizing a prompt of 1.6 MB takes about 2 s here; compiling a
/// grammar or schema is done in the same place) runs on the runtime's blocking pool: while two
/// such requests (as many as the runtime's worker threads) are being prepared, `/health` and a
/// bad grammar's 400 are answered at once, before either of them ends (each then a 400: the
/// prompt is longer than the context).
#[test]
fn slow_request_preparation_leaves_the_runtime_free() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let s = server(2, 8, Sampling::Backend);
    let done = Arc::new(AtomicUsize::new(0));
    let addr = s.addr();
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let body = json!({"prompt": "a b c, d e f! ".repeat(120_000), "max_tokens": 1});
                let r = ureq::post(&format!("http://{addr}/v1/completions")).send_string(&body.to_string());
                done.fetch_add(1, Ordering::SeqCst);
                match r {
                    Err(ureq::Error::Status(400, r)) => r.into_string().unwrap(),
                    other => panic!("{other:?}"),
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    let h: Value = ureq::get(&url(&s, "/health")).call().unwrap().into_json().unwrap();
    assert_eq!(h["status"], "ok");
    let (st, r) = post(&s, "/v1/completions", r#"{"prompt": "x", "grammar": "root ::= nothing-defined"}"#);
    assert_eq!((st, r["error"]["param"].as_str()), (400, Some("grammar")), "{r}");
    assert_eq!(done.load(Ordering::SeqCst), 0, "the runtime waited for the slow requests");
    for t in slow {
        let text = t.join().unwrap();
        assert!(text.contains("tokens; a slot's context holds"), "{text}");
    }
    s.stop().unwrap();
}

/// llama-server's `/tokenize`, `/detokenize` and `/props` over HTTP, against the tokenizer in
/// this process; bad input is a 400 naming the field.
#[test]
fn native_tokenize_detokenize_and_props() {
    let s = server(2, 8, Sampling::Backend);
    let model = common::smollm2();
    let tok = model.tokenizer.clone().unwrap();
    let text = "Hello world, 🦀 crabs!";
    let mut want = tok.encode(text).unwrap();
    if tok.adds_bos() {
        want.remove(0);
    }
    let (st, r) = post(&s, "/tokenize", &json!({"content": text}).to_string());
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["tokens"], json!(want));
    let (_, r) = post(&s, "/tokenize", &json!({"content": text, "add_special": true}).to_string());
    let with_bos: Vec<u32> = tok.bos().filter(|_| tok.adds_bos()).into_iter().chain(want.iter().copied()).collect();
    assert_eq!(r["tokens"], json!(with_bos));
    // Pieces: text, or bytes where a piece is not UTF-8 (the crab's 4 bytes split over tokens).
    let (_, r) = post(&s, "/tokenize", &json!({"content": text, "with_pieces": true}).to_string());
    let pieces = r["tokens"].as_array().unwrap();
    assert_eq!(pieces.iter().map(|p| p["id"].as_u64().unwrap() as u32).collect::<Vec<_>>(), want);
    let mut bytes = Vec::new();
    for p in pieces {
        match &p["piece"] {
            Value::String(t) => bytes.extend_from_slice(t.as_bytes()),
            Value::Array(b) => {
                assert!(std::str::from_utf8(&b.iter().map(|x| x.as_u64().unwrap() as u8).collect::<Vec<_>>()).is_err());
                bytes.extend(b.iter().map(|x| x.as_u64().unwrap() as u8));
            }
            other => panic!("{other}"),
        }
    }
    assert_eq!(bytes, text.as_bytes());
    assert!(pieces.iter().any(|p| p["piece"].is_array()), "the crab is split into byte tokens: {r}");
    let (st, r) = post(&s, "/detokenize", &json!({"tokens": want}).to_string());
    assert_eq!((st, r["content"].as_str()), (200, Some(text)));
    // `parse_special` (default true): a special token's text is the token, or, false, text
    // (llama-server b6xxx on this GGUF answers these two lists).
    let special = "<|im_start|>hi";
    let (_, r) = post(&s, "/tokenize", &json!({"content": special}).to_string());
    assert_eq!(r["tokens"], json!([1, 6004]));
    let (_, r) = post(&s, "/tokenize", &json!({"content": special, "parse_special": false}).to_string());
    assert_eq!(r["tokens"], json!([44, 108, 306, 79, 3738, 108, 46, 6004]));
    let (_, r) = post(&s, "/tokenize", &json!({"content": special, "parse_special": true}).to_string());
    assert_eq!(r["tokens"], json!([1, 6004]));
    for (path, body, field) in [
        ("/tokenize", json!({}), "content"),
        ("/tokenize", json!({"content": 5}), "content"),
        ("/tokenize", json!({"content": "a", "with_pieces": "yes"}), "with_pieces"),
        ("/tokenize", json!({"content": "a", "add_special": 1}), "add_special"),
        ("/tokenize", json!({"content": "a", "parse_special": "no"}), "parse_special"),
        ("/detokenize", json!({"tokens": [1, 99_999_999]}), "tokens"),
        ("/detokenize", json!({"tokens": "1 2"}), "tokens"),
        ("/detokenize", json!({}), "tokens"),
    ] {
        let (st, r) = post(&s, path, &body.to_string());
        assert_eq!((st, r["error"]["param"].as_str()), (400, Some(field)), "{path} {body}: {r}");
    }

    let p: Value = ureq::get(&url(&s, "/props")).call().unwrap().into_json().unwrap();
    assert_eq!(p["total_slots"], 2);
    let d = &p["default_generation_settings"];
    assert_eq!(d["n_ctx"], 256);
    assert_eq!(d["params"]["top_k"], 40);
    assert!((d["params"]["temperature"].as_f64().unwrap() - 0.8).abs() < 1e-6);
    assert_eq!(d["params"]["seed"], 4_294_967_295u64);
    assert_eq!(d["params"]["n_predict"], -1);
    assert_eq!(d["params"]["samplers"][0], "penalties");
    assert!(p["model_path"].as_str().unwrap().ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"), "{p}");
    assert_eq!(p["chat_template"].as_str(), model.chat_template.as_deref());
    let piece = |t: Option<u32>| String::from_utf8_lossy(tok.grammar_vocab().piece(t.unwrap())).into_owned();
    assert_eq!(p["bos_token"], piece(tok.bos()));
    assert_eq!(p["eos_token"], piece(tok.eos()));
    assert_eq!(p["eos_token"], "<|im_end|>");
    s.stop().unwrap();
}

/// llama-server's `/completion`: text or token-id prompts, `n_predict`, `return_tokens`, the
/// stop types (limit, word, eos), streaming as `data:` objects without `[DONE]`, the sampling
/// fields, and 400s naming the field.
#[test]
fn native_completion() {
    let s = server(2, 8, Sampling::Backend);
    let tok = common::smollm2().tokenizer.clone().unwrap();
    let body = json!({"prompt": "The capital of France is", "n_predict": 6, "temperature": 0, "return_tokens": true});
    let (st, r) = post(&s, "/completion", &body.to_string());
    assert_eq!(st, 200, "{r}");
    let content = r["content"].as_str().unwrap().to_string();
    assert!(content.contains("Paris"), "{r}");
    let tokens: Vec<u32> = r["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
    assert_eq!(tokens.len(), 6);
    assert_eq!(tok.decode(&tokens).unwrap(), content);
    assert_eq!(
        (r["stop"].as_bool(), r["stop_type"].as_str(), r["stopping_word"].as_str()),
        (Some(true), Some("limit"), Some(""))
    );
    assert_eq!((r["tokens_predicted"].as_u64(), r["tokens_evaluated"].as_u64()), (Some(6), Some(5)));
    assert_eq!(r["prompt"], "The capital of France is");
    assert_eq!(r["generation_settings"]["n_predict"], 6);
    assert_eq!(r["generation_settings"]["temperature"], 0.0);
    // The OpenAI endpoint gives the same text.
    let (_, o) = post(
        &s,
        "/v1/completions",
        &json!({"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0}).to_string(),
    );
    assert_eq!(o["choices"][0]["text"], content.as_str());
    // Token ids as the prompt; without return_tokens, no tokens.
    let ids = tok.encode("The capital of France is").unwrap();
    let (_, r) = post(&s, "/completion", &json!({"prompt": ids, "n_predict": 6, "temperature": 0}).to_string());
    assert_eq!(r["content"], content.as_str());
    assert_eq!(r["tokens"], json!([]));
    // A stop string.
    let (_, r) = post(
        &s,
        "/completion",
        &json!({"prompt": "1, 2, 3, 4,", "n_predict": 16, "temperature": 0, "stop": [" 7"]}).to_string(),
    );
    assert_eq!((r["stop_type"].as_str(), r["stopping_word"].as_str()), (Some("word"), Some(" 7")), "{r}");
    assert!(r["content"].as_str().unwrap().ends_with("6,"), "{r}");
    // An end-of-generation token.
    let chat = "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n";
    let (_, r) = post(&s, "/completion", &json!({"prompt": chat, "n_predict": 64, "temperature": 0}).to_string());
    assert_eq!(r["stop_type"], "eos", "{r}");
    // Streaming: data objects, their content the whole text, the last one stop: true; no [DONE].
    let sb = json!({"prompt": "The capital of France is", "n_predict": 6, "temperature": 0, "stream": true});
    let text = ureq::post(&url(&s, "/completion")).send_string(&sb.to_string()).unwrap().into_string().unwrap();
    assert!(!text.contains("[DONE]"), "{text}");
    let chunks: Vec<Value> =
        text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
    let streamed: String = chunks.iter().filter_map(|c| c["content"].as_str()).collect();
    assert_eq!(streamed, content);
    let streamed_tokens: Vec<u32> = chunks
        .iter()
        .flat_map(|c| c["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32))
        .collect();
    assert_eq!(streamed_tokens, tokens, "tokens come with every chunk");
    let last = chunks.last().unwrap();
    assert_eq!((last["stop"].as_bool(), last["stop_type"].as_str()), (Some(true), Some("limit")), "{last}");
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c["stop"] == false));
    for (body, field) in [
        (json!({}), "prompt"),
        (json!({"prompt": 5}), "prompt"),
        (json!({"prompt": "a", "n_predict": "x"}), "n_predict"),
        (json!({"prompt": "a", "temperature": "hot"}), "temperature"),
        (json!({"prompt": "a", "return_tokens": 1}), "return_tokens"),
        (json!({"prompt": [1, 99_999_999]}), "prompt"),
    ] {
        let (st, r) = post(&s, "/completion", &body.to_string());
        assert_eq!((st, r["error"]["param"].as_str()), (400, Some(field)), "{body}: {r}");
    }
    s.stop().unwrap();
}

/// The number `key` of `v`.
fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("no number `{key}` in {v}"))
}

/// `/completion`'s `n_probs`: `completion_probabilities` in llama-server's shape, each token's
/// log-probability of the raw logits and its rank (1 + the logits strictly above its own,
/// counted on this process's own forward pass) for the least likely token forced by a bias and
/// a hot draw, on both sampling paths; `post_sampling_probs`: the chain's survivors'
/// probabilities (a softmax at the temperature over the top 5) and 1 for a greedy token; entries
/// of a stop word's token left out; streaming chunks carry theirs.
#[test]
fn native_completion_probabilities() {
    let prompt: Vec<u32> = vec![504, 3575, 282, 4649, 314];
    let row = logits_after(&prompt);
    let rank = |t: usize| 1 + row.iter().filter(|&&x| x > row[t]).count() as u64;
    let low = (0..row.len()).min_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
    let mut order: Vec<usize> = (0..row.len()).collect();
    order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    for sampling in [Sampling::Backend, Sampling::Cpu] {
        let s = server(2, 8, sampling);
        // The forced least likely token, and a hot draw.
        for (body, forced) in [
            (
                json!({"prompt": prompt, "n_predict": 1, "temperature": 0, "logit_bias": {low.to_string(): 100}, "n_probs": 3}),
                true,
            ),
            (
                json!({"prompt": prompt, "n_predict": 1, "temperature": 4.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
                    "seed": 9, "n_probs": 3}),
                false,
            ),
        ] {
            let (st, r) = post(&s, "/completion", &body.to_string());
            assert_eq!(st, 200, "{r}");
            let probs = r["completion_probabilities"].as_array().unwrap_or_else(|| panic!("{r}"));
            assert_eq!(probs.len(), 1, "{r}");
            let e = &probs[0];
            let t = e["id"].as_u64().unwrap() as usize;
            if forced {
                assert_eq!(t, low);
            }
            assert_eq!(e["rank"].as_u64(), Some(rank(t)), "{sampling:?}: {e}");
            assert!(rank(t) > 20, "{sampling:?}: the token ranks below the top: {e}");
            assert!((num(e, "logprob") - log_softmax(&row, t)).abs() < 1e-3, "{sampling:?}: {e}");
            let piece = common::smollm2().tokenizer.clone().unwrap().grammar_vocab().piece(t as u32).to_vec();
            assert_eq!(e["bytes"], json!(piece));
            let top = e["top_logprobs"].as_array().unwrap();
            assert_eq!(top.len(), 3);
            for (j, a) in top.iter().enumerate() {
                assert_eq!(a["id"].as_u64(), Some(order[j] as u64), "{a}");
                assert!((num(a, "logprob") - log_softmax(&row, order[j])).abs() < 1e-3, "{a}");
                assert!(a["token"].is_string() && a["bytes"].is_array(), "{a}");
            }
            assert_eq!(r["generation_settings"]["n_probs"], 3);
        }
        // After the chain: top_k 5 at temperature 0.8 keeps the 5 most likely, with the softmax
        // of their logits / 0.8; more asked for than survive gives the survivors.
        let body = json!({"prompt": prompt, "n_predict": 1, "temperature": 0.8, "top_k": 5, "top_p": 1.0,
                          "min_p": 0.0, "seed": 3, "n_probs": 10, "post_sampling_probs": true});
        let (_, r) = post(&s, "/completion", &body.to_string());
        let e = &r["completion_probabilities"][0];
        assert!(e.get("logprob").is_none() && e.get("rank").is_none(), "{e}");
        let top = e["top_probs"].as_array().unwrap_or_else(|| panic!("{r}"));
        assert_eq!(top.len(), 5, "{e}");
        let z: f64 = order[..5].iter().map(|&i| (f64::from(row[i] - row[order[0]]) / 0.8).exp()).sum();
        for (j, a) in top.iter().enumerate() {
            let want = (f64::from(row[order[j]] - row[order[0]]) / 0.8).exp() / z;
            assert_eq!(a["id"].as_u64(), Some(order[j] as u64), "{sampling:?}: {e}");
            assert!((num(a, "prob") - want).abs() < 1e-4, "{sampling:?}: {a} vs {want}");
        }
        let own = top.iter().find(|a| a["id"] == e["id"]).unwrap();
        assert_eq!(e["prob"], own["prob"]);
        assert_eq!(r["generation_settings"]["post_sampling_probs"], true);
        // Greedy: the chosen token alone, probability 1 (llama.cpp's temperature 0 keeps it only).
        let body =
            json!({"prompt": prompt, "n_predict": 2, "temperature": 0, "n_probs": 4, "post_sampling_probs": true});
        let (_, r) = post(&s, "/completion", &body.to_string());
        for e in r["completion_probabilities"].as_array().unwrap() {
            assert_eq!((num(e, "prob"), e["top_probs"].as_array().unwrap().len()), (1.0, 1), "{e}");
            assert_eq!(e["top_probs"][0]["id"], e["id"]);
        }
        assert_eq!(r["completion_probabilities"][0]["id"].as_u64(), Some(order[0] as u64));
        // A stop word's token has no entry (as llama-server); the others do.
        let body = json!({"prompt": "1, 2, 3, 4,", "n_predict": 16, "temperature": 0, "stop": [" 7"], "n_probs": 1});
        let (_, r) = post(&s, "/completion", &body.to_string());
        assert_eq!(r["stop_type"], "word", "{r}");
        let (_, t) = post(&s, "/tokenize", &json!({"content": " 7"}).to_string());
        let n_stop = t["tokens"].as_array().unwrap().len();
        let n = r["completion_probabilities"].as_array().unwrap().len();
        assert_eq!(n as u64 + n_stop as u64, r["tokens_predicted"].as_u64().unwrap(), "{r}");
        // Streaming: every chunk with a token has its entry.
        let sb = json!({"prompt": prompt, "n_predict": 3, "temperature": 0, "stream": true, "n_probs": 2});
        let text = ureq::post(&url(&s, "/completion")).send_string(&sb.to_string()).unwrap().into_string().unwrap();
        let chunks: Vec<Value> =
            text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
        let ids: Vec<Value> = chunks
            .iter()
            .filter_map(|c| c["completion_probabilities"].as_array())
            .flat_map(|p| p.iter().map(|e| e["id"].clone()))
            .collect();
        let tokens: Vec<Value> = chunks.iter().flat_map(|c| c["tokens"].as_array().unwrap().clone()).collect();
        assert_eq!((ids.len(), &ids), (3, &tokens), "{text}");
        assert!(chunks.last().unwrap().get("completion_probabilities").is_none());
        for (body, field) in [
            (json!({"prompt": "a", "n_probs": 21}), "n_probs"),
            (json!({"prompt": "a", "n_probs": "x"}), "n_probs"),
            (json!({"prompt": "a", "post_sampling_probs": "yes"}), "post_sampling_probs"),
        ] {
            let (st, r) = post(&s, "/completion", &body.to_string());
            assert_eq!((st, r["error"]["param"].as_str()), (400, Some(field)), "{body}: {r}");
        }
        s.stop().unwrap();
    }
}

/// `/completion`'s `timings` (llama-server's fields, consistent with each other and with the
/// counts; a repeated prompt's cells reused: `cache_n`), `tokens_cached`, and `id_slot`: the
/// slot asked for (wrapping around the slots), waited for while busy while a request without
/// one runs in the other slot meanwhile; chunks of a stream say their slot.
#[test]
fn native_completion_timings_and_slots() {
    let s = server(2, 8, Sampling::Backend);
    let prompt: Vec<u32> = vec![504, 3575, 282, 4649, 314];
    let body = json!({"prompt": prompt, "n_predict": 4, "temperature": 0});
    let (_, r) = post(&s, "/completion", &body.to_string());
    let t = &r["timings"];
    assert_eq!((num(t, "cache_n"), num(t, "prompt_n"), num(t, "predicted_n")), (0.0, 5.0, 4.0), "{t}");
    assert!(num(t, "prompt_ms") > 0.0 && num(t, "predicted_ms") > 0.0, "{t}");
    assert!((num(t, "prompt_per_token_ms") - num(t, "prompt_ms") / 5.0).abs() < 1e-9, "{t}");
    assert!((num(t, "prompt_per_second") - 5e3 / num(t, "prompt_ms")).abs() < 1e-6, "{t}");
    // The first token comes with the prompt: 3 decode steps.
    assert!((num(t, "predicted_per_token_ms") - num(t, "predicted_ms") / 3.0).abs() < 1e-9, "{t}");
    assert!((num(t, "predicted_per_second") - 3e3 / num(t, "predicted_ms")).abs() < 1e-6, "{t}");
    assert!(t.get("draft_n").is_none());
    // 5 prompt tokens and 4 generated, the last not fed back: 8 cells.
    assert_eq!(r["tokens_cached"], 8);
    let slot = r["id_slot"].as_u64().unwrap();
    let (_, r) = post(
        &s,
        "/completion",
        &json!({"prompt": prompt, "n_predict": 2, "temperature": 0, "id_slot": slot}).to_string(),
    );
    let t = &r["timings"];
    assert_eq!((num(t, "cache_n"), num(t, "prompt_n")), (4.0, 1.0), "the prompt's cells are reused: {t}");
    // id_slot: the slot asked for; 3 of 2 slots wraps to 1.
    for (asked, got) in [(0, 0), (1, 1), (3, 1), (-1, 0)] {
        let (st, r) = post(&s, "/completion", &json!({"prompt": "Hi", "n_predict": 1, "id_slot": asked}).to_string());
        assert_eq!((st, r["id_slot"].as_i64()), (200, Some(got)), "id_slot {asked}: {r}");
    }
    // A long request in slot 1; one that asks for slot 1 waits for it, one that does not runs
    // in slot 0 meanwhile.
    let addr = url(&s, "/completion");
    let go = |body: Value| {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let r: Value = ureq::post(&addr).send_string(&body.to_string()).unwrap().into_json().unwrap();
            (r, Instant::now())
        })
    };
    let long = go(json!({"prompt": "Count:", "n_predict": 48, "temperature": 0, "ignore_eos": true, "id_slot": 1}));
    let t0 = Instant::now();
    while metric(&s, "slots_active") < 1.0 {
        assert!(t0.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(5));
    }
    // The waiting request runs long enough (24 steps) that its answer comes well after the long
    // one's even when the client thread that reads the long one is descheduled for a while (with 1
    // token, a CI run under load once saw the two arrive the other way round).
    let waits = go(json!({"prompt": "Hi", "n_predict": 24, "temperature": 0, "ignore_eos": true, "id_slot": 1}));
    std::thread::sleep(Duration::from_millis(50));
    let other = go(json!({"prompt": "Hi", "n_predict": 1}));
    let (lr, lt) = long.join().unwrap();
    let (wr, wt) = waits.join().unwrap();
    let (or, ot) = other.join().unwrap();
    assert_eq!((lr["id_slot"].as_u64(), wr["id_slot"].as_u64(), or["id_slot"].as_u64()), (Some(1), Some(1), Some(0)));
    assert_eq!(lr["tokens_predicted"], 48);
    assert_eq!(wr["tokens_predicted"], 24);
    assert!(wt > lt, "the request for slot 1 ended after the one in it");
    assert!(ot < lt, "the request for any slot did not wait");
    // Streaming chunks say their slot.
    let sb = json!({"prompt": "Hi", "n_predict": 3, "stream": true, "id_slot": 1});
    let text = ureq::post(&addr).send_string(&sb.to_string()).unwrap().into_string().unwrap();
    let chunks: Vec<Value> =
        text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(chunks.len() >= 2 && chunks.iter().all(|c| c["id_slot"] == 1), "{text}");
    assert!(chunks.last().unwrap()["timings"]["predicted_n"] == 3, "{text}");
    for body in [json!({"prompt": "a", "id_slot": -2}), json!({"prompt": "a", "id_slot": "a"})] {
        let (st, r) = post(&s, "/completion", &body.to_string());
        assert_eq!((st, r["error"]["param"].as_str()), (400, Some("id_slot")), "{body}: {r}");
    }
    s.stop().unwrap();
}
