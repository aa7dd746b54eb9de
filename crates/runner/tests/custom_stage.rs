//! A sampler stage defined outside `sampling` (`examples/ban_sequences.rs`) runs in a mixed batch
//! on the CPU backend and on Vulkan, token for token equal to the chains alone on the CPU, and its
//! bans hold.
#[path = "../examples/ban_sequences.rs"]
mod example;

fn check(backend: Box<dyn sched::Backend>) {
    let (placements, tokens) = example::run(backend, 40).unwrap();
    assert_eq!(
        placements,
        ["+ban_sequences +dist", "+min_p +ban_sequences +dist", "+top_k -ban_sequences -greedy", "+top_k +temp +dist"]
    );
    let banned = |t: &[u32]| {
        t.contains(&0) || t.windows(2).any(|w| w == [1, 2] || w == [3, 3]) || t.windows(3).any(|w| w == [5, 6, 7])
    };
    for t in &tokens[..3] {
        assert!(!banned(t), "{t:?}");
    }
    // The chain without the stage does produce what the others ban.
    assert!(banned(&tokens[3]), "{:?}", tokens[3]);
}

#[test]
fn a_stage_from_outside_the_crate_runs_on_the_cpu_backend() {
    check(Box::new(cpu::CpuBackend::new()));
}

#[test]
fn a_stage_from_outside_the_crate_runs_on_vulkan() {
    match vulkan::VulkanBackend::new() {
        Ok(vk) => check(Box::new(vk)),
        Err(e) => {
            sched::testing::skip("a_stage_from_outside_the_crate_runs_on_vulkan", format!("no Vulkan device ({e})"))
        }
    }
}
