//! The quantized dtypes in the builder: leaves with whole blocks, ggml's strides, `mul_mat` (as the
//! weight) and `get_rows` (as the table) accepted, every other use an error naming the node.

use graph::{DType, Graph};

mod common;
use common::{has, msg};

#[test]
fn leaves_have_whole_blocks_and_ggml_strides() {
    let mut g = Graph::new();
    for (d, row) in [(DType::Q8_0, 68), (DType::Q4_0, 36), (DType::Q4_1, 40), (DType::Q5_0, 44), (DType::Q5_1, 48)] {
        let w = g.param(&format!("w_{d}"), d, &[64, 3, 2]).unwrap();
        let n = g.node(w);
        assert_eq!(n.layout.nb, [d.size(), row, 3 * row, 6 * row], "{d}");
        assert_eq!(n.nbytes(), 6 * row);
        assert!(n.layout.is_contiguous(d));
        assert_eq!(n.layout.extent(d), 6 * row);
    }
    has(&msg(g.param("odd", DType::Q4_1, &[48, 2])), &["param (node #5 'odd')", "q4_1", "ne[0] = 48", "32"]);
    has(&msg(g.input("odd2", DType::Q8_0, &[1])), &["input", "ne[0] = 1"]);
    // the K-quants: blocks of 256
    for (d, row) in [(DType::Q4_K, 288), (DType::Q5_K, 352), (DType::Q6_K, 420)] {
        let w = g.param(&format!("w_{d}"), d, &[512, 3]).unwrap();
        assert_eq!(g.node(w).layout.nb, [d.size(), row, 3 * row, 3 * row], "{d}");
        has(&msg(g.param(&format!("odd_{d}"), d, &[640, 2])), &[d.name(), "ne[0] = 640", "block size 256"]);
    }
}

#[test]
fn mul_mat_and_get_rows_read_quantized_tensors() {
    for d in DType::QUANTIZED {
        let mut g = Graph::new();
        let k = 2 * d.block_size();
        let w = g.param("w", d, &[k, 5]).unwrap();
        let x = g.input("x", DType::F32, &[k, 2]).unwrap();
        let y = g.mul_mat(w, x).unwrap();
        assert_eq!((g.node(y).dtype, g.node(y).ne()), (DType::F32, [5, 2, 1, 1]));
        let ids = g.input("ids", DType::I32, &[3]).unwrap();
        let r = g.get_rows(w, ids).unwrap();
        assert_eq!((g.node(r).dtype, g.node(r).ne()), (DType::F32, [k, 3, 1, 1]));
        // b must still be f32, and quantized
        let xq = g.input("xq", d, &[k, 2]).unwrap();
        has(&msg(g.mul_mat(w, xq)), &["mul_mat", "'xq'", "quantized"]);
        let x3 = g.input("x3", DType::F32, &[32, 2]).unwrap();
        has(&msg(g.mul_mat(w, x3)), &["inner dimensions differ", &format!("ne[0] = {k}"), "ne[0] = 32"]);
    }
}

#[test]
fn every_other_use_is_an_error_naming_the_node() {
    let mut g = Graph::new();
    let w = g.param("w", DType::Q4_0, &[64, 4]).unwrap();
    let f = g.input("f", DType::F32, &[64, 4]).unwrap();
    let ids = g.input("ids", DType::I32, &[2]).unwrap();
    let want = ["#0 'w' q4_0 [64, 4] is quantized", "only mul_mat (as a) and get_rows (as the table)"];
    has(&msg(g.cont(w)), &["cont", want[0], want[1]]);
    has(&msg(g.cast(w, DType::F32)), &["cast", want[0]]);
    has(&msg(g.exp(w)), &["exp", want[0]]);
    has(&msg(g.add(f, w)), &["add", want[0]]);
    has(&msg(g.sum_rows(w)), &["sum_rows", want[0]]);
    has(&msg(g.transpose(w)), &["transpose", want[0]]);
    has(&msg(g.reshape(w, &[128, 2])), &["reshape", want[0]]);
    has(&msg(g.view(w, &[32, 4], &[18, 36], 0)), &["view", want[0]]);
    has(&msg(g.mul_mat(f, w)), &["mul_mat", want[0]]);
    has(&msg(g.get_rows(f, w)), &["get_rows", want[0]]);
    has(&msg(g.soft_max(w, None, 1.0)), &["soft_max", want[0]]);
    let v = g.input("v", DType::F32, &[64, 2]).unwrap();
    has(&msg(g.set_rows(w, v, ids)), &["set_rows", want[0]]);
    has(&msg(g.cast(f, DType::Q8_0)), &["cast", "cannot cast", "to the quantized dtype q8_0"]);
    has(&msg(g.fill(DType::Q4_1, &[32], 1.0)), &["fill", "q4_1 is quantized"]);
    has(&msg(g.arange(DType::Q8_0, &[32], 0.0, 1.0)), &["arange", "f32 or i32"]);
}

#[test]
fn a_quantized_fixture_parses_and_dumps() {
    let g = graph::fixture::parse(
        "param emb q8_0 [64, 100]\ninput tok i32 [3]\nparam w q4_1 [64, 32]\n\
         x = get_rows(emb, tok)\ny = mul_mat(w, x)\noutput y\n",
    )
    .unwrap();
    let text = graph::dump::to_text(&g);
    assert!(text.contains("q8_0 [64, 100]") && text.contains("q4_1 [64, 32]"), "{text}");
    let g = graph::fixture::parse("param w q6_K [256, 2]\nparam v q5_0 [64, 2]\n").unwrap();
    let text = graph::dump::to_text(&g);
    assert!(text.contains("q6_K [256, 2]") && text.contains("q5_0 [64, 2]"), "{text}");
    let e = graph::fixture::parse("param w q3_K [256, 2]\n").unwrap_err().to_string();
    has(&e, &["line 1", "unknown dtype `q3_K`", "q6_K"]);
}
