//! libFuzzer target: GBNF grammars and their matcher (`checks::gbnf`).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::gbnf(data));
