//! The whole conformance suite on the CPU backend (through `sched::Scheduler`), against the f64
//! reference: zero failures, and the CPU supports every case. The report is printed on failure.

use conformance::runner::{Oracle, SchedTarget, run_cases};
use sched::Backend;

#[test]
fn cpu_backend_passes_the_whole_suite() {
    let factory = Box::new(|| Ok(Box::new(cpu::CpuBackend::new()) as Box<dyn Backend>));
    let mut target = SchedTarget::new(factory).expect("the CPU backend starts");
    let mut oracle = Oracle::Reference.into_target().expect("the reference needs no device");
    // CONFORMANCE_FILTER=softmax runs only the cases whose name contains "softmax".
    let cases = conformance::cases::matching(std::env::var("CONFORMANCE_FILTER").ok().as_deref());
    let report = run_cases(&cases, &mut target, oracle.as_mut());
    assert!(report.ok(), "{report}\n{}", report.table());
    assert!(report.skipped().is_empty(), "the CPU must support every case:\n{report}");
    assert_eq!(report.passed().len(), cases.len(), "{report}");
    if std::env::var_os("CONFORMANCE_REPORT").is_some() {
        panic!("CONFORMANCE_REPORT set: printing the report\n{report}\n{}", report.table());
    }
}

/// The path a GPU backend's run takes: a backend oracle (here the CPU checked against another CPU
/// backend instance, which must agree with itself), on the cases of moderate size.
#[test]
fn cpu_backend_as_the_oracle() {
    let make = || Box::new(|| Ok(Box::new(cpu::CpuBackend::with_threads(2)) as Box<dyn Backend>));
    let mut target = SchedTarget::new(make()).expect("the CPU backend starts");
    let mut oracle = Oracle::Backend(make()).into_target().expect("the CPU backend starts");
    let cases: Vec<_> = conformance::cases::all()
        .into_iter()
        .filter(|c| !c.name.contains("151936") && !c.name.contains("262144"))
        .collect();
    let report = run_cases(&cases, &mut target, oracle.as_mut());
    assert_eq!(report.oracle, "cpu");
    assert!(report.ok(), "{report}\n{}", report.table());
    assert_eq!(report.passed().len(), cases.len(), "{report}");
}
