//! Helpers shared by the runner's integration tests: the SmolLM2 model, loaded once per test binary.
#![allow(dead_code)]

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
