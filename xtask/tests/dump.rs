//! `cargo xtask dump` end to end: the binary prints the text and DOT dumps of a fixture, and a bad
//! fixture fails with its line number on stderr.

#![allow(clippy::print_stderr)] // a skipped check says so on stderr

use std::process::Command;

fn xtask(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("xtask runs")
}

#[test]
fn dump_prints_text_and_dot() {
    let out = xtask(&["dump", "fixtures/graphs/mlp2.graph"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("graph: 10 nodes, 1 inputs, 4 params, 1 outputs"), "{text}");
    assert!(text.contains("mul_mat") && text.contains("silu"));

    let out = xtask(&["dump", "fixtures/graphs/mlp2.graph", "--format", "dot"]);
    assert!(out.status.success());
    let dot = String::from_utf8(out.stdout).unwrap();
    assert!(dot.starts_with("digraph G {") && dot.contains(" -> "));
}

#[test]
fn dump_reports_bad_fixtures_with_their_line() {
    let dir = std::env::temp_dir().join(format!("xtask-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.graph");
    std::fs::write(&bad, "input x f32 [4]\ny = top_k(x, k=5)\n").unwrap();
    let out = xtask(&["dump", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: top_k (node #1 'y'): k = 5 must be in 1..=4"), "{err}");
    let missing = xtask(&["dump", "fixtures/graphs/does-not-exist.graph"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("reading fixtures/graphs/does-not-exist.graph"));
}

#[test]
fn dot_dumps_render_with_graphviz() {
    let have_dot = Command::new("dot").arg("-V").output().is_ok_and(|o| o.status.success());
    if !have_dot {
        let why = "graphviz `dot` is not installed (cargo xtask ci installs it)";
        sched::testing::skip("dot_dumps_render_with_graphviz", why);
        return;
    }
    for fixture in ["mlp2", "attention", "sampling_tail"] {
        let out = xtask(&["dump", &format!("fixtures/graphs/{fixture}.graph"), "--format", "dot"]);
        assert!(out.status.success());
        let mut child = Command::new("dot")
            .arg("-Tsvg")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&out.stdout).unwrap();
        let rendered = child.wait_with_output().unwrap();
        assert!(rendered.status.success(), "{fixture}: {}", String::from_utf8_lossy(&rendered.stderr));
        assert!(String::from_utf8_lossy(&rendered.stdout).contains("<svg"));
    }
}

#[test]
fn dump_plan_on_cpu_shows_splits_and_buffers() {
    let out = xtask(&["dump", "fixtures/graphs/sampling_tail.graph", "--plan", "--backends", "cpu"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("plan: topology"), "{text}");
    assert!(text.contains("1 splits") || text.contains("1 split"), "{text}");
    assert!(text.contains("top_k{k=40}"));
    let out = xtask(&["dump", "fixtures/graphs/mlp2.graph", "--plan", "--backends", "tpu"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown backend `tpu` (expected cpu or vulkan)"));
    let out = xtask(&["dump", "fixtures/graphs/mlp2.graph", "--plan", "--pin", "nope=cpu"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no node named `nope`"));
}
