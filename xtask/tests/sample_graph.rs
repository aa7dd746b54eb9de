//! `cargo xtask sample --path graph` against `--path chain`: for every backend stage and chains
//! that mix backend and CPU stages, the same selected token and the same candidates (probabilities
//! within 1e-5), on the CPU backend and, where a Vulkan device exists, on Vulkan.
#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sample(args: &[&str]) -> Result<Vec<serde_json::Value>, String> {
    let o = Command::new(env!("CARGO_BIN_EXE_xtask")).arg("sample").args(args).current_dir(root()).output().unwrap();
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    Ok(String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

const CHAINS: &[&str] = &[
    "greedy",
    "dist(seed=11)",
    "top_k(k=40)",
    "top_k(k=40);greedy",
    "top_k(k=40);dist(seed=3)",
    "top_k(k=50);top_p(p=0.9)",
    "top_k(k=50);top_p(p=0.9,min_keep=5);dist(seed=4)",
    "top_k(k=50);min_p(p=0.1,min_keep=3);dist(seed=5)",
    "min_p(p=0.05)",
    "min_p(p=0.05);dist(seed=6)",
    "temp(t=0.7);dist(seed=7)",
    "temp(t=1.3);top_k(k=30);temp(t=0.5);greedy",
    "logit_bias(3=5,7=-inf,2000=1);greedy",
    "logit_bias(3=1.5);temp(t=0.8);min_p(p=0.02);dist(seed=8)",
    "top_k(k=40);logit_bias(953=-inf,222=2,645=-1);temp(t=0.8);dist(seed=51)",
    "top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist(seed=9)",
    // Backend prefix + CPU suffix, and CPU only.
    "top_k(k=40);typical(p=0.9);dist(seed=10)",
    "top_p(p=0.9);dist(seed=12)",
    "typical(p=0.9);top_k(k=10);dist(seed=13)",
    "temp(t=0);dist",
    "min_p(p=0.05,min_keep=4);greedy",
    // llama.cpp's default chain (its disabled stages append nothing) and penalties with history.
    "penalties;dry;top_n_sigma;top_k(k=40);typical;top_p(p=0.95);min_p(p=0.05);xtc;temp(t=0.8);dist(seed=14)",
    "penalties(last_n=64,repeat=1.3,freq=0.2,present=0.5);top_k(k=40);dist(seed=15)",
    "penalties(last_n=3,repeat=0.8,freq=0.4);greedy",
    "temp(t=0.5);penalties(last_n=8,repeat=1.1,present=2);min_p(p=0.1);dist(seed=16)",
    "penalties(last_n=-1,repeat=1.2);greedy",
    "top_k(k=20);penalties(repeat=1.2);greedy",
    "top_k(k=40);xtc(p=1,t=0.05);dist(seed=17)",
    "top_k(k=40);xtc(p=0.5,t=0.02,min_keep=30);dist(seed=18)",
    "top_k(k=60);top_n_sigma(n=1.5);dist(seed=19)",
    "top_k(k=60);top_n_sigma(n=0.5);temp(t=0.7);top_p(p=0.9);greedy",
    "top_n_sigma(n=1);dist(seed=20)",
    "xtc(p=1,t=0.1);dist(seed=21)",
    "top_k(k=40);mirostat_v2(tau=3,eta=0.1,seed=22)",
    "top_k(k=100);temp(t=1.5);mirostat_v2(tau=5,eta=0.1,seed=23)",
    "top_k(k=40);mirostat(tau=3,eta=0.1,seed=30)",
    "top_k(k=100);mirostat(tau=5,eta=0.1,m=10,seed=31)",
    "top_k(k=30);temp(t=0.7);mirostat(tau=2,eta=0.2,m=0,seed=32)",
    "top_k(k=1);mirostat(tau=3,eta=0.1,seed=33)",
    "top_k(k=40);temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=24)",
    "top_k(k=50);typical(p=0.8);top_p(p=0.9);min_p(p=0.02);temp(t=0.8);dist(seed=28)",
    "top_k(k=40);typical(p=0.5,min_keep=4);greedy",
    "top_k(k=40);typical(p=0.7);temp(t=0.9);typical(p=0.9);top_k(k=10);dist(seed=29)",
    "top_k(k=40);temp_ext(t=0.3,delta=0.5,exponent=2);top_p(p=0.8);dist(seed=25)",
    "top_k(k=30);temp_ext(t=1,delta=0.6,exponent=0);dist(seed=26)",
    "top_k(k=30);temp_ext(t=0.2,delta=0.4,exponent=-1);greedy",
    "top_k(k=1);temp_ext(t=0.7,delta=0.5);dist(seed=27)",
    // Top-p on the whole vocabulary (the top_p_mask op), and CPU suffixes after a vocabulary cut.
    "top_p(p=0.8)",
    "temp(t=0.7);top_p(p=0.5,min_keep=3);min_p(p=0.1);dist(seed=34)",
    "top_p(p=0.9);top_k(k=10);temp(t=1.2);dist(seed=35)",
    "top_p(p=0.95);greedy",
    "min_p(p=0.05);top_p(p=0.9);dist(seed=36)",
    "min_p(p=0.02);temp_ext(t=0.8,delta=0.5,exponent=1);dist(seed=37)",
    "top_p(p=0.7);typical(p=0.9);dist(seed=38)",
    // The vocabulary stages and top-p after a cut on the vocabulary (on the masked row).
    "top_p(p=0.9);temp_ext(t=1,delta=0.7,exponent=2);dist(seed=39)",
    "min_p(p=0.02);mirostat(tau=5,eta=0.1,m=100,seed=40)",
    "min_p(p=0.05);typical(p=0.9);dist(seed=41)",
    "top_p(p=0.95);xtc(p=1,t=0.02,seed=42);dist(seed=42)",
    "xtc(p=1,t=0.02,seed=43);top_n_sigma(n=1);dist(seed=43)",
    "min_p(p=0.05);mirostat_v2(tau=3,eta=0.1,seed=44)",
    "top_p(p=0.9);min_p(p=0.5,min_keep=6);dist(seed=45)",
    "typical(p=0.9);top_p(p=0.8);greedy",
    "top_n_sigma(n=1);min_p(p=2,min_keep=3);temp_ext(t=0.8,delta=0.5,exponent=1)",
];

/// DRY (its penalties from `--history`) and adaptive-p, on the vocabulary, after a cut and on a
/// top-k list: also compared over 50 steps.
const HISTORY_CHAINS: &[&str] = &[
    "dry(multiplier=0.8,base=1.75,allowed_length=1);dist(seed=46)",
    "top_k(k=40);dry(multiplier=2,allowed_length=1);temp(t=0.8);dist(seed=47)",
    "min_p(p=0.02);dry(multiplier=inf,allowed_length=1);greedy",
    "adaptive_p(target=0.3,decay=0.9,seed=48)",
    "top_k(k=40);adaptive_p(target=0.5,seed=49)",
    "top_k(k=40);dry(multiplier=1,allowed_length=1);adaptive_p(target=0.2,seed=50)",
];

/// Tokens accepted before the step (the penalties' window): the fixture's most likely tokens,
/// some repeated, so the penalties decide what survives and what is drawn.
const HISTORY: &str = "953,222,953,645,473,953,875,222,154,389";

fn compare(logits: &str, backend: &str, steps: &[&str]) -> Result<(), String> {
    compare_chains(CHAINS, logits, backend, steps)?;
    compare_chains(HISTORY_CHAINS, logits, backend, steps)
}

fn compare_chains(chains: &[&str], logits: &str, backend: &str, steps: &[&str]) -> Result<(), String> {
    for chain in chains {
        for step in steps {
            // The penalties' window: tokens accepted before the step (inside the 1000-token fixture).
            let hist: &[&str] = if logits.contains("vocab1k") { &["--history", HISTORY] } else { &[] };
            let base = ["--logits", logits, "--chain", chain, "--step", step];
            let a = sample(&[&base[..], hist].concat()).map_err(|e| format!("chain: {e}"))?;
            let b = sample(&[&base[..], &["--path", "graph", "--backend", backend], hist].concat())?;
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                let what = format!("{chain} on {logits} step {step} ({backend}): row {}", x["row"]);
                assert_eq!(x["selected"], y["selected"], "{what}");
                let (cx, cy) = (x["candidates"].as_array().unwrap(), y["candidates"].as_array().unwrap());
                assert_eq!(cx.len(), cy.len(), "{what}");
                for (p, q) in cx.iter().zip(cy) {
                    let (pp, qp) = (p["p"].as_f64().unwrap(), q["p"].as_f64().unwrap());
                    assert!((pp - qp).abs() <= 1e-5, "{what}: {p} vs {q}");
                    // Equal probabilities may come in either order; distinct ones in this order.
                    if p["id"] != q["id"] {
                        assert!(
                            cx.iter().any(|c| c["id"] == q["id"] && (c["p"].as_f64().unwrap() - qp).abs() <= 1e-6),
                            "{what}: {p} vs {q}"
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn graph_path_matches_chain_path_on_cpu() {
    compare("fixtures/logits/vocab1k_f16.npy", "cpu", &["0", "1", "7"]).unwrap();
    compare("fixtures/logits/small_f32.npy", "cpu", &["0", "5"]).unwrap();
}

#[test]
fn history_stages_run_on_the_backend_with_the_chains_tokens_over_50_steps() {
    for chain in HISTORY_CHAINS {
        let err = placement(chain);
        let line = err.lines().find(|l| l.starts_with("seq 0: ")).unwrap_or_default().to_string();
        assert!(!line.contains('-') && (line.contains("+dry") || line.contains("+adaptive_p")), "{err}");
    }
    let steps: Vec<String> = (0..50).map(|s| s.to_string()).collect();
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    compare_chains(HISTORY_CHAINS, "fixtures/logits/vocab1k_f16.npy", "cpu", &steps).unwrap();
}

#[test]
fn graph_path_matches_chain_path_on_vulkan() {
    let probe = sample(&[
        "--logits",
        "fixtures/logits/small_f32.npy",
        "--chain",
        "greedy",
        "--path",
        "graph",
        "--backend",
        "vulkan",
    ]);
    if let Err(e) = &probe {
        let why = format!("xtask sample --backend vulkan failed ({})", e.trim());
        sched::testing::skip("graph_path_matches_chain_path_on_vulkan", why);
        return;
    }
    compare("fixtures/logits/vocab1k_f16.npy", "vulkan", &["0", "3"]).unwrap();
    compare("fixtures/logits/small_f32.npy", "vulkan", &["0"]).unwrap();
}

/// Stderr of `--path graph --placement` for `chain` on the 1000-token fixture (the run must succeed).
fn placement(chain: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["sample", "--logits", "fixtures/logits/vocab1k_f16.npy", "--chain", chain])
        .args(["--path", "graph", "--placement"])
        .current_dir(root())
        .output()
        .unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(o.status.success(), "{err}");
    err
}

#[test]
fn placement_and_bytes_are_reported() {
    let err = placement("top_k(k=40);dry(multiplier=0.8)");
    assert!(err.contains("seq 0: +top_k +dry"), "{err}");
    // 40 candidates of 8 bytes, for the one row.
    assert!(err.contains("read back 320 bytes (reserved 320)"), "{err}");
    // llama.cpp's default chain runs entirely on the backend: its disabled stages append nothing.
    let err =
        placement("penalties;dry;top_n_sigma;top_k(k=40);typical;top_p(p=0.95);min_p(p=0.05);xtc;temp(t=0.8);dist");
    assert!(
        err.contains("seq 0: +penalties +dry +top_n_sigma +top_k +typical +top_p +min_p +xtc +temp +dist"),
        "{err}"
    );
}

#[test]
fn no_vulkan_device_is_a_clear_error() {
    // No driver at all, and a device name that matches nothing: either way a one-line error that
    // names the Vulkan backend, a non-zero exit, and nothing on stdout.
    for (var, value) in [("VK_ICD_FILENAMES", "/nonexistent/icd.json"), ("GGS_VULKAN_DEVICE", "no-such-gpu")] {
        let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["sample", "--logits", "fixtures/logits/small_f32.npy", "--chain", "greedy"])
            .args(["--path", "graph", "--backend", "vulkan"])
            .env(var, value)
            .current_dir(root())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{var}: {err}");
        assert!(err.starts_with("error: vulkan backend unavailable"), "{var}: {err}");
        assert!(o.stdout.is_empty(), "{var}");
    }
}
