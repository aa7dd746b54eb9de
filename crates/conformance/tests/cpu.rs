//! The whole conformance suite on the CPU backend (through `sched::Scheduler`), against the f64
//! reference: zero failures, and the CPU supports every case. The report is printed on failure.

use conformance::runner::{Oracle, run_suite_on};
use sched::Backend;

#[test]
fn cpu_backend_passes_the_whole_suite() {
    let factory = Box::new(|| Ok(Box::new(cpu::CpuBackend::new()) as Box<dyn Backend>));
    let report = run_suite_on(factory, Oracle::Reference).expect("the CPU backend starts");
    assert!(report.ok(), "{report}\n{}", report.table());
    assert!(report.skipped().is_empty(), "the CPU must support every case:\n{report}");
    assert_eq!(report.passed().len(), conformance::cases::all().len(), "{report}");
    if std::env::var_os("CONFORMANCE_REPORT").is_some() {
        panic!("CONFORMANCE_REPORT set: printing the report\n{report}\n{}", report.table());
    }
}
