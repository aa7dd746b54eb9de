//! libFuzzer target: the byte-level BPE tokenizer (`checks::tokenizer`).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::tokenizer(data));
