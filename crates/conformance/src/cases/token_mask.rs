//! Cases for `token_mask` (a packed bitmask per row bans every token it does not allow): rows in
//! vocabulary order and candidate lists with token ids, of 1 to 151936 entries and 1 or 3 rows
//! (and one of 262144 entries by 64 rows);
//! masks all zero, all ones and random (three rows: one of each), with exactly the words the
//! tokens need, with words to spare, and with too few (the tokens past them banned); lists whose
//! ids hold -1 padding, other negative ids and ids past the mask; values with NaN, `+inf`, `-inf`,
//! `-0.0` and a subnormal among them, falling on allowed and banned tokens alike. Checked exactly
//! against the reference (a ban adds `-inf`: a NaN or `+inf` becomes NaN).
//!
//! And the masked `top_k` (the mask fused into the top-k, `top_k(token_mask(x, bits))`): rows of
//! 33 to 262144 entries under masks allowing nothing, everything, random words, a few sparse
//! words and too few words, on plain values, on heavy ties, and with the special values above
//! (the masked row's NaN ranks first), `k` from 1 to more than the allowed tokens; exact.

use super::Case;
use crate::compare::Cmp;
use crate::generate::{Gen, Rng};
use graph::DType;

/// The row lengths.
const SIZES: [usize; 6] = [1, 31, 32, 33, 1000, 151_936];

/// A row's mask.
#[derive(Debug, Clone, Copy)]
enum Bits {
    /// Nothing allowed.
    Zero,
    /// Every token the words reach allowed.
    Ones,
    /// Random words.
    Random,
    /// Row `r` takes `[Zero, Ones, Random][r % 3]`.
    Mixed,
}

impl Bits {
    fn name(self) -> &'static str {
        match self {
            Bits::Zero => "zero",
            Bits::Ones => "ones",
            Bits::Random => "random",
            Bits::Mixed => "mixed",
        }
    }

    /// Word `i` (as the i32 holding its bits).
    fn word(self, r: &mut Rng, i: [usize; 4]) -> f64 {
        let kind = match self {
            Bits::Mixed => [Bits::Zero, Bits::Ones, Bits::Random][i[1] % 3],
            b => b,
        };
        match kind {
            Bits::Zero => 0.0,
            Bits::Ones => -1.0,
            _ => f64::from(r.next_u32() as i32),
        }
    }
}

/// How many words a row of `m` tokens gets: exactly enough, three to spare, or about a third too
/// few (none where one word already holds every token).
fn word_counts(m: usize) -> Vec<(&'static str, usize)> {
    let exact = m.div_ceil(32);
    let mut v = vec![("exact", exact), ("extra", exact + 3)];
    if exact > 1 {
        v.push(("short", exact - exact.div_ceil(3)));
    }
    v
}

/// The values: uniform in `[-10, 10)` but for NaN, `+inf`, `-inf`, `-0.0` and a subnormal at
/// positions that move with the row and with `phase` (so one-entry rows get them too).
fn values(phase: usize) -> Gen {
    Gen::func(move |r, i| match (i[0] * 7 + i[1] * 5 + phase * 3) % 17 {
        0 => f64::NAN,
        5 => f64::INFINITY,
        10 => f64::NEG_INFINITY,
        13 => -0.0,
        15 => 1e-40,
        _ => r.unit() * 20.0 - 10.0,
    })
}

/// The token ids of a list whose mask has `w` words: mostly tokens the mask reaches, one in 16
/// each -1 (padding), past the mask (`32 w` and above), and `i32::MIN` or `i32::MAX`.
fn ids(w: usize) -> Gen {
    let reach = 32 * w as u64;
    Gen::func(move |r, _| match r.below(16) {
        0 => -1.0,
        1 => (reach + r.below(100)) as f64,
        2 => f64::from(if r.below(2) == 0 { i32::MIN } else { i32::MAX }),
        _ => r.below(reach) as f64,
    })
}

fn case(list: bool, m: usize, rows: usize, words: (&'static str, usize), bits: Bits, phase: usize) -> Case {
    let form = if list { "ids" } else { "vocab" };
    let (wname, w) = words;
    let name = format!("token_mask/{form}/{m}x{rows}/w{w}-{wname}/{}", bits.name());
    Case::new(name, move |b| {
        let x = b.input("x", DType::F32, &[m, rows], values(phase))?;
        let mask = b.input("bits", DType::I32, &[w, rows], Gen::func(move |r, i| bits.word(r, i)))?;
        let ids = if list { Some(b.input("ids", DType::I32, &[m, rows], ids(w))?) } else { None };
        let y = b.g.token_mask(x, mask, ids)?;
        b.check(y, Cmp::Exact);
        Ok(())
    })
}

/// A masked top-k's row mask: `Bits`, or a few random words among zeros (about one in 60).
fn sparse_word(r: &mut Rng, i: [usize; 4]) -> f64 {
    if (i[0] * 31 + i[1] * 7) % 61 == 5 { f64::from(r.next_u32() as i32) } else { 0.0 }
}

fn masked_top_k_case(m: usize, k: usize, mask: &'static str, vals: &'static str) -> Case {
    let name = format!("sort/top_k_masked/{m}x3/k{k}/{mask}/{vals}");
    Case::new(name, move |b| {
        let values_of = match vals {
            "special" => values(2),
            "ties" => Gen::Levels(6, -3.0, 3.0),
            _ => Gen::Uniform(-10.0, 10.0),
        };
        let x = b.input("x", DType::F32, &[m, 3], values_of)?;
        let w = if mask == "short" { m.div_ceil(32) / 2 + 1 } else { m.div_ceil(32) };
        let words = move |r: &mut Rng, i: [usize; 4]| match mask {
            "sparse" => sparse_word(r, i),
            "zero" => Bits::Zero.word(r, i),
            "ones" => Bits::Ones.word(r, i),
            _ => Bits::Mixed.word(r, i),
        };
        let bits = b.input("bits", DType::I32, &[w, 3], Gen::func(words))?;
        let y = b.g.top_k_masked(x, bits, k)?;
        b.check(y, Cmp::Exact);
        Ok(())
    })
}

/// The cases.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for m in [33, 1000, 8192, 151_936, 262_144] {
        for k in [1, 40, 512] {
            if k > m || (k == 512 && m < 8192) {
                continue;
            }
            for mask in ["mixed", "sparse", "short"] {
                v.push(masked_top_k_case(m, k, mask, "uniform"));
            }
        }
        for (mask, vals) in
            [("sparse", "ties"), ("mixed", "ties"), ("sparse", "special"), ("zero", "uniform"), ("ones", "uniform")]
        {
            v.push(masked_top_k_case(m, 40.min(m), mask, vals));
        }
    }
    for list in [false, true] {
        for m in SIZES {
            for words in word_counts(m) {
                for (phase, bits) in [Bits::Zero, Bits::Ones, Bits::Random].into_iter().enumerate() {
                    v.push(case(list, m, 1, words, bits, phase));
                }
                v.push(case(list, m, 3, words, Bits::Mixed, 0));
            }
        }
    }
    // The largest vocabulary over 64 rows: 2^24 entries, 65536 workgroups of 256 on Vulkan, one
    // more than a grid's row holds (the 2-D grid).
    v.push(case(false, 262_144, 64, ("exact", 8192), Bits::Mixed, 1));
    v
}
