//! Partial read-back on the Vulkan backend through `sched::Scheduler`: an output `[V, n]` that a
//! node on the device consumes lives in device memory with a host-visible read-back region; any
//! subset of its rows (and of a transposed and a strided view of it) read with `read_rows` equals
//! the same rows of the full read, and the bytes counter moves by exactly rows x row bytes, with
//! device memory used in place and through the staging pool (`Options::staged`). The validation
//! layer must stay silent.

mod common;

use graph::{DType, Graph};
use sched::{BufferRole, Scheduler};
use std::sync::{Arc, Mutex};
use vulkan::{Options, VulkanBackend};

#[test]
fn read_rows_of_any_subset_equals_the_full_read_and_counts_exactly_its_bytes() {
    let Some(probe) = common::vulkan("read_rows_of_any_subset_equals_the_full_read") else { return };
    drop(probe);
    // In place where the device maps its memory, and through the staging pool.
    for staged in [false, true] {
        read_rows_case(staged);
    }
}

fn read_rows_case(staged: bool) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let opts = Options { validation: true, staged, log: Some(log.clone()), ..Options::default() };
    let vk = VulkanBackend::with_options(opts).unwrap();
    let mut s = Scheduler::new(vec![Box::new(vk)]).unwrap();
    let (v, n) = (1000, 6);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, &[v, n]).unwrap();
    let y = g.named("y", |g| g.scale(x, 2.0)).unwrap();
    let t = g.named("t", |g| g.transpose(y)).unwrap();
    let odd = g.named("odd", |g| g.view(y, &[v, n / 2], &[4, 8 * v], 4 * v)).unwrap();
    let z = g.named("z", |g| g.scale(y, 0.5)).unwrap();
    for o in [y, t, odd, z] {
        g.set_output(o);
    }
    let p = s.plan(&g).unwrap();
    let np = &p.nodes[y.index()];
    assert_eq!(p.buffers[np.region.unwrap().buffer].role, BufferRole::Outputs);
    let rb = np.readback.expect("a Vulkan output in device memory has a read-back region");
    assert_eq!(p.buffers[rb.buffer].role, BufferRole::ReadBack);
    let xs: Vec<f32> = (0..v * n).map(|i| ((i * 37) % 1001) as f32 * 0.25 - 100.0).collect();
    s.set_input_f32(x, &xs).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_f32(z).unwrap(), xs, "the on-device consumer read y from device memory");
    let subsets: [&[usize]; 6] = [&[], &[0], &[5], &[3, 1], &[2, 2, 0], &[0, 1, 2, 3, 4, 5]];
    for (node, rows, row_bytes) in [(y, n, 4 * v), (t, v, 4 * n), (odd, n / 2, 4 * v)] {
        let full = s.read(node).unwrap();
        assert_eq!(full.len(), rows * row_bytes);
        for subset in subsets {
            let subset: Vec<usize> = subset.iter().map(|r| r * 7 % rows).collect();
            let before = s.stats().bytes_to_host;
            let got = s.read_rows(node, &subset).unwrap();
            let want: Vec<u8> =
                subset.iter().flat_map(|&r| full[r * row_bytes..(r + 1) * row_bytes].to_vec()).collect();
            assert_eq!(got, want, "{}, rows {subset:?}, staged {staged}", g.describe(node));
            assert_eq!(s.stats().bytes_to_host - before, (subset.len() * row_bytes) as u64);
        }
    }
    // a new step: the read-back region is reused and shows the new values
    let xs2: Vec<f32> = xs.iter().map(|x| x + 1.0).collect();
    s.set_input_f32(x, &xs2).unwrap();
    s.compute().unwrap();
    assert_eq!(s.read_rows_f32(y, &[4]).unwrap(), xs2[4 * v..5 * v].iter().map(|x| x * 2.0).collect::<Vec<_>>());
    drop(s);
    let msgs = log.lock().unwrap().clone();
    assert!(msgs.is_empty(), "validation layer messages:\n{}", msgs.join("\n"));
}
