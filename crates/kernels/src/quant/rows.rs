//! The quantized matrix-vector kernel: several weight rows dotted with one quantized activation
//! row per call ([`dot_rows`]), each result bit-identical to [`super::dot`] of that pair.
//!
//! A batch-1 decode step spends most of its time here, and on x86 `dot`'s per-block work beyond
//! the integer products is mostly scalar: two f16-to-f32 conversions (each a 16-bit load, a shift
//! and an or to pair them, a move into a vector register and `vcvtph2ps`), a product of the two
//! scales, a broadcast, and for `q4_1` a scalar FMA for the `m * s` term. Here the activation's
//! block scales are converted once per column into f32 pairs `[d, s]` ([`act_scales`]), and per
//! block and weight row one 32-bit load and one `vcvtph2ps` give `[d_w, m_w]`; a single `vmulps`
//! with the activation's pair gives `d_w * d_a` in lane 0 and a single `vfmadd` the running
//! `m_w * s_a` sum in lane 1 (the same rounded product and the same fused add as `dot`'s scalar
//! code). The activation block's 32 bytes and its scales are loaded once for each group of rows,
//! and each row keeps its own accumulators, adding the same terms in the same order as `dot`. One
//! call takes any number of rows (a task's block of a mat-vec), so the bounds are checked once.
//! With AVX-512 VNNI the 32-element formats take `x86_512` instead: two rows per 512-bit register,
//! `vpdpbusd` for the products (see its doc).

use super::{Format, QK, dot_portable, half_at};

/// How far ahead of the block being read the weights are prefetched, in bytes. A mat-vec reads
/// its weight rows one after another, so this runs into the rows of the next calls; measured on Zen
/// 3 over SmolLM2's 66 MB of q4_1 and 30 MB of q8_0 weights (`docs/BENCHMARKS.md`), 2-4 KiB ahead
/// is 10-25% faster than leaving it to the hardware prefetchers, 256-512 bytes no better.
pub const PREFETCH: usize = 2048;

/// The most weight rows that share each activation block's loads ([`Rows::group`]).
pub const ROWS_MAX: usize = 4;

/// The per-block f32 scales of an activation row quantized by [`super::quantize_act`] for weights
/// of format `f`, as [`dot_rows`] takes them: `[d, s]` for each of `nblocks` blocks (`s` is 0 for
/// the `q8_0` activations of `q8_0`/`q4_0`/`q5_0` weights), exact conversions of the stored f16s.
/// The K-quants' `q8_K` blocks need none: their rows take [`super::dot`] (`out` is filled with 0).
/// Panics if `a` holds fewer than `nblocks` blocks or `out` fewer than `2 * nblocks` floats.
pub fn act_scales(f: Format, a: &[u8], nblocks: usize, out: &mut [f32]) {
    let ab = f.act_block_bytes();
    assert!(a.len() >= nblocks * ab && out.len() >= 2 * nblocks, "activation row or scales too short");
    if f.is_k() {
        out[..2 * nblocks].fill(0.0);
        return;
    }
    for (i, o) in out[..2 * nblocks].chunks_exact_mut(2).enumerate() {
        let b = &a[i * ab..];
        o[0] = half_at(b, 0);
        o[1] = if f.has_min() { half_at(b, 2) } else { 0.0 };
    }
}

/// `rows` weight rows times one quantized activation row for [`dot_rows`].
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a> {
    /// The weight format.
    pub f: Format,
    /// The weight rows' bytes.
    pub w: &'a [u8],
    /// Bytes from one weight row to the next.
    pub wstride: usize,
    /// Weight rows (at least 1).
    pub rows: usize,
    /// Weight rows processed together, sharing each activation block's loads: 1 to [`ROWS_MAX`].
    pub group: usize,
    /// The activation row, quantized by [`super::quantize_act`] for `f`.
    pub a: &'a [u8],
    /// Its block scales, from [`act_scales`].
    pub scales: &'a [f32],
    /// Blocks per row.
    pub nblocks: usize,
}

impl Rows<'_> {
    /// Panics unless every block the call reads lies inside its slices, `rows` is positive and
    /// `group` 1 to 4.
    fn check(&self, out: &[f32]) {
        let (wb, ab) = (self.f.block_bytes(), self.f.act_block_bytes());
        assert!(self.rows >= 1 && (1..=ROWS_MAX).contains(&self.group), "rows at least 1, group 1 to 4");
        assert!(self.w.len() >= (self.rows - 1) * self.wstride + self.nblocks * wb, "weight rows out of bounds");
        assert!(self.a.len() >= self.nblocks * ab, "activation row out of bounds");
        assert!(self.scales.len() >= 2 * self.nblocks, "activation scales out of bounds");
        assert!(out.len() >= self.rows, "output too short");
    }
}

/// `out[r]` = weight row `r` of `t` dotted with its activation row, bit-identical to
/// [`super::dot`] of that pair (`t.scales` must be [`act_scales`] of `t.a`). Panics if `t.rows`
/// is 0, `t.group` 0 or above [`ROWS_MAX`], or a row lies outside its slice.
pub fn dot_rows(t: &Rows<'_>, out: &mut [f32]) {
    t.check(out);
    #[cfg(target_arch = "x86_64")]
    {
        if !t.f.is_k() && crate::has_avx512_vnni() {
            // SAFETY: the CPU has AVX-512 F/BW/VL/DQ/VNNI, AVX2, FMA and F16C; bounds checked above.
            unsafe { x86_512::dot_rows(t, out) };
            return;
        }
        if crate::has_avx2_fma() {
            // SAFETY: the CPU has AVX2, FMA and F16C; the bounds were checked above.
            unsafe { x86::dot_rows(t, out) };
            return;
        }
    }
    for (r, o) in out[..t.rows].iter_mut().enumerate() {
        *o = dot_portable(t.f, &t.w[r * t.wstride..], t.a, t.nblocks);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::x86::quants;
    use super::{Format, QK, Rows};
    use std::arch::x86_64::*;

    /// [`super::dot_rows`] (bounds checked by the caller): groups of `t.group` rows.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_rows(t: &Rows<'_>, out: &mut [f32]) {
        for r0 in (0..t.rows).step_by(t.group) {
            let n = t.group.min(t.rows - r0);
            let g = Rows { w: &t.w[r0 * t.wstride..], rows: n, ..*t };
            // SAFETY: forwarded from the caller (rows `r0..r0 + n` are among the checked ones).
            unsafe { group(&g, &mut out[r0..]) };
        }
    }

    /// One group of `t.rows` (1 to 4) rows, monomorphized per row count and format.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn group(t: &Rows<'_>, out: &mut [f32]) {
        if t.f.is_k() {
            // the K-quants have no multi-row form: each row is its dot
            for (r, o) in out[..t.rows].iter_mut().enumerate() {
                *o = super::super::x86::dot(t.f, &t.w[r * t.wstride..], t.a, t.nblocks);
            }
            return;
        }
        // SAFETY: forwarded from the caller.
        unsafe {
            match (t.f, t.rows) {
                (Format::Q4_1, 1) => rows::<1, Q4_1>(t, out),
                (Format::Q4_1, 2) => rows::<2, Q4_1>(t, out),
                (Format::Q4_1, 3) => rows::<3, Q4_1>(t, out),
                (Format::Q4_1, 4) => rows::<4, Q4_1>(t, out),
                (Format::Q4_0, 1) => rows::<1, Q4_0>(t, out),
                (Format::Q4_0, 2) => rows::<2, Q4_0>(t, out),
                (Format::Q4_0, 3) => rows::<3, Q4_0>(t, out),
                (Format::Q4_0, 4) => rows::<4, Q4_0>(t, out),
                (Format::Q8_0, 1) => rows::<1, Q8_0>(t, out),
                (Format::Q8_0, 2) => rows::<2, Q8_0>(t, out),
                (Format::Q8_0, 3) => rows::<3, Q8_0>(t, out),
                (Format::Q8_0, 4) => rows::<4, Q8_0>(t, out),
                (Format::Q5_0, 1) => rows::<1, Q5_0>(t, out),
                (Format::Q5_0, 2) => rows::<2, Q5_0>(t, out),
                (Format::Q5_0, 3) => rows::<3, Q5_0>(t, out),
                (Format::Q5_0, 4) => rows::<4, Q5_0>(t, out),
                (Format::Q5_1, 1) => rows::<1, Q5_1>(t, out),
                (Format::Q5_1, 2) => rows::<2, Q5_1>(t, out),
                (Format::Q5_1, 3) => rows::<3, Q5_1>(t, out),
                (Format::Q5_1, 4) => rows::<4, Q5_1>(t, out),
                _ => unreachable!("rows are checked to be 1 to 4, K-quants handled above"),
            }
        }
    }

    /// The formats as const-generic tags.
    const Q8_0: u8 = 0;
    const Q4_0: u8 = 1;
    const Q4_1: u8 = 2;
    const Q5_0: u8 = 3;
    const Q5_1: u8 = 4;

    /// `R` rows of format `F` (a tag above).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn rows<const R: usize, const F: u8>(t: &Rows<'_>, out: &mut [f32]) {
        let f = [Format::Q8_0, Format::Q4_0, Format::Q4_1, Format::Q5_0, Format::Q5_1][F as usize];
        let q41 = f.has_min();
        let (wb, ab) = (f.block_bytes(), f.act_block_bytes());
        // SAFETY: the caller checked that rows `0..R` of `w` (`wstride` apart) hold `nblocks` whole
        // blocks, `a` `nblocks` blocks and `scales` `2 * nblocks` floats; unaligned loads only.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let mut acc = [_mm256_setzero_ps(); R];
            // lane 1: the running sum of m_w * s_a (q4_1 only)
            let mut summs = [_mm_setzero_ps(); R];
            let (wp, ap, sp) = (t.w.as_ptr(), t.a.as_ptr(), t.scales.as_ptr());
            for i in 0..t.nblocks {
                // a hint only: the address may lie past the slice (never dereferenced)
                _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(i * wb + super::PREFETCH).cast());
                let qa = _mm256_loadu_si256(ap.add(i * ab + ab - QK).cast());
                // [d_a, s_a, 0, 0]
                let sc = _mm_castpd_ps(_mm_load_sd(sp.add(2 * i).cast()));
                for r in 0..R {
                    let wblk = wp.add(r * t.wstride + i * wb);
                    // [d_w, m_w, .., ..] for q4_1; lane 0 only (d_w) for the others, whose 32-bit load
                    // (inside the block) also breaks any dependency on the register's old value
                    let h = _mm_cvtph_ps(_mm_cvtsi32_si128(wblk.cast::<i32>().read_unaligned()));
                    let q = if q41 {
                        summs[r] = _mm_fmadd_ps(h, sc, summs[r]);
                        let d = _mm256_broadcastss_ps(_mm_mul_ps(h, sc));
                        let q = _mm256_madd_epi16(_mm256_maddubs_epi16(quants(f, wblk), qa), ones);
                        (d, q)
                    } else {
                        let d = _mm256_broadcastss_ps(_mm_mul_ss(h, sc));
                        let qw = quants(f, wblk);
                        // |w| times sign(w) * a: maddubs needs an unsigned first operand
                        let aw = _mm256_sign_epi8(qw, qw);
                        let sa = _mm256_sign_epi8(qa, qw);
                        (d, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sa), ones))
                    };
                    acc[r] = _mm256_fmadd_ps(q.0, _mm256_cvtepi32_ps(q.1), acc[r]);
                }
            }
            for r in 0..R {
                let mut l = [0.0f32; 8];
                _mm256_storeu_ps(l.as_mut_ptr(), acc[r]);
                let s = if q41 { _mm_cvtss_f32(_mm_movehdup_ps(summs[r])) } else { 0.0 };
                out[r] = super::super::hsum8(&l) + s;
            }
        }
    }
}

/// The mat-vec with AVX-512 VNNI for the 32-element formats: two weight rows per 512-bit
/// register (row `r` in the low half, `r + 1` in the high one) against the activation block in
/// both halves; `vpdpbusd` for the products (the signed formats offset as in `tile512`, the
/// correction computed once per block for all rows), one `vmulps` for both rows' `d_w * d_a`, one
/// conversion and one FMA. Rows go in pairs of pairs ([`Rows::group`] is a hint for the AVX2
/// form only); an odd last row is paired with itself. Each result is [`super::dot`]'s, bit for bit.
#[cfg(target_arch = "x86_64")]
mod x86_512 {
    use super::super::tile512::{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, has_min, hsum_halves, offset_shift, unsigned_quants2};
    use super::{Format, QK, Rows};
    use std::arch::x86_64::*;

    /// [`super::dot_rows`] (bounds checked by the caller).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
    pub(super) unsafe fn dot_rows(t: &Rows<'_>, out: &mut [f32]) {
        macro_rules! formats {
            ($($f:ident),*) => {
                match t.f {
                    // SAFETY: forwarded from the caller.
                    $(Format::$f => unsafe { by_fours::<$f>(t, out) },)*
                    Format::Q4K | Format::Q5K | Format::Q6K => unreachable!("K-quants take the AVX2 form"),
                }
            };
        }
        formats!(Q8_0, Q4_0, Q4_1, Q5_0, Q5_1)
    }

    /// Rows four at a time (two register pairs), the last one to three in one or two pairs.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
    unsafe fn by_fours<const F: u8>(t: &Rows<'_>, out: &mut [f32]) {
        let mut r0 = 0;
        while r0 < t.rows {
            let n = 4.min(t.rows - r0);
            // SAFETY: rows `r0..r0 + n` are among the checked ones.
            unsafe {
                if n > 2 {
                    pairs::<2, F>(t, r0, n, &mut out[r0..r0 + n])
                } else {
                    pairs::<1, F>(t, r0, n, &mut out[r0..r0 + n])
                }
            };
            r0 += n;
        }
    }

    /// Rows `r0..r0 + n` (`n` at most `2 * P`) in `P` register pairs.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
    unsafe fn pairs<const P: usize, const F: u8>(t: &Rows<'_>, r0: usize, n: usize, out: &mut [f32]) {
        let (wb, ab) = (t.f.block_bytes(), t.f.act_block_bytes());
        let row = |p: usize, h: usize| r0 + (2 * p + h).min(n - 1);
        let shift = offset_shift(F);
        // SAFETY: the caller checked that rows `r0..r0 + n` of `w` (`wstride` apart) hold `nblocks`
        // whole blocks, `a` `nblocks` blocks and `scales` `2 * nblocks` floats; unaligned loads only.
        unsafe {
            let ones = _mm512_set1_epi8(1);
            let zero = _mm512_setzero_si512();
            let mut acc = [_mm512_setzero_ps(); P];
            // lanes 1 and 3: the two rows' running sums of m_w * s_a (q4_1, q5_1)
            let mut summs = [_mm_setzero_ps(); P];
            let (wp, ap, sp) = (t.w.as_ptr(), t.a.as_ptr(), t.scales.as_ptr());
            for i in 0..t.nblocks {
                let qa = _mm512_broadcast_i64x4(_mm256_loadu_si256(ap.add(i * ab + ab - QK).cast()));
                let corr = if shift != 0 {
                    _mm512_sll_epi32(_mm512_dpbusd_epi32(zero, ones, qa), _mm_cvtsi32_si128(shift as i32))
                } else {
                    zero
                };
                // [d_a, s_a, d_a, s_a]
                let sc = _mm_castpd_ps(_mm_loaddup_pd(sp.add(2 * i).cast()));
                for p in 0..P {
                    let (wa, wb_) = (wp.add(row(p, 0) * t.wstride + i * wb), wp.add(row(p, 1) * t.wstride + i * wb));
                    // hints only: the addresses may lie past the slice (never dereferenced)
                    _mm_prefetch::<_MM_HINT_T0>(wa.wrapping_add(super::PREFETCH).cast());
                    _mm_prefetch::<_MM_HINT_T0>(wb_.wrapping_add(super::PREFETCH).cast());
                    // [d_wa, m_wa, d_wb, m_wb] (the m lanes are quants for the formats without one)
                    let h = _mm_cvtph_ps(_mm_unpacklo_epi32(
                        _mm_cvtsi32_si128(wa.cast::<i32>().read_unaligned()),
                        _mm_cvtsi32_si128(wb_.cast::<i32>().read_unaligned()),
                    ));
                    if has_min(F) {
                        summs[p] = _mm_fmadd_ps(h, sc, summs[p]);
                    }
                    // [d_wa * d_a] x 8, [d_wb * d_a] x 8
                    let dd = _mm_mul_ps(h, sc);
                    let d = _mm512_insertf32x8::<1>(
                        _mm512_castps256_ps512(_mm256_broadcastss_ps(dd)),
                        _mm256_broadcastss_ps(_mm_movehl_ps(dd, dd)),
                    );
                    let mut q = _mm512_dpbusd_epi32(zero, unsigned_quants2::<F>(wa, wb_), qa);
                    if shift != 0 {
                        q = _mm512_sub_epi32(q, corr);
                    }
                    acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(q), acc[p]);
                }
            }
            for (p, (acc_p, summs_p)) in acc.iter().zip(&summs).enumerate() {
                let mut s = [0.0f32; 4];
                _mm_storeu_ps(s.as_mut_ptr(), *summs_p);
                for (h, sum) in hsum_halves(*acc_p).into_iter().enumerate() {
                    let k = 2 * p + h;
                    if k < n {
                        let m = if has_min(F) { s[2 * h + 1] } else { 0.0 };
                        out[k] = sum + m;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::stream;
    use super::super::{dot, quantize_act};
    use super::*;

    #[test]
    fn every_row_count_gives_dot_bit_for_bit() {
        for f in Format::ALL {
            for nb in [1, 5, 18] {
                let (wb, ab) = (f.block_bytes(), f.act_block_bytes());
                let mut r = stream(31 + nb as u64);
                // rows padded by one block so the stride differs from the row length
                let stride = (nb + 1) * wb;
                let w = super::super::tests::weights(f, 9 * (nb + 1), 31 + nb as u64);
                let x: Vec<f32> =
                    (0..nb * f.block_elems()).map(|_| ((r() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 5.0).collect();
                let mut a = vec![0u8; nb * ab];
                quantize_act(f, &x, &mut a);
                let mut scales = vec![0.0; 2 * nb];
                act_scales(f, &a, nb, &mut scales);
                for (rows, group) in (1..=ROWS_MAX).map(|r| (r, r)).chain([(5, 2), (7, 3), (4, 1), (9, 4)]) {
                    let t = Rows { f, w: &w, wstride: stride, rows, group, a: &a, scales: &scales, nblocks: nb };
                    // the dispatched form, and each x86 form this CPU can run on its own
                    let mut forms = vec![("dispatched", vec![f32::NAN; rows])];
                    dot_rows(&t, &mut forms[0].1);
                    #[cfg(target_arch = "x86_64")]
                    {
                        if crate::has_avx2_fma() {
                            let mut o = vec![f32::NAN; rows];
                            // SAFETY: the CPU has AVX2, FMA and F16C; `t` lies inside its slices.
                            unsafe { x86::dot_rows(&t, &mut o) };
                            forms.push(("avx2", o));
                        }
                        if crate::has_avx512_vnni() && !f.is_k() {
                            let mut o = vec![f32::NAN; rows];
                            // SAFETY: the CPU has AVX-512 VNNI and the rest; `t` lies inside its slices.
                            unsafe { x86_512::dot_rows(&t, &mut o) };
                            forms.push(("avx512", o));
                        }
                    }
                    for k in 0..rows {
                        let want = dot(f, &w[k * stride..], &a, nb);
                        let portable = dot_portable(f, &w[k * stride..], &a, nb);
                        assert_eq!(want.to_bits(), portable.to_bits());
                        for (name, out) in &forms {
                            let o = out[k];
                            assert_eq!(
                                o.to_bits(),
                                want.to_bits(),
                                "{name} {f:?} nb {nb} rows {rows} row {k}: {o} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "activation scales out of bounds")]
    fn missing_scales_panic() {
        let (w, a) = (vec![0u8; 20], vec![0u8; 36]);
        let t = Rows { f: Format::Q4_1, w: &w, wstride: 20, rows: 1, group: 1, a: &a, scales: &[0.0], nblocks: 1 };
        dot_rows(&t, &mut [0.0]);
    }
}
