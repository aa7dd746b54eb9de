//! `cargo xtask sample --vocab MODEL.gguf` with the grammar stages, on SmolLM2's vocabulary: a
//! grammar masks at its place in the chain (after a `top_k`, among the k), `--history` tokens
//! advance it and one it rejects is an error naming it, a grammar without `--vocab` is an error,
//! and `--path graph` (the mask uploaded, `token_mask` on the backend) gives the chain's output.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn model() -> PathBuf {
    runner::fetch::smollm2(&root().join("target/models")).expect("SmolLM2 (cargo xtask fetch-model)")
}

fn sample(args: &[&str]) -> Result<Vec<serde_json::Value>, String> {
    let o = Command::new(env!("CARGO_BIN_EXE_xtask")).arg("sample").args(args).current_dir(root()).output().unwrap();
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    Ok(String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

/// Two rows of logits over SmolLM2's 49152 tokens, with the tokens `boost` among the largest,
/// written to a temporary .npy file.
fn logits_file(dir: &Path, boost: &[u32]) -> PathBuf {
    let v = 49152;
    let mut data: Vec<f32> = (0..2 * v).map(|i| graph::philox::uniform(17, 0, i as u64) * 6.0).collect();
    for r in 0..2 {
        for &t in boost {
            data[r * v + t as usize] = 5.999 - 0.001 * t as f32 / v as f32;
        }
    }
    let path = dir.join("grammar_logits.npy");
    use npyz::WriterBuilder;
    let file = std::fs::File::create(&path).unwrap();
    let mut out =
        npyz::WriteOptions::<f32>::new().default_dtype().shape(&[2, v as u64]).writer(file).begin_nd().unwrap();
    out.extend(data).unwrap();
    out.finish().unwrap();
    path
}

fn ids(row: &serde_json::Value) -> Vec<u64> {
    row["candidates"].as_array().unwrap().iter().map(|c| c["id"].as_u64().unwrap()).collect()
}

#[test]
fn grammar_stages_mask_at_their_place_and_follow_the_history() {
    let dir = std::env::temp_dir().join(format!("xtask-sample-grammar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = model();
    let vocab = runner::gguf_model::tokenizer(&gguf::Gguf::open(&model).unwrap()).unwrap();
    // Three digits among the largest logits (so within a top-k of 300), the others not.
    let boost: Vec<u32> = ["1", "3", "5"].iter().map(|d| vocab.encode(d).unwrap()[0]).collect();
    let logits = logits_file(&dir, &boost);
    let grammar = dir.join("digits.gbnf");
    // A number, then a comma and a space, then another number.
    std::fs::write(&grammar, "root ::= [0-9]+ \", \" [0-9]+\n").unwrap();
    let (l, m, g) = (logits.to_str().unwrap(), model.to_str().unwrap(), grammar.to_str().unwrap());
    let text = |id: u64| vocab.decode(&[id as u32]).unwrap();

    // Alone: every surviving candidate is a run of digits (SmolLM2 splits digits one by one).
    let chain = format!("grammar(file={g})");
    let rows = sample(&["--logits", l, "--vocab", m, "--chain", &chain]).unwrap();
    for r in &rows {
        let c = ids(r);
        assert_eq!(c.len(), 10, "the ten digits: {:?}", c.iter().map(|&i| text(i)).collect::<Vec<_>>());
        assert!(c.iter().all(|&i| text(i).chars().all(|ch| ch.is_ascii_digit())));
    }
    // After a top_k the grammar masks among the k: the three boosted digits only.
    let chain = format!("top_k(k=300);grammar(file={g})");
    let rows = sample(&["--logits", l, "--vocab", m, "--chain", &chain]).unwrap();
    for r in &rows {
        let mut c = ids(r);
        c.sort_unstable();
        assert_eq!(c, boost.iter().map(|&t| u64::from(t)).collect::<Vec<_>>());
    }
    // The history advances it: after "1" the grammar allows digits and the ", " token(s).
    let one = vocab.encode("1").unwrap()[0].to_string();
    let chain = format!("grammar(file={g});greedy");
    let rows = sample(&["--logits", l, "--vocab", m, "--chain", &chain, "--history", &one]).unwrap();
    assert!(ids(&rows[0]).iter().any(|&i| text(i).starts_with(',')), "a comma may follow a digit");
    // A history token it rejects is an error naming it.
    let bad = vocab.encode(" hello").unwrap()[0].to_string();
    let e =
        sample(&["--logits", l, "--vocab", m, "--chain", &chain, "--history", &format!("{one},{bad}")]).unwrap_err();
    assert!(e.contains("--history token 1") && e.contains("rejects token"), "{e}");
    // Without the vocabulary.
    let e = sample(&["--logits", l, "--chain", &chain]).unwrap_err();
    assert!(e.contains("--vocab"), "{e}");
    // On the backend: the same token and candidates as the chain.
    let chain = format!("top_k(k=500);grammar(file={g});temp(t=0.8);dist(seed=3)");
    let cpu = sample(&["--logits", l, "--vocab", m, "--chain", &chain, "--history", &one]).unwrap();
    let graph =
        sample(&["--logits", l, "--vocab", m, "--chain", &chain, "--history", &one, "--path", "graph"]).unwrap();
    for (a, b) in cpu.iter().zip(&graph) {
        assert_eq!(a["selected"], b["selected"]);
        assert_eq!(ids(a), ids(b));
    }
    std::fs::remove_dir_all(&dir).ok();
}
