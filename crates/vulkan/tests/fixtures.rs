//! The graph fixtures (`fixtures/graphs/*.graph`: an MLP, attention with KV-cache views and
//! set_rows, a sampling tail) run whole on the Vulkan backend and match the CPU backend. Every node
//! must be supported; inputs are deterministic (ids/positions in range).

mod common;

use common::*;
use graph::{DType, NodeId};

#[test]
fn fixture_graphs_match_cpu() {
    let Some(mut vk) = vulkan("fixture_graphs_match_cpu") else { return };
    let mut cpu = cpu::CpuBackend::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/graphs");
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    assert!(!names.is_empty(), "no fixtures in {}", dir.display());
    for path in names.iter().filter(|p| p.extension().is_some_and(|e| e == "graph")) {
        let text = std::fs::read_to_string(path).unwrap();
        let g = graph::fixture::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let what = path.file_name().unwrap().to_string_lossy().to_string();
        for (id, _) in g.nodes() {
            assert!(sched::Backend::supports(&vk, &g, id), "{what}: vulkan does not support {}", g.describe(id));
        }
        let mut inputs: Vec<(NodeId, Vec<u8>)> = Vec::new();
        for (id, n) in g.nodes().filter(|(_, n)| n.flags.input || n.flags.param) {
            let count = n.layout.ne.numel();
            let bytes = match n.dtype {
                // small non-negative ids: valid rows / positions / slots / seeds in every fixture
                DType::I32 => i32_bytes(&(0..count as i32).map(|i| i % 5).collect::<Vec<_>>()),
                DType::F32 => f32_bytes(&data(count, u64::from(id.0), -1.0, 1.0)),
                DType::F16 => data(count, u64::from(id.0), -0.2, 0.2)
                    .iter()
                    .flat_map(|&x| graph::f16::from_f32(x).to_le_bytes())
                    .collect(),
                DType::BF16 => data(count, u64::from(id.0), -0.2, 0.2)
                    .iter()
                    .flat_map(|&x| graph::bf16::from_f32(x).to_le_bytes())
                    .collect(),
                DType::Q8_0 | DType::Q4_0 | DType::Q4_1 => panic!("no fixture has a quantized leaf"),
            };
            inputs.push((id, bytes));
        }
        let outputs = g.outputs();
        assert!(!outputs.is_empty(), "{what}: no outputs");
        let got = run(&mut vk, &g, &inputs, &outputs, true);
        let want = run(&mut cpu, &g, &inputs, &outputs, false);
        assert_clean(&vk);
        for (i, &o) in outputs.iter().enumerate() {
            let d = g.node(o).dtype;
            let w = format!("{what} output {}", g.describe(o));
            if d == DType::I32 {
                assert_eq!(to_i32(&got[i]), to_i32(&want[i]), "{w}");
            } else {
                assert_close(&w, &values(d, &got[i]), &values(d, &want[i]), 1e-4, 1e-3);
            }
        }
    }
}
