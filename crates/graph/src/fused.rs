//! The attributes of the fused sampling ops ([`crate::Op::TopKTopPSample`] and
//! [`crate::Op::RandomSample`]): Ascend's `npu_top_k_top_p_sample` and InfiniCore's `random_sample`,
//! with the exact semantics of `shared/contracts/fused-ops-spec-digest.md`.
//!
//! A narrower, equivalent design than new dtypes (see `docs/FUSED.md`): the spec's int64 outputs
//! and (seed, offset) pairs are carried as i32 (indices: a row has fewer than 2^31 entries, checked
//! when the node is built; pairs: i32 lo/hi words, as `categorical`'s keys), f16/bf16 parameters as
//! the f32 holding the same value, f64 rows as i32 bit pairs, and `random_sample`'s integer result
//! dtype as an attribute whose range is checked against the static row length at build time.

use std::fmt;

/// The post stage of `top_k_top_p_sample` (`post_sample`), already resolved: `None` when `q` is
/// absent, whatever the caller asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PostSample {
    /// The survivor of largest probability (lowest index on ties).
    None,
    /// `argmax prob / (q + eps)` with `q` f32 noise `[V, rows]`.
    QSample,
    /// A draw from the survivors keyed by a (seed, offset) pair per row.
    Multinomial,
}

impl PostSample {
    /// Name in dumps and fixtures.
    pub const fn name(self) -> &'static str {
        match self {
            PostSample::None => "none",
            PostSample::QSample => "qsample",
            PostSample::Multinomial => "multinomial",
        }
    }

    /// Parses a name case-insensitively (`qSample`, `multiNomial` and `None` as the spec spells them).
    pub fn parse(s: &str) -> Option<PostSample> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Some(PostSample::None),
            "qsample" => Some(PostSample::QSample),
            "multinomial" => Some(PostSample::Multinomial),
            _ => None,
        }
    }
}

/// Which result a `top_k_top_p_sample` node produces: the spec's op has two outputs, a graph node
/// one, so a runner that wants both (`is_need_logits`) adds two nodes with the same attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FusedOutput {
    /// `logits_select_idx`: i32 `[1, rows]`.
    Index,
    /// `logits_top_kp_select`: f32 `[V, rows]`, the survivors' input values, the rest the fill
    /// value (`-inf` in logits mode, `0` in probability mode).
    Logits,
}

impl FusedOutput {
    /// Name in dumps and fixtures.
    pub const fn name(self) -> &'static str {
        match self {
            FusedOutput::Index => "index",
            FusedOutput::Logits => "logits",
        }
    }
}

/// The attributes of `top_k_top_p_sample` (the spec's names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopKTopP {
    /// Added to `q` in qSample's division.
    pub eps: f32,
    /// Upper bound of a valid `top_k` (clamped to 1024; must be positive).
    pub ks_max: u32,
    /// A speed hint of the top-P search; never changes a result.
    pub top_k_guess: i32,
    /// True: the row holds logits (softmax, fill `-inf`); false: probabilities used as they are
    /// (fill `0`).
    pub input_is_logits: bool,
    /// The resolved post stage.
    pub post: PostSample,
    /// Which output this node computes.
    pub output: FusedOutput,
}

impl TopKTopP {
    /// The spec's defaults (`eps = 1e-8`, `ks_max = 1024`, `top_k_guess = 32`, logits mode) with
    /// the given post stage, producing the index.
    pub const fn new(post: PostSample) -> TopKTopP {
        TopKTopP { eps: 1e-8, ks_max: 1024, top_k_guess: 32, input_is_logits: true, post, output: FusedOutput::Index }
    }

    /// `min(ks_max, 1024)`: top-K runs for `1 <= k <= min(V, ks)`.
    pub const fn ks(&self) -> u32 {
        if self.ks_max < 1024 { self.ks_max } else { 1024 }
    }
}

/// The integer dtype `random_sample` writes its index in (InfiniCore's `dt_i`). The node's result
/// is i32; this attribute only bounds the row length (`n - 1` must fit), checked at build time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexDType {
    /// `int8_t`
    I8,
    /// `int16_t`
    I16,
    /// `int32_t`
    I32,
    /// `int64_t`
    I64,
    /// `uint8_t`
    U8,
    /// `uint16_t`
    U16,
    /// `uint32_t`
    U32,
    /// `uint64_t`
    U64,
}

impl IndexDType {
    /// Every index dtype.
    pub const ALL: [IndexDType; 8] = [
        IndexDType::I8,
        IndexDType::I16,
        IndexDType::I32,
        IndexDType::I64,
        IndexDType::U8,
        IndexDType::U16,
        IndexDType::U32,
        IndexDType::U64,
    ];

    /// Name in dumps, fixtures and the CLI.
    pub const fn name(self) -> &'static str {
        match self {
            IndexDType::I8 => "i8",
            IndexDType::I16 => "i16",
            IndexDType::I32 => "i32",
            IndexDType::I64 => "i64",
            IndexDType::U8 => "u8",
            IndexDType::U16 => "u16",
            IndexDType::U32 => "u32",
            IndexDType::U64 => "u64",
        }
    }

    /// The largest value of the dtype.
    pub const fn max(self) -> u64 {
        match self {
            IndexDType::I8 => i8::MAX as u64,
            IndexDType::I16 => i16::MAX as u64,
            IndexDType::I32 => i32::MAX as u64,
            IndexDType::I64 => i64::MAX as u64,
            IndexDType::U8 => u8::MAX as u64,
            IndexDType::U16 => u16::MAX as u64,
            IndexDType::U32 => u32::MAX as u64,
            IndexDType::U64 => u64::MAX,
        }
    }

    /// Parses a name (`i8` … `u64`).
    pub fn parse(s: &str) -> Option<IndexDType> {
        IndexDType::ALL.into_iter().find(|d| d.name() == s)
    }
}

impl fmt::Display for IndexDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The philox stream of the multinomial draw (apart from the sampler chain's streams).
pub const MULTINOMIAL_STREAM: u64 = 16;

/// The uniform of a multinomial draw keyed by `(seed, offset)`: the row's survivors are drawn with
/// it and nothing else, so equal inputs give equal indices on every backend.
pub fn multinomial_uniform(seed: u64, offset: u64) -> f64 {
    crate::philox::uniform_f64(seed, offset, crate::philox::stream::element(MULTINOMIAL_STREAM, 0))
}
