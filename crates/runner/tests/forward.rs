//! The forward graph on the CPU backend against an f64 reference decoder written here from the
//! LLaMA definition; the KV cache (token-by-token decoding equals a prefill); batches of sequences
//! at different positions against each sequence alone; plan reuse in a steady decode loop; backend
//! sampling against CPU sampling; the graph dump snapshot.

use graph::DType;
use runner::{Config, Model, Sampling, Session, SessionOptions, Weights};
use sampling::Chain;
use std::sync::Arc;

const V: usize = 300;

fn model(tied: bool) -> Arc<Model> {
    let cfg = Config { tied_embeddings: tied, ..Config::tiny(V) };
    Arc::new(Model::random(cfg, DType::F32, 5).unwrap())
}

fn opts(n_ctx: usize, kv: DType) -> SessionOptions {
    SessionOptions { n_ctx, kv_dtype: kv, threads: 2, sampling: Sampling::Cpu, ..SessionOptions::default() }
}

fn greedy(n: usize) -> Vec<Chain> {
    (0..n).map(|_| Chain::parse("greedy").unwrap()).collect()
}

fn f32s(w: &Weights, name: &str) -> Vec<f64> {
    let t = w.get(name).unwrap();
    assert_eq!(t.dtype, DType::F32);
    t.data.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect()
}

/// `y[i] = sum_k m[i * k_len + k] x[k]` (a ggml `[k_len, rows]` weight times `x`).
fn matvec(m: &[f64], x: &[f64]) -> Vec<f64> {
    m.chunks(x.len()).map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum()).collect()
}

fn rms_norm(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| v * s * g).collect()
}

/// ggml rope mode 0: adjacent pairs `(2i, 2i+1)` of each head rotate by `pos * base^(-2i/n_dims)`.
fn rope(x: &mut [f64], hd: usize, n_dims: usize, pos: usize, base: f64) {
    for head in x.chunks_mut(hd) {
        for i in 0..n_dims / 2 {
            let theta = pos as f64 * base.powf(-2.0 * i as f64 / n_dims as f64);
            let (c, s) = (theta.cos(), theta.sin());
            let (a, b) = (head[2 * i], head[2 * i + 1]);
            head[2 * i] = a * c - b * s;
            head[2 * i + 1] = a * s + b * c;
        }
    }
}

/// The logits after each token of `tokens`, computed in f64 from the LLaMA definition.
fn reference(m: &Model, tokens: &[u32]) -> Vec<Vec<f64>> {
    let (c, w) = (&m.config, &m.weights);
    let (e, hd, nh, nkv) = (c.n_embd, c.head_dim, c.n_head, c.n_head_kv);
    let eps = c.rms_eps as f64;
    let embd = f32s(w, "token_embd.weight");
    let blk = |i: usize, s: &str| f32s(w, &format!("blk.{i}.{s}.weight"));
    let mut keys: Vec<Vec<Vec<f64>>> = vec![Vec::new(); c.n_layer];
    let mut vals: Vec<Vec<Vec<f64>>> = vec![Vec::new(); c.n_layer];
    let mut out = Vec::new();
    for (p, &t) in tokens.iter().enumerate() {
        let mut x = embd[t as usize * e..(t as usize + 1) * e].to_vec();
        for il in 0..c.n_layer {
            let h = rms_norm(&x, &blk(il, "attn_norm"), eps);
            let mut q = matvec(&blk(il, "attn_q"), &h);
            let mut k = matvec(&blk(il, "attn_k"), &h);
            let v = matvec(&blk(il, "attn_v"), &h);
            rope(&mut q, hd, c.rope_dims, p, c.rope_theta as f64);
            rope(&mut k, hd, c.rope_dims, p, c.rope_theta as f64);
            keys[il].push(k);
            vals[il].push(v);
            let mut attn = vec![0.0; nh * hd];
            for head in 0..nh {
                let kvh = head / (nh / nkv);
                let qh = &q[head * hd..(head + 1) * hd];
                let scores: Vec<f64> = keys[il]
                    .iter()
                    .map(|k| {
                        qh.iter().zip(&k[kvh * hd..(kvh + 1) * hd]).map(|(a, b)| a * b).sum::<f64>()
                            / (hd as f64).sqrt()
                    })
                    .collect();
                let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let ex: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
                let sum: f64 = ex.iter().sum();
                for (j, v) in vals[il].iter().enumerate() {
                    for d in 0..hd {
                        attn[head * hd + d] += ex[j] / sum * v[kvh * hd + d];
                    }
                }
            }
            let o = matvec(&blk(il, "attn_output"), &attn);
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            let h = rms_norm(&x, &blk(il, "ffn_norm"), eps);
            let g = matvec(&blk(il, "ffn_gate"), &h);
            let u = matvec(&blk(il, "ffn_up"), &h);
            let a: Vec<f64> = g.iter().zip(&u).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
            let d = matvec(&blk(il, "ffn_down"), &a);
            x.iter_mut().zip(&d).for_each(|(a, b)| *a += b);
        }
        let h = rms_norm(&x, &f32s(w, "output_norm.weight"), eps);
        let head = if c.tied_embeddings { embd.clone() } else { f32s(w, "output.weight") };
        out.push(matvec(&head, &h));
    }
    out
}

fn max_diff(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (*x as f64 - y).abs()).fold(0.0, f64::max)
}

fn prompt(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 37 + salt * 101 + 11) % V as u32).collect()
}

#[test]
fn prefill_matches_the_f64_reference_untied_and_tied() {
    for tied in [false, true] {
        let m = model(tied);
        let toks = prompt(9, 1);
        let want = reference(&m, &toks);
        let mut s = Session::new(m.clone(), opts(16, DType::F32), greedy(1)).unwrap();
        let got = s.eval(&[&toks]).unwrap();
        let d = max_diff(&got[0], want.last().unwrap());
        assert!(d < 2e-4, "tied {tied}: max |diff| {d}");
        // Logits spread over a few units: a wrong operation would not hide under the tolerance.
        let spread = want.last().unwrap().iter().cloned().fold(0.0f64, |a, b| a.max(b.abs()));
        assert!(spread > 0.5, "spread {spread}");
    }
}

#[test]
fn decoding_token_by_token_equals_the_prefill_and_the_reference() {
    let m = model(false);
    let toks = prompt(12, 2);
    let want = reference(&m, &toks);
    for kv in [DType::F32, DType::F16] {
        let mut s = Session::new(m.clone(), opts(16, kv), greedy(1)).unwrap();
        let mut last = Vec::new();
        for (p, t) in toks.iter().enumerate() {
            last = s.eval(&[&[*t]]).unwrap();
            let tol = if kv == DType::F32 { 2e-4 } else { 2e-2 };
            let d = max_diff(&last[0], &want[p]);
            assert!(d < tol, "kv {kv}, position {p}: max |diff| {d}");
        }
        assert_eq!(s.positions(), [12]);
        // A prefill of the first 7 tokens and a decode of the rest agree too.
        let mut s2 = Session::new(m.clone(), opts(16, kv), greedy(1)).unwrap();
        s2.eval(&[&toks[..7]]).unwrap();
        let mut last2 = Vec::new();
        for t in &toks[7..] {
            last2 = s2.eval(&[&[*t]]).unwrap();
        }
        let d = last[0].iter().zip(&last2[0]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let tol = if kv == DType::F32 { 1e-4 } else { 5e-3 };
        assert!(d < tol, "kv {kv}: prefill+decode vs token by token: {d}");
    }
}

#[test]
fn a_batch_at_different_positions_equals_each_sequence_alone() {
    let m = model(true);
    let prompts = [prompt(3, 3), prompt(8, 4), prompt(5, 5)];
    let cont = [[7u32, 8, 9], [10, 11, 12], [13, 14, 15]];
    let mut alone = Vec::new();
    for (p, c) in prompts.iter().zip(&cont) {
        let mut s = Session::new(m.clone(), opts(16, DType::F32), greedy(1)).unwrap();
        let mut rows = vec![s.eval(&[p]).unwrap().remove(0)];
        for t in c {
            rows.push(s.eval(&[&[*t]]).unwrap().remove(0));
        }
        alone.push(rows);
    }
    let mut s = Session::new(m.clone(), opts(16, DType::F32), greedy(3)).unwrap();
    let refs: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
    let mut batched = vec![s.eval(&refs).unwrap()];
    assert_eq!(s.positions(), [3, 8, 5]);
    for j in 0..3 {
        let step: Vec<[u32; 1]> = cont.iter().map(|c| [c[j]]).collect();
        let refs: Vec<&[u32]> = step.iter().map(|x| x.as_slice()).collect();
        batched.push(s.eval(&refs).unwrap());
    }
    for (step, rows) in batched.iter().enumerate() {
        for (q, row) in rows.iter().enumerate() {
            let d = row.iter().zip(&alone[q][step]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(d < 1e-4, "step {step}, sequence {q}: {d}");
        }
    }
    // And the batch agrees with the reference at the end of each sequence.
    for (q, (p, c)) in prompts.iter().zip(&cont).enumerate() {
        let all: Vec<u32> = p.iter().chain(c).copied().collect();
        let want = reference(&m, &all);
        let d = max_diff(&batched[3][q], want.last().unwrap());
        assert!(d < 2e-4, "sequence {q}: {d}");
    }
}

#[test]
fn a_steady_decode_loop_reuses_its_plan() {
    let m = model(true);
    let chains: Vec<Chain> =
        ["greedy", "top_k(k=20);temp(t=0.8);dist(seed=4)"].iter().map(|s| Chain::parse(s).unwrap()).collect();
    let o = SessionOptions { sampling: Sampling::Backend, ..opts(32, DType::F16) };
    let weight_bytes = m.weights.bytes() as u64;
    let mut s = Session::new(m, o, chains).unwrap();
    let out = s.step(&[&prompt(4, 6), &prompt(6, 7)]).unwrap();
    let after_prefill = s.stats();
    // Every weight was bound by the prefill: read in place (the CPU, aligned) or copied.
    assert!(after_prefill.bytes_from_host + after_prefill.bytes_imported > weight_bytes);
    let mut last = out.tokens;
    let out = s.step(&[&[last[0]], &[last[1]]]).unwrap();
    last = out.tokens;
    let after_first = s.stats();
    assert_eq!(after_first.plans, 2, "one plan for the prefill, one for decoding");
    // The decode plan shares the prefill's weights: only the step's inputs were written.
    assert!(after_first.bytes_from_host - after_prefill.bytes_from_host < 4096);
    for _ in 0..10 {
        let out = s.step(&[&[last[0]], &[last[1]]]).unwrap();
        // Backend sampling reads back one token per sequence.
        assert_eq!(out.bytes_read, 8);
        last = out.tokens;
    }
    let st = s.stats();
    assert_eq!(st.plans, after_first.plans, "no re-plan in a steady decode loop");
    assert_eq!(st.allocations, after_first.allocations);
    assert_eq!(st.buffers, after_first.buffers);
    assert_eq!(st.steps, after_first.steps + 10);
    assert_eq!(s.positions(), [15, 17]);
}

#[test]
fn backend_and_cpu_sampling_choose_the_same_tokens() {
    let m = Arc::new(Model::random(Config::tiny(2000), DType::F16, 9).unwrap());
    let specs = [
        "greedy",
        "top_k(k=40);top_p(p=0.9);temp(t=0.8);dist(seed=1)",
        "penalties(last_n=16,repeat=1.3,freq=0.2,present=0.2);min_p(p=0.05);dist(seed=2)",
        "top_k(k=30);mirostat(tau=5,eta=0.1,seed=3)",
        "dry(multiplier=0.8,base=1.75,allowed_length=2,last_n=32);temp(t=1.5);dist(seed=4)",
    ];
    let run = |sampling: Sampling| -> Vec<Vec<u32>> {
        let chains: Vec<Chain> = specs.iter().map(|s| Chain::parse(s).unwrap()).collect();
        let o = SessionOptions { sampling, ..opts(32, DType::F16) };
        let mut s = Session::new(m.clone(), o, chains).unwrap();
        let prompts: Vec<Vec<u32>> = (0..specs.len()).map(|i| prompt(2 + i, i as u32)).collect();
        let refs: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
        let mut out = vec![s.step(&refs).unwrap().tokens];
        for _ in 0..20 {
            let last: Vec<[u32; 1]> = out.last().unwrap().iter().map(|&t| [t]).collect();
            let refs: Vec<&[u32]> = last.iter().map(|x| x.as_slice()).collect();
            out.push(s.step(&refs).unwrap().tokens);
        }
        out
    };
    let backend = run(Sampling::Backend);
    let cpu = run(Sampling::Cpu);
    assert_eq!(backend, cpu);
    // The random chains do not just repeat one token.
    let seq1: std::collections::BTreeSet<u32> = backend.iter().map(|r| r[1]).collect();
    assert!(seq1.len() > 5, "{seq1:?}");
}

#[test]
fn bad_steps_are_errors_and_lose_nothing() {
    let m = model(true);
    let mut s = Session::new(m, opts(8, DType::F32), greedy(2)).unwrap();
    let e = s.eval(&[&[1, 2, 3]]).unwrap_err().to_string();
    assert!(e.contains("1 token lists") && e.contains("2 sequences"), "{e}");
    let e = s.eval(&[&[1], &[V as u32]]).unwrap_err().to_string();
    assert!(e.contains(&format!("token {V} of sequence 1")), "{e}");
    let e = s.eval(&[&[1; 9], &[1]]).unwrap_err().to_string();
    assert!(e.contains("sequence 0: 9 positions needed") && e.contains("holds 8"), "{e}");
    assert_eq!(s.positions(), [0, 0]);
    s.eval(&[&[1, 2], &[3]]).unwrap();
    assert_eq!(s.positions(), [2, 1]);
}

#[test]
fn the_decode_graph_dump_is_stable() {
    let m = Arc::new(Model::random(Config { n_layer: 1, ..Config::tiny(64) }, DType::F16, 1).unwrap());
    let mut g = graph::Graph::new();
    let cache = runner::CacheSpec { n_seq: 2, n_ctx: 8, dtype: DType::F16 };
    runner::forward::build(&mut g, &m.config, &m.weights, &cache, 1).unwrap();
    insta::assert_snapshot!("decode_graph_1_layer", graph::dump::to_text(&g));
}
