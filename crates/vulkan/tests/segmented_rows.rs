//! Long rows spread over many workgroups (`sum_rows`, `max_rows`, `argmax` in two passes,
//! `categorical` in four) give the one-workgroup answer: the same graph on a backend with
//! `Options::whole_rows` and on one without must agree bit for bit for max, argmax and every draw
//! (sums are added in another order: close, not equal). Rows of 8193 (one entry past a segment),
//! 40,000 and 151,936 entries; draws without params, with per-row scale and min-p cut, at zero
//! temperature (ties of the maximum in different segments), and over a row whose only finite
//! entries sit in the last segment; each row's draw from its own keys, over many keys. Also
//! `top_p_mask` (twelve dispatches over 8192-entry segments against one workgroup's bisection, on
//! those rows and on rows of seven tied levels, with every parameter regime) and `top_k` (block
//! minima against the radix select over the whole row). The validation layer must stay silent.

mod common;

use common::*;
use graph::{DType, Graph, NodeId};
use vulkan::Options;

fn bytes_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_i32(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Rows of `n` logits: uniform in [-6, 6] with planted specials per row (see the module docs).
fn logits(n: usize, rows: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n * rows).map(|i| graph::philox::uniform(11, 0, i as u64) * 12.0 - 6.0).collect();
    for r in 0..rows {
        let row = &mut x[r * n..(r + 1) * n];
        match r % 4 {
            // a tie of the maximum in two segments
            0 => {
                row[5] = 9.0;
                row[n - 3] = 9.0;
            }
            // only the last segment's entries are finite
            1 => row[..n - 4000.min(n / 2)].fill(f32::NEG_INFINITY),
            // a peak whose tail is drawn
            2 => row[n / 2] = 7.5,
            _ => {}
        }
    }
    x
}

/// The outputs of sum, max, argmax, three draws, a top-p mask (row `r` with the parameters
/// `TOP_P[r + seed_row]`) and top-k 40 of `x` ([n, rows]) on a fresh backend.
#[allow(clippy::too_many_arguments)]
fn run_all(
    opts: Options,
    n: usize,
    rows: usize,
    x: &[f32],
    keys: &[i32],
    params: &[f32],
    seed_row: usize,
) -> Option<Vec<Vec<u8>>> {
    let mut be = vulkan_with("segmented_rows", opts)?;
    let mut g = Graph::new();
    let xi = g.input("x", DType::F32, &[n, rows]).unwrap();
    let ki = g.input("keys", DType::I32, &[4, rows]).unwrap();
    let pi = g.input("params", DType::F32, &[2, rows]).unwrap();
    let greedy = g.input("greedy", DType::F32, &[2, rows]).unwrap();
    let tp = g.input("top_p", DType::F32, &[3, rows]).unwrap();
    let outs: Vec<NodeId> = vec![
        g.sum_rows(xi).unwrap(),
        g.max_rows(xi).unwrap(),
        g.argmax(xi).unwrap(),
        g.categorical(xi, ki, None, None, 2).unwrap(),
        g.categorical(xi, ki, Some(pi), None, 3).unwrap(),
        g.categorical(xi, ki, Some(greedy), None, 4).unwrap(),
        g.top_p_mask(xi, tp).unwrap(),
        g.top_k(xi, 40).unwrap(),
    ];
    for &o in &outs {
        g.set_output(o);
    }
    let greedy_params: Vec<f32> = (0..rows).flat_map(|_| [f32::INFINITY, f32::NEG_INFINITY]).collect();
    // (t, p, min_keep) per row: a plain cut, a cold row with min_keep 1, p = 0 with min_keep 3,
    // min_keep above the cut, a hot row, p = 1, and bad parameters (an all-NaN row).
    const TOP_P: [[f32; 3]; 7] = [
        [1.0, 0.9, 0.0],
        [0.7, 0.437, 1.0],
        [1.5, 0.0, 3.0],
        [1.0, 0.95, 40.0],
        [3.0, 0.61, 0.0],
        [1.0, 1.0, 0.0],
        [0.0, 0.5, 0.0],
    ];
    let tp_params: Vec<f32> = (0..rows).flat_map(|r| TOP_P[(r + seed_row) % TOP_P.len()]).collect();
    let inputs = vec![
        (xi, bytes_f32(x)),
        (ki, bytes_i32(keys)),
        (pi, bytes_f32(params)),
        (greedy, bytes_f32(&greedy_params)),
        (tp, bytes_f32(&tp_params)),
    ];
    let got = run(&mut be, &g, &inputs, &outs, false);
    assert_clean(&be);
    Some(got)
}

/// Equal bytes, or the first differing 4-byte word named by its row (of `per_row` words) and
/// position, both sides shown as f32 and as bits.
fn same(a: &[u8], b: &[u8], per_row: usize, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let word = |v: &[u8], i: usize| u32::from_le_bytes(v[4 * i..4 * i + 4].try_into().unwrap());
    if let Some(i) = (0..a.len() / 4).find(|&i| word(a, i) != word(b, i)) {
        let (x, y) = (word(a, i), word(b, i));
        panic!(
            "{what}: row {} entry {}: split {} ({x:#x}) vs one workgroup {} ({y:#x})",
            i / per_row,
            i % per_row,
            f32::from_bits(x),
            f32::from_bits(y)
        );
    }
}

#[test]
fn split_rows_give_the_one_workgroup_answer() {
    for (n, rows, key_sets) in [(8193usize, 4usize, 3u64), (40_000, 8, 3), (151_936, 4, 2)] {
        let x = logits(n, rows);
        for ks in 0..key_sets {
            let keys: Vec<i32> =
                (0..4 * rows).map(|i| graph::philox::bits(0xC0FFEE + ks, 1, i as u64)[0] as i32).collect();
            // per-row scale in [0.3, 3] and min-p offset in [-4, 0]
            let params: Vec<f32> = (0..rows)
                .flat_map(|r| {
                    let u = graph::philox::uniform(5 + ks, 2, r as u64);
                    [0.3 + 2.7 * u, -4.0 * u]
                })
                .collect();
            let seed = ks as usize;
            let Some(split) = run_all(Options::default(), n, rows, &x, &keys, &params, seed) else { return };
            let whole = run_all(Options { whole_rows: true, ..Options::default() }, n, rows, &x, &keys, &params, seed)
                .expect("the device opened once already");
            let f32s =
                |b: &[u8]| b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>();
            for (a, b) in f32s(&split[0]).iter().zip(f32s(&whole[0])) {
                assert!(
                    a == &b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-3 * b.abs().max(1.0),
                    "sum {a} vs {b}"
                );
            }
            for (i, name) in [
                (1, "max_rows"),
                (2, "argmax"),
                (3, "categorical"),
                (4, "categorical with params"),
                (5, "greedy"),
                (6, "top_p_mask"),
                (7, "top_k"),
            ] {
                same(&split[i], &whole[i], n, &format!("{name}, rows of {n}, key set {ks}"));
            }
        }
    }
}

#[test]
fn split_top_p_cuts_inside_ties_as_one_workgroup() {
    // Seven levels over 40,000 entries: every cut falls inside a tie group spread over all the
    // segments, whose kept entries must be the lowest ids; the rows cycle through the parameters.
    let (n, rows) = (40_000usize, 7usize);
    let x: Vec<f32> = (0..n * rows).map(|i| (graph::philox::bits(21, 3, i as u64)[0] % 7) as f32 * 0.5 - 1.5).collect();
    let keys = vec![0i32; 4 * rows];
    let params = vec![1.0f32; 2 * rows];
    for seed in 0..2 {
        let Some(split) = run_all(Options::default(), n, rows, &x, &keys, &params, seed) else { return };
        let whole = run_all(Options { whole_rows: true, ..Options::default() }, n, rows, &x, &keys, &params, seed)
            .expect("the device opened once already");
        same(&split[6], &whole[6], n, &format!("top_p_mask on ties, parameters from row {seed}"));
        same(&split[7], &whole[7], 40, "top_k on ties");
    }
}
