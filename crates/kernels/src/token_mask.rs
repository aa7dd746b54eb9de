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

/// Each entry's bit in its word (also `select`'s masked maxima).
pub(crate) const LANE: [u32; 32] = {
    let mut l = [0u32; 32];
    let mut b = 0;
    while b < 32 {
        l[b] = 1 << b;
        b += 1;
    }
    l
};

/// 32 entries through one word: copied where the word allows all of them, `x + -inf` where it
/// allows none, else a select per entry on its bit (branch-free, so it vectorises).
#[inline(always)]
fn mask_word(xs: &[f32; 32], word: u32, os: &mut [f32; 32]) {
    match word {
        u32::MAX => *os = *xs,
        0 => {
            for (o, &v) in os.iter_mut().zip(xs) {
                *o = v + f32::NEG_INFINITY;
            }
        }
        _ => {
            for ((o, &v), &lane) in os.iter_mut().zip(xs).zip(&LANE) {
                *o = if word & lane != 0 { v } else { v + f32::NEG_INFINITY };
            }
        }
    }
}

#[inline(always)]
fn mask_vocab_body<const FAST: bool>(x: &[f32], bits: &[u32], out: &mut [f32]) {
    debug_assert_eq!(x.len(), out.len());
    let mut xc = x.chunks_exact(32);
    let mut oc = out.chunks_exact_mut(32);
    let mut j = 0;
    for (xs, os) in (&mut xc).zip(&mut oc) {
        let word = bits.get(j).copied().unwrap_or(0);
        mask_word(xs.try_into().expect("32 entries"), word, os.try_into().expect("32 entries"));
        j += 1;
    }
    let word = bits.get(j).copied().unwrap_or(0);
    for (b, (o, &v)) in oc.into_remainder().iter_mut().zip(xc.remainder()).enumerate() {
        *o = masked(v, word >> b & 1 != 0);
    }
}

crate::dispatch!(
    /// A row in vocabulary order (entry `i` is token `i`) through the mask into `out` (the length
    /// of `x`): each word is read once, for its 32 entries (copied where it allows them all, banned
    /// at once where it allows none); entries past the last word are banned.
    pub fn mask_vocab(x: &[f32], bits: &[u32], out: &mut [f32]) -> () => mask_vocab_body
);

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
    fn whole_words_and_mixed_words_mask_alike() {
        // Words allowing all, none and some of their entries, a row not a multiple of 32 long,
        // and the special values (a ban of NaN or +inf is NaN).
        let x: Vec<f32> = (0..200)
            .map(|i| match i % 37 {
                5 => f32::NAN,
                6 => f32::INFINITY,
                7 => f32::NEG_INFINITY,
                _ => i as f32 * 0.5 - 30.0,
            })
            .collect();
        let bits = [u32::MAX, 0, 0x1234_5678, u32::MAX, 0, 0xffff_0000, 0b1011];
        let mut got = vec![0.0; 200];
        mask_vocab(&x, &bits, &mut got);
        let mut want = vec![0.0; 200];
        mask_vocab_body::<false>(&x, &bits, &mut want);
        for (t, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let r = masked(x[t], allowed(&bits, t as i64));
            assert_eq!(g.to_bits(), r.to_bits(), "entry {t}");
            assert_eq!(w.to_bits(), r.to_bits(), "entry {t}");
        }
        // Fewer words than the row needs: the rest is banned.
        mask_vocab(&x, &bits[..2], &mut got);
        assert!(got[64..].iter().zip(&x[64..]).all(|(&g, &v)| g.to_bits() == (v + f32::NEG_INFINITY).to_bits()));
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
