//! Device selection and availability: an impossible device choice is reported as
//! `BackendError::Unavailable` naming the cause (no panic); the opened device answers the basic
//! buffer calls and keeps the validation layer silent.

mod common;

use sched::{Backend, BackendError, MemoryKind};
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
        let region = sched::CopyRegion { src_offset: 37, dst_offset: 10, len: 256 };
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
