//! Test support: runs a whole graph on one `CpuBackend` without the scheduler. Every node that owns
//! storage gets its own buffer (contiguous, offset 0); views and in-place results are bound to their
//! storage's location, as the scheduler does. Also a small deterministic RNG and tensor readers that
//! follow a node's layout (so views read back in element order).
#![allow(dead_code)]

use cpu::CpuBackend;
use graph::{DType, Graph, NodeId, bf16, f16};
use sched::{Backend, BackendError, Bindings, BufferId, MemoryKind, SplitTask, TensorLoc};

/// A graph bound to buffers on a CPU backend.
#[derive(Debug)]
pub struct Harness {
    pub be: CpuBackend,
    pub g: Graph,
    bindings: Bindings,
}

impl Harness {
    pub fn new(g: Graph, threads: usize) -> Harness {
        let mut be = CpuBackend::with_threads(threads);
        let mut bindings = Bindings::new(g.len());
        let mut own: Vec<Option<BufferId>> = vec![None; g.len()];
        for (id, n) in g.nodes() {
            let s = g.storage_of(id);
            if s == id {
                let b = be.alloc(n.layout.extent(n.dtype), MemoryKind::Host).expect("alloc");
                own[id.index()] = Some(b);
            }
            let buffer = own[s.index()].expect("storage allocated before its views");
            bindings.bind(id, TensorLoc { buffer, offset: 0 });
        }
        Harness { be, g, bindings }
    }

    /// Writes raw bytes of a storage-owning node.
    pub fn set_bytes(&mut self, id: NodeId, bytes: &[u8]) {
        let loc = self.bindings.loc(id);
        self.be.upload(loc.buffer, loc.offset, bytes).expect("upload");
    }

    /// Writes f32 values converted to the node's dtype (contiguous order).
    pub fn set_f32(&mut self, id: NodeId, v: &[f32]) {
        let dt = self.g.node(id).dtype;
        assert_eq!(v.len(), self.g.node(id).layout.ne.numel());
        let bytes: Vec<u8> = match dt {
            DType::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            DType::F16 => v.iter().flat_map(|&x| f16::from_f32(x).to_le_bytes()).collect(),
            DType::BF16 => v.iter().flat_map(|&x| bf16::from_f32(x).to_le_bytes()).collect(),
            DType::I32 => v.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
            _ => panic!("set_f32 on {dt}: write blocks with set_bytes"),
        };
        self.set_bytes(id, &bytes);
    }

    pub fn set_i32(&mut self, id: NodeId, v: &[i32]) {
        assert_eq!(v.len(), self.g.node(id).layout.ne.numel());
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.set_bytes(id, &bytes);
    }

    /// Computes every node in order.
    pub fn run(&mut self) -> Result<(), BackendError> {
        let nodes: Vec<NodeId> = self.g.topo_order().collect();
        self.be.compute(SplitTask { graph: &self.g, nodes: &nodes, bindings: &self.bindings })?;
        self.be.synchronize()
    }

    fn element_bytes(&self, id: NodeId) -> (DType, Vec<[u8; 4]>) {
        let n = self.g.node(id);
        let loc = self.bindings.loc(id);
        let size = n.dtype.size();
        let ne = n.layout.ne;
        let mut out = Vec::with_capacity(ne.numel());
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    for i0 in 0..ne[0] {
                        let off = loc.offset + n.layout.byte_offset([i0, i1, i2, i3]);
                        let b = self.be.host_slice(loc.buffer, off, size).expect("host slice");
                        let mut e = [0u8; 4];
                        e[..size].copy_from_slice(b);
                        out.push(e);
                    }
                }
            }
        }
        (n.dtype, out)
    }

    /// The node's elements in ggml order, as f32.
    pub fn f32(&self, id: NodeId) -> Vec<f32> {
        let (dt, els) = self.element_bytes(id);
        els.iter()
            .map(|e| match dt {
                DType::F32 => f32::from_le_bytes(*e),
                DType::F16 => f16::from_le_bytes([e[0], e[1]]).to_f32(),
                DType::BF16 => bf16::from_le_bytes([e[0], e[1]]).to_f32(),
                DType::I32 => i32::from_le_bytes(*e) as f32,
                _ => panic!("f32 of a {dt} tensor"),
            })
            .collect()
    }

    /// The node's elements in ggml order (an i32 node).
    pub fn i32(&self, id: NodeId) -> Vec<i32> {
        let (dt, els) = self.element_bytes(id);
        assert_eq!(dt, DType::I32);
        els.iter().map(|e| i32::from_le_bytes(*e)).collect()
    }
}

/// xorshift64*: deterministic test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `[lo, hi)`.
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32(lo, hi)).collect()
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Rounds through a dtype (what storing into that dtype does to an f32).
pub fn round_to(dt: DType, x: f32) -> f32 {
    match dt {
        DType::F32 => x,
        DType::F16 => f16::from_f32(x).to_f32(),
        DType::BF16 => bf16::from_f32(x).to_f32(),
        DType::I32 => x as i32 as f32,
        _ => panic!("round_to {dt}: quantized values round by blocks"),
    }
}

/// Asserts `|got - want| <= atol + rtol * |want|` element-wise (NaN must match NaN).
pub fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "{what}[{i}]: got {g}, want NaN");
            continue;
        }
        if w.is_infinite() {
            assert_eq!(g, w, "{what}[{i}]");
            continue;
        }
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}[{i}]: got {g}, want {w}");
    }
}
