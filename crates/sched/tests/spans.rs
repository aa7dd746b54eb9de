//! Tracing: planning, each split and each copy open spans (alone in this test binary, since the
//! per-thread default subscriber races with other tests' callsite registration).

mod common;

use common::{Mock, log};
use graph::{DType, Graph};
use sched::Scheduler;

/// Captures formatted tracing output.
#[derive(Clone, Default)]
struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn plan_splits_and_copies_open_tracing_spans() {
    let cap = Capture::default();
    let writer = cap.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let l = log();
        let mut s = Scheduler::new(vec![Mock::new("gpu", &l).refusing(&["neg"]).boxed(), Mock::new("cpu", &l).boxed()])
            .unwrap();
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, &[8, 4]).unwrap();
        let s1 = g.named("s1", |g| g.scale(x, 2.0)).unwrap();
        let s2 = g.named("s2", |g| g.neg(s1)).unwrap();
        let y = g.add(s2, x).unwrap();
        g.set_output(y);
        s.plan(&g).unwrap();
        s.set_input_f32(x, &[1.0; 32]).unwrap();
        s.compute().unwrap();
    });
    let text = String::from_utf8(cap.0.lock().unwrap().clone()).unwrap();
    for span in ["plan{", "assign{", "split{", "alloc", "compute{", "copy{name=s1@cpu bytes=128}", "copy{name=s2@gpu"] {
        assert!(text.contains(span), "no {span} span in:\n{text}");
    }
    let splits = text.lines().filter(|l| l.contains(":split{i=") && !l.contains(":copy{")).count();
    assert_eq!(splits, 3, "{text}");
}
