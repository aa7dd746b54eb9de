//! Builder checks of the fused sampling ops: shapes, dtypes, the post stage's `q`, ks_max, the
//! index overflow, and their attributes in fixtures and dumps.

use graph::fused::{FusedOutput, IndexDType, PostSample, TopKTopP};
use graph::{DType, Graph, GraphError, NodeId};

fn inputs(g: &mut Graph, v: usize, b: usize) -> [NodeId; 3] {
    [
        g.input("logits", DType::BF16, &[v, b]).unwrap(),
        g.input("top_k", DType::I32, &[1, b]).unwrap(),
        g.input("params", DType::F32, &[2, b]).unwrap(),
    ]
}

fn err(r: Result<NodeId, GraphError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn top_k_top_p_sample_shapes_and_errors() {
    let mut g = Graph::new();
    let [x, k, p] = inputs(&mut g, 10, 3);
    let idx = g.top_k_top_p_sample(x, k, p, None, TopKTopP::new(PostSample::None)).unwrap();
    assert_eq!((g.node(idx).dtype, g.node(idx).ne()), (DType::I32, [1, 3, 1, 1]));
    let a = TopKTopP { output: FusedOutput::Logits, ..TopKTopP::new(PostSample::None) };
    let kept = g.top_k_top_p_sample(x, k, p, None, a).unwrap();
    assert_eq!((g.node(kept).dtype, g.node(kept).ne()), (DType::F32, [10, 3, 1, 1]));
    let q = g.input("q", DType::F32, &[10, 3]).unwrap();
    let keys = g.input("keys", DType::I32, &[4, 1]).unwrap();
    assert!(g.top_k_top_p_sample(x, k, p, Some(q), TopKTopP::new(PostSample::QSample)).is_ok());
    assert!(g.top_k_top_p_sample(x, k, p, Some(keys), TopKTopP::new(PostSample::Multinomial)).is_ok());
    let e = err(g.top_k_top_p_sample(x, k, p, Some(q), TopKTopP::new(PostSample::Multinomial)));
    assert!(e.contains("top_k_top_p_sample") && e.contains("[4, R]"), "{e}");
    let e = err(g.top_k_top_p_sample(x, k, p, Some(keys), TopKTopP::new(PostSample::QSample)));
    assert!(e.contains("q (qSample noise)"), "{e}");
    let e = err(g.top_k_top_p_sample(x, k, p, None, TopKTopP::new(PostSample::QSample)));
    assert!(e.contains("needs q"), "{e}");
    let e = err(g.top_k_top_p_sample(x, k, p, Some(q), TopKTopP::new(PostSample::None)));
    assert!(e.contains("takes no q"), "{e}");
    let e = err(g.top_k_top_p_sample(x, k, p, None, TopKTopP { ks_max: 0, ..TopKTopP::new(PostSample::None) }));
    assert!(e.contains("ks_max"), "{e}");
    let e = err(g.top_k_top_p_sample(x, p, p, None, TopKTopP::new(PostSample::None)));
    assert!(e.contains("top_k"), "{e}");
    let e = err(g.top_k_top_p_sample(x, k, k, None, TopKTopP::new(PostSample::None)));
    assert!(e.contains("params"), "{e}");
}

#[test]
fn random_sample_shapes_and_overflow() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F16, &[300, 2]).unwrap();
    let p = g.input("params", DType::F32, &[3, 2]).unwrap();
    let k = g.input("topk", DType::I32, &[1, 2]).unwrap();
    let y = g.random_sample(x, p, k, IndexDType::U16, false).unwrap();
    assert_eq!((g.node(y).dtype, g.node(y).ne()), (DType::I32, [1, 2, 1, 1]));
    let e = err(g.random_sample(x, p, k, IndexDType::U8, false));
    assert!(e.contains("index overflow") && e.contains("u8"), "{e}");
    let bits = g.input("bits", DType::I32, &[600, 2]).unwrap();
    assert!(g.random_sample(bits, p, k, IndexDType::I16, true).is_ok());
    let odd = g.input("odd", DType::I32, &[601, 2]).unwrap();
    assert!(g.random_sample(odd, p, k, IndexDType::I16, true).is_err());
    assert!(g.random_sample(bits, p, k, IndexDType::I16, false).is_err(), "i32 values without f64_rows");
}

#[test]
fn fixtures_parse_the_attributes_and_dumps_print_them() {
    let text = "input x bf16 [10, 3]\ninput k i32 [1, 3]\ninput p f32 [2, 3]\ninput q i32 [4, 2]\n\
                y = top_k_top_p_sample(x, k, p, q, eps=0.000001, ks_max=77, top_k_guess=-3, \
                input_is_logits=false, post=multiNomial, output=logits)\n\
                input r f32 [3, 3]\ninput t i32 [1, 3]\nz = random_sample(x, r, t, index=u8)\noutput y, z\n";
    let g = graph::fixture::parse(text).unwrap();
    let want = TopKTopP {
        eps: 1e-6,
        ks_max: 77,
        top_k_guess: -3,
        input_is_logits: false,
        post: PostSample::Multinomial,
        output: FusedOutput::Logits,
    };
    let dump = graph::dump::to_text(&g);
    assert!(g.nodes().any(|(_, n)| n.op == graph::Op::TopKTopPSample(want)), "{dump}");
    let rs = graph::Op::RandomSample { index: IndexDType::U8, f64_rows: false };
    assert!(g.nodes().any(|(_, n)| n.op == rs), "{dump}");
    assert!(dump.contains("top_k_top_p_sample{eps=0.000001, ks_max=77, top_k_guess=-3"), "{dump}");
    assert!(dump.contains("random_sample{index=u8, f64_rows=false}"), "{dump}");
}
