//! Allowed-token bitmasks: token `t` is allowed iff `0 <= t < 32 bits.len()` and bit `t % 32` of
//! `bits[t / 32]` is set (bit 0 the least significant), and a banned value is `x + -inf` in f32
//! (finite and `-inf` become `-inf`, NaN and `+inf` become NaN, as the CPU constraint samplers'
//! bans). The one arithmetic of the CPU backend's `token_mask` op, for the CPU sampler's masks to
//! share; the Vulkan shader `shaders/token_mask.comp` repeats it in GLSL and the conformance suite
//! holds both to the reference.

/// Whether the mask `bits` allows token `t` (any negative `t`, such as -1 padding, is banned, and
/// so is every token at or past `32 bits.len()`).
#[inline]
pub fn allowed(bits: &[u32], t: i64) -> bool {
    if t < 0 {
        return false;
    }
    let t = t as u64;
    usize::try_from(t / 32).ok().and_then(|w| bits.get(w)).is_some_and(|&word| word >> (t % 32) & 1 != 0)
}

/// `x` where `allowed`, else `x + -inf`.
#[inline]
pub fn masked(x: f32, allowed: bool) -> f32 {
    if allowed { x } else { x + f32::NEG_INFINITY }
}

/// A row in vocabulary order (entry `i` is token `i`) through the mask into `out` (the length of
/// `x`): each word is read once, for its 32 entries; entries past the last word are banned.
pub fn mask_vocab(x: &[f32], bits: &[u32], out: &mut [f32]) {
    debug_assert_eq!(x.len(), out.len());
    for (j, (xs, os)) in x.chunks(32).zip(out.chunks_mut(32)).enumerate() {
        let word = bits.get(j).copied().unwrap_or(0);
        for (b, (o, &v)) in os.iter_mut().zip(xs).enumerate() {
            *o = masked(v, word >> b & 1 != 0);
        }
    }
}

/// A candidate list (`x` with the token id of each entry in `ids`) through the mask into `out`.
pub fn mask_ids(x: &[f32], ids: &[i32], bits: &[u32], out: &mut [f32]) {
    debug_assert!(x.len() == ids.len() && x.len() == out.len());
    for ((o, &v), &t) in out.iter_mut().zip(x).zip(ids) {
        *o = masked(v, allowed(bits, i64::from(t)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_little_endian_within_words_and_the_mask_ends_with_the_words() {
        let bits = [0x8000_0001u32, 0b100];
        for (t, want) in [(0, true), (1, false), (31, true), (32, false), (34, true), (63, false), (64, false)] {
            assert_eq!(allowed(&bits, t), want, "token {t}");
        }
        assert!(!allowed(&bits, -1) && !allowed(&bits, i64::from(i32::MIN)) && !allowed(&bits, i64::MAX));
        assert!(!allowed(&[], 0));
    }

    #[test]
    fn a_ban_adds_minus_infinity() {
        let ninf = f32::NEG_INFINITY;
        assert_eq!(masked(2.5, false), ninf);
        assert_eq!(masked(ninf, false), ninf);
        assert!(masked(f32::NAN, false).is_nan() && masked(f32::INFINITY, false).is_nan());
        assert_eq!(masked(-0.0, true).to_bits(), (-0.0f32).to_bits());
        assert!(masked(f32::NAN, true).is_nan());
        assert_eq!(masked(f32::INFINITY, true), f32::INFINITY);
    }

    #[test]
    fn vocabulary_and_list_forms_agree() {
        let x: Vec<f32> = (0..70).map(|i| i as f32 - 20.0).collect();
        let bits = [0xdead_beefu32, 0x0f0f_f0f0];
        let mut a = vec![0.0; 70];
        mask_vocab(&x, &bits, &mut a);
        let ids: Vec<i32> = (0..70).collect();
        let mut b = vec![0.0; 70];
        mask_ids(&x, &ids, &bits, &mut b);
        assert_eq!(a, b);
        for (t, &v) in a.iter().enumerate() {
            assert_eq!(v, if allowed(&bits, t as i64) { x[t] } else { f32::NEG_INFINITY }, "entry {t}");
        }
        assert!(a[64..].iter().all(|&v| v == f32::NEG_INFINITY));
    }
}
