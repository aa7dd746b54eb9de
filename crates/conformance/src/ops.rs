//! Every op the suite must cover, derived so that the compiler catches a new [`graph::Op`]
//! variant: [`VARIANTS`] is `Op::COUNT` (`strum::EnumCount`), so the array of [`representatives`]
//! no longer has the right length, and the `match`es of [`variant`] and [`dtype_arities`] have no
//! wildcard arm. A unit test checks that representative `i` is variant `i`; the suite's tests then
//! require a case for each of [`names`] and for every dtype combination the builder accepts
//! (`tests/coverage.rs`).

use graph::{BinaryOp, CompareOp, Op, RopeMode, RopeParams, SortOrder, UnaryOp};
use strum::EnumCount;

/// Number of `Op` variants.
pub const VARIANTS: usize = Op::COUNT;

/// The index of `op`'s variant (no wildcard arm: a new variant is a compile error).
pub const fn variant(op: &Op) -> usize {
    match op {
        Op::Input => 0,
        Op::View => 1,
        Op::Reshape => 2,
        Op::Permute { .. } => 3,
        Op::Transpose => 4,
        Op::Cont => 5,
        Op::Cast => 6,
        Op::Unary(_) => 7,
        Op::Binary(_) => 8,
        Op::Scale { .. } => 9,
        Op::Clamp { .. } => 10,
        Op::Compare(_) => 11,
        Op::Where => 12,
        Op::Fill { .. } => 13,
        Op::Arange { .. } => 14,
        Op::GetRows => 15,
        Op::SetRows => 16,
        Op::ScatterAdd => 17,
        Op::MulMat => 18,
        Op::RmsNorm { .. } => 19,
        Op::Rope(_) => 20,
        Op::SoftMax { .. } => 21,
        Op::SumRows => 22,
        Op::MaxRows => 23,
        Op::Argmax => 24,
        Op::Argsort { .. } => 25,
        Op::TopK { .. } => 26,
        Op::Cumsum => 27,
        Op::RandomUniform { .. } => 28,
        Op::Categorical { .. } => 29,
        Op::TopKTopPSample(_) => 30,
        Op::RandomSample { .. } => 31,
        Op::TopPMask => 32,
        Op::SpecVerify { .. } => 33,
        Op::SpecVerifySampled { .. } => 34,
        Op::ListFilter(_) => 35,
        Op::Penalize => 36,
        Op::TokenMask { .. } => 37,
    }
}

/// One op of every variant, in [`variant`] order (parameters are arbitrary).
pub fn representatives() -> [Op; VARIANTS] {
    [
        Op::Input,
        Op::View,
        Op::Reshape,
        Op::Permute { axes: [1, 0, 2, 3] },
        Op::Transpose,
        Op::Cont,
        Op::Cast,
        Op::Unary(UnaryOp::Neg),
        Op::Binary(BinaryOp::Add),
        Op::Scale { scale: 2.0, bias: 1.0 },
        Op::Clamp { min: -1.0, max: 1.0 },
        Op::Compare(CompareOp::Ge),
        Op::Where,
        Op::Fill { value: 1.0 },
        Op::Arange { start: 0.0, step: 1.0 },
        Op::GetRows,
        Op::SetRows,
        Op::ScatterAdd,
        Op::MulMat,
        Op::RmsNorm { eps: 1e-5 },
        Op::Rope(RopeParams::new(4, RopeMode::Normal, 10000.0, 1.0)),
        Op::SoftMax { scale: 1.0 },
        Op::SumRows,
        Op::MaxRows,
        Op::Argmax,
        Op::Argsort { order: SortOrder::Desc },
        Op::TopK { k: 2, masked: false },
        Op::Cumsum,
        Op::RandomUniform { stream: 0 },
        Op::Categorical { stream: 0, ids: false },
        Op::TopKTopPSample(graph::fused::TopKTopP::new(graph::fused::PostSample::None)),
        Op::RandomSample { index: graph::fused::IndexDType::I32, f64_rows: false },
        Op::TopPMask,
        Op::SpecVerify { stream: 0, ids: false },
        Op::SpecVerifySampled { stream: 0, ids: false },
        Op::ListFilter(
            graph::ListStages::new(&[graph::ListStage::TopP, graph::ListStage::MinP, graph::ListStage::Temp])
                .expect("three stages"),
        ),
        Op::Penalize,
        Op::TokenMask { ids: false },
    ]
}

/// Every op with the sub-ops of the unary, binary and compare families expanded: one entry per
/// distinct op name.
pub fn expanded() -> Vec<Op> {
    let mut out = Vec::new();
    for op in representatives() {
        match op {
            Op::Unary(_) => out.extend(UnaryOp::ALL.map(Op::Unary)),
            Op::Binary(_) => out.extend(BinaryOp::ALL.map(Op::Binary)),
            Op::Compare(_) => out.extend(CompareOp::ALL.map(Op::Compare)),
            other => out.push(other),
        }
    }
    out
}

/// The name of every op (`Op::name`), sub-ops expanded: what the suite's cases must cover.
pub fn names() -> Vec<&'static str> {
    expanded().iter().map(Op::name).collect()
}

/// How many dtypes the coverage test offers the builder for `op`: the sources' dtypes, plus the
/// result's where the caller picks it (`cast`, `fill`, `arange`); several entries where the op
/// takes an optional source (`soft_max` with and without a mask). Leaves and views take none: they
/// are covered by every case that uses them.
pub const fn dtype_arities(op: &Op) -> &'static [usize] {
    match op {
        Op::Input | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => &[],
        Op::Cont | Op::Unary(_) | Op::Scale { .. } | Op::Clamp { .. } => &[1],
        Op::Cast => &[2],
        Op::Binary(_) | Op::Compare(_) => &[2],
        Op::Where => &[3],
        Op::Fill { .. } | Op::Arange { .. } => &[1],
        Op::GetRows => &[2],
        Op::SetRows | Op::ScatterAdd => &[3],
        Op::MulMat => &[2],
        Op::RmsNorm { .. } => &[1],
        Op::Rope(_) => &[2, 3],
        Op::SoftMax { .. } => &[1, 2],
        Op::SumRows | Op::MaxRows | Op::Argmax | Op::Argsort { .. } | Op::Cumsum => &[1],
        // Without and with the mask (`try_build` gives the second source as the mask).
        Op::TopK { .. } => &[1, 2],
        Op::RandomUniform { .. } => &[1],
        Op::Categorical { ids: false, .. } => &[2, 3],
        Op::Categorical { ids: true, .. } => &[3],
        Op::TopKTopPSample(_) => &[3],
        Op::RandomSample { .. } => &[3],
        Op::TopPMask => &[2],
        Op::SpecVerify { ids: false, .. } => &[2, 3],
        Op::SpecVerify { ids: true, .. } => &[3],
        Op::SpecVerifySampled { ids: false, .. } => &[4, 5],
        Op::SpecVerifySampled { ids: true, .. } => &[5],
        Op::ListFilter(_) => &[2],
        Op::Penalize => &[3],
        // Without and with the ids (`try_build` gives the third source as the ids).
        Op::TokenMask { .. } => &[2, 3],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn representatives_hold_every_variant_in_order() {
        for (i, op) in representatives().iter().enumerate() {
            assert_eq!(variant(op), i, "{op:?} is at {i}");
        }
    }

    #[test]
    fn names_are_distinct() {
        let mut n = names();
        let len = n.len();
        n.sort_unstable();
        n.dedup();
        assert_eq!(n.len(), len);
    }
}
