//! Cases for the quantized dtypes (`q8_0`, `q4_0`, `q4_1`, `q5_0`, `q5_1`, `q4_K`, `q5_K`,
//! `q6_K`): `get_rows` from a quantized table (exact: every dequantized value `d * q` is exact in
//! f32, `d * q + m` and `d * sc * q - dmin * m` round once, `d * sc * q` rounds once after an exact
//! `d * sc`) and `mul_mat` with a quantized weight against the f64 product of the dequantized
//! weights.
//!
//! A backend may quantize `b`'s columns to 8-bit blocks as ggml does (the CPU does, losing up to
//! `amax_block / 254` per element). So that the comparison stays tight, `b` here is exactly
//! representable that way: integers in `[-60, 60]` with 127 at the start of every block of 32 (so
//! `d = 1`, every quant is the value itself and `sum(q) * d` is exact in f16; for the K-quants'
//! `q8_K` blocks of 256, `d = -1` and every quant the value negated). What remains is f32
//! accumulation, bounded by `2e-6 * k * 60`. The activation rounding itself is tested in
//! `kernels::quant` (its error bound) and against ggml (`cpu/tests/ggml_quant.rs`).

use super::{Builder, Case};
use crate::compare::{Cmp, Tol};
use crate::generate::Gen;
use graph::DType;

/// Integers in `[-60, 60]`, 127 at the start of each 32-element block: lossless in 8-bit blocks.
fn exact_q8() -> Gen {
    Gen::func(|rng, i| if i[0] % 32 == 0 { 127.0 } else { rng.below(121) as f64 - 60.0 })
}

/// Every quantized case.
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for d in DType::QUANTIZED {
        // rows of three blocks
        let k = 3 * d.block_size();
        v.push(Case::new(format!("quant/get_rows/{d}"), move |b: &mut Builder| {
            let a = b.param("a", d, &[k, 10, 2], Gen::Uniform(-2.0, 2.0))?;
            let ids = b.input("ids", DType::I32, &[7, 2], Gen::Ints(0, 10))?;
            let y = b.g.get_rows(a, ids)?;
            b.check(y, Cmp::Exact);
            Ok(())
        }));
        let shapes: [([usize; 3], [usize; 3]); 4] = if d.block_size() == 32 {
            [([64, 17, 1], [64, 1, 1]), ([576, 40, 1], [576, 2, 1]), ([96, 9, 2], [96, 3, 4]), ([32, 5, 1], [32, 9, 1])]
        } else {
            [
                ([256, 17, 1], [256, 1, 1]),
                ([768, 40, 1], [768, 2, 1]),
                ([512, 9, 2], [512, 3, 4]),
                ([256, 5, 1], [256, 9, 1]),
            ]
        };
        for (an, bn) in shapes {
            v.push(Case::new(format!("quant/mul_mat/{d}/{an:?}x{bn:?}"), move |b: &mut Builder| {
                let w = b.param("w", d, &an, Gen::Uniform(-2.0, 2.0))?;
                let x = b.input("x", DType::F32, &bn, exact_q8())?;
                let y = b.g.mul_mat(w, x)?;
                b.check(y, Cmp::Close(Tol::new(2e-6 * an[0] as f64 * 60.0, 1e-5)));
                Ok(())
            }));
        }
    }
    v
}
