//! The server's counters, shared by the HTTP handlers and the batching loop, and their
//! Prometheus text (`GET /metrics`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters (monotonic) and gauges (last value).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests accepted into the queue.
    pub requests: AtomicU64,
    /// Requests refused because the queue was full (503).
    pub rejected: AtomicU64,
    /// Requests answered with a 4xx.
    pub bad_requests: AtomicU64,
    /// Sequences whose client went away before they ended.
    pub cancelled: AtomicU64,
    /// Sequences that ended (any reason).
    pub finished: AtomicU64,
    /// Prompt tokens evaluated.
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens whose cells a slot still held from its last sequence (not evaluated).
    pub prompt_tokens_cached: AtomicU64,
    /// Tokens generated.
    pub generated_tokens: AtomicU64,
    /// Sequences waiting for a slot (gauge).
    pub queue_depth: AtomicU64,
    /// Slots in use (gauge).
    pub active_slots: AtomicU64,
    /// Sequences sampled in the last decode step (gauge).
    pub batch_size: AtomicU64,
    /// Decode steps.
    pub decode_steps: AtomicU64,
    /// Decode steps that sampled two or more sequences together.
    pub shared_steps: AtomicU64,
    /// Prompt chunks evaluated.
    pub prefill_steps: AtomicU64,
    /// Decode steps that also evaluated prompt chunks (ragged steps).
    pub mixed_steps: AtomicU64,
    /// Draft tokens proposed (`--spec ngram`).
    pub drafted_tokens: AtomicU64,
    /// Draft tokens accepted.
    pub accepted_tokens: AtomicU64,
    /// Bytes read back to the host by all steps.
    pub bytes_read: AtomicU64,
    /// Bytes read back by the last decode step (gauge).
    pub bytes_read_last_step: AtomicU64,
    /// Microseconds in graphs (building, inputs, compute).
    pub graph_us: AtomicU64,
    /// Microseconds sampling (read-back, CPU stages, accepting).
    pub sampling_us: AtomicU64,
    /// Plans that allocated or grew buffers since the session began, the reserve at start
    /// included (the scheduler's `Stats::allocations`; gauge).
    pub allocations: AtomicU64,
    /// Tokens an optimistic grammar (a request's `response_format` or `grammar`) checked.
    pub grammar_checked: AtomicU64,
    /// Of those, the tokens it rejected (each row run again, masked, in a second backend step).
    pub grammar_rejected: AtomicU64,
}

impl Metrics {
    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let rows: [(&str, &str, &str, &AtomicU64); 24] = [
            ("requests_total", "counter", "Requests accepted.", &self.requests),
            ("requests_rejected_total", "counter", "Requests refused with 503 (queue full).", &self.rejected),
            ("requests_invalid_total", "counter", "Requests answered with a 4xx.", &self.bad_requests),
            ("sequences_cancelled_total", "counter", "Sequences whose client left before they ended.", &self.cancelled),
            ("sequences_finished_total", "counter", "Sequences that ended.", &self.finished),
            ("prompt_tokens_total", "counter", "Prompt tokens evaluated.", &self.prompt_tokens),
            (
                "prompt_tokens_cached_total",
                "counter",
                "Prompt tokens reused from a slot's cells.",
                &self.prompt_tokens_cached,
            ),
            ("tokens_generated_total", "counter", "Tokens generated.", &self.generated_tokens),
            ("queue_depth", "gauge", "Sequences waiting for a slot.", &self.queue_depth),
            ("slots_active", "gauge", "Slots in use.", &self.active_slots),
            ("batch_size", "gauge", "Sequences sampled in the last decode step.", &self.batch_size),
            ("decode_steps_total", "counter", "Decode steps.", &self.decode_steps),
            (
                "decode_steps_shared_total",
                "counter",
                "Decode steps that sampled two or more sequences.",
                &self.shared_steps,
            ),
            ("prefill_chunks_total", "counter", "Prompt chunks evaluated.", &self.prefill_steps),
            (
                "decode_steps_with_prompt_total",
                "counter",
                "Decode steps that also evaluated prompt chunks.",
                &self.mixed_steps,
            ),
            ("draft_tokens_total", "counter", "Draft tokens proposed.", &self.drafted_tokens),
            ("draft_tokens_accepted_total", "counter", "Draft tokens accepted.", &self.accepted_tokens),
            ("bytes_read_back_total", "counter", "Bytes read back to the host.", &self.bytes_read),
            (
                "bytes_read_back_last_step",
                "gauge",
                "Bytes read back by the last decode step.",
                &self.bytes_read_last_step,
            ),
            ("graph_seconds_total", "counter", "Seconds in graphs (inputs, compute).", &self.graph_us),
            (
                "sampling_seconds_total",
                "counter",
                "Seconds sampling (read-back, CPU stages, accept).",
                &self.sampling_us,
            ),
            (
                "buffer_allocations",
                "gauge",
                "Plans that allocated or grew buffers (the reserve at start included).",
                &self.allocations,
            ),
            (
                "grammar_tokens_checked_total",
                "counter",
                "Tokens an optimistic grammar checked on the host.",
                &self.grammar_checked,
            ),
            (
                "grammar_tokens_rejected_total",
                "counter",
                "Tokens an optimistic grammar rejected (run again, masked, in a second backend step).",
                &self.grammar_rejected,
            ),
        ];
        let mut s = String::new();
        for (name, kind, help, v) in rows {
            let v = v.load(Relaxed);
            let value = if name.ends_with("seconds_total") { format!("{}", v as f64 / 1e6) } else { v.to_string() };
            s += &format!("# HELP runner_{name} {help}\n# TYPE runner_{name} {kind}\nrunner_{name} {value}\n");
        }
        s
    }
}
