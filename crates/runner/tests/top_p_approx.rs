//! A measurement, not a check (ignored by default): how often top-p approximated by top-k,
//! `top_p(p=P,approx_k=N)`, keeps another set of tokens than exact top-p on SmolLM2-135M-Instruct's
//! logits (Q4_1, fetched into `target/models` if absent), and how much of the row's probability
//! mass it leaves out there. Six prompts decoded together for 256 steps each (llama.cpp's default
//! chain picks the tokens: `top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist`), every
//! step's raw logits row (temperature 1, where llama.cpp's default order runs top-p) put through
//! exact and approximated top-p. The table it prints is docs/SAMPLING.md's:
//!
//! ```text
//! cargo test -p runner --release --test top_p_approx -- --ignored --nocapture
//! ```

#![allow(clippy::print_stdout)] // the report is the point

mod common;

use runner::{Session, SessionOptions};
use sampling::Chain;

const PROMPTS: [&str; 6] = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The three most important causes of the First World War were",
    "Q: How do I make a good cup of green tea?\nA:",
    "Photosynthesis is the process by which",
];
const STEPS: usize = 256;
const PS: [f32; 2] = [0.9, 0.95];
const NS: [usize; 4] = [32, 64, 128, 256];

/// Per (p, N): rows whose kept set differs, the mass left out summed over all rows, and its
/// largest value on one row.
#[derive(Debug, Default, Clone, Copy)]
struct Cell {
    differ: usize,
    missing_sum: f64,
    missing_max: f64,
}

#[test]
#[ignore = "a measurement for docs/SAMPLING.md: cargo test -p runner --release --test top_p_approx -- --ignored --nocapture"]
fn top_p_approx_k_against_exact_top_p_on_smollm2() {
    let m = common::smollm2();
    let tok = m.tokenizer.as_ref().unwrap();
    let prompts: Vec<Vec<u32>> = PROMPTS.iter().map(|p| tok.encode(p).unwrap()).collect();
    let n = prompts.len();
    let pick = |i: usize| {
        Chain::parse(&format!("top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist(seed={i})")).unwrap()
    };
    let mut pickers: Vec<Chain> = (0..n).map(pick).collect();
    let longest = prompts.iter().map(Vec::len).max().unwrap();
    let opts = SessionOptions { n_ctx: longest + STEPS + 1, threads: 2, ..SessionOptions::default() };
    let mut session = Session::new(m.clone(), opts, pickers.clone()).unwrap();
    let mut exact: Vec<Chain> = PS.iter().map(|p| Chain::parse(&format!("top_p(p={p})")).unwrap()).collect();
    let mut approx: Vec<Vec<Chain>> = PS
        .iter()
        .map(|p| NS.iter().map(|k| Chain::parse(&format!("top_p(p={p},approx_k={k})")).unwrap()).collect())
        .collect();
    let mut cells = [[Cell::default(); NS.len()]; PS.len()];
    let mut sizes: Vec<Vec<usize>> = vec![Vec::new(); PS.len()];
    let refs: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
    let mut rows = session.eval(&refs).unwrap();
    for step in 0..STEPS {
        for row in &rows {
            // The whole row's softmax in f64: the mass of what each side keeps.
            let max = row.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(f64::from(x)));
            let w: Vec<f64> = row.iter().map(|&x| (f64::from(x) - max).exp()).collect();
            let total: f64 = w.iter().sum();
            for (pi, chain) in exact.iter_mut().enumerate() {
                let mut kept: Vec<u32> = chain.run(row).unwrap().candidates.iter().map(|t| t.id).collect();
                kept.sort_unstable();
                sizes[pi].push(kept.len());
                for (ni, ac) in approx[pi].iter_mut().enumerate() {
                    let mut got: Vec<u32> = ac.run(row).unwrap().candidates.iter().map(|t| t.id).collect();
                    got.sort_unstable();
                    // The approximation keeps the first min(kept, N) of the exact nucleus.
                    assert_eq!(got.len(), kept.len().min(NS[ni]), "step {step}");
                    assert!(got.iter().all(|t| kept.binary_search(t).is_ok()), "step {step}");
                    if got != kept {
                        let mass = |ids: &[u32]| ids.iter().map(|&t| w[t as usize]).sum::<f64>() / total;
                        let missing = mass(&kept) - mass(&got);
                        let c = &mut cells[pi][ni];
                        c.differ += 1;
                        c.missing_sum += missing;
                        c.missing_max = c.missing_max.max(missing);
                    }
                }
            }
        }
        let next: Vec<[u32; 1]> = rows.iter().zip(&mut pickers).map(|(r, c)| [c.sample(r).unwrap()]).collect();
        let refs: Vec<&[u32]> = next.iter().map(|t| t.as_slice()).collect();
        rows = session.eval(&refs).unwrap();
    }
    let total_rows = n * STEPS;
    println!(
        "SmolLM2-135M-Instruct Q4_1, {n} prompts x {STEPS} steps = {total_rows} rows (raw logits, n_vocab {})",
        m.config.n_vocab
    );
    println!();
    println!(
        "| p | exact nucleus size: median / 90th pct / max | N | rows where the kept set differs | mass left out, mean over all rows | mass left out, largest |"
    );
    println!("|---|---|---|---|---|---|");
    for (pi, p) in PS.iter().enumerate() {
        let mut s = sizes[pi].clone();
        s.sort_unstable();
        let q = |f: f64| s[((s.len() - 1) as f64 * f).round() as usize];
        for (ni, k) in NS.iter().enumerate() {
            let c = cells[pi][ni];
            println!(
                "| {p} | {} / {} / {} | {k} | {} ({:.1}%) | {:.4} | {:.3} |",
                q(0.5),
                q(0.9),
                s[s.len() - 1],
                c.differ,
                100.0 * c.differ as f64 / total_rows as f64,
                c.missing_sum / total_rows as f64,
                c.missing_max,
            );
        }
    }
}
