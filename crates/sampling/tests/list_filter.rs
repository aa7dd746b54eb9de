//! The `list_filter` op (top-p, min-p and temp on a candidate list in one node) on the CPU backend
//! against the CPU sampler chain: for every stage alone and in several orders, over rows with
//! exact top-p boundaries (llama.cpp's `[0.4, 0.3, 0.2, 0.1]` at `p = 0.7`), ties, flat rows
//! whose every cut is a close call, `-inf` entries, min_keep 0 / 1 / 3 / beyond the list, `p` 0
//! and 1, and temperatures from 1e-3 to `+inf`, the op keeps exactly the chain's candidates with
//! the chain's logits, bit for bit (the same `f32` arithmetic, `kernels::list`). A NaN row comes
//! out all NaN.

mod common;
use common::*;
use graph::{DType, Graph, ListStage, ListStages};

/// One stage with its chain spelling and its op parameters.
#[derive(Debug, Clone, Copy)]
enum St {
    TopP(f32, usize),
    MinP(f32, usize),
    Temp(f32),
}

impl St {
    fn spec(self) -> String {
        match self {
            St::TopP(p, mk) => format!("top_p(p={p},min_keep={mk})"),
            St::MinP(p, mk) => format!("min_p(p={p},min_keep={mk})"),
            St::Temp(t) => format!("temp(t={t})"),
        }
    }
    fn kind(self) -> ListStage {
        match self {
            St::TopP(..) => ListStage::TopP,
            St::MinP(..) => ListStage::MinP,
            St::Temp(_) => ListStage::Temp,
        }
    }
    fn params(self) -> [f32; 2] {
        match self {
            St::TopP(p, mk) => [p, mk as f32],
            St::MinP(p, mk) => [p.ln(), mk as f32],
            St::Temp(t) => [t, 0.0],
        }
    }
}

/// The top `k` of `row` as the chain's (and `top_k`'s) list: (id, logit), value descending, ties by
/// lower id.
fn top_list(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut v: Vec<(u32, f32)> = row.iter().enumerate().map(|(i, &x)| (i as u32, x)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

/// Runs one `list_filter` node over `lists` (each `k` long) with one stage sequence.
fn run_op(lists: &[Vec<f32>], stages: &[St]) -> Vec<Vec<f32>> {
    let (k, n) = (lists[0].len(), lists.len());
    let st = ListStages::new(&stages.iter().map(|s| s.kind()).collect::<Vec<_>>()).unwrap();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[k, n]).unwrap();
    let p = g.input("p", DType::F32, &[st.param_rows(), n]).unwrap();
    let y = g.list_filter(x, p, st).unwrap();
    g.set_output(y);
    let mut s = sched::Scheduler::new(vec![Box::new(cpu::CpuBackend::with_threads(1))]).unwrap();
    s.plan(&g).unwrap();
    let flat: Vec<f32> = lists.iter().flatten().copied().collect();
    let params: Vec<f32> = (0..n).flat_map(|_| stages.iter().flat_map(|s| s.params())).collect();
    s.set_input_f32(x, &flat).unwrap();
    s.set_input_f32(p, &params).unwrap();
    s.compute().unwrap();
    s.read_f32(y).unwrap().chunks(k).map(<[f32]>::to_vec).collect()
}

/// Checks the op against the chain `top_k(k);STAGES` on every row.
fn check(rows: &[Vec<f32>], k: usize, stages: &[St]) {
    let lists: Vec<Vec<(u32, f32)>> = rows.iter().map(|r| top_list(r, k)).collect();
    let vals: Vec<Vec<f32>> = lists.iter().map(|l| l.iter().map(|e| e.1).collect()).collect();
    let out = run_op(&vals, stages);
    let spec = std::iter::once(format!("top_k(k={k})")).chain(stages.iter().map(|s| s.spec())).collect::<Vec<_>>();
    let spec = spec.join(";");
    for (r, (row, (list, got))) in rows.iter().zip(lists.iter().zip(&out)).enumerate() {
        let want = run_view(&spec, row);
        let mut want: Vec<(u32, u32)> = want.candidates.iter().map(|t| (t.id, t.logit.to_bits())).collect();
        want.sort_unstable();
        let mut have: Vec<(u32, u32)> =
            list.iter().zip(got).filter(|(_, v)| **v != f32::NEG_INFINITY).map(|(e, v)| (e.0, v.to_bits())).collect();
        have.sort_unstable();
        assert_eq!(have, want, "row {r} of `{spec}`: the op keeps other candidates or logits than the chain");
    }
}

/// Rows: random (several scales), exact boundaries, ties, flat, peaked, rows with `-inf` entries.
fn rows(n_vocab: usize) -> Vec<Vec<f32>> {
    let mut v = Vec::new();
    for seed in 0..24u64 {
        v.push(gaussian_logits(n_vocab, seed, [0.5, 2.0, 6.0][seed as usize % 3]));
    }
    // llama.cpp's boundary: p = [0.4, 0.3, 0.2, 0.1] then nothing.
    let mut b = vec![f32::NEG_INFINITY; n_vocab];
    for (i, p) in [0.1f32, 0.2, 0.3, 0.4].iter().enumerate() {
        b[i * 7] = p.ln();
    }
    v.push(b);
    // Ties: levels repeated; flat.
    v.push((0..n_vocab).map(|i| (i % 5) as f32 * 0.5).collect());
    v.push(vec![0.25; n_vocab]);
    // Peaked, and a row with half its entries -inf.
    let mut pk = gaussian_logits(n_vocab, 99, 1.0);
    pk[17] = 30.0;
    v.push(pk);
    v.push((0..n_vocab).map(|i| if i % 2 == 0 { f32::NEG_INFINITY } else { (i % 13) as f32 * 0.3 }).collect());
    v
}

#[test]
fn list_filter_matches_the_cpu_chain() {
    let rows = rows(120);
    let seqs: Vec<Vec<St>> = vec![
        vec![St::TopP(0.7, 0)],
        vec![St::TopP(0.95, 1)],
        vec![St::TopP(0.0, 0)],
        vec![St::TopP(0.0, 3)],
        vec![St::TopP(0.5, 100)],
        vec![St::TopP(0.999_999, 0)],
        vec![St::TopP(0.2, 0)],
        vec![St::MinP(0.05, 0)],
        vec![St::MinP(0.5, 3)],
        vec![St::MinP(1.0, 0)],
        vec![St::MinP(2.0, 2)],
        vec![St::MinP(0.3, 100)],
        vec![St::Temp(0.8)],
        vec![St::Temp(1e-3)],
        vec![St::Temp(1e3)],
        vec![St::TopP(0.95, 0), St::MinP(0.05, 0), St::Temp(0.8)],
        vec![St::MinP(0.05, 1), St::TopP(0.9, 0)],
        vec![St::Temp(0.5), St::TopP(0.8, 2), St::MinP(0.2, 0)],
        vec![St::Temp(2.0), St::MinP(0.1, 0), St::TopP(0.6, 0), St::Temp(0.7)],
        vec![St::TopP(0.9, 0), St::TopP(0.5, 0)],
    ];
    for k in [40, 4, 1] {
        for s in &seqs {
            check(&rows, k, s);
        }
    }
    // An infinite temperature where no entry is -inf (the chain refuses one with a -inf entry).
    check(&rows[..24], 40, &[St::Temp(f32::INFINITY), St::TopP(0.5, 0)]);
}

#[test]
fn list_filter_cuts_exactly_at_llama_cpps_boundary() {
    // p = [0.4, 0.3, 0.2, 0.1]: the f32 running sum after two is 0.70000005 >= 0.7, so p = 0.7 keeps
    // two (llama.cpp's tests/test-sampling.cpp); p = 0.8 keeps three, min_keep = 3 keeps three.
    let l: Vec<f32> = [0.4f32, 0.3, 0.2, 0.1].iter().map(|p| p.ln()).collect();
    let kept = |st: &[St]| run_op(std::slice::from_ref(&l), st)[0].iter().filter(|v| v.is_finite()).count();
    assert_eq!(kept(&[St::TopP(0.7, 0)]), 2);
    assert_eq!(kept(&[St::TopP(0.8, 0)]), 3);
    assert_eq!(kept(&[St::TopP(0.7, 3)]), 3);
    assert_eq!(kept(&[St::TopP(0.0, 0)]), 1);
    assert_eq!(kept(&[St::TopP(1.0, 0)]), 4);
    // min-p 0.5 of 0.4 = 0.2: ln 0.2 against ln 0.4 + ln 0.5 is decided by f32 rounding; the op
    // must decide it as the chain's sorted walk does.
    let thr = l[0] + 0.5f32.ln();
    let want_kept = 1 + l[1..].iter().take_while(|&&x| x >= thr).count();
    let out = run_op(std::slice::from_ref(&l), &[St::MinP(0.5, 0), St::Temp(0.5)]);
    let want: Vec<f32> = (0..4).map(|i| if i < want_kept { l[i] / 0.5 } else { f32::NEG_INFINITY }).collect();
    assert_eq!(out[0], want);
    let chain = run_view("top_k(k=4);min_p(p=0.5);temp(t=0.5)", &l);
    assert_eq!(chain.candidates.len(), want_kept, "the chain keeps as many");
}

#[test]
fn a_nan_row_fails_alone() {
    let good = vec![3.0f32, 2.0, 1.0, 0.0];
    let bad = vec![f32::NAN; 4];
    let mid = vec![3.0f32, f32::NAN, 1.0, 0.0];
    let out = run_op(&[good.clone(), bad, mid], &[St::TopP(0.9, 0), St::MinP(0.05, 0), St::Temp(0.8)]);
    assert!(out[1].iter().all(|v| v.is_nan()) && out[2].iter().all(|v| v.is_nan()));
    assert!(out[0].iter().all(|v| !v.is_nan()));
    assert_eq!(out[0][0], 3.0 / 0.8);
}

/// The default chain's group (`top_k;top_p;min_p;temp;dist`) on 1 and 8 rows: its list stages are
/// one `list_filter` node, none of the composed nodes (softmax, cumsum, division) remain, and the
/// group holds 18 nodes on one row and 24 on eight (38 and 44 with the composed stages).
#[test]
fn the_default_chains_list_stages_are_one_node() {
    use sampling::Chain;
    use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
    for (rows, want) in [(1usize, 18usize), (8, 24)] {
        let mut seqs = Sequences::new(1).unwrap();
        let chain = "top_k(k=40);top_p(p=0.95);min_p(p=0.05);temp(t=0.8);dist(seed=1)";
        let map: Vec<(SeqId, usize)> = (0..rows).map(|r| (SeqId(r as u32), r)).collect();
        for &(s, _) in &map {
            seqs.set(s, SeqConfig::new(Chain::parse(chain).unwrap()));
        }
        let mut g = Graph::new();
        let logits = g.input("logits", DType::F32, &[1000, rows]).unwrap();
        let before = g.len();
        Tail::attach(&mut g, logits, &map, &seqs, &cpu::CpuBackend::with_threads(1)).unwrap();
        let count = |name: &str| g.nodes().filter(|(_, n)| n.op.name() == name).count();
        assert_eq!(count("list_filter"), 1, "{rows} rows: one list_filter node");
        for gone in ["soft_max", "cumsum", "div"] {
            assert_eq!(count(gone), 0, "{rows} rows: no `{gone}` node is left");
        }
        assert_eq!(g.len() - before, want, "{rows} rows: the group's nodes");
    }
}
