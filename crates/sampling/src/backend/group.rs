//! The group driver: appending one group's backend prefix to a graph, stage by stage (a run of
//! fused list stages as one `list_filter` node), and the group's outputs (what output
//! reservation reads back).

use super::lower::{Lowering, R, Record, StateTensor};
use super::stage::{BackendStage, Field, Form, StageKey};
use graph::{DType, Graph, NodeId};

/// Whether a group's `dist` verifies drafts, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Verify {
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
pub(crate) struct Columns<'a> {
    /// Each column's sequence (its state tensors are that sequence's).
    pub seqs: &'a [u32],
    /// How `dist` draws.
    pub verify: Verify,
    /// The most outputs a sequence has per step (a drafted output's device-state values are
    /// corrected by `lower::draft_corrections_len` entries).
    pub max_outputs: usize,
    /// Whether a mask stage fuses into the next stage (`BackendStage::vocab_mask`).
    pub fuse: bool,
}

/// What a group asks to read besides its prefix's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Extras {
    /// Also read the candidates before the selecting stage.
    pub candidates: bool,
    /// Read the log-probabilities of this many most likely tokens (of the raw logits), and the
    /// selected token's own.
    pub logprobs: usize,
    /// Read the raw logits rows.
    pub logits: bool,
}

/// The nodes a group reads back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Outputs {
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
    /// `f32 [1, n]`: the log-probability (of the raw logits) of the token the prefix selected,
    /// where it selects one and log-probabilities were asked for.
    pub token_logprob: Option<NodeId>,
    /// f32 `[1, n]`: how many raw logits are strictly greater than the selected token's (its
    /// rank minus 1), where `token_logprob` is.
    pub token_rank: Option<NodeId>,
    /// `f32 [1, n]` each: the raw logits' row maxima and `ln sum exp(x - max)`, where
    /// log-probabilities were asked for (read for a token chosen on the host, whose
    /// log-probability is `(x - max) - ln_sum` of its logit, as the graph computes the others').
    pub log_norm: Option<(NodeId, NodeId)>,
    /// `f32 [1, n]`: the probability the selecting stage drew its token with, and that stage's
    /// index (fed back to its sampler).
    pub selected_p: Option<(NodeId, usize)>,
}

/// A built group: its inputs (with the fields that write them) and outputs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Built {
    /// Input nodes and the fields of each column.
    pub inputs: Vec<(NodeId, Vec<Field>)>,
    /// The per-sequence state tensors the group reads.
    pub states: Vec<StateTensor>,
    /// What to read back.
    pub outputs: Outputs,
    /// Every node this group appended (for the capability check).
    pub nodes: Vec<NodeId>,
}

/// One stage of a group's prefix: its backend form (of the group's first row's sampler) and key.
pub(crate) type Stage<'a> = (&'a dyn BackendStage, StageKey);

/// A run of fused list stages on a list: the list, and each stage's kind and parameter field.
struct ListRun {
    ids: NodeId,
    vals: NodeId,
    k: usize,
    init: NodeId,
    sorted: bool,
    stages: Vec<(graph::ListStage, Field)>,
}

/// The stages of `stages` (from the first, at chain index `first`) one `list_filter` node applies
/// to the record `rec`, with their kinds and parameter fields: a run of fused list stages (top-p,
/// min-p, temp) on a list of at most `graph::ListStages::MAX_LEN` entries, at most
/// `graph::ListStages::MAX` stages; on an unsorted list (after typical) top-p and min-p sort it
/// first, as the CPU chain's do, so a run that starts with a temperature ends before them. `None`:
/// no run starts here.
fn list_run(stages: &[Stage<'_>], first: usize, rec: &Record) -> Option<ListRun> {
    let Record::List { ids, vals, k, init, sorted } = *rec else { return None };
    if k > graph::ListStages::MAX_LEN {
        return None;
    }
    let mut run = Vec::new();
    let mut now_sorted = sorted;
    for (i, (stage, key)) in stages.iter().enumerate().take(graph::ListStages::MAX) {
        let Some((kind, field)) = stage.list_stage(*key, first + i) else { break };
        match kind {
            graph::ListStage::Temp => {}
            // A first top-p or min-p sorts the list (`list_stages`); it stays sorted.
            graph::ListStage::TopP | graph::ListStage::MinP if now_sorted || run.is_empty() => now_sorted = true,
            _ => break,
        }
        run.push((kind, field));
    }
    (!run.is_empty()).then_some(ListRun { ids, vals, k, init, sorted, stages: run })
}

/// The run `run` (stages from chain index `idx`, see [`list_run`]) as one `list_filter` node,
/// the list sorted first where its first stage needs the sorted order and the list is not.
fn list_stages(c: &mut Lowering<'_>, idx: usize, run: ListRun) -> R<(Record, graph::ListStages)> {
    let ListRun { mut ids, mut vals, k, mut init, mut sorted, stages } = run;
    if !sorted && matches!(stages[0].0, graph::ListStage::TopP | graph::ListStage::MinP) {
        if let Record::List { ids: i, vals: v, init: n0, .. } = c.sort_list(ids, vals, init, k)? {
            (ids, vals, init) = (i, v, n0);
        }
        sorted = true;
    }
    let (kinds, fields): (Vec<_>, Vec<_>) = stages.into_iter().unzip();
    let stages = graph::ListStages::new(&kinds).expect("list_run takes 1 to ListStages::MAX stages");
    let params = c.input(&format!("s{idx}.list"), DType::F32, &[stages.param_rows(), c.n], fields)?;
    let out = c.g.list_filter(vals, params, stages)?;
    Ok((Record::List { ids, vals: out, k, init, sorted }, stages))
}

/// Shortens `keys` (a group's prefix) to end before its last stage that keeps `-inf` entries the
/// CPU chain's list holds (xtc on the vocabulary) where that record would be read back for a CPU
/// suffix: nothing after it turns it into a list or a token, or cuts the `-inf` entries.
pub(crate) fn end_before_kept_inf(keys: &mut Vec<(StageKey, Form)>) {
    let mut open = None;
    for (i, (k, _)) in keys.iter().enumerate() {
        if k.keeps_inf() {
            open = Some(i);
        } else if k.clears_inf() {
            open = None;
        }
    }
    if let Some(i) = open {
        keys.truncate(i);
    }
}

/// Appends a group's prefix `stages` to `g` on the record `x [n_vocab, n]` (f32, contiguous
/// rows); `prefix` names its inputs. `x_is_logits`: `x` addresses the logits node's rows
/// unchanged.
pub(crate) fn build(
    g: &mut Graph,
    x: NodeId,
    x_is_logits: bool,
    stages: &[Stage<'_>],
    extras: Extras,
    prefix: &str,
    cols: &Columns<'_>,
) -> R<Built> {
    let first = g.len();
    let [n_vocab, n, ..] = g.node(x).ne();
    assert_eq!(cols.seqs.len(), n, "one sequence per column");
    let mut c = Lowering::new(g, n_vocab, n, prefix, cols);
    let start = Record::Vocab { x, touched: false, pending: Default::default(), unmasked: None };
    let (rec, before_select) = lower_stages(&mut c, stages, start)?;
    let mut out = Outputs::default();
    let want_record = extras.candidates || !matches!(rec, Record::Token(_));
    // A vocabulary read back carries its pending transforms applied.
    let before_select = if want_record { c.materialize(before_select)? } else { before_select };
    let name = |g: &mut Graph, id: NodeId, what: &str| {
        if g.node(id).name.is_none() || what == "token" {
            g.set_name(id, format!("{prefix}.{what}"));
        }
        g.set_output(id)
    };
    if let Record::Token(t) = rec {
        out.token = Some(name(c.g, t, "token"));
    }
    if want_record {
        match before_select {
            Record::Vocab { touched: false, .. } if x_is_logits => out.vocab_is_logits = true,
            Record::Vocab { x: v, .. } => {
                let v = if c.g.node(v).op.is_view() { c.g.cont(v)? } else { v };
                out.vocab = Some(name(c.g, v, "vocab"));
            }
            Record::List { ids, vals, init, .. } => {
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
            // A selecting stage's candidates are never a token (`lower_stages`).
            Record::Token(_) => {}
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
        // The raw logits' log-softmax, `(x - max) - ln sum exp(x - max)` (finite for every finite
        // logit, where `ln softmax` underflows to -inf past about -87), of the entries read back
        // only: the vocabulary's log-softmax itself is never materialised.
        let nl = extras.logprobs.min(n_vocab);
        let ids = c.g.top_k(x, nl)?;
        let max = c.g.max_rows(x)?;
        let shifted = c.g.sub(x, max)?;
        let e = c.g.exp(shifted)?;
        let sum = c.row_sum(e)?;
        let ln_sum = c.g.log(sum)?;
        let log_p = |c: &mut Lowering<'_>, logit: NodeId| -> R<NodeId> {
            let shifted = c.g.sub(logit, max)?;
            c.g.sub(shifted, ln_sum)
        };
        let top = c.gather(x, ids, n_vocab, nl)?;
        let lp = log_p(&mut c, top)?;
        out.logprobs = Some((name(c.g, ids, "logprob_ids"), name(c.g, lp, "logprobs")));
        // The selected token's own: gathered here where the prefix selects it (a -1 of a bad row
        // reads entry 0, unused); for a token chosen on the host (a CPU suffix, an optimistic
        // grammar's second run) the row's max and ln-sum stay readable.
        if let Record::Token(t) = rec {
            let f = c.g.cast(t, DType::F32)?;
            let f = c.g.clamp(f, 0.0, (n_vocab - 1) as f32)?;
            let t = c.g.cast(f, DType::I32)?;
            let own = c.gather(x, t, n_vocab, 1)?;
            let at = log_p(&mut c, own)?;
            out.token_logprob = Some(name(c.g, at, "token_logprob"));
            // Its rank: the raw logits strictly above its own, counted (exact in f32 below 2^24).
            let above = c.g.gt(x, own)?;
            let count = c.row_sum(above)?;
            out.token_rank = Some(name(c.g, count, "token_rank"));
        }
        out.log_norm = Some((name(c.g, max, "logit_max"), name(c.g, ln_sum, "ln_sum")));
    }
    if let Some((p, i)) = c.selected_p {
        out.selected_p = Some((name(c.g, p, "selected_p"), i));
    }
    let inputs = std::mem::take(&mut c.inputs);
    let states = std::mem::take(&mut c.states);
    let nodes = (first..g.len()).map(|i| NodeId(i as u32)).collect();
    Ok(Built { inputs, states, outputs: out, nodes })
}

/// Where the group fuses, `stages[0]` is a mask on the vocabulary ([`BackendStage::vocab_mask`])
/// and `stages[1]` reads the row through it ([`BackendStage::takes_mask`]), on a row with no pending
/// transform and no cut before: both lowered as one (the masked row never written), the record
/// they leave. (`None`: nothing appended.)
fn masked_pair(c: &mut Lowering<'_>, stages: &[Stage<'_>], first: usize, rec: Record) -> Option<R<Record>> {
    let [(s0, k0), (s1, k1), ..] = stages else { return None };
    let plain = matches!(rec, Record::Vocab { pending, unmasked: None, .. } if pending.is_empty());
    if !c.fuse || !plain || k0.is_nothing() || k1.is_nothing() || !s1.takes_mask(*k1) {
        return None;
    }
    c.stage = first;
    let bits = match s0.vocab_mask(c, *k0)? {
        Ok(b) => b,
        Err(e) => return Some(Err(e)),
    };
    c.stage = first + 1;
    Some(s1.lower_masked(c, *k1, rec, bits))
}

/// Lowers `stages` in order on `rec`: the record they leave, and the record the selecting stage
/// chose from (its own survivors, mirostat's truncation; or the record it received), or the
/// final record where none selects.
fn lower_stages(c: &mut Lowering<'_>, stages: &[Stage<'_>], mut rec: Record) -> R<(Record, Record)> {
    let first = c.g.len();
    let mut before_select = rec;
    let mut i = 0;
    while i < stages.len() {
        let incoming = rec;
        c.stage = i;
        // A run of top-p, min-p and temp stages on a list is one `list_filter` node; a mask stage
        // and a next stage that reads the row through the mask, one masked node.
        let run = list_run(&stages[i..], i, &rec);
        let pair = if run.is_none() { masked_pair(c, &stages[i..], i, rec) } else { None };
        let (len, name) = match (run, pair) {
            (Some(run), _) => {
                let len = run.stages.len();
                let (r, fused) = list_stages(c, i, run)?;
                rec = r;
                (len, fused.to_string())
            }
            (None, Some(r)) => {
                rec = r?;
                (2, stages[i + 1].1.name().to_string())
            }
            (None, None) => {
                let (stage, key) = stages[i];
                if !key.is_nothing() {
                    rec = stage.lower(c, key, rec)?;
                }
                (1, key.name().to_string())
            }
        };
        if matches!(rec, Record::Token(_)) {
            // (`incoming` is not a token: a prefix ends at its selecting stage, `SeqConfig`.)
            before_select = c.pre_select.take().unwrap_or(incoming);
        }
        // The node that ends the stage carries its name in dumps and plans.
        let last = match rec {
            Record::Vocab { x, .. } => x,
            Record::List { vals, .. } => vals,
            Record::Token(t) => t,
        };
        if last.index() >= first && c.g.node(last).name.is_none() {
            let label = format!("{}.s{i}.{name}", c.prefix);
            c.g.set_name(last, label);
        }
        i += len;
    }
    if !matches!(rec, Record::Token(_)) {
        before_select = rec;
    }
    Ok((rec, before_select))
}
