//! Device selection and availability: an impossible device choice is reported as
//! `BackendError::Unavailable` naming the cause (no panic); the opened device answers the basic
//! buffer calls (uploads, downloads, batched `copy_regions` with its range and overlap checks,
//! chunked transfers through the reused staging pool, uploads ordered with in-flight splits) and
//! keeps the validation layer silent.

mod common;

use sched::{Backend, BackendError, Bindings, BufferId, CopyRegion, MemoryKind, SplitTask, TensorLoc};
use vulkan::{Options, VulkanBackend};

#[test]
fn unknown_device_is_unavailable_not_a_panic() {
    let r = VulkanBackend::with_options(Options { device: Some("no-such-gpu-xyz".into()), ..Options::default() });
    match r {
        Err(BackendError::Unavailable { backend, reason }) => {
            assert_eq!(backend, "vulkan");
            // Either no loader/device at all, or the choice matched nothing: both name the cause.
            assert!(!reason.is_empty());
            if common::vulkan("unknown_device_is_unavailable_not_a_panic").is_some() {
                assert!(reason.contains("no-such-gpu-xyz"), "reason should name the choice: {reason}");
            }
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[test]
fn buffers_round_trip_in_both_memory_kinds() {
    let Some(mut vk) = common::vulkan("buffers_round_trip_in_both_memory_kinds") else { return };
    for kind in [MemoryKind::Device, MemoryKind::Host] {
        let b = vk.alloc(1000, kind).unwrap();
        let mut z = vec![1u8; 1000];
        vk.download(b, 0, &mut z).unwrap();
        assert!(z.iter().all(|&x| x == 0), "{kind:?} buffers start zeroed");
        let data: Vec<u8> = (0..=255).collect();
        vk.upload(b, 37, &data).unwrap();
        let mut out = vec![0u8; 256];
        vk.download(b, 37, &mut out).unwrap();
        assert_eq!(out, data);
        let c = vk.alloc(300, MemoryKind::Device).unwrap();
        let region = CopyRegion { src_offset: 37, dst_offset: 10, len: 256 };
        vk.copy_regions(b, c, &[region]).unwrap();
        vk.download(c, 10, &mut out).unwrap();
        assert_eq!(out, data);
        assert!(vk.upload(b, 999, &[1, 2]).is_err(), "out-of-bounds upload is an error");
        if kind == MemoryKind::Host
            && let Some(s) = vk.host_slice(b, 37, 256)
        {
            assert_eq!(s, &data[..]);
        }
        vk.free(b).unwrap();
        vk.free(c).unwrap();
        assert!(vk.free(b).is_err(), "double free is an error");
    }
    common::assert_clean(&vk);
}

#[test]
fn timestamps_path_runs_clean() {
    let opts = Options { timestamps: true, ..Options::default() };
    let Some(mut vk) = common::vulkan_with("timestamps_path_runs_clean", opts) else { return };
    let mut g = graph::Graph::new();
    let x = g.input("x", graph::DType::F32, &[1000, 2]).unwrap();
    let s = g.soft_max(x, None, 1.0).unwrap();
    let a = g.argmax(s).unwrap();
    g.set_output(a);
    let xs: Vec<f32> = (0..2000).map(|i| ((i * 37) % 1000) as f32).collect();
    let out = common::run(&mut vk, &g, &[(x, common::f32_bytes(&xs))], &[a], true);
    // row 0: value i*37 % 1000 is largest (999) at i = 27 (27*37 = 999); row 1 repeats the pattern
    // shifted by 1000 elements: (1000 + i)*37 % 1000 = (i*37) % 1000, so again i = 27.
    assert_eq!(common::to_i32(&out[0]), vec![27, 27]);
    common::assert_clean(&vk);
}

/// Deterministic bytes (no run of equal values, so a shifted copy is caught).
fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32).map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8).collect()
}

fn download(vk: &mut VulkanBackend, b: BufferId, offset: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    vk.download(b, offset, &mut out).unwrap();
    out
}

/// The backend with device memory written in place where the device maps it, and with
/// `Options::staged` (every device-memory transfer through the staging pool).
fn both_modes(test: &str) -> Vec<VulkanBackend> {
    [false, true]
        .into_iter()
        .filter_map(|staged| common::vulkan_with(test, Options { staged, ..Options::default() }))
        .collect()
}

#[test]
fn copy_regions_batches_device_to_host_read_back() {
    for vk in both_modes("copy_regions_batches_device_to_host_read_back") {
        copy_regions_batches(vk);
    }
}

fn copy_regions_batches(mut vk: VulkanBackend) {
    let n = 4096;
    let data = pattern(n, 7);
    let src = vk.alloc(n, MemoryKind::Device).unwrap();
    let dst = vk.alloc(n, MemoryKind::Host).unwrap();
    vk.synchronize().unwrap();
    // Whether this device's host memory can be read in place (coherent): then it must be readable
    // right after `copy_regions`, without a `synchronize`.
    let in_place = vk.host_slice(dst, 0, n).is_some();
    // The upload is still in flight when the copy is submitted: the copy is ordered after it.
    vk.upload(src, 0, &data).unwrap();
    let regions = [
        CopyRegion { src_offset: 0, dst_offset: 0, len: 64 },
        CopyRegion { src_offset: 1000, dst_offset: 1000, len: 333 },
        CopyRegion { src_offset: 2049, dst_offset: 2049, len: 0 },
        CopyRegion { src_offset: 3000, dst_offset: 3001, len: 1095 },
        CopyRegion { src_offset: 128, dst_offset: 512, len: 128 },
    ];
    vk.copy_regions(src, dst, &regions).unwrap();
    let mut want = vec![0u8; n];
    for r in &regions {
        want[r.dst_offset..r.dst_offset + r.len].copy_from_slice(&data[r.src_offset..r.src_offset + r.len]);
    }
    if in_place {
        let s = vk.host_slice(dst, 0, n).expect("no work in flight after copy_regions");
        assert_eq!(s, &want[..], "host_slice after copy_regions");
        for r in &regions {
            assert_eq!(vk.host_slice(dst, r.dst_offset, r.len).unwrap(), &data[r.src_offset..r.src_offset + r.len]);
        }
    }
    assert_eq!(download(&mut vk, dst, 0, n), want, "download after copy_regions");
    // Device to device, and within one buffer (disjoint ranges), also in one batch each.
    let dev = vk.alloc(n, MemoryKind::Device).unwrap();
    vk.copy_regions(src, dev, &regions).unwrap();
    assert_eq!(download(&mut vk, dev, 0, n), want, "device to device");
    let within = [
        CopyRegion { src_offset: 0, dst_offset: 2048, len: 1024 },
        CopyRegion { src_offset: 100, dst_offset: 3072, len: 1024 },
    ];
    vk.copy_regions(src, src, &within).unwrap();
    let mut want_src = data.clone();
    want_src[2048..3072].copy_from_slice(&data[0..1024]);
    want_src[3072..4096].copy_from_slice(&data[100..1124]);
    assert_eq!(download(&mut vk, src, 0, n), want_src, "copy within one buffer");
    // An empty batch (or one of empty ranges) does nothing.
    vk.copy_regions(src, dst, &[]).unwrap();
    vk.copy_regions(src, dst, &[CopyRegion { src_offset: n, dst_offset: 0, len: 0 }]).unwrap();
    assert_eq!(download(&mut vk, dst, 0, n), want);
    common::assert_clean(&vk);
}

#[test]
fn copy_regions_rejects_bad_ranges_and_overlaps() {
    let Some(mut vk) = common::vulkan("copy_regions_rejects_bad_ranges_and_overlaps") else { return };
    let a = vk.alloc(1000, MemoryKind::Device).unwrap();
    let h = vk.alloc(500, MemoryKind::Host).unwrap();
    let ok = CopyRegion { src_offset: 0, dst_offset: 0, len: 100 };
    let expect_other = |r: Result<(), BackendError>, needle: &str| match r {
        Err(BackendError::Other { backend, msg }) => {
            assert_eq!(backend, "vulkan");
            assert!(msg.contains("copy_regions") && msg.contains(needle), "message {msg:?} should name {needle:?}");
        }
        other => panic!("expected BackendError::Other naming {needle:?}, got {other:?}"),
    };
    let past_src = CopyRegion { src_offset: 950, dst_offset: 200, len: 51 };
    expect_other(vk.copy_regions(a, h, &[ok, past_src]), "region 1: source range 950+51 outside buffer");
    let past_dst = CopyRegion { src_offset: 0, dst_offset: 450, len: 51 };
    expect_other(vk.copy_regions(a, h, &[past_dst]), "region 0: destination range 450+51 outside buffer");
    let overflow = CopyRegion { src_offset: usize::MAX, dst_offset: 0, len: 2 };
    expect_other(vk.copy_regions(a, h, &[overflow]), "outside buffer");
    let dst_twice = CopyRegion { src_offset: 500, dst_offset: 50, len: 100 };
    expect_other(vk.copy_regions(a, h, &[ok, dst_twice]), "destination ranges of regions 0 and 1 overlap");
    let self_overlap = CopyRegion { src_offset: 0, dst_offset: 10, len: 20 };
    expect_other(vk.copy_regions(a, a, &[self_overlap]), "overlaps the destination range");
    let onto_src = [
        CopyRegion { src_offset: 0, dst_offset: 500, len: 100 },
        CopyRegion { src_offset: 700, dst_offset: 50, len: 10 },
    ];
    expect_other(vk.copy_regions(a, a, &onto_src), "overlaps the destination range");
    assert!(vk.copy_regions(a, BufferId(9999), &[ok]).is_err(), "unknown buffer");
    // Nothing was copied by the failed batches.
    assert!(download(&mut vk, h, 0, 500).iter().all(|&b| b == 0));
    common::assert_clean(&vk);
}

#[test]
fn staged_transfers_reuse_a_bounded_pool_and_chunk_long_ones() {
    let opts = Options { staged: true, ..Options::default() };
    let Some(mut vk) = common::vulkan_with("staged_transfers_reuse_a_bounded_pool_and_chunk_long_ones", opts) else {
        return;
    };
    let n = 2 * vulkan::STAGING_MAX + 12_345;
    let b = vk.alloc(n + 8, MemoryKind::Device).unwrap();
    let data = pattern(n, 3);
    vk.upload(b, 5, &data).unwrap();
    assert_eq!(download(&mut vk, b, 5, n), data, "chunked round trip at an unaligned offset");
    // Many small transfers of a few sizes: the pool keeps one size class each, reused.
    let small = vk.alloc(300_000, MemoryKind::Device).unwrap();
    for step in 0..20u32 {
        for len in [1usize, 100, 70_000, 299_999] {
            let d = pattern(len, step);
            vk.upload(small, 1, &d).unwrap();
            if step % 5 == 0 {
                assert_eq!(download(&mut vk, small, 1, len), d, "step {step}, {len} bytes");
            }
        }
    }
    let pool = vk.staging_pool();
    let mut classes: Vec<usize> = pool.clone();
    classes.sort_unstable();
    classes.dedup();
    assert_eq!(classes, vec![vulkan::STAGING_MIN, 128 << 10, 512 << 10, vulkan::STAGING_MAX], "pool {pool:?}");
    for c in classes {
        let k = pool.iter().filter(|&&s| s == c).count();
        assert!((1..=vulkan::STAGING_PER_CLASS).contains(&k), "{k} staging buffers of {c} bytes: {pool:?}");
    }
    let before = vk.staging_pool();
    for step in 0..10 {
        vk.upload(small, 0, &pattern(70_000, step)).unwrap();
    }
    vk.synchronize().unwrap();
    assert_eq!(vk.staging_pool(), before, "reusing a size class allocates nothing");
    common::assert_clean(&vk);
}

#[test]
fn uploads_are_ordered_with_in_flight_splits() {
    for vk in both_modes("uploads_are_ordered_with_in_flight_splits") {
        uploads_are_ordered(vk);
    }
}

fn uploads_are_ordered(mut vk: VulkanBackend) {
    let mut g = graph::Graph::new();
    let x = g.input("x", graph::DType::F32, &[5000]).unwrap();
    let y = g.scale(x, 2.0).unwrap();
    g.set_output(y);
    let xbuf = vk.alloc(5000 * 4, MemoryKind::Device).unwrap();
    let outs: Vec<BufferId> = (0..4).map(|_| vk.alloc(5000 * 4, MemoryKind::Device).unwrap()).collect();
    let inputs: Vec<Vec<f32>> = (0..4).map(|k| common::data(5000, k, -10.0, 10.0)).collect();
    // Upload, compute, upload over the same input, compute, ... with no wait in between: each
    // upload must land after the previous split read the input and before the next one does.
    for (xs, &o) in inputs.iter().zip(&outs) {
        let mut b = Bindings::new(g.len());
        b.bind(x, TensorLoc { buffer: xbuf, offset: 0 });
        b.bind(y, TensorLoc { buffer: o, offset: 0 });
        vk.upload(xbuf, 0, &common::f32_bytes(xs)).unwrap();
        vk.compute(SplitTask { graph: &g, nodes: &[y], bindings: &b }).unwrap();
    }
    for (xs, &o) in inputs.iter().zip(&outs) {
        let got = common::to_f32(&download(&mut vk, o, 0, 5000 * 4));
        let want: Vec<f32> = xs.iter().map(|v| v * 2.0).collect();
        assert_eq!(got, want);
    }
    common::assert_clean(&vk);
}

/// Eight threads open a device with the validation layer at the same moment and use it: device
/// creation is serialized inside the backend (the layer once crashed in CI while test threads
/// created devices in parallel), so every one opens, works and stays silent.
#[test]
fn devices_opened_from_many_threads_at_once() {
    let Some(probe) = common::vulkan("devices_opened_from_many_threads_at_once") else { return };
    drop(probe);
    let start = std::sync::Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8u8)
        .map(|i| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut vk = common::vulkan("devices_opened_from_many_threads_at_once").expect("opened once already");
                let b = vk.alloc(64, MemoryKind::Device).unwrap();
                vk.upload(b, 0, &[i; 64]).unwrap();
                let mut out = [0u8; 64];
                vk.download(b, 0, &mut out).unwrap();
                assert_eq!(out, [i; 64]);
                common::assert_clean(&vk);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a thread failed");
    }
}
