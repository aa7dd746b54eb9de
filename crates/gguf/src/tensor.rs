//! The tensor index: one [`TensorInfo`] per tensor, and the mapping of ggml type ids to dtypes.

use graph::DType;

/// One tensor of the file's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name (`token_embd.weight`, `blk.0.attn_q.weight`, ...).
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Element counts, ggml order (`ne[0]` innermost), 1 to 4 of them.
    pub ne: Vec<usize>,
    /// Byte offset of its data from the start of the data section (a multiple of the alignment).
    pub offset: usize,
    /// Bytes of its data (whole rows: `ne[0] / block * block_bytes * rows`).
    pub size: usize,
}

/// The dtype of ggml type id `id`, or ggml's name for a type this engine does not read.
pub(crate) fn dtype_of(id: u32) -> Result<DType, &'static str> {
    Ok(match id {
        0 => DType::F32,
        1 => DType::F16,
        2 => DType::Q4_0,
        3 => DType::Q4_1,
        6 => DType::Q5_0,
        7 => DType::Q5_1,
        8 => DType::Q8_0,
        12 => DType::Q4_K,
        13 => DType::Q5_K,
        14 => DType::Q6_K,
        26 => DType::I32,
        30 => DType::BF16,
        other => {
            return Err(match other {
                9 => "q8_1",
                10 => "q2_K",
                11 => "q3_K",
                15 => "q8_K",
                16..=23 | 29 => "an i-quant",
                24 => "i8",
                25 => "i16",
                27 => "i64",
                28 => "f64",
                34 | 35 => "a ternary type",
                4 | 5 => "a removed type (q4_2/q4_3)",
                _ => "unknown",
            });
        }
    })
}

/// The ggml type id of a dtype (the inverse of the reader's mapping; for writers and tests).
pub fn ggml_type_id(d: DType) -> u32 {
    match d {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::Q4_0 => 2,
        DType::Q4_1 => 3,
        DType::Q5_0 => 6,
        DType::Q5_1 => 7,
        DType::Q8_0 => 8,
        DType::Q4_K => 12,
        DType::Q5_K => 13,
        DType::Q6_K => 14,
        DType::I32 => 26,
        DType::BF16 => 30,
    }
}
