//! The quantized dtypes' blocks, written out plainly for the suite: ggml's reference quantizers
//! (`quantize_row_q8_0_ref`, `..._q4_0_ref`, `..._q4_1_ref`, in f32 arithmetic as ggml does them)
//! to make inputs, and dequantization to f64 (exact: every stored value is `d * q` or `d * q + m`
//! with f16 `d`, `m` and small integers `q`).

use graph::{DType, QK, f16};

/// Quantizes `values` (a multiple of [`QK`] long) into blocks of `dtype` (a quantized dtype).
pub fn quantize(dtype: DType, values: &[f64]) -> Vec<u8> {
    assert!(dtype.is_quantized() && values.len().is_multiple_of(QK), "{dtype} blocks of {} values", values.len());
    let mut out = Vec::with_capacity(dtype.row_bytes(values.len()));
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
            DType::Q4_0 => {
                // the signed value of largest magnitude (the first one on a tie) maps to -8
                let (mut amax, mut max) = (0.0f32, 0.0f32);
                for &v in &x {
                    if amax < v.abs() {
                        amax = v.abs();
                        max = v;
                    }
                }
                let d = max / -8.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                let q = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
                out.extend((0..QK / 2).map(|j| q(x[j]) | (q(x[j + QK / 2]) << 4)));
            }
            DType::Q4_1 => {
                let min = x.iter().fold(f32::MAX, |m, &v| if v < m { v } else { m });
                let max = x.iter().fold(-f32::MAX, |m, &v| if v > m { v } else { m });
                let d = (max - min) / 15.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
                let q = |v: f32| (((v - min) * id + 0.5) as i8).min(15) as u8;
                out.extend((0..QK / 2).map(|j| q(x[j]) | (q(x[j + QK / 2]) << 4)));
            }
            DType::F32 | DType::F16 | DType::BF16 | DType::I32 => unreachable!("checked above"),
        }
    }
    out
}

/// Dequantizes whole blocks of `dtype` to f64 values, ggml order.
///
/// Panics if `bytes` is not a whole number of blocks (callers check sizes first).
pub fn dequantize(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    let size = dtype.size();
    assert!(dtype.is_quantized() && bytes.len().is_multiple_of(size), "{} bytes of {dtype} blocks", bytes.len());
    let half = |b: &[u8]| f16::from_le_bytes([b[0], b[1]]).to_f64();
    let mut out = Vec::with_capacity(bytes.len() / size * QK);
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
            assert_eq!(dequantize(d, &quantize(d, &[0.0; 32])), vec![0.0; 32]);
        }
    }
}
