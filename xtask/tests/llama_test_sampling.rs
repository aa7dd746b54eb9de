//! Every case of llama.cpp's `tests/test-sampling.cpp` (@3c39feaa7), run through the public
//! interface: `cargo xtask sample --logits FILE.npy --chain SPEC [--history ...]`, the built binary,
//! on an .npy file written here. The numbers (input probabilities, parameters, expected
//! probabilities and sizes) are the facts of those cases; the harness is ours.
//!
//! llama.cpp's tester makes logits `ln p` from the probabilities and checks the probability of
//! each entry of its array after the sampler (and, in most cases, a `dist` stage that renormalises
//! over the survivors) within `1e-5`. Our contract prints the survivors with `p` normalised over
//! them and leaves masked tokens out, so each case is checked as: every token whose expected
//! probability is above `1e-5` survives with that probability (renormalised over the expected
//! survivors where llama.cpp's case has no `dist` stage: xtc and typical), and every other token
//! is absent or has `p < 1e-5`.
//!
//! Not ported: `test_p_less`, a sampler that is neither in llama.cpp's sampler list at that commit
//! nor in our SPEC contract.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch directory for this test binary's .npy files.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-llama-test-sampling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a 1-D f32 .npy file (format 1.0) by hand: magic, version, header, data.
fn write_npy(path: &Path, v: &[f32]) {
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", v.len());
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for x in v {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// One output row of `xtask sample`: selected token and (id, p) of the survivors in output order.
#[derive(Debug)]
struct Out {
    candidates: Vec<(u32, f32)>,
}

/// Runs `xtask sample` on `logits` with `chain` and the accepted `history`.
fn sample(logits: &[f32], chain: &str, history: &[u32]) -> Out {
    let dir = scratch();
    let file = dir.join(unique_name());
    write_npy(&file, logits);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(["sample", "--logits"]).arg(&file).args(["--chain", chain]);
    if !history.is_empty() {
        let h: Vec<String> = history.iter().map(u32::to_string).collect();
        cmd.arg("--history").arg(h.join(","));
    }
    let out = cmd.output().expect("running xtask sample");
    std::fs::remove_file(&file).ok();
    assert!(out.status.success(), "`{chain}` failed: {}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"));
    let candidates = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_u64().unwrap() as u32, c["p"].as_f64().unwrap() as f32))
        .collect();
    Out { candidates }
}

/// A file name no other call uses: tests run in parallel in one process, and two of them may run
/// the same chain on the same logits (one would delete the file the other is reading).
fn unique_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("{}.npy", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// llama.cpp's tester: logits are `ln p` in f32.
fn logits_of(probs: &[f32]) -> Vec<f32> {
    probs.iter().map(|p| p.ln()).collect()
}

/// Checks one case: `expected` is llama.cpp's array of (token, probability) after the sampler.
fn check(probs: &[f32], chain: &str, history: &[u32], expected: &[(u32, f32)], renormalise: bool) {
    let out = sample(&logits_of(probs), chain, history);
    let mass: f32 = expected.iter().map(|e| e.1).sum();
    let scale = if renormalise { 1.0 / mass } else { 1.0 };
    let got = |id: u32| out.candidates.iter().find(|c| c.0 == id).map(|c| c.1);
    for &(id, p) in expected {
        let want = p * scale;
        match got(id) {
            Some(q) => assert!((q - want).abs() < 1e-5, "`{chain}`: token {id} has p {q}, llama.cpp {want}; {out:?}"),
            None => assert!(want < 1e-5, "`{chain}`: token {id} (llama.cpp p {want}) is missing; {out:?}"),
        }
    }
    for &(id, q) in &out.candidates {
        if !expected.iter().any(|e| e.0 == id) {
            assert!(q < 1e-5, "`{chain}`: token {id} survives with p {q}, llama.cpp removed it; {out:?}");
        }
    }
}

/// llama.cpp's array in vocabulary order: token i has probability `p[i]`.
fn in_order(p: &[f32]) -> Vec<(u32, f32)> {
    p.iter().enumerate().map(|(i, &p)| (i as u32, p)).collect()
}

const P4: [f32; 4] = [0.1, 0.2, 0.3, 0.4];

#[test]
fn temp() {
    check(&P4, "temp(t=1);dist(seed=0)", &[], &in_order(&[0.1, 0.2, 0.3, 0.4]), false);
    check(&P4, "temp(t=0);dist(seed=0)", &[], &in_order(&[0.0, 0.0, 0.0, 1.0]), false);
}

#[test]
fn temp_ext() {
    check(&P4, "temp_ext(t=1,delta=0,exponent=1);dist(seed=0)", &[], &in_order(&[0.1, 0.2, 0.3, 0.4]), false);
    check(&P4, "temp_ext(t=0,delta=0,exponent=1);dist(seed=0)", &[], &in_order(&[0.0, 0.0, 0.0, 1.0]), false);
}

#[test]
fn top_k() {
    check(&P4, "top_k(k=1);dist(seed=0)", &[], &[(3, 1.0)], false);
    check(&P4, "top_k(k=3);dist(seed=0)", &[], &[(3, 0.44444), (2, 0.33333), (1, 0.22222)], false);
    check(&P4, "top_k(k=4);dist(seed=0)", &[], &[(3, 0.4), (2, 0.3), (1, 0.2), (0, 0.1)], false);
    check(&P4, "top_k(k=0);dist(seed=0)", &[], &in_order(&[0.1, 0.2, 0.3, 0.4]), false);
}

#[test]
fn top_p() {
    check(&P4, "top_p(p=0,min_keep=0);dist(seed=0)", &[], &[(3, 1.0)], false);
    // the exact boundary: 0.4 + 0.3 reaches 0.7 in llama.cpp's f32 arithmetic, so two are kept
    check(&P4, "top_p(p=0.7,min_keep=0);dist(seed=0)", &[], &[(3, 0.571429), (2, 0.428571)], false);
    check(&P4, "top_p(p=0.8,min_keep=0);dist(seed=0)", &[], &[(3, 0.44444), (2, 0.33333), (1, 0.22222)], false);
    check(&P4, "top_p(p=1,min_keep=0);dist(seed=0)", &[], &in_order(&[0.1, 0.2, 0.3, 0.4]), false);
}

#[test]
fn min_p() {
    let all = in_order(&[0.1, 0.2, 0.3, 0.4]);
    let three = [(1, 0.2 / 0.9), (2, 0.3 / 0.9), (3, 0.4 / 0.9)];
    let two = [(2, 0.3 / 0.7), (3, 0.4 / 0.7)];
    let cases: [(f32, &[(u32, f32)]); 9] = [
        (0.00, &all),
        (0.24, &all),
        (0.26, &three),
        (0.49, &three),
        (0.51, &two),
        (0.74, &two),
        (0.76, &[(3, 1.0)]),
        (1.00, &[(3, 1.0)]),
        // p > 1: nothing reaches max + ln p; llama.cpp's sorted fallback keeps the first token
        (1.05, &[(3, 1.0)]),
    ];
    for (p, expected) in cases {
        check(&P4, &format!("min_p(p={p},min_keep=0);dist(seed=0)"), &[], expected, false);
    }
}

#[test]
fn xtc() {
    // llama.cpp's case has no dist stage: its probabilities are not renormalised over the
    // survivors, ours are (renormalise = true). p = 0.99: the seed's draw is below it.
    let p = [0.4f32, 0.3, 0.2, 0.1];
    check(&p, "xtc(p=0.99,t=0.09,min_keep=0,seed=0)", &[], &[(3, 0.1)], true);
    check(&p, "xtc(p=0.99,t=0.19,min_keep=0,seed=0)", &[], &[(2, 0.2), (3, 0.1)], true);
    check(&p, "xtc(p=0.99,t=0.29,min_keep=0,seed=0)", &[], &[(1, 0.3), (2, 0.2), (3, 0.1)], true);
    // only one token above the threshold: nothing is removed
    check(&p, "xtc(p=0.99,t=0.39,min_keep=0,seed=0)", &[], &in_order(&p), true);
}

#[test]
fn typical() {
    check(&[0.97, 0.01, 0.01, 0.01], "typical(p=0.5,min_keep=0)", &[], &[(0, 0.97)], true);
    check(&[0.4, 0.2, 0.2, 0.2], "typical(p=0.5,min_keep=0)", &[], &[(1, 0.2), (2, 0.2), (3, 0.2)], true);
}

#[test]
fn penalties() {
    let p = [0.2f32; 5];
    // (history, expected, repeat, frequency, presence)
    type Case<'a> = (&'a [u32], [f32; 5], f32, f32, f32);
    let cases: [Case<'_>; 6] = [
        (&[0], [0.0, 0.25, 0.25, 0.25, 0.25], 50.0, 0.0, 0.0),
        (&[0, 1, 2], [0.0, 0.0, 0.0, 0.5, 0.5], 50.0, 0.0, 0.0),
        (&[0, 1, 2, 0, 0], [0.0, 0.0, 0.0, 0.5, 0.5], 50.0, 0.0, 0.0),
        (&[0], [0.000011, 0.249997, 0.249997, 0.249997, 0.249997], 1.0, 5.0, 5.0),
        (&[0, 1, 2], [0.000023, 0.000023, 0.000023, 0.499966, 0.499966], 1.0, 5.0, 5.0),
        (&[0, 1, 2, 0, 0], [0.000000, 0.000023, 0.000023, 0.499977, 0.499977], 1.0, 5.0, 5.0),
    ];
    for (history, expected, repeat, freq, present) in cases {
        let chain =
            format!("penalties(last_n={},repeat={repeat},freq={freq},present={present});dist(seed=0)", history.len());
        check(&p, &chain, history, &in_order(&expected), false);
    }
}

#[test]
fn dry() {
    type Case<'a> = (&'a [f32], &'a [u32], &'a [f32], f32, f32, i32, i32, &'a str);
    let cases: [Case<'_>; 5] = [
        (&[0.25; 4], &[0, 1], &[0.25, 0.25, 0.25, 0.25], 1.0, 1.1, 2, 4, ""),
        (&[0.25; 4], &[0, 1, 2, 0, 1], &[0.296923, 0.296923, 0.109232, 0.296923], 1.0, 1.1, 2, 5, ""),
        (&[0.2; 5], &[0, 1, 3, 4, 0, 1], &[0.2, 0.2, 0.2, 0.2, 0.2], 1.0, 1.1, 2, 6, "3"),
        (&[0.2; 5], &[0, 1, 2, 0, 1], &[0.241818, 0.241818, 0.032727, 0.241818, 0.241818], 2.0, 1.1, 2, 5, ""),
        (&[0.2; 5], &[0, 1, 2, 3, 4, 0, 1], &[0.2, 0.2, 0.2, 0.2, 0.2], 1.0, 1.1, 4, 7, ""),
    ];
    for (probs, history, expected, mult, base, allowed, last_n, breakers) in cases {
        let b = if breakers.is_empty() { String::new() } else { format!(",breakers={breakers}") };
        let chain =
            format!("dry(multiplier={mult},base={base},allowed_length={allowed},last_n={last_n}{b});dist(seed=0)");
        check(probs, &chain, history, &in_order(expected), false);
    }
}

#[test]
fn top_n_sigma() {
    check(&P4, "top_n_sigma(n=1);dist(seed=0)", &[], &in_order(&[0.0, 0.0, 0.428571, 0.571429]), false);
    // n = 0 is a no-op (llama.cpp #13345), as is a wide n
    check(&P4, "top_n_sigma(n=0);dist(seed=0)", &[], &in_order(&[0.1, 0.2, 0.3, 0.4]), false);
    check(&P4, "top_n_sigma(n=3);dist(seed=0)", &[], &in_order(&[0.1, 0.2, 0.3, 0.4]), false);
}

/// llama.cpp's `test_sampler_queue`: a vocabulary of `n_vocab` tokens with logit `ln(id)` (token 0
/// is `-inf`), the stages `k`, `p`, `m` in the given order (top_p and min_p with `min_keep = 1`),
/// each followed by `dist`; after each stage the size and, where llama.cpp's array is sorted, the
/// first and last token are what llama.cpp's closed forms say.
///
/// llama.cpp's array still holds token 0 (probability 0) when a stage keeps everything; our output
/// leaves `-inf` tokens out, so there the expected size is one less and the last token is 1.
fn sampler_queue(n_vocab: usize, seq: &str, top_k: i32, top_p: f32, min_p: f32) {
    let logits: Vec<f32> = (0..n_vocab).map(|i| (i as f32).ln()).collect();
    let n = n_vocab as i64;
    let max_token_id = n - 1;
    let mut min_token_id: i64 = 0;
    let mut stages: Vec<String> = Vec::new();
    let mut sorted = false; // llama.cpp's cur_p.sorted: set by top-k and top-p, kept by min-p
    for s in seq.chars() {
        stages.push(match s {
            'k' => format!("top_k(k={top_k})"),
            'p' => format!("top_p(p={top_p},min_keep=1)"),
            'm' => format!("min_p(p={min_p},min_keep=1)"),
            _ => unreachable!(),
        });
        let chain = format!("{};dist(seed=0)", stages.join(";dist(seed=0);"));
        let out = sample(&logits, &chain, &[]);
        let ours = out.candidates.len() as i64;
        // llama.cpp's array holds token 0 exactly when nothing has been removed yet
        let size = if ours == n - 1 { n } else { ours };
        let expected_size;
        match s {
            'k' => {
                expected_size = size.min(i64::from(top_k));
                sorted = true;
                min_token_id = min_token_id.max(n - i64::from(top_k));
            }
            'p' => {
                let divisor = n * (n - 1) / 2 - min_token_id * (min_token_id - 1) / 2;
                let target = (top_p * divisor as f32).ceil() as i64;
                min_token_id = n;
                let mut size_p = 0;
                let mut cum = 0;
                loop {
                    min_token_id -= 1;
                    size_p += 1;
                    cum += min_token_id;
                    if cum >= target {
                        break;
                    }
                }
                if min_token_id == 1 {
                    min_token_id -= 1;
                    size_p += 1;
                }
                expected_size = size_p;
                sorted = true;
            }
            'm' => {
                let mut e = ((1.0 - min_p) * n_vocab as f32).ceil() as i64;
                e = e.max(1).min(size);
                expected_size = e;
                min_token_id = ((min_p * n_vocab as f32).floor() as i64).max(1).max(n - size).min(n - 1);
            }
            _ => unreachable!(),
        }
        let ctx = format!("queue {seq} n_vocab={n_vocab} top_k={top_k} top_p={top_p} min_p={min_p}: after `{chain}`");
        assert_eq!(size, expected_size, "{ctx}: size");
        if sorted {
            // our output is always sorted; llama.cpp checks the ends only where its array is
            let last_ours = if min_token_id == 0 { 1 } else { min_token_id };
            assert_eq!(i64::from(out.candidates[0].0), max_token_id, "{ctx}: first token");
            assert_eq!(i64::from(out.candidates.last().unwrap().0), last_ours, "{ctx}: last token");
        }
    }
}

#[test]
fn sampler_queue_single_stages() {
    sampler_queue(10000, "k", 10000, 1.0, 1.0);
    sampler_queue(10000, "k", 1, 1.0, 1.0);
    sampler_queue(10000, "p", 10000, 1.0, 1.0);
    sampler_queue(10000, "p", 10000, 0.0, 1.0);
    sampler_queue(10000, "m", 10000, 1.0, 1.0);
    sampler_queue(10000, "m", 10000, 1.0, 1e-12);

    sampler_queue(10000, "k", 100, 1.0000, 1.0);
    sampler_queue(10000, "p", 10000, 0.0003, 1.0);
    sampler_queue(10000, "p", 10000, 0.8000, 1.0);
    sampler_queue(10000, "m", 10000, 1.0000, 9997.9 / 9999.0);
    sampler_queue(10000, "m", 10000, 1.0000, 0.1);
}

#[test]
fn sampler_queue_pairs() {
    sampler_queue(10000, "kp", 100, 0.8, 0.1);
    sampler_queue(10000, "km", 100, 0.8, 0.1);
    sampler_queue(10000, "pk", 100, 0.8, 0.1);
    sampler_queue(10000, "pm", 100, 0.8, 0.1);
    sampler_queue(10000, "mk", 100, 0.8, 0.1);
    sampler_queue(10000, "mp", 100, 0.8, 9997.9 / 9999.0);
    sampler_queue(10000, "mp", 100, 0.8, 0.1);
}

#[test]
fn sampler_queue_triples() {
    sampler_queue(10000, "kpm", 100, 0.8, 0.1);
    sampler_queue(10000, "kmp", 100, 0.8, 0.1);
    sampler_queue(10000, "pkm", 100, 0.8, 0.1);
    sampler_queue(10000, "pmk", 100, 0.8, 0.1);
    sampler_queue(10000, "mkp", 100, 0.8, 0.1);
    sampler_queue(10000, "mpk", 100, 0.8, 0.1);
}
