//! Plans of the graph fixtures (`fixtures/graphs/*.graph`) on the real CPU backend, kept as reviewed
//! text snapshots in `tests/snapshots/plans__<fixture>.snap`.
//!
//! The cpu crate has no `insta` dev-dependency (its Cargo.toml belongs to the cpu engineer), so this
//! file carries a minimal snapshot check with insta's workflow: a missing or different snapshot fails
//! the test and writes `<name>.snap.new` beside it; run with `UPDATE_SNAPSHOTS=1` to accept.

use cpu::CpuBackend;
use graph::Graph;
use sched::{BufferRole, Scheduler};
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
            assert!(b.role != BufferRole::Io || b.kind == sched::MemoryKind::Host);
        }
        check_snapshot(name, &s.plan_text());
    }
}
