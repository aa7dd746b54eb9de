//! `top_p` (nucleus): keeps the smallest prefix of the candidates sorted by probability whose
//! cumulative probability reaches `p`, but at least `min_keep` (llama.cpp's
//! `llama_sampler_init_top_p`). The kept candidates carry llama.cpp's probabilities: the softmax
//! over the set *before* truncation.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_top_p` and
//! `llama_sampler_top_p_apply`):
//! * `p >= 1`, `+inf` included: disabled (`init_top_p` returns the empty sampler, `apply` returns
//!   at `p >= 1`);
//! * `p <= 0`, `-inf` included: the single most likely token, or the top `min_keep` (the running
//!   sum of non-negative probabilities is `>= 0 >= p` from the first token on, so only the
//!   `i + 1 >= min_keep` condition decides). `p < 0` decides exactly as `p = 0`, so [`TopP::new`]
//!   stores `max(p, 0)`;
//! * `min_keep` 0 and 1 are the same; `min_keep >= n` keeps all `n`;
//! * NaN `p` is an error: llama.cpp would keep everything, but only because `cum_sum >= NaN` is
//!   false for every prefix, an accident of the comparison rather than a defined behaviour.
//!
//! On the vocabulary view the vocabulary is never sorted: the nucleus is selected straight from
//! the raw row by [`::kernels::nucleus`] (the CPU backend's `top_p_mask` op calls the same
//! function, so both keep the same tokens), and the kept tokens are left in vocabulary order,
//! unsorted, as min-p leaves its survivors (a later draw walks them in token-id order, as a draw
//! from the masked vocabulary does: docs/SAMPLING.md). Decisions follow llama.cpp's `f32`
//! arithmetic, whose rounding decides at boundaries: short rows and lists are decided in it
//! ([`::kernels::llama_f32`]); long rows by the fast path unless the cut is within
//! [`::kernels::nucleus::EXACT_TOL`] (1e-5 of the mass) of `p`, where the row is replayed in it.
//! So a long row can differ from llama.cpp only where llama.cpp's own rounding moves its sums by
//! more than that (docs/SAMPLING.md, "Exactness of top-p").
//!
//! After a cut on the vocabulary (the CPU chain's token-order list that stands for the masked row,
//! `Candidates::cut_len`) the selection runs on that masked row as on the view (the row the
//! backend's `top_p_mask` receives), and the nucleus stays in token order.
//!
//! # Top-p approximated by top-k (`approx_k = N`)
//!
//! llama.cpp's GPU sampling notes' `--gpu-top-p-approx-k N`: the nucleus is cut inside the `N`
//! largest logits only, so that the backend never orders (or masks) the whole row, only selects
//! its top `N` and sums the row once. Each of the `N` carries its probability in the softmax over
//! the *whole* row (the running sum is the true cumulative mass), the kept prefix is the shortest
//! one whose mass reaches `p` (at least `min_keep`), and where the `N` largest carry less than `p`
//! all `N` are kept. So the result is exactly the first `min(kept, N)` tokens of the exact
//! nucleus (`kept` its size): exact where the nucleus fits in the `N` largest, else short of it
//! (the tokens beyond the `N`th and their mass are lost; SmolLM2's rows: docs/SAMPLING.md). A
//! `min_keep` above `N` keeps the `N`. The CPU form decides with the exact nucleus' own selection
//! and arithmetic capped at `N` ([`::kernels::nucleus::select_within`]).
//!
//! The kept tokens leave as a list sorted by logit (ties: lower id first), as top-k leaves its
//! list, not in token order (the backend record is a list of `N`, `Form::List(N)`, entries past the
//! cut masked `-inf` and read back as removed); they carry the whole-row probabilities (as exact
//! top-p keeps the pre-truncation ones), and a later `dist` draws from the softmax of the kept
//! tokens, renormalised over them: as llama.cpp's GPU top-p, which renormalises its top `k`
//! probabilities before the draw. `approx_k = 0` (the default) is exact top-p, and so is
//! `approx_k >= n_vocab` (the `N` largest are the whole row: the same form and ops as exact
//! top-p). On a list (after `top_k`) of more than `N` entries the cut is exact top-p's on the
//! whole list (llama.cpp's `f32` softmax over it) kept to its first `N` entries; on a list of at
//! most `N` it is exact top-p.

use crate::backend::prelude::*;
use crate::candidates::{Candidates, TokenData, check_list, check_scan, llama_f32_probs, sort_desc};
use crate::error::{Result, not_nan};
use crate::sampler::Sampler;
use ::kernels::{llama_f32, nucleus};

/// Nucleus sampling.
#[derive(Debug, Clone)]
pub struct TopP {
    p: f32,
    min_keep: usize,
    /// The nucleus is cut inside this many largest logits (0: exact top-p).
    approx_k: usize,
    /// The selection's scratch (block statistics, buffer, size hint), reused from row to row.
    scratch: nucleus::Scratch,
}

const NAME: &str = "top_p";

impl TopP {
    /// Top-p with mass `p` and `min_keep`: `p >= 1` disables it, `p <= 0` keeps the top
    /// `max(min_keep, 1)` (stored as `p = 0`, which llama.cpp cannot tell apart); NaN: error.
    pub fn new(p: f32, min_keep: usize) -> Result<Self> {
        not_nan(NAME, "p", p)?;
        Ok(Self { p: p.max(0.0), min_keep, approx_k: 0, scratch: nucleus::Scratch::default() })
    }

    /// This top-p approximated by top-k: the nucleus cut inside the `approx_k` largest logits
    /// (see the module documentation); 0 is exact top-p.
    pub fn with_approx_k(mut self, approx_k: usize) -> Self {
        self.approx_k = approx_k;
        self
    }

    /// The cap of the approximation on a row (or masked row) of `n_vocab` tokens: `None` where it
    /// is exact top-p (`approx_k` 0 or at least `n_vocab`).
    fn cap(&self, n_vocab: usize) -> Option<usize> {
        (self.approx_k > 0 && self.approx_k < n_vocab).then_some(self.approx_k)
    }
}

impl TopP {
    /// After a cut on the vocabulary (a token-order list of finite entries, standing for the
    /// masked row the backend's `top_p_mask` receives): the vocabulary view's selection, the
    /// nucleus left in token-id order. It runs on the list's values as a short row: the masked
    /// row's `-inf` entries add exactly 0 to every sum and come after every finite value, and the
    /// list keeps the token order (ties: lower id first), so the decision is the masked row's (a
    /// pass over the whole vocabulary, full of `-inf` ties, cost about 1.5 ms a row).
    fn apply_cut(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let list = cur.list(NAME)?;
        check_list(NAME, list)?;
        let row: Vec<f32> = list.iter().map(|t| t.logit).collect();
        let ids: Vec<u32> = list.iter().map(|t| t.id).collect();
        if let Some(list) = self.nucleus_in_order(&row, 1.0, |pos| ids[pos as usize])? {
            cur.set_cut_list(list);
        }
        Ok(())
    }

    /// The nucleus of `row` (divided by `div`) in position order, as the list a cut leaves:
    /// position `i` is token `id_of(i)`, with its divided logit and its probability in the row's
    /// softmax. `None` where the row is bad and `check_scan` lets it pass.
    fn nucleus_in_order(
        &mut self,
        row: &[f32],
        div: f32,
        id_of: impl Fn(u32) -> u32,
    ) -> Result<Option<Vec<TokenData>>> {
        let nuc = match nucleus::select(row, div, self.p, self.min_keep, &mut self.scratch) {
            Ok(nuc) => nuc,
            Err(bad) => return check_scan(NAME, row, bad.bad, f32::NEG_INFINITY).map(|()| None),
        };
        let kept = &mut self.scratch.buf[..nuc.kept];
        kept.sort_unstable_by_key(|&(pos, _)| pos);
        Ok(Some(
            kept.iter()
                .map(|&(pos, x)| TokenData {
                    id: id_of(pos),
                    logit: if div == 1.0 { x } else { x / div },
                    p: nuc.probs.prob(x, div),
                })
                .collect(),
        ))
    }
}

impl TopP {
    /// Top-p within the `cap` largest of a row (the vocabulary view's, or after a cut the cut
    /// list's values as a short row, position `i` being token `id_of(i)`): those of the capped
    /// nucleus, sorted (value descending, ties by lower position), with their probabilities in
    /// the whole row's softmax. `None` where the row is bad and `check_scan` lets it pass.
    fn capped_nucleus(
        &mut self,
        row: &[f32],
        div: f32,
        cap: usize,
        id_of: impl Fn(u32) -> u32,
    ) -> Result<Option<Vec<TokenData>>> {
        let nuc = match nucleus::select_within(row, div, self.p, self.min_keep, cap, &mut self.scratch) {
            Ok(nuc) => nuc,
            Err(bad) => return check_scan(NAME, row, bad.bad, f32::NEG_INFINITY).map(|()| None),
        };
        Ok(Some(
            self.scratch.buf[..nuc.kept]
                .iter()
                .map(|&(pos, x)| TokenData {
                    id: id_of(pos),
                    logit: if div == 1.0 { x } else { x / div },
                    p: nuc.probs.prob(x, div),
                })
                .collect(),
        ))
    }

    /// Top-p approximated by top-k on a vocabulary view or after a cut (`cap` below the
    /// vocabulary): the capped nucleus as a sorted list, as the backend's list of `cap` holds it.
    /// `false` where the candidates are another list (the caller runs exact top-p on it and keeps
    /// its first `approx_k` entries).
    fn apply_capped(&mut self, cur: &mut Candidates<'_>, cap: usize) -> Result<bool> {
        let list = if let Some((row, div)) = cur.vocab_row() {
            self.capped_nucleus(row, div, cap, |id| id)?
        } else if cur.cut_len().is_some() {
            let list = cur.list(NAME)?;
            check_list(NAME, list)?;
            let row: Vec<f32> = list.iter().map(|t| t.logit).collect();
            let ids: Vec<u32> = list.iter().map(|t| t.id).collect();
            self.capped_nucleus(&row, 1.0, cap, |pos| ids[pos as usize])?
        } else {
            return Ok(false);
        };
        if let Some(list) = list {
            cur.set_list(list, true);
        }
        Ok(true)
    }
}

impl Sampler for TopP {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.p >= 1.0 {
            return Ok(());
        }
        if let Some(cap) = self.cap(cur.n_vocab())
            && self.apply_capped(cur, cap)?
        {
            return Ok(());
        }
        if let Some((row, div)) = cur.vocab_row() {
            // Vocabulary order (see the module documentation).
            if let Some(list) = self.nucleus_in_order(row, div, |id| id)? {
                cur.set_cut_list(list);
            }
            return Ok(());
        }
        if cur.cut_len().is_some() {
            return self.apply_cut(cur);
        }
        let sorted = cur.is_sorted();
        let list = cur.list_mut(NAME)?;
        check_list(NAME, list)?;
        llama_f32_probs(list);
        if !sorted {
            sort_desc(list);
        }
        if let Some(last) = llama_f32::top_p_cut(list.iter().map(|t| t.p), self.p, self.min_keep) {
            list.truncate(last);
        }
        if self.approx_k > 0 {
            // Approximated by top-k: the cut inside the list's first `approx_k` entries.
            list.truncate(self.approx_k);
        }
        cur.set_sorted(true);
        cur.set_selected(None);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

const LIST: u32 = 0;
const VOCAB: u32 = 1;
/// Approximated by top-k on the vocabulary or the masked row: a list of `N` leaves.
const APPROX_VOCAB: u32 = 2;
/// Approximated by top-k on a list longer than `N`: exact top-p, then its first `N` entries.
const APPROX_LIST: u32 = 3;

/// On a list: the softmax, its running mass, the entries after the mass reached `p` masked (at
/// least `min_keep`), or fused with its neighbours into one `list_filter`. On the vocabulary: the
/// `top_p_mask` op (the nucleus in vocabulary order, the CPU sampler's own selection on the CPU
/// backend), a pending temperature divided in, a pending min-p cut applied first.
///
/// Approximated by top-k (`approx_k = N` below the record's length): on the vocabulary (or the
/// masked row) `top_k` of `N` and the whole row's softmax denominator (one exponential pass and a
/// two-level row sum), the `N` probabilities' running sum and the cut, leaving a list of `N`
/// sorted (entries past the cut `-inf`, read back as removed); on a longer list, exact top-p's
/// list form (`list_filter` up to `graph::ListStages::MAX_LEN` entries) and its first `N`.
impl BackendStage for TopP {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        let n = self.approx_k;
        Some(match form {
            _ if self.p >= 1.0 => (StageKey::nothing(), form),
            Form::List(k) if n > 0 && n < k => {
                (StageKey::new::<Self>(NAME, APPROX_LIST, n).clearing_inf(), Form::List(n))
            }
            Form::List(_) => (StageKey::new::<Self>(NAME, LIST, 0), form),
            _ if self.cap(n_vocab).is_some() => {
                (StageKey::new::<Self>(NAME, APPROX_VOCAB, n).clearing_inf(), Form::List(n))
            }
            _ => (StageKey::new::<Self>(NAME, VOCAB, 0).with_vocab_mask(), Form::Masked),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        match key.variant() {
            APPROX_VOCAB => return lower_capped_vocab(cx, key.size(), rec),
            APPROX_LIST => return lower_capped_list(cx, key.size(), rec),
            _ => {}
        }
        let n = cx.n();
        let rec = match rec {
            Record::Vocab { pending, .. } if pending.min_p.is_some() => cx.materialize(rec)?,
            r @ Record::Vocab { .. } => r,
            r => cx.sorted(r)?,
        };
        Ok(match rec {
            Record::Vocab { x, pending, unmasked, .. } => {
                let t = Field::scalar(pending.temp.map(|t| t.1), |t| t, 1.0);
                let pm = Field::of::<Self>(cx.stage(), |s, out| {
                    out.f32(s.p);
                    out.f32(s.min_keep as f32);
                });
                let params = cx.input(&format!("s{}.top_p", cx.stage()), DType::F32, &[3, n], vec![t, pm])?;
                let x = cx.contiguous(x)?;
                let masked = cx.g.top_p_mask(x, params)?;
                Record::Vocab {
                    x: masked,
                    touched: true,
                    pending: Pending::default(),
                    unmasked: Some(unmasked.unwrap_or(x)),
                }
            }
            Record::List { ids, vals, k, init, .. } => {
                Record::List { ids, vals: list_cut(cx, vals, k)?, k, init, sorted: true }
            }
            r => r,
        })
    }

    fn list_stage(&self, key: StageKey, stage: usize) -> Option<(graph::ListStage, Field)> {
        (key.variant() == LIST).then(|| (graph::ListStage::TopP, list_params(stage)))
    }
}

/// The `(p, min_keep)` of stage `stage`'s top-p, as `list_filter` reads them.
fn list_params(stage: usize) -> Field {
    Field::of::<TopP>(stage, |s, out| {
        out.f32(s.p);
        out.f32(s.min_keep as f32);
    })
}

/// Top-p's cut of the sorted list `vals [k, n]` as graph ops: the softmax over the list, its
/// running mass, the entries after the mass reached `p` masked `-inf`, at least `min_keep` kept.
fn list_cut(cx: &mut Lowering<'_>, vals: NodeId, k: usize) -> R<NodeId> {
    let pm = mass_params(cx)?;
    let probs = cx.g.soft_max(vals, None, 1.0)?;
    mass_cut(cx, vals, probs, k, pm)
}

/// The inputs of [`mass_cut`]: `p` and `-max(min_keep, 1)`, each `[1, n]`.
fn mass_params(cx: &mut Lowering<'_>) -> R<(NodeId, NodeId)> {
    let p = cx.param::<TopP>("p", 1, |s, out| out.f32(s.p))?;
    let mk = cx.param::<TopP>("neg_min_keep", 1, |s, out| out.f32(-(s.min_keep.max(1) as f32)))?;
    Ok((p, mk))
}

/// Masks the entries of the sorted list `vals [k, n]` (probabilities `probs [k, n]`) after the
/// running mass reached `p`, keeping at least `min_keep` (`(p, mk)` from [`mass_params`]).
fn mass_cut(cx: &mut Lowering<'_>, vals: NodeId, probs: NodeId, k: usize, (p, mk): (NodeId, NodeId)) -> R<NodeId> {
    let n = cx.n();
    let cum = cx.g.cumsum(probs)?;
    let before = cx.g.sub(cum, probs)?;
    let drop = cx.g.ge(before, p)?;
    let ninf = cx.fill(&[k, n], f32::NEG_INFINITY)?;
    let cut = cx.g.where_(drop, ninf, vals)?;
    let pos = cx.neg_positions(k)?;
    let first = cx.g.gt(pos, mk)?;
    cx.g.where_(first, vals, cut)
}

/// Top-p within the `nn` largest of the vocabulary (or the masked row): `top_k` of the row (the
/// raw row where only a temperature is pending, as top-k's, so that the order is the CPU's; a
/// pending min-p applied first), the `nn` values divided by the pending temperature, each one's
/// probability in the whole row's softmax (`e^(x - max) / sum`, the sum over the row in two
/// levels), the cut on their running mass. The first value is the row's maximum, and a NaN or
/// `+inf` ranks first, so it tells whether the row is usable (a bad row's values become NaN).
fn lower_capped_vocab(cx: &mut Lowering<'_>, nn: usize, rec: Record) -> R<Record> {
    let rec = match rec {
        Record::Vocab { pending, .. } if pending.min_p.is_some() => cx.materialize(rec)?,
        r => r,
    };
    let Record::Vocab { x, pending, unmasked, .. } = rec else { return Ok(rec) };
    let x = cx.contiguous(x)?;
    let (ids, raw, init) = cx.top_k_of_row(x, unmasked, nn)?;
    let (vals, row) = match pending.temp {
        Some((t, _)) => (cx.g.div(raw, t)?, cx.g.div(x, t)?),
        None => (raw, x),
    };
    let m = cx.first_row(vals)?;
    let ok = cx.finite(m)?;
    let xm = cx.g.sub(row, m)?;
    let e = cx.g.exp(xm)?;
    let sum = cx.row_sum(e)?;
    let vm = cx.g.sub(vals, m)?;
    let ve = cx.g.exp(vm)?;
    let probs = cx.g.div(ve, sum)?;
    let pm = mass_params(cx)?;
    let cut = mass_cut(cx, vals, probs, nn, pm)?;
    let nan = cx.fill(&[1, 1], f32::NAN)?;
    let vals = cx.g.where_(ok, cut, nan)?;
    Ok(Record::List { ids, vals, k: nn, init, sorted: true })
}

/// Top-p on a list of more than `nn` entries, kept to its first `nn`: exact top-p's cut (one
/// `list_filter` node up to `graph::ListStages::MAX_LEN` entries, as the fused form computes it,
/// else the composed ops), then the list's first `nn` entries.
fn lower_capped_list(cx: &mut Lowering<'_>, nn: usize, rec: Record) -> R<Record> {
    let n = cx.n();
    let Record::List { ids, vals, k, init, .. } = cx.sorted(rec)? else { return Ok(rec) };
    let vals = if k <= graph::ListStages::MAX_LEN {
        let stages = graph::ListStages::new(&[graph::ListStage::TopP]).expect("one stage");
        let f = list_params(cx.stage());
        let params = cx.input(&format!("s{}.list", cx.stage()), DType::F32, &[stages.param_rows(), n], vec![f])?;
        cx.g.list_filter(vals, params, stages)?
    } else {
        list_cut(cx, vals, k)?
    };
    cx.list_prefix(ids, vals, init, nn)
}
