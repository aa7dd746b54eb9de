//! Every shape rule and every error path of the builder, asserting the message content.

use graph::{BinaryOp, CompareOp, DType, Graph, NodeId, Op, RopeMode, SortOrder, UnaryOp};

mod common;
use common::{has, msg};

fn ne(g: &Graph, id: NodeId) -> [usize; 4] {
    g.node(id).ne()
}

#[test]
fn leaves_and_their_errors() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F16, &[8, 3]).unwrap();
    assert_eq!(ne(&g, x), [8, 3, 1, 1]);
    assert!(g.node(x).flags.input && !g.node(x).flags.param);
    let w = g.param("w", DType::BF16, &[8, 4]).unwrap();
    assert!(g.node(w).flags.param);
    assert_eq!(g.inputs(), vec![x]);
    assert_eq!(g.params(), vec![w]);
    has(
        &msg(g.input("bad", DType::F32, &[1, 2, 3, 4, 5])),
        &["input (node #2 'bad')", "1 to 4 dimensions", "[1, 2, 3, 4, 5]"],
    );
    has(&msg(g.input("empty", DType::F32, &[4, 0])), &["'empty'", "zero dimension", "[4, 0]"]);
    has(&msg(g.input("none", DType::F32, &[])), &["1 to 4 dimensions, got 0"]);
    has(&msg(g.param("p", DType::F32, &[0])), &["param (node #2 'p')", "zero dimension"]);
    let next = g.input("next", DType::F32, &[2]).unwrap();
    assert_eq!(g.node(next).name.as_deref(), Some("next"));
}

#[test]
fn fill_and_arange() {
    let mut g = Graph::new();
    let f = g.fill(DType::F32, &[4, 2], f32::NEG_INFINITY).unwrap();
    assert_eq!(g.node(f).op, Op::Fill { value: f32::NEG_INFINITY });
    assert_eq!(ne(&g, f), [4, 2, 1, 1]);
    has(&msg(g.fill(DType::I32, &[3], 0.5)), &["fill", "0.5 is not an integer", "i32"]);
    let a = g.arange(DType::I32, &[10], 0.0, 1.0).unwrap();
    assert_eq!(g.node(a).dtype, DType::I32);
    has(&msg(g.arange(DType::F16, &[10], 0.0, 1.0)), &["arange", "f32 or i32, got f16"]);
    has(&msg(g.arange(DType::I32, &[10], 0.5, 1.0)), &["must be integers for i32"]);
    has(&msg(g.arange(DType::F32, &[10], f32::NAN, 1.0)), &["must be finite"]);
}

#[test]
fn views_reshape_permute_transpose() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4, 6]).unwrap();
    // A row window: rows 2..5 of x.
    let v = g.view(x, &[4, 3], &[4, 16], 32).unwrap();
    let n = g.node(v);
    assert_eq!((n.layout.ne.0, n.layout.nb, n.layout.offset, n.storage), ([4, 3, 1, 1], [4, 16, 48, 48], 32, Some(x)));
    // A view of a view keeps the original storage and accumulates the offset.
    let vv = g.view(v, &[2], &[4], 8).unwrap();
    assert_eq!((g.node(vv).layout.offset, g.node(vv).storage), (40, Some(x)));
    has(&msg(g.view(x, &[4, 7], &[4, 16], 0)), &["view", "#0 'x' f32 [4, 6]", "needs 112 bytes, its storage has 96"]);
    has(&msg(g.view(x, &[4, 2], &[2, 16], 0)), &["nb[0] = 2 must be the element size 4"]);
    has(&msg(g.view(x, &[4, 2], &[4], 0)), &["1 strides given for 2 dimensions"]);

    let r = g.reshape(x, &[2, 12]).unwrap();
    assert_eq!((ne(&g, r), g.node(r).storage), ([2, 12, 1, 1], Some(x)));
    has(&msg(g.reshape(x, &[5, 5])), &["reshape", "has 24 elements, [5, 5] has 25"]);

    let t = g.transpose(x).unwrap();
    assert_eq!((ne(&g, t), g.node(t).layout.nb), ([6, 4, 1, 1], [16, 4, 96, 96]));
    assert!(!g.node(t).layout.is_contiguous(DType::F32));
    has(&msg(g.reshape(t, &[24])), &["reshape", "is not contiguous; insert cont()"]);

    let x3 = g.input("x3", DType::F32, &[2, 3, 5]).unwrap();
    let p = g.permute(x3, [0, 2, 1, 3]).unwrap();
    assert_eq!(ne(&g, p), [2, 5, 3, 1]);
    assert_eq!(g.node(p).layout.nb, [4, 24, 8, 120]);
    let p2 = g.permute(x3, [1, 2, 0, 3]).unwrap();
    assert_eq!(ne(&g, p2), [5, 2, 3, 1]);
    has(&msg(g.permute(x3, [0, 0, 1, 2])), &["permute", "not a permutation"]);
    has(&msg(g.permute(x3, [0, 1, 2, 4])), &["not a permutation"]);
}

#[test]
fn copies_and_elementwise() {
    let mut g = Graph::new();
    let x = g.input("x", DType::BF16, &[5, 3]).unwrap();
    let t = g.transpose(x).unwrap();
    let c = g.cont(t).unwrap();
    assert!(g.node(c).layout.is_contiguous(DType::BF16) && g.node(c).storage.is_none());
    let f = g.cast(c, DType::F32).unwrap();
    assert_eq!((g.node(f).dtype, ne(&g, f)), (DType::F32, [3, 5, 1, 1]));
    for u in UnaryOp::ALL {
        let y = g.unary(u, t).unwrap();
        assert_eq!((g.node(y).dtype, ne(&g, y), g.node(y).op), (DType::BF16, [3, 5, 1, 1], Op::Unary(u)));
    }
    let ids = g.input("ids", DType::I32, &[3]).unwrap();
    has(&msg(g.exp(ids)), &["exp", "source #", "'ids' i32 [3] must be f32, f16 or bf16"]);
    has(&msg(g.scale(ids, 2.0)), &["scale", "must be f32, f16 or bf16"]);
    has(&msg(g.scale_bias(x, f32::NAN, 0.0)), &["scale", "must not be NaN"]);
    has(&msg(g.clamp(x, 2.0, 1.0)), &["clamp", "bounds [2, 1] are not an interval"]);
    has(&msg(g.clamp(x, f32::NAN, 1.0)), &["not an interval"]);
    let s = g.scale_bias(x, 0.5, 1.0).unwrap();
    assert_eq!(g.node(s).op, Op::Scale { scale: 0.5, bias: 1.0 });
}

#[test]
fn binary_broadcasting() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[8, 6, 2]).unwrap();
    let row = g.input("row", DType::F32, &[8]).unwrap();
    let col = g.input("col", DType::F16, &[1, 6]).unwrap();
    let bad = g.input("bad", DType::F32, &[3, 6]).unwrap();
    for op in BinaryOp::ALL {
        let y = g.binary(op, a, row).unwrap();
        assert_eq!((ne(&g, y), g.node(y).dtype), ([8, 6, 2, 1], DType::F32));
    }
    g.add(a, col).unwrap();
    has(
        &msg(g.mul(a, bad)),
        &["mul", "b #3 'bad' f32 [3, 6] does not broadcast to a #0 'a' f32 [8, 6, 2]", "ne[0] = 3 does not divide 8"],
    );
    // b larger than a is not broadcast either way.
    has(&msg(g.add(row, a)), &["does not broadcast", "ne[1] = 6 does not divide 1"]);
    let ids = g.input("ids", DType::I32, &[8]).unwrap();
    has(&msg(g.add(a, ids)), &["add", "b #", "must be f32, f16 or bf16"]);
    // The pending name shows up in errors and lands on the node.
    has(&msg(g.named("sum", |g| g.add(a, bad))), &["add (node #", "'sum')"]);
    // A failed call does not leak its name to the next node.
    let anon = g.add(a, row).unwrap();
    assert_eq!(g.node(anon).name, None);
    let y = g.named("sum", |g| g.add(a, row)).unwrap();
    assert_eq!(g.node(y).name.as_deref(), Some("sum"));
    assert_eq!(g.find("sum"), Some(y));
}

#[test]
fn compare_and_where() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, &[10, 4]).unwrap();
    let thr = g.input("thr", DType::F32, &[1, 4]).unwrap();
    let ids = g.input("ids", DType::I32, &[10, 4]).unwrap();
    let one = g.input("one", DType::I32, &[1]).unwrap();
    for c in CompareOp::ALL {
        let m = g.compare(c, a, thr).unwrap();
        assert_eq!((g.node(m).dtype, ne(&g, m)), (DType::F32, [10, 4, 1, 1]));
    }
    g.equal(ids, one).unwrap();
    has(&msg(g.ge(a, ids)), &["ge", "cannot compare", "both float or both i32"]);
    let wide = g.input("wide", DType::F32, &[10, 5]).unwrap();
    has(&msg(g.gt(a, wide)), &["gt", "does not broadcast"]);
    let m = g.ge(a, thr).unwrap();
    let ninf = g.fill(DType::F32, &[1], f32::NEG_INFINITY).unwrap();
    let w = g.where_(m, a, ninf).unwrap();
    assert_eq!((g.node(w).dtype, ne(&g, w), g.node(w).srcs.as_slice()), (DType::F32, [10, 4, 1, 1], &[m, a, ninf][..]));
    has(&msg(g.where_(m, a, one)), &["where", "must have the same dtype"]);
    has(&msg(g.where_(ids, a, ninf)), &["where", "mask", "must be f32, f16 or bf16"]);
    has(&msg(g.where_(wide, a, ninf)), &["where", "mask", "does not broadcast"]);
}

#[test]
fn get_rows_set_rows_scatter_add() {
    let mut g = Graph::new();
    let emb = g.param("emb", DType::F16, &[16, 100]).unwrap();
    let tok = g.input("tok", DType::I32, &[7]).unwrap();
    let r = g.get_rows(emb, tok).unwrap();
    assert_eq!((ne(&g, r), g.node(r).dtype), ([16, 7, 1, 1], DType::F32));
    let ftok = g.input("ftok", DType::F32, &[7]).unwrap();
    has(&msg(g.get_rows(emb, ftok)), &["get_rows", "ids #", "must be i32"]);
    let ids2 = g.input("ids2", DType::I32, &[7, 2]).unwrap();
    has(&msg(g.get_rows(emb, ids2)), &["get_rows", "must be [m, 1, 1]"]);
    let t = g.transpose(emb).unwrap();
    has(&msg(g.get_rows(t, tok)), &["get_rows", "needs contiguous rows", "insert cont()"]);

    let cache = g.param("cache", DType::F16, &[16, 64]).unwrap();
    let vals = g.input("vals", DType::F32, &[16, 7]).unwrap();
    let s = g.set_rows(cache, vals, tok).unwrap();
    assert_eq!((ne(&g, s), g.node(s).storage, g.node(s).dtype), ([16, 64, 1, 1], Some(cache), DType::F16));
    let v = g.view(s, &[16, 8], &[2, 32], 0).unwrap();
    assert_eq!(g.node(v).storage, Some(cache));
    let short = g.input("short", DType::F32, &[15, 7]).unwrap();
    has(&msg(g.set_rows(cache, short, tok)), &["set_rows", "values must be [16, m, 1, 1]", "'short'"]);
    let ids3 = g.input("ids3", DType::I32, &[6]).unwrap();
    has(&msg(g.set_rows(cache, vals, ids3)), &["set_rows", "ids [m, 1, 1]"]);
    has(&msg(g.set_rows(cache, vals, ftok)), &["ids", "must be i32"]);
    let ivals = g.input("ivals", DType::I32, &[16, 7]).unwrap();
    has(&msg(g.set_rows(cache, ivals, tok)), &["cannot be stored into dst"]);

    let counts = g.fill(DType::F32, &[100, 3], 0.0).unwrap();
    let hist = g.input("hist", DType::I32, &[5, 3]).unwrap();
    let one = g.fill(DType::F32, &[1], 1.0).unwrap();
    let c = g.scatter_add(counts, hist, one).unwrap();
    assert_eq!((ne(&g, c), g.node(c).dtype), ([100, 3, 1, 1], DType::F32));
    let w = g.input("w", DType::F32, &[5, 3]).unwrap();
    g.scatter_add(counts, hist, w).unwrap();
    let hist_bad = g.input("hist_bad", DType::I32, &[5, 2]).unwrap();
    has(&msg(g.scatter_add(counts, hist_bad, one)), &["scatter_add", "must have the rows of base"]);
    let w_bad = g.input("w_bad", DType::F32, &[4, 3]).unwrap();
    has(&msg(g.scatter_add(counts, hist, w_bad)), &["values", "must be shaped like ids", "or be [1]"]);
    has(&msg(g.scatter_add(counts, w, one)), &["ids", "must be i32"]);
    let counts16 = g.fill(DType::F16, &[100, 3], 0.0).unwrap();
    has(&msg(g.scatter_add(counts16, hist, one)), &["must be f32"]);
}

#[test]
fn mul_mat_rules() {
    let mut g = Graph::new();
    let w = g.param("w", DType::F16, &[64, 32]).unwrap();
    let x = g.input("x", DType::F32, &[64, 5]).unwrap();
    let y = g.mul_mat(w, x).unwrap();
    assert_eq!((ne(&g, y), g.node(y).dtype), ([32, 5, 1, 1], DType::F32));
    let xb = g.input("xb", DType::F32, &[64, 5, 4]).unwrap();
    let wb = g.param("wb", DType::F32, &[64, 32, 2]).unwrap();
    let y2 = g.mul_mat(wb, xb).unwrap();
    assert_eq!(ne(&g, y2), [32, 5, 4, 1]);
    let xs = g.input("xs", DType::F32, &[63, 5]).unwrap();
    has(&msg(g.mul_mat(w, xs)), &["mul_mat", "inner dimensions differ", "ne[0] = 64", "ne[0] = 63"]);
    let xh = g.input("xh", DType::F16, &[64, 5]).unwrap();
    has(&msg(g.mul_mat(w, xh)), &["b #", "must be f32"]);
    let x3 = g.input("x3", DType::F32, &[64, 5, 3]).unwrap();
    has(&msg(g.mul_mat(wb, x3)), &["does not broadcast over the batch dimensions"]);
    let xt = g.transpose(x).unwrap();
    has(&msg(g.mul_mat(w, xt)), &["needs contiguous rows"]);
}

#[test]
fn norm_rope_softmax() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[32, 4, 5]).unwrap();
    let n = g.rms_norm(x, 1e-5).unwrap();
    assert_eq!(ne(&g, n), [32, 4, 5, 1]);
    has(&msg(g.rms_norm(x, -1.0)), &["rms_norm", "eps -1 must be finite and >= 0"]);
    let pos = g.input("pos", DType::I32, &[5]).unwrap();
    let r = g.rope(x, pos, 32, RopeMode::Neox, 10000.0, 1.0).unwrap();
    assert_eq!(g.node(r).op, Op::Rope(graph::RopeParams::new(32, RopeMode::Neox, 10000.0, 1.0)));
    has(&msg(g.rope(x, pos, 33, RopeMode::Normal, 10000.0, 1.0)), &["rope", "n_dims 33 must be even"]);
    has(&msg(g.rope(x, pos, 64, RopeMode::Normal, 10000.0, 1.0)), &["at most head_dim 32"]);
    has(&msg(g.rope(x, pos, 32, RopeMode::Normal, 0.0, 1.0)), &["freq_base 0"]);
    let pos4 = g.input("pos4", DType::I32, &[4]).unwrap();
    has(&msg(g.rope(x, pos4, 32, RopeMode::Normal, 10000.0, 1.0)), &["pos #", "must be i32 [n_tokens]"]);
    let xh = g.input("xh", DType::F16, &[32, 4, 5]).unwrap();
    has(&msg(g.rope(xh, pos, 32, RopeMode::Normal, 10000.0, 1.0)), &["x #", "must be f32"]);
    // ggml_rope_ext's extras: frequency factors (f32, at least n_dims/2) and YaRN's parameters
    let p = graph::RopeParams {
        ext_factor: 1.0,
        n_ctx_orig: 4096,
        ..graph::RopeParams::new(32, RopeMode::Normal, 1e4, 0.25)
    };
    let ff = g.input("ff", DType::F32, &[16]).unwrap();
    let r = g.rope_ext(x, pos, Some(ff), p).unwrap();
    assert_eq!((g.node(r).op, g.node(r).srcs.len()), (Op::Rope(p), 3));
    let short = g.input("short", DType::F32, &[8]).unwrap();
    has(&msg(g.rope_ext(x, pos, Some(short), p)), &["freq_factors #", "must be f32 [>= n_dims/2 = 16]"]);
    let nan = graph::RopeParams { attn_factor: f32::NAN, ..p };
    has(&msg(g.rope_ext(x, pos, None, nan)), &["attn_factor NaN", "must be finite"]);

    let s = g.input("s", DType::F32, &[16, 5, 4]).unwrap();
    let mask = g.input("mask", DType::F32, &[16, 8]).unwrap();
    let sm = g.soft_max(s, Some(mask), 0.125).unwrap();
    assert_eq!((ne(&g, sm), g.node(sm).srcs.len()), ([16, 5, 4, 1], 2));
    let plain = g.soft_max(s, None, 1.0).unwrap();
    assert_eq!(g.node(plain).srcs.len(), 1);
    let short = g.input("short", DType::F32, &[16, 4]).unwrap();
    has(&msg(g.soft_max(s, Some(short), 1.0)), &["soft_max", "mask #", "must be [16, >= 5, dividing 4, dividing 1]"]);
    let mbf = g.input("mbf", DType::BF16, &[16, 8]).unwrap();
    has(&msg(g.soft_max(s, Some(mbf), 1.0)), &["must be f32 or f16"]);
    has(&msg(g.soft_max(s, None, f32::INFINITY)), &["scale inf must be finite"]);
}

#[test]
fn row_reductions_and_orderings() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F16, &[151936, 3]).unwrap();
    for (id, dtype) in
        [(g.sum_rows(x).unwrap(), DType::F32), (g.max_rows(x).unwrap(), DType::F32), (g.argmax(x).unwrap(), DType::I32)]
    {
        assert_eq!((ne(&g, id), g.node(id).dtype), ([1, 3, 1, 1], dtype));
    }
    let s = g.argsort(x, SortOrder::Desc).unwrap();
    assert_eq!((ne(&g, s), g.node(s).dtype), ([151936, 3, 1, 1], DType::I32));
    let k = g.top_k(x, 40).unwrap();
    assert_eq!((ne(&g, k), g.node(k).dtype), ([40, 3, 1, 1], DType::I32));
    let c = g.cumsum(x).unwrap();
    assert_eq!((ne(&g, c), g.node(c).dtype), ([151936, 3, 1, 1], DType::F32));
    has(&msg(g.top_k(x, 0)), &["top_k", "k = 0 must be in 1..=151936"]);
    has(&msg(g.top_k(x, 151937)), &["k = 151937"]);
    let ids = g.input("ids", DType::I32, &[10]).unwrap();
    has(&msg(g.argmax(ids)), &["argmax", "must be f32, f16 or bf16"]);
    let t = g.transpose(x).unwrap();
    has(&msg(g.cumsum(t)), &["cumsum", "needs contiguous rows"]);
}

#[test]
fn top_p_mask_rules() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[151936, 3]).unwrap();
    let p = g.input("p", DType::F32, &[3, 3]).unwrap();
    let m = g.top_p_mask(x, p).unwrap();
    assert_eq!((ne(&g, m), g.node(m).dtype, g.node(m).op), ([151936, 3, 1, 1], DType::F32, Op::TopPMask));
    let h = g.input("h", DType::F16, &[151936, 3]).unwrap();
    has(&msg(g.top_p_mask(h, p)), &["top_p_mask", "must be f32"]);
    let p2 = g.input("p2", DType::F32, &[2, 3]).unwrap();
    has(&msg(g.top_p_mask(x, p2)), &["top_p_mask", "params (t, p, min_keep)", "must be f32 [3, rows..]"]);
    let p4 = g.input("p4", DType::F32, &[3, 4]).unwrap();
    has(&msg(g.top_p_mask(x, p4)), &["with the rows of"]);
    let t = g.transpose(x).unwrap();
    has(&msg(g.top_p_mask(t, p)), &["top_p_mask", "needs contiguous rows"]);
}

#[test]
fn random_uniform_rules() {
    let mut g = Graph::new();
    let keys = g.input("keys", DType::I32, &[4, 6]).unwrap();
    let u = g.random_uniform(keys, 1000, 3).unwrap();
    assert_eq!(
        (ne(&g, u), g.node(u).dtype, g.node(u).op),
        ([1000, 6, 1, 1], DType::F32, Op::RandomUniform { stream: 3 })
    );
    let k3 = g.input("k3", DType::I32, &[3, 6]).unwrap();
    has(&msg(g.random_uniform(k3, 10, 0)), &["random_uniform", "must be i32 [4, rows..]"]);
    has(&msg(g.random_uniform(keys, 0, 0)), &["n = 0 must be in 1..2^32"]);
}

#[test]
fn unknown_nodes_are_errors_not_panics() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4]).unwrap();
    let ghost = NodeId(99);
    assert_eq!(msg(g.add(x, ghost)), "add: unknown node #99 (the graph has 1 nodes)");
    assert_eq!(msg(g.cont(ghost)), "cont: unknown node #99 (the graph has 1 nodes)");
    assert!(g.get(ghost).is_none());
}

/// A shape whose elements cannot be counted or whose bytes cannot be addressed is an error, for a
/// leaf (the fuzzer's first find: a fixture's `param w2 f32 [512, 18888888888888888]` overflowed
/// the stride computation), a reshape, and a result derived from two huge but addressable operands.
#[test]
fn shapes_too_large_to_address_are_errors_not_panics() {
    let mut g = Graph::new();
    let e = msg(g.param("w", DType::F32, &[512, 18_888_888_888_888_888]));
    assert!(e.contains("more bytes than memory can address"), "{e}");
    let e = msg(g.input("x", DType::Q8_0, &[usize::MAX / 32 * 32, 1]));
    assert!(e.contains("more bytes than memory can address"), "{e}");
    // more elements than a usize counts (the fuzzer's second find: a fixture's reshape to such a
    // shape overflowed the element count)
    let e = msg(g.input("y", DType::F32, &[usize::MAX / 2, 4]));
    assert!(e.contains("more elements than can be counted"), "{e}");
    let small = g.input("small", DType::F32, &[16]).unwrap();
    let e = msg(g.reshape(small, &[1 << 40, 1 << 40]));
    assert!(e.starts_with("reshape") && e.contains("more elements than can be counted"), "{e}");
    let a = g.input("a", DType::F32, &[1, 1 << 40]).unwrap();
    let b = g.input("b", DType::F32, &[1, 1 << 40]).unwrap();
    let e = msg(g.mul_mat(a, b));
    assert!(e.starts_with("mul_mat") && e.contains("more bytes than memory can address"), "{e}");
    let f = graph::fixture::parse("param w2 f32 [512, 18888888888888888]\n").unwrap_err().to_string();
    assert!(f.starts_with("line 1:"), "{f}");
}

#[test]
fn topology_hash_ignores_names_and_data_but_not_structure() {
    fn build(name: &str, k: usize, dtype: DType) -> Graph {
        let mut g = Graph::new();
        let x = g.input(name, dtype, &[100, 2]).unwrap();
        let t = g.top_k(x, k).unwrap();
        g.set_output(t);
        g
    }
    let a = build("logits", 10, DType::F32);
    assert_eq!(a.topology_hash(), build("other_name", 10, DType::F32).topology_hash());
    assert_ne!(a.topology_hash(), build("logits", 11, DType::F32).topology_hash());
    assert_ne!(a.topology_hash(), build("logits", 10, DType::F16).topology_hash());
    let mut b = build("logits", 10, DType::F32);
    let x = b.find("logits").unwrap();
    b.set_output(x);
    assert_ne!(a.topology_hash(), b.topology_hash(), "flags are part of the topology");
    // Deterministic (FNV, no random state); the fixture snapshots pin concrete values.
    assert_eq!(a.topology_hash(), build("logits", 10, DType::F32).topology_hash());
}

#[test]
fn consumers_and_storage() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4, 4]).unwrap();
    let y = g.mul(x, x).unwrap();
    let v = g.reshape(y, &[16]).unwrap();
    let z = g.exp(v).unwrap();
    let users = g.consumers();
    assert_eq!(users[x.index()], vec![y], "a node using a source twice is listed once");
    assert_eq!(users[y.index()], vec![v]);
    assert_eq!(users[v.index()], vec![z]);
    assert_eq!(g.storage_of(v), y);
    assert_eq!(g.storage_of(z), z);
    assert_eq!(g.topo_order().collect::<Vec<_>>(), vec![x, y, v, z]);
}

#[test]
fn state_leaves_are_flagged_named_hashed_and_parsed() {
    let mut g = Graph::new();
    let kv = g.state("kv", DType::F32, &[8, 4]).unwrap();
    let n = g.node(kv);
    assert!(n.flags.state && !n.flags.input && !n.flags.param);
    assert_eq!(n.flags.describe(), "state");
    has(&msg(g.state("bad", DType::F32, &[0])), &["state (node #1 'bad')", "zero dimension"]);
    // a state leaf and an input leaf of the same shape are different topologies
    let mut h = Graph::new();
    h.input("kv", DType::F32, &[8, 4]).unwrap();
    let mut g1 = Graph::new();
    g1.state("kv", DType::F32, &[8, 4]).unwrap();
    assert_ne!(g1.topology_hash(), h.topology_hash());
    // the fixture format reads `state NAME DTYPE SHAPE`
    let f = graph::fixture::parse("state kv f32 [8, 4]\ny = scale(kv, scale=2)\noutput y\n").unwrap();
    assert_eq!(f.topology_hash(), {
        let mut e = Graph::new();
        let kv = e.state("kv", DType::F32, &[8, 4]).unwrap();
        let y = e.scale(kv, 2.0).unwrap();
        e.set_output(y);
        e.topology_hash()
    });
    assert!(graph::dump::to_dot(&f).contains("diagonals"));
}

#[test]
fn categorical_takes_params_or_ids() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[6, 3]).unwrap();
    let k = g.input("k", DType::I32, &[4, 3]).unwrap();
    let p = g.input("p", DType::F32, &[2, 3]).unwrap();
    let ids = g.input("ids", DType::I32, &[6, 3]).unwrap();
    let short = g.input("short", DType::I32, &[5, 3]).unwrap();
    let f = g.input("f", DType::F32, &[6, 3]).unwrap();
    let plain = g.categorical(x, k, Some(p), None, 1).unwrap();
    assert_eq!(g.node(plain).op, Op::Categorical { stream: 1, ids: false });
    let by_id = g.categorical(x, k, None, Some(ids), 2).unwrap();
    assert_eq!(g.node(by_id).op, Op::Categorical { stream: 2, ids: true });
    assert_eq!(g.node(by_id).srcs[..], [x, k, ids]);
    assert_eq!(ne(&g, by_id), [1, 3, 1, 1]);
    has(&msg(g.categorical(x, k, Some(p), Some(ids), 0)), &["categorical", "'p'", "'ids'", "not both"]);
    has(&msg(g.categorical(x, k, None, Some(short), 0)), &["categorical", "ids", "'short'", "i32 [6, rows..]"]);
    has(&msg(g.categorical(x, k, None, Some(f), 0)), &["categorical", "ids", "'f'", "i32"]);
}

#[test]
fn spec_verify_sampled_takes_q_as_pairs_per_row() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[6, 3]).unwrap();
    let k = g.input("k", DType::I32, &[5, 3]).unwrap();
    let k4 = g.input("k4", DType::I32, &[4, 3]).unwrap();
    let p = g.input("p", DType::F32, &[2, 3]).unwrap();
    let ids = g.input("ids", DType::I32, &[6, 3]).unwrap();
    let qi = g.input("qi", DType::I32, &[4, 3]).unwrap();
    let qp = g.input("qp", DType::F32, &[4, 3]).unwrap();
    let qp5 = g.input("qp5", DType::F32, &[5, 3]).unwrap();
    let qi_rows = g.input("qi_rows", DType::I32, &[4, 2]).unwrap();
    let qp_i = g.input("qp_i", DType::I32, &[4, 3]).unwrap();
    let v = g.spec_verify_sampled(x, k, qi, qp, graph::SpecAux::Params(p), 2).unwrap();
    assert_eq!(g.node(v).op, Op::SpecVerifySampled { stream: 2, ids: false });
    assert_eq!(g.node(v).srcs[..], [x, k, qi, qp, p]);
    assert_eq!(ne(&g, v), [1, 3, 1, 1]);
    let l = g.spec_verify_sampled(x, k, qi, qp, graph::SpecAux::Ids(ids), 0).unwrap();
    assert_eq!(g.node(l).op, Op::SpecVerifySampled { stream: 0, ids: true });
    assert_eq!(g.node(l).srcs[..], [x, k, qi, qp, ids]);
    let none = graph::SpecAux::None;
    has(&msg(g.spec_verify_sampled(x, k4, qi, qp, none, 0)), &["spec_verify_sampled", "'k4'"]);
    has(
        &msg(g.spec_verify_sampled(x, k, qi, qp5, none, 0)),
        &["spec_verify_sampled", "q_probs", "'qp5'", "f32 [4, rows..]"],
    );
    has(&msg(g.spec_verify_sampled(x, k, qi_rows, qp, none, 0)), &["spec_verify_sampled", "q_ids", "'qi_rows'"]);
    has(&msg(g.spec_verify_sampled(x, k, qi, qp_i, none, 0)), &["spec_verify_sampled", "q_probs", "'qp_i'", "f32"]);
    has(&msg(g.spec_verify_sampled(x, k, qp, qp, none, 0)), &["spec_verify_sampled", "q_ids", "'qp'", "i32"]);
}
