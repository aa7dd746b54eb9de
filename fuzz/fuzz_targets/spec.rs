//! libFuzzer target: any text through `sampling::Chain::parse` (the SPEC language of `cargo xtask
//! sample --chain`, the runner's `--seq` and a server's requests) is a chain or an error naming
//! what is wrong; never a panic. A chain that parses runs on a small row without panicking
//! (a bad parameter that parsing let through must be an error there, not a crash).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(mut chain) = sampling::Chain::parse(text) {
        let row = [0.5f32, -1.0, 3.0, 2.0, f32::NEG_INFINITY, 0.0, 1.5, -0.25];
        let _ = chain.run(&row);
    }
});
