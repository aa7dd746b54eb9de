//! Test harness shared by the Vulkan tests: opens the backend with the validation layer (a missing
//! device fails under `SAMPLING_REQUIRE_VULKAN=1`, otherwise the test says loudly that it skipped),
//! runs a graph on any backend by giving every tensor storage its own place (in one packed buffer
//! or one buffer each), and checks that the validation layer stayed silent.
#![allow(dead_code, clippy::print_stderr)]

use graph::{DType, Graph, NodeId, Op};
use sched::{Backend, Bindings, MemoryKind, SplitTask, TensorLoc};
use vulkan::{Options, VulkanBackend};

/// The Vulkan backend with validation, or `None` (after saying why) when there is no device.
pub fn vulkan(test: &str) -> Option<VulkanBackend> {
    vulkan_with(test, Options::default())
}

/// As [`vulkan`], with explicit options (validation is always on).
pub fn vulkan_with(test: &str, opts: Options) -> Option<VulkanBackend> {
    match VulkanBackend::with_options(Options { validation: true, ..opts }) {
        Ok(b) => {
            if !b.validation_enabled() {
                if required() {
                    panic!("{test}: SAMPLING_REQUIRE_VULKAN=1 but VK_LAYER_KHRONOS_validation is not available");
                }
                eprintln!("NOTE {test}: VK_LAYER_KHRONOS_validation not available; running without it");
            }
            Some(b)
        }
        Err(e) => {
            sched::testing::skip(test, format!("no Vulkan device ({e})"));
            None
        }
    }
}

/// True under `SAMPLING_REQUIRE_VULKAN=1` (set by `cargo xtask ci` when `CI=true`): Vulkan and its
/// validation layer must be present.
pub fn required() -> bool {
    std::env::var_os("SAMPLING_REQUIRE_VULKAN").is_some_and(|v| v == "1")
}

/// Fails the test if the validation layer reported anything.
pub fn assert_clean(vk: &VulkanBackend) {
    let msgs = vk.validation_messages();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}

/// Runs every node of `g` on `be` with `inputs` (raw bytes) and returns the outputs' bytes. With
/// `packed`, all storages share one buffer at 256-byte aligned offsets (after a 192-byte gap, so
/// nothing starts at offset 0); otherwise each storage gets its own buffer.
pub fn run(
    be: &mut dyn Backend,
    g: &Graph,
    inputs: &[(NodeId, Vec<u8>)],
    outputs: &[NodeId],
    packed: bool,
) -> Vec<Vec<u8>> {
    let mut b = Bindings::new(g.len());
    let storages: Vec<NodeId> = g.nodes().filter(|(id, _)| g.storage_of(*id) == *id).map(|(id, _)| id).collect();
    let size = |id: NodeId| {
        let n = g.node(id);
        n.layout.extent(n.dtype).max(4)
    };
    let mut locs = vec![None; g.len()];
    if packed {
        // Pack into as few buffers as the backend's size limit allows.
        let limit = be.max_buffer_size();
        let mut groups: Vec<(usize, Vec<(NodeId, usize)>)> = vec![(192, Vec::new())];
        for &s in &storages {
            let g0 = groups.last_mut().expect("one group");
            if g0.0 + size(s) > limit && !g0.1.is_empty() {
                groups.push((192, Vec::new()));
            }
            let g0 = groups.last_mut().expect("one group");
            g0.1.push((s, g0.0));
            g0.0 = (g0.0 + size(s)).next_multiple_of(256);
        }
        for (end, places) in groups {
            let buf = be.alloc(end, MemoryKind::Device).expect("alloc");
            for (s, o) in places {
                locs[s.index()] = Some(TensorLoc { buffer: buf, offset: o });
            }
        }
    } else {
        for &s in &storages {
            let buf = be.alloc(size(s), MemoryKind::Device).expect("alloc");
            locs[s.index()] = Some(TensorLoc { buffer: buf, offset: 0 });
        }
    }
    for (id, _) in g.nodes() {
        b.bind(id, locs[g.storage_of(id).index()].expect("storage placed"));
    }
    for (id, bytes) in inputs {
        let loc = b.loc(*id);
        be.upload(loc.buffer, loc.offset, bytes).expect("upload");
    }
    let nodes: Vec<NodeId> = g.nodes().filter(|(_, n)| n.op != Op::Input).map(|(id, _)| id).collect();
    be.compute(SplitTask { graph: g, nodes: &nodes, bindings: &b }).unwrap_or_else(|e| panic!("compute: {e}"));
    be.synchronize().expect("synchronize");
    outputs
        .iter()
        .map(|&o| {
            let n = g.node(o);
            assert!(n.layout.is_contiguous(n.dtype), "outputs must be contiguous");
            let loc = b.loc(o);
            let mut out = vec![0u8; n.nbytes()];
            be.download(loc.buffer, loc.offset + n.layout.offset, &mut out).expect("download");
            out
        })
        .collect()
}

/// Deterministic uniforms in `[lo, hi)` (from the project's Philox generator).
pub fn data(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    (0..n as u64).map(|i| lo + (hi - lo) * graph::philox::uniform(seed, 0, i)).collect()
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn to_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

pub fn to_i32(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Logical values of an output as f64 (any dtype).
pub fn values(d: DType, b: &[u8]) -> Vec<f64> {
    match d {
        DType::F32 => to_f32(b).into_iter().map(f64::from).collect(),
        DType::I32 => to_i32(b).into_iter().map(f64::from).collect(),
        DType::F16 => b.chunks_exact(2).map(|c| graph::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        DType::BF16 => b.chunks_exact(2).map(|c| graph::bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        _ => panic!("no op outputs a quantized tensor"),
    }
}

/// Asserts `got` matches `want` within `atol + rtol * |want|` (NaN matches NaN, infinities exactly).
pub fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(ok, "{what}: element {i}: vulkan {g} vs cpu {w}");
    }
}
