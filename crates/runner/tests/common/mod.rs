//! Helpers shared by the runner's integration tests: the SmolLM2 model, loaded once per test binary,
//! and the loud skip of a Vulkan test without a device.
#![allow(dead_code, clippy::print_stderr)]

use runner::Model;
use std::sync::{Arc, OnceLock};

/// SmolLM2-135M-Instruct from `target/models` (fetched there if missing), loaded once.
pub fn smollm2() -> Arc<Model> {
    static M: OnceLock<Arc<Model>> = OnceLock::new();
    M.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/models");
        let path =
            runner::fetch::smollm2(&dir).expect("fetching SmolLM2 (network needed once; or `cargo xtask fetch-model`)");
        Arc::new(Model::from_gguf(&path).unwrap())
    })
    .clone()
}

/// Whether a Vulkan device opens; without one, says loudly that the test is skipped (and fails
/// where `SAMPLING_REQUIRE_VULKAN` is set, as in CI).
pub fn vulkan_available() -> bool {
    if vulkan::VulkanBackend::new().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("SAMPLING_REQUIRE_VULKAN").is_none(),
        "SAMPLING_REQUIRE_VULKAN is set but no Vulkan device"
    );
    eprintln!("SKIPPED: no Vulkan device");
    false
}
