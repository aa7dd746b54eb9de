//! libFuzzer target: any bytes through `npy::parse` are an array whose element count is its
//! shape's product, or an error; never a panic, an abort or an allocation the file does not back
//! (a header declaring a huge shape over a short file is refused before anything is read).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = npy::parse(data) {
        assert_eq!(a.data.len(), a.shape.iter().product::<usize>());
    }
});
