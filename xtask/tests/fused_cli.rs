//! End-to-end tests of `cargo xtask fused` (the contract `shared/contracts/fused-cli.md`): the
//! built binary on `.npy` files written here, its JSON line, the `--need-logits` file, and every
//! error of the contract by message content (non-zero exit, nothing on stdout).
#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::Command;

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn xtask(args: &[&str]) -> Out {
    xtask_env(args, &[])
}

fn xtask_env(args: &[&str], env: &[(&str, &str)]) -> Out {
    let o =
        Command::new(env!("CARGO_BIN_EXE_xtask")).arg("fused").args(args).envs(env.iter().copied()).output().unwrap();
    Out {
        ok: o.status.success(),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// A version 1.0 .npy file of raw little-endian elements.
fn npy(descr: &str, shape: &[usize], elems: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(elems);
    out
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn f16s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|&x| half::f16::from_f32(x).to_bits().to_le_bytes()).collect()
}
fn bf16s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|&x| half::bf16::from_f32(x).to_bits().to_le_bytes()).collect()
}
fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A scratch directory for one test's files.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("fused_cli_{}_{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_string_lossy().into_owned()
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn select_idx(o: &Out) -> Vec<i64> {
    assert!(o.ok, "failed: {}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 1, "exactly one line: {}", o.stdout);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).unwrap();
    v["select_idx"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

fn index(o: &Out) -> i64 {
    assert!(o.ok, "failed: {}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).unwrap();
    v["index"].as_i64().unwrap()
}

/// Fails unless `o` is an error whose message contains every one of `words`.
fn fails_with(o: &Out, words: &[&str]) {
    assert!(!o.ok, "expected an error, got {}", o.stdout);
    assert!(o.stdout.is_empty(), "nothing on stdout on error: {}", o.stdout);
    assert!(!o.stderr.contains("panicked"), "a panic: {}", o.stderr);
    for w in words {
        assert!(o.stderr.to_lowercase().contains(&w.to_lowercase()), "stderr lacks {w:?}: {}", o.stderr);
    }
}

#[test]
fn worked_example_of_the_contract() {
    let d = Dir::new("worked");
    let l = d.file("l.npy", &npy("<f4", &[1, 4], &f32s(&[1.0, 3.0, 2.0, 0.0])));
    let q = d.file("q.npy", &npy("<f4", &[1, 4], &f32s(&[0.5, 2.0, 0.1, 9.0])));
    let p = d.file("p.npy", &npy("<f4", &[1], &f32s(&[1.0])));
    for (k, want) in [(4, 1), (0, 2), (5, 2)] {
        let kf = d.file(&format!("k{k}.npy"), &npy("<i4", &[1], &i32s(&[k])));
        let o = xtask(&["top-k-top-p", "--logits", &l, "--top-k", &kf, "--top-p", &p, "--q", &q]);
        assert_eq!(select_idx(&o), vec![want], "k = {k}");
    }
    // `--post-sample none` ignores q (the argmax), and so does a missing q.
    let kf = d.file("k4.npy", &npy("<i4", &[1, 1], &i32s(&[4])));
    for extra in [vec!["--post-sample", "None", "--q", q.as_str()], vec![]] {
        let mut args = vec!["top-k-top-p", "--logits", &l, "--top-k", &kf, "--top-p", &p];
        args.extend(extra);
        assert_eq!(select_idx(&xtask(&args)), vec![1]);
    }
}

#[test]
fn batches_dtypes_need_logits_and_multinomial() {
    let d = Dir::new("batch");
    // Two rows: row 0 logits [0, 2, 1, 2] with k = 2 (ties at the k-th value go to lower indices):
    // survivors 1 and 3, argmax 1; row 1 [5, 1, 5, 0] with k = 0 and p = 0 keeps the first max.
    let vals = [0.0f32, 2.0, 1.0, 2.0, 5.0, 1.0, 5.0, 0.0];
    for (descr, bytes, pbytes) in [
        ("<f4", f32s(&vals), f32s(&[1.0, 0.0])),
        ("<f2", f16s(&vals), f16s(&[1.0, 0.0])),
        ("|V2", bf16s(&vals), bf16s(&[1.0, 0.0])),
    ] {
        let l = d.file("l.npy", &npy(descr, &[2, 4], &bytes));
        let p = d.file("p.npy", &npy(descr, &[2], &pbytes));
        let k = d.file("k.npy", &npy("<i4", &[2], &i32s(&[2, 0])));
        let out = d.path("kept.npy");
        let o = xtask(&["top-k-top-p", "--logits", &l, "--top-k", &k, "--top-p", &p, "--need-logits", &out]);
        assert_eq!(select_idx(&o), vec![1, 0], "{descr}");
        let bytes = std::fs::read(&out).unwrap();
        let f = npyz::NpyFile::new(&bytes[..]).unwrap();
        assert_eq!(f.shape(), &[2, 4]);
        let kept: Vec<f32> = f.into_vec().unwrap();
        let ni = f32::NEG_INFINITY;
        assert_eq!(kept, vec![ni, 2.0, ni, 2.0, 5.0, ni, ni, ni], "{descr}: ties of the max keep the lowest index");
    }
    // Multinomial: a survivor, and the same pair gives the same index; rows past q's last reuse it.
    let l = d.file("l.npy", &npy("<f4", &[3, 6], &f32s(&[0.0; 18])));
    let k = d.file("k.npy", &npy("<i4", &[3], &i32s(&[3, 3, 3])));
    let p = d.file("p.npy", &npy("<f4", &[3], &f32s(&[1.0, 1.0, 1.0])));
    let q = d.file("q.npy", &npy("<i8", &[2, 2], &i64s(&[7, 0, 123_456_789_012, 5])));
    let args = ["top-k-top-p", "--logits", &l, "--top-k", &k, "--top-p", &p, "--q", &q, "--post-sample", "multiNomial"];
    let a = select_idx(&xtask(&args));
    assert!(a.iter().all(|&i| (0..3).contains(&i)), "{a:?}");
    assert_eq!(a[1], a[2], "row 2 reuses row 1's pair on the same row");
    assert_eq!(select_idx(&xtask(&args)), a);
    // Probability mode: no softmax, no renormalisation (T10): [0.4, 0.3, 0.2, 0.1], k = 2, p = 0.5
    // keeps both; min-P 0.8 then keeps only 0.4 (0.3 < 0.32).
    let l = d.file("l.npy", &npy("<f4", &[1, 4], &f32s(&[0.4, 0.3, 0.2, 0.1])));
    let k = d.file("k.npy", &npy("<i4", &[1], &i32s(&[2])));
    let p = d.file("p.npy", &npy("<f4", &[1], &f32s(&[0.5])));
    let out = d.path("kept.npy");
    let o = xtask(&[
        "top-k-top-p",
        "--logits",
        &l,
        "--top-k",
        &k,
        "--top-p",
        &p,
        "--input-is-logits",
        "false",
        "--need-logits",
        &out,
    ]);
    assert_eq!(select_idx(&o), vec![0]);
    let kept: Vec<f32> = npyz::NpyFile::new(&std::fs::read(&out).unwrap()[..]).unwrap().into_vec().unwrap();
    assert_eq!(kept, vec![0.4, 0.3, 0.0, 0.0]);
}

#[test]
fn random_sample_outputs() {
    let d = Dir::new("rs");
    // Argmax path (random = 0): first maximum.
    let l = d.file("l.npy", &npy("<f4", &[5], &f32s(&[1.0, 4.0, 2.0, 4.0, 0.0])));
    let o = xtask(&[
        "random-sample",
        "--logits",
        &l,
        "--random",
        "0",
        "--topp",
        "0.9",
        "--topk",
        "3",
        "--temperature",
        "1",
    ]);
    assert_eq!(index(&o), 1);
    // Full path with dyadic weights: ln of [1/2, 1/4, 1/8, 1/8] at T = 1: e = [1, 1/2, 1/4, 1/4],
    // c = [1, 1.5, 1.75, 2]; topk = 0 (no limit), topp = 1: threshold = 2 r.
    let ln = |p: f64| p.ln();
    let x = [ln(0.125), ln(0.5), ln(0.25), ln(0.125)];
    for (descr, bytes) in [("<f8", f64s(&x)), ("<f4", f32s(&x.map(|v| v as f32)))] {
        let l = d.file("l.npy", &npy(descr, &[4], &bytes));
        // order: 1 (1/2), 2 (1/4), 0 (1/8), 3 (1/8)
        for (r, want) in [("0.3", 1), ("0.6", 2), ("0.8", 0), ("0.95", 3)] {
            let o = xtask(&[
                "random-sample",
                "--logits",
                &l,
                "--random",
                r,
                "--topp",
                "1",
                "--topk",
                "0",
                "--temperature",
                "1",
            ]);
            assert_eq!(index(&o), want, "{descr} random {r}");
        }
        // topk = 2 bounds the threshold by c_1 = 1.5: r = 0.95 gives 1.425 -> rank 1 (token 2).
        let o = xtask(&[
            "random-sample",
            "--logits",
            &l,
            "--random",
            "0.95",
            "--topp",
            "1",
            "--topk",
            "2",
            "--temperature",
            "1",
        ]);
        assert_eq!(index(&o), 2);
        for dt in ["i8", "u8", "i16", "u16", "u32", "i64", "u64"] {
            let o = xtask(&[
                "random-sample",
                "--logits",
                &l,
                "--random",
                "0.3",
                "--topp",
                "1",
                "--topk",
                "-1",
                "--temperature",
                "1",
                "--index-dtype",
                dt,
            ]);
            assert_eq!(index(&o), 1, "{dt}");
        }
    }
}

#[test]
fn top_k_top_p_errors() {
    let d = Dir::new("errs");
    let l = d.file("l.npy", &npy("<f4", &[2, 3], &f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])));
    let k = d.file("k.npy", &npy("<i4", &[2], &i32s(&[1, 2])));
    let p = d.file("p.npy", &npy("<f4", &[2], &f32s(&[0.5, 1.0])));
    let run = |args: &[&str]| {
        let mut a = vec!["top-k-top-p"];
        a.extend_from_slice(args);
        xtask(&a)
    };
    let missing = d.path("missing.npy");
    fails_with(&run(&["--logits", &missing, "--top-k", &k, "--top-p", &p]), &["--logits", "missing.npy"]);
    let junk = d.file("junk.npy", b"not an npy file at all");
    fails_with(&run(&["--logits", &junk, "--top-k", &k, "--top-p", &p]), &["not an .npy"]);
    let l1 = d.file("l1.npy", &npy("<f4", &[3], &f32s(&[0.0, 1.0, 2.0])));
    fails_with(&run(&["--logits", &l1, "--top-k", &k, "--top-p", &p]), &["2-D"]);
    let l0 = d.file("l0.npy", &npy("<f4", &[2, 0], &[]));
    fails_with(&run(&["--logits", &l0, "--top-k", &k, "--top-p", &p]), &["empty"]);
    let l64 = d.file("l64.npy", &npy("<f8", &[2, 3], &f64s(&[0.0; 6])));
    fails_with(&run(&["--logits", &l64, "--top-k", &k, "--top-p", &p]), &["--logits", "f64"]);
    let k64 = d.file("k64.npy", &npy("<i8", &[2], &i64s(&[1, 2])));
    fails_with(&run(&["--logits", &l, "--top-k", &k64, "--top-p", &p]), &["top_k", "i32"]);
    let p16 = d.file("p16.npy", &npy("<f2", &[2], &f16s(&[0.5, 1.0])));
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p16]), &["--top-p", "logits' dtype"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--min-p", &p16]), &["--min-p", "logits' dtype"]);
    let k3 = d.file("k3.npy", &npy("<i4", &[3], &i32s(&[1, 2, 3])));
    fails_with(&run(&["--logits", &l, "--top-k", &k3, "--top-p", &p]), &["--top-k", "length B = 2"]);
    let p1 = d.file("p1.npy", &npy("<f4", &[1], &f32s(&[0.5])));
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p1]), &["--top-p", "length B = 2"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--min-p", &p1]), &["--min-p", "length B = 2"]);
    let qbad = d.file("qbad.npy", &npy("<f4", &[2, 2], &f32s(&[1.0; 4])));
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--q", &qbad]), &["qsample", "f32 [2, 3]"]);
    let qi = d.file("qi.npy", &npy("<i8", &[2, 3], &i64s(&[1; 6])));
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--q", &qi]), &["qsample", "f32"]);
    fails_with(
        &run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--q", &qi, "--post-sample", "multinomial"]),
        &["multinomial", "i64 [R, 2]"],
    );
    let q0 = d.file("q0.npy", &npy("<i8", &[0, 2], &[]));
    fails_with(
        &run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--q", &q0, "--post-sample", "multinomial"]),
        &["R >= 1"],
    );
    let qf = d.file("qf.npy", &npy("<f4", &[2, 2], &f32s(&[1.0; 4])));
    fails_with(
        &run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--q", &qf, "--post-sample", "multinomial"]),
        &["multinomial", "i64"],
    );
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--ks-max", "0"]), &["ks_max", "positive"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--ks-max", "-4"]), &["ks_max", "positive"]);
    for (bad, word) in [(f32::NAN, "NaN"), (f32::INFINITY, "inf")] {
        let lb = d.file("lb.npy", &npy("<f4", &[2, 3], &f32s(&[0.0, bad, 2.0, 3.0, 4.0, 5.0])));
        fails_with(&run(&["--logits", &lb, "--top-k", &k, "--top-p", &p]), &["row 0", word]);
        let pb = d.file("pb.npy", &npy("<f4", &[2], &f32s(&[0.5, bad])));
        fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &pb]), &["top_p", word]);
        fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--min-p", &pb]), &["min_p", word]);
    }
    let ni = f32::NEG_INFINITY;
    let lninf = d.file("lninf.npy", &npy("<f4", &[2, 3], &f32s(&[0.0, 1.0, 2.0, ni, ni, ni])));
    fails_with(&run(&["--logits", &lninf, "--top-k", &k, "--top-p", &p]), &["row 1", "all -inf"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--input-is-logits", "false"]), &["[0, 1]"]);
    let lneg = d.file("lneg.npy", &npy("<f4", &[2, 3], &f32s(&[0.1, -0.1, 0.2, 0.3, 0.3, 0.3])));
    fails_with(&run(&["--logits", &lneg, "--top-k", &k, "--top-p", &p, "--input-is-logits", "false"]), &["[0, 1]"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--post-sample", "greedy"]), &["greedy"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--input-is-logits", "yes"]), &["yes"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--backend", "tpu"]), &["tpu"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--eps", "abc"]), &["abc"]);
    fails_with(&run(&["--logits", &l, "--top-k", &k, "--top-p", &p, "--ks-max", "1.5"]), &["1.5"]);
}

#[test]
fn random_sample_errors() {
    let d = Dir::new("rserrs");
    let l = d.file("l.npy", &npy("<f4", &[4], &f32s(&[0.0, 1.0, 2.0, 3.0])));
    let run = |logits: &str, r: &str, p: &str, k: &str, t: &str, extra: &[&str]| {
        let mut a =
            vec!["random-sample", "--logits", logits, "--random", r, "--topp", p, "--topk", k, "--temperature", t];
        a.extend_from_slice(extra);
        xtask(&a)
    };
    fails_with(&run(&d.path("nope.npy"), "0.5", "0.9", "0", "1", &[]), &["--logits", "nope.npy"]);
    let l2 = d.file("l2.npy", &npy("<f4", &[2, 2], &f32s(&[0.0; 4])));
    fails_with(&run(&l2, "0.5", "0.9", "0", "1", &[]), &["1-D"]);
    let l0 = d.file("l0.npy", &npy("<f4", &[0], &[]));
    fails_with(&run(&l0, "0.5", "0.9", "0", "1", &[]), &["empty"]);
    let li = d.file("li.npy", &npy("<i4", &[2], &i32s(&[0, 1])));
    fails_with(&run(&li, "0.5", "0.9", "0", "1", &[]), &["i32"]);
    fails_with(&run(&l, "1", "0.9", "0", "1", &[]), &["random", "[0, 1)"]);
    fails_with(&run(&l, "-0.1", "0.9", "0", "1", &[]), &["random", "[0, 1)"]);
    fails_with(&run(&l, "0.5", "-0.5", "0", "1", &[]), &["topp", "negative"]);
    fails_with(&run(&l, "0.5", "0.9", "0", "-1", &[]), &["temperature", "negative"]);
    fails_with(&run(&l, "NaN", "0.9", "0", "1", &[]), &["random", "NaN"]);
    fails_with(&run(&l, "0.5", "nan", "0", "1", &[]), &["topp", "NaN"]);
    fails_with(&run(&l, "0.5", "0.9", "0", "NaN", &[]), &["temperature", "NaN"]);
    let lnan = d.file("lnan.npy", &npy("<f4", &[3], &f32s(&[0.0, f32::NAN, 1.0])));
    fails_with(&run(&lnan, "0", "0.9", "0", "1", &[]), &["NaN"]);
    let linf = d.file("linf.npy", &npy("<f4", &[3], &f32s(&[0.0, f32::INFINITY, 1.0])));
    fails_with(&run(&linf, "0.5", "0.9", "0", "1", &[]), &["+inf"]);
    // ... but the argmax path takes +inf.
    assert_eq!(index(&run(&linf, "0", "0.9", "0", "1", &[])), 1);
    let ni = f32::NEG_INFINITY;
    let lninf = d.file("lninf.npy", &npy("<f4", &[2], &f32s(&[ni, ni])));
    fails_with(&run(&lninf, "0.5", "0.9", "0", "1", &[]), &["-inf"]);
    fails_with(&run(&l, "0.5", "0.9", "0", "1", &["--index-dtype", "i128"]), &["i128"]);
    // Index overflow: n - 1 above the dtype's maximum, checked before sampling.
    for (dt, ok_n) in [("i8", 128usize), ("u8", 256), ("i16", 32_768), ("u16", 65_536)] {
        let fits = d.file("fits.npy", &npy("<f4", &[ok_n], &f32s(&vec![0.0; ok_n])));
        assert_eq!(index(&run(&fits, "0", "1", "0", "1", &["--index-dtype", dt])), 0, "{dt}");
        let over = d.file("over.npy", &npy("<f4", &[ok_n + 1], &f32s(&vec![0.0; ok_n + 1])));
        fails_with(&run(&over, "0", "1", "0", "1", &["--index-dtype", dt]), &["overflow", dt]);
    }
}

#[test]
fn backend_vulkan_gives_the_cpu_results() {
    // `--backend vulkan` runs top_k_top_p_sample on Vulkan where the device has shaderFloat64
    // (the plan written to $GGS_FUSED_PLAN says so) with the CPU's results; so does random_sample
    // (f32 and f64 rows). Skipped where no Vulkan device can be opened.
    let d = Dir::new("vk");
    let vals: Vec<f32> = (0..3 * 50).map(|i| ((i * 37) % 23) as f32 / 4.0).collect();
    let l = d.file("l.npy", &npy("<f4", &[3, 50], &f32s(&vals)));
    let k = d.file("k.npy", &npy("<i4", &[3], &i32s(&[5, 0, 51])));
    let p = d.file("p.npy", &npy("<f4", &[3], &f32s(&[0.7, 0.5, 1.0])));
    let q = d.file("q.npy", &npy("<f4", &[3, 50], &f32s(&(0..150).map(|i| 0.1 + (i % 7) as f32).collect::<Vec<_>>())));
    let plan_file = d.file("plan.txt", b"");
    let args = |b: &'static str| {
        xtask_env(
            &["top-k-top-p", "--logits", &l, "--top-k", &k, "--top-p", &p, "--q", &q, "--backend", b],
            &[("GGS_FUSED_PLAN", &plan_file)],
        )
    };
    let vk = args("vulkan");
    // Only a missing device skips (and never under CI); any other Vulkan failure fails here.
    if !vk.ok && vk.stderr.contains("vulkan backend unavailable") {
        let test = "backend_vulkan_gives_the_cpu_results";
        sched::testing::skip(test, format!("no Vulkan device ({})", vk.stderr.trim()));
        return;
    }
    let plan = std::fs::read_to_string(&plan_file).unwrap();
    let op_lines: Vec<&str> = plan.lines().filter(|l| l.contains("top_k_top_p_sample")).collect();
    assert!(!op_lines.is_empty(), "no top_k_top_p_sample in the plan:\n{plan}");
    if op_lines.iter().all(|l| l.contains("vulkan")) {
        eprintln!("top_k_top_p_sample ran on Vulkan");
    } else {
        // Only a device without shaderFloat64 may decline it.
        assert!(!vulkan_has_float64(), "top_k_top_p_sample not on vulkan:\n{plan}");
        eprintln!("NOTE: the Vulkan device lacks shaderFloat64; top_k_top_p_sample ran on the CPU");
    }
    assert_eq!(select_idx(&vk), select_idx(&args("cpu")));
    let l1 = d.file("l1.npy", &npy("<f4", &[50], &f32s(&vals[..50])));
    let v64: Vec<f64> = vals[..50].iter().map(|&v| f64::from(v)).collect();
    let l64 = d.file("l64.npy", &npy("<f8", &[50], &f64s(&v64)));
    let rs_plan = d.file("rs_plan.txt", b"");
    let rs = |b: &str, l: &str, random: &str, topk: &str| {
        xtask_env(
            &[
                "random-sample",
                "--logits",
                l,
                "--random",
                random,
                "--topp",
                "0.8",
                "--topk",
                topk,
                "--temperature",
                "0.7",
                "--backend",
                b,
            ],
            &[("GGS_FUSED_PLAN", &rs_plan)],
        )
    };
    let on_vulkan = |what: &str| {
        let plan = std::fs::read_to_string(&rs_plan).unwrap();
        let line = plan.lines().find(|l| l.contains("random_sample")).unwrap_or_else(|| panic!("{plan}"));
        assert!(line.contains("vulkan") || !vulkan_has_float64(), "{what} random_sample not on vulkan:\n{plan}");
    };
    for (random, topk) in [("0.4", "7"), ("0.9", "0"), ("0.0", "7"), ("0.99", "-1")] {
        let got = rs("vulkan", &l1, random, topk);
        on_vulkan("f32");
        assert_eq!(index(&got), index(&rs("cpu", &l1, random, topk)), "random {random} topk {topk}");
        // f64 rows: the same index (the values widen exactly).
        let got64 = rs("vulkan", &l64, random, topk);
        on_vulkan("f64");
        assert_eq!(index(&got64), index(&got), "f64 random {random} topk {topk}");
    }
}

/// Whether the Vulkan device the CLI opens has shaderFloat64.
fn vulkan_has_float64() -> bool {
    vulkan::VulkanBackend::new().is_ok_and(|b| b.has_float64())
}
