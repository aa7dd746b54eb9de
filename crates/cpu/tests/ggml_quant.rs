//! Differential tests of the quantized dtypes against ggml (`ggml-sys-bleedingedge`): weights are
//! quantized by ggml's own quantizer, then `get_rows` (dequantization) must match ggml's bit for
//! bit, and so must `mul_mat` (activations quantized to 8 bits, integer block dots, 8 f32 lanes
//! summed as ggml does) where ggml was built with AVX2 (this crate builds it with the host's
//! features); elsewhere ggml's scalar path sums in another order and a tolerance applies.

mod ggml;
mod harness;

use ggml::{Ctx, Ty};
use graph::{DType, Graph};
use harness::{Harness, Rng, assert_close};

/// Whether our kernels take their AVX2 path (the workspace's one feature probe).
fn avx2() -> bool {
    kernels::has_avx2_fma()
}

const TYPES: [(Ty, DType); 8] = [
    (Ty::Q8_0, DType::Q8_0),
    (Ty::Q4_0, DType::Q4_0),
    (Ty::Q4_1, DType::Q4_1),
    (Ty::Q5_0, DType::Q5_0),
    (Ty::Q5_1, DType::Q5_1),
    (Ty::Q4K, DType::Q4_K),
    (Ty::Q5K, DType::Q5_K),
    (Ty::Q6K, DType::Q6_K),
];

#[test]
fn get_rows_dequantizes_exactly_as_ggml() {
    let mut rng = Rng::new(301);
    for (ty, dt) in TYPES {
        // rows of three blocks
        let k = 3 * dt.block_size();
        let ane = [k, 20, 2, 1];
        let mut av = rng.vec(k * 40, -3.0, 3.0);
        av[k * 3..k * 3 + dt.block_size()].fill(0.0); // an all-zero block
        av[k * 5 + 7] = 1e4; // an outlier block
        let blocks = ty.quantize(&av, k);
        let ids: Vec<i32> = (0..10).map(|_| rng.below(20) as i32).collect();
        let c = Ctx::new(16);
        let a = c.tensor(ty, &ane);
        c.set_bytes(a, &blocks);
        let i = c.tensor(Ty::I32, &[5, 2]);
        c.set_i32(i, &ids);
        let gr = c.get_rows(a, i);
        c.compute(gr, 2);

        let mut g = Graph::new();
        let an = g.param("a", dt, &ane).unwrap();
        let idn = g.input("ids", DType::I32, &[5, 2]).unwrap();
        let out = g.get_rows(an, idn).unwrap();
        let mut h = Harness::new(g, 2);
        h.set_bytes(an, &blocks);
        h.set_i32(idn, &ids);
        h.run().unwrap();
        let (ours, theirs) = (h.f32(out), c.read_f32(gr));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&ours), bits(&theirs), "get_rows {dt}");
    }
}

#[test]
fn mul_mat_matches_ggml() {
    let mut rng = Rng::new(302);
    // (a [k, m, ne2], b [k, n, ne2', ne3']): mat-vec, several columns, batches with broadcast.
    // The multi-column cases run the register tiles (2 rows x 4 columns, 4 rows for a mat-vec)
    // with every remainder: n = 1, 3, 4, 16, 17 and row counts that are not multiples of 2, 4, 32.
    let cases: [([usize; 4], [usize; 4]); 10] = [
        ([576, 70, 1, 1], [576, 1, 1, 1]),
        ([64, 33, 1, 1], [64, 7, 1, 1]),
        ([1536, 40, 1, 1], [1536, 2, 1, 1]),
        ([128, 9, 2, 1], [128, 3, 4, 1]),
        ([32, 5, 1, 1], [32, 17, 1, 2]),
        ([576, 67, 1, 1], [576, 3, 1, 1]),
        ([576, 65, 1, 1], [576, 4, 1, 1]),
        ([192, 99, 1, 1], [192, 16, 1, 1]),
        ([160, 37, 1, 1], [160, 17, 1, 1]),
        ([96, 3, 1, 1], [96, 1, 1, 1]),
    ];
    // the K-quants' rows are multiples of 256: the same cases with k scaled up
    let k_cases = cases.map(|(a, b)| {
        let k = a[0].div_ceil(256) * 256;
        ([k, a[1], a[2], a[3]], [k, b[1], b[2], b[3]])
    });
    for (ty, dt) in TYPES {
        let list = if dt.block_size() == 256 { &k_cases } else { &cases };
        for &(ane, bne) in list {
            let (na, nb): (usize, usize) = (ane.iter().product(), bne.iter().product());
            let (av, bv) = (rng.vec(na, -1.0, 1.0), rng.vec(nb, -1.0, 1.0));
            let blocks = ty.quantize(&av, ane[0]);
            let c = Ctx::new(64);
            let (a, b) = (c.tensor(ty, &ane), c.tensor(Ty::F32, &bne));
            c.set_bytes(a, &blocks);
            c.set_f32(b, &bv);
            let mm = c.mul_mat(a, b);
            c.compute(mm, 2);

            let mut g = Graph::new();
            let an = g.param("a", dt, &ane).unwrap();
            let bn = g.input("b", DType::F32, &bne).unwrap();
            let out = g.mul_mat(an, bn).unwrap();
            let mut h = Harness::new(g, 3);
            h.set_bytes(an, &blocks);
            h.set_f32(bn, &bv);
            h.run().unwrap();
            // Both quantize b to 8-bit blocks and sum exact integer block products; without AVX2,
            // ggml's scalar path accumulates the per-block terms in another order: a few ulps of
            // the magnitude of the terms, |sum| <= k for these inputs.
            let (atol, rtol) = if avx2() { (0.0, 0.0) } else { (4e-7 * ane[0] as f32, 1e-6) };
            assert_close(&format!("mul_mat {dt} {ane:?} x {bne:?}"), &h.f32(out), &c.read_f32(mm), atol, rtol);
        }
    }
}

#[test]
fn k_quant_activations_quantize_exactly_as_ggml() {
    // q8_K blocks of random values, an all-zero block, one whose largest magnitude is subnormal
    // (-127 / max overflows: every product is infinite or NaN), NaNs, infinities and exact halves
    let mut rng = Rng::new(303);
    let mut x = rng.vec(256 * 8, -3.0, 3.0);
    x[256..512].fill(0.0);
    for (i, v) in x[512..768].iter_mut().enumerate() {
        *v = if i % 3 == 0 {
            1e-40
        } else if i % 3 == 1 {
            -2e-41
        } else {
            0.0
        };
    }
    x[768 + 5] = f32::NAN;
    x[1024 + 9] = f32::INFINITY;
    x[1280] = 127.0; // then halves: 0.5, 1.5, ... round to even
    for (i, v) in x[1281..1290].iter_mut().enumerate() {
        *v = i as f32 + 0.5;
    }
    let ours = {
        let mut out = vec![0u8; 8 * 292];
        kernels::quant::kquants::quantize_q8k(&x, &mut out);
        out
    };
    assert_eq!(ours, ggml::quantize_q8k(&x));
}
