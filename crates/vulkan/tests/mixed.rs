//! Mixed CPU + Vulkan plans through `sched::Scheduler`: each fixture with one node in the middle
//! pinned to the CPU runs several steps and gives the same outputs as an all-CPU run, with the copies
//! the plan promises; and `insta` snapshots of the fixtures' plans on `[vulkan, cpu]` (assignment,
//! causes, splits and copies; buffer offsets are left out because they follow the device's alignment).

mod common;

use common::*;
use graph::{DType, Graph, NodeId};
use sched::{Backend, Scheduler};
use vulkan::{Options, VulkanBackend};

fn fixture(name: &str) -> Graph {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/graphs/{name}.graph"));
    graph::fixture::parse(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Deterministic inputs for step `step`: small non-negative ids (valid rows, positions, slots and
/// seeds in every fixture), floats in a small range.
fn inputs(g: &Graph, step: u64) -> Vec<(NodeId, Vec<u8>)> {
    g.nodes()
        .filter(|(_, n)| n.flags.input || n.flags.param)
        .map(|(id, n)| {
            let count = n.layout.ne.numel();
            let seed = u64::from(id.0) * 1000 + if n.flags.param { 0 } else { step };
            let bytes = match n.dtype {
                DType::I32 => i32_bytes(&(0..count as i32).map(|i| (i + step as i32) % 5).collect::<Vec<_>>()),
                DType::F32 => f32_bytes(&data(count, seed, -1.0, 1.0)),
                DType::F16 => {
                    data(count, seed, -0.2, 0.2).iter().flat_map(|&x| graph::f16::from_f32(x).to_le_bytes()).collect()
                }
                DType::BF16 => {
                    data(count, seed, -0.2, 0.2).iter().flat_map(|&x| graph::bf16::from_f32(x).to_le_bytes()).collect()
                }
                _ => panic!("no fixture has a quantized leaf"),
            };
            (id, bytes)
        })
        .collect()
}

fn run_steps(sched: &mut Scheduler, g: &Graph, steps: u64) -> Vec<Vec<Vec<u8>>> {
    sched.plan(g).unwrap();
    let mut out = Vec::new();
    for step in 0..steps {
        for (id, bytes) in inputs(g, step) {
            // Params are uploaded once; inputs every step.
            if step == 0 || !g.node(id).flags.param {
                sched.set_input(id, &bytes).unwrap();
            }
        }
        sched.compute().unwrap();
        out.push(g.outputs().into_iter().map(|o| sched.read(o).unwrap()).collect());
    }
    out
}

fn validated_vulkan() -> Box<dyn Backend> {
    Box::new(VulkanBackend::with_options(Options { validation: true, ..Options::default() }).unwrap())
}

/// The node pinned to the CPU in each fixture: one in the middle, with Vulkan work before it.
const PINS: [(&str, &str); 3] = [("mlp2", "a1"), ("attention", "kq"), ("sampling_tail", "top_ids")];

#[test]
fn cpu_pinned_in_the_middle_matches_all_cpu() {
    let Some(probe) = vulkan("cpu_pinned_in_the_middle_matches_all_cpu") else { return };
    drop(probe);
    for (name, pinned) in PINS {
        let g = fixture(name);
        let mut mixed = Scheduler::new(vec![validated_vulkan(), Box::new(cpu::CpuBackend::new())]).unwrap();
        mixed.pin(g.find(pinned).unwrap(), "cpu").unwrap();
        let got = run_steps(&mut mixed, &g, 3);
        let plan = mixed.current_plan().unwrap();
        // At least a Vulkan split then a CPU one (the planner keeps later nodes where their inputs are,
        // so the graph may or may not return to Vulkan; the snapshots show which).
        assert!(plan.splits.len() >= 2, "{name}: expected vulkan then cpu splits, got {}", plan.splits.len());
        assert!(plan.n_copies() >= 1, "{name}: expected a copy between the backends");
        let stats = mixed.stats();
        assert_eq!((stats.plans, stats.steps), (1, 3), "{name}");
        assert_eq!(stats.bytes_between_backends, 3 * plan.copy_bytes() as u64, "{name}");

        let mut all_cpu = Scheduler::new(vec![Box::new(cpu::CpuBackend::new())]).unwrap();
        let want = run_steps(&mut all_cpu, &g, 3);
        for (step, (got, want)) in got.iter().zip(&want).enumerate() {
            for ((o, got), want) in g.outputs().into_iter().zip(got).zip(want) {
                let what = format!("{name} step {step} output {}", g.describe(o));
                let d = g.node(o).dtype;
                if d == DType::I32 {
                    assert_eq!(to_i32(got), to_i32(want), "{what}");
                } else {
                    assert_close(&what, &values(d, got), &values(d, want), 1e-4, 1e-3);
                }
            }
        }
        // The steps differ, so equal outputs are not an accident of constant inputs.
        assert_ne!(got[0], got[1], "{name}: outputs did not change between steps");
        let vk = &mixed.backends()[0];
        assert_eq!(vk.name(), "vulkan");
    }
}

/// The plan text without the lines and columns that depend on the device's alignment.
fn portable_plan(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("memory:") && !l.starts_with("buffer "))
        .map(|l| {
            let l = l.trim_end();
            if l.contains(" | ") {
                // Drop the location column (`vulkan.arena+128`, `-> #3`), keeping whether the
                // storage has a read-back region.
                let (l, readback) = match l.find(" (read back via ") {
                    Some(i) => (&l[..i], " [read back]"),
                    None => (l, ""),
                };
                let cut = l.rfind(|c: char| c.is_whitespace()).unwrap_or(l.len());
                let head = l[..cut].trim_end();
                format!("{}{readback}", head.strip_suffix(" ->").unwrap_or(head).trim_end())
            } else if l.starts_with("   copy ") {
                // `copy x@cpu <- #3 vulkan.arena+0 -> cpu.arena+0 (16000 B)`: keep names and size.
                let parts: Vec<&str> = l.split_whitespace().collect();
                format!("   copy {} <- {} ({} B)", parts[1], parts[3], parts[parts.len() - 2].trim_start_matches('('))
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn fixture_plans_on_vulkan_and_cpu() {
    let Some(probe) = vulkan("fixture_plans_on_vulkan_and_cpu") else { return };
    drop(probe);
    for (name, pinned) in PINS {
        let g = fixture(name);
        let mut s = Scheduler::new(vec![validated_vulkan(), Box::new(cpu::CpuBackend::new())]).unwrap();
        let all_vulkan = portable_plan(&s.plan(&g).unwrap().to_text(&g));
        insta::assert_snapshot!(format!("{name}_vulkan_cpu"), all_vulkan);
        s.pin(g.find(pinned).unwrap(), "cpu").unwrap();
        let mixed = portable_plan(&s.plan(&g).unwrap().to_text(&g));
        insta::assert_snapshot!(format!("{name}_vulkan_cpu_pinned_{pinned}"), mixed);
    }
}
