//! Params bound to shared host memory (`Scheduler::set_input_shared`, a mapped model file's
//! weights) on the CPU backend: imported and read in place where the kernels' alignment allows
//! (any address for a quantized dtype, the element size for a float one), copied otherwise, with
//! the same results as `set_input` either way; an import is never written.

use cpu::CpuBackend;
use graph::{DType, Graph, NodeId};
use sched::{BufferRole, SchedError, Scheduler, SharedBytes};

const K: usize = 64;
const N: usize = 16;
const T: usize = 3;

/// Deterministic pseudo-random values in [-1, 1) (xorshift).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// `n` q8_0 rows of `K` values: per block of 32 an f16 scale and 32 signed bytes.
fn q8_0(n: usize) -> Vec<u8> {
    let v = values(7, n * K);
    let mut out = Vec::new();
    for block in v.chunks(32) {
        out.extend_from_slice(&graph::f16::from_f32(1.0 / 64.0).to_le_bytes());
        out.extend(block.iter().map(|&x| (x * 100.0) as i8 as u8));
    }
    out
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `y = wq · (x * norm) + bias`: a q8_0 weight, an f32 norm and an f16 bias, all params.
struct Model {
    g: Graph,
    x: NodeId,
    params: [NodeId; 3],
    y: NodeId,
}

fn model() -> Model {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[K, T]).unwrap();
    let wq = g.param("wq", DType::Q8_0, &[K, N]).unwrap();
    let norm = g.param("norm", DType::F32, &[K]).unwrap();
    let bias = g.param("bias", DType::F16, &[N]).unwrap();
    let xn = g.mul(x, norm).unwrap();
    let m = g.mul_mat(wq, xn).unwrap();
    let y = g.add(m, bias).unwrap();
    g.set_output(y);
    Model { g, x, params: [wq, norm, bias], y }
}

/// The params' data, in `params` order.
fn data() -> [Vec<u8>; 3] {
    let bias: Vec<u8> = values(3, N).iter().flat_map(|&v| graph::f16::from_f32(v).to_le_bytes()).collect();
    [q8_0(N), f32_bytes(&values(5, K)), bias]
}

/// One step with the params set by `set`; returns the output and the scheduler.
fn run(set: impl Fn(&mut Scheduler, NodeId, &[u8])) -> (Vec<f32>, Scheduler, Model) {
    let m = model();
    let mut s = Scheduler::new(vec![Box::new(CpuBackend::with_threads(2))]).unwrap();
    s.plan(&m.g).unwrap();
    for (&id, bytes) in m.params.iter().zip(data()) {
        set(&mut s, id, &bytes);
    }
    s.set_input_f32(m.x, &values(11, K * T)).unwrap();
    s.compute().unwrap();
    (s.read_f32(m.y).unwrap(), s, m)
}

fn allocated(s: &Scheduler) -> usize {
    s.backends()[0].allocated_bytes().expect("the CPU backend counts its buffers")
}

#[test]
fn aligned_params_are_read_in_place_and_compute_what_copies_do() {
    let (want, copied, _) = run(|s, id, b| s.set_input(id, b).unwrap());
    let shared: Vec<SharedBytes> = data().into_iter().map(SharedBytes::from).collect();
    let mut s = Scheduler::new(vec![Box::new(CpuBackend::with_threads(2))]).unwrap();
    let m = model();
    s.plan(&m.g).unwrap();
    let before = allocated(&s);
    for (&id, bytes) in m.params.iter().zip(&shared) {
        s.set_input_shared(id, bytes).unwrap();
        // the backend's storage of the param is the caller's memory itself
        let at = s.param_bytes(id).unwrap().expect("host memory");
        assert_eq!((at.as_ptr() as usize, at.len()), (bytes.addr(), bytes.len()), "param {id} read in place");
    }
    assert_eq!(allocated(&s), before, "nothing allocated for imported params");
    s.set_input_f32(m.x, &values(11, K * T)).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(m.y).unwrap(), want, "same results as copied params");

    let total: usize = shared.iter().map(SharedBytes::len).sum();
    let st = s.stats();
    assert_eq!((st.imported, st.bytes_imported as usize), (3, total));
    assert_eq!(s.imported(), (total, 3));
    assert_eq!(s.pool_bytes(BufferRole::Params), 0);
    // the copies allocated a 64-byte-aligned buffer per param
    assert_eq!(copied.pool_bytes(BufferRole::Params), 1088 + 256 + 64);
    assert_eq!(allocated(&copied), allocated(&s) + 1088 + 256 + 64);
    assert_eq!(copied.stats().imported, 0);

    // the shared bytes outlive the caller's handles: the buffers hold them
    drop(shared);
    s.set_input_f32(m.x, &values(11, K * T)).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(m.y).unwrap(), want);
}

#[test]
fn a_misaligned_float_param_is_copied_and_computes_the_same() {
    let (want, ..) = run(|s, id, b| s.set_input(id, b).unwrap());
    // every param one byte past an 8-aligned start: the f32 norm and f16 bias cannot be read there
    // (the dispatcher requires the element size), the q8_0 weight can (blocks are read unaligned)
    let shared: Vec<SharedBytes> = data()
        .into_iter()
        .map(|d| {
            let mut v = vec![0u8];
            v.extend_from_slice(&d);
            SharedBytes::from(v).slice(1, d.len())
        })
        .collect();
    assert!(shared.iter().all(|b| b.addr() % 2 == 1));
    let m = model();
    let mut s = Scheduler::new(vec![Box::new(CpuBackend::with_threads(2))]).unwrap();
    s.plan(&m.g).unwrap();
    for (&id, bytes) in m.params.iter().zip(&shared) {
        s.set_input_shared(id, bytes).unwrap();
    }
    let [wq, norm, bias] = m.params;
    let addr = |s: &mut Scheduler, id| s.param_bytes(id).unwrap().expect("host memory").as_ptr() as usize;
    assert_eq!(addr(&mut s, wq), shared[0].addr(), "quantized: read in place at any address");
    assert_ne!(addr(&mut s, norm), shared[1].addr(), "f32 at an odd address: copied");
    assert_ne!(addr(&mut s, bias), shared[2].addr(), "f16 at an odd address: copied");
    assert_eq!(s.param_bytes(norm).unwrap().unwrap(), shared[1].bytes());
    let st = s.stats();
    assert_eq!((st.imported, st.bytes_imported as usize), (1, shared[0].len()));
    assert_eq!(st.bytes_from_host as usize, shared[1].len() + shared[2].len());
    assert_eq!(s.pool_bytes(BufferRole::Params), 256 + 64);
    s.set_input_f32(m.x, &values(11, K * T)).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(m.y).unwrap(), want);
}

#[test]
fn an_imported_param_is_never_written() {
    // set_rows into a param: the graph writes into the weight's storage
    let mut g = Graph::new();
    let w = g.param("w", DType::F32, &[4, 2]).unwrap();
    let vals = g.input("vals", DType::F32, &[4, 1]).unwrap();
    let ids = g.input("ids", DType::I32, &[1]).unwrap();
    let w2 = g.set_rows(w, vals, ids).unwrap();
    let y = g.scale(w2, 1.0).unwrap();
    g.set_output(y);
    let original = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let shared = SharedBytes::from(original.clone());
    let mut s = Scheduler::new(vec![Box::new(CpuBackend::with_threads(1))]).unwrap();
    s.plan(&g).unwrap();
    s.set_input_shared(w, &shared).unwrap();
    assert_eq!(s.stats().imported, 1);
    s.set_input_f32(vals, &[0.0; 4]).unwrap();
    s.set_input_i32(ids, &[1]).unwrap();
    let e = s.compute().unwrap_err();
    assert!(e.to_string().contains("imported, read-only buffer"), "{e}");
    assert_eq!(shared.bytes(), &original[..], "the shared memory was not written");

    // writing the param from the host gives it a buffer of its own, holding the imported bytes
    s.set_input_rows(w, &[0], &f32_bytes(&[9.0; 4])).unwrap();
    assert_ne!(s.param_bytes(w).unwrap().unwrap().as_ptr() as usize, shared.addr());
    assert_eq!(s.imported(), (0, 0));
    s.compute().unwrap();
    assert_eq!(s.read_f32(y).unwrap(), vec![9.0, 9.0, 9.0, 9.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(shared.bytes(), &original[..]);

    // only params are bound to shared bytes, of their exact size
    let e = s.set_input_shared(vals, &SharedBytes::from(vec![0; 16])).unwrap_err();
    assert!(matches!(e, SchedError::NotAParam { .. }), "{e}");
    let e = s.set_input_shared(w, &SharedBytes::from(vec![0; 16])).unwrap_err();
    assert!(matches!(e, SchedError::InputSize { expected: 32, got: 16, .. }), "{e}");
}
