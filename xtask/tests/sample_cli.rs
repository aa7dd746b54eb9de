//! End-to-end tests of `cargo xtask sample`: runs the built binary on the logits fixtures in
//! `fixtures/logits/` and checks its JSON lines and its errors. The fixtures themselves are made by
//! `fixtures()` below; `SAMPLING_REGEN_FIXTURES=1 cargo test -p xtask --test sample_cli` rewrites
//! them, and `fixtures_match_generator` checks the committed files are what it makes.
#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn npy<T: npyz::Serialize + npyz::AutoSerialize + Clone>(shape: &[u64], data: &[T]) -> Vec<u8> {
    let mut buf = Vec::new();
    {
        use npyz::WriterBuilder;
        let mut w = npyz::WriteOptions::<T>::new().default_dtype().shape(shape).writer(&mut buf).begin_nd().unwrap();
        w.extend(data.iter().cloned()).unwrap();
        w.finish().unwrap();
    }
    buf
}

/// bf16 as numpy's 2-byte void (what `ml_dtypes.bfloat16` arrays save as).
fn npy_bf16(data: &[f32]) -> Vec<u8> {
    use npyz::WriterBuilder;
    let mut buf = Vec::new();
    {
        let dtype = npyz::DType::Plain("|V2".parse().unwrap());
        let mut w = npyz::WriteOptions::<npyz::FixedSizeBytes<2>>::new()
            .dtype(dtype)
            .shape(&[data.len() as u64])
            .writer(&mut buf)
            .begin_nd()
            .unwrap();
        for &x in data {
            w.push(&npyz::FixedSizeBytes(half::bf16::from_f32(x).to_bits().to_le_bytes())).unwrap();
        }
        w.finish().unwrap();
    }
    buf
}

/// The fixtures: name and bytes.
fn fixtures() -> Vec<(&'static str, Vec<u8>)> {
    // small_f32: 3 rows x 8 tokens.
    //   row 0: ln [1/2, 1/4, 1/8, 1/8] then four -inf (masked) tokens
    //   row 1: 0, 1, ..., 7
    //   row 2: all equal
    let ln = |p: f64| p.ln() as f32;
    let ni = f32::NEG_INFINITY;
    let mut small = vec![ln(0.5), ln(0.25), ln(0.125), ln(0.125), ni, ni, ni, ni];
    small.extend((0..8).map(|i| i as f32));
    small.extend([1.5f32; 8]);
    // vocab1k_f16: 1000 deterministic pseudo-normal logits (Philox), scale 3, stored as f16.
    let v: Vec<half::f16> = (0..1000u64)
        .map(|i| {
            let u1 = graph::philox::uniform(2024, 1, i).max(1e-7);
            let u2 = graph::philox::uniform(2024, 2, i);
            half::f16::from_f32(3.0 * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos())
        })
        .collect();
    vec![
        ("small_f32.npy", npy(&[3, 8], &small)),
        ("vocab1k_f16.npy", npy(&[1000], &v)),
        ("tiny_bf16.npy", npy_bf16(&[0.5, 2.0, -1.0, 2.0])),
    ]
}

#[test]
fn fixtures_match_generator() {
    let dir = root().join("fixtures/logits");
    for (name, bytes) in fixtures() {
        let path = dir.join(name);
        if std::env::var("SAMPLING_REGEN_FIXTURES").is_ok() {
            std::fs::write(&path, &bytes).unwrap();
        }
        let on_disk = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (regenerate with SAMPLING_REGEN_FIXTURES=1)", path.display()));
        assert_eq!(on_disk, bytes, "{name} differs from its generator");
    }
}

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn xtask(args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_xtask")).arg("sample").args(args).current_dir(root()).output().unwrap();
    Out {
        ok: o.status.success(),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

fn lines(o: &Out) -> Vec<serde_json::Value> {
    assert!(o.ok, "xtask sample failed: {}", o.stderr);
    o.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn ids(v: &serde_json::Value) -> Vec<u64> {
    v["candidates"].as_array().unwrap().iter().map(|c| c["id"].as_u64().unwrap()).collect()
}

fn ps(v: &serde_json::Value) -> Vec<f64> {
    v["candidates"].as_array().unwrap().iter().map(|c| c["p"].as_f64().unwrap()).collect()
}

const SMALL: &str = "fixtures/logits/small_f32.npy";

#[test]
fn truncation_without_selection() {
    let out = lines(&xtask(&["--logits", SMALL, "--chain", "top_k(k=2)"]));
    assert_eq!(out.len(), 3);
    // row 0: p = [1/2, 1/4, ...]: top-2 = {0, 1}, renormalised 2/3, 1/3; nothing selected
    assert_eq!(out[0]["row"], 0);
    assert!(out[0]["selected"].is_null());
    assert_eq!(ids(&out[0]), vec![0, 1]);
    let p = ps(&out[0]);
    assert!((p[0] - 2.0 / 3.0).abs() < 1e-6 && (p[1] - 1.0 / 3.0).abs() < 1e-6);
    assert!((out[0]["candidates"][0]["logit"].as_f64().unwrap() - 0.5f64.ln()).abs() < 1e-6);
    // row 1: 0..7, top-2 = {7, 6}
    assert_eq!(ids(&out[1]), vec![7, 6]);
    // row 2: all equal: ties go to the lower ids
    assert_eq!(ids(&out[2]), vec![0, 1]);
}

#[test]
fn masked_tokens_are_absent_and_p_normalised() {
    let out = lines(&xtask(&["--logits", SMALL, "--chain", "temp(t=1)"]));
    assert_eq!(ids(&out[0]), vec![0, 1, 2, 3]);
    let total: f64 = ps(&out[1]).iter().sum();
    assert!((total - 1.0).abs() < 1e-6);
    assert!(ps(&out[1]).windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn greedy_and_dist_select() {
    let out = lines(&xtask(&["--logits", SMALL, "--chain", "greedy"]));
    assert_eq!(out[0]["selected"], 0);
    assert_eq!(out[1]["selected"], 7);
    assert_eq!(out[2]["selected"], 0);
    // dist: same (seed, step) gives the same token; --seed fills in seedless stages
    let a = lines(&xtask(&[
        "--logits",
        "fixtures/logits/vocab1k_f16.npy",
        "--chain",
        "top_p(p=0.9);dist",
        "--seed",
        "5",
        "--step",
        "3",
    ]));
    let b = lines(&xtask(&[
        "--logits",
        "fixtures/logits/vocab1k_f16.npy",
        "--chain",
        "top_p(p=0.9);dist(seed=5)",
        "--step",
        "3",
    ]));
    assert_eq!(a, b);
    assert!(a[0]["selected"].is_u64());
    let steps: Vec<serde_json::Value> = (0..8)
        .map(|s| {
            lines(&xtask(&[
                "--logits",
                "fixtures/logits/vocab1k_f16.npy",
                "--chain",
                "top_p(p=0.9);dist(seed=5)",
                "--step",
                &s.to_string(),
            ]))[0]["selected"]
                .clone()
        })
        .collect();
    assert!(steps.iter().any(|s| *s != steps[0]), "eight steps all drew {:?}", steps[0]);
}

#[test]
fn history_feeds_penalties() {
    // row 1 logits 0..7; token 7 seen once with repeat 8: 7/8 = 0.875 < 6: greedy picks 6
    let out = lines(&xtask(&["--logits", SMALL, "--chain", "penalties(last_n=8,repeat=8);greedy", "--history", "7,3"]));
    assert_eq!(out[1]["selected"], 6);
}

#[test]
fn f16_and_bf16_files() {
    let out = lines(&xtask(&["--logits", "fixtures/logits/tiny_bf16.npy", "--chain", "greedy"]));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["selected"], 1);
    assert_eq!(out[0]["candidates"].as_array().unwrap().len(), 4);
    let out = lines(&xtask(&["--logits", "fixtures/logits/vocab1k_f16.npy", "--chain", "min_p(p=0.5)"]));
    assert!(!ids(&out[0]).is_empty() && ids(&out[0]).len() < 100);
}

#[test]
fn errors_go_to_stderr_with_nonzero_exit() {
    // --backend vulkan runs a backend prefix: only with --path graph.
    let o = xtask(&["--logits", SMALL, "--chain", "greedy", "--backend", "vulkan"]);
    assert!(!o.ok && o.stderr.contains("use it with --path graph"), "{}", o.stderr);
    let o = xtask(&["--logits", SMALL, "--chain", "greedy", "--path", "graph", "--history", "99"]);
    assert!(!o.ok && o.stderr.contains("outside the vocabulary"), "{}", o.stderr);
    let o = xtask(&["--logits", SMALL, "--chain", "top_k(k=40);top_p(p=NaN)"]);
    assert!(!o.ok && o.stderr.contains("stage 1") && o.stderr.contains("`p`"), "{}", o.stderr);
    let o = xtask(&["--logits", "fixtures/logits/missing.npy", "--chain", "greedy"]);
    assert!(!o.ok && o.stderr.contains("missing.npy"), "{}", o.stderr);
    let o = xtask(&["--logits", SMALL, "--chain", "greedy", "--history", "99"]);
    assert!(!o.ok && o.stderr.contains("outside the vocabulary"), "{}", o.stderr);
    assert!(o.stdout.is_empty());
}

/// Runs `xtask sample` with `RUST_BACKTRACE=1`, as a user who set it for another reason would.
fn xtask_backtrace(args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("sample")
        .args(args)
        .current_dir(root())
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .unwrap();
    Out {
        ok: o.status.success(),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

#[test]
fn user_errors_print_the_message_chain_not_a_backtrace() {
    let o = xtask_backtrace(&["--logits", SMALL, "--chain", "top_q(k=1)"]);
    assert!(!o.ok, "{}", o.stderr);
    assert!(o.stderr.starts_with("error: parsing --chain"), "{}", o.stderr);
    assert!(o.stderr.contains("caused by: SPEC stage 0 (`top_q`): unknown sampler"), "{}", o.stderr);
    assert!(!o.stderr.to_lowercase().contains("backtrace"), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 2, "{}", o.stderr);
}

#[test]
fn truncated_files_say_what_was_expected_and_found() {
    let bytes = std::fs::read(root().join(SMALL)).unwrap();
    let dir = std::env::temp_dir().join(format!("xtask-sample-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // cut inside the data: the header declares 3 x 8 f32
    let data_cut = dir.join("data_cut.npy");
    std::fs::write(&data_cut, &bytes[..bytes.len() - 24]).unwrap();
    let o = xtask_backtrace(&["--logits", data_cut.to_str().unwrap(), "--chain", "greedy"]);
    let want = format!("{} bytes with the header, but the file has {} bytes", bytes.len(), bytes.len() - 24);
    assert!(!o.ok && o.stderr.contains("data_cut.npy") && o.stderr.contains(&want), "{}", o.stderr);
    assert!(o.stderr.contains("shape [3, 8]"), "{}", o.stderr);
    // cut inside the header
    let header_cut = dir.join("header_cut.npy");
    std::fs::write(&header_cut, &bytes[..40]).unwrap();
    let o = xtask_backtrace(&["--logits", header_cut.to_str().unwrap(), "--chain", "greedy"]);
    assert!(!o.ok && o.stderr.contains("header_cut.npy"), "{}", o.stderr);
    assert!(o.stderr.contains("truncated .npy file") && o.stderr.contains("the file has 40 bytes"), "{}", o.stderr);
    assert!(!o.stderr.to_lowercase().contains("backtrace"), "{}", o.stderr);
    std::fs::remove_dir_all(&dir).ok();
}
