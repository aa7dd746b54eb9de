//! ggml's K-quants: blocks of [`QK_K`] = 256 elements in 8 sub-blocks of 32 (`q4_K`, `q5_K`) or 16
//! groups of 16 (`q6_K`), each with its own small integer scale: dequantization, the `q8_K`
//! activation format they are dotted with, and that dot product as ggml computes it on x86.
//!
//! Layouts (little-endian, `d`/`dmin` IEEE f16):
//! - `q4_K` (144 bytes): `d`, `dmin`, 12 bytes of 6-bit scales and mins for the 8 sub-blocks
//!   ([`scale_min`]), 128 bytes of nibbles. Chunk `j` of 64 elements: the low nibbles of bytes
//!   `32j..32j+32` are sub-block `2j`, the high nibbles sub-block `2j+1`; element =
//!   `d * sc * q - dmin * m`.
//! - `q5_K` (176 bytes): `d`, `dmin`, the 12 scale bytes, 32 bytes `qh` of fifth bits (bit `2j` of
//!   byte `l` for element `l` of sub-block `2j`, bit `2j+1` for sub-block `2j+1`), 128 nibble bytes
//!   as in `q4_K`.
//! - `q6_K` (210 bytes): 128 bytes `ql` of low nibbles, 64 bytes `qh` of 2-bit highs, 16 `i8`
//!   scales (one per 16 elements), `d`. Half `h` (128 elements) takes `ql[64h..64h+64]`,
//!   `qh[32h..32h+32]` and scales `8h..8h+8`; its quarter `k` (32 elements) takes the low nibbles of
//!   `ql[64h + 32(k % 2)..]` for `k < 2`, the high nibbles for `k >= 2`, and bits `2k, 2k+1` of `qh`;
//!   element = `d * sc * (q - 32)`.
//! - `q8_K` (292 bytes, activations only): `d` as f32, 256 `i8`, 16 `i16` sums of each 16 quants.
//!   ggml's quantizer: `iscale = -127 / max` with `max` the first element of largest magnitude,
//!   `q = min(127, nearest_int(iscale * x))` (round half to even), `d = 1 / iscale`; an all-zero
//!   block is `d = 0`.
//!
//! The dot product is ggml's AVX2 `vec_dot_qN_K_q8_K`: per block, exact integer products summed
//! with their scales into 8 `i32` lanes (lane `l` holds the elements `4l..4l+4` of every 32-element
//! chunk), then one FMA per lane by `d_w * d_a`; the mins term (`dmin * sum m * bsum`) goes to 4 f32
//! lanes by FMA for `q4_K` and to one f32 by FMA for `q5_K`; the lanes are reduced as ggml does.
//! On x86 it is a register tile (`x86::tile`: each weight block unpacked once for up to 4 columns,
//! the lone dot its 1 x 1 case); the portable form ([`dot_portable`]) performs the same f32
//! operations in the same order, so the two are bit-identical (tested).

use super::{Format, QK_K, half_at, hsum8};

/// Bytes of one `q8_K` block: `d` (f32), 256 quants, 16 block sums (i16).
pub const Q8K_BYTES: usize = 4 + QK_K + 2 * (QK_K / 16);

/// Offset of the quants in a `q8_K` block.
const Q8K_QS: usize = 4;
/// Offset of the 16-element sums in a `q8_K` block.
const Q8K_SUMS: usize = 4 + QK_K;

/// The 6-bit scale and min of sub-block `j` (0..8) from a `q4_K`/`q5_K` block's 12 scale bytes
/// (ggml's `get_scale_min_k4`): sub-blocks 0..4 keep theirs in the low 6 bits of bytes `j` and
/// `j + 4`; sub-blocks 4..8 in the nibbles of byte `j + 4` with their top two bits in the spare high
/// bits of bytes `j - 4` and `j`.
#[inline]
pub fn scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// The 8 scales and 8 mins of a `q4_K`/`q5_K` block's scale bytes.
#[inline]
fn scales_mins(s: &[u8]) -> ([i32; 8], [i32; 8]) {
    let mut sc = [0; 8];
    let mut mn = [0; 8];
    for j in 0..8 {
        let (a, b) = scale_min(j, s);
        (sc[j], mn[j]) = (i32::from(a), i32::from(b));
    }
    (sc, mn)
}

/// The 256 integer quants of a K-quant block, in element order (`q6_K`'s already minus 32).
fn unpack(f: Format, b: &[u8]) -> [i32; QK_K] {
    let mut q = [0i32; QK_K];
    match f {
        Format::Q4K | Format::Q5K => {
            let (qs, qh) = if f == Format::Q4K { (&b[16..144], None) } else { (&b[48..176], Some(&b[16..48])) };
            for j in 0..4 {
                for l in 0..32 {
                    let v = qs[32 * j + l];
                    let (mut lo, mut hi) = (i32::from(v & 15), i32::from(v >> 4));
                    if let Some(h) = qh {
                        lo |= i32::from(h[l] >> (2 * j) & 1) << 4;
                        hi |= i32::from(h[l] >> (2 * j + 1) & 1) << 4;
                    }
                    q[64 * j + l] = lo;
                    q[64 * j + 32 + l] = hi;
                }
            }
        }
        Format::Q6K => {
            let (ql, qh) = (&b[..128], &b[128..192]);
            for h in 0..2 {
                for k in 0..4 {
                    for l in 0..32 {
                        let v = ql[64 * h + 32 * (k % 2) + l];
                        let lo = if k < 2 { v & 15 } else { v >> 4 };
                        let hi = (qh[32 * h + l] >> (2 * k)) & 3;
                        q[128 * h + 32 * k + l] = i32::from(lo | hi << 4) - 32;
                    }
                }
            }
        }
        _ => unreachable!("not a K-quant: {f:?}"),
    }
    q
}

/// The scale of each 16 elements of a `q6_K` block.
#[inline]
fn q6_scales(b: &[u8]) -> [i32; 16] {
    std::array::from_fn(|i| i32::from(b[192 + i] as i8))
}

/// Dequantizes whole K-quant blocks of `f` from `src` into `out` (`out.len() / 256` blocks), each
/// element computed as ggml's `dequantize_row_qN_K` computes it (rounded f32 products and
/// differences, no FMA).
pub fn dequantize(f: Format, src: &[u8], out: &mut [f32]) {
    for (b, o) in src.chunks_exact(f.block_bytes()).zip(out.chunks_exact_mut(QK_K)) {
        let q = unpack(f, b);
        if f == Format::Q6K {
            let (d, sc) = (half_at(b, 208), q6_scales(b));
            for (i, (o, q)) in o.iter_mut().zip(q).enumerate() {
                *o = d * sc[i / 16] as f32 * q as f32;
            }
        } else {
            let (d, dmin) = (half_at(b, 0), half_at(b, 2));
            let (sc, mn) = scales_mins(&b[4..16]);
            for (j, (o, q)) in o.chunks_exact_mut(32).zip(q.chunks_exact(32)).enumerate() {
                let (d1, m1) = (d * sc[j] as f32, dmin * mn[j] as f32);
                for (o, &q) in o.iter_mut().zip(q) {
                    *o = d1 * q as f32 - m1;
                }
            }
        }
    }
}

/// ggml's `nearest_int`: `v` rounded half to even by adding 1.5 * 2^23 and reading the mantissa
/// bits, exact for `|v| < 2^22`. Where that does not hold it gives what ggml's release build gives:
/// 0 for NaN, and for `±inf` (the products of a block whose largest magnitude is subnormal, where
/// `-127 / max` overflows) `-2^22`, stored as the byte 0. No libm call, so it vectorizes.
#[inline]
fn nearest_int(v: f32) -> i32 {
    let val = v + 12_582_912.0;
    (val.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// Quantizes `x` (a multiple of 256 long) to `q8_K` blocks in `out` as ggml's
/// `quantize_row_q8_K` does (see the module doc), bit for bit (tested against ggml), NaN and
/// infinite products included.
pub fn quantize_q8k(x: &[f32], out: &mut [u8]) {
    for (xb, ob) in x.chunks_exact(QK_K).zip(out.chunks_exact_mut(Q8K_BYTES)) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in xb {
            if v.abs() > amax {
                (amax, max) = (v.abs(), v);
            }
        }
        if amax == 0.0 {
            ob.fill(0);
            continue;
        }
        let iscale = -127.0 / max;
        let qs = &mut ob[Q8K_QS..Q8K_SUMS];
        for (q, &v) in qs.iter_mut().zip(xb) {
            *q = nearest_int(iscale * v).min(127) as i8 as u8;
        }
        for g in 0..QK_K / 16 {
            let s: i32 = ob[Q8K_QS + 16 * g..Q8K_QS + 16 * g + 16].iter().map(|&q| i32::from(q as i8)).sum();
            ob[Q8K_SUMS + 2 * g..Q8K_SUMS + 2 * g + 2].copy_from_slice(&(s as i16).to_le_bytes());
        }
        ob[..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
    }
}

/// A `q8_K` block's `d`.
#[inline]
fn q8k_d(a: &[u8]) -> f32 {
    f32::from_le_bytes([a[0], a[1], a[2], a[3]])
}

/// The sum of the 32 quants of sub-block `j` of a `q8_K` block (two of its 16-element sums).
#[inline]
fn q8k_sum32(a: &[u8], j: usize) -> i32 {
    let s = |g: usize| i32::from(i16::from_le_bytes([a[Q8K_SUMS + 2 * g], a[Q8K_SUMS + 2 * g + 1]]));
    s(2 * j) + s(2 * j + 1)
}

/// The portable dot product of `nblocks` K-quant blocks of `f` with `q8_K` activations: the same
/// f32 operations in the same order as [`x86::dot`].
pub fn dot_portable(f: Format, w: &[u8], a: &[u8], nblocks: usize) -> f32 {
    let (wb, ab) = (f.block_bytes(), Q8K_BYTES);
    let mut acc = [0.0f32; 8];
    let mut acc_m = [0.0f32; 4];
    let mut summs = 0.0f32;
    for i in 0..nblocks {
        let (w, a) = (&w[i * wb..(i + 1) * wb], &a[i * ab..(i + 1) * ab]);
        let da = q8k_d(a);
        let q = unpack(f, w);
        let aq = |e: usize| i32::from(a[Q8K_QS + e] as i8);
        // the integer sums per lane: elements 4l..4l+4 of every 32-element chunk, each times the
        // scale of its sub-block (q4_K, q5_K) or of its 16 elements (q6_K)
        let mut lanes = [0i32; 8];
        let d = if f == Format::Q6K {
            let sc = q6_scales(w);
            for (e, &qe) in q.iter().enumerate() {
                lanes[e % 32 / 4] += sc[e / 16] * qe * aq(e);
            }
            da * half_at(w, 208)
        } else {
            let (sc, mn) = scales_mins(&w[4..16]);
            for (e, &qe) in q.iter().enumerate() {
                lanes[e % 32 / 4] += sc[e / 32] * qe * aq(e);
            }
            let dmin = -da * half_at(w, 2);
            let prod: [i32; 4] =
                std::array::from_fn(|k| mn[2 * k] * q8k_sum32(a, 2 * k) + mn[2 * k + 1] * q8k_sum32(a, 2 * k + 1));
            if f == Format::Q4K {
                for (m, p) in acc_m.iter_mut().zip(prod) {
                    *m = dmin.mul_add(p as f32, *m);
                }
            } else {
                summs = dmin.mul_add(prod.iter().sum::<i32>() as f32, summs);
            }
            da * half_at(w, 0)
        };
        for (acc, s) in acc.iter_mut().zip(lanes) {
            *acc = d.mul_add(s as f32, *acc);
        }
    }
    let m = (acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]);
    hsum8(&acc) + if f == Format::Q4K { m } else { summs }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    //! ggml's AVX2 `vec_dot_qN_K_q8_K` arithmetic (see the module doc) as a register tile: `R`
    //! weight rows times `C` activation columns, each weight block unpacked once for the `C`
    //! columns and each activation block's quants loaded once for the `R` rows. Every pair keeps
    //! its own accumulators and adds the same terms as a lone dot ([`dot`], the 1 x 1 tile; its
    //! integer sums are exact in any order), so each result is that dot's, bit for bit.

    use super::{Format, Q8K_BYTES, Q8K_QS, Q8K_SUMS, q8k_d, scales_mins};
    use crate::quant::Tile;
    use std::arch::x86_64::*;

    /// The dot product of `nblocks` blocks of `f` with `q8_K` activations.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(in crate::quant) fn dot(f: Format, w: &[u8], a: &[u8], nblocks: usize) -> f32 {
        let t = Tile { f, w, wstride: 0, rows: 1, a, astride: 0, cols: 1, nblocks, scales: None, prefetch: false };
        let mut o = [[0.0f32; 1]; 1];
        // SAFETY: the CPU has the features `tile` needs (this function's own); it reads through
        // bounds-checked slices.
        unsafe { tile::<1, 1>(&t, &mut o) };
        o[0][0]
    }

    /// One weight block unpacked: its 8 chunks of 32 quants (chunk `k` pairs with activations
    /// `32k..32k+32`), each chunk's scales as 16 `i16` lanes, and its block scalars.
    #[derive(Clone, Copy)]
    struct Block {
        q: [__m256i; 8],
        scale: [__m256i; 8],
        d: f32,
        dmin: f32,
        mins: __m128i,
    }

    /// Unpacks the block of `f` at `b` (one whole block).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn unpack(f: Format, b: &[u8]) -> Block {
        let m4 = _mm256_set1_epi8(15);
        let mut q = [_mm256_setzero_si256(); 8];
        let mut scale = [_mm256_setzero_si256(); 8];
        // SAFETY: `b` is one whole block of `f`; every load lies inside it; unaligned loads only.
        unsafe {
            if f == Format::Q6K {
                let (ql, qh) = (b.as_ptr(), b.as_ptr().add(128));
                let m2 = _mm256_set1_epi8(3);
                for h in 0..2 {
                    let l1 = _mm256_loadu_si256(ql.add(64 * h).cast());
                    let l2 = _mm256_loadu_si256(ql.add(64 * h + 32).cast());
                    let hb = _mm256_loadu_si256(qh.add(32 * h).cast());
                    let lows = [
                        _mm256_and_si256(l1, m4),
                        _mm256_and_si256(l2, m4),
                        _mm256_and_si256(_mm256_srli_epi16::<4>(l1), m4),
                        _mm256_and_si256(_mm256_srli_epi16::<4>(l2), m4),
                    ];
                    let highs = [
                        _mm256_and_si256(hb, m2),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(hb), m2),
                        _mm256_and_si256(_mm256_srli_epi16::<4>(hb), m2),
                        _mm256_and_si256(_mm256_srli_epi16::<6>(hb), m2),
                    ];
                    for k in 0..4 {
                        q[4 * h + k] = _mm256_or_si256(lows[k], _mm256_slli_epi16::<4>(highs[k]));
                        let g = 8 * h + 2 * k;
                        let (s0, s1) = (b[192 + g] as i8, b[192 + g + 1] as i8);
                        scale[4 * h + k] =
                            _mm256_setr_m128i(_mm_set1_epi16(i16::from(s0)), _mm_set1_epi16(i16::from(s1)));
                    }
                }
                return Block { q, scale, d: super::half_at(b, 208), dmin: 0.0, mins: _mm_setzero_si128() };
            }
            let (sc, mn) = scales_mins(&b[4..16]);
            let qs = b.as_ptr().add(if f == Format::Q4K { 16 } else { 48 });
            let hb =
                if f == Format::Q5K { _mm256_loadu_si256(b.as_ptr().add(16).cast()) } else { _mm256_setzero_si256() };
            let one = _mm256_set1_epi8(1);
            for j in 0..4 {
                let bits = _mm256_loadu_si256(qs.add(32 * j).cast());
                let mut lo = _mm256_and_si256(bits, m4);
                let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
                if f == Format::Q5K {
                    let shifted = _mm256_srlv_epi32(hb, _mm256_set1_epi32(2 * j as i32));
                    lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(_mm256_and_si256(shifted, one)));
                    let b1 = _mm256_and_si256(_mm256_srli_epi16::<1>(shifted), one);
                    hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(b1));
                }
                (q[2 * j], q[2 * j + 1]) = (lo, hi);
                (scale[2 * j], scale[2 * j + 1]) =
                    (_mm256_set1_epi16(sc[2 * j] as i16), _mm256_set1_epi16(sc[2 * j + 1] as i16));
            }
            let mins = _mm_setr_epi16(
                mn[0] as i16,
                mn[1] as i16,
                mn[2] as i16,
                mn[3] as i16,
                mn[4] as i16,
                mn[5] as i16,
                mn[6] as i16,
                mn[7] as i16,
            );
            Block { q, scale, d: super::half_at(b, 0), dmin: super::half_at(b, 2), mins }
        }
    }

    /// The `R x C` tile of `t` (K-quant weights) into `out`; a block outside `t`'s slices panics.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(in crate::quant) unsafe fn tile<const R: usize, const C: usize>(t: &Tile<'_>, out: &mut [[f32; C]; R]) {
        let (f, wb) = (t.f, t.f.block_bytes());
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let mut acc_m = [[_mm_setzero_ps(); C]; R];
        let mut summs = [[0.0f32; C]; R];
        for i in 0..t.nblocks {
            let blocks: [Block; R] = std::array::from_fn(|r| {
                let o = r * t.wstride + i * wb;
                let block = &t.w[o..o + wb];
                if t.prefetch {
                    crate::quant::prefetch_block(block.as_ptr(), wb);
                }
                // SAFETY: the slice is one whole block (a bounds-checked range of `t.w`).
                unsafe { unpack(f, block) }
            });
            for c in 0..C {
                let o = c * t.astride + i * Q8K_BYTES;
                let ab = &t.a[o..o + Q8K_BYTES];
                let da = q8k_d(ab);
                // SAFETY: `ab` is one whole `q8_K` block; unaligned loads inside it only.
                unsafe {
                    let a: [__m256i; 8] =
                        std::array::from_fn(|k| _mm256_loadu_si256(ab.as_ptr().add(Q8K_QS + 32 * k).cast()));
                    let m32 = _mm256_set1_epi8(32);
                    let bias: [__m256i; 8] = if f == Format::Q6K {
                        std::array::from_fn(|k| _mm256_maddubs_epi16(m32, a[k]))
                    } else {
                        [_mm256_setzero_si256(); 8]
                    };
                    let sums32 = if f == Format::Q6K {
                        _mm_setzero_si128()
                    } else {
                        let bs = _mm256_loadu_si256(ab.as_ptr().add(Q8K_SUMS).cast());
                        _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256::<1>(bs))
                    };
                    for (r, blk) in blocks.iter().enumerate() {
                        let mut sumi = _mm256_setzero_si256();
                        for k in 0..8 {
                            let mut p = _mm256_maddubs_epi16(blk.q[k], a[k]);
                            if f == Format::Q6K {
                                p = _mm256_sub_epi16(p, bias[k]);
                            }
                            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(blk.scale[k], p));
                        }
                        if f != Format::Q6K {
                            let dmin = -da * blk.dmin;
                            let prod = _mm_madd_epi16(blk.mins, sums32);
                            if f == Format::Q4K {
                                acc_m[r][c] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m[r][c]);
                            } else {
                                let mut p = [0i32; 4];
                                _mm_storeu_si128(p.as_mut_ptr().cast(), prod);
                                summs[r][c] = dmin.mul_add(p.iter().sum::<i32>() as f32, summs[r][c]);
                            }
                        }
                        let d = da * blk.d;
                        acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[r][c]);
                    }
                }
            }
        }
        for r in 0..R {
            for c in 0..C {
                let mut l = [0.0f32; 8];
                let mut m = [0.0f32; 4];
                // SAFETY: plain stores into local arrays of the right sizes.
                unsafe {
                    _mm256_storeu_ps(l.as_mut_ptr(), acc[r][c]);
                    _mm_storeu_ps(m.as_mut_ptr(), acc_m[r][c]);
                }
                let mins = (m[0] + m[2]) + (m[1] + m[3]);
                out[r][c] = super::hsum8(&l) + if f == Format::Q4K { mins } else { summs[r][c] };
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::quant::tests::stream;
    use crate::quant::{f16_to_f32, f32_to_f16};

    /// Random K-quant blocks with sane f16 scales (random bytes elsewhere).
    pub(crate) fn blocks(f: Format, nb: usize, seed: u64) -> Vec<u8> {
        let mut r = stream(seed);
        let mut w: Vec<u8> = (0..nb * f.block_bytes()).map(|_| (r() >> 32) as u8).collect();
        for b in w.chunks_exact_mut(f.block_bytes()) {
            let s = ((r() >> 40) as f32 / (1u64 << 24) as f32) * 0.01;
            let at = if f == Format::Q6K { 208 } else { 0 };
            b[at..at + 2].copy_from_slice(&f32_to_f16(s).to_le_bytes());
            if f != Format::Q6K {
                b[2..4].copy_from_slice(&f32_to_f16(s * 0.5).to_le_bytes());
            }
        }
        w
    }

    #[test]
    fn scale_min_unpacks_the_six_bit_fields() {
        // sub-block 5: scale = low nibble of byte 9 | top bits of byte 1 << 4; min = high nibble of
        // byte 9 | top bits of byte 5 << 4
        let mut s = [0u8; 12];
        s[9] = 0xA7;
        s[1] = 0b1100_0000;
        s[5] = 0b0100_0000 | 17;
        assert_eq!(scale_min(5, &s), (0x7 | 3 << 4, 0xA | 1 << 4));
        assert_eq!(scale_min(1, &s), (0, 17));
    }

    #[test]
    fn q8k_quantizes_as_ggml_defines() {
        let mut x: Vec<f32> = (0..QK_K).map(|i| (i as f32 - 100.0) * 0.25).collect();
        x[7] = 40.0; // the first element of largest magnitude: positive, so the quants are negated
        x[300 % QK_K] = -40.0;
        let mut out = vec![0u8; Q8K_BYTES];
        quantize_q8k(&x, &mut out);
        assert_eq!(out[Q8K_QS + 7] as i8, -127);
        assert_eq!(out[Q8K_QS + 300 % QK_K] as i8, 127);
        assert_eq!(out[Q8K_QS + 102] as i8, (-127.0f32 / 40.0 * 0.5).round_ties_even() as i8);
        assert_eq!(q8k_d(&out), 1.0 / (-127.0f32 / 40.0));
        let sum0: i32 = (0..16).map(|e| i32::from(out[Q8K_QS + e] as i8)).sum();
        assert_eq!(i16::from_le_bytes([out[Q8K_SUMS], out[Q8K_SUMS + 1]]) as i32, sum0);
        // an all-zero block, and NaN quantizing to 0
        let mut z = vec![0.0f32; QK_K];
        z[3] = f32::NAN;
        let mut out = vec![1u8; Q8K_BYTES];
        quantize_q8k(&z, &mut out);
        assert!(out.iter().all(|&b| b == 0));
    }

    #[test]
    fn the_x86_dot_matches_the_portable_one_bit_for_bit() {
        if !crate::has_avx2_fma() {
            return;
        }
        for f in [Format::Q4K, Format::Q5K, Format::Q6K] {
            for (nb, seed) in [(1, 1), (3, 2), (8, 3)] {
                let w = blocks(f, nb, seed);
                let mut r = stream(seed + 50);
                let x: Vec<f32> =
                    (0..nb * QK_K).map(|_| ((r() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0).collect();
                let mut a = vec![0u8; nb * Q8K_BYTES];
                quantize_q8k(&x, &mut a);
                let p = dot_portable(f, &w, &a, nb);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the CPU has AVX2, FMA and F16C (checked above).
                let v = unsafe { x86::dot(f, &w, &a, nb) };
                assert_eq!(p.to_bits(), v.to_bits(), "{f:?} {nb}: {p} vs {v}");
            }
        }
    }

    #[test]
    fn dot_equals_the_exact_product_of_the_dequantized_rows() {
        // with q8_K's exact integer dequantization the dot is the f64 product up to f32 rounding
        for f in [Format::Q4K, Format::Q5K, Format::Q6K] {
            let nb = 4;
            let w = blocks(f, nb, 9);
            let mut wd = vec![0.0f32; nb * QK_K];
            dequantize(f, &w, &mut wd);
            let mut r = stream(10);
            let x: Vec<f32> = (0..nb * QK_K).map(|_| (r() >> 40) as f32 / (1u64 << 24) as f32 - 0.5).collect();
            let mut a = vec![0u8; nb * Q8K_BYTES];
            quantize_q8k(&x, &mut a);
            let xd: Vec<f64> = (0..nb * QK_K)
                .map(|e| {
                    f64::from(q8k_d(&a[e / QK_K * Q8K_BYTES..]))
                        * f64::from(a[e / QK_K * Q8K_BYTES + Q8K_QS + e % QK_K] as i8)
                })
                .collect();
            let exact: f64 = wd.iter().zip(&xd).map(|(&w, &x)| f64::from(w) * x).sum();
            let mag: f64 = wd.iter().zip(&xd).map(|(&w, &x)| (f64::from(w) * x).abs()).sum();
            let got = f64::from(dot_portable(f, &w, &a, nb));
            assert!((got - exact).abs() <= mag * 1e-5, "{f:?}: {got} vs {exact}");
        }
    }

    #[test]
    fn f16_scales_are_read_where_ggml_puts_them() {
        let mut b = vec![0u8; 210];
        b[208..210].copy_from_slice(&f32_to_f16(0.5).to_le_bytes());
        b[192] = (-3i8) as u8; // scale of elements 0..16
        b[0] = 0x0F; // element 0: low nibble 15, high bits 0 -> 15 - 32
        let mut o = vec![0.0f32; QK_K];
        dequantize(Format::Q6K, &b, &mut o);
        assert_eq!(o[0], 0.5 * -3.0 * -17.0);
        assert_eq!(f16_to_f32(f32_to_f16(0.5)), 0.5);
    }
}
