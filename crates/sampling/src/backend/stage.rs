//! The stage interface: what a sampler implements to run as graph ops after the logits
//! ([`BackendStage`], given by [`crate::Sampler::backend`]), the record that flows between stages
//! (one of four [`Form`]s), the structure a stage appends ([`StageKey`]) and the typed per-step
//! inputs it registers ([`Field`]).
//!
//! A stage separates *structure* (what ops are appended: the stage's kind, fixed sizes such as
//! top-k's `k`, and the class of a parameter where its value changes the semantics, such as a
//! temperature of 1, which appends nothing) from *values* (written as inputs every step, so
//! changing a temperature or a `p` between steps rebuilds nothing). Two sequences whose backend
//! prefixes have equal keys share one subgraph, which the first of them lowers:
//! [`BackendStage::lower`] must depend on the key only, never on the sampler's current values, which reach the
//! graph through [`Field`]s that each row's own sampler writes every step.
//!
//! A stage outside this crate (a model runner's own) implements the same trait: it composes
//! existing graph ops ([`graph::Op`] is a closed set) with the helpers of
//! [`Lowering`](super::Lowering), and a stage that draws at random takes its numbers from its own
//! Philox stream (`graph::philox`, keyed by its seed and the row's step, [`Row::step`], on a
//! stream of its own from `graph::philox::stream::FIRST_USER` on).

use super::seqs::SeqId;
use crate::chain::Chain;
use crate::error::{Result, SamplingError};
use crate::sampler::{Sampler, Token};
use graph::GraphError;
use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use super::lower::{Lowering, Record};

/// The flowing record's shape between stages (per row of a group of `n` rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// Logits in vocabulary order, `[n_vocab, n]` f32, masked entries `-inf`; the CPU chain still
    /// holds its vocabulary view.
    Vocab,
    /// Logits in vocabulary order after a cut on the vocabulary (min-p, top-p): the CPU chain
    /// holds a list of the survivors in vocabulary order, unsorted (so a draw walks them in token-id
    /// order, as `categorical` walks the masked row); entries outside it are `-inf`.
    Masked,
    /// `k` candidates per row: ids `[k, n]` i32 and logits `[k, n]` f32, sorted by logit
    /// descending (ties: lower id first) unless a stage reordered them, masked entries `-inf`.
    List(usize),
    /// One selected token per row, `[1, n]` i32 (-1 for a row whose logits were bad).
    Token,
}

/// The structure of one stage as appended: equal keys append equal ops. A key names the sampler
/// type that lowers it, a variant of the stage's own choosing (its forms: on the vocabulary, on a
/// list ...) and a fixed size (`k`, a window), plus properties the group driver reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StageKey {
    owner: Option<TypeId>,
    name: &'static str,
    variant: u32,
    size: usize,
    flags: u8,
}

/// The stage writes a vocabulary-sized mask (top-p on the vocabulary): its groups go in blocks of
/// a few rows, so that the mask is still in cache when the next stage reads it.
const VOCAB_MASK: u8 = 1;
/// The stage leaves `-inf` entries the CPU chain's list still holds, which a read-back of the
/// masked row cannot tell from removed ones (xtc on the vocabulary).
const KEEPS_INF: u8 = 2;
/// The stage makes such a record safe again (a top-k, a min-p cut, a selection).
const CLEARS_INF: u8 = 4;

impl StageKey {
    /// The key of variant `variant` of stage `name`, lowered by sampler type `S`, with fixed size
    /// `size` (0 where the stage has none).
    pub fn new<S: Sampler>(name: &'static str, variant: u32, size: usize) -> Self {
        Self { owner: Some(TypeId::of::<S>()), name, variant, size, flags: 0 }
    }

    /// A stage that appends nothing (its parameters disable it: `top_k(0)`, `temp(1)`): it does
    /// not end the backend prefix, and it is never lowered.
    pub fn nothing() -> Self {
        Self { owner: None, name: "nothing", variant: 0, size: 0, flags: 0 }
    }

    /// Whether this is [`StageKey::nothing`].
    pub fn is_nothing(&self) -> bool {
        self.owner.is_none()
    }

    /// The stage's name in node names and dumps.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The stage's own variant.
    pub fn variant(&self) -> u32 {
        self.variant
    }

    /// The fixed size.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Marks a stage that writes a vocabulary-sized mask (its groups are kept small).
    pub fn with_vocab_mask(mut self) -> Self {
        self.flags |= VOCAB_MASK;
        self
    }

    /// Marks a stage that keeps `-inf` entries the CPU chain's list holds in a masked row (a
    /// prefix never ends with such a record read back for the CPU: it ends before the stage).
    pub fn keeping_inf(mut self) -> Self {
        self.flags |= KEEPS_INF;
        self
    }

    /// Marks a stage after which such `-inf` entries no longer matter (a top-k, a cut, a draw).
    pub fn clearing_inf(mut self) -> Self {
        self.flags |= CLEARS_INF;
        self
    }

    pub(crate) fn writes_vocab_mask(&self) -> bool {
        self.flags & VOCAB_MASK != 0
    }

    pub(crate) fn keeps_inf(&self) -> bool {
        self.flags & KEEPS_INF != 0
    }

    pub(crate) fn clears_inf(&self) -> bool {
        self.flags & CLEARS_INF != 0
    }
}

/// A sampler's backend form: how it transforms the record as graph ops.
///
/// Implemented next to the sampler's CPU form (`samplers/<family>.rs`) and returned by
/// [`crate::Sampler::backend`]. See ARCHITECTURE.md, "Adding a sampler stage".
pub trait BackendStage {
    /// The structure this stage appends on a record of form `form` over a vocabulary of
    /// `n_vocab`, and the form it leaves; `None` where it has no backend form for these values
    /// (the backend prefix ends before it and the CPU runs it). A record that is already a token
    /// never reaches a stage.
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)>;

    /// The structure this stage appends in a chain's second run, where a deferred stage (an
    /// optimistic grammar, [`crate::Sampler::deferred`]) masks as it would at its place in a
    /// chain without deferral: the row whose first run chose a token the stage rejects runs the
    /// chain again on the backend (`Tail::sample`). Default: [`BackendStage::key`].
    fn masking_key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        self.key(form, n_vocab)
    }

    /// Appends the ops of `key` (one this stage's [`BackendStage::key`] or
    /// [`BackendStage::masking_key`] gave) to the record
    /// `rec`, and returns the record it leaves. It depends on `key` only: the values come from
    /// inputs ([`Lowering::param`], [`Lowering::input`]) that each row's sampler writes.
    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> std::result::Result<Record, GraphError>;

    /// Where this stage's form for `key` on the vocabulary row is exactly one `token_mask` by a
    /// per-row mask input (a grammar's): registers that input (as [`BackendStage::lower`] would)
    /// and returns it, appending nothing else, so that the next stage may read the row through the
    /// mask without the masked row being written ([`BackendStage::lower_masked`]). The group
    /// driver asks only where the next stage [`BackendStage::takes_mask`], the row has no pending
    /// transform and no cut came before, and the backend runs the fused form (else the two stages
    /// lower apart). Default: `None` (the stage is no such mask).
    fn vocab_mask(
        &self,
        _cx: &mut Lowering<'_>,
        _key: StageKey,
    ) -> Option<std::result::Result<graph::NodeId, GraphError>> {
        None
    }

    /// Whether this stage, for `key` on the vocabulary row, can read the row through a packed
    /// mask without the masked row being written ([`BackendStage::lower_masked`]).
    fn takes_mask(&self, _key: StageKey) -> bool {
        false
    }

    /// Appends the ops of `key` on the vocabulary row `rec` seen through the packed mask `bits`
    /// (`token_mask(x, bits)`, which it need not write): the record it leaves, the same as
    /// [`BackendStage::lower`] on the masked row. Default: the masked row, then `lower`.
    fn lower_masked(
        &self,
        cx: &mut Lowering<'_>,
        key: StageKey,
        rec: Record,
        bits: graph::NodeId,
    ) -> std::result::Result<Record, GraphError> {
        let rec = cx.mask_tokens(rec, bits)?;
        self.lower(cx, key, rec)
    }

    /// Where this stage is one of the fused list stages (top-p, min-p, temp on a short list,
    /// [`graph::ListStages`]): its kind and its two parameter values per row. A run of such
    /// stages is one `list_filter` node.
    fn list_stage(&self, _key: StageKey, _stage: usize) -> Option<(graph::ListStage, Field)> {
        None
    }
}

/// What an input's writer sees of one row each step.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    pub(crate) seq: SeqId,
    /// The chain as this output sees it (a drafted output's has accepted the draft before it).
    pub(crate) chain: &'a Chain,
    /// The sequence's own chain (what its device state holds).
    pub(crate) own: &'a Chain,
    pub(crate) step: u64,
    pub(crate) draft: i32,
    pub(crate) q: Option<&'a [(Token, f32)]>,
    pub(crate) q_len: usize,
    pub(crate) row: usize,
    pub(crate) n_vocab: usize,
}

/// Stage `stage` of `chain` as `Any` (to be read as its own type).
pub(crate) fn stage_any(chain: &Chain, stage: usize) -> Option<&dyn Any> {
    chain.stages().get(stage).map(|s| -> &dyn Any { s.as_ref() })
}

fn stage_of<S: Sampler>(chain: &Chain, seq: SeqId, stage: usize) -> Result<&S> {
    stage_any(chain, stage).and_then(|s| s.downcast_ref::<S>()).ok_or_else(|| SamplingError::StaleTail {
        what: format!("stage {stage} of {seq}'s chain is no longer a {}", std::any::type_name::<S>()),
    })
}

impl<'a> Row<'a> {
    /// Stage `stage` of this output's chain, as a sampler of type `S`: a stage whose type changed
    /// under a built tail is [`SamplingError::StaleTail`].
    pub fn stage<S: Sampler>(&self, stage: usize) -> Result<&'a S> {
        stage_of(self.chain, self.seq, stage)
    }

    /// The step this row's draws use (the sequence's step plus the output index).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The logits row.
    pub fn row(&self) -> usize {
        self.row
    }

    /// The vocabulary size.
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// The row's draft token (-1: none).
    pub fn draft(&self) -> i32 {
        self.draft
    }
}

/// The bytes of one row of an input, written value by value (little-endian).
#[derive(Debug)]
pub struct Out<'a>(pub(crate) &'a mut Vec<u8>);

impl Out<'_> {
    /// Appends an f32.
    pub fn f32(&mut self, v: f32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends an i32.
    pub fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends `u32` values (each as the `i32` of its bits, as [`Out::i32`] would one by one, in
    /// one copy: a packed mask of thousands of words a step).
    pub fn u32s(&mut self, v: &[u32]) {
        let start = self.0.len();
        self.0.resize(start + 4 * v.len(), 0);
        for (c, w) in self.0[start..].chunks_exact_mut(4).zip(v) {
            c.copy_from_slice(&w.to_le_bytes());
        }
    }

    /// Appends a token id (-1 where it does not fit an i32: it never matches).
    pub fn token(&mut self, t: Token) {
        self.i32(i32::try_from(t).unwrap_or(-1));
    }
}

type WriteFn = dyn Fn(&Row<'_>, &mut Out<'_>) -> Result<()> + Send + Sync;

/// A part of one row of an input, written every step: values of a stage of the row's chain (read
/// from the stage as its own type, [`Field::of`]), or of the row itself. An input's row is the
/// concatenation of its fields.
#[derive(Clone)]
pub struct Field(Arc<WriteFn>);

impl fmt::Debug for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Field")
    }
}

impl Field {
    /// A field written from the row (its step, draft, logits row, chains).
    pub fn new(f: impl Fn(&Row<'_>, &mut Out<'_>) -> Result<()> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// A field written from stage `stage` of the row's chain, a sampler of type `S`.
    pub fn of<S: Sampler>(stage: usize, f: impl Fn(&S, &mut Out<'_>) + Send + Sync + 'static) -> Self {
        Self::new(move |row, out| {
            f(row.stage::<S>(stage)?, out);
            Ok(())
        })
    }

    /// Constant values.
    pub fn constant(values: &[f32]) -> Self {
        let v = values.to_vec();
        Self::new(move |_, out| {
            v.iter().for_each(|&x| out.f32(x));
            Ok(())
        })
    }

    /// Constant `i32` values.
    pub fn constant_i32(values: &[i32]) -> Self {
        let v = values.to_vec();
        Self::new(move |_, out| {
            v.iter().for_each(|&x| out.i32(x));
            Ok(())
        })
    }

    /// A field of one value, `map` of `scalar` (the constant `none` without one).
    pub fn scalar(scalar: Option<Scalar>, map: fn(f32) -> f32, none: f32) -> Self {
        Self::new(move |row, out| {
            out.f32(match scalar {
                Some(s) => map(s.get(row)?),
                None => none,
            });
            Ok(())
        })
    }

    pub(crate) fn write(&self, row: &Row<'_>, out: &mut Out<'_>) -> Result<()> {
        (self.0)(row, out)
    }
}

/// One parameter value of a stage, read each step from the row's sampler: what a pending
/// transform (a temperature or a min-p cut folded into a later stage) carries, so that the
/// stage that applies it writes the value in the form it needs.
#[derive(Debug, Clone, Copy)]
pub struct Scalar {
    stage: usize,
    get: fn(&dyn Any) -> Option<f32>,
    owner: &'static str,
}

impl Scalar {
    /// The value `get` reads from stage `stage`; `get` gives `None` for a stage of another type
    /// (`owner` names the expected one).
    pub fn new(stage: usize, owner: &'static str, get: fn(&dyn Any) -> Option<f32>) -> Self {
        Self { stage, get, owner }
    }

    /// The value for `row`.
    pub fn get(&self, row: &Row<'_>) -> Result<f32> {
        stage_any(row.chain, self.stage).and_then(self.get).ok_or_else(|| SamplingError::StaleTail {
            what: format!("stage {} of {}'s chain is no longer a {}", self.stage, row.seq, self.owner),
        })
    }
}

/// A per-sequence state tensor of token values (`f32 [1, n_vocab]`) that lives on the device
/// and is kept equal to what a stage's sampler holds (the whole history's token counts of
/// penalties), writing only the entries that changed: `get` reads the sparse values from the
/// sampler (`None`: the stage is of another type).
pub(crate) type TokenValues = fn(&dyn Any, usize) -> Option<std::collections::HashMap<Token, u32>>;
