//! The `latency` section of `gpu-report`: what one host round trip to the device costs, below any
//! op. A step of backend sampling is a few submissions and one read-back, so at batch 1 these
//! numbers are its floor. Through the `sched::Backend` interface of a `VulkanBackend`: 4-byte
//! downloads from device memory (a copy into the staging pool, a submission, a fence wait) and
//! from host memory (a plain read), a 4-byte upload followed by such a download, a 607,744-byte
//! download (one logits row at V = 151,936), and a whole one-op step through the scheduler (write
//! an input, compute, read 4 bytes). Each case: the median of `reps` calls, with the host's time in
//! submissions and fence waits per call (`sched::WorkCounts`); and where a 4-byte device-memory
//! download's host time goes, phase by phase (`VulkanBackend::phase_times`).

use super::sections::Ctx;
use crate::bench::median;
use anyhow::Result;
use graph::{DType, Graph};
use sched::{Backend, MemoryKind, Scheduler, WorkCounts};
use std::time::Instant;

/// Median µs of `reps` calls of `f`, and the work counts of all calls divided by `reps`.
fn time(reps: usize, counts: impl Fn() -> WorkCounts, mut f: impl FnMut() -> Result<()>) -> Result<serde_json::Value> {
    f()?;
    let before = counts();
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64() * 1e6);
    }
    let w = counts().since(before);
    let per = |x: u64| x as f64 / reps as f64;
    Ok(serde_json::json!({
        "us": median(t), "submissions": per(w.submissions), "host_waits": per(w.host_waits),
        "submit_us": per(w.submit_ns) / 1e3, "wait_us": per(w.wait_ns) / 1e3,
    }))
}

pub(super) fn run(cx: &Ctx) -> Result<()> {
    let reps = if cx.quick { 5 } else { 200 };
    let mut vk = super::require_vulkan()?;
    let mut cases = Vec::new();
    let mut case = |name: &str, v: serde_json::Value| {
        println!("{name:<40} {v}");
        let mut row = serde_json::Map::new();
        row.insert("case".into(), name.into());
        row.extend(v.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
        cases.push(serde_json::Value::Object(row));
    };
    let dev4 = vk.alloc(4, MemoryKind::Device)?;
    let host4 = vk.alloc(4, MemoryKind::Host)?;
    let row = 151_936 * 4;
    let dev_row = vk.alloc(row, MemoryKind::Device)?;
    let mut out = vec![0u8; row];
    let vk = std::cell::RefCell::new(vk);
    let counts = || vk.borrow().work_counts();
    case("download 4 B, device memory", time(reps, counts, || Ok(vk.borrow_mut().download(dev4, 0, &mut out[..4])?))?);
    case("download 4 B, host memory", time(reps, counts, || Ok(vk.borrow_mut().download(host4, 0, &mut out[..4])?))?);
    case(
        "upload 4 B + download 4 B, device memory",
        time(reps, counts, || {
            let mut b = vk.borrow_mut();
            b.upload(dev4, 0, &[1, 2, 3, 4])?;
            b.download(dev4, 0, &mut [0u8; 4])?;
            Ok(())
        })?,
    );
    case(
        "download 607744 B, device memory",
        time(reps, counts, || Ok(vk.borrow_mut().download(dev_row, 0, &mut out)?))?,
    );
    case("synchronize (nothing in flight)", time(reps, counts, || Ok(vk.borrow_mut().synchronize()?))?);
    // Where a device-memory download's time goes, phase by phase (`VulkanBackend::phase_times`).
    let before = vk.borrow().phase_times();
    for _ in 0..reps {
        vk.borrow_mut().download(dev4, 0, &mut out[..4])?;
    }
    let phases: Vec<serde_json::Value> = vk
        .borrow()
        .phase_times()
        .into_iter()
        .zip(before)
        .map(|((name, ns), (_, ns0))| serde_json::json!({ "phase": name, "us_per_download": (ns - ns0) as f64 / reps as f64 / 1e3 }))
        .collect();
    println!("phases of a 4-byte device-memory download: {phases:?}");
    // One op through the scheduler, as a sampling step is: write an input, compute, read 4 bytes.
    let mut s = Scheduler::new(vec![Box::new(vk.into_inner()) as Box<dyn Backend>])?;
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[4])?;
    let y = g.scale(x, 2.0)?;
    g.set_output(y);
    s.plan(&g)?;
    let s = std::cell::RefCell::new(s);
    case(
        "step: set input, compute 1 op, read 4 B",
        time(
            reps,
            || s.borrow().work_counts(),
            || {
                let mut s = s.borrow_mut();
                s.set_input_f32(x, &[1.0, 2.0, 3.0, 4.0])?;
                s.compute()?;
                std::hint::black_box(s.read(y)?);
                Ok(())
            },
        )?,
    );
    let doc = serde_json::json!({ "suite": "latency", "reps": reps, "cases": cases, "download_4b_phases": phases });
    std::fs::write(&cx.out, serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}
