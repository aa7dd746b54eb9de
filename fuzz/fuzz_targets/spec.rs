//! libFuzzer target: the SPEC chain language (`checks::spec`).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::spec(data));
