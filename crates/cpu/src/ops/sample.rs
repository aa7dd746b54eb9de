//! The fused sampling ops: `top_k_top_p_sample` (Ascend's `npu_top_k_top_p_sample`) and
//! `random_sample` (InfiniCore's), row by row in parallel. The row algorithms live in
//! [`top_k_top_p`] (with its one-pass top-P path in [`top_p`]) and [`random_sample`]; this file
//! reads each row's sources and writes its result.

mod random_sample;
mod top_k_top_p;
mod top_p;

use super::{K, for_rows};
use crate::error::CpuError;
use crate::tensor::row_f32;
use graph::DType;
use graph::fused::{FusedOutput, PostSample, TopKTopP};
use std::cell::RefCell;

thread_local! {
    /// Each thread's row scratch, kept from row to row and call to call: a row of V weights (and
    /// the selection buffers) would otherwise be allocated, zeroed and faulted in for every row.
    /// The scratch changes the work, never a result.
    static TOP_K_TOP_P: RefCell<top_k_top_p::Scratch> = RefCell::new(top_k_top_p::Scratch::default());
    /// The same for `random_sample`, with the f64 copy of an f64 row (given as i32 word pairs).
    static RANDOM_SAMPLE: RefCell<(Vec<f64>, random_sample::Scratch)> = RefCell::new(Default::default());
}

pub(crate) fn top_k_top_p_sample(k: &K<'_>, a: TopKTopP) -> Result<(), CpuError> {
    let (x, topk, params, d) = (k.srcs[0], k.srcs[1], k.srcs[2], k.dst);
    let q = k.srcs.get(3).copied();
    let v = x.ne[0];
    let convert = if x.dtype == DType::F32 { 0 } else { v };
    for_rows(&d, 4 * v, convert, |r, scratch| {
        TOP_K_TOP_P.with_borrow_mut(|s| {
            // SAFETY: the builder checked the sources' dtypes, shapes and contiguous rows; row `r` of
            // `d` is written only here.
            unsafe {
                let row = row_f32(&x, r, scratch);
                let pr = params.row::<f32>(r);
                let p = top_k_top_p::Params { k: topk.row::<i32>(r)[0], p: pr[0], m: pr[1] };
                let post = match (a.post, q.as_ref()) {
                    (PostSample::QSample, Some(q)) => top_k_top_p::Post::QSample(q.row::<f32>(r)),
                    (PostSample::Multinomial, Some(q)) => {
                        let pair = q.row::<i32>([r[0].min(q.ne[1] - 1), 0, 0]);
                        let seed = u64::from(pair[0] as u32) | (u64::from(pair[1] as u32) << 32);
                        let offset = u64::from(pair[2] as u32) | (u64::from(pair[3] as u32) << 32);
                        top_k_top_p::Post::Multinomial(graph::fused::multinomial_uniform(seed, offset))
                    }
                    _ => top_k_top_p::Post::None,
                };
                let pick = top_k_top_p::row(row, &a, p, post, s);
                match a.output {
                    FusedOutput::Index => d.row_mut::<i32>(r)[0] = pick.as_ref().map_or(-1, |pk| pk.index as i32),
                    FusedOutput::Logits => {
                        let out = d.row_mut::<f32>(r);
                        match &pick {
                            Some(pk) => top_k_top_p::write_logits(row, pk, a.input_is_logits, &s.e, out),
                            None => out.fill(f32::NAN),
                        }
                    }
                }
            }
        })
    });
    Ok(())
}

pub(crate) fn random_sample(k: &K<'_>, f64_rows: bool) -> Result<(), CpuError> {
    let (x, params, topk, d) = (k.srcs[0], k.srcs[1], k.srcs[2], k.dst);
    let n = if f64_rows { x.ne[0] / 2 } else { x.ne[0] };
    for_rows(&d, 8 * n, if f64_rows || x.dtype == DType::F32 { 0 } else { n }, |r, scratch| {
        RANDOM_SAMPLE.with_borrow_mut(|(row, s)| {
            // SAFETY: as above.
            unsafe {
                let pr = params.row::<f32>(r);
                let p = random_sample::Params {
                    random: pr[0],
                    topp: pr[1],
                    temperature: pr[2],
                    topk: topk.row::<i32>(r)[0],
                };
                let pick = if f64_rows {
                    row.clear();
                    row.extend(
                        x.row::<i32>(r)
                            .chunks_exact(2)
                            .map(|w| f64::from_bits(u64::from(w[0] as u32) | (u64::from(w[1] as u32) << 32))),
                    );
                    random_sample::row(&row[..], p, s)
                } else {
                    // f16 and bf16 widen to f32 exactly; the kernel reads every value as its f64.
                    random_sample::row(row_f32(&x, r, scratch), p, s)
                };
                d.row_mut::<i32>(r)[0] = pick.map_or(-1, |i| i as i32);
            }
        })
    });
    Ok(())
}
