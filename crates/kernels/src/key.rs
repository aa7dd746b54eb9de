//! The one order of floats, shared by every ordering op of the CPU backend (`argmax`, `top_k`,
//! `argsort`), its selections and those of the samplers: [`order_key`] maps an f32 to a `u32` whose
//! integer order is the float order, with **-0.0 tied with +0.0** and **every NaN, whatever its sign
//! or payload, above +inf** (all NaNs tie). `graph::Op::Argmax`/`TopK`/`Argsort` specify this order:
//! a row holding a NaN lists it first, where a check of the first result finds it (x86's default
//! NaN, from `inf - inf`, has its sign bit set; the IEEE total order would rank it below `-inf`).
//!
//! Also here: its inverse [`from_order_key`], the largest key of a row ([`max_key`], and
//! [`block_max_key`] through the float max scan), and the composite `u64` keys that selections sort
//! on, so that every entry is distinct and an integer sort or `select_nth_unstable` is exact:
//! [`index_key`] (ties: lower index first, the ops' rule) and [`rank_key`] (the same order for the
//! samplers' `(id, logit)` pairs, which also remembers a zero's sign).

/// The ordering key of a float: an unsigned integer whose order is the float order, with -0.0
/// mapped to +0.0 (so they tie) and every NaN, whatever its sign, above +inf (key `u32::MAX`, so
/// NaNs tie and the lower index wins). See the module documentation.
#[inline(always)]
pub fn order_key(x: f32) -> u32 {
    // Negative floats map to `-bits` (two's complement; -0.0 gives 0x8000_0000), non-negative ones to
    // `bits | 0x8000_0000` (+0.0 gives 0x8000_0000 too); NaN to the top. Branch-free (a select), so
    // it vectorises.
    let b = x.to_bits();
    let m = ((b as i32) >> 31) as u32;
    let k = ((b ^ m).wrapping_sub(m)) | (!m & 0x8000_0000);
    if x.is_nan() { u32::MAX } else { k }
}

/// The float whose [`order_key`] is `key` (+0.0 for the key of both zeros); a NaN for NaN keys.
#[inline(always)]
pub fn from_order_key(key: u32) -> f32 {
    if key & 0x8000_0000 != 0 { f32::from_bits(key & 0x7fff_ffff) } else { f32::from_bits(key.wrapping_neg()) }
}

#[inline(always)]
fn max_key_body<const FMA: bool>(x: &[f32]) -> u32 {
    // An integer max reduction: associative, so LLVM's loop vectoriser handles it on its own.
    x.iter().map(|&v| order_key(v)).max().unwrap_or(0)
}
crate::dispatch!(
    /// The largest [`order_key`] in `x` (0 for an empty slice).
    pub fn max_key(x: &[f32]) -> u32 => max_key_body
);

/// The largest [`order_key`] in `x` (0 for an empty slice), through the float max scan
/// ([`crate::row::max_bad`], one vector max per 8 entries) unless `x` holds a NaN, whose place in the
/// order only the integer key knows ([`max_key`] then). Also says whether a NaN was seen.
pub fn block_max_key(x: &[f32]) -> (u32, bool) {
    if x.is_empty() {
        return (0, false);
    }
    let (m, bad) = crate::row::max_bad(x);
    if bad && x.iter().any(|v| v.is_nan()) { (max_key(x), true) } else { (order_key(m), false) }
}

/// The composite of entry `i` of value key `key` (an [`order_key`]): larger is better (higher key,
/// then lower index), every entry distinct. The low half is `u32::MAX - i`, so [`key_index`] reads
/// `i` back.
#[inline(always)]
pub fn index_key(key: u32, i: usize) -> u64 {
    u64::from(key) << 32 | u64::from(u32::MAX - i as u32)
}

/// The index of an [`index_key`].
#[inline(always)]
pub fn key_index(k: u64) -> u32 {
    u32::MAX - k as u32
}

/// [`order_key`] of both zeros.
const ZERO_KEY: u32 = 0x8000_0000;
/// The id bits of a [`rank_key`].
const ID_MASK: u32 = 0x7fff_ffff;

/// The sort key of the samplers' `(id, logit)` pairs: larger is better. Orders by [`order_key`]
/// (-0.0 ties +0.0), then lower id: the order of [`crate::select::desc`], by which the sampler chain
/// sorts its candidate lists, and of the graph's `top_k` op, so the raw-row selections, the list
/// paths and the backend's lists agree, signed zeros included. Bits 1..32 hold `2^31 - 1 - id`
/// (`id` must be below `2^31`; vocabularies are far smaller), bit 0 the zero's sign (set for every
/// value but -0.0, below the id so that it orders nothing): [`rank_key_value`] decodes the pair
/// exactly, signed zero included.
#[inline(always)]
pub fn rank_key(id: u32, x: f32) -> u64 {
    debug_assert!(id <= ID_MASK);
    let not_neg_zero = u64::from(x.to_bits() != 0x8000_0000);
    u64::from(order_key(x)) << 32 | u64::from(ID_MASK - id) << 1 | not_neg_zero
}

/// The `(id, logit)` of a [`rank_key`] (bit-exact for every value but NaN, which decodes to a NaN).
#[inline(always)]
pub fn rank_key_value(k: u64) -> (u32, f32) {
    let key = (k >> 32) as u32;
    let x = if key == ZERO_KEY && k & 1 == 0 { -0.0 } else { from_order_key(key) };
    (ID_MASK - ((k >> 1) as u32 & ID_MASK), x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule: -0.0 ties +0.0, every NaN (either sign, any payload) ties the others above +inf,
    /// otherwise the float order; [`from_order_key`] inverts it (zeros to +0.0).
    #[test]
    fn order_key_is_total_order() {
        let vals = [f32::NEG_INFINITY, -3.5, -1e-30, -0.0, 0.0, 1e-40, 2.0, f32::INFINITY, f32::NAN];
        for w in vals.windows(2) {
            assert!(order_key(w[0]) <= order_key(w[1]), "{} vs {}", w[0], w[1]);
        }
        assert_eq!(order_key(-0.0), order_key(0.0));
        assert!(order_key(-1.0) < order_key(-0.5));
        // Every NaN ranks above +inf, whatever its sign, and NaNs tie.
        assert_eq!(order_key(f32::from_bits(0xffc0_0000)), u32::MAX);
        assert_eq!(order_key(f32::from_bits(0x7fc0_0001)), u32::MAX);
        assert_eq!(order_key(f32::from_bits(0xff80_0001)), u32::MAX);
        assert!(order_key(f32::NAN) > order_key(f32::INFINITY));
        for &v in &vals[..vals.len() - 1] {
            let back = from_order_key(order_key(v));
            assert!(back == v && (v != 0.0 || back.to_bits() == 0), "{v} -> {back}");
        }
        assert!(from_order_key(order_key(f32::NAN)).is_nan());
    }

    /// Exhaustive over a sample of bit patterns: key order is float order (`partial_cmp`) for every
    /// pair of non-NaN floats, and NaNs sit above everything.
    #[test]
    fn order_key_agrees_with_float_comparison() {
        let mut xs: Vec<f32> = (0..4000u32).map(|i| f32::from_bits(i.wrapping_mul(1_073_807_359))).collect();
        xs.extend([0.0, -0.0, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, f32::MAX, f32::MIN, f32::INFINITY]);
        xs.push(f32::NEG_INFINITY);
        for &a in &xs {
            for &b in xs.iter().step_by(7) {
                let by_key = order_key(a).cmp(&order_key(b));
                match a.partial_cmp(&b) {
                    Some(o) => assert_eq!(by_key, o, "{a} vs {b}"),
                    None => assert_eq!(by_key, u32::from(!a.is_nan()).cmp(&u32::from(!b.is_nan())), "{a} vs {b}"),
                }
            }
        }
    }

    #[test]
    fn max_key_matches_the_float_max() {
        let x: Vec<f32> = (0..1003).map(|i| ((i * 7919) % 1000) as f32 * 0.01 - 5.0).collect();
        let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(max_key(&x), order_key(m));
    }

    #[test]
    fn block_max_key_matches_the_integer_scan() {
        let mut x: Vec<f32> = (0..1000).map(|i| ((i * 7919) % 1000) as f32 * 0.01 - 5.0).collect();
        assert_eq!(block_max_key(&x), (max_key(&x), false));
        x[500] = f32::INFINITY;
        assert_eq!(block_max_key(&x), (order_key(f32::INFINITY), false));
        x[17] = f32::NAN;
        assert_eq!(block_max_key(&x), (max_key(&x), true));
        x[17] = -f32::NAN;
        assert_eq!(block_max_key(&x), (u32::MAX, true));
        assert_eq!(block_max_key(&[-0.0, 0.0]).0, order_key(0.0));
        assert_eq!(block_max_key(&[]), (0, false));
    }

    #[test]
    fn composite_keys() {
        let xs = [f32::NEG_INFINITY, -1.5, -0.0, 0.0, 1e-30, 2.0, 2.0, f32::MAX, f32::INFINITY];
        for (i, &a) in xs.iter().enumerate() {
            let (id, back) = rank_key_value(rank_key(i as u32, a));
            assert_eq!((id, back.to_bits()), (i as u32, a.to_bits()));
            assert_eq!(key_index(index_key(order_key(a), i)), i as u32);
            for (j, &b) in xs.iter().enumerate() {
                // The ops' rule: zeros tie, lower index first.
                let want = order_key(a).cmp(&order_key(b)).then(j.cmp(&i));
                assert_eq!(index_key(order_key(a), i).cmp(&index_key(order_key(b), j)), want, "{a} {b}");
            }
        }
        assert_eq!(rank_key_value(rank_key(ID_MASK, 1.0)), (ID_MASK, 1.0));
    }
}
