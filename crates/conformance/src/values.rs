//! Tensor values as `f64`: decoding and encoding the byte formats of every dtype (the quantized ones
//! through [`crate::quant`]), and rounding a computed value to what a tensor of a dtype can store.

use graph::{DType, bf16, f16};

/// Rounds `x` to the value a tensor of `dtype` stores for it.
///
/// Floats are first rounded to f32 (every op computes in f32) and then, for f16/bf16, to the 16-bit
/// format (round to nearest even, overflow to infinity). For i32, `x` is truncated toward zero,
/// saturating, NaN giving 0 ([`graph::Op::Cast`]'s rule; integral values pass unchanged).
pub fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 => f64::from(x as f32),
        DType::F16 => f16::from_f32(x as f32).to_f64(),
        DType::BF16 => bf16::from_f32(x as f32).to_f64(),
        DType::I32 => f64::from(x as i32),
        // quantized values are rounded block by block when encoded; no op produces one
        _ => f64::from(x as f32),
    }
}

/// Decodes little-endian bytes of `dtype` elements into values.
///
/// Panics if `bytes` is not a whole number of elements (callers check sizes first).
pub fn decode(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    if dtype.is_quantized() {
        return crate::quant::dequantize(dtype, bytes);
    }
    let size = dtype.size();
    assert_eq!(bytes.len() % size, 0, "{} bytes is not a whole number of {dtype} elements", bytes.len());
    bytes
        .chunks_exact(size)
        .map(|c| match dtype {
            DType::F32 => f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            DType::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::BF16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::I32 => f64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => unreachable!("dequantized above"),
        })
        .collect()
}

/// Encodes values as little-endian bytes of `dtype`, rounding each with [`round_to`] (quantized:
/// ggml's reference quantizer, [`crate::quant::quantize`]; `values` a whole number of rows).
pub fn encode(dtype: DType, values: &[f64]) -> Vec<u8> {
    if dtype.is_quantized() {
        return crate::quant::quantize(dtype, values);
    }
    let mut out = Vec::with_capacity(values.len() * dtype.size());
    for &x in values {
        match dtype {
            DType::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f32(x as f32).to_le_bytes()),
            DType::BF16 => out.extend_from_slice(&bf16::from_f32(x as f32).to_le_bytes()),
            DType::I32 => out.extend_from_slice(&(x as i32).to_le_bytes()),
            _ => unreachable!("quantized above"),
        }
    }
    out
}

/// Iterates over every index `[i0, i1, i2, i3]` of a shape in ggml order (`i0` fastest).
pub fn indices(ne: [usize; 4]) -> impl Iterator<Item = [usize; 4]> {
    let n: usize = ne.iter().product();
    (0..n).map(move |mut f| {
        let mut idx = [0; 4];
        for (d, i) in idx.iter_mut().enumerate() {
            *i = f % ne[d];
            f /= ne[d];
        }
        idx
    })
}

/// Flat position of `idx` in a contiguous tensor of shape `ne`.
pub fn flat(ne: [usize; 4], idx: [usize; 4]) -> usize {
    idx[0] + ne[0] * (idx[1] + ne[1] * (idx[2] + ne[2] * idx[3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_per_dtype() {
        assert_eq!(round_to(DType::F32, 0.1), f64::from(0.1f32));
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in f16: rounds to even (1.0).
        assert_eq!(round_to(DType::F16, 1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(round_to(DType::F16, 1.0 + 3.0 * 2f64.powi(-11)), 1.0 + 2.0 * 2f64.powi(-10));
        assert_eq!(round_to(DType::F16, 70000.0), f64::INFINITY);
        assert_eq!(round_to(DType::BF16, 1.0 + 2f64.powi(-8)), 1.0);
        // 3e38 = 225.7 * 2^120 and bf16 spacing there is 2^120.
        assert_eq!(round_to(DType::BF16, 3.0e38), 226.0 * 2f64.powi(120));
        assert_eq!(round_to(DType::I32, -2.7), -2.0);
        assert_eq!(round_to(DType::I32, 1e12), f64::from(i32::MAX));
        assert_eq!(round_to(DType::I32, f64::NAN), 0.0);
    }

    #[test]
    fn encode_decode_round_trip() {
        let v = [1.5, -0.25, 3.0, f64::NEG_INFINITY];
        for d in [DType::F32, DType::F16, DType::BF16] {
            let bytes = encode(d, &v);
            assert_eq!(bytes.len(), 4 * d.size());
            assert_eq!(decode(d, &bytes), v);
        }
        assert_eq!(decode(DType::I32, &encode(DType::I32, &[7.0, -3.0])), [7.0, -3.0]);
        assert_eq!(encode(DType::F16, &[1.0]), [0x00, 0x3c]);
        assert_eq!(encode(DType::BF16, &[1.0]), [0x80, 0x3f]);
    }

    #[test]
    fn index_order_is_ggml() {
        let all: Vec<_> = indices([2, 3, 1, 1]).collect();
        assert_eq!(all[0], [0, 0, 0, 0]);
        assert_eq!(all[1], [1, 0, 0, 0]);
        assert_eq!(all[2], [0, 1, 0, 0]);
        assert_eq!(all.len(), 6);
        assert_eq!(flat([2, 3, 4, 1], [1, 2, 3, 0]), 1 + 2 * (2 + 3 * 3));
    }
}
