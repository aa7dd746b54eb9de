//! The committed SPIR-V (`shaders/spv/*.spv`) must be exactly what glslc makes from the sources
//! with the variant table's defines: recompiles every variant and compares bytes. Without glslc the
//! test fails under CI (`CI=true` or `SAMPLING_REQUIRE_VULKAN=1`) and otherwise skips loudly.
#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::Command;
use vulkan::shaders::{VARIANTS, glslc_command};

fn shaders_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shaders")
}

#[test]
fn committed_spirv_matches_sources() {
    let glslc = std::env::var("GLSLC").unwrap_or_else(|_| "glslc".into());
    if Command::new(&glslc).arg("--version").output().is_err() {
        let why = "glslc not found (install glslc or set GLSLC) to check shaders/spv against shaders/*.comp";
        sched::testing::skip("committed_spirv_matches_sources", why);
        return;
    }
    let dir = shaders_dir();
    let tmp = std::env::temp_dir().join(format!("ggs-spirv-drift-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut stale = Vec::new();
    for v in VARIANTS {
        let out = tmp.join(format!("{}.spv", v.name));
        let status = glslc_command(&glslc, &dir, v, &out).status().expect("running glslc");
        assert!(status.success(), "glslc failed on {} ({})", v.source, v.name);
        let fresh = std::fs::read(&out).unwrap();
        if fresh != v.spirv {
            stale.push(v.name);
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(stale.is_empty(), "shaders/spv is stale for {stale:?}: run `cargo xtask shaders` and commit the result");
}
