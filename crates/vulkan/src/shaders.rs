//! The single table of shader variants: source file x defines -> [`ShaderId`], with the workgroup
//! size each pipeline is specialised with and the committed SPIR-V (`shaders/spv/<name>.spv`,
//! produced by `cargo xtask shaders` with [`GLSLC_ARGS`]; a test recompiles every variant and
//! compares bytes).

/// Identifies one compiled shader variant (one pipeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShaderId {
    /// fill.comp
    Fill,
    /// copy.comp
    Copy,
    /// unary.comp
    Unary,
    /// binary.comp
    Binary,
    /// reduce.comp, shared-memory reductions
    Reduce,
    /// reduce.comp with subgroup operations
    ReduceSg,
    /// softmax.comp
    Softmax,
    /// softmax.comp with subgroup operations
    SoftmaxSg,
    /// norm.comp
    Norm,
    /// norm.comp with subgroup operations
    NormSg,
    /// cumsum.comp
    Cumsum,
    /// sort.comp, block pass
    SortBlock,
    /// sort.comp, merge pass
    SortMerge,
    /// sort.comp, radix-select histogram pass (top_k)
    SortHist,
    /// sort.comp, radix-select compaction pass (top_k)
    SortCompact,
    /// sort.comp, each block's smallest key (top_k by block minima)
    SortBlockMin,
    /// sort.comp, top_k from the block minima's threshold, one workgroup per row
    SortThresh,
    /// rows.comp
    Rows,
    /// scatter.comp
    Scatter,
    /// mul_mat.comp
    MulMat,
    /// mul_mat.comp with subgroup operations
    MulMatSg,
    /// rope.comp
    Rope,
    /// random.comp
    Random,
    /// random.comp, the categorical draw
    Categorical,
    /// random.comp, the categorical draw over long rows in four passes (`random_segmented.glsl`)
    CategoricalSeg,
    /// sort.comp, the top-p mask
    TopPMask,
    /// sort.comp with top_p_segmented.glsl, the top-p mask over many workgroups
    TopPMaskSeg,
    /// quant.comp: get_rows and mul_mat reading quantized weights
    Quant,
    /// quant.comp with subgroup operations (mul_mat's reduction)
    QuantSg,
    /// sample.comp, the per-row parameters of top_k_top_p_sample into its scratch
    SamplePack,
    /// sample.comp, top_k_top_p_sample on argsorted rows
    SampleTopKTopP,
    /// random.comp, the categorical draw with a draft (speculative verification)
    SpecVerify,
    /// sample.comp, random_sample on argsorted rows
    SampleRandom,
    /// sort.comp, block pass on f64 rows (random_sample)
    SortBlock64,
    /// sort.comp, merge pass on f64 rows (random_sample)
    SortMerge64,
    /// sample.comp, a test probe: `kernels::exp64::exp` over an array (`VulkanBackend::probe_exp64`)
    SampleExp64,
    /// sample.comp, a test probe: `kernels::exp::exp2` over an array (`VulkanBackend::probe_exp2`)
    SampleExp2,
    /// random.comp, speculative verification of a draft drawn from a distribution `q`
    SpecVerifySampled,
    /// list_filter.comp
    ListFilter,
    /// penalize.comp
    Penalize,
    /// token_mask.comp
    TokenMask,
}

/// One row of the variant table.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    /// The id.
    pub id: ShaderId,
    /// File stem of the SPIR-V in `shaders/spv/`.
    pub name: &'static str,
    /// GLSL source in `shaders/`.
    pub source: &'static str,
    /// Preprocessor defines (`-D`).
    pub defines: &'static [&'static str],
    /// Workgroup size (specialisation constant 0).
    pub wg: u32,
    /// Whether it needs subgroup arithmetic/vote in compute shaders.
    pub subgroup: bool,
    /// The committed SPIR-V bytes.
    pub spirv: &'static [u8],
}

/// Arguments `cargo xtask shaders` and the drift test give glslc (before `-D`s, input and output).
pub const GLSLC_ARGS: &[&str] = &["--target-env=vulkan1.1", "-O", "-fshader-stage=compute"];

/// The glslc invocation that compiles `variant` (run from `shaders_dir`, so `#include`s resolve) into
/// `out`. `cargo xtask shaders` and the SPIR-V drift test both use it, so they cannot compile
/// differently.
pub fn glslc_command(
    glslc: &str,
    shaders_dir: &std::path::Path,
    variant: &Variant,
    out: &std::path::Path,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(glslc);
    cmd.current_dir(shaders_dir)
        .args(GLSLC_ARGS)
        .args(variant.defines.iter().map(|d| format!("-D{d}")))
        .arg(variant.source)
        .arg("-o")
        .arg(out);
    cmd
}

/// Entries per block of the sort's first pass (`BLOCK` in `sort.comp`).
pub const SORT_BLOCK: usize = 2048;

macro_rules! variants {
    ($(($id:ident, $name:literal, $src:literal, [$($def:literal),*], $wg:literal, $sg:literal)),* $(,)?) => {
        /// Every variant, in [`ShaderId`] order.
        pub const VARIANTS: &[Variant] = &[$(Variant {
            id: ShaderId::$id,
            name: $name,
            source: $src,
            defines: &[$($def),*],
            wg: $wg,
            subgroup: $sg,
            spirv: include_bytes!(concat!("../../../shaders/spv/", $name, ".spv")),
        }),*];
    };
}

variants! {
    (Fill, "fill", "fill.comp", [], 256, false),
    (Copy, "copy", "copy.comp", [], 256, false),
    (Unary, "unary", "unary.comp", [], 256, false),
    (Binary, "binary", "binary.comp", [], 256, false),
    (Reduce, "reduce", "reduce.comp", [], 256, false),
    (ReduceSg, "reduce_sg", "reduce.comp", ["USE_SUBGROUP"], 256, true),
    (Softmax, "softmax", "softmax.comp", [], 256, false),
    (SoftmaxSg, "softmax_sg", "softmax.comp", ["USE_SUBGROUP"], 256, true),
    (Norm, "norm", "norm.comp", [], 256, false),
    (NormSg, "norm_sg", "norm.comp", ["USE_SUBGROUP"], 256, true),
    (Cumsum, "cumsum", "cumsum.comp", [], 256, false),
    (SortBlock, "sort_block", "sort.comp", ["BLOCK_PASS"], 256, false),
    (SortMerge, "sort_merge", "sort.comp", ["MERGE_PASS"], 256, false),
    (SortHist, "sort_hist", "sort.comp", ["HIST_PASS"], 256, false),
    (SortCompact, "sort_compact", "sort.comp", ["COMPACT_PASS"], 256, false),
    (SortBlockMin, "sort_block_min", "sort.comp", ["BMIN_PASS"], 256, false),
    (SortThresh, "sort_thresh", "sort.comp", ["THRESH_PASS"], 256, false),
    (Rows, "rows", "rows.comp", [], 256, false),
    (Scatter, "scatter", "scatter.comp", [], 64, false),
    (MulMat, "mul_mat", "mul_mat.comp", [], 64, false),
    (MulMatSg, "mul_mat_sg", "mul_mat.comp", ["USE_SUBGROUP"], 64, true),
    (Rope, "rope", "rope.comp", [], 256, false),
    (Random, "random", "random.comp", [], 256, false),
    (Categorical, "categorical", "random.comp", ["CATEGORICAL"], 256, false),
    (CategoricalSeg, "categorical_seg", "random.comp", ["CATEGORICAL", "SEGMENTED"], 256, false),
    (TopPMask, "sort_top_p", "sort.comp", ["TOP_P_PASS"], 256, false),
    (TopPMaskSeg, "sort_top_p_seg", "sort.comp", ["TOPP_SEG"], 256, false),
    (Quant, "quant", "quant.comp", [], 64, false),
    (QuantSg, "quant_sg", "quant.comp", ["USE_SUBGROUP"], 64, true),
    (SamplePack, "sample_pack", "sample.comp", ["PACK"], 256, false),
    (SampleTopKTopP, "sample_top_k_top_p", "sample.comp", [], 256, false),
    (SpecVerify, "spec_verify", "random.comp", ["CATEGORICAL", "VERIFY"], 256, false),
    (SampleRandom, "sample_random", "sample.comp", ["RANDOM"], 256, false),
    (SortBlock64, "sort_block64", "sort.comp", ["BLOCK_PASS", "KEY64"], 256, false),
    (SortMerge64, "sort_merge64", "sort.comp", ["MERGE_PASS", "KEY64"], 256, false),
    (SampleExp64, "sample_exp64", "sample.comp", ["EXP64"], 256, false),
    (SampleExp2, "sample_exp2", "sample.comp", ["EXP2"], 256, false),
    (SpecVerifySampled, "spec_verify_sampled", "random.comp", ["CATEGORICAL", "SAMPLED"], 256, false),
    (ListFilter, "list_filter", "list_filter.comp", [], 64, false),
    (Penalize, "penalize", "penalize.comp", [], 256, false),
    (TokenMask, "token_mask", "token_mask.comp", [], 256, false),
}

/// The table row of `id`.
pub fn variant(id: ShaderId) -> &'static Variant {
    let v = &VARIANTS[id as usize];
    debug_assert_eq!(v.id, id);
    v
}

/// The SPIR-V of a variant as 32-bit words (little-endian bytes, as glslc writes them).
pub fn spirv_words(v: &Variant) -> Vec<u32> {
    v.spirv.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_id_order_with_valid_spirv() {
        for (i, v) in VARIANTS.iter().enumerate() {
            assert_eq!(v.id as usize, i, "{} out of order", v.name);
            assert_eq!(v.spirv.len() % 4, 0, "{}", v.name);
            assert_eq!(spirv_words(v).first(), Some(&0x0723_0203), "{} is not SPIR-V", v.name);
        }
    }
}
