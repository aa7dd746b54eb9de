//! The runner's command line, end to end: the main job's summary holds what the README promises
//! (the tokens, each sequence's placement, decode tokens/s, and per decode step the graph and
//! sampling times and the bytes read back), and a bad argument is a clear error.

use std::process::{Command, Output};

fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner")).args(args).output().expect("running the runner binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The line of `out` that starts with `prefix` (the test fails, showing `out`, where none does).
fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{out}"))
}

#[test]
fn main_job_prints_tokens_placements_speed_and_bytes_per_step() {
    let o = runner(&["--steps", "3", "--quiet", "--threads", "2"]);
    let out = stdout(&o);
    assert!(o.status.success(), "runner failed: {}\n{out}", String::from_utf8_lossy(&o.stderr));
    for s in 0..4 {
        let toks = line(&out, &format!("seq {s}: ["));
        assert_eq!(toks.matches(',').count(), 2, "three tokens for sequence {s}: {toks}");
        line(&out, &format!("seq {s} placement: "));
    }
    // Every stage of the default batch runs on the backend, DRY on a top-k list included.
    assert!(line(&out, "seq 3 placement: ").contains("+dry"), "{out}");
    for s in 0..4 {
        assert!(!line(&out, &format!("seq {s} placement: ")).contains('-'), "{out}");
    }
    assert!(line(&out, "seq 0 placement: ").contains("+greedy"), "{out}");
    assert!(line(&out, "decode: ").contains("tokens/s"), "{out}");
    let per = line(&out, "per decode step: ");
    let bytes: usize = per
        .split("read back ")
        .nth(1)
        .and_then(|r| r.strip_suffix(" bytes"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in {per:?}"));
    // Four backend-sampled rows read back a token each: 4 bytes a row.
    assert_eq!(bytes, 16, "{per}");
}

#[test]
fn cpu_sampling_reads_back_whole_logits_rows() {
    let o = runner(&["--steps", "2", "--quiet", "--threads", "2", "--cpu-sampling"]);
    let out = stdout(&o);
    assert!(o.status.success(), "runner failed: {}\n{out}", String::from_utf8_lossy(&o.stderr));
    let per = line(&out, "per decode step: ");
    assert!(per.ends_with(&format!("read back {} bytes", 4 * 151_936 * 4)), "{per}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let o = runner(&["--steps", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--steps must be at least 1"));
    let o = runner(&["--seq", "0:top_k(k=40);nonsense;dist"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--seq 0: chain"), "{}", String::from_utf8_lossy(&o.stderr));
    for (args, says) in [
        (&["--reasoning-budget", "3", "--steps", "2"][..], "--reasoning-budget needs --model"),
        (&["--reasoning-budget", "-2", "--steps", "2"][..], "--reasoning-budget -2: expected -1"),
        (&["--reasoning-end", "</think>", "--steps", "2"][..], "need --reasoning-budget N"),
    ] {
        let o = runner(args);
        assert!(!o.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

/// `--ctx` bounds the KV cache: a run that does not fit is an error naming what it needs, and one
/// that fits runs (the demo model has no training context, so no warning).
#[test]
fn ctx_bounds_the_cache() {
    let o = runner(&["--ctx", "16", "--steps", "100", "--seq", "0:greedy"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--ctx 16") && err.contains("--steps 100") && err.contains("need"), "{err}");
    let o = runner(&["--ctx", "64", "--steps", "3", "--seq", "0:greedy", "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"));
}
