//! libFuzzer target: JSON schema to GBNF (`checks::json_schema`).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::json_schema(data));
