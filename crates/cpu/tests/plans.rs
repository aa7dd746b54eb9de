//! Plans of the graph fixtures (`fixtures/graphs/*.graph`) on the real CPU backend, kept as reviewed
//! text snapshots in `tests/snapshots/plans__<fixture>.snap`.
//!
//! The cpu crate has no `insta` dev-dependency (its Cargo.toml belongs to the cpu engineer), so this
//! file carries a minimal snapshot check with insta's workflow: a missing or different snapshot fails
//! the test and writes `<name>.snap.new` beside it; run with `UPDATE_SNAPSHOTS=1` to accept.

use cpu::CpuBackend;
use graph::Graph;
use sched::Scheduler;
use std::path::PathBuf;

fn fixture(name: &str) -> Graph {
    let path = format!("{}/../../fixtures/graphs/{name}.graph", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    graph::fixture::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn check_snapshot(name: &str, actual: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let path = dir.join(format!("plans__{name}.snap"));
    let expected = std::fs::read_to_string(&path).ok();
    if expected.as_deref() == Some(actual) {
        let _ = std::fs::remove_file(path.with_extension("snap.new"));
        return;
    }
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    std::fs::write(path.with_extension("snap.new"), actual).unwrap();
    match expected {
        None => panic!(
            "no snapshot {} yet; review {}.new and rerun with UPDATE_SNAPSHOTS=1",
            path.display(),
            path.display()
        ),
        Some(e) => {
            let first = e
                .lines()
                .zip(actual.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(e.lines().count().min(actual.lines().count()));
            panic!(
                "plan {name} differs from {} at line {}:\n- {}\n+ {}\n(full text in .snap.new; UPDATE_SNAPSHOTS=1 accepts)",
                path.display(),
                first + 1,
                e.lines().nth(first).unwrap_or("<end>"),
                actual.lines().nth(first).unwrap_or("<end>")
            );
        }
    }
}

fn plan_on_cpu(name: &str) -> (Graph, Scheduler) {
    let g = fixture(name);
    let mut s = Scheduler::new(vec![Box::new(CpuBackend::with_threads(1))]).unwrap();
    s.plan(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
    (g, s)
}

#[test]
fn fixture_plans_on_the_cpu_backend() {
    for name in ["mlp2", "attention", "sampling_tail"] {
        let (g, s) = plan_on_cpu(name);
        let p = s.current_plan().unwrap();
        // One backend: one split with every compute node, no copies.
        assert_eq!(p.splits.len(), 1, "{name}");
        assert_eq!(p.n_copies(), 0, "{name}");
        let computed = g.nodes().filter(|(_, n)| n.op != graph::Op::Input && !n.op.is_view()).count();
        assert_eq!(p.splits[0].nodes.len(), computed, "{name}");
        if name != "sampling_tail" {
            assert!(p.arena_bytes < p.no_reuse_bytes, "{name}: {} vs {}", p.arena_bytes, p.no_reuse_bytes);
        }
        for b in &p.buffers {
            assert_eq!(b.size % 64, 0, "{name}: {} is not a multiple of the CPU alignment", b.name);
            assert_eq!(b.kind, b.role.kind(), "{name}: {}", b.name);
        }
        check_snapshot(name, &s.plan_text());
    }
}

/// A second, differently named CPU backend that refuses some ops and hides its memory from the host
/// (no `host_slice`), standing in for a GPU: plans over it and the real CPU backend have splits and
/// copies, and must compute exactly what the CPU alone computes.
#[derive(Debug)]
struct FakeGpu {
    inner: CpuBackend,
    refuse: &'static [&'static str],
}

impl sched::Backend for FakeGpu {
    fn name(&self) -> &str {
        "gpu"
    }
    fn supports(&self, g: &Graph, node: graph::NodeId) -> bool {
        !self.refuse.contains(&g.node(node).op.name()) && self.inner.supports(g, node)
    }
    fn alloc(&mut self, bytes: usize, kind: sched::MemoryKind) -> sched::BackendResult<sched::BufferId> {
        self.inner.alloc(bytes, kind)
    }
    fn free(&mut self, buffer: sched::BufferId) -> sched::BackendResult<()> {
        self.inner.free(buffer)
    }
    fn upload(&mut self, buffer: sched::BufferId, offset: usize, data: &[u8]) -> sched::BackendResult<()> {
        self.inner.upload(buffer, offset, data)
    }
    fn download(&mut self, buffer: sched::BufferId, offset: usize, out: &mut [u8]) -> sched::BackendResult<()> {
        self.inner.download(buffer, offset, out)
    }
    fn compute(&mut self, task: sched::SplitTask<'_>) -> sched::BackendResult<()> {
        self.inner.compute(task)
    }
    fn synchronize(&mut self) -> sched::BackendResult<()> {
        self.inner.synchronize()
    }
    fn alignment(&self) -> usize {
        256
    }
}

/// Deterministic data for a leaf: small values for floats, valid ids/positions for i32 inputs.
fn leaf_data(g: &Graph, id: graph::NodeId, step: usize) -> Vec<u8> {
    let n = g.node(id);
    let name = n.name.clone().unwrap_or_default();
    let count = n.layout.ne.numel();
    let mut out = Vec::with_capacity(n.nbytes());
    for i in 0..count {
        let v = ((i * 7919 + step * 104_729 + name.len() * 31) % 1000) as f32 / 500.0 - 1.0;
        match n.dtype {
            graph::DType::F32 => out.extend_from_slice(&v.to_le_bytes()),
            graph::DType::F16 => out.extend_from_slice(&graph::f16::from_f32(v * 0.1).to_le_bytes()),
            graph::DType::BF16 => out.extend_from_slice(&graph::bf16::from_f32(v * 0.1).to_le_bytes()),
            graph::DType::I32 => {
                // slots/pos: distinct per step; keys: seeds and step.
                let x = match name.as_str() {
                    "slots" => ((step * 5 + i) % 64) as i32,
                    "keys" => [i as i32 + 3, 0, step as i32, 0][i % 4],
                    _ => (step * 5 + i) as i32,
                };
                out.extend_from_slice(&x.to_le_bytes());
            }
            _ => {
                panic!("no fixture has a quantized leaf ({name})")
            }
        }
    }
    out
}

fn run_steps(g: &Graph, mut s: Scheduler, steps: usize) -> (Vec<Vec<Vec<u8>>>, sched::Stats) {
    s.plan(g).unwrap();
    for p in g.params() {
        s.set_input(p, &leaf_data(g, p, 0)).unwrap();
    }
    let mut results = Vec::new();
    for step in 0..steps {
        for i in g.inputs() {
            s.set_input(i, &leaf_data(g, i, step)).unwrap();
        }
        s.compute().unwrap();
        results.push(g.outputs().iter().map(|&o| s.read(o).unwrap()).collect());
    }
    (results, s.stats())
}

#[test]
fn split_plans_compute_what_the_cpu_alone_computes() {
    for name in ["mlp2", "attention", "sampling_tail"] {
        let g = fixture(name);
        let alone = Scheduler::new(vec![Box::new(CpuBackend::with_threads(1))]).unwrap();
        let (want, _) = run_steps(&g, alone, 3);
        let gpu = FakeGpu { inner: CpuBackend::with_threads(1), refuse: &["top_k", "rope", "silu"] };
        let mut both = Scheduler::new(vec![Box::new(gpu), Box::new(CpuBackend::with_threads(1))]).unwrap();
        let copies = both.plan(&g).unwrap().n_copies();
        if name == "mlp2" {
            // Pin the second matmul to the gpu so the output comes back from there.
            both.pin(g.find("h2").unwrap(), "gpu").unwrap();
            both.plan(&g).unwrap();
        }
        let plan_copies = both.current_plan().unwrap().copy_bytes() as u64;
        assert!(both.current_plan().unwrap().splits.len() >= 3, "{name}:\n{}", both.plan_text());
        let (got, stats) = run_steps(&g, both, 3);
        assert_eq!(got, want, "{name}: the split plan computes something else");
        assert!(copies > 0);
        assert_eq!(stats.bytes_between_backends, 3 * plan_copies, "{name}");
    }
}
