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

use crate::backend::prelude::*;
use crate::candidates::{Candidates, TokenData, check_list, check_scan, sort_desc};
use crate::error::{Result, not_nan};
use crate::sampler::Sampler;
use ::kernels::{llama_f32, nucleus};

/// Nucleus sampling.
#[derive(Debug, Clone)]
pub struct TopP {
    p: f32,
    min_keep: usize,
    /// The selection's scratch (block statistics, buffer, size hint), reused from row to row.
    scratch: nucleus::Scratch,
}

const NAME: &str = "top_p";

impl TopP {
    /// Top-p with mass `p` and `min_keep`: `p >= 1` disables it, `p <= 0` keeps the top
    /// `max(min_keep, 1)` (stored as `p = 0`, which llama.cpp cannot tell apart); NaN: error.
    pub fn new(p: f32, min_keep: usize) -> Result<Self> {
        not_nan(NAME, "p", p)?;
        Ok(Self { p: p.max(0.0), min_keep, scratch: nucleus::Scratch::default() })
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

impl Sampler for TopP {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.p >= 1.0 {
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
        let (max, sum) = llama_f32::softmax_sum(list.iter().map(|t| t.logit));
        for t in list.iter_mut() {
            t.p = llama_f32::prob(t.logit, max, sum);
        }
        if !sorted {
            sort_desc(list);
        }
        if let Some(last) = llama_f32::top_p_cut(list.iter().map(|t| t.p), self.p, self.min_keep) {
            list.truncate(last);
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

/// On a list: the softmax, its running mass, the entries after the mass reached `p` masked (at
/// least `min_keep`), or fused with its neighbours into one `list_filter`. On the vocabulary: the
/// `top_p_mask` op (the nucleus in vocabulary order, the CPU sampler's own selection on the CPU
/// backend), a pending temperature divided in, a pending min-p cut applied first.
impl BackendStage for TopP {
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        Some(match form {
            _ if self.p >= 1.0 => (StageKey::nothing(), form),
            Form::List(_) => (StageKey::new::<Self>(NAME, LIST, 0), form),
            _ => (StageKey::new::<Self>(NAME, VOCAB, 0).with_vocab_mask(), Form::Masked),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
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
                let p = cx.param::<Self>("p", 1, |s, out| out.f32(s.p))?;
                let mk = cx.param::<Self>("neg_min_keep", 1, |s, out| out.f32(-(s.min_keep.max(1) as f32)))?;
                let probs = cx.g.soft_max(vals, None, 1.0)?;
                let cum = cx.g.cumsum(probs)?;
                let before = cx.g.sub(cum, probs)?;
                let drop = cx.g.ge(before, p)?;
                let ninf = cx.fill(&[k, n], f32::NEG_INFINITY)?;
                let cut = cx.g.where_(drop, ninf, vals)?;
                let pos = cx.neg_positions(k)?;
                let first = cx.g.gt(pos, mk)?;
                Record::List { ids, vals: cx.g.where_(first, vals, cut)?, k, init, sorted: true }
            }
            r => r,
        })
    }

    fn list_stage(&self, key: StageKey, stage: usize) -> Option<(graph::ListStage, Field)> {
        (key.variant() == LIST).then(|| {
            let f = Field::of::<Self>(stage, |s, out| {
                out.f32(s.p);
                out.f32(s.min_keep as f32);
            });
            (graph::ListStage::TopP, f)
        })
    }
}
