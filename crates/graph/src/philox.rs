//! The counter-based random generator that defines `Op::RandomUniform` and every random sampler.
//!
//! There is exactly one implementation of it in Rust (this module); the CPU backend's random op, the
//! CPU samplers and the Vulkan shader (`shaders/random.comp`) all compute the same bits, so a given
//! (seed, step, element) gives the same number on every backend and whatever else is in the batch.
//!
//! # Specification (bit-exact; re-implement from this text)
//!
//! The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
//!
//! * key `k = [k0, k1]` with `k0 = seed as u32`, `k1 = (seed >> 32) as u32` (`seed: u64`);
//! * counter `c = [c0, c1, c2, c3]` with `c0 = element as u32`, `c1 = (element >> 32) as u32`,
//!   `c2 = step as u32`, `c3 = (step >> 32) as u32` (`element`, `step`: u64);
//! * ten rounds; each round computes the full 64-bit products `p0 = 0xD2511F53 * c0` and
//!   `p1 = 0xCD9E8D57 * c2` (in GLSL: `umulExtended`), then
//!   `c = [hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0)]`, and, between rounds (after every
//!   round but the last, equivalently before every round but the first), bumps the key with wrapping
//!   adds `k0 += 0x9E3779B9`, `k1 += 0xBB67AE85`;
//! * the output is the four words `c` after the tenth round.
//!
//! A uniform `f32` in `[0, 1)` is made from the first output word `x = c[0]` as
//! `(x >> 8) as f32 * 2^-24`: 24 random bits, exactly representable, never 1.0. A uniform `f64`
//! (for inverse-CDF draws) is made from the first two words as `((c[0] << 32 | c[1]) >> 11) as f64
//! * 2^-53`: 53 random bits.
//!
//! The element index is the position of the value inside the row that asks for it (`i0` of the
//! tensor); samplers that need several independent numbers per step use disjoint element ranges
//! (see [`stream`]).

/// Philox multiplier for the first pair of words.
pub const PHILOX_M0: u32 = 0xD251_1F53;
/// Philox multiplier for the second pair of words.
pub const PHILOX_M1: u32 = 0xCD9E_8D57;
/// Weyl increment of the first key word.
pub const PHILOX_W0: u32 = 0x9E37_79B9;
/// Weyl increment of the second key word.
pub const PHILOX_W1: u32 = 0xBB67_AE85;
/// Number of rounds.
pub const PHILOX_ROUNDS: usize = 10;

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

/// One Philox4x32-10 block: four 32-bit words for `counter` under `key`.
#[inline]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..PHILOX_ROUNDS {
        if round > 0 {
            k[0] = k[0].wrapping_add(PHILOX_W0);
            k[1] = k[1].wrapping_add(PHILOX_W1);
        }
        let (hi0, lo0) = mulhilo(PHILOX_M0, c[0]);
        let (hi1, lo1) = mulhilo(PHILOX_M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The four raw words for (seed, step, element), laid out as the module documentation specifies.
#[inline]
pub fn bits(seed: u64, step: u64, element: u64) -> [u32; 4] {
    philox4x32_10(
        [element as u32, (element >> 32) as u32, step as u32, (step >> 32) as u32],
        [seed as u32, (seed >> 32) as u32],
    )
}

/// Maps a 32-bit word to a uniform `f32` in `[0, 1)` using its top 24 bits.
#[inline(always)]
pub fn u32_to_unit_f32(x: u32) -> f32 {
    (x >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// The uniform `f32` in `[0, 1)` for (seed, step, element): the value `Op::RandomUniform` produces.
#[inline]
pub fn uniform(seed: u64, step: u64, element: u64) -> f32 {
    u32_to_unit_f32(bits(seed, step, element)[0])
}

/// The 64 random bits for (seed, step, element): the first output word in the high half, the
/// second in the low half.
#[inline]
pub fn bits_u64(seed: u64, step: u64, element: u64) -> u64 {
    let w = bits(seed, step, element);
    (u64::from(w[0]) << 32) | u64::from(w[1])
}

/// A uniform `f64` in `[0, 1)` with 53 random bits for (seed, step, element): the top 53 bits of
/// [`bits_u64`] times `2^-53` (exact, never 1.0). Inverse-CDF draws use it so that probabilities
/// far below `2^-24` are resolved: `Op::Categorical` and the CPU samplers' final draws.
#[inline]
pub fn uniform_f64(seed: u64, step: u64, element: u64) -> f64 {
    (bits_u64(seed, step, element) >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Element offsets that keep the independent random streams of one step apart.
///
/// A row's own values use elements `0..n` (`n` below 2^32); a sampler that needs extra numbers in the
/// same step takes them from its own stream, `stream::BASE * s + i`, so no two uses share a counter.
pub mod stream {
    /// Distance between streams: above any row length.
    pub const BASE: u64 = 1 << 32;
    /// The final draw of `dist` (and of every sampler that selects a token by inverse CDF).
    pub const DRAW: u64 = 0;
    /// The XTC sampler's "do I apply this step" coin.
    pub const XTC: u64 = 1;
    /// The mirostat samplers' draw.
    pub const MIROSTAT: u64 = 2;
    /// Speculative verification's acceptance coins.
    pub const SPECULATIVE: u64 = 3;
    /// The first stream a sampler stage defined outside the library takes for its own numbers
    /// (`FIRST_USER + j` for its `j`-th use): the library keeps 0 to 15.
    pub const FIRST_USER: u64 = 16;

    /// Element index `i` of stream `s`.
    #[inline]
    pub const fn element(s: u64, i: u64) -> u64 {
        s * BASE + i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known answers from the Random123 distribution's `kat_vectors` for philox4x32_10.
    #[test]
    fn random123_known_answers() {
        assert_eq!(philox4x32_10([0, 0, 0, 0], [0, 0]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        assert_eq!(philox4x32_10([u32::MAX; 4], [u32::MAX; 2]), [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]);
        assert_eq!(
            philox4x32_10([0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344], [0xa409_3822, 0x299f_31d0]),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn counter_layout_matches_spec() {
        let (seed, step, element) = (0x0123_4567_89ab_cdefu64, 0x1111_2222_3333_4444u64, 0x5555_6666_7777_8888u64);
        assert_eq!(
            bits(seed, step, element),
            philox4x32_10([0x7777_8888, 0x5555_6666, 0x3333_4444, 0x1111_2222], [0x89ab_cdef, 0x0123_4567])
        );
    }

    #[test]
    fn uniform_is_in_unit_interval_and_uses_top_bits() {
        assert_eq!(u32_to_unit_f32(0), 0.0);
        assert_eq!(u32_to_unit_f32(u32::MAX), 1.0 - 1.0 / 16_777_216.0);
        assert_eq!(u32_to_unit_f32(0xff), 0.0);
        assert_eq!(u32_to_unit_f32(0x100), 1.0 / 16_777_216.0);
    }

    #[test]
    fn uniform_known_answers() {
        // Pinned values: any change to the generator or its counter layout breaks every backend's
        // reproducibility contract, so it must show up here first.
        let got: Vec<u32> = (0..4).map(|e| bits(42, 7, e)[0]).collect();
        assert_eq!(got, [0x67ee_6f2c, 0xe5dd_e940, 0x24ec_fc6e, 0x945b_cada]);
        assert_eq!(uniform(42, 7, 0), (0x67ee_6f2c_u32 >> 8) as f32 / 16_777_216.0);
        assert_eq!(uniform(42, 7, 0), 0.405_981_96);
        assert_ne!(bits(42, 7, 0), bits(42, 8, 0));
        assert_ne!(bits(42, 7, 0), bits(43, 7, 0));
        assert_ne!(bits(42, 7, 0), bits(42, 7, stream::element(stream::XTC, 0)));
    }

    #[test]
    fn uniform_f64_uses_both_words() {
        let w = bits(42, 7, 0);
        assert_eq!(bits_u64(42, 7, 0), (u64::from(w[0]) << 32) | u64::from(w[1]));
        let u = uniform_f64(42, 7, 0);
        assert!((0.0..1.0).contains(&u));
        // Its top 24 bits are the f32 uniform's.
        assert_eq!((u * 16_777_216.0).floor() as f32 / 16_777_216.0, uniform(42, 7, 0));
        assert_eq!(uniform_f64(0, 0, 0), (bits_u64(0, 0, 0) >> 11) as f64 / 9_007_199_254_740_992.0);
    }

    #[test]
    fn uniform_mean_and_buckets_are_flat() {
        let n = 200_000u64;
        let mut buckets = [0u32; 16];
        let mut sum = 0.0f64;
        for e in 0..n {
            let u = uniform(9, 1, e);
            assert!((0.0..1.0).contains(&u));
            sum += f64::from(u);
            buckets[(u * 16.0) as usize] += 1;
        }
        assert!((sum / n as f64 - 0.5).abs() < 0.005);
        let expected = n as f64 / 16.0;
        let chi2: f64 = buckets.iter().map(|&b| (f64::from(b) - expected).powi(2) / expected).sum();
        // 15 degrees of freedom: p = 0.001 at 37.7.
        assert!(chi2 < 37.7, "chi2 = {chi2}");
    }
}
