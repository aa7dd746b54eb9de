//! libFuzzer target: any text through `graph::fixture::parse` (the graph fixture format) is a
//! graph, built through the builder's checks, or an error naming its line; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match graph::fixture::parse(text) {
        Ok(g) => {
            let _ = g.len();
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
