//! Row kernels for ggml's block-quantized formats: dequantizing a row, quantizing an f32
//! activation row to 8-bit blocks, and the integer dot product of a weight row with such an
//! activation row. Each exists as an AVX2 form and a portable one that give bit-identical results
//! (tested in `tests.rs`); the register tile of dot products ([`dot_tile`]) also has an AVX-512
//! VNNI form for the 32-element formats (`tile512`), bit-identical again. The 32-element formats
//! live here; the 256-element K-quants (`q4_K`, `q5_K`, `q6_K`, dotted with `q8_K` activations)
//! in [`kquants`]; the mat-vec of several rows in `rows`.
//!
//! Block layouts (32 elements, little-endian, `d`/`m`/`s` IEEE f16): `q8_0` = `d` + 32 `i8`;
//! `q4_0` = `d` + 16 bytes whose low nibbles are elements 0..16 and high nibbles 16..32, element =
//! `d * (nibble - 8)`; `q4_1` = `d`, `m` + 16 nibble bytes, element = `d * nibble + m`; `q5_0` =
//! `d` + 32 high bits `qh` (bit `j` for element `j`) + 16 nibble bytes, element =
//! `d * ((nibble | high << 4) - 16)`; `q5_1` = `d`, `m`, `qh`, 16 nibble bytes, element =
//! `d * (nibble | high << 4) + m`.
//!
//! The matrix-vector arithmetic is ggml's on x86 (what llama.cpp computes there): the activation
//! row is quantized to 8 bits per block ([`quantize_act`]: `q8_0` for `q8_0`/`q4_0`/`q5_0`
//! weights, `q8_1` (`d`, `s = d * sum(q)`, 32 `i8`) for `q4_1`/`q5_1`), with `d = amax / 127`
//! stored as f16 and `q = round_half_even(x * 127 / amax)`; the dot then multiplies 8-bit integers
//! exactly and scales each block's integer partial sums by `d_w * d_a` into 8 f32 lanes (lane `l`
//! holds elements `4l..4l+4` of every block, accumulated with FMA), summed at the end as ggml's
//! `hsum_float_8` does; `q4_1`/`q5_1` add `sum over blocks of m_w * s_a`.
//!
//! The error this implies (beyond f32 rounding): each activation element moves by at most half a
//! step, `|x - x̂| <= amax_block / 254` (plus the f16 rounding of `d`, relative `2^-11`), so a dot
//! product differs from the exact one with the stored weights by at most
//! `sum over blocks of (amax_block / 254 + 2^-11 amax_block) * sum |w|` of that block, about 0.4% of
//! `sum |w| |x|` in the worst case and far less on average (the errors are independent).

pub mod kquants;
mod rows;
#[cfg(target_arch = "x86_64")]
mod tile512;

pub use rows::{PREFETCH, ROWS_MAX, Rows, act_scales, dot_rows};

/// Elements per block of the 32-element formats.
pub const QK: usize = 32;

/// Elements per block of the K-quants (ggml's `QK_K`).
pub const QK_K: usize = 256;

/// A quantized weight format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// ggml's `q8_0` (34 bytes per block of 32).
    Q8_0,
    /// ggml's `q4_0` (18 bytes per block of 32).
    Q4_0,
    /// ggml's `q4_1` (20 bytes per block of 32).
    Q4_1,
    /// ggml's `q5_0` (22 bytes per block of 32).
    Q5_0,
    /// ggml's `q5_1` (24 bytes per block of 32).
    Q5_1,
    /// ggml's `q4_K` (144 bytes per block of 256).
    Q4K,
    /// ggml's `q5_K` (176 bytes per block of 256).
    Q5K,
    /// ggml's `q6_K` (210 bytes per block of 256).
    Q6K,
}

impl Format {
    /// Every format, in declaration order.
    pub const ALL: [Format; 8] =
        [Format::Q8_0, Format::Q4_0, Format::Q4_1, Format::Q5_0, Format::Q5_1, Format::Q4K, Format::Q5K, Format::Q6K];

    /// Bytes of one block of weights.
    pub const fn block_bytes(self) -> usize {
        match self {
            Format::Q8_0 => 34,
            Format::Q4_0 => 18,
            Format::Q4_1 => 20,
            Format::Q5_0 => 22,
            Format::Q5_1 => 24,
            Format::Q4K => 144,
            Format::Q5K => 176,
            Format::Q6K => 210,
        }
    }

    /// Elements per block: [`QK`] or, for the K-quants, [`QK_K`].
    pub const fn block_elems(self) -> usize {
        if self.is_k() { QK_K } else { QK }
    }

    /// True for the 256-element K-quants (dotted with `q8_K` activations, [`kquants`]).
    pub const fn is_k(self) -> bool {
        matches!(self, Format::Q4K | Format::Q5K | Format::Q6K)
    }

    /// True for the formats with a block minimum `m` (dotted with `q8_1` activations).
    pub const fn has_min(self) -> bool {
        matches!(self, Format::Q4_1 | Format::Q5_1)
    }

    /// Bytes of one block of the activation format this weight format is dotted with (`q8_0`: 34,
    /// `q8_1`: 36, both per 32 elements; `q8_K`: 292 per 256).
    pub const fn act_block_bytes(self) -> usize {
        match self {
            Format::Q8_0 | Format::Q4_0 | Format::Q5_0 => 34,
            Format::Q4_1 | Format::Q5_1 => 36,
            Format::Q4K | Format::Q5K | Format::Q6K => kquants::Q8K_BYTES,
        }
    }
}

/// IEEE binary16 bits to f32 (exact).
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from(h >> 10) & 0x1f;
    let man = u32::from(h) & 0x3ff;
    if exp == 0 {
        // zero or subnormal: man * 2^-24
        let v = man as f32 * f32::from_bits(0x3380_0000);
        return f32::from_bits(v.to_bits() | sign);
    }
    if exp == 31 {
        return f32::from_bits(sign | 0x7f80_0000 | (man << 13));
    }
    f32::from_bits(sign | ((exp + 112) << 23) | (man << 13))
}

/// f32 to IEEE binary16 bits, rounding to nearest even (overflow to infinity, NaN kept quiet).
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 255 {
        return sign | 0x7c00 | if man != 0 { 0x200 | (man >> 13) as u16 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    let round = |m: u32, shift: u32| -> u32 {
        let q = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        if rem > half || (rem == half && q & 1 == 1) { q + 1 } else { q }
    };
    if e <= 0 {
        // subnormal (or zero): units of 2^-24
        let shift = (126 - exp) as u32;
        if shift > 24 {
            return sign;
        }
        return sign | round(man | 0x80_0000, shift) as u16;
    }
    // a carry out of the mantissa moves into the exponent (up to infinity), as it should
    sign | (((e as u32) << 10) + round(man, 13)) as u16
}

#[inline]
fn half_at(b: &[u8], i: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[i], b[i + 1]]))
}

/// The 32 integer quants of a block of a 32-element format `f` (signed values for `q8_0`, `q4_0`,
/// `q5_0`; the unsigned ones of `q4_1`, `q5_1`), in element order.
#[inline]
fn unpack32(f: Format, b: &[u8]) -> [i32; QK] {
    let mut q = [0i32; QK];
    match f {
        Format::Q8_0 => q.iter_mut().zip(&b[2..34]).for_each(|(o, &v)| *o = i32::from(v as i8)),
        Format::Q4_0 | Format::Q4_1 => {
            let (ns, off) = if f == Format::Q4_0 { (&b[2..18], 8) } else { (&b[4..20], 0) };
            for (j, &v) in ns.iter().enumerate() {
                q[j] = i32::from(v & 15) - off;
                q[j + 16] = i32::from(v >> 4) - off;
            }
        }
        Format::Q5_0 | Format::Q5_1 => {
            let (h, off) = if f == Format::Q5_0 { (2, 16) } else { (4, 0) };
            let qh = u32::from_le_bytes([b[h], b[h + 1], b[h + 2], b[h + 3]]);
            for (j, &v) in b[h + 4..h + 20].iter().enumerate() {
                q[j] = (i32::from(v & 15) | ((qh >> j & 1) << 4) as i32) - off;
                q[j + 16] = (i32::from(v >> 4) | ((qh >> (j + 16) & 1) << 4) as i32) - off;
            }
        }
        Format::Q4K | Format::Q5K | Format::Q6K => unreachable!("K-quants are unpacked in `kquants`"),
    }
    q
}

// ----- dequantization -----

fn dequantize_portable(f: Format, src: &[u8], out: &mut [f32]) {
    if f.is_k() {
        return kquants::dequantize(f, src, out);
    }
    for (b, o) in src.chunks_exact(f.block_bytes()).zip(out.chunks_exact_mut(QK)) {
        let d = half_at(b, 0);
        let q = unpack32(f, b);
        if f.has_min() {
            let m = half_at(b, 2);
            o.iter_mut().zip(q).for_each(|(o, q)| *o = d * q as f32 + m);
        } else {
            o.iter_mut().zip(q).for_each(|(o, q)| *o = d * q as f32);
        }
    }
}

crate::dispatch!(
    /// Dequantizes whole blocks of `f` from `src` into `out` (`out.len() / f.block_elems()` blocks;
    /// `src` holds at least that many). `q4_1`/`q5_1` compute `d * q + m` as a rounded product then a
    /// rounded sum (no FMA), as ggml's `dequantize_row_q4_1` does.
    pub fn dequantize_row(f: Format, src: &[u8], out: &mut [f32]) -> () => x86::dequantize_row | dequantize_portable
);

// ----- activation quantization -----

/// `vcvtps2dq` of an integral value: out-of-range values and NaN give `i32::MIN` (only reachable
/// through a subnormal block maximum, whose `127 / amax` overflows; kept so both forms agree).
#[inline]
fn cvt_i32(r: f32) -> i32 {
    if (-2147483648.0..2147483648.0).contains(&r) { r as i32 } else { i32::MIN }
}

fn quantize_act_portable(f: Format, x: &[f32], out: &mut [u8]) {
    if f.is_k() {
        return kquants::quantize_q8k(x, out);
    }
    let bb = f.act_block_bytes();
    for (xb, ob) in x.chunks_exact(QK).zip(out.chunks_exact_mut(bb)) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        ob[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        let qs = &mut ob[bb - QK..];
        let mut sum = 0i32;
        for (q, &v) in qs.iter_mut().zip(xb) {
            let r = cvt_i32((v * id).round_ties_even());
            sum = sum.wrapping_add(r);
            *q = r.clamp(-128, 127) as i8 as u8;
        }
        if f.has_min() {
            ob[2..4].copy_from_slice(&f32_to_f16(d * sum as f32).to_le_bytes());
        }
    }
}

crate::dispatch!(
    /// Quantizes the activation row `x` (a multiple of `f.block_elems()` long) into the 8-bit blocks
    /// that weights of format `f` are dotted with (`out`: `x.len() / f.block_elems() *
    /// f.act_block_bytes()` bytes; `q8_K` blocks for the K-quants).
    pub fn quantize_act(f: Format, x: &[f32], out: &mut [u8]) -> () => x86::quantize_act | quantize_act_portable
);

// ----- dot products -----

/// ggml's `hsum_float_8`: `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
#[inline]
fn hsum8(l: &[f32; 8]) -> f32 {
    let r: [f32; 4] = std::array::from_fn(|i| l[i + 4] + l[i]);
    (r[0] + r[2]) + (r[1] + r[3])
}

fn dot_portable(f: Format, w: &[u8], a: &[u8], nblocks: usize) -> f32 {
    if f.is_k() {
        return kquants::dot_portable(f, w, a, nblocks);
    }
    let (wb, ab) = (f.block_bytes(), f.act_block_bytes());
    let mut lanes = [0.0f32; 8];
    let mut summs = 0.0f32;
    for i in 0..nblocks {
        let (w, a) = (&w[i * wb..(i + 1) * wb], &a[i * ab..(i + 1) * ab]);
        let (dw, da) = (half_at(w, 0), half_at(a, 0));
        let wq = unpack32(f, w);
        if f.has_min() {
            summs = half_at(w, 2).mul_add(half_at(a, 2), summs);
        }
        let aq = &a[ab - QK..];
        let d = dw * da;
        for (l, lane) in lanes.iter_mut().enumerate() {
            let s: i32 = (4 * l..4 * l + 4).map(|j| wq[j] * i32::from(aq[j] as i8)).sum();
            *lane = d.mul_add(s as f32, *lane);
        }
    }
    hsum8(&lanes) + summs
}

crate::dispatch!(
    /// The dot product of `nblocks` blocks of a weight row of format `f` with an activation row
    /// quantized by [`quantize_act`] for `f` (ggml's `vec_dot` of the pair on x86).
    pub fn dot(f: Format, w: &[u8], a: &[u8], nblocks: usize) -> f32 => x86::dot | dot_portable
);

/// Most weight rows of a [`Tile`].
pub const TILE: usize = 4;

/// How far ahead of the block being read a [`Tile`] with [`Tile::prefetch`] hints each of its
/// weight rows, in bytes. A tile reads its rows a block at a time side by side, so this runs into
/// the rows of the next tile. In a batch-4 decode step of SmolLM2 (2 threads, AMD EPYC Zen 4, the
/// same binary with the hints switched off and on, so the same kernel code) the step went from
/// 17.2 to 14.3 ms (medians of 6 alternated rounds); 2, 4 and 8 KiB did not separate in the noise.
/// A distance of 0 (hinting the block being read) was slower than all of them (19-21 ms).
pub const TILE_PREFETCH: usize = 4096;

/// Hints the cache lines of the `len`-byte weight block at `p` [`TILE_PREFETCH`] bytes ahead.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_block(p: *const u8, len: usize) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    let mut o = 0;
    while o < len {
        // SAFETY: a hint only: the address is never dereferenced, and may lie past the weights
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(TILE_PREFETCH + o).cast()) };
        o += 64;
    }
}

/// Most activation columns of a [`Tile`].
pub const TILE_COLS: usize = 8;

/// The tile shape (weight rows, activation columns) that [`dot_tile`] runs fastest for format `f`
/// on this CPU: four rows by eight columns for the 32-element formats with AVX-512 VNNI (two
/// columns per 512-bit register, `tile512`), else two rows by four columns (eight AVX2
/// accumulators in sixteen registers). The K-quants keep the AVX2 tile: a 512-bit form of it
/// (`vpdpwssd` for `vpmaddwd` + `vpaddd`, two columns per register) measured 1.2-1.7x slower
/// (4 and 16 columns of `q4_K` and `q6_K`, 1536 x 768 weights, one thread), while the 32-element
/// formats' tile is 1.1-1.5x faster.
pub fn tile_shape(f: Format) -> (usize, usize) {
    if !f.is_k() && crate::has_avx512_vnni() { (4, 8) } else { (2, 4) }
}

fn dot_tile_portable(t: &Tile<'_>, out: &mut [f32]) {
    for r in 0..t.rows {
        for c in 0..t.cols {
            out[r * t.cols + c] = dot_portable(t.f, &t.w[r * t.wstride..], &t.a[c * t.astride..], t.nblocks);
        }
    }
}

/// A tile of dot products for [`dot_tile`]: `rows` weight rows of format `f` starting `wstride`
/// bytes apart in `w`, times `cols` activation rows (quantized by [`quantize_act`] for `f`)
/// `astride` bytes apart in `a`, over `nblocks` blocks.
#[derive(Debug, Clone, Copy)]
pub struct Tile<'a> {
    /// The weight format.
    pub f: Format,
    /// The weight rows' bytes.
    pub w: &'a [u8],
    /// Bytes from one weight row to the next.
    pub wstride: usize,
    /// Weight rows, 1 to [`TILE`].
    pub rows: usize,
    /// The activation rows' bytes.
    pub a: &'a [u8],
    /// Bytes from one activation row to the next.
    pub astride: usize,
    /// Activation rows, 1 to [`TILE_COLS`].
    pub cols: usize,
    /// Blocks per row.
    pub nblocks: usize,
    /// The activation rows' block scales as f32 ([`TileScales`]), where the caller has them: the
    /// AVX-512 tile then loads each block's scales of all columns at once instead of converting
    /// them per tile. `None`: every form converts them itself (the results are the same).
    pub scales: Option<TileScales<'a>>,
    /// Prefetch the weights [`TILE_PREFETCH`] bytes ahead of each block read (a hint: the results
    /// are the same). Worth it where the rows come from memory, as they do in the first tile of
    /// a weight row; where the same rows are read again for further columns they are in cache, and
    /// the hints would only pull in rows past them.
    pub prefetch: bool,
}

/// Block scales of a tile's activation columns, block-major, as [`tile_scales`] lays them out:
/// `d[i * stride + c]` and `s[i * stride + c]` are block `i`'s `d` and `s` (0 for `q8_0`
/// activations) of the tile's column `c`; at least [`TILE_COLS`] floats are readable from each
/// block's first column (so one vector load takes them all).
#[derive(Debug, Clone, Copy)]
pub struct TileScales<'a> {
    /// The `d`s.
    pub d: &'a [f32],
    /// The `s`s.
    pub s: &'a [f32],
    /// Floats from one block's first column to the next block's.
    pub stride: usize,
}

/// The block scales of `n` activation rows (quantized by [`quantize_act`] for the 32-element
/// format `f`, `astride` bytes apart in `a`, `nblocks` blocks each) as f32, block-major, for
/// [`TileScales`] with `stride` = `n`: returns `(d, s)`, each `nblocks * n + TILE_COLS` long (the
/// tail padded with zeros). A tile of columns `j0..` takes the slices from `j0` on. Empty for the
/// K-quants (their tile reads the `q8_K` blocks' f32 `d` directly).
pub fn tile_scales(f: Format, a: &[u8], astride: usize, n: usize, nblocks: usize) -> (Vec<f32>, Vec<f32>) {
    if f.is_k() {
        return (Vec::new(), Vec::new());
    }
    let ab = f.act_block_bytes();
    let (mut d, mut s) = (vec![0.0f32; nblocks * n + TILE_COLS], vec![0.0f32; nblocks * n + TILE_COLS]);
    for c in 0..n {
        for i in 0..nblocks {
            let b = &a[c * astride + i * ab..];
            d[i * n + c] = half_at(b, 0);
            if f.has_min() {
                s[i * n + c] = half_at(b, 2);
            }
        }
    }
    (d, s)
}

impl Tile<'_> {
    /// Panics unless every row the tile reads lies inside its slices, `rows` is 1 to [`TILE`] and
    /// `cols` 1 to [`TILE_COLS`].
    fn check(&self, out: &[f32]) {
        let (wb, ab) = (self.f.block_bytes(), self.f.act_block_bytes());
        assert!((1..=TILE).contains(&self.rows) && (1..=TILE_COLS).contains(&self.cols), "tile sides 1 to 4 by 1 to 8");
        assert!(self.w.len() >= (self.rows - 1) * self.wstride + self.nblocks * wb, "weight rows out of bounds");
        assert!(self.a.len() >= (self.cols - 1) * self.astride + self.nblocks * ab, "activation rows out of bounds");
        assert!(out.len() >= self.rows * self.cols, "tile output too short");
        if let Some(sc) = self.scales {
            let need = self.nblocks.saturating_sub(1) * sc.stride + TILE_COLS;
            assert!(
                self.nblocks == 0 || (sc.d.len() >= need && sc.s.len() >= need && sc.stride >= self.cols),
                "tile scales out of bounds"
            );
        }
    }
}

/// [`dot_tile`]'s checked body: the AVX-512 tile, the AVX2 tile (at most four columns a call) or
/// the portable pairwise dots.
#[inline]
fn dot_tile_checked(t: &Tile<'_>, out: &mut [f32]) {
    t.check(out);
    #[cfg(target_arch = "x86_64")]
    {
        if !t.f.is_k() && crate::has_avx512_vnni() {
            // SAFETY: the CPU has AVX-512 F/BW/VL/DQ/VNNI, AVX2, FMA and F16C; bounds checked above.
            unsafe { tile512::dot_tile(t, out) };
            return;
        }
        if crate::has_avx2_fma() {
            // SAFETY: the CPU has AVX2, FMA and F16C; the bounds were checked above.
            unsafe { dot_tile_avx2(t, out) };
            return;
        }
    }
    dot_tile_portable(t, out)
}

/// The AVX2 tile of a checked [`Tile`]: one call of `x86::dot_tile` for up to four columns, else
/// two, written back into the `rows x cols` layout of `out`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C, and `t` must have passed [`Tile::check`] for `out`.
#[cfg(target_arch = "x86_64")]
unsafe fn dot_tile_avx2(t: &Tile<'_>, out: &mut [f32]) {
    if t.cols <= 4 {
        // SAFETY: forwarded from the caller.
        unsafe { x86::dot_tile(t, out) };
        return;
    }
    let mut part = [0.0f32; TILE * 4];
    for c0 in [0, 4] {
        let n = 4.min(t.cols - c0);
        let half = Tile { a: &t.a[c0 * t.astride..], cols: n, scales: None, ..*t };
        // SAFETY: forwarded from the caller; `half`'s columns are among the checked ones.
        unsafe { x86::dot_tile(&half, &mut part) };
        for r in 0..t.rows {
            out[r * t.cols + c0..r * t.cols + c0 + n].copy_from_slice(&part[r * n..(r + 1) * n]);
        }
    }
}

/// The `rows x cols` dot products of a [`Tile`] into `out` (row-major: `out[r * cols + c]` is weight
/// row `r` times activation row `c`), each bit-identical to [`dot`] of that pair: every pair keeps
/// its own accumulators and adds the same terms in the same order, while each weight block is
/// unpacked once for all `cols` columns and each activation block loaded once for all `rows` rows.
/// Panics if a side is 0 or above its bound ([`TILE`] rows, [`TILE_COLS`] columns) or a row lies
/// outside its slice.
pub fn dot_tile(t: &Tile<'_>, out: &mut [f32]) {
    dot_tile_checked(t, out)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Format, QK, f32_to_f16, half_at};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn dequantize_row(f: Format, src: &[u8], out: &mut [f32]) {
        if f.is_k() {
            return super::kquants::dequantize(f, src, out);
        }
        let bb = f.block_bytes();
        let nb = out.len() / QK;
        assert!(src.len() >= nb * bb);
        for i in 0..nb {
            let b = &src[i * bb..(i + 1) * bb];
            let o = &mut out[i * QK..(i + 1) * QK];
            // SAFETY: `b` holds one whole block and `o` 32 floats (sliced above); unaligned loads and
            // stores only.
            unsafe {
                let d = _mm256_set1_ps(half_at(b, 0));
                let q = quants(f, b.as_ptr());
                let m = if f.has_min() { _mm256_set1_ps(half_at(b, 2)) } else { _mm256_setzero_ps() };
                let lo = _mm256_castsi256_si128(q);
                let hi = _mm256_extracti128_si256::<1>(q);
                let parts = [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)];
                for (k, p) in parts.into_iter().enumerate() {
                    let v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p));
                    let mut r = _mm256_mul_ps(d, v);
                    if f.has_min() {
                        r = _mm256_add_ps(r, m);
                    }
                    _mm256_storeu_ps(o[8 * k..].as_mut_ptr(), r);
                }
            }
        }
    }

    /// The 32 quants of a block of a 32-element format `f` at `b` as bytes in element order: signed
    /// for `q8_0`, `q4_0` (`nibble - 8`) and `q5_0` (`(nibble | high << 4) - 16`), unsigned for
    /// `q4_1` and `q5_1`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quants(f: Format, b: *const u8) -> __m256i {
        // SAFETY: the caller passes one whole block of `f`.
        unsafe {
            match f {
                Format::Q8_0 => _mm256_loadu_si256(b.add(2).cast()),
                Format::Q4_0 => _mm256_sub_epi8(nibbles(b.add(2)), _mm256_set1_epi8(8)),
                Format::Q4_1 => nibbles(b.add(4)),
                // the high bit set gives nibble + 16 - 16; clear, nibble - 16 (0xF0 over the nibble)
                Format::Q5_0 => _mm256_or_si256(
                    nibbles(b.add(6)),
                    _mm256_andnot_si256(high_bits(b.add(2)), _mm256_set1_epi8(0xF0u8 as i8)),
                ),
                Format::Q5_1 => {
                    _mm256_or_si256(nibbles(b.add(8)), _mm256_and_si256(high_bits(b.add(4)), _mm256_set1_epi8(16)))
                }
                Format::Q4K | Format::Q5K | Format::Q6K => unreachable!("K-quants are unpacked in `kquants`"),
            }
        }
    }

    /// The 32 bits at `p` (little-endian) as 32 bytes, byte `j` all ones where bit `j` is set.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn high_bits(p: *const u8) -> __m256i {
        // SAFETY: the caller passes 4 readable bytes.
        let bits = unsafe { p.cast::<i32>().read_unaligned() };
        // byte j takes byte j / 8 of the word, then keeps only bit j % 8
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(bits),
            _mm256_setr_epi64x(0, 0x0101_0101_0101_0101, 0x0202_0202_0202_0202, 0x0303_0303_0303_0303),
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit)
    }

    /// 32 nibbles of 16 bytes as bytes: low nibbles in bytes 0..16, high nibbles in 16..32.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn nibbles(p: *const u8) -> __m256i {
        // SAFETY: the caller passes 16 readable bytes.
        let t = unsafe { _mm_loadu_si128(p.cast()) };
        let both = _mm256_set_m128i(_mm_srli_epi16::<4>(t), t);
        _mm256_and_si256(both, _mm256_set1_epi8(15))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn quantize_act(f: Format, x: &[f32], out: &mut [u8]) {
        if f.is_k() {
            return super::kquants::quantize_q8k(x, out);
        }
        let bb = f.act_block_bytes();
        let nb = x.len() / QK;
        assert!(out.len() >= nb * bb);
        for i in 0..nb {
            let xb = &x[i * QK..(i + 1) * QK];
            let ob = &mut out[i * bb..(i + 1) * bb];
            // SAFETY: `xb` holds 32 floats and `ob` one block (sliced above); unaligned accesses only.
            unsafe {
                let v: [__m256; 4] = std::array::from_fn(|k| _mm256_loadu_ps(xb[8 * k..].as_ptr()));
                let sign = _mm256_set1_ps(-0.0);
                let mut mx = _mm256_andnot_ps(sign, v[0]);
                for vk in &v[1..] {
                    mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, *vk));
                }
                let mut m4 = _mm_max_ps(_mm256_extractf128_ps::<1>(mx), _mm256_castps256_ps128(mx));
                m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
                m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
                let amax = _mm_cvtss_f32(m4);
                let d = amax / 127.0;
                let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
                ob[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
                let mul = _mm256_set1_ps(id);
                let i: [__m256i; 4] = std::array::from_fn(|k| {
                    _mm256_cvtps_epi32(_mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                        _mm256_mul_ps(v[k], mul),
                    ))
                });
                if f.has_min() {
                    let s = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
                    let mut l = [0i32; 8];
                    _mm256_storeu_si256(l.as_mut_ptr().cast(), s);
                    let sum = l.iter().fold(0i32, |s, &v| s.wrapping_add(v));
                    ob[2..4].copy_from_slice(&f32_to_f16(d * sum as f32).to_le_bytes());
                }
                // pack to i8 in element order (the packs interleave 128-bit lanes; a permute restores it)
                let p01 = _mm256_packs_epi32(i[0], i[1]);
                let p23 = _mm256_packs_epi32(i[2], i[3]);
                let p = _mm256_packs_epi16(p01, p23);
                let p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256(ob[bb - QK..].as_mut_ptr().cast(), p);
            }
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn dot(f: Format, w: &[u8], a: &[u8], nblocks: usize) -> f32 {
        if f.is_k() {
            return super::kquants::x86::dot(f, w, a, nblocks);
        }
        let (wb, ab) = (f.block_bytes(), f.act_block_bytes());
        assert!(w.len() >= nblocks * wb && a.len() >= nblocks * ab);
        let mut summs = 0.0f32;
        // SAFETY: every block read lies inside `w` or `a` (asserted above); unaligned loads only.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let mut acc = _mm256_setzero_ps();
            let (wp, ap) = (w.as_ptr(), a.as_ptr());
            for i in 0..nblocks {
                let (wblk, ablk) = (wp.add(i * wb), ap.add(i * ab));
                let (dw, da) = f16_pair(wblk, ablk);
                let d = _mm256_set1_ps(dw * da);
                let qa = _mm256_loadu_si256(ablk.add(ab - QK).cast());
                let qw = quants(f, wblk);
                let q = if f.has_min() {
                    let (m, sa) = f16_pair(wblk.add(2), ablk.add(2));
                    summs = m.mul_add(sa, summs);
                    _mm256_madd_epi16(_mm256_maddubs_epi16(qw, qa), ones)
                } else {
                    // |w| times sign(w) * a: maddubs needs an unsigned first operand
                    let aw = _mm256_sign_epi8(qw, qw);
                    let sa = _mm256_sign_epi8(qa, qw);
                    _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sa), ones)
                };
                acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), acc);
            }
            let mut l = [0.0f32; 8];
            _mm256_storeu_ps(l.as_mut_ptr(), acc);
            super::hsum8(&l) + summs
        }
    }

    /// A [`super::Tile`] of dot products (bounds checked by the caller), monomorphized per shape.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_tile(t: &super::Tile<'_>, out: &mut [f32]) {
        if t.rows == 1 && t.cols == 1 {
            // one pair: the plain dot (the same arithmetic, without the tile's bookkeeping)
            out[0] = dot(t.f, t.w, t.a, t.nblocks);
            return;
        }
        macro_rules! shapes {
            ($(($r:literal, $c:literal)),*) => {
                match (t.rows, t.cols) {
                    $(($r, $c) => {
                        let mut o = [[0.0f32; $c]; $r];
                        // SAFETY: forwarded from the caller.
                        unsafe {
                            if t.f.is_k() {
                                super::kquants::x86::tile::<$r, $c>(t, &mut o)
                            } else {
                                tile::<$r, $c>(t, &mut o)
                            }
                        };
                        for (r, row) in o.iter().enumerate() {
                            out[r * $c..(r + 1) * $c].copy_from_slice(row);
                        }
                    })*
                    _ => unreachable!("tile sides are checked to be 1 to 4"),
                }
            };
        }
        shapes!(
            (1, 1),
            (1, 2),
            (1, 3),
            (1, 4),
            (2, 1),
            (2, 2),
            (2, 3),
            (2, 4),
            (3, 1),
            (3, 2),
            (3, 3),
            (3, 4),
            (4, 1),
            (4, 2),
            (4, 3),
            (4, 4)
        );
    }

    /// The x86 tile: per block, each of the `R` weight rows is unpacked once and each of the `C`
    /// activation blocks loaded once; pair `(r, c)` accumulates exactly as [`dot`] does.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile<const R: usize, const C: usize>(t: &super::Tile<'_>, out: &mut [[f32; C]; R]) {
        let f = t.f;
        let (wb, ab) = (f.block_bytes(), f.act_block_bytes());
        // SAFETY: the caller checked that rows `0..R` of `w` (`wstride` apart) and `0..C` of `a`
        // (`astride` apart) hold `nblocks` whole blocks each; unaligned loads only.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let mut acc = [[_mm256_setzero_ps(); C]; R];
            let mut summs = [[0.0f32; C]; R];
            let (wp, ap) = (t.w.as_ptr(), t.a.as_ptr());
            for i in 0..t.nblocks {
                let mut dw = [0.0f32; R];
                let mut mw = [0.0f32; R];
                let mut qw = [_mm256_setzero_si256(); R];
                let mut aw = [_mm256_setzero_si256(); R];
                for r in 0..R {
                    let wblk = wp.add(r * t.wstride + i * wb);
                    if t.prefetch {
                        super::prefetch_block(wblk, wb);
                    }
                    (dw[r], mw[r]) = f16_pair(wblk, wblk.add(2));
                    qw[r] = quants(f, wblk);
                    aw[r] = _mm256_sign_epi8(qw[r], qw[r]);
                }
                for c in 0..C {
                    let ablk = ap.add(c * t.astride + i * ab);
                    let (da, sa) = f16_pair(ablk, ablk.add(2));
                    let qa = _mm256_loadu_si256(ablk.add(ab - QK).cast());
                    for r in 0..R {
                        let q = if f.has_min() {
                            summs[r][c] = mw[r].mul_add(sa, summs[r][c]);
                            _mm256_madd_epi16(_mm256_maddubs_epi16(qw[r], qa), ones)
                        } else {
                            let sa8 = _mm256_sign_epi8(qa, qw[r]);
                            _mm256_madd_epi16(_mm256_maddubs_epi16(aw[r], sa8), ones)
                        };
                        let d = _mm256_set1_ps(dw[r] * da);
                        acc[r][c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), acc[r][c]);
                    }
                }
            }
            for r in 0..R {
                for c in 0..C {
                    let mut l = [0.0f32; 8];
                    _mm256_storeu_ps(l.as_mut_ptr(), acc[r][c]);
                    out[r][c] = super::hsum8(&l) + summs[r][c];
                }
            }
        }
    }

    /// The f16s at `p` and `q` as f32, converted together by F16C (exactly, as `f16_to_f32`).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn f16_pair(p: *const u8, q: *const u8) -> (f32, f32) {
        // SAFETY: the caller passes 2 readable bytes at each pointer.
        let (a, b) = unsafe { (p.cast::<u16>().read_unaligned(), q.cast::<u16>().read_unaligned()) };
        let v = _mm_cvtph_ps(_mm_cvtsi32_si128((u32::from(a) | (u32::from(b) << 16)) as i32));
        (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random stream (xorshift) for test data (also `quant::rows`' tests).
    pub(crate) fn stream(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed.max(1);
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    fn floats(n: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut r = stream(seed);
        (0..n).map(|_| ((r() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * scale).collect()
    }

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut r = stream(seed);
        (0..n).map(|_| (r() >> 32) as u8).collect()
    }

    /// Random blocks of `f` with sane f16 scales (random bytes elsewhere).
    pub(crate) fn weights(f: Format, nb: usize, seed: u64) -> Vec<u8> {
        if f.is_k() {
            return kquants::tests::blocks(f, nb, seed);
        }
        let mut w = bytes(nb * f.block_bytes(), seed);
        let s = floats(2 * nb, seed + 1, 0.05);
        for i in 0..nb {
            let b = &mut w[i * f.block_bytes()..];
            b[..2].copy_from_slice(&f32_to_f16(s[2 * i].abs()).to_le_bytes());
            if f.has_min() {
                b[2..4].copy_from_slice(&f32_to_f16(s[2 * i + 1]).to_le_bytes());
            }
        }
        w
    }

    #[test]
    fn f16_conversions_round_trip_and_round_to_even() {
        for h in 0..=u16::MAX {
            let x = f16_to_f32(h);
            if x.is_nan() {
                assert!(f16_to_f32(f32_to_f16(x)).is_nan());
            } else {
                assert_eq!(f32_to_f16(x), h, "{h:#06x} -> {x}");
            }
        }
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00); // tie to even
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // rounds up to infinity
        assert_eq!(f32_to_f16(2f32.powi(-25)), 0); // tie to even zero
        assert_eq!(f32_to_f16(3.0 * 2f32.powi(-26)), 1);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
    }

    #[test]
    fn the_x86_forms_match_the_portable_ones_bit_for_bit() {
        if !crate::has_avx2_fma() {
            return;
        }
        for f in Format::ALL {
            for (nb, seed) in [(1, 1), (3, 2), (18, 3), (48, 4)] {
                let w = weights(f, nb, seed);
                let qk = f.block_elems();
                let (mut p, mut x) = (vec![0.0; nb * qk], vec![0.0; nb * qk]);
                dequantize_portable(f, &w, &mut p);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the CPU has AVX2, FMA and F16C (checked above).
                unsafe {
                    x86::dequantize_row(f, &w, &mut x)
                };
                assert_eq!(
                    p.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    x.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
                let mut act = floats(nb * qk, seed + 9, 3.0);
                act[5] = 0.0;
                if nb > 3 {
                    act[QK..2 * QK].fill(0.0); // an all-zero block
                    act[2 * QK..3 * QK - 1].fill(0.0);
                    act[3 * QK - 1] = 1e-41; // a block whose maximum is subnormal
                    act[3 * QK + 7] = 1e-40; // a subnormal among normal values
                }
                let (mut qp, mut qx) = (vec![0u8; nb * f.act_block_bytes()], vec![0u8; nb * f.act_block_bytes()]);
                quantize_act_portable(f, &act, &mut qp);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                unsafe {
                    x86::quantize_act(f, &act, &mut qx)
                };
                assert_eq!(qp, qx, "{f:?} {nb}");
                let dp = dot_portable(f, &w, &qp, nb);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                let dx = unsafe { x86::dot(f, &w, &qp, nb) };
                assert_eq!(dp.to_bits(), dx.to_bits(), "{f:?} {nb}: {dp} vs {dx}");
            }
        }
    }

    #[test]
    fn every_tile_shape_gives_the_pairwise_dots_bit_for_bit() {
        for f in Format::ALL {
            let nb = 7;
            let (wb, ab) = (f.block_bytes(), f.act_block_bytes());
            // rows padded by one block so the strides differ from the row length
            let w = weights(f, TILE * (nb + 1), 21);
            let x = floats(TILE_COLS * (nb + 1) * f.block_elems(), 22, 2.5);
            let mut a = vec![0u8; TILE_COLS * (nb + 1) * ab];
            quantize_act(f, &x, &mut a);
            let (sd, ss) = tile_scales(f, &a, (nb + 1) * ab, TILE_COLS, nb);
            let given = TileScales { d: &sd, s: &ss, stride: TILE_COLS };
            for (rows, cols, scales) in (1..=TILE)
                .flat_map(|r| (1..=TILE_COLS).map(move |c| (r, c)))
                .flat_map(|(r, c)| [None, (!f.is_k()).then_some(given)].into_iter().map(move |s| (r, c, s)))
            {
                {
                    let t = Tile {
                        f,
                        w: &w,
                        wstride: (nb + 1) * wb,
                        rows,
                        a: &a,
                        astride: (nb + 1) * ab,
                        cols,
                        nblocks: nb,
                        scales,
                        // a hint only: the same bits either way
                        prefetch: cols % 2 == 1,
                    };
                    // the dispatched tile, and each x86 form this CPU can run on its own
                    let mut forms = vec![("dispatched", vec![f32::NAN; rows * cols])];
                    dot_tile(&t, &mut forms[0].1);
                    #[cfg(target_arch = "x86_64")]
                    {
                        if crate::has_avx2_fma() {
                            let mut o = vec![f32::NAN; rows * cols];
                            // SAFETY: the CPU has AVX2, FMA and F16C; `t` passed its check.
                            unsafe { dot_tile_avx2(&t, &mut o) };
                            forms.push(("avx2", o));
                        }
                        if crate::has_avx512_vnni() && !f.is_k() {
                            let mut o = vec![f32::NAN; rows * cols];
                            // SAFETY: the CPU has AVX-512 VNNI and the rest; `t` lies inside its slices.
                            unsafe { tile512::dot_tile(&t, &mut o) };
                            forms.push(("avx512", o));
                        }
                    }
                    for r in 0..rows {
                        for c in 0..cols {
                            let want = dot(f, &w[r * t.wstride..], &a[c * t.astride..], nb);
                            let portable = dot_portable(f, &w[r * t.wstride..], &a[c * t.astride..], nb);
                            assert_eq!(want.to_bits(), portable.to_bits());
                            for (name, out) in &forms {
                                assert_eq!(
                                    out[r * cols + c].to_bits(),
                                    want.to_bits(),
                                    "{name} {f:?} {rows}x{cols} ({r}, {c}), scales given: {}",
                                    scales.is_some()
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "tile scales out of bounds")]
    fn tile_scales_too_short_for_a_vector_load_panic() {
        let (w, a) = (vec![0u8; 2 * 18], vec![0u8; 2 * 34]);
        // two blocks of one column: the second block's load needs `stride + TILE_COLS` floats
        let (d, s) = (vec![0.0f32; TILE_COLS], vec![0.0f32; TILE_COLS]);
        let scales = Some(TileScales { d: &d, s: &s, stride: 1 });
        let t = Tile {
            f: Format::Q4_0,
            w: &w,
            wstride: 36,
            rows: 1,
            a: &a,
            astride: 68,
            cols: 1,
            nblocks: 2,
            scales,
            prefetch: false,
        };
        dot_tile(&t, &mut [0.0; 1]);
    }

    #[test]
    #[should_panic(expected = "weight rows out of bounds")]
    fn a_tile_reaching_past_its_weights_panics() {
        let w = vec![0u8; 2 * 18];
        let a = vec![0u8; 34];
        let t = Tile {
            f: Format::Q4_0,
            w: &w,
            wstride: 18,
            rows: 3,
            a: &a,
            astride: 34,
            cols: 1,
            nblocks: 1,
            scales: None,
            prefetch: true,
        };
        dot_tile(&t, &mut [0.0; 3]);
    }

    #[test]
    fn dot_is_within_the_stated_bound_of_the_exact_product() {
        // the 32-element formats (the K-quants' q8_K bound is tested in `kquants`)
        for f in Format::ALL.into_iter().filter(|f| !f.is_k()) {
            let nb = 18;
            let w = weights(f, nb, 7);
            let mut wd = vec![0.0; nb * QK];
            dequantize_row(f, &w, &mut wd);
            let x = floats(nb * QK, 8, 2.0);
            let mut q = vec![0u8; nb * f.act_block_bytes()];
            quantize_act(f, &x, &mut q);
            let got = f64::from(dot(f, &w, &q, nb));
            let exact: f64 = wd.iter().zip(&x).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
            let mut bound = 0.0;
            for b in 0..nb {
                let r = b * QK..(b + 1) * QK;
                let amax = x[r.clone()].iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let sw: f64 = wd[r].iter().map(|v| f64::from(v.abs())).sum();
                bound += (f64::from(amax) / 254.0 + f64::from(amax) * 2f64.powi(-11)) * sw;
            }
            let mag: f64 = wd.iter().zip(&x).map(|(&a, &b)| f64::from(a.abs() * b.abs())).sum();
            bound += mag * 1e-6;
            assert!((got - exact).abs() <= bound, "{f:?}: {got} vs {exact}, bound {bound}");
        }
    }

    #[test]
    fn known_blocks_dequantize_as_ggml_defines() {
        // q4_0: d = 2, byte 0 = 0x f0 -> element 0 nibble 0 (-16), element 16 nibble 15 (14)
        let mut b = vec![0u8; 18];
        b[..2].copy_from_slice(&f32_to_f16(2.0).to_le_bytes());
        b[2] = 0xf0;
        b[3] = 0x88;
        let mut o = [0.0f32; 32];
        dequantize_row(Format::Q4_0, &b, &mut o);
        assert_eq!((o[0], o[16], o[1], o[17]), (-16.0, 14.0, 0.0, 0.0));
        // q4_1: d = 0.5, m = -1, nibbles 3 (low) and 10 (high)
        let mut b = vec![0xa3u8; 20];
        b[..2].copy_from_slice(&f32_to_f16(0.5).to_le_bytes());
        b[2..4].copy_from_slice(&f32_to_f16(-1.0).to_le_bytes());
        dequantize_row(Format::Q4_1, &b, &mut o);
        assert_eq!((o[0], o[31]), (0.5, 4.0));
        // q8_0: d = 0.25, q = -128..
        let mut b = vec![0u8; 34];
        b[..2].copy_from_slice(&f32_to_f16(0.25).to_le_bytes());
        b[2] = 0x80;
        b[3] = 5;
        dequantize_row(Format::Q8_0, &b, &mut o);
        assert_eq!((o[0], o[1], o[2]), (-32.0, 1.25, 0.0));
    }
}
