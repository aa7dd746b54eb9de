//! The AVX-512 VNNI register tile of the 32-element formats: [`super::dot_tile`]'s body on CPUs
//! with AVX-512 (F, BW, VL, DQ) and VNNI, each result bit-identical to [`super::dot`] of its pair.
//!
//! The AVX2 tile spends, per block and (row, column) pair, two integer instructions on the products
//! (`vpmaddubsw`, `vpmaddwd`), a scalar product of the two scales and its broadcast, a conversion
//! and an FMA on 8 lanes, and for `q4_1`/`q5_1` a scalar FMA of the `m * s` term. Here one 512-bit
//! register holds two pairs side by side (the same weight row against two columns: lanes 0-7 are
//! column `c`'s 8 partial sums, lanes 8-15 column `c + 1`'s), so each instruction does the work of
//! two:
//!
//! - the products are one `vpdpbusd` (unsigned weight bytes times signed activation bytes, four
//!   per 32-bit lane), which gives the same exact integer as `vpmaddubsw` + `vpmaddwd` (those never
//!   saturate on these formats: at most `2 * 128 * 127` per pair of bytes). The signed formats are
//!   made unsigned by an offset, `w + k` with `k` = 8 (`q4_0`), 16 (`q5_0`) or 128 (`q8_0`), and
//!   `k` times the activation bytes' sum in each lane (one `vpdpbusd` by ones per column block,
//!   shared by every row) is taken off again: still the exact integer;
//! - `d_w * d_a` is one `vmulps` of the row's broadcast `d_w` with the column pair's `d_a`s (the
//!   same rounded product as the scalar one), the conversion and FMA one instruction each;
//! - the `m_w * s_a` sums of a row run in the lanes of one 256-bit register (lane `c`: column `c`),
//!   one FMA per row and block (the same fused multiply-add, in the same order, as the scalar chain).
//!
//! At the end each pair's 8 lanes are summed as `dot` sums them ([`super::hsum8`]) and its `m * s`
//! sum added. An odd last column is paired with itself (its second copy discarded).

use super::{Format, QK, Tile, hsum8};
use std::arch::x86_64::*;

/// Formats as const-generic codes, so each tile is compiled per format.
pub(super) const Q8_0: u8 = 0;
pub(super) const Q4_0: u8 = 1;
pub(super) const Q4_1: u8 = 2;
pub(super) const Q5_0: u8 = 3;
pub(super) const Q5_1: u8 = 4;

/// The tile of `t` (32-element format; bounds checked by the caller, `t.rows` 1 to 4, `t.cols` 1
/// to [`super::TILE_COLS`]) into `out` (row-major, `t.rows x t.cols`).
///
/// # Safety
/// The CPU must have AVX-512 F, BW, VL, DQ and VNNI, AVX2, FMA and F16C
/// ([`crate::has_avx512_vnni`]); rows `0..t.rows` of `t.w` and `0..t.cols` of `t.a` must hold
/// `t.nblocks` whole blocks each.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn dot_tile(t: &Tile<'_>, out: &mut [f32]) {
    macro_rules! shapes {
        ($fc:expr, $(($r:literal, $p:literal)),*) => {
            match (t.rows, t.cols.div_ceil(2)) {
                // SAFETY: forwarded from the caller.
                $(($r, $p) => unsafe { tile::<$r, $p, $fc>(t, out) },)*
                _ => unreachable!("tile sides are checked"),
            }
        };
    }
    macro_rules! formats {
        ($($f:ident),*) => {
            match t.f {
                $(Format::$f => shapes!(
                    $f,
                    (1, 1), (1, 2), (1, 3), (1, 4),
                    (2, 1), (2, 2), (2, 3), (2, 4),
                    (3, 1), (3, 2), (3, 3), (3, 4),
                    (4, 1), (4, 2), (4, 3), (4, 4)
                ),)*
                Format::Q4K | Format::Q5K | Format::Q6K => unreachable!("K-quants take their own tile"),
            }
        };
    }
    formats!(Q8_0, Q4_0, Q4_1, Q5_0, Q5_1)
}

/// The block's 32 weights as unsigned bytes in element order, in both 256-bit halves of the
/// result (the offset of [`offset_shift`] added to the signed formats).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn unsigned_quants<const F: u8>(b: *const u8) -> __m512i {
    // SAFETY: the caller passes one whole block of the format; every load lies inside it.
    unsafe {
        let (nib, hb) = field_offsets(F);
        let v = _mm512_broadcast_i32x4(_mm_loadu_si128(b.add(nib).cast()));
        let bits = if hb > 0 { _mm512_set1_epi32(b.add(hb).cast::<i32>().read_unaligned()) } else { v };
        let q8 = if F == Q8_0 { _mm512_broadcast_i64x4(_mm256_loadu_si256(b.add(2).cast())) } else { v };
        from_parts::<F>(v, bits, q8)
    }
}

/// [`unsigned_quants`] of two blocks: block `a`'s weights in the low 256-bit half, `b`'s in the
/// high one.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn unsigned_quants2<const F: u8>(a: *const u8, b: *const u8) -> __m512i {
    // SAFETY: the caller passes two whole blocks of the format; every load lies inside them.
    unsafe {
        let (nib, hb) = field_offsets(F);
        let halves = |x: __m256i, y: __m256i| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(x), y);
        let v = halves(
            _mm256_broadcastsi128_si256(_mm_loadu_si128(a.add(nib).cast())),
            _mm256_broadcastsi128_si256(_mm_loadu_si128(b.add(nib).cast())),
        );
        let bits = if hb > 0 {
            halves(
                _mm256_set1_epi32(a.add(hb).cast::<i32>().read_unaligned()),
                _mm256_set1_epi32(b.add(hb).cast::<i32>().read_unaligned()),
            )
        } else {
            v
        };
        let q8 = if F == Q8_0 {
            halves(_mm256_loadu_si256(a.add(2).cast()), _mm256_loadu_si256(b.add(2).cast()))
        } else {
            v
        };
        from_parts::<F>(v, bits, q8)
    }
}

/// Offsets in a block of format `F` of its 16 nibble bytes and of its 32 high bits (0: none).
const fn field_offsets(f: u8) -> (usize, usize) {
    match f {
        Q4_0 => (2, 0),
        Q4_1 => (4, 0),
        Q5_0 => (6, 2),
        Q5_1 => (8, 4),
        _ => (2, 0),
    }
}

/// The unsigned weights of format `F` from a block's parts as [`unsigned_quants`] and
/// [`unsigned_quants2`] load them: `v`, its 16 nibble bytes in both 128-bit lanes of each half;
/// `bits`, its 32 high bits in every 32-bit lane of each half (`q5_0`, `q5_1`); `q8`, its 32
/// quants in each half (`q8_0`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
unsafe fn from_parts<const F: u8>(v: __m512i, bits: __m512i, q8: __m512i) -> __m512i {
    // 32 bytes of a half: low nibbles, then high: the odd 128-bit lanes' 16-bit words shifted
    // right by 4, then the low nibbles kept
    let nibbles = || {
        let shift = _mm512_setr_epi64(
            0,
            0,
            0x0004_0004_0004_0004,
            0x0004_0004_0004_0004,
            0,
            0,
            0x0004_0004_0004_0004,
            0x0004_0004_0004_0004,
        );
        _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(15))
    };
    // 16 where bit j of the half's 32 bits is set: byte j takes byte j / 8 of the word (in every
    // 128-bit lane), then bit j % 8
    let sixteens = || {
        let spread = _mm512_shuffle_epi8(
            bits,
            _mm512_setr_epi64(
                0,
                0x0101_0101_0101_0101,
                0x0202_0202_0202_0202,
                0x0303_0303_0303_0303,
                0,
                0x0101_0101_0101_0101,
                0x0202_0202_0202_0202,
                0x0303_0303_0303_0303,
            ),
        );
        let set = _mm512_test_epi8_mask(spread, _mm512_set1_epi64(0x8040_2010_0804_0201u64 as i64));
        _mm512_maskz_mov_epi8(set, _mm512_set1_epi8(16))
    };
    match F {
        // w + 128: the sign bit flipped
        Q8_0 => _mm512_xor_si512(q8, _mm512_set1_epi8(0x80u8 as i8)),
        // (nibble - 8) + 8, and q4_1's nibbles as they are
        Q4_0 | Q4_1 => nibbles(),
        // (nibble | high << 4) - 16 + 16, and q5_1's as they are
        _ => _mm512_or_si512(nibbles(), sixteens()),
    }
}

/// `log2` of the offset [`unsigned_quants`] added to format `F`'s weights (0 for none).
pub(super) const fn offset_shift(f: u8) -> u32 {
    match f {
        Q8_0 => 7,
        Q4_0 => 3,
        Q5_0 => 4,
        _ => 0,
    }
}

/// `true` for the formats with a block minimum (`q4_1`, `q5_1`).
pub(super) const fn has_min(f: u8) -> bool {
    f == Q4_1 || f == Q5_1
}

/// `R` weight rows times `P` column pairs of format `F` (see the module's text).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
unsafe fn tile<const R: usize, const P: usize, const F: u8>(t: &Tile<'_>, out: &mut [f32]) {
    let (wb, ab) = (t.f.block_bytes(), t.f.act_block_bytes());
    let cols = t.cols;
    // column of each register half: pair p holds columns 2p and 2p + 1 (an odd last one twice)
    let col = |p: usize, h: usize| (2 * p + h).min(cols - 1);
    let shift = offset_shift(F);
    // SAFETY: the caller checked that rows `0..R` of `w` (`wstride` apart) and columns `0..cols` of
    // `a` (`astride` apart) hold `nblocks` whole blocks each, and that `t.scales` (if given) has 8
    // readable floats at each block's first column; unaligned loads only, and the `u16` scratch
    // arrays below are read only after being written in full.
    unsafe {
        let ones = _mm512_set1_epi8(1);
        let zero = _mm512_setzero_si512();
        // lanes 0-7 from column 2p's scale, 8-15 from column 2p + 1's
        let pick: [__m512i; P] = std::array::from_fn(|p| {
            _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_set1_epi32(col(p, 0) as i32)),
                _mm256_set1_epi32(col(p, 1) as i32),
            )
        });
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        let mut summs = [_mm256_setzero_ps(); R];
        let (wp, ap) = (t.w.as_ptr(), t.a.as_ptr());
        for i in 0..t.nblocks {
            // the columns' block scales: d (and s) of column c in lane c
            let (da, sa) = match t.scales {
                Some(sc) => (
                    _mm256_loadu_ps(sc.d.as_ptr().add(i * sc.stride)),
                    _mm256_loadu_ps(sc.s.as_ptr().add(i * sc.stride)),
                ),
                None => {
                    let mut dh = [0u16; 8];
                    let mut sh = [0u16; 8];
                    for c in 0..cols {
                        let ablk = ap.add(c * t.astride + i * ab);
                        dh[c] = ablk.cast::<u16>().read_unaligned();
                        if has_min(F) {
                            sh[c] = ablk.add(2).cast::<u16>().read_unaligned();
                        }
                    }
                    (
                        _mm256_cvtph_ps(_mm_loadu_si128(dh.as_ptr().cast())),
                        _mm256_cvtph_ps(_mm_loadu_si128(sh.as_ptr().cast())),
                    )
                }
            };
            let da = _mm512_castps256_ps512(da);
            let mut qa = [zero; P];
            let mut dpair = [_mm512_setzero_ps(); P];
            let mut corr = [zero; P];
            for p in 0..P {
                let a0 = ap.add(col(p, 0) * t.astride + i * ab + ab - QK);
                let a1 = ap.add(col(p, 1) * t.astride + i * ab + ab - QK);
                qa[p] = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_loadu_si256(a0.cast())),
                    _mm256_loadu_si256(a1.cast()),
                );
                dpair[p] = _mm512_permutexvar_ps(pick[p], da);
                if shift != 0 {
                    // k times each lane's four activation bytes
                    corr[p] = _mm512_sll_epi32(_mm512_dpbusd_epi32(zero, ones, qa[p]), _mm_cvtsi32_si128(shift as i32));
                }
            }
            for r in 0..R {
                let wblk = wp.add(r * t.wstride + i * wb);
                if t.prefetch {
                    super::prefetch_block(wblk, wb);
                }
                let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(wblk.cast::<i32>().read_unaligned()));
                let dw = _mm512_broadcastss_ps(dm);
                if has_min(F) {
                    let mw = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
                    summs[r] = _mm256_fmadd_ps(mw, sa, summs[r]);
                }
                let qw = unsigned_quants::<F>(wblk);
                for p in 0..P {
                    let mut q = _mm512_dpbusd_epi32(zero, qw, qa[p]);
                    if shift != 0 {
                        q = _mm512_sub_epi32(q, corr[p]);
                    }
                    let d = _mm512_mul_ps(dw, dpair[p]);
                    acc[r][p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(q), acc[r][p]);
                }
            }
        }
        for (r, (acc_r, summs_r)) in acc.iter().zip(&summs).enumerate() {
            let mut s = [0.0f32; 8];
            _mm256_storeu_ps(s.as_mut_ptr(), *summs_r);
            for (p, acc_rp) in acc_r.iter().enumerate() {
                for (h, sum) in hsum_halves(*acc_rp).into_iter().enumerate() {
                    let c = 2 * p + h;
                    if c < cols {
                        out[r * cols + c] = sum + s[c];
                    }
                }
            }
        }
    }
}

/// Each 256-bit half's 8 lanes summed as `dot` sums its lanes ([`hsum8`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
pub(super) fn hsum_halves(v: __m512) -> [f32; 2] {
    let mut l = [0.0f32; 16];
    // SAFETY: a store of 16 floats into a local array of 16.
    unsafe { _mm512_storeu_ps(l.as_mut_ptr(), v) };
    let (lo, hi) = l.split_at(8);
    [hsum8(lo.try_into().expect("8 lanes")), hsum8(hi.try_into().expect("8 lanes"))]
}
