//! Appending one group's backend prefix to a graph: the ops of every [`StageKey`], the inputs that
//! carry the parameter values, and the group's outputs (what output reservation reads back).
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

use super::stage::StageKey;
use graph::{DType, Graph, GraphError, NodeId};

#[path = "vocab_sorted.rs"]
mod vocab_sorted;

/// What an input of a group holds (the tail writes it every step from the rows' current stages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// `i32 [n]`: the logits row of each column (only for a gathered record).
    RowIds,
    /// `i32 [4, n]`: the Philox key of each row's draw by stage `.0` (its seed; the row's step).
    Keys(usize),
    /// `i32 [5, n]`: [`Param::Keys`] and the row's draft token (-1 for none): the key of a
    /// `spec_verify` draw (speculative verification, in a tail built with `verify`).
    VerifyKeys(usize),
    /// `f32 [1, n]`: `-mu` of mirostat_v2 stage `.0`.
    NegMu(usize),
    /// `f32 [2, n]` of mirostat (v1) stage `.0`: `2^mu` (in f32, as the CPU sampler computes it)
    /// and the negated bound of the estimate's pairs, `-(m - 1)` (`-inf` for `m <= 0`: every pair).
    Mirostat(usize),
    /// `f32 [1, n]`: the temperature of prefix stage `.0`.
    Temp(usize),
    /// `f32 [1, n]`: `ln p` of min-p stage `.0`.
    LnP(usize),
    /// `f32 [1, n]`: `p` of top-p stage `.0`.
    TopP(usize),
    /// `f32 [3, n]` of the `top_p_mask` of top-p stage `stage`: the pending temperature of stage
    /// `temp` (1 without one), `p` and `min_keep`.
    Nucleus {
        /// The top-p stage.
        stage: usize,
        /// The pending temperature's stage.
        temp: Option<usize>,
    },
    /// `f32 [1, n]`: `-max(min_keep, 1)` of stage `.0` (a position `i` is kept when `-i > -min_keep`).
    NegMinKeep(usize),
    /// `i32 [4, n]` of zeros: the key of a greedy `categorical`, which draws no number.
    NoKeys,
    /// `f32 [2, n]` of `(+inf, -inf)`: `categorical`'s zero-temperature limit, greedy.
    Greedy,
    /// `f32 [2, n]`: the draw's scale and cut: `1 / t` of temp stage `temp` (1 without one) and
    /// `ln p` of min-p stage `min_p` (`-inf` without one), see `graph::Op::Categorical`.
    DrawParams {
        /// The pending temperature's stage.
        temp: Option<usize>,
        /// The pending min-p's stage.
        min_p: Option<usize>,
        /// The row is masked: without a min-p, the cut is `-f32::MAX` (it removes no finite value,
        /// and `categorical` then skips all-`-inf` blocks).
        masked: bool,
    },
    /// `i32 [m, n]`: the seen tokens of windowed penalties stage `.0` (padded by repeating an
    /// entry, or with an identity entry when none was seen).
    PenaltyIds(usize),
    /// `f32 [m, n]`: the repetition penalty of each entry (1 for an identity entry).
    PenaltyRepeat(usize),
    /// `f32 [m, n]`: `count * freq + present` of each entry, in f32 as the CPU sampler computes
    /// it (0 for an identity entry).
    PenaltySub(usize),
    /// `f32 [3, n]` of whole-history penalties stage `.0`: the repetition, frequency and presence
    /// penalties (the counts are the sequence's state tensor).
    Penalties(usize),
    /// `i32 [m, n]` of whole-history penalties stage `.0`, in a tail with several outputs per
    /// sequence: the tokens whose count differs, for this output's chain (which has accepted the
    /// draft before it), from the sequence's own, the count held by its state tensor (-1: padding).
    PenaltyDraftIds(usize),
    /// `f32 [m, n]`: the count differences of [`Param::PenaltyDraftIds`]' tokens.
    PenaltyDraftDeltas(usize),
    /// `f32 [4, n]` of xtc stage `.0`: `t`, `-min_keep`, this step's flag (1: the coin says
    /// apply), 0 (padding).
    Xtc(usize),
    /// `f32 [4, n]` of temp_ext stage `.0`: `min_t`, `max_t - min_t`, `exponent`, and 1 where the
    /// exponent is 0 (`powf(x, 0) = 1`, which `exp(0 * ln x)` misses at `x = 0`).
    TempExt(usize),
    /// `f32 [1, n]`: `p` of typical stage `.0`.
    TypicalP(usize),
    /// `f32 [1, n]`: `-min_keep` of typical stage `.0` (0 and 1 alike).
    TypicalNegMinKeep(usize),
    /// `f32 [1, n]`: `n` of top-n-sigma stage `.0`.
    Sigma(usize),
    /// `i32 [m, n]`: token ids of logit-bias stage `.0` (`-1` never matches).
    BiasIds(usize),
    /// `f32 [m, n]`: biases of logit-bias stage `.0`.
    BiasValues(usize),
    /// `i32 [m, n]`: the token ids of each row's draft distribution `q` (a sampled draft;
    /// `[d, -1, ..]` for a deterministic draft `d`, all -1 without a draft), in a tail whose
    /// `Sequences` reserve `m` entries per drafted output (`graph::Op::SpecVerifySampled`).
    DraftQIds,
    /// `f32 [m, n]`: the probabilities of [`Param::DraftQIds`]' tokens (`[1, 0, ..]` for a
    /// deterministic draft, zeros without one).
    DraftQProbs,
    /// `f32 [2 len, n]` of the `list_filter` node of prefix stages `first..first + len` (top-p,
    /// min-p and temp on a list): per stage `(p, min_keep)`, `(ln p, min_keep)` or `(t, 0)`.
    ListParams {
        /// The run's first stage.
        first: usize,
        /// How many stages it fuses.
        len: usize,
    },
}

/// The nodes a group reads back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outputs {
    /// `i32 [1, n]` selected tokens (a prefix ending in a selecting stage).
    pub token: Option<NodeId>,
    /// `i32 [k, n]` ids and `f32 [k, n]` logits of the candidates (a prefix ending in a list, or
    /// the list before the selecting stage when candidates were asked for).
    pub list: Option<(NodeId, NodeId)>,
    /// `f32 [n_vocab, n]` logits after the prefix (a prefix that keeps the vocabulary, or the
    /// vocabulary before the selecting stage when candidates were asked for). `None` with
    /// `vocab_is_logits` set: the rows of the logits node itself.
    pub vocab: Option<NodeId>,
    /// The prefix left the vocabulary untouched: read the logits node's rows.
    pub vocab_is_logits: bool,
    /// The raw logits were asked for and `x` (gathered) holds them.
    pub raw: Option<NodeId>,
    /// The raw logits were asked for: read the logits node's rows (unless `vocab_is_logits`
    /// already reads them, or `vocab`/`raw` hold them).
    pub raw_logits: bool,
    /// `i32 [n_lp, n]` ids and `f32 [n_lp, n]` log-probabilities of the most likely tokens.
    pub logprobs: Option<(NodeId, NodeId)>,
    /// `f32 [1, n]`: the probability the selecting stage drew its token with, and that stage's
    /// index (mirostat: the CPU sampler's `mu` update needs it).
    pub selected_p: Option<(NodeId, usize)>,
}

/// A built group: its inputs (with what they hold) and outputs.
#[derive(Debug, Clone, Default)]
pub struct Built {
    /// Input nodes and their meaning.
    pub inputs: Vec<(NodeId, Param)>,
    /// The penalty count state tensors the group reads: `(node, sequence, stage)`, one per
    /// sequence and penalties stage (`f32 [1, n_vocab]`, named by [`penalty_counts_name`]).
    pub counts: Vec<(NodeId, u32, usize)>,
    /// What to read back.
    pub outputs: Outputs,
    /// Every node this group appended (for the capability check).
    pub nodes: Vec<NodeId>,
}

/// A transform of the vocabulary not yet applied: like the CPU chain's pending temperature, it
/// is folded into the stage that consumes the row (the draw takes it as parameters, top-k applies
/// it to its `k` values) and applied to the whole row only where a stage needs the values.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    /// Divide by the temperature input of this stage.
    temp: Option<(usize, NodeId)>,
    /// Mask to `-inf` below `max + ln p`, with `ln p` the input of this stage (applied before the
    /// temperature: a temperature before a min-p is applied first).
    min_p: Option<(usize, NodeId)>,
}

/// The record while stages are appended.
#[derive(Debug, Clone, Copy)]
enum Rec {
    /// `unmasked`: the row before a top-p mask (its `-inf` entries were `-inf` from the start), so
    /// that a later top-k tells the entries the mask removed from those.
    Vocab {
        x: NodeId,
        touched: bool,
        pending: Pending,
        unmasked: Option<NodeId>,
    },
    /// `init`: the values when the list was made (before any stage masked one), so that an entry a
    /// stage removed (finite then, `-inf` now) is told from one that was `-inf` all along (the CPU
    /// chain's list still holds those, and counts them). `sorted`: by value descending, ties in id
    /// order (false after typical, which leaves its own order; a stage that needs the sorted order
    /// sorts first, as the CPU chain's stages do).
    List {
        ids: NodeId,
        vals: NodeId,
        k: usize,
        init: NodeId,
        sorted: bool,
    },
    Token(NodeId),
}

struct Ctx<'g> {
    g: &'g mut Graph,
    n_vocab: usize,
    n: usize,
    prefix: String,
    inputs: Vec<(NodeId, Param)>,
    /// The drawn token's probability and the drawing stage (mirostat).
    selected_p: Option<(NodeId, usize)>,
    /// The record a selecting stage selected from (its surviving candidates).
    pre_select: Option<Rec>,
    /// Whether `dist` verifies each row's draft token instead of a plain draw, and how.
    verify: Verify,
    /// The group's constants, one node per (shape, value): each is computed once a step however
    /// many stages use it.
    fills: Vec<((Vec<usize>, u32), NodeId)>,
    /// Each column's sequence.
    col_seqs: Vec<u32>,
    /// The most outputs a sequence has per step.
    max_outputs: usize,
    /// The penalty count states read so far: `(node, sequence, stage)`.
    counts: Vec<(NodeId, u32, usize)>,
}

/// The name of the state tensor holding `seq`'s token counts for its chain's penalties stage
/// `stage` (`f32 [1, n_vocab]`, one element per token: the scheduler writes single elements).
pub fn penalty_counts_name(seq: u32, stage: usize) -> String {
    format!("sampling.seq{seq}.s{stage}.penalty_counts")
}

/// The entries of a drafted output's penalty count corrections (whole-history penalties): one
/// for each draft token before it (nothing leaves the whole history).
pub fn penalty_draft_len(max_outputs: usize) -> usize {
    max_outputs.saturating_sub(1)
}

type R<T> = Result<T, GraphError>;

impl Ctx<'_> {
    fn input(&mut self, name: &str, dtype: DType, shape: &[usize], p: Param) -> R<NodeId> {
        let id = self.g.input(&format!("{}.{name}", self.prefix), dtype, shape)?;
        self.inputs.push((id, p));
        Ok(id)
    }

    /// The f32 sum of each row of the contiguous vocabulary-wide `v [n_vocab, n]`, in two levels
    /// where `n_vocab` has a divisor `a` between 16 and `n_vocab / 16` (the one nearest its square
    /// root): sums of `a` entries, then their sum, so that no accumulator runs over a whole 152k
    /// row (the CPU samplers sum in f64; this keeps the f32 sum within a few 1e-8 of it). `[1, n]`.
    fn row_sum(&mut self, v: NodeId) -> R<NodeId> {
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

    /// temp_ext's dynamic temperature `min_t + range norm^e` (`[1, n]`) for the normalised entropy
    /// `norm`, from its parameter rows `[min_t, range, e, e0]` (`e0`: 1 where `e = 0`, keeping
    /// `x^0 = 1`), the power as `exp(e ln norm)`: the list form and the vocabulary form alike.
    fn dynamic_temp(&mut self, norm: NodeId, [min_t, range, expo, expo0]: [NodeId; 4]) -> R<NodeId> {
        let one = self.fill(&[1, self.n], 1.0)?;
        let ln_norm = self.g.log(norm)?;
        let e_ln = self.g.mul(ln_norm, expo)?;
        let pow = self.g.exp(e_ln)?;
        let pow = self.g.where_(expo0, one, pow)?;
        let spread = self.g.mul(range, pow)?;
        self.g.add(min_t, spread)
    }

    /// `x` as a contiguous node (itself where it already is).
    fn contiguous(&mut self, x: NodeId) -> R<NodeId> {
        if self.g.node(x).layout.is_contiguous(self.g.node(x).dtype) { Ok(x) } else { self.g.cont(x) }
    }

    fn fill(&mut self, shape: &[usize], v: f32) -> R<NodeId> {
        let key = (shape.to_vec(), v.to_bits());
        if let Some(&(_, id)) = self.fills.iter().find(|(k, _)| *k == key) {
            return Ok(id);
        }
        let id = self.g.fill(DType::F32, shape, v)?;
        self.fills.push((key, id));
        Ok(id)
    }

    /// `f32 [n_vocab, n]`: the token counts of penalties stage `idx` for each column: its
    /// sequence's state tensor, plus for a drafted output the corrections of the draft before it
    /// (in a tail with several outputs per sequence).
    fn penalty_counts(&mut self, idx: usize) -> R<NodeId> {
        let (nv, n) = (self.n_vocab, self.n);
        let column = |c: &mut Self, col: usize| -> R<NodeId> {
            let seq = c.col_seqs[col];
            let state = match c.counts.iter().find(|e| e.1 == seq && e.2 == idx) {
                Some(e) => e.0,
                None => {
                    let st = c.g.state(&penalty_counts_name(seq, idx), DType::F32, &[1, nv])?;
                    c.counts.push((st, seq, idx));
                    st
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
        let m = penalty_draft_len(self.max_outputs);
        if m > 0 {
            let ids = self.input(&format!("s{idx}.pen_draft_ids"), DType::I32, &[m, n], Param::PenaltyDraftIds(idx))?;
            let d =
                self.input(&format!("s{idx}.pen_draft_deltas"), DType::F32, &[m, n], Param::PenaltyDraftDeltas(idx))?;
            c = self.g.scatter_add(c, ids, d)?;
        }
        Ok(c)
    }

    /// `[1, n]` of `0, step, 2 step, ..`: the flat offset of each column.
    fn column_offsets(&mut self, step: usize) -> R<NodeId> {
        let a = self.g.arange(DType::F32, &[self.n], 0.0, step as f32)?;
        self.g.reshape(a, &[1, self.n])
    }

    /// `[1, n]` mask: `m [1, n]` is finite (not NaN, `+inf` or `-inf`).
    fn finite(&mut self, m: NodeId) -> R<NodeId> {
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let above = self.g.gt(m, ninf)?;
        let inf = self.fill(&[1, self.n], f32::INFINITY)?;
        let below = self.g.gt(inf, m)?;
        self.g.mul(above, below)
    }

    /// The flat indices `idx[j, c] + c w` of `idx i32 [k, n]` into a `[w, n]` tensor seen as
    /// `[1, w n]`: i32 `[k n]` (carried through f32, exact below 2^24: the tail keeps groups so).
    /// A one-row group's indices are already flat: no offset arithmetic (5 fewer nodes a gather).
    fn flat_index(&mut self, idx: NodeId, w: usize, k: usize) -> R<NodeId> {
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
    fn flat(&mut self, src: NodeId, w: usize) -> R<NodeId> {
        let src = if self.g.node(src).layout.is_contiguous(self.g.node(src).dtype) { src } else { self.g.cont(src)? };
        self.g.reshape(src, &[1, w * self.n])
    }

    /// Gathers `src[idx[j, c], c]` for `idx i32 [k, n]` from `src [w, n]`: `[k, n]`.
    fn gather(&mut self, src: NodeId, idx: NodeId, w: usize, k: usize) -> R<NodeId> {
        let flat = self.flat(src, w)?;
        let i = self.flat_index(idx, w, k)?;
        let got = self.g.get_rows(flat, i)?;
        self.g.reshape(got, &[k, self.n])
    }

    /// `tok` where `ok` (a `[1, n]` mask), else -1.
    fn fold_token(&mut self, tok: NodeId, ok: NodeId) -> R<NodeId> {
        let f = self.g.cast(tok, DType::F32)?;
        let neg = self.fill(&[1, 1], -1.0)?;
        let w = self.g.where_(ok, f, neg)?;
        self.g.cast(w, DType::I32)
    }

    /// `[1, n]`: the first entry of each column of `[k, n]` (the largest, in a sorted list).
    fn first_row(&mut self, src: NodeId) -> R<NodeId> {
        let nb1 = self.g.node(src).layout.nb[1];
        self.g.view(src, &[1, self.n], &[4, nb1], 0)
    }

    /// `x [k, n]` with the entries below `max - n sigma` masked (sigma over the finite entries,
    /// llama.cpp's `logit < threshold` test: a NaN threshold masks nothing). With `vocab` (`x` the
    /// contiguous `[n_vocab, n]` row) the sums are two-level ([`Ctx::row_sum`]).
    fn top_n_sigma(&mut self, idx: usize, x: NodeId, vocab: bool) -> R<NodeId> {
        let nn = self.input(&format!("s{idx}.n"), DType::F32, &[1, self.n], Param::Sigma(idx))?;
        let sum = |c: &mut Self, v: NodeId| if vocab { c.row_sum(v) } else { c.g.sum_rows(v) };
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let zero = self.fill(&[1, 1], 0.0)?;
        let finite = self.g.gt(x, ninf)?;
        let count = sum(self, finite)?;
        let xs = self.g.where_(finite, x, zero)?;
        let sum_x = sum(self, xs)?;
        let mean = self.g.div(sum_x, count)?;
        let dev = self.g.sub(xs, mean)?;
        let dev = self.g.mul(dev, finite)?;
        let sq = self.g.sqr(dev)?;
        let var = sum(self, sq)?;
        let var = self.g.div(var, count)?;
        let std = self.g.sqrt(var)?;
        let m = self.g.max_rows(x)?;
        let spread = self.g.mul(std, nn)?;
        let thr = self.g.sub(m, spread)?;
        let keep = self.g.ge(x, thr)?;
        let same = self.g.equal(thr, thr)?;
        let nan_thr = self.g.scale_bias(same, -1.0, 1.0)?;
        let keep = self.g.add(keep, nan_thr)?;
        let ninf2 = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        self.g.where_(keep, x, ninf2)
    }

    /// A draw of stage `idx` from the list values `vals [k, n]` on Philox stream `stream`: the
    /// position (clamped into `0..k`, for gathers) and a `[1, n]` mask of the rows where the draw
    /// was valid (`categorical` gives -1 for a bad row). For stages that read the drawn entry's
    /// other values back (mirostat's probability); a draw that needs only the token is
    /// [`Ctx::draw_token`].
    fn draw_position(&mut self, idx: usize, vals: NodeId, k: usize, stream: u64) -> R<(NodeId, NodeId)> {
        let keys = self.input("keys", DType::I32, &[4, self.n], Param::Keys(idx))?;
        let at = self.g.categorical(vals, keys, None, None, stream as u32)?;
        let pf = self.g.cast(at, DType::F32)?;
        let zero = self.fill(&[1, 1], 0.0)?;
        let valid = self.g.ge(pf, zero)?;
        let pc = self.g.clamp(pf, 0.0, (k - 1) as f32)?;
        Ok((self.g.cast(pc, DType::I32)?, valid))
    }

    /// The token a draw of stage `idx` picks from the list `ids`, `vals [k, n]` on Philox stream
    /// `stream`, -1 for a bad row: the draw's own result (`categorical` and, with `verify`,
    /// `spec_verify` of each row's draft token return the entry's id from the list's `ids`).
    fn draw_token(&mut self, idx: usize, ids: NodeId, vals: NodeId, stream: u64) -> R<NodeId> {
        let ids = if self.g.node(ids).layout.is_contiguous(DType::I32) { ids } else { self.g.cont(ids)? };
        if self.verify != Verify::No {
            self.verify_draw(idx, vals, graph::SpecAux::Ids(ids), stream as u32)
        } else {
            let keys = self.input("keys", DType::I32, &[4, self.n], Param::Keys(idx))?;
            self.g.categorical(vals, keys, None, Some(ids), stream as u32)
        }
    }

    /// The verifier's draw of `dist` stage `idx` on `x` (`aux`: the draw's params or the list's
    /// ids): `spec_verify` of each row's draft token, or with a draft distribution reserved
    /// ([`Verify::Sampled`]) `spec_verify_sampled` with the rows' `q`.
    fn verify_draw(&mut self, idx: usize, x: NodeId, aux: graph::SpecAux, stream: u32) -> R<NodeId> {
        let keys = self.input("keys", DType::I32, &[5, self.n], Param::VerifyKeys(idx))?;
        let Verify::Sampled(m) = self.verify else {
            return self.g.spec_verify(x, keys, aux, stream);
        };
        let qi = self.input("draft_q_ids", DType::I32, &[m, self.n], Param::DraftQIds)?;
        let qp = self.input("draft_q_probs", DType::F32, &[m, self.n], Param::DraftQProbs)?;
        self.g.spec_verify_sampled(x, keys, qi, qp, aux, stream)
    }

    /// The list sorted by value descending, ties in list order (which is id order for equal values:
    /// every stage keeps tied entries in the order it found them).
    fn sort_list(&mut self, ids: NodeId, vals: NodeId, init: NodeId, k: usize) -> R<Rec> {
        let vals = if self.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { self.g.cont(vals)? };
        let perm = self.g.argsort(vals, graph::SortOrder::Desc)?;
        let (ids, vals, init) =
            (self.gather(ids, perm, k, k)?, self.gather(vals, perm, k, k)?, self.gather(init, perm, k, k)?);
        Ok(Rec::List { ids, vals, k, init, sorted: true })
    }

    /// Locally typical sampling on a sorted list (llama.cpp's `typical`): the entropy `H` of the
    /// softmax, the entries ordered by `|-ln p - H|` (stable), and the shortest prefix of that order
    /// whose mass exceeds `p` (at least `min_keep`); returns the list in that order, the rest
    /// masked.
    fn typical(
        &mut self,
        idx: usize,
        ids: NodeId,
        vals: NodeId,
        init: NodeId,
        k: usize,
    ) -> R<(NodeId, NodeId, NodeId)> {
        let n = self.n;
        let pp = self.input(&format!("s{idx}.p"), DType::F32, &[1, n], Param::TypicalP(idx))?;
        let mk = self.input(&format!("s{idx}.neg_min_keep"), DType::F32, &[1, n], Param::TypicalNegMinKeep(idx))?;
        let vals = if self.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { self.g.cont(vals)? };
        let zero = self.fill(&[1, 1], 0.0)?;
        let (probs, lnp, neg_h) = self.softmax_entropy(vals)?;
        // |-ln p - H| = |ln p + H| = |ln p - (-H)|, the absolute value by a select (exact).
        let d = self.g.sub(lnp, neg_h)?;
        let nd = self.g.neg(d)?;
        let nonneg = self.g.ge(d, zero)?;
        let shifted = self.g.where_(nonneg, d, nd)?;
        let perm = self.g.argsort(shifted, graph::SortOrder::Asc)?;
        let p_perm = self.gather(probs, perm, k, k)?;
        let cum = self.g.cumsum(p_perm)?;
        let before = self.g.sub(cum, p_perm)?;
        let over = self.g.gt(before, pp)?;
        let pos = self.neg_positions(k)?;
        let within_mk = self.g.gt(pos, mk)?;
        let beyond_mk = self.g.scale_bias(within_mk, -1.0, 1.0)?;
        let drop = self.g.mul(over, beyond_mk)?;
        let (ids, v, init) =
            (self.gather(ids, perm, k, k)?, self.gather(vals, perm, k, k)?, self.gather(init, perm, k, k)?);
        let ninf = self.fill(&[k, n], f32::NEG_INFINITY)?;
        Ok((ids, self.g.where_(drop, ninf, v)?, init))
    }

    /// The mirostat samplers' draw of stage `idx` from their truncated sorted list `kept`, on the
    /// `MIROSTAT` stream; the drawn token's probability (for the CPU sampler's `mu` update) and
    /// the list it was drawn from are recorded for read-back.
    fn mirostat_draw(&mut self, idx: usize, ids: NodeId, kept: NodeId, k: usize, init: NodeId) -> R<Rec> {
        self.pre_select = Some(Rec::List { ids, vals: kept, k, init, sorted: true });
        let (pos, valid) = self.draw_position(idx, kept, k, graph::philox::stream::MIROSTAT)?;
        let p2 = self.g.soft_max(kept, None, 1.0)?;
        let p_sel = self.gather(p2, pos, k, 1)?;
        self.selected_p = Some((p_sel, idx));
        let tok = self.gather(ids, pos, k, 1)?;
        Ok(Rec::Token(self.fold_token(tok, valid)?))
    }

    /// Mirostat 1.0's truncation of the sorted list `vals [k, n]` (llama.cpp's
    /// `llama_sampler_mirostat_apply`, as the CPU sampler computes it): the Zipf exponent
    /// `s = sum t_i b_i / sum t_i^2` over the first `lim = min(m - 1, len - 1)` pairs, with
    /// `t_i = ln((i + 2) / (i + 1))` and `b_i = ln(p_i / p_{i+1})` of the list's softmax, then
    /// `k = (eps 2^mu / (1 - n_vocab^-eps))^(1/s)` with `eps = s - 1`; the first `k` entries
    /// (clamped into `[1, len]`, 1 for a NaN `k`) are kept, the rest masked. `len` counts the list
    /// as the CPU chain holds it (entries a stage removed are not in it). The powers are
    /// `exp(y ln x)`, so `k` can differ from the CPU's `powf` in its last bits, which matters only
    /// where `k` lands within that of an integer.
    fn mirostat_v1(&mut self, idx: usize, vals: NodeId, init: NodeId, k: usize) -> R<NodeId> {
        let n = self.n;
        let par = self.input(&format!("s{idx}.mirostat"), DType::F32, &[2, n], Param::Mirostat(idx))?;
        let row = |c: &mut Self, i: usize| c.g.view(par, &[1, n], &[4, 8], 4 * i);
        let (two_mu, neg_m_lim) = (row(self, 0)?, row(self, 1)?);
        let gone = self.removed(init, vals)?;
        let n_gone = self.g.sum_rows(gone)?;
        let len = self.g.scale_bias(n_gone, -1.0, k as f32)?;
        let probs = self.g.soft_max(vals, None, 1.0)?;
        // Pair i enters while i < m - 1 and i < len - 1: -i > 1 - len too.
        let neg_last = self.g.scale_bias(len, -1.0, 1.0)?;
        let kf = self.mirostat_k(probs, k, Some(neg_last), neg_m_lim, two_mu, len)?;
        // Position i is kept when i + 1 <= k (the CPU truncates k to an integer), or i = 0.
        let neg_pos1 = self.g.arange(DType::F32, &[k, n], -1.0, -1.0)?;
        let neg_k = self.g.scale(kf, -1.0)?;
        let within = self.g.ge(neg_pos1, neg_k)?;
        let pos = self.neg_positions(k)?;
        let neg_one = self.fill(&[1, 1], -1.0)?;
        let first = self.g.gt(pos, neg_one)?;
        let keep = self.g.add(within, first)?;
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        self.g.where_(keep, vals, ninf)
    }

    /// Mirostat (v1)'s `k` (`[1, n]` f32) from the probabilities `sorted [len_max, n]`, most probable
    /// first: the Zipf exponent `s` from the pairs `i` that enter (`i < m - 1`, that is
    /// `-i > neg_m_lim`; where `neg_last` is given also `-i > neg_last`), `b_i = ln(p_i / p_{i+1})`,
    /// `t_i = ln((i + 2) / (i + 1))`, `s = sum t_i b_i / sum t_i^2` (NaN without a pair, as on the
    /// CPU); then `k = (eps 2^mu / (1 - n_vocab^-eps))^(1/s)` with `eps = s - 1`, the powers as
    /// `exp(y ln x)` (`2^mu` comes from the host as the CPU sampler computes it), raised to 1 and
    /// lowered to `len`; a NaN `k` stays NaN (the callers keep the first token for it).
    fn mirostat_k(
        &mut self,
        sorted: NodeId,
        len_max: usize,
        neg_last: Option<NodeId>,
        neg_m_lim: NodeId,
        two_mu: NodeId,
        len: NodeId,
    ) -> R<NodeId> {
        let n = self.n;
        let zero = self.fill(&[1, 1], 0.0)?;
        let one = self.fill(&[1, n], 1.0)?;
        let s_hat = if len_max > 1 {
            let pairs = len_max - 1;
            let nb1 = self.g.node(sorted).layout.nb[1];
            let head = self.g.view(sorted, &[pairs, n], &[4, nb1], 0)?;
            let next = self.g.view(sorted, &[pairs, n], &[4, nb1], 4)?;
            let ratio = self.g.div(head, next)?;
            let b = self.g.log(ratio)?;
            let num = self.g.arange(DType::F32, &[pairs, n], 2.0, 1.0)?;
            let den = self.g.arange(DType::F32, &[pairs, n], 1.0, 1.0)?;
            let q = self.g.div(num, den)?;
            let t = self.g.log(q)?;
            let pos = self.g.arange(DType::F32, &[pairs, n], 0.0, -1.0)?;
            let mut used = self.g.gt(pos, neg_m_lim)?;
            if let Some(neg_last) = neg_last {
                let by_len = self.g.gt(pos, neg_last)?;
                used = self.g.mul(used, by_len)?;
            }
            let tb = self.g.mul(t, b)?;
            let tb = self.g.where_(used, tb, zero)?;
            let tt = self.g.sqr(t)?;
            let tt = self.g.where_(used, tt, zero)?;
            let sum_tb = self.g.sum_rows(tb)?;
            let sum_tt = self.g.sum_rows(tt)?;
            self.g.div(sum_tb, sum_tt)?
        } else {
            // No pair at all: s = 0 / 0, as on the CPU.
            self.fill(&[1, n], f32::NAN)?
        };
        let eps = self.g.scale_bias(s_hat, 1.0, -1.0)?;
        let ln_n = (self.n_vocab as f32).ln();
        let neg = self.g.scale(eps, -ln_n)?;
        let n_pow = self.g.exp(neg)?;
        let denom = self.g.scale_bias(n_pow, -1.0, 1.0)?;
        let numer = self.g.mul(eps, two_mu)?;
        let base = self.g.div(numer, denom)?;
        let ln_base = self.g.log(base)?;
        let inv_s = self.g.div(one, s_hat)?;
        let e = self.g.mul(ln_base, inv_s)?;
        let kf = self.g.exp(e)?;
        // max(k, 1), then min(k, len); NaN compares false everywhere and stays.
        let small = self.g.gt(one, kf)?;
        let kf = self.g.where_(small, one, kf)?;
        let big = self.g.gt(kf, len)?;
        self.g.where_(big, len, kf)
    }

    /// The softmax `p` of `vals [k, n]`, `ln p`, and `-H = sum p ln p` over `p > 0` (`[1, n]`).
    fn softmax_entropy(&mut self, vals: NodeId) -> R<(NodeId, NodeId, NodeId)> {
        let zero = self.fill(&[1, 1], 0.0)?;
        let probs = self.g.soft_max(vals, None, 1.0)?;
        let lnp = self.g.log(probs)?;
        let plnp = self.g.mul(probs, lnp)?;
        let positive = self.g.gt(probs, zero)?;
        let plnp = self.g.where_(positive, plnp, zero)?;
        Ok((probs, lnp, self.g.sum_rows(plnp)?))
    }

    /// `[k, n]` mask of the list entries a stage removed: finite in `init`, `-inf` in `vals`.
    fn removed(&mut self, init: NodeId, vals: NodeId) -> R<NodeId> {
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let was = self.g.gt(init, ninf)?;
        let now = self.g.equal(vals, ninf)?;
        self.g.mul(was, now)
    }

    /// `[k, n]` of `-i` for position `i`: compared with `-min_keep` (`-i > -min_keep` keeps `i`).
    fn neg_positions(&mut self, k: usize) -> R<NodeId> {
        self.g.arange(DType::F32, &[k, self.n], 0.0, -1.0)
    }

    /// Applies the pending transforms to the whole row (the min-p mask, then the temperature).
    fn materialize(&mut self, rec: Rec) -> R<Rec> {
        let Rec::Vocab { mut x, mut touched, pending, mut unmasked } = rec else { return Ok(rec) };
        if let Some((_, lnp)) = pending.min_p {
            unmasked = Some(unmasked.unwrap_or(x));
            let m = self.g.max_rows(x)?;
            let thr = self.g.add(m, lnp)?;
            let keep = self.g.ge(x, thr)?;
            let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
            x = self.g.where_(keep, x, ninf)?;
            touched = true;
        }
        if let Some((_, t)) = pending.temp {
            x = self.g.div(x, t)?;
            touched = true;
        }
        Ok(Rec::Vocab { x, touched, pending: Pending::default(), unmasked })
    }

    /// The run `keys` (prefix stages `idx..`, see [`list_run`]) as one `list_filter` node on the
    /// list `rec`, sorted first where its first stage needs the sorted order and the list is not.
    fn list_stages(&mut self, idx: usize, keys: &[StageKey], rec: Rec) -> R<(Rec, graph::ListStages)> {
        let Rec::List { ids, vals, k, init, sorted } = rec else { unreachable!("list_run runs on a list") };
        let (ids, vals, init, sorted) = if !sorted && matches!(keys[0], StageKey::TopP | StageKey::MinP) {
            match self.sort_list(ids, vals, init, k)? {
                Rec::List { ids, vals, init, .. } => (ids, vals, init, true),
                _ => unreachable!("sort_list gives a list"),
            }
        } else {
            (ids, vals, init, sorted)
        };
        let kinds: Vec<graph::ListStage> = keys
            .iter()
            .map(|key| match key {
                StageKey::TopP => graph::ListStage::TopP,
                StageKey::MinP => graph::ListStage::MinP,
                StageKey::Temp => graph::ListStage::Temp,
                other => unreachable!("list_run fuses only top_p, min_p and temp, not {other:?}"),
            })
            .collect();
        let stages = graph::ListStages::new(&kinds).expect("list_run takes 1 to ListStages::MAX stages");
        let params = self.input(
            &format!("s{idx}.list"),
            DType::F32,
            &[stages.param_rows(), self.n],
            Param::ListParams { first: idx, len: keys.len() },
        )?;
        let out = self.g.list_filter(vals, params, stages)?;
        Ok((Rec::List { ids, vals: out, k, init, sorted }, stages))
    }

    fn stage(&mut self, idx: usize, key: StageKey, rec: Rec) -> R<Rec> {
        let n = self.n;
        let nv = self.n_vocab;
        // Pending transforms a stage cannot fold in are applied first.
        let rec = match (key, rec) {
            (StageKey::Nothing | StageKey::Dist, r) => r,
            (StageKey::TopK(_), r @ Rec::Vocab { .. }) => r,
            // The argmax of the raw row is the argmax after a min-p cut (the maximum survives it).
            (StageKey::Greedy, Rec::Vocab { pending: Pending { temp: None, .. }, .. }) => rec,
            (StageKey::Temp, Rec::Vocab { pending: Pending { temp: None, .. }, .. }) => rec,
            (StageKey::MinP, Rec::Vocab { pending: Pending { temp: None, min_p: None }, .. }) => rec,
            // The mask takes a pending temperature as its `t` (a pending min-p cut is applied
            // first, below: top-p after a cut works on the masked row).
            (StageKey::Nucleus, Rec::Vocab { pending: Pending { min_p: None, .. }, .. }) => rec,
            (_, r @ Rec::Vocab { .. }) => self.materialize(r)?,
            // The CPU chain's stages that need the sorted order sort an unsorted list first.
            (
                StageKey::TopK(_)
                | StageKey::TopP
                | StageKey::MinP
                | StageKey::Xtc
                | StageKey::TopNSigma
                | StageKey::TempExt
                | StageKey::MirostatV2
                | StageKey::Mirostat
                | StageKey::Typical,
                Rec::List { ids, vals, k, init, sorted: false },
            ) => self.sort_list(ids, vals, init, k)?,
            (_, r) => r,
        };
        Ok(match (key, rec) {
            (StageKey::Nothing, r) => r,
            (_, Rec::Token(_)) => unreachable!("BackendStage::key ends the prefix at a token"),
            (StageKey::Greedy, Rec::Vocab { x, .. }) => {
                // `categorical` at zero temperature: the first maximum, -1 for a bad row, one pass.
                let keys = self.input("keys", DType::I32, &[4, n], Param::NoKeys)?;
                let greedy = self.input("greedy", DType::F32, &[2, n], Param::Greedy)?;
                Rec::Token(self.g.categorical(x, keys, Some(greedy), None, graph::philox::stream::DRAW as u32)?)
            }
            (StageKey::Greedy, Rec::List { ids, vals, sorted: true, .. }) => {
                // Sorted: the first candidate; its logit is NaN for a bad row.
                let first = self.first_row(ids)?;
                let v0 = self.first_row(vals)?;
                let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
                let ok = self.g.gt(v0, ninf)?;
                Rec::Token(self.fold_token(first, ok)?)
            }
            (StageKey::Greedy, Rec::List { ids, vals, k, sorted: false, .. }) => {
                // In list order, the first maximum (the CPU greedy's scan).
                let vals = if self.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { self.g.cont(vals)? };
                let at = self.g.argmax(vals)?;
                let m = self.gather(vals, at, k, 1)?;
                let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
                let ok = self.g.gt(m, ninf)?;
                let tok = self.gather(ids, at, k, 1)?;
                Rec::Token(self.fold_token(tok, ok)?)
            }
            (StageKey::Typical, Rec::List { ids, vals, k, init, .. }) => {
                let (ids, vals, init) = self.typical(idx, ids, vals, init, k)?;
                Rec::List { ids, vals, k, init, sorted: false }
            }
            (StageKey::Dist, Rec::Vocab { x, pending, unmasked, .. }) => {
                // A masked row (after a top-p mask) is drawn with a cut that removes no finite
                // value, so that `categorical` skips the blocks the mask left all -inf.
                let masked = unmasked.is_some();
                let params = match pending {
                    Pending { temp: None, min_p: None } if !masked => None,
                    Pending { temp, min_p } => Some(self.input(
                        "draw",
                        DType::F32,
                        &[2, n],
                        Param::DrawParams { temp: temp.map(|t| t.0), min_p: min_p.map(|m| m.0), masked },
                    )?),
                };
                let stream = graph::philox::stream::DRAW as u32;
                Rec::Token(if self.verify != Verify::No {
                    let aux = params.map_or(graph::SpecAux::None, graph::SpecAux::Params);
                    self.verify_draw(idx, x, aux, stream)?
                } else {
                    let keys = self.input("keys", DType::I32, &[4, n], Param::Keys(idx))?;
                    self.g.categorical(x, keys, params, None, stream)?
                })
            }
            (StageKey::Dist, Rec::List { ids, vals, .. }) => {
                let vals = if self.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { self.g.cont(vals)? };
                Rec::Token(self.draw_token(idx, ids, vals, graph::philox::stream::DRAW)?)
            }
            (StageKey::MirostatV2, Rec::List { ids, vals, k, init, .. }) => {
                // Sorted: the tokens of surprise -log2 p <= mu are a prefix (at least one); the draw
                // from their renormalised softmax on the MIROSTAT stream, and the drawn token's
                // probability read back for the mu update.
                let neg_mu = self.input(&format!("s{idx}.neg_mu"), DType::F32, &[1, n], Param::NegMu(idx))?;
                let vals = if self.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { self.g.cont(vals)? };
                let probs = self.g.soft_max(vals, None, 1.0)?;
                let lnp = self.g.log(probs)?;
                let neg_surprise = self.g.scale(lnp, std::f32::consts::LOG2_E)?;
                let within = self.g.ge(neg_surprise, neg_mu)?;
                let pos = self.neg_positions(k)?;
                let first = self.fill(&[1, 1], -1.0)?;
                let first = self.g.gt(pos, first)?;
                let keep = self.g.add(within, first)?;
                let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
                let kept = self.g.where_(keep, vals, ninf)?;
                self.mirostat_draw(idx, ids, kept, k, init)?
            }
            (StageKey::Mirostat, Rec::List { ids, vals, k, init, .. }) => {
                let vals = if self.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { self.g.cont(vals)? };
                let kept = self.mirostat_v1(idx, vals, init, k)?;
                self.mirostat_draw(idx, ids, kept, k, init)?
            }
            (StageKey::TopK(kk), Rec::Vocab { x, pending, unmasked, .. }) => {
                // On the raw row (as the CPU chain's top-k), then the pending transforms on k values.
                // The first value is the row's maximum, and a NaN or +inf anywhere in the row ranks
                // first (graph::Op::TopK), so it alone tells whether the row is usable.
                let ids = self.g.top_k(x, kk)?;
                let raw = self.gather(x, ids, nv, kk)?;
                // Entries a top-p mask removed are finite in the unmasked row: removed, not -inf
                // from the start (the CPU chain's list does not hold them).
                let init = match unmasked {
                    Some(u) => self.gather(u, ids, nv, kk)?,
                    None => raw,
                };
                let mut vals = raw;
                let m = self.first_row(vals)?;
                let ok = self.finite(m)?;
                let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
                if let Some((_, lnp)) = pending.min_p {
                    let thr = self.g.add(m, lnp)?;
                    let keep = self.g.ge(vals, thr)?;
                    vals = self.g.where_(keep, vals, ninf)?;
                }
                if let Some((_, t)) = pending.temp {
                    vals = self.g.div(vals, t)?;
                }
                let nan = self.fill(&[1, 1], f32::NAN)?;
                let vals = self.g.where_(ok, vals, nan)?;
                Rec::List { ids, vals, k: kk, init, sorted: true }
            }
            (StageKey::TopK(kk), Rec::List { ids, vals, k, init, .. }) => {
                if kk == k {
                    Rec::List { ids, vals, k, init, sorted: true }
                } else {
                    // Sorted (above): the first kk.
                    let first = |c: &mut Self, t: NodeId| c.g.view(t, &[kk, n], &[4, c.g.node(t).layout.nb[1]], 0);
                    let (ids, vals, init) = (first(self, ids)?, first(self, vals)?, first(self, init)?);
                    Rec::List { ids, vals, k: kk, init, sorted: true }
                }
            }
            (StageKey::Temp, Rec::Vocab { x, touched, pending, unmasked }) => {
                let t = self.input(&format!("s{idx}.t"), DType::F32, &[1, n], Param::Temp(idx))?;
                Rec::Vocab { x, touched, pending: Pending { temp: Some((idx, t)), ..pending }, unmasked }
            }
            (StageKey::Temp, Rec::List { ids, vals, k, init, sorted }) => {
                let t = self.input(&format!("s{idx}.t"), DType::F32, &[1, n], Param::Temp(idx))?;
                Rec::List { ids, vals: self.g.div(vals, t)?, k, init, sorted }
            }
            (StageKey::MinP, Rec::Vocab { x, touched, pending, unmasked }) => {
                let lnp = self.input(&format!("s{idx}.ln_p"), DType::F32, &[1, n], Param::LnP(idx))?;
                Rec::Vocab { x, touched, pending: Pending { min_p: Some((idx, lnp)), ..pending }, unmasked }
            }
            (StageKey::Nucleus, Rec::Vocab { x, pending, unmasked, .. }) => {
                // The nucleus in vocabulary order (the CPU sampler's own selection on the CPU
                // backend), the others -inf; the pending temperature is divided in.
                let params = self.input(
                    &format!("s{idx}.top_p"),
                    DType::F32,
                    &[3, n],
                    Param::Nucleus { stage: idx, temp: pending.temp.map(|t| t.0) },
                )?;
                let x = if self.g.node(x).layout.is_contiguous(DType::F32) { x } else { self.g.cont(x)? };
                let masked = self.g.top_p_mask(x, params)?;
                Rec::Vocab {
                    x: masked,
                    touched: true,
                    pending: Pending::default(),
                    unmasked: Some(unmasked.unwrap_or(x)),
                }
            }
            (StageKey::MinP, Rec::List { ids, vals, k, init, .. }) => {
                let lnp = self.input(&format!("s{idx}.ln_p"), DType::F32, &[1, n], Param::LnP(idx))?;
                let mk = self.input(&format!("s{idx}.neg_min_keep"), DType::F32, &[1, n], Param::NegMinKeep(idx))?;
                let m = self.first_row(vals)?;
                let thr = self.g.add(m, lnp)?;
                let pass = self.g.ge(vals, thr)?;
                let pos = self.neg_positions(k)?;
                let first = self.g.gt(pos, mk)?;
                let keep = self.g.add(pass, first)?;
                let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
                Rec::List { ids, vals: self.g.where_(keep, vals, ninf)?, k, init, sorted: true }
            }
            (StageKey::TopP, Rec::List { ids, vals, k, init, .. }) => {
                let p = self.input(&format!("s{idx}.p"), DType::F32, &[1, n], Param::TopP(idx))?;
                let mk = self.input(&format!("s{idx}.neg_min_keep"), DType::F32, &[1, n], Param::NegMinKeep(idx))?;
                let probs = self.g.soft_max(vals, None, 1.0)?;
                let cum = self.g.cumsum(probs)?;
                let before = self.g.sub(cum, probs)?;
                let drop = self.g.ge(before, p)?;
                let ninf = self.fill(&[k, n], f32::NEG_INFINITY)?;
                let cut = self.g.where_(drop, ninf, vals)?;
                let pos = self.neg_positions(k)?;
                let first = self.g.gt(pos, mk)?;
                Rec::List { ids, vals: self.g.where_(first, vals, cut)?, k, init, sorted: true }
            }
            (StageKey::LogitBias(m), Rec::Vocab { x, unmasked, .. }) => {
                let ids = self.input(&format!("s{idx}.bias_ids"), DType::I32, &[m, n], Param::BiasIds(idx))?;
                let vals = self.input(&format!("s{idx}.bias"), DType::F32, &[m, n], Param::BiasValues(idx))?;
                // After a cut the unmasked row gets the biases too: a -inf bias makes an entry
                // the CPU chain still holds -inf, which must not look removed.
                let unmasked = match unmasked {
                    Some(u) => Some(self.g.scatter_add(u, ids, vals)?),
                    None => None,
                };
                Rec::Vocab {
                    x: self.g.scatter_add(x, ids, vals)?,
                    touched: true,
                    pending: Pending::default(),
                    unmasked,
                }
            }
            (StageKey::Penalties(m), Rec::Vocab { x, unmasked, .. }) => {
                // The window's tokens' logits are gathered, penalised as the CPU sampler does,
                // and written into a copy of the row (the logits themselves stay as they are).
                let ids = self.input(&format!("s{idx}.pen_ids"), DType::I32, &[m, n], Param::PenaltyIds(idx))?;
                let rep = self.input(&format!("s{idx}.pen_repeat"), DType::F32, &[m, n], Param::PenaltyRepeat(idx))?;
                let sub = self.input(&format!("s{idx}.pen_sub"), DType::F32, &[m, n], Param::PenaltySub(idx))?;
                let v = self.gather(x, ids, nv, m)?;
                let zero = self.fill(&[1, 1], 0.0)?;
                let positive = self.g.gt(v, zero)?;
                let down = self.g.div(v, rep)?;
                let up = self.g.mul(v, rep)?;
                let scaled = self.g.where_(positive, down, up)?;
                let pen = self.g.sub(scaled, sub)?;
                let copy = self.g.cont(x)?;
                let flat = self.g.reshape(copy, &[1, nv * n])?;
                let at = self.flat_index(ids, nv, m)?;
                let vals = self.g.reshape(pen, &[1, m * n])?;
                let written = self.g.set_rows(flat, vals, at)?;
                // Penalties keep finite values finite: the unmasked row stays as it was.
                Rec::Vocab {
                    x: self.g.reshape(written, &[nv, n])?,
                    touched: true,
                    pending: Pending::default(),
                    unmasked,
                }
            }
            (StageKey::PenaltiesHistory, Rec::Vocab { x, unmasked, .. }) => {
                // One pass (`graph::Op::Penalize`, the CPU sampler's f32 arithmetic) where a
                // token's count is positive. Penalties keep finite values finite: the unmasked row
                // stays as it was.
                let c = self.penalty_counts(idx)?;
                let par = self.input(&format!("s{idx}.penalties"), DType::F32, &[3, n], Param::Penalties(idx))?;
                Rec::Vocab { x: self.g.penalize(x, c, par)?, touched: true, pending: Pending::default(), unmasked }
            }
            (StageKey::Xtc, Rec::List { ids, vals, k, init, .. }) => {
                // Sorted, so the tokens with p >= t are a prefix of `cnt`; all but the last of it
                // go, if the step's coin says so, `cnt > 1` and `len - (cnt - 1) >= min_keep`.
                let par = self.input(&format!("s{idx}.xtc"), DType::F32, &[4, n], Param::Xtc(idx))?;
                let row = |c: &mut Self, i: usize| c.g.view(par, &[1, n], &[4, 16], 4 * i);
                let (t, neg_mk, flag) = (row(self, 0)?, row(self, 1)?, row(self, 2)?);
                let probs = self.g.soft_max(vals, None, 1.0)?;
                let big = self.g.ge(probs, t)?;
                let cnt = self.g.sum_rows(big)?;
                let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
                let alive = self.g.gt(vals, ninf)?;
                let len = self.g.sum_rows(alive)?;
                let last = self.g.scale_bias(cnt, 1.0, -1.0)?;
                // len - last >= min_keep  <=>  last - len <= -min_keep  <=>  -min_keep >= last - len
                let d = self.g.sub(last, len)?;
                let room = self.g.ge(neg_mk, d)?;
                let zero = self.fill(&[1, 1], 0.0)?;
                let several = self.g.gt(last, zero)?;
                let on = self.g.mul(room, several)?;
                let on = self.g.mul(on, flag)?;
                // Position i < last  <=>  -i > -last.
                let neg_last = self.g.scale(last, -1.0)?;
                let pos = self.neg_positions(k)?;
                let before = self.g.gt(pos, neg_last)?;
                let drop = self.g.mul(before, on)?;
                let ninf_full = self.fill(&[k, n], f32::NEG_INFINITY)?;
                Rec::List { ids, vals: self.g.where_(drop, ninf_full, vals)?, k, init, sorted: true }
            }
            (StageKey::TempExt, Rec::List { ids, vals, k, init, .. }) => {
                // The entropy of the softmax over the finite candidates against ln(len), the
                // dynamic temperature, then as temp: t <= 0 keeps the first (largest) only; with one
                // candidate or none the stage does nothing (t = 1).
                let par = self.input(&format!("s{idx}.temp_ext"), DType::F32, &[4, n], Param::TempExt(idx))?;
                let row = |c: &mut Self, i: usize| c.g.view(par, &[1, n], &[4, 16], 4 * i);
                let (min_t, range, expo, expo0) = (row(self, 0)?, row(self, 1)?, row(self, 2)?, row(self, 3)?);
                let vals = if self.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { self.g.cont(vals)? };
                let zero = self.fill(&[1, 1], 0.0)?;
                let one = self.fill(&[1, n], 1.0)?;
                // The CPU chain's count: its list still holds entries that were -inf from the
                // start, but not those a stage removed.
                let gone = self.removed(init, vals)?;
                let n_gone = self.g.sum_rows(gone)?;
                let len = self.g.scale_bias(n_gone, -1.0, k as f32)?;
                let (_, _, neg_h) = self.softmax_entropy(vals)?;
                let h = self.g.scale(neg_h, -1.0)?;
                let inv_len = self.g.div(one, len)?;
                let ln_inv = self.g.log(inv_len)?;
                let max_h = self.g.scale(ln_inv, -1.0)?;
                let norm = self.g.div(h, max_h)?;
                let dyn_t = self.dynamic_temp(norm, [min_t, range, expo, expo0])?;
                let several = self.g.gt(len, one)?;
                let t = self.g.where_(several, dyn_t, one)?;
                // t <= 0: the first only, undivided.
                let warm = self.g.gt(t, zero)?;
                let cold = self.g.scale_bias(warm, -1.0, 1.0)?;
                let t = self.g.where_(cold, one, t)?;
                let pos = self.neg_positions(k)?;
                let neg_one = self.fill(&[1, 1], -1.0)?;
                let first = self.g.gt(pos, neg_one)?;
                let not_first = self.g.scale_bias(first, -1.0, 1.0)?;
                let drop = self.g.mul(not_first, cold)?;
                let ninf_full = self.fill(&[k, n], f32::NEG_INFINITY)?;
                let vals = self.g.where_(drop, ninf_full, vals)?;
                Rec::List { ids, vals: self.g.div(vals, t)?, k, init, sorted: true }
            }
            (StageKey::TopNSigma, Rec::List { ids, vals, k, init, .. }) => {
                Rec::List { ids, vals: self.top_n_sigma(idx, vals, false)?, k, init, sorted: true }
            }
            (StageKey::MirostatV2Vocab, Rec::Vocab { x, .. }) => self.vocab_mirostat_v2(idx, x)?,
            (StageKey::MinPKeep(k), Rec::Vocab { x, unmasked, .. }) => self.vocab_min_p_keep(idx, x, unmasked, k)?,
            (StageKey::TopNSigmaVocab, Rec::Vocab { x, unmasked, .. }) => self.vocab_top_n_sigma(idx, x, unmasked)?,
            (StageKey::XtcVocab, Rec::Vocab { x, unmasked, .. }) => self.vocab_xtc(idx, x, unmasked, false)?,
            (StageKey::TopP, Rec::Vocab { .. })
            | (StageKey::Nucleus, Rec::List { .. })
            | (StageKey::MirostatV2, Rec::Vocab { .. })
            | (StageKey::Mirostat, Rec::Vocab { .. })
            | (StageKey::Xtc, Rec::Vocab { .. })
            | (StageKey::TopNSigma, Rec::Vocab { .. })
            | (StageKey::TempExt, Rec::Vocab { .. })
            | (StageKey::Typical, Rec::Vocab { .. })
            | (StageKey::LogitBias(_), Rec::List { .. })
            | (StageKey::Penalties(_) | StageKey::PenaltiesHistory, Rec::List { .. })
            | (
                StageKey::MirostatV2Vocab | StageKey::MinPKeep(_) | StageKey::TopNSigmaVocab | StageKey::XtcVocab,
                Rec::List { .. },
            ) => {
                unreachable!("BackendStage::key has no backend form for {key:?} on {rec:?}")
            }
            (StageKey::TempExtVocab, Rec::Vocab { x, unmasked, .. }) => Rec::Vocab {
                x: self.temp_ext_vocab(idx, x, false)?,
                touched: true,
                pending: Pending::default(),
                unmasked,
            },
            (StageKey::TempExtMasked, Rec::Vocab { x, unmasked, .. }) => Rec::Vocab {
                x: self.temp_ext_vocab(idx, x, true)?,
                touched: true,
                pending: Pending::default(),
                unmasked,
            },
            (StageKey::XtcMasked, Rec::Vocab { x, unmasked, .. }) => self.vocab_xtc(idx, x, unmasked, true)?,
            (StageKey::MirostatVocab(m), Rec::Vocab { x, .. }) => self.mirostat_vocab(idx, x, m, false)?,
            (StageKey::MirostatMasked(m), Rec::Vocab { x, .. }) => self.mirostat_vocab(idx, x, m, true)?,
            (StageKey::TypicalVocab, Rec::Vocab { x, unmasked, .. }) => {
                let x = if self.g.node(x).layout.is_contiguous(DType::F32) { x } else { self.g.cont(x)? };
                let kept = self.typical_vocab(idx, x)?;
                Rec::Vocab {
                    x: kept,
                    touched: true,
                    pending: Pending::default(),
                    unmasked: Some(unmasked.unwrap_or(x)),
                }
            }
            (
                StageKey::TempExtVocab
                | StageKey::MirostatVocab(_)
                | StageKey::TypicalVocab
                | StageKey::TempExtMasked
                | StageKey::XtcMasked
                | StageKey::MirostatMasked(_),
                Rec::List { .. },
            ) => {
                unreachable!("BackendStage::key gives {key:?} only on the vocabulary, not on {rec:?}")
            }
        })
    }
}

/// Whether a group's `dist` verifies drafts, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verify {
    /// A plain draw (`graph::Op::Categorical`).
    No,
    /// Each row's one-hot draft token (`graph::Op::SpecVerify`).
    OneHot,
    /// Each row's draft token with its distribution, this many `(token, probability)` pairs
    /// (`graph::Op::SpecVerifySampled`; a one-hot draft is a one-pair `q`).
    Sampled(usize),
}

/// Who a group's columns are and how its draws verify drafts.
#[derive(Debug, Clone)]
pub struct Columns<'a> {
    /// Each column's sequence (its penalty counts are that sequence's state tensors).
    pub seqs: &'a [u32],
    /// How `dist` draws.
    pub verify: Verify,
    /// The most outputs a sequence has per step (a drafted output's penalty counts are
    /// corrected by [`penalty_draft_len`] entries).
    pub max_outputs: usize,
}

/// How many of `keys` (from the first) one `list_filter` node applies to the record `rec`: a run
/// of top-p, min-p and temp stages on a list of at most `graph::ListStages::MAX_LEN` entries, at
/// most `graph::ListStages::MAX` stages; on an unsorted list (after typical) top-p and min-p sort
/// it first, as the CPU chain's do, so a run that starts with a temperature ends before them. 0: no
/// run starts here.
fn list_run(keys: &[StageKey], rec: &Rec) -> usize {
    let Rec::List { k, mut sorted, .. } = *rec else { return 0 };
    if k > graph::ListStages::MAX_LEN {
        return 0;
    }
    let mut n = 0;
    for key in keys.iter().take(graph::ListStages::MAX) {
        match key {
            StageKey::Temp => {}
            // A first top-p or min-p sorts the list (`Ctx::list_stages`); it stays sorted.
            StageKey::TopP | StageKey::MinP if sorted || n == 0 => sorted = true,
            _ => break,
        }
        n += 1;
    }
    n
}

/// What a group asks to read besides its prefix's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Extras {
    /// Also read the candidates before the selecting stage.
    pub candidates: bool,
    /// Read the log-probabilities of this many most likely tokens (of the raw logits).
    pub logprobs: usize,
    /// Read the raw logits rows.
    pub logits: bool,
}

/// Appends a group's prefix to `g` on the record `x [n_vocab, n]` (f32, contiguous rows); `prefix`
/// names its inputs. `x_is_logits`: `x` addresses the logits node's rows unchanged.
pub fn build(
    g: &mut Graph,
    x: NodeId,
    x_is_logits: bool,
    keys: &[StageKey],
    extras: Extras,
    prefix: &str,
    cols: &Columns<'_>,
) -> R<Built> {
    let first = g.len();
    let [n_vocab, n, ..] = g.node(x).ne();
    assert_eq!(cols.seqs.len(), n, "one sequence per column");
    let mut c = Ctx {
        g,
        n_vocab,
        n,
        prefix: prefix.to_string(),
        inputs: Vec::new(),
        selected_p: None,
        pre_select: None,
        verify: cols.verify,
        fills: Vec::new(),
        col_seqs: cols.seqs.to_vec(),
        max_outputs: cols.max_outputs,
        counts: Vec::new(),
    };
    let mut rec = Rec::Vocab { x, touched: false, pending: Pending::default(), unmasked: None };
    let mut before_select = rec;
    let mut i = 0;
    while i < keys.len() {
        let incoming = rec;
        // A run of top-p, min-p and temp stages on a list is one `list_filter` node.
        let run = list_run(&keys[i..], &rec);
        let name = if run > 0 {
            let (r, stages) = c.list_stages(i, &keys[i..i + run], rec)?;
            rec = r;
            stages.to_string()
        } else {
            rec = c.stage(i, keys[i], rec)?;
            keys[i].name().to_string()
        };
        if matches!(rec, Rec::Token(_)) {
            // What the selecting stage chose from: its own survivors (mirostat's truncation), or
            // the record it received.
            before_select = c.pre_select.take().unwrap_or(incoming);
        }
        // The node that ends the stage carries its name in dumps and plans.
        let last = match rec {
            Rec::Vocab { x, .. } => x,
            Rec::List { vals, .. } => vals,
            Rec::Token(t) => t,
        };
        if last.index() >= first && c.g.node(last).name.is_none() {
            c.g.set_name(last, format!("{prefix}.s{i}.{name}"));
        }
        i += run.max(1);
    }
    if !matches!(rec, Rec::Token(_)) {
        before_select = rec;
    }
    let mut out = Outputs::default();
    let want_record = extras.candidates || !matches!(rec, Rec::Token(_));
    // A vocabulary read back carries its pending transforms applied.
    let before_select = if want_record { c.materialize(before_select)? } else { before_select };
    let name = |g: &mut Graph, id: NodeId, what: &str| {
        if g.node(id).name.is_none() || what == "token" {
            g.set_name(id, format!("{prefix}.{what}"));
        }
        g.set_output(id)
    };
    if let Rec::Token(t) = rec {
        out.token = Some(name(c.g, t, "token"));
    }
    if want_record {
        match before_select {
            Rec::Vocab { touched: false, .. } if x_is_logits => out.vocab_is_logits = true,
            Rec::Vocab { x: v, .. } => {
                let v = if c.g.node(v).op.is_view() { c.g.cont(v)? } else { v };
                out.vocab = Some(name(c.g, v, "vocab"));
            }
            Rec::List { ids, vals, init, .. } => {
                // Entries a stage removed read back with id -1 (the CPU chain no longer holds
                // them); entries -inf from the start keep their id (it still does).
                let gone = c.removed(init, vals)?;
                let idf = c.g.cast(ids, DType::F32)?;
                let minus = c.fill(&[1, 1], -1.0)?;
                let kept = c.g.scale_bias(gone, -1.0, 1.0)?;
                let idf = c.g.where_(kept, idf, minus)?;
                let ids = c.g.cast(idf, DType::I32)?;
                let vals = if c.g.node(vals).op.is_view() { c.g.cont(vals)? } else { vals };
                out.list = Some((name(c.g, ids, "ids"), name(c.g, vals, "logits")));
            }
            Rec::Token(_) => unreachable!("the record before a selection is not a token"),
        }
    }
    if extras.logits && !out.vocab_is_logits {
        if x_is_logits {
            out.raw_logits = true;
        } else if out.vocab != Some(x) {
            out.raw = Some(name(c.g, x, "raw"));
        }
    }
    if extras.logprobs > 0 {
        let nl = extras.logprobs.min(n_vocab);
        let ids = c.g.top_k(x, nl)?;
        let probs = c.g.soft_max(x, None, 1.0)?;
        let p = c.gather(probs, ids, n_vocab, nl)?;
        let lp = c.g.log(p)?;
        out.logprobs = Some((name(c.g, ids, "logprob_ids"), name(c.g, lp, "logprobs")));
    }
    if let Some((p, i)) = c.selected_p {
        out.selected_p = Some((name(c.g, p, "selected_p"), i));
    }
    let inputs = std::mem::take(&mut c.inputs);
    let counts = std::mem::take(&mut c.counts);
    let nodes = (first..g.len()).map(|i| NodeId(i as u32)).collect();
    Ok(Built { inputs, counts, outputs: out, nodes })
}

#[path = "vocab_select.rs"]
pub(super) mod vocab_select;
