//! The lowering context: what a stage's [`BackendStage::lower`](super::BackendStage::lower) appends
//! its ops with ([`Lowering`]), the record that flows between stages ([`Record`]) and the shared
//! helpers of every stage's graph form (gathers into a group's rows, two-level row sums, sorting a
//! list, the draws and their Philox keys, device-state token values). It names no stage: each
//! stage's own ops live in its sampler's file (`samplers/<family>.rs`).
//!
//! A group is `n` output rows whose prefixes have equal structure; its record starts as
//! `x [n_vocab, n]` f32 (a view of contiguous logits rows, or gathered with `get_rows`). Parameter
//! values are `[.., n]` inputs, one column per row, so a group of different temperatures is one
//! subgraph and changing a temperature rebuilds nothing.
//!
//! Bad rows (NaN or `+inf` logits, or nothing left unmasked) never fail the batch: `categorical`
//! (which also does greedy, at zero temperature) returns -1 for them; top-k checks its first value
//! (a NaN or `+inf` anywhere in the row ranks first) and makes the row's candidate logits NaN; a
//! selection from a list folds the list's state into the token (-1). The tail turns those into
//! that row's error.

use super::group::Verify;
use super::stage::{Field, Out, Row, Scalar, TokenValues, stage_any};
use crate::error::{Result as SResult, SamplingError};
use crate::sampler::{Sampler, Token};
use graph::{DType, Graph, GraphError, NodeId};
use std::collections::HashMap;

pub(crate) type R<T> = std::result::Result<T, GraphError>;

/// A transform of the vocabulary not yet applied: like the CPU chain's pending temperature, it
/// is folded into the stage that consumes the row (the draw takes it as parameters, top-k applies
/// it to its `k` values) and applied to the whole row only where a stage needs the values
/// ([`Lowering::materialize`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Pending {
    /// Divide by this temperature input (`[1, n]`), whose value the scalar reads.
    pub(crate) temp: Option<(NodeId, Scalar)>,
    /// Mask to `-inf` below `max + ln p`, with this `ln p` input (`[1, n]`; the scalar reads `p`),
    /// applied before the temperature: a temperature before a min-p is applied first.
    pub(crate) min_p: Option<(NodeId, Scalar)>,
}

impl Pending {
    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.temp.is_none() && self.min_p.is_none()
    }
}

/// The record while stages are appended.
#[derive(Debug, Clone, Copy)]
pub enum Record {
    /// The row in vocabulary order, `x [n_vocab, n]` f32.
    Vocab {
        /// The values.
        x: NodeId,
        /// A stage changed them (false: `x` is the logits themselves).
        touched: bool,
        /// Transforms not yet applied to `x`.
        pending: Pending,
        /// The row before a cut (its `-inf` entries were `-inf` from the start), so that a later
        /// top-k tells the entries the cut removed from those; `None` before any cut.
        unmasked: Option<NodeId>,
    },
    /// A candidate list of `k` per row.
    List {
        /// Token ids, `i32 [k, n]`.
        ids: NodeId,
        /// Their values, `f32 [k, n]`.
        vals: NodeId,
        /// The list's length.
        k: usize,
        /// The values when the list was made (before any stage masked one), so that an entry a
        /// stage removed (finite then, `-inf` now) is told from one that was `-inf` all along (the
        /// CPU chain's list still holds those, and counts them).
        init: NodeId,
        /// By value descending, ties in id order (false after a stage that reorders, such as
        /// typical; a stage that needs the sorted order sorts first, as the CPU chain's do).
        sorted: bool,
    },
    /// The selected token, `i32 [1, n]`.
    Token(NodeId),
}

/// A per-sequence state tensor of token values a group reads (`f32 [1, n_vocab]`).
#[derive(Debug, Clone)]
pub(crate) struct StateTensor {
    pub node: NodeId,
    pub seq: u32,
    pub stage: usize,
    pub get: TokenValues,
}

/// The context a stage appends its ops with.
pub struct Lowering<'g> {
    pub(crate) g: &'g mut Graph,
    pub(crate) n_vocab: usize,
    pub(crate) n: usize,
    pub(crate) stage: usize,
    pub(crate) prefix: String,
    pub(crate) inputs: Vec<(NodeId, Vec<Field>)>,
    /// The drawn token's probability and the drawing stage (fed back to its sampler).
    pub(crate) selected_p: Option<(NodeId, usize)>,
    /// The record a selecting stage selected from (its surviving candidates).
    pub(crate) pre_select: Option<Record>,
    /// Whether `dist` verifies each row's draft token instead of a plain draw, and how.
    pub(crate) verify: Verify,
    /// The group's constants, one node per (shape, value): each is computed once a step however
    /// many stages use it.
    fills: Vec<((Vec<usize>, u32), NodeId)>,
    /// Each column's sequence.
    col_seqs: Vec<u32>,
    /// The most outputs a sequence has per step.
    max_outputs: usize,
    /// The state tensors read so far.
    pub(crate) states: Vec<StateTensor>,
    /// Whether a mask stage and the next stage that reads the row through it lower as one
    /// (`BackendStage::vocab_mask`, `lower_masked`): where the backend runs the fused form.
    pub(crate) fuse: bool,
}

impl std::fmt::Debug for Lowering<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lowering")
            .field("n_vocab", &self.n_vocab)
            .field("n", &self.n)
            .field("stage", &self.stage)
            .finish()
    }
}

/// The name of the state tensor holding `seq`'s token counts for its chain's stage `stage`
/// (`f32 [1, n_vocab]`, one element per token: the scheduler writes single elements).
pub(crate) fn token_values_name(seq: u32, stage: usize) -> String {
    format!("sampling.seq{seq}.s{stage}.penalty_counts")
}

/// The entries of a drafted output's token value corrections: one for each draft token before
/// it (nothing leaves the whole history).
pub(crate) fn draft_corrections_len(max_outputs: usize) -> usize {
    max_outputs.saturating_sub(1)
}

/// The sparse token values of stage `stage` of `chain` inside a vocabulary of `n_vocab` (the CPU
/// sampler ignores tokens outside it too).
pub(crate) fn token_values(
    chain: &crate::Chain,
    seq: super::SeqId,
    stage: usize,
    get: TokenValues,
    n_vocab: usize,
) -> SResult<HashMap<Token, u32>> {
    let values = stage_any(chain, stage).and_then(|s| get(s, n_vocab)).ok_or_else(|| SamplingError::StaleTail {
        what: format!("stage {stage} of {seq}'s chain no longer holds device-state token values"),
    })?;
    Ok(values.into_iter().filter(|&(t, _)| (t as usize) < n_vocab).collect())
}

/// The Philox key of the draw of stage `stage` for a row: its sampler's seed and the row's step
/// (`i32 [4]`), and with `verify` the row's draft token (`i32 [5]`).
fn draw_keys(stage: usize, verify: bool) -> Field {
    Field::new(move |row, out| {
        let seed = row.chain.stages().get(stage).and_then(|s| s.seed()).ok_or_else(|| SamplingError::StaleTail {
            what: format!("stage {stage} of {}'s chain no longer draws", row.seq),
        })?;
        let step = row.step;
        for w in [seed as u32, (seed >> 32) as u32, step as u32, (step >> 32) as u32] {
            out.i32(w as i32);
        }
        if verify {
            out.i32(row.draft);
        }
        Ok(())
    })
}

/// One row of a draft distribution input (`ids`: the token ids, else the probabilities),
/// `q_len` entries: a sampled draft's `q` (checked by `Sequences::set_draft_sampled`), `[d]`
/// with probability 1 for a deterministic draft `d`, nothing without a draft; padded with id -1
/// and probability 0 (no entry, no mass).
fn draft_q(ids: bool) -> Field {
    Field::new(move |row, out| {
        let one = [(row.draft as Token, 1.0f32)];
        let entries: &[(Token, f32)] = match row.q {
            Some(q) => q,
            None if row.draft >= 0 => &one,
            None => &[],
        };
        for j in 0..row.q_len {
            match (entries.get(j), ids) {
                (Some(&(t, _)), true) => out.i32(t as i32),
                (Some(&(_, p)), false) => out.f32(p),
                (None, true) => out.i32(-1),
                (None, false) => out.f32(0.0),
            }
        }
        Ok(())
    })
}

/// One row of a drafted output's token value corrections (`ids`: the tokens, else the
/// differences): the values of stage `stage` of the row's chain (the sequence's chain after the
/// draft before this output) minus those of its own chain (which the state tensor holds), padded
/// with id -1 and 0 to `m` entries.
fn draft_corrections(stage: usize, get: TokenValues, m: usize, ids: bool) -> Field {
    Field::new(move |row, out| {
        let a = token_values(row.own, row.seq, stage, get, row.n_vocab)?;
        let b = token_values(row.chain, row.seq, stage, get, row.n_vocab)?;
        let mut d: Vec<(i32, f32)> = b
            .iter()
            .filter(|(t, c)| a.get(t) != Some(c))
            .map(|(&t, &c)| (t as i32, c as f32 - a.get(&t).map_or(0.0, |&x| x as f32)))
            .chain(a.iter().filter(|(t, _)| !b.contains_key(t)).map(|(&t, &c)| (t as i32, -(c as f32))))
            .collect();
        if d.len() > m {
            return Err(SamplingError::Engine {
                context: "writing the token count corrections",
                message: format!("{} tokens changed count over the draft, more than the {m} reserved", d.len()),
            });
        }
        d.sort_unstable_by_key(|e| e.0);
        d.resize(m, (-1, 0.0));
        for (t, v) in d {
            if ids { out.i32(t) } else { out.f32(v) }
        }
        Ok(())
    })
}

impl<'g> Lowering<'g> {
    pub(crate) fn new(
        g: &'g mut Graph,
        n_vocab: usize,
        n: usize,
        prefix: &str,
        cols: &super::group::Columns<'_>,
    ) -> Self {
        Self {
            g,
            n_vocab,
            n,
            stage: 0,
            prefix: prefix.to_string(),
            inputs: Vec::new(),
            selected_p: None,
            pre_select: None,
            verify: cols.verify,
            fills: Vec::new(),
            col_seqs: cols.seqs.to_vec(),
            max_outputs: cols.max_outputs,
            states: Vec::new(),
            fuse: cols.fuse,
        }
    }
}

impl Lowering<'_> {
    /// The graph.
    pub fn graph(&mut self) -> &mut Graph {
        self.g
    }

    /// The vocabulary size (the record's `ne[0]`).
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// The group's row count (the record's `ne[1]`).
    pub fn n(&self) -> usize {
        self.n
    }

    /// The index in the chain of the stage being lowered.
    pub fn stage(&self) -> usize {
        self.stage
    }

    /// Whether this group's draws verify drafts (speculative decoding).
    pub fn verifies(&self) -> bool {
        self.verify != Verify::No
    }

    /// An input `[shape..]` named `name` (after the group's prefix), each column of which is the
    /// concatenation of `fields`, written every step from that column's row.
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize], fields: Vec<Field>) -> R<NodeId> {
        let id = self.g.input(&format!("{}.{name}", self.prefix), dtype, shape)?;
        self.inputs.push((id, fields));
        Ok(id)
    }

    /// An `f32 [rows, n]` input of the current stage named `s{stage}.{name}`, written every step
    /// by `f` from each row's sampler (a sampler of type `S`: another type under a built tail is
    /// [`SamplingError::StaleTail`]).
    pub fn param<S: Sampler>(
        &mut self,
        name: &str,
        rows: usize,
        f: impl Fn(&S, &mut Out<'_>) + Send + Sync + 'static,
    ) -> R<NodeId> {
        let field = Field::of::<S>(self.stage, f);
        self.input(&format!("s{}.{name}", self.stage), DType::F32, &[rows, self.n], vec![field])
    }

    /// The rows `i` of an `[r, n]` parameter input, each `[1, n]`.
    pub fn param_rows<const N: usize>(&mut self, par: NodeId) -> R<[NodeId; N]> {
        let n = self.n;
        let nb1 = self.g.node(par).layout.nb[1];
        let mut out = [par; N];
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.g.view(par, &[1, n], &[4, nb1], 4 * i)?;
        }
        Ok(out)
    }

    /// Records that the selecting stage being lowered chose from `rec` (read back as the
    /// candidates where asked for).
    pub fn selects_from(&mut self, rec: Record) {
        self.pre_select = Some(rec);
    }

    /// Reads back `p [1, n]`, the probability the current stage drew its token with, and hands
    /// it to the row's sampler ([`crate::Sampler::backend_feedback`]).
    pub fn feedback(&mut self, p: NodeId) {
        self.selected_p = Some((p, self.stage));
    }

    /// The record with pending transforms applied, and a list sorted (as the CPU chain's stages
    /// that need the sorted order do first).
    pub fn sorted(&mut self, rec: Record) -> R<Record> {
        match rec {
            Record::Vocab { .. } => self.materialize(rec),
            Record::List { ids, vals, k, init, sorted: false } => self.sort_list(ids, vals, init, k),
            r => Ok(r),
        }
    }

    /// `f32 [n_vocab, n]`: the device-state token values of the current stage for each column
    /// (one state tensor per sequence, `get` reading the sparse values from the sampler), plus
    /// for a drafted output the corrections of the draft before it (in a tail with several
    /// outputs per sequence).
    pub(crate) fn token_values(&mut self, get: TokenValues) -> R<NodeId> {
        let (nv, n, idx) = (self.n_vocab, self.n, self.stage);
        let column = |c: &mut Self, col: usize| -> R<NodeId> {
            let seq = c.col_seqs[col];
            let state = match c.states.iter().find(|e| e.seq == seq && e.stage == idx) {
                Some(e) => e.node,
                None => {
                    let node = c.g.state(&token_values_name(seq, idx), DType::F32, &[1, nv])?;
                    c.states.push(StateTensor { node, seq, stage: idx, get });
                    node
                }
            };
            c.g.reshape(state, &[nv, 1])
        };
        // One column reads its tensor where it lies; several are copied into one matrix.
        let mut c = if n == 1 {
            column(self, 0)?
        } else {
            let mut c = self.g.fill(DType::F32, &[nv, n], 0.0)?;
            let at = self.g.arange(DType::I32, &[n], 0.0, 1.0)?;
            for col in 0..n {
                let values = column(self, col)?;
                let at = self.g.view(at, &[1], &[4], 4 * col)?;
                c = self.g.set_rows(c, values, at)?;
            }
            c
        };
        let m = draft_corrections_len(self.max_outputs);
        if m > 0 {
            let ids = self.input(
                &format!("s{idx}.pen_draft_ids"),
                DType::I32,
                &[m, n],
                vec![draft_corrections(idx, get, m, true)],
            )?;
            let d = self.input(
                &format!("s{idx}.pen_draft_deltas"),
                DType::F32,
                &[m, n],
                vec![draft_corrections(idx, get, m, false)],
            )?;
            c = self.g.scatter_add(c, ids, d)?;
        }
        Ok(c)
    }

    /// A draw of the current stage from the list values `vals [k, n]` on Philox stream `stream`:
    /// the position (clamped into `0..k`, for gathers) and a `[1, n]` mask of the rows where the
    /// draw was valid (`categorical` gives -1 for a bad row). For stages that read the drawn
    /// entry's other values back (mirostat's probability); a draw that needs only the token is
    /// [`Lowering::draw_token`].
    pub fn draw_position(&mut self, vals: NodeId, k: usize, stream: u64) -> R<(NodeId, NodeId)> {
        let keys = self.draw_keys_input()?;
        let at = self.g.categorical(vals, keys, None, None, stream as u32)?;
        let pf = self.g.cast(at, DType::F32)?;
        let zero = self.fill(&[1, 1], 0.0)?;
        let valid = self.g.ge(pf, zero)?;
        let pc = self.g.clamp(pf, 0.0, (k - 1) as f32)?;
        Ok((self.g.cast(pc, DType::I32)?, valid))
    }

    /// `i32 [4, n]`: each row's Philox key of the current stage's draw (its seed, its step).
    pub fn draw_keys_input(&mut self) -> R<NodeId> {
        let f = draw_keys(self.stage, false);
        self.input("keys", DType::I32, &[4, self.n], vec![f])
    }

    /// The token a draw of the current stage picks from the list `ids`, `vals [k, n]` on Philox
    /// stream `stream`, -1 for a bad row: the draw's own result (`categorical` and, where the
    /// group verifies drafts, `spec_verify` of each row's draft token return the entry's id from
    /// the list's `ids`).
    pub fn draw_token(&mut self, ids: NodeId, vals: NodeId, stream: u64) -> R<NodeId> {
        let ids = if self.g.node(ids).layout.is_contiguous(DType::I32) { ids } else { self.g.cont(ids)? };
        let vals = self.contiguous(vals)?;
        if self.verify != Verify::No {
            self.verify_draw(vals, graph::SpecAux::Ids(ids), stream as u32)
        } else {
            let keys = self.draw_keys_input()?;
            self.g.categorical(vals, keys, None, Some(ids), stream as u32)
        }
    }

    /// The verifier's draw of the current stage on `x` (`aux`: the draw's params or the list's
    /// ids): `spec_verify` of each row's draft token, or with a draft distribution reserved
    /// ([`Verify::Sampled`]) `spec_verify_sampled` with the rows' `q`.
    pub(crate) fn verify_draw(&mut self, x: NodeId, aux: graph::SpecAux, stream: u32) -> R<NodeId> {
        let f = draw_keys(self.stage, true);
        let keys = self.input("keys", DType::I32, &[5, self.n], vec![f])?;
        let Verify::Sampled(m) = self.verify else {
            return self.g.spec_verify(x, keys, aux, stream);
        };
        let qi = self.input("draft_q_ids", DType::I32, &[m, self.n], vec![draft_q(true)])?;
        let qp = self.input("draft_q_probs", DType::F32, &[m, self.n], vec![draft_q(false)])?;
        self.g.spec_verify_sampled(x, keys, qi, qp, aux, stream)
    }
}

/// The field of a gathered group's row ids input (`i32 [n]`: each column's logits row).
pub(crate) fn row_ids_field() -> Field {
    Field::new(|row: &Row<'_>, out: &mut Out<'_>| {
        out.i32(row.row as i32);
        Ok(())
    })
}

impl Lowering<'_> {
    /// A constant `f32` tensor of `shape` (one node per shape and value in the group).
    pub fn fill(&mut self, shape: &[usize], v: f32) -> R<NodeId> {
        let key = (shape.to_vec(), v.to_bits());
        if let Some(&(_, id)) = self.fills.iter().find(|(k, _)| *k == key) {
            return Ok(id);
        }
        let id = self.g.fill(DType::F32, shape, v)?;
        self.fills.push((key, id));
        Ok(id)
    }

    /// `x` as a contiguous node (itself where it already is).
    pub fn contiguous(&mut self, x: NodeId) -> R<NodeId> {
        if self.g.node(x).layout.is_contiguous(self.g.node(x).dtype) { Ok(x) } else { self.g.cont(x) }
    }

    /// The f32 sum of each row of the contiguous vocabulary-wide `v [n_vocab, n]`, in two levels
    /// where `n_vocab` has a divisor `a` between 16 and `n_vocab / 16` (the one nearest its square
    /// root): sums of `a` entries, then their sum, so that no accumulator runs over a whole 152k
    /// row (the CPU samplers sum in f64; this keeps the f32 sum within a few 1e-8 of it). `[1, n]`.
    pub fn row_sum(&mut self, v: NodeId) -> R<NodeId> {
        let (n, w) = (self.n, self.n_vocab);
        let target = (w as f64).sqrt() as usize;
        let a = (16..=w / 16).filter(|&a| w.is_multiple_of(a)).min_by_key(|a| a.abs_diff(target));
        let Some(a) = a else { return self.g.sum_rows(v) };
        let v = self.contiguous(v)?;
        let r = self.g.reshape(v, &[a, (w / a) * n])?;
        let part = self.g.sum_rows(r)?;
        let part = self.g.reshape(part, &[w / a, n])?;
        self.g.sum_rows(part)
    }

    /// `[1, n]` of `0, step, 2 step, ..`: the flat offset of each column.
    pub fn column_offsets(&mut self, step: usize) -> R<NodeId> {
        let a = self.g.arange(DType::F32, &[self.n], 0.0, step as f32)?;
        self.g.reshape(a, &[1, self.n])
    }

    /// `[1, n]` mask: `m [1, n]` is finite (not NaN, `+inf` or `-inf`).
    pub fn finite(&mut self, m: NodeId) -> R<NodeId> {
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let above = self.g.gt(m, ninf)?;
        let inf = self.fill(&[1, self.n], f32::INFINITY)?;
        let below = self.g.gt(inf, m)?;
        self.g.mul(above, below)
    }

    /// The flat indices `idx[j, c] + c w` of `idx i32 [k, n]` into a `[w, n]` tensor seen as
    /// `[1, w n]`: i32 `[k n]` (carried through f32, exact below 2^24: the tail keeps groups so).
    /// A one-row group's indices are already flat: no offset arithmetic (5 fewer nodes a gather).
    pub fn flat_index(&mut self, idx: NodeId, w: usize, k: usize) -> R<NodeId> {
        if self.n == 1 {
            let n = self.g.node(idx);
            let i = if n.layout.is_contiguous(n.dtype) { idx } else { self.g.cont(idx)? };
            return self.g.reshape(i, &[k]);
        }
        let f = self.g.cast(idx, DType::F32)?;
        let off = self.column_offsets(w)?;
        let f = self.g.add(f, off)?;
        let i = self.g.cast(f, DType::I32)?;
        let i = self.g.cont(i)?;
        self.g.reshape(i, &[k * self.n])
    }

    /// `src` (contiguous) as `[1, w n]`.
    pub fn flat(&mut self, src: NodeId, w: usize) -> R<NodeId> {
        let src = if self.g.node(src).layout.is_contiguous(self.g.node(src).dtype) { src } else { self.g.cont(src)? };
        self.g.reshape(src, &[1, w * self.n])
    }

    /// Gathers `src[idx[j, c], c]` for `idx i32 [k, n]` from `src [w, n]`: `[k, n]`.
    pub fn gather(&mut self, src: NodeId, idx: NodeId, w: usize, k: usize) -> R<NodeId> {
        let flat = self.flat(src, w)?;
        let i = self.flat_index(idx, w, k)?;
        let got = self.g.get_rows(flat, i)?;
        self.g.reshape(got, &[k, self.n])
    }

    /// `tok` where `ok` (a `[1, n]` mask), else -1.
    pub fn fold_token(&mut self, tok: NodeId, ok: NodeId) -> R<NodeId> {
        let f = self.g.cast(tok, DType::F32)?;
        let neg = self.fill(&[1, 1], -1.0)?;
        let w = self.g.where_(ok, f, neg)?;
        self.g.cast(w, DType::I32)
    }

    /// `[1, n]`: the first entry of each column of `[k, n]` (the largest, in a sorted list).
    pub fn first_row(&mut self, src: NodeId) -> R<NodeId> {
        let nb1 = self.g.node(src).layout.nb[1];
        self.g.view(src, &[1, self.n], &[4, nb1], 0)
    }

    /// The `k` largest entries of the row `x [n_vocab, n]` as a list: their ids,
    /// their values, and their values when the list was made (`Record::List::init`), read from
    /// `unmasked` where a cut came before (an entry the cut removed is finite there: removed, not
    /// `-inf` from the start, and the CPU chain's list does not hold it).
    pub fn top_k_of_row(&mut self, x: NodeId, unmasked: Option<NodeId>, k: usize) -> R<(NodeId, NodeId, NodeId)> {
        let nv = self.n_vocab;
        let ids = self.g.top_k(x, k)?;
        let vals = self.gather(x, ids, nv, k)?;
        let init = match unmasked {
            Some(u) => self.gather(u, ids, nv, k)?,
            None => vals,
        };
        Ok((ids, vals, init))
    }

    /// The first `k` entries of a sorted list (its ids, values and values at its making), as a
    /// sorted list of `k`.
    pub fn list_prefix(&mut self, ids: NodeId, vals: NodeId, init: NodeId, k: usize) -> R<Record> {
        let mut first = |t: NodeId| {
            let nb1 = self.g.node(t).layout.nb[1];
            self.g.view(t, &[k, self.n], &[4, nb1], 0)
        };
        let (ids, vals, init) = (first(ids)?, first(vals)?, first(init)?);
        Ok(Record::List { ids, vals, k, init, sorted: true })
    }

    /// `[k, n]` mask of the list entries a stage removed: finite in `init`, `-inf` in `vals`.
    pub fn removed(&mut self, init: NodeId, vals: NodeId) -> R<NodeId> {
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let was = self.g.gt(init, ninf)?;
        let now = self.g.equal(vals, ninf)?;
        self.g.mul(was, now)
    }

    /// `[k, n]` of `-i` for position `i`: compared with `-min_keep` (`-i > -min_keep` keeps `i`).
    pub fn neg_positions(&mut self, k: usize) -> R<NodeId> {
        self.g.arange(DType::F32, &[k, self.n], 0.0, -1.0)
    }

    /// Applies the pending transforms to the whole row (the min-p mask, then the temperature).
    pub fn materialize(&mut self, rec: Record) -> R<Record> {
        let Record::Vocab { mut x, mut touched, pending, mut unmasked } = rec else { return Ok(rec) };
        if let Some((lnp, _)) = pending.min_p {
            unmasked = Some(unmasked.unwrap_or(x));
            let m = self.g.max_rows(x)?;
            let thr = self.g.add(m, lnp)?;
            let keep = self.g.ge(x, thr)?;
            let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
            x = self.g.where_(keep, x, ninf)?;
            touched = true;
        }
        if let Some((t, _)) = pending.temp {
            x = self.g.div(x, t)?;
            touched = true;
        }
        Ok(Record::Vocab { x, touched, pending: Pending::default(), unmasked })
    }

    /// The list sorted by value descending, ties in list order (which is id order for equal values:
    /// every stage keeps tied entries in the order it found them).
    pub fn sort_list(&mut self, ids: NodeId, vals: NodeId, init: NodeId, k: usize) -> R<Record> {
        let vals = if self.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { self.g.cont(vals)? };
        let perm = self.g.argsort(vals, graph::SortOrder::Desc)?;
        let (ids, vals, init) =
            (self.gather(ids, perm, k, k)?, self.gather(vals, perm, k, k)?, self.gather(init, perm, k, k)?);
        Ok(Record::List { ids, vals, k, init, sorted: true })
    }

    /// The softmax `p` of `vals [k, n]`, `ln p`, and `-H = sum p ln p` over `p > 0` (`[1, n]`).
    pub fn softmax_entropy(&mut self, vals: NodeId) -> R<(NodeId, NodeId, NodeId)> {
        let zero = self.fill(&[1, 1], 0.0)?;
        let probs = self.g.soft_max(vals, None, 1.0)?;
        let lnp = self.g.log(probs)?;
        let plnp = self.g.mul(probs, lnp)?;
        let positive = self.g.gt(probs, zero)?;
        let plnp = self.g.where_(positive, plnp, zero)?;
        Ok((probs, lnp, self.g.sum_rows(plnp)?))
    }

    /// Of the row `x [nv, n]` (contiguous): `x - max` and the softmax `p = e^(x - max) (1 / sum)`
    /// (`[nv, n]`), `ln sum` and `-H = sum p (x - max - ln sum)` over `p > 0` (`[1, n]`), the sums
    /// in two levels ([`Lowering::row_sum`]).
    pub fn row_entropy(&mut self, x: NodeId) -> R<(NodeId, NodeId, NodeId, NodeId)> {
        let zero = self.fill(&[1, 1], 0.0)?;
        let m = self.g.max_rows(x)?;
        let xm = self.g.sub(x, m)?;
        let e = self.g.exp(xm)?;
        let sum = self.row_sum(e)?;
        let one = self.fill(&[1, self.n], 1.0)?;
        let inv = self.g.div(one, sum)?;
        let p = self.g.mul(e, inv)?;
        let ln_sum = self.g.log(sum)?;
        let lnp = self.g.sub(xm, ln_sum)?;
        let plnp = self.g.mul(p, lnp)?;
        let positive = self.g.gt(p, zero)?;
        let plnp = self.g.where_(positive, plnp, zero)?;
        let neg_h = self.row_sum(plnp)?;
        Ok((xm, p, ln_sum, neg_h))
    }

    /// `[nv, n]` mask of the first `count` entries (`count [1, n]` f32, an integer in
    /// `[1, nv]`) of the order `perm` (i32 `[nv, n]`, a stable argsort of `key [nv, n]`; `desc`:
    /// by value descending, else ascending; ties by lower index either way): the entries on the
    /// strict side of the last one's key, and those tied with it up to its index. A threshold, not
    /// a scatter of the ranks, so no row-long loop runs in one invocation on any backend.
    pub fn first_in_order(&mut self, key: NodeId, perm: NodeId, count: NodeId, desc: bool) -> R<NodeId> {
        let (n, nv) = (self.n, self.n_vocab);
        let last = self.g.scale_bias(count, 1.0, -1.0)?;
        let last = self.g.clamp(last, 0.0, (nv - 1) as f32)?;
        let last = self.g.cast(last, DType::I32)?;
        let at = self.gather(perm, last, nv, 1)?;
        let kv = self.gather(key, at, nv, 1)?;
        let beyond = if desc {
            self.g.gt(key, kv)?
        } else {
            // key < kv: not key >= kv (a NaN key makes the row bad anyway).
            let ge = self.g.ge(key, kv)?;
            self.g.scale_bias(ge, -1.0, 1.0)?
        };
        let tied = self.g.equal(key, kv)?;
        let at = self.g.cast(at, DType::F32)?;
        let neg_at = self.g.scale(at, -1.0)?;
        let neg_pos = self.g.arange(DType::F32, &[nv, n], 0.0, -1.0)?;
        let upto = self.g.ge(neg_pos, neg_at)?;
        let tied = self.g.mul(tied, upto)?;
        self.g.add(beyond, tied)
    }
}

impl Lowering<'_> {
    /// The record with `vals [m, n]` added at the token ids `ids i32 [m, n]` of each row (ids
    /// outside the vocabulary, -1 the padding, add nothing; `x + v`, so adding `-p` is `x - p`
    /// exactly and `-inf` bans): on the vocabulary row a `scatter_add` (see [`Lowering::add_row`]
    /// for the rest), on a list through a dense row of the values.
    pub fn add_sparse(&mut self, rec: Record, ids: NodeId, vals: NodeId) -> R<Record> {
        match self.materialize(rec)? {
            Record::Vocab { x, unmasked, .. } => {
                let unmasked = match unmasked {
                    Some(u) => Some(self.g.scatter_add(u, ids, vals)?),
                    None => None,
                };
                let x = self.g.scatter_add(x, ids, vals)?;
                Ok(Record::Vocab { x, touched: true, pending: Pending::default(), unmasked })
            }
            rec @ Record::List { .. } => {
                let zero = self.g.fill(DType::F32, &[self.n_vocab, self.n], 0.0)?;
                let dense = self.g.scatter_add(zero, ids, vals)?;
                self.add_row(rec, dense)
            }
            r => Ok(r),
        }
    }

    /// The record with the tokens whose bit is clear in `bits i32 [ceil(n_vocab / 32), n]` masked
    /// (`x + -inf`, one `token_mask` op): on the vocabulary row, and the row before a cut too (as
    /// [`Lowering::add_row`] does for the same reason); on a candidate list by its ids, the list
    /// then unsorted, its values at its making masked where its live entries were.
    pub fn mask_tokens(&mut self, rec: Record, bits: NodeId) -> R<Record> {
        match self.materialize(rec)? {
            Record::Vocab { x, unmasked, .. } => {
                let unmasked = match unmasked {
                    Some(u) => Some(self.g.token_mask(u, bits, None)?),
                    None => None,
                };
                let x = self.g.token_mask(x, bits, None)?;
                Ok(Record::Vocab { x, touched: true, pending: Pending::default(), unmasked })
            }
            Record::List { ids, vals, k, init, .. } => {
                let ids = self.contiguous(ids)?;
                let vals = self.contiguous(vals)?;
                let out = self.g.token_mask(vals, bits, Some(ids))?;
                let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
                let alive = self.g.gt(vals, ninf)?;
                let moved = self.g.token_mask(init, bits, Some(ids))?;
                let init = self.g.where_(alive, moved, init)?;
                Ok(Record::List { ids, vals: out, k, init, sorted: false })
            }
            r => Ok(r),
        }
    }

    /// The record with the vocabulary-sized `row [n_vocab, n]` added (`x + v`). On the vocabulary
    /// row with its pending transforms applied; after a cut the row before the cut gets it too (a
    /// `-inf` value makes an entry the CPU chain still holds `-inf`, which must not look
    /// removed). On a candidate list, `row` gathered at the list's ids and added, the list then
    /// unsorted (as the CPU chain's after such a stage); the list's values at its making move with
    /// its live entries, for the same reason.
    pub fn add_row(&mut self, rec: Record, row: NodeId) -> R<Record> {
        match self.materialize(rec)? {
            Record::Vocab { x, unmasked, .. } => {
                let unmasked = match unmasked {
                    Some(u) => Some(self.g.add(u, row)?),
                    None => None,
                };
                let x = self.g.add(x, row)?;
                Ok(Record::Vocab { x, touched: true, pending: Pending::default(), unmasked })
            }
            Record::List { ids, vals, k, init, .. } => {
                let add = self.gather(row, ids, self.n_vocab, k)?;
                let vals = self.contiguous(vals)?;
                let out = self.g.add(vals, add)?;
                let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
                let alive = self.g.gt(vals, ninf)?;
                let moved = self.g.add(init, add)?;
                let init = self.g.where_(alive, moved, init)?;
                Ok(Record::List { ids, vals: out, k, init, sorted: false })
            }
            r => Ok(r),
        }
    }
}
