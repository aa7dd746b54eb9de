//! The backend forms of the stages that select or cut on the whole vocabulary where the CPU chain
//! keeps their survivors in token-id order (its vocabulary-view paths never sort): `mirostat_v2`
//! (the surprise mask over the row and `categorical` in token order), `min_p` with
//! `min_keep > 1` or `p > 1` (the passing tokens, or the top `max(min_keep, 1)`: both are the
//! passing tokens with the top `max(min_keep, 1)` written back over them), `top_n_sigma` (mean and
//! deviation of the finite logits by two-level row sums, the threshold mask) and `xtc` (all of
//! `p >= t` but the least likely removed, where the host's coin and `min_keep` allow). Each is
//! composed of existing graph ops, so every backend that runs those runs it. Their records are
//! masked rows (`Form::Masked`, a draw from them the masked-row `categorical`) where the CPU chain
//! holds a token-order list (its draw the list's), as after top-p on the vocabulary.
//!
//! xtc keeps the `-inf` entries (the CPU chain's list still holds them), which the masked row's
//! read-back (`Form::Masked`: the finite entries) cannot tell from the entries it removed: a later
//! backend stage tells them apart (top-k by the row before the mask, the draw by their zero
//! weight), but a prefix that would end with that record read back for a CPU suffix ends before
//! the xtc stage instead ([`end_before_kept_inf`]).
//!
//! After a cut on the vocabulary the same forms run on the masked row (xtc counting its finite
//! entries, `StageKey::XtcMasked`), where the CPU chain's cut list holds those entries in token
//! order.
//!
//! A submodule of `build` (it extends its private `Ctx`); `BackendStage::key` gives the keys.

use super::{Ctx, Param, R, Rec};
use crate::backend::stage::StageKey;
use graph::{DType, NodeId};

/// Shortens `keys` (a group's prefix) to end before its last on-vocabulary xtc where that xtc's
/// record (which keeps `-inf` entries the CPU chain's list holds) would be read back for a CPU
/// suffix: nothing after it turns it into a list or a token, or cuts the `-inf` entries (min-p).
pub(crate) fn end_before_kept_inf(keys: &mut Vec<StageKey>) {
    let mut open = None;
    for (i, k) in keys.iter().enumerate() {
        match k {
            StageKey::XtcVocab => open = Some(i),
            StageKey::TopK(_)
            | StageKey::Greedy
            | StageKey::Dist
            | StageKey::MinP
            | StageKey::MinPKeep(_)
            | StageKey::MirostatV2Vocab
            | StageKey::MirostatMasked(_) => open = None,
            _ => {}
        }
    }
    if let Some(i) = open {
        keys.truncate(i);
    }
}

impl Ctx<'_> {
    /// `[n_vocab, n]` mask of each row's first maximum (the argmax, lowest id among ties).
    fn first_max_mask(&mut self, x: NodeId) -> R<NodeId> {
        let am = self.g.argmax(x)?;
        let amf = self.g.cast(am, DType::F32)?;
        let ids = self.g.arange(DType::F32, &[self.n_vocab, self.n], 0.0, 1.0)?;
        self.g.equal(ids, amf)
    }

    /// Mirostat 2.0 of stage `idx` on the vocabulary row `x` (the CPU sampler's vocabulary-view
    /// path): the softmax over the row, the tokens of surprise `-log2 p <= mu` and the argmax (which
    /// is among them unless none is) kept, the rest `-inf`; `categorical` draws from the masked row
    /// in token order on the `MIROSTAT` stream, and the drawn token's probability (the softmax of the
    /// kept row, as the CPU sampler renormalises) is read back for its `mu` update. The surprise is
    /// `log(p) log2(e)` of the graph's softmax, so a token within f32 rounding of `mu` can be decided
    /// otherwise than the CPU sampler's `f64`-summed softmax decides it (as on a list).
    pub(super) fn vocab_mirostat_v2(&mut self, idx: usize, x: NodeId) -> R<Rec> {
        let n = self.n;
        let neg_mu = self.input(&format!("s{idx}.neg_mu"), DType::F32, &[1, n], Param::NegMu(idx))?;
        let x = self.contiguous(x)?;
        let probs = self.g.soft_max(x, None, 1.0)?;
        let lnp = self.g.log(probs)?;
        let neg_surprise = self.g.scale(lnp, std::f32::consts::LOG2_E)?;
        let within = self.g.ge(neg_surprise, neg_mu)?;
        let top = self.first_max_mask(x)?;
        let keep = self.g.add(within, top)?;
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let kept = self.g.where_(keep, x, ninf)?;
        self.pre_select =
            Some(Rec::Vocab { x: kept, touched: true, pending: super::Pending::default(), unmasked: Some(x) });
        // The masked row's draw: a cut that removes no finite value (categorical skips the blocks
        // the mask left all -inf), as `dist` after a top-p mask.
        let params =
            self.input("draw", DType::F32, &[2, n], Param::DrawParams { temp: None, min_p: None, masked: true })?;
        let keys = self.input("keys", DType::I32, &[4, n], Param::Keys(idx))?;
        let tok = self.g.categorical(kept, keys, Some(params), None, graph::philox::stream::MIROSTAT as u32)?;
        // The drawn token's probability (clamped index: a bad row's -1 reads entry 0, unused).
        let tf = self.g.cast(tok, DType::F32)?;
        let tc = self.g.clamp(tf, 0.0, (self.n_vocab - 1) as f32)?;
        let at = self.g.cast(tc, DType::I32)?;
        let p2 = self.g.soft_max(kept, None, 1.0)?;
        let p_sel = self.gather(p2, at, self.n_vocab, 1)?;
        self.selected_p = Some((p_sel, idx));
        Ok(Rec::Token(tok))
    }

    /// Min-p of stage `idx` with `min_keep > 1` or `p > 1` on the vocabulary row `x` (the CPU
    /// sampler's vocabulary-view path): the tokens `>= max + ln p` where at least
    /// `k = max(min_keep, 1)` pass, else the top `k`, in token order; the rest `-inf`
    /// (`Form::Masked`). Both are the passing tokens with the top `k` written back over them: where
    /// `k` or more pass, the top `k` are among them (the `k`-th largest passes); where fewer pass,
    /// they are all among the top `k` (the `k`-th largest does not). No count, no branch, no
    /// vocabulary-sized mask of the top `k`; the threshold is the CPU sampler's own f32 sum, and
    /// top-k's ties go to the lower id as the CPU's, so the decision is exact.
    pub(super) fn vocab_min_p_keep(&mut self, idx: usize, x: NodeId, unmasked: Option<NodeId>, k: usize) -> R<Rec> {
        let n = self.n;
        let nv = self.n_vocab;
        let lnp = self.input(&format!("s{idx}.ln_p"), DType::F32, &[1, n], Param::LnP(idx))?;
        let x = self.contiguous(x)?;
        let m = self.g.max_rows(x)?;
        let thr = self.g.add(m, lnp)?;
        let pass = self.g.ge(x, thr)?;
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let masked = self.g.where_(pass, x, ninf)?;
        let top = self.g.top_k(x, k)?;
        let vals = self.gather(x, top, nv, k)?;
        let vals = self.g.reshape(vals, &[1, k * n])?;
        let at = self.flat_index(top, nv, k)?;
        let flat = self.g.reshape(masked, &[1, nv * n])?;
        let written = self.g.set_rows(flat, vals, at)?;
        let kept = self.g.reshape(written, &[nv, n])?;
        Ok(Rec::Vocab {
            x: kept,
            touched: true,
            pending: super::Pending::default(),
            unmasked: Some(unmasked.unwrap_or(x)),
        })
    }

    /// Top-n-sigma of stage `idx` (finite `n`) on the vocabulary row `x`: the tokens `>= max - n
    /// sigma`, sigma the standard deviation of the finite logits, in token order; the rest `-inf`
    /// (`Form::Masked`): the list form's [`Ctx::top_n_sigma`] over the whole row, its mean and
    /// variance two-level f32 sums (the CPU sampler's are f64), so a logit within their rounding
    /// of the threshold can be decided otherwise. A NaN or `+inf` logit makes the threshold NaN,
    /// which masks nothing: the row keeps its bad value and fails as a bad row.
    pub(super) fn vocab_top_n_sigma(&mut self, idx: usize, x: NodeId, unmasked: Option<NodeId>) -> R<Rec> {
        let x = self.contiguous(x)?;
        let kept = self.top_n_sigma(idx, x, true)?;
        Ok(Rec::Vocab {
            x: kept,
            touched: true,
            pending: super::Pending::default(),
            unmasked: Some(unmasked.unwrap_or(x)),
        })
    }

    /// Xtc of stage `idx` on the vocabulary row `x`: the softmax, the tokens of `p >= t` (the
    /// sorted list's prefix), the least likely of them (lowest logit, highest id among its ties:
    /// the prefix's last entry); where the step's coin (a host input), `cnt > 1` and
    /// `n_vocab - (cnt - 1) >= min_keep` say so, all the others become `-inf`. The record keeps
    /// the row before (a later top-k tells removed entries from `-inf` ones). `masked` (after a
    /// cut on the vocabulary, `StageKey::XtcMasked`): the row's finite entries in place of
    /// `n_vocab` (the CPU chain's list holds only those).
    pub(super) fn vocab_xtc(&mut self, idx: usize, x: NodeId, unmasked: Option<NodeId>, masked: bool) -> R<Rec> {
        let (n, nv) = (self.n, self.n_vocab);
        let par = self.input(&format!("s{idx}.xtc"), DType::F32, &[4, n], Param::Xtc(idx))?;
        let row = |c: &mut Self, i: usize| c.g.view(par, &[1, n], &[4, 16], 4 * i);
        let (t, neg_mk, flag) = (row(self, 0)?, row(self, 1)?, row(self, 2)?);
        let x = self.contiguous(x)?;
        let probs = self.g.soft_max(x, None, 1.0)?;
        let big = self.g.ge(probs, t)?;
        let cnt = self.g.sum_rows(big)?;
        // The lowest logit among them: -max(-x) over the big entries.
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let negx = self.g.neg(x)?;
        let negx = self.g.where_(big, negx, ninf)?;
        let neg_low = self.g.max_rows(negx)?;
        let low = self.g.neg(neg_low)?;
        let at_low = self.g.equal(x, low)?;
        let at_low = self.g.mul(at_low, big)?;
        // The highest id among those.
        let ids = self.g.arange(DType::F32, &[nv, n], 0.0, 1.0)?;
        let minus = self.fill(&[1, 1], -1.0)?;
        let cand = self.g.where_(at_low, ids, minus)?;
        let last_id = self.g.max_rows(cand)?;
        let is_last = self.g.equal(ids, last_id)?;
        let not_last = self.g.scale_bias(is_last, -1.0, 1.0)?;
        let drop = self.g.mul(big, not_last)?;
        // On: the flag, cnt > 1, and n_vocab - (cnt - 1) >= min_keep  <=>  -min_keep >= cnt - 1 - n_vocab.
        let last = self.g.scale_bias(cnt, 1.0, -1.0)?;
        let d = if masked {
            let alive = self.g.gt(x, ninf)?;
            let len = self.g.sum_rows(alive)?;
            self.g.sub(last, len)?
        } else {
            self.g.scale_bias(last, 1.0, -(nv as f32))?
        };
        let room = self.g.ge(neg_mk, d)?;
        let zero = self.fill(&[1, 1], 0.0)?;
        let several = self.g.gt(last, zero)?;
        let on = self.g.mul(room, several)?;
        let on = self.g.mul(on, flag)?;
        let drop = self.g.mul(drop, on)?;
        let ninf_full = self.fill(&[nv, n], f32::NEG_INFINITY)?;
        let kept = self.g.where_(drop, ninf_full, x)?;
        Ok(Rec::Vocab {
            x: kept,
            touched: true,
            pending: super::Pending::default(),
            unmasked: Some(unmasked.unwrap_or(x)),
        })
    }
}
