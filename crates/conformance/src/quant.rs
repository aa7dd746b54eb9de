//! The quantized dtypes' blocks, written out plainly for the suite: ggml's reference quantizers
//! for the 32-element formats (`quantize_row_q8_0_ref`, `..._q4_0_ref`, `..._q4_1_ref`,
//! `..._q5_0_ref`, `..._q5_1_ref`, in f32 arithmetic as ggml does them) and plain min-max
//! quantizers for the K-quants (not ggml's iterative scale search: any valid blocks serve as
//! inputs) to make inputs, and dequantization to f64 (exact: every stored value is `d * q`,
//! `d * q + m`, `d * sc * q - dmin * m` or `d * sc * q` with f16 `d`, `dmin`, `m` and small
//! integers `sc`, `m`, `q`).

use graph::{DType, QK, QK_K, f16};

/// Quantizes `values` (a multiple of the dtype's block size long) into blocks of `dtype` (a
/// quantized dtype).
pub fn quantize(dtype: DType, values: &[f64]) -> Vec<u8> {
    let qk = dtype.block_size();
    assert!(dtype.is_quantized() && values.len().is_multiple_of(qk), "{dtype} blocks of {} values", values.len());
    let mut out = Vec::with_capacity(dtype.row_bytes(values.len()));
    if qk == QK_K {
        for block in values.chunks_exact(QK_K) {
            let x: Vec<f32> = block.iter().map(|&v| v as f32).collect();
            out.extend(quantize_k(dtype, &x));
        }
        return out;
    }
    for block in values.chunks_exact(QK) {
        let x: Vec<f32> = block.iter().map(|&v| v as f32).collect();
        match dtype {
            DType::Q8_0 => {
                let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend(x.iter().map(|v| (v * id).round() as i8 as u8));
            }
            DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 => {
                // the signed value of largest magnitude (the first one on a tie) maps to level 0
                // (q4_0, q5_0), or the minimum does (q4_1, q5_1)
                let levels = if matches!(dtype, DType::Q4_0 | DType::Q4_1) { 16.0 } else { 32.0 };
                let q = if matches!(dtype, DType::Q4_0 | DType::Q5_0) {
                    let (d, q) = signed_quants(&x, levels);
                    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                    q
                } else {
                    let (d, min, q) = min_quants(&x, levels);
                    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                    out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
                    q
                };
                if matches!(dtype, DType::Q5_0 | DType::Q5_1) {
                    let qh = q.iter().enumerate().fold(0u32, |h, (j, &v)| h | u32::from(v >> 4) << j);
                    out.extend_from_slice(&qh.to_le_bytes());
                }
                out.extend((0..QK / 2).map(|j| (q[j] & 15) | ((q[j + QK / 2] & 15) << 4)));
            }
            _ => unreachable!("checked above"),
        }
    }
    out
}

/// ggml's reference quantizer of `q4_0` / `q5_0` (`levels` 16 / 32): `d = max / -(levels / 2)`
/// with `max` the first value of largest magnitude, with its sign, and each quant
/// `min(levels - 1, (int8)(x / d + levels / 2 + 0.5))`.
fn signed_quants(x: &[f32], levels: f32) -> (f32, Vec<u8>) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let half = levels / 2.0;
    let d = max / -half;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, x.iter().map(|&v| ((v * id + (half + 0.5)) as i8).min(levels as i8 - 1) as u8).collect())
}

/// ggml's reference quantizer of `q4_1` / `q5_1` (`levels` 16 / 32): `d = (max - min) / (levels - 1)`
/// and each quant `min(levels - 1, (int8)((x - min) / d + 0.5))`; returns `d`, `min` and the quants.
fn min_quants(x: &[f32], levels: f32) -> (f32, f32, Vec<u8>) {
    let min = x.iter().fold(f32::MAX, |m, &v| if v < m { v } else { m });
    let max = x.iter().fold(-f32::MAX, |m, &v| if v > m { v } else { m });
    let d = (max - min) / (levels - 1.0);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let q = x.iter().map(|&v| (((v - min) * id + 0.5) as i8).min(levels as i8 - 1) as u8).collect();
    (d, min, q)
}

/// Rounds to the nearest integer in `[lo, hi]` (0 for NaN).
fn clamp_round(v: f32, lo: i32, hi: i32) -> i32 {
    (v.round() as i32).clamp(lo, hi)
}

/// One K-quant block of 256 values, by a plain min-max quantizer: per sub-block (32 elements for
/// `q4_K`/`q5_K`, 16 for `q6_K`) a real scale (and min), those scales quantized to 6 bits (8 for
/// `q6_K`) against the block's f16 `d` (and `dmin`), then each value rounded against its
/// sub-block's stored scale.
fn quantize_k(dtype: DType, x: &[f32]) -> Vec<u8> {
    let h = |v: f32| f16::from_f32(v);
    if dtype == DType::Q6_K {
        let scales: Vec<f32> =
            x.chunks_exact(16).map(|g| g.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 31.0).collect();
        let d = h(scales.iter().fold(0.0f32, |m, &v| m.max(v)) / 127.0);
        let id = if d.to_f32() != 0.0 { 1.0 / d.to_f32() } else { 0.0 };
        let sc: Vec<i8> = scales.iter().map(|&s| clamp_round(s * id, -128, 127) as i8).collect();
        let q: Vec<u8> = (0..QK_K)
            .map(|e| {
                let s = d.to_f32() * f32::from(sc[e / 16]);
                (if s != 0.0 { clamp_round(x[e] / s, -32, 31) } else { 0 } + 32) as u8
            })
            .collect();
        let mut b = vec![0u8; 210];
        for half in 0..2 {
            for k in 0..4 {
                for l in 0..32 {
                    let v = q[128 * half + 32 * k + l];
                    let at = 64 * half + 32 * (k % 2) + l;
                    b[at] |= if k < 2 { v & 15 } else { (v & 15) << 4 };
                    b[128 + 32 * half + l] |= (v >> 4) << (2 * k);
                }
            }
        }
        b[192..208].copy_from_slice(&sc.iter().map(|&s| s as u8).collect::<Vec<_>>());
        b[208..210].copy_from_slice(&d.to_le_bytes());
        return b;
    }
    let nmax = if dtype == DType::Q4_K { 15 } else { 31 };
    let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
    for (j, sb) in x.chunks_exact(32).enumerate() {
        let lo = sb.iter().fold(0.0f32, |m, &v| m.min(v));
        let hi = sb.iter().fold(lo, |m, &v| m.max(v));
        (scales[j], mins[j]) = ((hi - lo) / nmax as f32, -lo);
    }
    let d = h(scales.iter().fold(0.0f32, |m, &v| m.max(v)) / 63.0);
    let dmin = h(mins.iter().fold(0.0f32, |m, &v| m.max(v)) / 63.0);
    let inv = |v: f16| if v.to_f32() != 0.0 { 1.0 / v.to_f32() } else { 0.0 };
    let sc: Vec<u8> = scales.iter().map(|&s| clamp_round(s * inv(d), 0, 63) as u8).collect();
    let mn: Vec<u8> = mins.iter().map(|&m| clamp_round(m * inv(dmin), 0, 63) as u8).collect();
    let q: Vec<u8> = (0..QK_K)
        .map(|e| {
            let (s, m) = (d.to_f32() * f32::from(sc[e / 32]), dmin.to_f32() * f32::from(mn[e / 32]));
            if s != 0.0 { clamp_round((x[e] + m) / s, 0, nmax) as u8 } else { 0 }
        })
        .collect();
    let mut b = Vec::with_capacity(dtype.size());
    b.extend_from_slice(&d.to_le_bytes());
    b.extend_from_slice(&dmin.to_le_bytes());
    let mut s = [0u8; 12];
    for j in 0..4 {
        s[j] = sc[j] | (sc[j + 4] >> 4) << 6;
        s[j + 4] = mn[j] | (mn[j + 4] >> 4) << 6;
        s[j + 8] = (sc[j + 4] & 15) | (mn[j + 4] & 15) << 4;
    }
    b.extend_from_slice(&s);
    if dtype == DType::Q5_K {
        let mut qh = [0u8; 32];
        for (e, &v) in q.iter().enumerate() {
            qh[e % 32] |= (v >> 4) << (e / 32);
        }
        b.extend_from_slice(&qh);
    }
    for j in 0..4 {
        b.extend((0..32).map(|l| (q[64 * j + l] & 15) | (q[64 * j + 32 + l] & 15) << 4));
    }
    b
}

/// The 6-bit scale and min of sub-block `j` of a `q4_K`/`q5_K` block's 12 scale bytes.
fn scale_min(j: usize, s: &[u8]) -> (f64, f64) {
    let (sc, m) = if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 15) | (s[j - 4] >> 6) << 4, (s[j + 4] >> 4) | (s[j] >> 6) << 4)
    };
    (f64::from(sc), f64::from(m))
}

/// Dequantizes one K-quant block to f64 values.
fn dequantize_k(dtype: DType, b: &[u8], out: &mut Vec<f64>) {
    let half = |b: &[u8]| f16::from_le_bytes([b[0], b[1]]).to_f64();
    if dtype == DType::Q6_K {
        let d = half(&b[208..]);
        out.extend((0..QK_K).map(|e| {
            let (half_, k, l) = (e / 128, e % 128 / 32, e % 32);
            let byte = b[64 * half_ + 32 * (k % 2) + l];
            let lo = if k < 2 { byte & 15 } else { byte >> 4 };
            let hi = (b[128 + 32 * half_ + l] >> (2 * k)) & 3;
            d * f64::from(b[192 + e / 16] as i8) * (f64::from(lo | hi << 4) - 32.0)
        }));
        return;
    }
    let (d, dmin) = (half(b), half(&b[2..]));
    let qs = if dtype == DType::Q4_K { &b[16..144] } else { &b[48..176] };
    out.extend((0..QK_K).map(|e| {
        let (j, l) = (e / 32, e % 32);
        let byte = qs[32 * (j / 2) + l];
        let mut q = if j % 2 == 0 { byte & 15 } else { byte >> 4 };
        if dtype == DType::Q5_K {
            q |= ((b[16 + l] >> j) & 1) << 4;
        }
        let (sc, m) = scale_min(j, &b[4..16]);
        d * sc * f64::from(q) - dmin * m
    }));
}

/// Dequantizes whole blocks of `dtype` to f64 values, ggml order.
///
/// Panics if `bytes` is not a whole number of blocks (callers check sizes first).
pub fn dequantize(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    let size = dtype.size();
    assert!(dtype.is_quantized() && bytes.len().is_multiple_of(size), "{} bytes of {dtype} blocks", bytes.len());
    let half = |b: &[u8]| f16::from_le_bytes([b[0], b[1]]).to_f64();
    let mut out = Vec::with_capacity(bytes.len() / size * dtype.block_size());
    for b in bytes.chunks_exact(size) {
        match dtype {
            DType::Q8_0 => out.extend(b[2..].iter().map(|&q| half(b) * f64::from(q as i8))),
            DType::Q4_0 => {
                let q = &b[2..];
                out.extend(q.iter().map(|&p| half(b) * (f64::from(p & 15) - 8.0)));
                out.extend(q.iter().map(|&p| half(b) * (f64::from(p >> 4) - 8.0)));
            }
            DType::Q4_1 => {
                let (d, m, q) = (half(b), half(&b[2..]), &b[4..]);
                out.extend(q.iter().map(|&p| d * f64::from(p & 15) + m));
                out.extend(q.iter().map(|&p| d * f64::from(p >> 4) + m));
            }
            DType::Q5_0 | DType::Q5_1 => {
                let (d, m, h) = if dtype == DType::Q5_0 { (half(b), -16.0, 2) } else { (half(b), half(&b[2..]), 4) };
                let qh = u32::from_le_bytes([b[h], b[h + 1], b[h + 2], b[h + 3]]);
                let q = |j: usize| {
                    let nib = if j < 16 { b[h + 4 + j] & 15 } else { b[h + 4 + j - 16] >> 4 };
                    f64::from(u32::from(nib) | (qh >> j & 1) << 4)
                };
                if dtype == DType::Q5_0 {
                    out.extend((0..QK).map(|j| d * (q(j) + m)));
                } else {
                    out.extend((0..QK).map(|j| d * q(j) + m));
                }
            }
            DType::Q4_K | DType::Q5_K | DType::Q6_K => dequantize_k(dtype, b, &mut out),
            DType::F32 | DType::F16 | DType::BF16 | DType::I32 => unreachable!("checked above"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_blocks() {
        // q8_0 of 0..32 scaled: amax 31 gives d = 31/127.
        let v: Vec<f64> = (0..32).map(f64::from).collect();
        let b = quantize(DType::Q8_0, &v);
        assert_eq!(b.len(), 34);
        assert_eq!(b[2 + 31] as i8, 127);
        let back = dequantize(DType::Q8_0, &b);
        for (x, y) in v.iter().zip(&back) {
            assert!((x - y).abs() <= 31.0 / 127.0 / 2.0 + 0.02, "{x} {y}");
        }
        // q4_0: the largest magnitude -16 maps to nibble 0 (d = 2): element j in the low nibble of
        // byte j, element j + 16 in the high nibble.
        let mut v = vec![0.0; 32];
        v[0] = -16.0;
        v[16] = 14.0;
        let b = quantize(DType::Q4_0, &v);
        assert_eq!(f16::from_le_bytes([b[0], b[1]]).to_f32(), 2.0);
        assert_eq!(b[2], 15 << 4); // element 0: nibble 0, element 16: nibble 15
        assert_eq!(b[3], 8 | (8 << 4));
        let back = dequantize(DType::Q4_0, &b);
        assert_eq!((back[0], back[16], back[1]), (-16.0, 14.0, 0.0));
        // q4_1 of a ramp 1..=16 twice: min 1, d = 1 (exact).
        let v: Vec<f64> = (0..32).map(|i| f64::from(i % 16 + 1)).collect();
        let b = quantize(DType::Q4_1, &v);
        assert_eq!(b.len(), 20);
        assert_eq!(dequantize(DType::Q4_1, &b), v);
        // an all-zero block has d = 0 and decodes to zeros
        for d in DType::QUANTIZED {
            let n = d.block_size();
            assert_eq!(dequantize(d, &quantize(d, &vec![0.0; n])), vec![0.0; n]);
        }
        // every format round-trips a smooth ramp within a few steps of its grid
        for d in DType::QUANTIZED {
            let v: Vec<f64> = (0..512).map(|i| ((i as f64) * 0.37).sin() * 2.0).collect();
            let back = dequantize(d, &quantize(d, &v));
            assert_eq!(back.len(), 512);
            let worst = v.iter().zip(&back).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(worst < 0.3, "{d}: worst error {worst}");
        }
    }
}
