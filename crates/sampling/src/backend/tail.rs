//! [`Tail`]: the sampling subgraphs appended after a graph's logits, and each step's work around
//! them: writing their inputs (and the changed elements of the penalty count state tensors),
//! reading back what was reserved, finishing rows on the CPU, and accepting tokens.
//!
//! # Attaching
//!
//! For every output row, its sequence's chain gives the structure of its longest prefix with a
//! backend form ([`super::BackendStage::key`]). Rows with equal structure and equal extras form a
//! group with one subgraph over `[n_vocab, n]` (a view of the logits when the rows are contiguous,
//! else gathered). Each group is then built once on a scratch graph of the real row width and
//! checked with the backend's own `supports`; where a node is unsupported the prefix is shortened
//! stage by stage until it is (never a silent fallback: [`Tail::placement`] says `+name` for a
//! stage on the backend and `-name` for one on the CPU, as llama.cpp prints it).
//!
//! # Output reservation
//!
//! Per row, only what its configuration needs is read back: 4 bytes of token for a prefix that
//! selects; `8k` bytes of candidates for a prefix ending in a `k`-list (or asked for); the logits
//! row (`4 n_vocab` bytes) only for a row whose prefix keeps the vocabulary; `8n` bytes for `n`
//! log-probabilities, 4 for the selected token's own (exact wherever the token ranks) and 4 for
//! its rank; the raw
//! row where asked for; 4 bytes of the drawn token's probability for a stateful selecting stage
//! (mirostat_v2). [`Tail::reserved_bytes`] is that total, and a step's
//! [`StepOutput::bytes_read`] (the scheduler's own count) equals it, but for a row with
//! log-probabilities whose token the host chose (a CPU suffix, an optimistic grammar's second
//! run): it reads the row's logits after (`4 n_vocab` bytes) and its max and ln-sum (8), for the
//! token's rank and log-probability; and for a row an optimistic grammar sent to a second run
//! (below): what that run reserves, 4 bytes of token (16 more with log-probabilities, the
//! candidates where asked for).
//!
//! # Optimistic grammars: the second step
//!
//! A deferred stage (an optimistic grammar) appends nothing: the host checks the token the step
//! chose. The rows whose token it rejects run their chain again, every deferred stage masking as
//! in grammar-first mode, in a second, smaller step on the same backend: a side tail (a `Tail` in
//! *masking* mode over only those rows, [`crate::backend::BackendStage::masking_key`]) on a graph
//! of its own whose logits leaf is linked to the step's logits (`sched::Scheduler::plan_side`:
//! read where the step left them, never copied through the host). Its mask is uploaded packed
//! and it reads back 4 bytes of token per row (a row with log-probabilities 16 more: its new
//! token's own log-probability and rank, and the top one's). Side tails are cached per set of
//! rejected rows ([`SIDES`]), their plans in the scheduler by topology.

use super::group::{self, Built, Columns, Extras, Stage, Verify};
use super::lower::{row_ids_field, token_values};
use super::output::{RowOutput, RowResult, StepOutput};
use super::seqs::{SeqId, Sequences};
use super::stage::{Form, Out, Row, StageKey};
use crate::candidates::{Candidates, TokenData};
use crate::error::{Result, SamplingError};
use crate::sampler::Token;
use graph::{DType, Graph, NodeId};
use sched::{Backend, Scheduler};
use std::collections::{BTreeMap, HashMap};

/// Largest `n_vocab * n` of one group: flat indices into a group are carried through f32.
const MAX_FLAT: usize = 1 << 24;

/// Side tails (second steps of optimistic grammars) kept per tail, one per set of rejected rows;
/// the least recently used one leaves first.
pub const SIDES: usize = 8;

/// Rows per group of a prefix with a vocabulary-sized intermediate (a top-p mask): eight 152k rows
/// and their masks (about 10 MB) stay in a CPU's last-level cache between the mask and the draw.
const MASK_BLOCK: usize = 8;

fn engine(context: &'static str) -> impl Fn(&dyn std::fmt::Display) -> SamplingError {
    move |e| SamplingError::Engine { context, message: e.to_string() }
}

#[derive(Debug, Clone)]
struct Group {
    keys: Vec<(StageKey, Form)>,
    extras: Extras,
    form: Form,
    rows: Vec<usize>,
    built: Built,
    /// Whether its mask stages fuse into the next stage (the backend runs the fused form).
    fuse: bool,
}

#[derive(Debug, Clone)]
struct SeqPlan {
    prefix: usize,
    keys: Vec<(StageKey, Form)>,
    extras: Extras,
    rows: Vec<usize>,
    placement: String,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    seq: SeqId,
    output: usize,
    group: usize,
    col: usize,
}

/// What one group read back (besides a vocabulary-sized read, used where it lies).
struct GroupRead<'a> {
    tokens: Option<Vec<i32>>,
    list: Option<(Vec<i32>, Vec<f32>)>,
    raw: Option<&'a [f32]>,
    lps: Option<(Vec<i32>, Vec<f32>)>,
    /// The selected tokens, their gathered log-probabilities and the counts of raw logits above
    /// theirs.
    token_lp: Option<(Vec<i32>, Vec<f32>, Vec<f32>)>,
    sel_p: Option<Vec<f32>>,
}

/// The second step of the rows (slots) an optimistic grammar rejected: a graph of its own whose
/// `link` leaf stands for the logits, and the tail in masking mode over those rows.
#[derive(Debug, Clone)]
struct Side {
    slots: Vec<usize>,
    graph: Graph,
    link: NodeId,
    tail: Box<Tail>,
    used: u64,
}

/// The appended sampling subgraphs of one graph and how to use them each step.
#[derive(Debug, Clone)]
pub struct Tail {
    n_vocab: usize,
    logits: NodeId,
    /// The logits' dtype and row count (a side tail's linked leaf has them).
    logits_dtype: DType,
    n_rows: usize,
    /// The backend the logits live on, by name (a side tail is checked on it).
    backend: String,
    /// A side tail: every deferred stage masks, and the CPU suffix runs every stage.
    masking: bool,
    /// The side tails built so far, and a use counter for their eviction.
    sides: Vec<Side>,
    clock: u64,
    slots: Vec<Slot>,
    groups: Vec<Group>,
    seqs: BTreeMap<SeqId, SeqPlan>,
    vocab_buf: Vec<f32>,
    raw_buf: Vec<f32>,
    /// The draft distribution entries per output row (`Sequences::draft_q_len`, 0 in a tail
    /// without verification).
    q_len: usize,
}

/// The length of the candidate list a prefix reads back (its last list's).
fn list_len(keys: &[(StageKey, Form)]) -> usize {
    keys.iter().rev().find_map(|(_, f)| if let Form::List(k) = f { Some(*k) } else { None }).unwrap_or(0)
}

/// The form a prefix leaves.
fn final_form(keys: &[(StageKey, Form)]) -> Form {
    keys.last().map_or(Form::Vocab, |k| k.1)
}

/// The backend forms of the first `keys.len()` stages of `chain` (the group's first row's), with
/// their keys: what the group driver lowers.
fn stages_of<'c>(chain: &'c crate::Chain, keys: &[(StageKey, Form)], seq: SeqId) -> Result<Vec<Stage<'c>>> {
    chain
        .stages()
        .iter()
        .zip(keys)
        .map(|(s, &(k, _))| {
            s.backend().map(|b| (b, k)).ok_or_else(|| SamplingError::StaleTail {
                what: format!("{seq}'s stage {} has no backend form any more", s.name()),
            })
        })
        .collect()
}

/// Each sequence's logits rows, in output order.
type RowsOf = BTreeMap<SeqId, Vec<usize>>;

/// What [`Tail::attach`] works with: the logits, the registry, the backend and how draws verify.
struct Attach<'a> {
    logits: NodeId,
    n_vocab: usize,
    seqs: &'a Sequences,
    backend: &'a dyn Backend,
    verify: Verify,
    masking: bool,
}

impl Attach<'_> {
    /// The logits' `[n_vocab, n_rows]`, checked.
    fn logits_shape(g: &Graph, logits: NodeId) -> Result<(usize, usize)> {
        let ln = g.get(logits).ok_or(SamplingError::InvalidConfig {
            what: format!("logits node {logits}"),
            reason: "is not a node of the graph",
        })?;
        let [n_vocab, n_rows, n2, n3] = ln.ne();
        if n2 * n3 != 1 || !ln.dtype.is_float() {
            return Err(SamplingError::InvalidConfig {
                what: format!("logits {}", g.describe(logits)),
                reason: "must be a float [n_vocab, n_rows] tensor",
            });
        }
        Ok((n_vocab, n_rows))
    }

    /// One slot per output row (rows inside the logits and listed once, sequences known, at most
    /// `max_outputs` a sequence), and each sequence's rows in order. A row's output index is its
    /// place among its sequence's rows, or `outputs[i]` where given (a side tail's rows).
    fn slots(&self, rows: &[(SeqId, usize)], outputs: Option<&[usize]>, n_rows: usize) -> Result<(Vec<Slot>, RowsOf)> {
        let mut slots = Vec::with_capacity(rows.len());
        let mut per_seq: BTreeMap<SeqId, Vec<usize>> = BTreeMap::new();
        let mut used = vec![false; n_rows];
        for (i, &(seq, row)) in rows.iter().enumerate() {
            if row >= n_rows || std::mem::replace(&mut used[row], true) {
                return Err(SamplingError::InvalidConfig {
                    what: format!("output row {row} of {seq}"),
                    reason: "is outside the logits or listed twice",
                });
            }
            self.seqs.state(seq)?;
            let outs = per_seq.entry(seq).or_default();
            outs.push(row);
            let max = self.seqs.max_outputs();
            if outs.len() > max {
                return Err(SamplingError::TooManyOutputs { seq: seq.0, n: outs.len(), max });
            }
            let output = outputs.map_or(outs.len() - 1, |o| o[i]);
            slots.push(Slot { seq, output, group: 0, col: 0 });
        }
        Ok((slots, per_seq))
    }

    /// Each sequence's wanted structure (before the capability check).
    fn plans(&self, per_seq: &RowsOf) -> Result<BTreeMap<SeqId, SeqPlan>> {
        let mut plans = BTreeMap::new();
        for (&seq, rs) in per_seq {
            let cfg = &self.seqs.state(seq)?.cfg;
            let keys = cfg.wanted_prefix(self.n_vocab, self.masking);
            let extras = cfg.extras(self.masking);
            let plan = SeqPlan { prefix: keys.len(), keys, extras, rows: rs.clone(), placement: String::new() };
            plans.insert(seq, plan);
        }
        Ok(plans)
    }

    /// Groups of rows with equal structure and extras, in row order, at most `MAX_FLAT / n_vocab`
    /// rows (flat indices go through f32), or `MASK_BLOCK` for a prefix that writes a masked
    /// vocabulary (so that the masked rows are still in cache when the draw reads them); each
    /// slot learns its group and column.
    fn groups(&self, rows: &[(SeqId, usize)], plans: &BTreeMap<SeqId, SeqPlan>, slots: &mut [Slot]) -> Vec<Group> {
        let flat_cap = (MAX_FLAT / self.n_vocab).max(1);
        let mut groups: Vec<Group> = Vec::new();
        for (i, &(seq, row)) in rows.iter().enumerate() {
            let p = &plans[&seq];
            let cap = if p.keys.iter().any(|k| k.0.writes_vocab_mask()) { flat_cap.min(MASK_BLOCK) } else { flat_cap };
            let fits = |gr: &Group| gr.keys == p.keys && gr.extras == p.extras && gr.rows.len() < cap;
            let gi = groups.iter().position(fits).unwrap_or_else(|| {
                groups.push(Group {
                    keys: p.keys.clone(),
                    extras: p.extras,
                    form: Form::Vocab,
                    rows: Vec::new(),
                    built: Built::default(),
                    fuse: false,
                });
                groups.len() - 1
            });
            slots[i].group = gi;
            slots[i].col = groups[gi].rows.len();
            groups[gi].rows.push(row);
        }
        groups
    }

    /// Group `gi`'s column sequences, and the backend forms of its stages (its first row's
    /// sampler lowers the group: equal keys append equal ops).
    fn columns<'s>(&'s self, slots: &[Slot], gi: usize, gr: &Group) -> Result<(Vec<u32>, Vec<Stage<'s>>)> {
        let mut v = vec![0u32; gr.rows.len()];
        for sl in slots.iter().filter(|s| s.group == gi) {
            v[sl.col] = sl.seq.0;
        }
        let first = slots.iter().find(|s| s.group == gi).map_or(SeqId(0), |s| s.seq);
        let stages = stages_of(&self.seqs.state(first)?.cfg.chain, &gr.keys, first)?;
        Ok((v, stages))
    }

    /// The capability check: shortens group `gi`'s prefix to the longest the backend runs at its
    /// width, built on a scratch graph and checked node by node with the backend's own
    /// `supports` (never a silent fallback: the placement says where each stage ran). At each
    /// length the fused forms (a grammar's mask read through by the next stage) are tried first,
    /// then the stages apart.
    fn probe(&self, slots: &[Slot], gi: usize, gr: &mut Group) -> Result<()> {
        let n = gr.rows.len();
        let (seqs_of, stages) = self.columns(slots, gi, gr)?;
        let mut len = gr.keys.len();
        'shorten: loop {
            for fuse in [true, false] {
                let cols = Columns { seqs: &seqs_of, verify: self.verify, max_outputs: self.seqs.max_outputs(), fuse };
                let mut scratch = Graph::new();
                let x = scratch.input("x", DType::F32, &[self.n_vocab, n]).map_err(|e| engine("attach")(&e))?;
                // A build error is a bug here, not a capability: it is reported, never a fallback.
                let built = group::build(&mut scratch, x, false, &stages[..len], gr.extras, "check", &cols)
                    .map_err(|e| engine("attach (building the sampling ops)")(&e))?;
                if built.nodes.iter().all(|&id| self.backend.supports(&scratch, id)) {
                    gr.fuse = fuse;
                    break 'shorten;
                }
            }
            if len == 0 {
                return Err(SamplingError::InvalidConfig {
                    what: format!("backend {} cannot compute the reserved extras {:?}", self.backend.name(), gr.extras),
                    reason: "(top-k and soft_max over the vocabulary are needed for log-probabilities)",
                });
            }
            len -= 1;
        }
        gr.keys.truncate(len);
        group::end_before_kept_inf(&mut gr.keys);
        gr.form = final_form(&gr.keys);
        Ok(())
    }

    /// Appends group `gi` to `g`: on a view of the logits where its rows are contiguous f32, else
    /// on rows gathered through a row-id input.
    fn build(&self, g: &mut Graph, slots: &[Slot], gi: usize, gr: &mut Group) -> Result<()> {
        let (n, n_vocab, logits) = (gr.rows.len(), self.n_vocab, self.logits);
        let ln = g.node(logits);
        let contiguous_f32 = ln.dtype == DType::F32 && ln.layout.is_contiguous(ln.dtype);
        let row_bytes = ln.layout.nb[1];
        let consecutive = gr.rows.windows(2).all(|w| w[1] == w[0] + 1);
        let prefix = format!("tail.g{gi}");
        let mut row_ids = None;
        let x = if contiguous_f32 && consecutive {
            g.view(logits, &[n_vocab, n], &[4, row_bytes], gr.rows[0] * row_bytes)
        } else {
            let ids = g.input(&format!("{prefix}.rows"), DType::I32, &[n]);
            ids.and_then(|ids| {
                row_ids = Some(ids);
                g.get_rows(logits, ids)
            })
        }
        .map_err(|e| engine("attach")(&e))?;
        let (seqs_of, stages) = self.columns(slots, gi, gr)?;
        let cols = Columns { seqs: &seqs_of, verify: self.verify, max_outputs: self.seqs.max_outputs(), fuse: gr.fuse };
        let mut built = group::build(g, x, row_ids.is_none(), &stages, gr.extras, &prefix, &cols)
            .map_err(|e| engine("attach")(&e))?;
        if let Some(ids) = row_ids {
            built.inputs.push((ids, vec![row_ids_field()]));
        }
        // A row with an optimistic grammar in its prefix may need its logits row again (the
        // grammar rejecting the backend's token: its second step reads them where they lie).
        let deferred = !self.masking
            && slots.iter().filter(|s| s.group == gi).any(|s| {
                self.seqs
                    .state(s.seq)
                    .is_ok_and(|st| st.cfg.chain.stages().iter().take(gr.keys.len()).any(|x| x.deferred()))
            });
        if built.outputs.vocab_is_logits || deferred {
            g.set_output(logits);
        }
        gr.built = built;
        Ok(())
    }

    /// Each sequence's backend prefix (its group's, after the capability check) and placement:
    /// `+name` for a stage on the backend, `-name` on the CPU.
    fn place(&self, plans: &mut BTreeMap<SeqId, SeqPlan>, slots: &[Slot], groups: &[Group]) -> Result<()> {
        for (seq, p) in plans.iter_mut() {
            p.prefix = slots.iter().find(|s| s.seq == *seq).map_or(0, |s| groups[s.group].keys.len());
            let names: Vec<String> = (self.seqs.state(*seq)?.cfg.chain.stages().iter().enumerate())
                .map(|(i, s)| format!("{}{}", if i < p.prefix { '+' } else { '-' }, s.name()))
                .collect();
            p.placement = names.join(" ");
        }
        Ok(())
    }
}

impl Tail {
    /// Appends the sampling subgraphs after `logits` (`[n_vocab, n_rows]`) for the output `rows`
    /// (`(sequence, logits row)`; a sequence may own up to [`Sequences::max_outputs`] rows, its
    /// outputs in the order listed), checking every stage on `backend`, the backend that will hold
    /// the logits. Marks the nodes to read back as outputs.
    pub fn attach(
        g: &mut Graph,
        logits: NodeId,
        rows: &[(SeqId, usize)],
        seqs: &Sequences,
        backend: &dyn Backend,
    ) -> Result<Tail> {
        Self::attach_with(g, logits, rows, None, seqs, backend, false)
    }

    /// [`Tail::attach`], with the rows' output indices where given, in masking mode (a side tail)
    /// where asked.
    fn attach_with(
        g: &mut Graph,
        logits: NodeId,
        rows: &[(SeqId, usize)],
        outputs: Option<&[usize]>,
        seqs: &Sequences,
        backend: &dyn Backend,
        masking: bool,
    ) -> Result<Tail> {
        let (n_vocab, n_rows) = Attach::logits_shape(g, logits)?;
        // With several outputs per sequence, `dist` verifies each output's draft token (without a
        // draft it is the same draw as `categorical`'s).
        let q_len = if seqs.max_outputs() > 1 { seqs.draft_q_len() } else { 0 };
        let verify = match (seqs.max_outputs() > 1, q_len) {
            (false, _) => Verify::No,
            (true, 0) => Verify::OneHot,
            (true, m) => Verify::Sampled(m),
        };
        let a = Attach { logits, n_vocab, seqs, backend, verify, masking };
        let (mut slots, per_seq) = a.slots(rows, outputs, n_rows)?;
        let mut plans = a.plans(&per_seq)?;
        let mut groups = a.groups(rows, &plans, &mut slots);
        for (gi, gr) in groups.iter_mut().enumerate() {
            a.probe(&slots, gi, gr)?;
        }
        for (gi, gr) in groups.iter_mut().enumerate() {
            a.build(g, &slots, gi, gr)?;
        }
        a.place(&mut plans, &slots, &groups)?;
        Ok(Tail {
            n_vocab,
            logits,
            logits_dtype: g.node(logits).dtype,
            n_rows,
            backend: backend.name().to_string(),
            masking,
            sides: Vec::new(),
            clock: 0,
            slots,
            groups,
            seqs: plans,
            vocab_buf: Vec::new(),
            raw_buf: Vec::new(),
            q_len,
        })
    }

    /// Per sequence, where each stage of its chain runs: `+name` on the backend, `-name` on the
    /// CPU (llama.cpp's notation), e.g. `+top_k +temp -typical -dist`.
    pub fn placement(&self) -> Vec<(SeqId, String)> {
        self.seqs.iter().map(|(s, p)| (*s, p.placement.clone())).collect()
    }

    /// The placement as text, one line per sequence (for plan dumps).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (gi, gr) in self.groups.iter().enumerate() {
            let seqs: Vec<String> = self
                .slots
                .iter()
                .filter(|sl| sl.group == gi)
                .map(|sl| format!("{} output {}", sl.seq, sl.output))
                .collect();
            s += &format!("group tail.g{gi}: logits rows {:?} ({}), ends as {:?}\n", gr.rows, seqs.join(", "), gr.form);
        }
        for (seq, p) in &self.seqs {
            s += &format!("{seq}: {}\n", p.placement);
        }
        s
    }

    /// How many stages of `seq`'s chain run on the backend.
    pub fn backend_prefix(&self, seq: SeqId) -> Option<usize> {
        self.seqs.get(&seq).map(|p| p.prefix)
    }

    /// Bytes one step reads back: the sum of every row's reservation.
    pub fn reserved_bytes(&self) -> usize {
        let mut total = 0;
        for gr in &self.groups {
            let n = gr.rows.len();
            let o = &gr.built.outputs;
            total += o.token.map_or(0, |_| 4 * n);
            total += o.list.map_or(0, |_| 8 * list_len(&gr.keys) * n);
            total += if o.vocab.is_some() || o.vocab_is_logits { 4 * self.n_vocab * n } else { 0 };
            total += if o.raw.is_some() || o.raw_logits { 4 * self.n_vocab * n } else { 0 };
            total += o.logprobs.map_or(0, |_| 8 * gr.extras.logprobs.min(self.n_vocab) * n);
            total += o.token_logprob.map_or(0, |_| 4 * n);
            total += o.token_rank.map_or(0, |_| 4 * n);
            total += o.selected_p.map_or(0, |_| 4 * n);
        }
        total
    }

    /// Whether `seqs` still has the structure this tail was built for (every sequence present, the
    /// same backend prefix structure and extras). Parameter values may differ: they are inputs.
    pub fn check_current(&self, seqs: &Sequences) -> Result<()> {
        if self.q_len > 0 && seqs.draft_q_len() != self.q_len {
            return Err(SamplingError::StaleTail {
                what: format!("the draft distributions' length changed from {} to {}", self.q_len, seqs.draft_q_len()),
            });
        }
        for (seq, p) in &self.seqs {
            let cfg =
                &seqs.state(*seq).map_err(|_| SamplingError::StaleTail { what: format!("{seq} was removed") })?.cfg;
            if cfg.extras(self.masking) != p.extras || !cfg.wants_prefix(self.n_vocab, self.masking, &p.keys) {
                return Err(SamplingError::StaleTail {
                    what: format!("{seq}'s chain or reservation changed structure"),
                });
            }
        }
        Ok(())
    }

    /// Writes this step's inputs: every backend stage's current parameters and each draw's key
    /// (the sequence's seed and `step + output index`), and brings the penalty count state
    /// tensors up to date (the counts that changed since the last step). Fails with
    /// [`SamplingError::StaleTail`] if a sequence's structure changed since [`Tail::attach`].
    pub fn set_inputs(&self, sched: &mut Scheduler, seqs: &mut Sequences) -> Result<()> {
        self.check_current(seqs)?;
        self.sync_counts(sched, seqs)?;
        let mut bytes: Vec<u8> = Vec::new();
        for (gi, gr) in self.groups.iter().enumerate() {
            let cols: Vec<&Slot> = self.slots.iter().filter(|s| s.group == gi).collect();
            // Each column's chain as its output sees it (a copy with the draft accepted, for a
            // drafted sequence's later outputs), made once for all the group's inputs.
            let mut chains = Vec::with_capacity(cols.len());
            for sl in &cols {
                let st = seqs.state(sl.seq)?;
                let draft = st.draft.get(sl.output).map_or(-1, |&t| i32::try_from(t).unwrap_or(-1));
                let q = st.draft_q.get(sl.output).map(Vec::as_slice);
                chains.push((st.chain_for(sl.output), &st.cfg.chain, st.step + sl.output as u64, draft, q));
            }
            for (node, fields) in &gr.built.inputs {
                bytes.clear();
                for (sl, (chain, own, step, draft, q)) in cols.iter().zip(&chains) {
                    let row = Row {
                        seq: sl.seq,
                        chain,
                        own,
                        step: *step,
                        draft: *draft,
                        q: *q,
                        q_len: self.q_len,
                        row: gr.rows[sl.col],
                        n_vocab: self.n_vocab,
                    };
                    for f in fields {
                        f.write(&row, &mut Out(&mut bytes))?;
                    }
                }
                sched.set_input(*node, &bytes).map_err(|e| engine("set_inputs")(&e))?;
            }
        }
        Ok(())
    }

    /// Makes every penalty count state tensor of this tail (whole-history penalties) hold its
    /// chain's counts (the CPU sampler's, which `accept` advanced): where the registry knows what
    /// the tensor holds, only the tokens whose count changed are written, one element each (one a
    /// step per accepted token); a tensor the scheduler has just allocated holds zeros; one of
    /// unknown contents (another registry wrote it) is written whole. On an error the registry
    /// forgets the tensor, so the next call writes it whole.
    fn sync_counts(&self, sched: &mut Scheduler, seqs: &mut Sequences) -> Result<()> {
        let wr = |e: sched::SchedError| engine("writing the penalty counts")(&e);
        let nv = self.n_vocab;
        let mut writes: Vec<(usize, f32)> = Vec::new();
        let mut bytes: Vec<u8> = Vec::new();
        for gr in &self.groups {
            for st in &gr.built.states {
                let (node, seq, stage) = (st.node, SeqId(st.seq), st.stage);
                let now = token_values(&seqs.state(seq)?.cfg.chain, seq, stage, st.get, nv)?;
                let held = if sched.is_set(node).map_err(wr)? {
                    seqs.device_counts.remove(&(seq, stage))
                } else {
                    Some(HashMap::new())
                };
                match held {
                    Some(held) => {
                        writes.clear();
                        writes.extend(
                            now.iter().filter(|(t, c)| held.get(t) != Some(c)).map(|(&t, &c)| (t as usize, c as f32)),
                        );
                        writes.extend(held.keys().filter(|t| !now.contains_key(t)).map(|&t| (t as usize, 0.0)));
                        if !writes.is_empty() {
                            writes.sort_unstable_by_key(|w| w.0);
                            let rows: Vec<usize> = writes.iter().map(|w| w.0).collect();
                            bytes.clear();
                            writes.iter().for_each(|w| bytes.extend_from_slice(&w.1.to_le_bytes()));
                            sched.set_input_rows(node, &rows, &bytes).map_err(wr)?;
                        }
                    }
                    None => {
                        let mut row = vec![0f32; nv];
                        for (&t, &c) in &now {
                            row[t as usize] = c as f32;
                        }
                        sched.set_input_f32(node, &row).map_err(wr)?;
                    }
                }
                seqs.device_counts.insert((seq, stage), now);
            }
        }
        Ok(())
    }

    /// After `compute`: reads back exactly what was reserved, finishes every row whose chain goes
    /// on past its backend prefix on the CPU (its suffix with the step counter of its output), and
    /// returns each row's result. Nothing is accepted: call [`Tail::accept`] with the tokens kept.
    pub fn sample(&mut self, sched: &mut Scheduler, seqs: &mut Sequences) -> Result<StepOutput> {
        self.check_current(seqs)?;
        let before = sched.stats().bytes_to_host;
        let rd = |e: sched::SchedError| engine("reading the sampling outputs")(&e);
        let mut results: Vec<Option<RowResult>> = vec![None; self.slots.len()];
        let mut raw = std::mem::take(&mut self.raw_buf);
        for (gi, gr) in self.groups.iter().enumerate() {
            let o = &gr.built.outputs;
            let tokens = o.token.map(|t| sched.read_i32(t)).transpose().map_err(rd)?;
            let list = match o.list {
                Some((ids, vals)) => Some((sched.read_i32(ids).map_err(rd)?, sched.read_f32(vals).map_err(rd)?)),
                None => None,
            };
            let has_raw = match (o.raw, o.raw_logits) {
                (Some(v), _) => sched.read_f32_into(v, &mut raw).map(|_| true),
                (None, true) => sched.read_rows_f32_into(self.logits, &gr.rows, &mut raw).map(|_| true),
                (None, false) => Ok(false),
            }
            .map_err(rd)?;
            let lps = match o.logprobs {
                Some((ids, lp)) => Some((sched.read_i32(ids).map_err(rd)?, sched.read_f32(lp).map_err(rd)?)),
                None => None,
            };
            let token_lp = match (o.token_logprob, o.token_rank, &tokens) {
                (Some(lp), Some(rank), Some(t)) => {
                    Some((t.clone(), sched.read_f32(lp).map_err(rd)?, sched.read_f32(rank).map_err(rd)?))
                }
                _ => None,
            };
            let sel_p = o.selected_p.map(|(p, _)| sched.read_f32(p)).transpose().map_err(rd)?;
            let read = GroupRead { tokens, list, raw: has_raw.then_some(&raw[..]), lps, token_lp, sel_p };
            // A vocabulary-sized read is used where it lies (host-visible memory: no copy).
            let all: Vec<usize> = (0..gr.rows.len()).collect();
            let vocab = match (o.vocab, o.vocab_is_logits) {
                (Some(v), _) => Some((v, &all[..])),
                (None, true) => Some((self.logits, &gr.rows[..])),
                (None, false) => None,
            };
            match vocab {
                Some((node, rows)) => {
                    let mut buf = std::mem::take(&mut self.vocab_buf);
                    let this = &*self;
                    sched
                        .read_rows_with(node, rows, |bytes| {
                            // SAFETY: every bit pattern is an f32; alignment is checked.
                            let (pre, f, post) = unsafe { bytes.align_to::<f32>() };
                            let f = if pre.is_empty() && post.is_empty() {
                                f
                            } else {
                                buf.clear();
                                buf.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
                                &buf[..]
                            };
                            this.finish_group(seqs, gi, &read, Some(f), &mut results);
                        })
                        .map_err(rd)?;
                    self.vocab_buf = buf;
                }
                None => self.finish_group(seqs, gi, &read, None, &mut results),
            }
        }
        self.raw_buf = raw;
        let (checked, resampled) = if self.masking { (0, 0) } else { self.second_step(sched, seqs, &mut results)? };
        self.token_logprobs(sched, &mut results)?;
        let bytes_read = (sched.stats().bytes_to_host - before) as usize;
        let mut rows: Vec<(usize, RowResult)> = self
            .slots
            .iter()
            .zip(results)
            .map(|(sl, r)| (self.groups[sl.group].rows[sl.col], r.expect("every slot is in a group")))
            .collect();
        rows.sort_by_key(|(r, _)| *r);
        Ok(StepOutput { rows: rows.into_iter().map(|(_, r)| r).collect(), bytes_read, checked, resampled })
    }

    /// Gives every row that reserved log-probabilities and has a token without its gathered
    /// log-probability (chosen on the host: a CPU suffix, an optimistic grammar's second run, or
    /// a prefix that does not select) that token's log-probability and rank, from its raw logits
    /// row read back (`4 n_vocab` bytes: the backend counted for the token it selected, not this
    /// one) and the row's max and ln-sum (8 bytes): `(x - max) - ln_sum` in f32, the graph's
    /// arithmetic for the others.
    fn token_logprobs(&self, sched: &mut Scheduler, results: &mut [Option<RowResult>]) -> Result<()> {
        for (si, sl) in self.slots.iter().enumerate() {
            let gr = &self.groups[sl.group];
            let Some((max, ln_sum)) = gr.built.outputs.log_norm else { continue };
            let Some(RowResult { result: Ok(out), .. }) = results[si].as_mut() else { continue };
            let Some(t) = out.token.filter(|_| out.token_logprob.is_none()) else { continue };
            let rd = |e: sched::SchedError| engine("reading a host-chosen token's logits row")(&e);
            let row = sched.read_rows_f32(self.logits, &[gr.rows[sl.col]]).map_err(rd)?;
            let m = sched.read_rows_f32(max, &[sl.col]).map_err(rd)?;
            let l = sched.read_rows_f32(ln_sum, &[sl.col]).map_err(rd)?;
            let x = row.get(t as usize).copied().unwrap_or(f32::NAN);
            out.token_logprob = m.first().zip(l.first()).map(|(m, l)| (x - m) - l);
            out.token_rank = Some(crate::candidates::rank(&row, t));
        }
        Ok(())
    }

    /// The optimistic grammars' check (`samplers/grammar.rs`): how many rows were checked, and
    /// the slots whose backend prefix holds a deferred stage that rejects the row's token (a
    /// failing check is that row's error).
    fn rejected(&self, seqs: &Sequences, results: &mut [Option<RowResult>]) -> Result<(usize, Vec<usize>)> {
        let mut out = Vec::new();
        let mut checked = 0;
        for (si, sl) in self.slots.iter().enumerate() {
            let prefix = self.seqs[&sl.seq].prefix;
            let Some(RowResult { result: Ok(RowOutput { token: Some(t), .. }), .. }) = &results[si] else { continue };
            let st = seqs.state(sl.seq)?;
            // (The structure is the sequence's own; only a row that has such a stage pays for the
            // chain as its output sees it.)
            if !st.cfg.chain.stages().iter().take(prefix).any(|s| s.deferred()) {
                continue;
            }
            checked += 1;
            match st.chain_for(sl.output).deferred_allow(0..prefix, *t) {
                Ok(true) => {}
                Ok(false) => out.push(si),
                Err(e) => {
                    if let Some(r) = results[si].as_mut() {
                        r.result = Err(e);
                    }
                }
            }
        }
        Ok((checked, out))
    }

    /// The rows an optimistic grammar rejected run their chain again, every deferred stage
    /// masking, as a second step on the backend over those rows' logits where the first step
    /// left them (see the module docs); their token (and candidates, and the new token's own
    /// log-probability and rank, gathered and counted there) replace the first step's, their
    /// top log-probabilities and logits stay (the same row's). Returns how many rows were
    /// checked, and how many of them ran again.
    fn second_step(
        &mut self,
        sched: &mut Scheduler,
        seqs: &mut Sequences,
        results: &mut [Option<RowResult>],
    ) -> Result<(usize, usize)> {
        let (checked, rejected) = self.rejected(seqs, results)?;
        if rejected.is_empty() {
            return Ok((checked, 0));
        }
        let logits = self.logits;
        let side = self.side(sched, seqs, &rejected)?;
        let e = |e: sched::SchedError| engine("the optimistic grammars' second step")(&e);
        sched.plan_side(&side.graph, &[(side.link, logits)]).map_err(e)?;
        let out = side.tail.set_inputs(sched, seqs).and_then(|()| {
            sched.compute().map_err(e)?;
            side.tail.sample(sched, seqs)
        });
        // The step's plan is current again whatever happened (its outputs stay readable).
        let ended = sched.end_side().map_err(e);
        let out = out?;
        ended?;
        for row in out.rows {
            let si = rejected
                .iter()
                .copied()
                .find(|&si| self.slots[si].seq == row.seq && self.slots[si].output == row.output)
                .expect("a side tail's rows are the rejected ones");
            let Some(r) = results[si].as_mut() else { continue };
            r.result = match (row.result, &r.result) {
                (Ok(again), Ok(first)) => Ok(RowOutput {
                    token: again.token,
                    candidates: again.candidates,
                    logprobs: first.logprobs.clone(),
                    token_logprob: again.token_logprob,
                    token_rank: again.token_rank,
                    logits: first.logits.clone(),
                }),
                (Err(e), _) => Err(e),
                (Ok(_), Err(e)) => Err(e.clone()),
            };
        }
        Ok((checked, rejected.len()))
    }

    /// The side tail of the rejected slots `rejected` (built, or rebuilt where its structure no
    /// longer fits the sequences; at most [`SIDES`] kept).
    fn side(&mut self, sched: &Scheduler, seqs: &Sequences, rejected: &[usize]) -> Result<&mut Side> {
        self.clock += 1;
        let found = self.sides.iter().position(|s| s.slots == rejected);
        let found = found.filter(|&i| self.sides[i].tail.check_current(seqs).is_ok());
        let i = match found {
            Some(i) => i,
            None => {
                let backend = sched.backends().iter().find(|b| b.name() == self.backend).ok_or_else(|| {
                    SamplingError::StaleTail {
                        what: format!("the scheduler has no backend {} (the logits' at attach)", self.backend),
                    }
                })?;
                let rows: Vec<(SeqId, usize)> = rejected
                    .iter()
                    .map(|&si| (self.slots[si].seq, self.groups[self.slots[si].group].rows[self.slots[si].col]))
                    .collect();
                let outputs: Vec<usize> = rejected.iter().map(|&si| self.slots[si].output).collect();
                let mut graph = Graph::new();
                let link = graph
                    .input("tail.logits", self.logits_dtype, &[self.n_vocab, self.n_rows])
                    .map_err(|e| engine("attach (the second step)")(&e))?;
                let tail = Tail::attach_with(&mut graph, link, &rows, Some(&outputs), seqs, backend.as_ref(), true)?;
                let side = Side { slots: rejected.to_vec(), graph, link, tail: Box::new(tail), used: 0 };
                self.sides.retain(|s| s.slots != rejected);
                if self.sides.len() >= SIDES {
                    let lru = (0..self.sides.len()).min_by_key(|&i| self.sides[i].used).expect("full");
                    self.sides.swap_remove(lru);
                }
                self.sides.push(side);
                self.sides.len() - 1
            }
        };
        self.sides[i].used = self.clock;
        Ok(&mut self.sides[i])
    }

    /// A drafted position of a sampling chain emits the verifier's decision: the draft token if
    /// accepted, else the residual draw (as the backend's `spec_verify`).
    fn decide_draft(
        st: &super::seqs::SeqState,
        sl: &Slot,
        out: &mut RowOutput,
        cur: &mut Candidates<'_>,
        step: u64,
    ) -> Result<()> {
        // The selector and its seed are the sequence's own chain's (accepting moves neither).
        let draft = st.draft.get(sl.output).copied();
        if let Some((d, seed)) = draft.zip(crate::speculative::dist_seed(&st.cfg.chain)) {
            let p = cur.in_order()?;
            out.token = Some(match st.draft_q.get(sl.output) {
                Some(q) => crate::speculative::decide_sampled(&p, d, q, seed, step)?,
                None => crate::speculative::decide_deterministic(&p, d, seed, step)?,
            });
        }
        Ok(())
    }

    /// Finishes every row of group `gi` from what was read back.
    fn finish_group(
        &self,
        seqs: &mut Sequences,
        gi: usize,
        read: &GroupRead<'_>,
        vocab: Option<&[f32]>,
        results: &mut [Option<RowResult>],
    ) {
        let gr = &self.groups[gi];
        let (n, nv) = (gr.rows.len(), self.n_vocab);
        for (si, sl) in self.slots.iter().enumerate().filter(|(_, s)| s.group == gi) {
            let c = sl.col;
            let row_list = read.list.as_ref().map(|(ids, vals)| {
                let k = ids.len() / n;
                (&ids[c * k..(c + 1) * k], &vals[c * k..(c + 1) * k])
            });
            let row_vocab = vocab.map(|v| &v[c * nv..(c + 1) * nv]);
            let result = self.finish_row(seqs, sl, read.tokens.as_ref().map(|t| t[c]), row_list, row_vocab);
            // A stateful selecting stage learns the probability its token was drawn with (output
            // 0's: later outputs predict positions after a draft that may not be accepted).
            if let (Ok(RowOutput { token: Some(t), .. }), Some(p), Some((_, stage)), 0) =
                (&result, &read.sel_p, gr.built.outputs.selected_p, sl.output)
                && let Ok(st) = seqs.state_mut(sl.seq)
                && let Some(s) = st.cfg.chain.stages_mut().get_mut(stage)
            {
                s.backend_feedback(*t, p[c]);
            }
            let result = result.map(|mut out| {
                if let Some((ids, lp)) = &read.lps {
                    let m = ids.len() / n;
                    out.logprobs = Some((c * m..(c + 1) * m).map(|j| (ids[j] as Token, lp[j])).collect());
                }
                // The gathered value stands for the backend's token (a row resampled on the host
                // chooses again: `token_logprobs`).
                if let Some((t, lp, above)) = &read.token_lp
                    && out.token.is_some_and(|x| i64::from(x) == i64::from(t[c]))
                {
                    out.token_logprob = Some(lp[c]);
                    out.token_rank = Some(above[c] as u32 + 1);
                }
                if gr.extras.logits {
                    let src = read.raw.or(vocab).expect("raw logits are read when asked for");
                    out.logits = Some(src[c * nv..(c + 1) * nv].to_vec());
                }
                out
            });
            let row = match result {
                Err(SamplingError::BadRow { stage, .. }) => {
                    Err(SamplingError::BadRow { row: gr.rows[c], seq: sl.seq.to_string(), stage })
                }
                r => r,
            };
            results[si] = Some(RowResult { seq: sl.seq, output: sl.output, result: row });
        }
    }

    fn finish_row(
        &self,
        seqs: &mut Sequences,
        sl: &Slot,
        token: Option<i32>,
        list: Option<(&[i32], &[f32])>,
        vocab: Option<&[f32]>,
    ) -> Result<RowOutput> {
        let plan = &self.seqs[&sl.seq];
        let bad = || SamplingError::BadRow { row: 0, seq: String::new(), stage: plan.placement.clone() };
        let st = seqs.state_mut(sl.seq)?;
        let step = st.step + sl.output as u64;
        let mut cur = match (list, vocab) {
            (Some((ids, vals)), _) => {
                if vals.iter().any(|v| v.is_nan()) {
                    return Err(bad());
                }
                // Id -1: removed by a backend stage (absent, as in the CPU chain's list); a -inf
                // entry with an id was masked before the list was made and stays, as there.
                let l: Vec<TokenData> = ids
                    .iter()
                    .zip(vals)
                    .filter(|(id, _)| **id >= 0)
                    .map(|(&id, &logit)| TokenData { id: id as u32, logit, p: 0.0 })
                    .collect();
                if l.iter().all(|t| t.logit == f32::NEG_INFINITY) {
                    return Err(bad());
                }
                Some(Candidates::from_list(l, self.n_vocab)?)
            }
            // After a cut on the vocabulary the CPU chain holds the survivors in vocabulary order
            // (the finite entries: a cut keeps no -inf entry but where min_keep forces one).
            (None, Some(row)) if self.groups[sl.group].form == Form::Masked => {
                let l: Vec<TokenData> = row
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| **x > f32::NEG_INFINITY || x.is_nan())
                    .map(|(id, &logit)| TokenData { id: id as u32, logit, p: 0.0 })
                    .collect();
                if l.is_empty() || l.iter().any(|t| t.logit.is_nan() || t.logit == f32::INFINITY) {
                    return Err(bad());
                }
                Some(Candidates::from_cut_list(l, self.n_vocab)?)
            }
            (None, Some(row)) => Some(Candidates::from_row(row)?),
            (None, None) => None,
        };
        let mut out = RowOutput {
            token: None,
            candidates: None,
            logprobs: None,
            token_logprob: None,
            token_rank: None,
            logits: None,
        };
        if let Some(t) = token {
            if t < 0 {
                return Err(bad());
            }
            out.token = Some(t as Token);
            if let Some(cur) = cur.as_mut() {
                cur.set_selected(None);
                let mut o = cur.output()?;
                o.selected = out.token;
                out.candidates = Some(o.candidates);
            }
        } else if let Some(mut cur) = cur {
            let masking = self.masking;
            st.with_chain_for(sl.output, |chain| {
                chain.set_step_from(plan.prefix, step);
                // A second run masks with every stage (an optimistic grammar's place included).
                if masking {
                    chain.apply_all_from(plan.prefix, &mut cur)
                } else {
                    chain.apply_from(plan.prefix, &mut cur)
                }
            })?;
            out.token = cur.selected_token();
            Self::decide_draft(st, sl, &mut out, &mut cur, step)?;
            if plan.extras.candidates {
                out.candidates = Some(cur.output()?.candidates);
            }
        }
        Ok(out)
    }

    /// Accepts the first `tokens.len()` outputs of `seq` (a contiguous prefix: speculative
    /// verification keeps the drafts up to the first rejection): its chain records them and its
    /// step counter advances by as many.
    pub fn accept(&self, seqs: &mut Sequences, seq: SeqId, tokens: &[Token]) -> Result<()> {
        let p = self.seqs.get(&seq).ok_or(SamplingError::UnknownSequence { seq: seq.0 })?;
        if tokens.len() > p.rows.len() {
            return Err(SamplingError::TooManyOutputs { seq: seq.0, n: tokens.len(), max: p.rows.len() });
        }
        seqs.accept(seq, tokens)
    }
}

impl Tail {
    /// The logits node the tail reads from.
    pub fn logits(&self) -> NodeId {
        self.logits
    }
}
