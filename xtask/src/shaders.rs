//! `cargo xtask shaders`: compiles every variant of `vulkan::shaders::VARIANTS` with glslc into
//! `shaders/spv/<name>.spv` (commit the result; a test in crates/vulkan fails when they drift).
//! A new variant needs its `.spv` file to exist before the vulkan crate builds: create an empty
//! one first (`touch shaders/spv/NAME.spv`), then run this task.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use vulkan::shaders::{VARIANTS, glslc_command};

pub fn run(args: impl Iterator<Item = String>) -> Result<()> {
    let rest: Vec<String> = args.skip(1).collect();
    if !rest.is_empty() {
        bail!("usage: cargo xtask shaders (no arguments; GLSLC overrides the compiler)");
    }
    let glslc = std::env::var("GLSLC").unwrap_or_else(|_| "glslc".into());
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shaders");
    std::fs::create_dir_all(dir.join("spv"))?;
    let mut changed = 0;
    for v in VARIANTS {
        let out = dir.join("spv").join(format!("{}.spv", v.name));
        let before = std::fs::read(&out).unwrap_or_default();
        let status = glslc_command(&glslc, &dir, v, &out)
            .status()
            .with_context(|| format!("running {glslc} (install glslc, e.g. apt-get install glslc)"))?;
        if !status.success() {
            bail!("glslc failed on {} ({})", v.source, v.name);
        }
        let after = std::fs::read(&out)?;
        if after != before {
            changed += 1;
            println!("updated shaders/spv/{}.spv", v.name);
        }
    }
    println!("{} variants, {changed} updated", VARIANTS.len());
    Ok(())
}
