//! The one way a test skips for want of something the machine may lack (a Vulkan device, a tool
//! such as `glslc` or `dot`): it says so in one recognisable line, `SKIPPED <test>: <reason>`, and
//! under CI it fails instead, so that no test passes there by skipping.

use std::fmt::Display;

/// Whether skipping is refused: under `CI=true` (or `CI=1`), or `SAMPLING_REQUIRE_VULKAN=1` (which
/// `cargo xtask ci` sets under CI).
pub fn skips_refused() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
        || std::env::var("SAMPLING_REQUIRE_VULKAN").is_ok_and(|v| v == "1")
}

/// Skips test `test` because of `reason`: prints `SKIPPED <test>: <reason>` to stderr, or, where
/// skipping is refused ([`skips_refused`]), panics with it.
#[allow(clippy::print_stderr)]
pub fn skip(test: &str, reason: impl Display) {
    assert!(!skips_refused(), "{test} cannot run here, and skipping is refused under CI: {reason}");
    eprintln!("SKIPPED {test}: {reason}");
}
