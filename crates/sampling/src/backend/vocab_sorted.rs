//! The backend forms on the whole vocabulary of the stages whose CPU samplers used to sort it:
//! the dynamic temperature (`temp_ext` with `delta > 0`), mirostat (v1) and locally typical
//! sampling. On the vocabulary view the CPU samplers keep vocabulary order (docs/SAMPLING.md,
//! "Deliberate differences"), so these forms keep the row in token order too: the dynamic
//! temperature divides the row, mirostat masks all but its top `k` and draws with
//! `categorical` in token order, typical masks the row outside its kept set. Built from existing
//! graph ops only (softmax, row reductions, argsort, gathers), so they run on every backend.
//!
//! After a cut on the vocabulary (`Form::Masked`) the same forms run on the masked row, the
//! dynamic temperature and mirostat counting its finite entries (`masked`), as the CPU chain's
//! cut list holds only those.
//!
//! A child module of `build`: it extends [`super::Ctx`] with one method per stage.

use super::{Ctx, Param, Pending, R, Rec};
use crate::samplers::typical::TYPICAL_UNITS;
use graph::{DType, NodeId};

impl Ctx<'_> {
    /// Of the row `x [nv, n]` (contiguous): `x - max` and the softmax `p = e^(x - max) (1 / sum)`
    /// (`[nv, n]`), `ln sum` and `-H = sum p (x - max - ln sum)` over `p > 0` (`[1, n]`), the sums
    /// in two levels ([`Ctx::row_sum`]).
    fn row_entropy(&mut self, x: NodeId) -> R<(NodeId, NodeId, NodeId, NodeId)> {
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

    /// `temp_ext` (`delta > 0`) of stage `idx` on the vocabulary row `x [n_vocab, n]` (pending
    /// transforms applied), as the CPU sampler does on its vocabulary view: the entropy `H` of the
    /// softmax over the whole row (zero probabilities add nothing) against `ln n_vocab` (every
    /// entry counts, `-inf` ones included), `t = min_t + range (H / ln n)^exponent` (the power as
    /// `exp(e ln x)`, `x^0 = 1` kept), and the row divided by `t`; `t <= 0` keeps the first
    /// maximum, undivided, and masks every other entry (`-inf`), as llama.cpp's `temp_impl` does.
    /// A NaN `t` makes the row NaN (a bad row: the CPU sampler's error).
    ///
    /// `masked` (after a cut on the vocabulary, `StageKey::TempExtMasked`): `n` is the row's
    /// count of finite entries (the CPU chain's list), `ln(1 / n)` computed in the graph; with
    /// `n <= 1` the stage does nothing (`t = 1`), and the masked entries stay `-inf` (also for
    /// `t = +inf`, where the CPU chain's list holds only finite entries).
    pub(super) fn temp_ext_vocab(&mut self, idx: usize, x: NodeId, masked: bool) -> R<NodeId> {
        let (n, nv) = (self.n, self.n_vocab);
        let par = self.input(&format!("s{idx}.temp_ext"), DType::F32, &[4, n], Param::TempExt(idx))?;
        let row = |c: &mut Self, i: usize| c.g.view(par, &[1, n], &[4, 16], 4 * i);
        let (min_t, range, expo, expo0) = (row(self, 0)?, row(self, 1)?, row(self, 2)?, row(self, 3)?);
        let x = self.contiguous(x)?;
        let (_, _, _, neg_h) = self.row_entropy(x)?;
        // norm = H / max_h = (-H) / (-max_h), with max_h = -ln(1 / n) in f32 as the CPU computes it.
        let one = self.fill(&[1, n], 1.0)?;
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let (neg_max_h, several) = if masked {
            // Not -inf (a NaN entry counts and stays: the row fails as a bad row).
            let dead = self.g.equal(x, ninf)?;
            let alive = self.g.scale_bias(dead, -1.0, 1.0)?;
            let len = self.g.sum_rows(alive)?;
            let inv = self.g.div(one, len)?;
            let several = self.g.gt(len, one)?;
            (self.g.log(inv)?, Some((alive, several)))
        } else {
            (self.fill(&[1, 1], (1.0 / nv as f32).ln())?, None)
        };
        let norm = self.g.div(neg_h, neg_max_h)?;
        let mut dyn_t = self.dynamic_temp(norm, [min_t, range, expo, expo0])?;
        if let Some((_, several)) = several {
            dyn_t = self.g.where_(several, dyn_t, one)?;
        }
        // t <= 0 (a NaN t is not: it divides the row into NaN).
        let zero = self.fill(&[1, 1], 0.0)?;
        let neg_t = self.g.neg(dyn_t)?;
        let cold = self.g.ge(neg_t, zero)?;
        let t = self.g.where_(cold, one, dyn_t)?;
        let at = self.g.argmax(x)?;
        let at = self.g.cast(at, DType::F32)?;
        let pos = self.g.arange(DType::F32, &[nv, n], 0.0, 1.0)?;
        let first = self.g.equal(pos, at)?;
        let warm = self.g.scale_bias(cold, -1.0, 1.0)?;
        let keep = self.g.add(first, warm)?;
        let x = self.g.where_(keep, x, ninf)?;
        let divided = self.g.div(x, t)?;
        match several {
            // -inf / +inf would be NaN: the masked entries stay -inf.
            Some((alive, _)) => self.g.where_(alive, divided, ninf),
            None => Ok(divided),
        }
    }

    /// `[nv, n]` mask of the first `count` entries (`count [1, n]` f32, an integer in
    /// `[1, nv]`) of the order `perm` (i32 `[nv, n]`, a stable argsort of `key [nv, n]`; `desc`:
    /// by value descending, else ascending; ties by lower index either way): the entries on the
    /// strict side of the last one's key, and those tied with it up to its index. A threshold, not
    /// a scatter of the ranks, so no row-long loop runs in one invocation on any backend.
    fn first_in_order(&mut self, key: NodeId, perm: NodeId, count: NodeId, desc: bool) -> R<NodeId> {
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

    /// Mirostat (v1) of stage `idx` on the vocabulary row `x [n_vocab, n]`, as the CPU sampler
    /// does on its vocabulary view: the Zipf exponent `s` from the softmax of the `m` most
    /// probable tokens (`m` as the key gives it: every token for `m <= 0` or `m > n_vocab`), in
    /// the order value descending, ties by lower id (the first `min(m - 1, n_vocab - 1)` pairs,
    /// `b_i = ln(p_i / p_{i+1})`, `t_i = ln((i + 2) / (i + 1))`), then
    /// `k = (eps 2^mu / (1 - n_vocab^-eps))^(1/s)` clamped into `[1, n_vocab]` (1 for a NaN `k`)
    /// as in the list form ([`Ctx::mirostat_v1`], the powers as `exp(y ln x)`), the row masked
    /// outside its top `k` (`argsort` and a threshold at the `k`-th), and `categorical` on the masked row in token
    /// order on the `MIROSTAT` stream; the drawn token's probability in the masked row's softmax
    /// is read back for the `mu` update.
    ///
    /// `masked` (after a cut on the vocabulary, `StageKey::MirostatMasked`): the row's finite
    /// entries are its candidates (the CPU chain's list): the estimate from at most that many
    /// (the pairs before the last finite entry), `k` clamped to their count.
    pub(super) fn mirostat_vocab(&mut self, idx: usize, x: NodeId, m: usize, masked: bool) -> R<Rec> {
        let (n, nv) = (self.n, self.n_vocab);
        let par = self.input(&format!("s{idx}.mirostat"), DType::F32, &[2, n], Param::Mirostat(idx))?;
        let row = |c: &mut Self, i: usize| c.g.view(par, &[1, n], &[4, 8], 4 * i);
        let (two_mu, neg_m_lim) = (row(self, 0)?, row(self, 1)?);
        let x = self.contiguous(x)?;
        let one = self.fill(&[1, n], 1.0)?;
        let probs = self.g.soft_max(x, None, 1.0)?;
        let perm = self.g.argsort(x, graph::SortOrder::Desc)?;
        // The `m` most probable in order (every pair enters while i < m - 1 < n_vocab - 1).
        let nb1 = self.g.node(perm).layout.nb[1];
        let top = self.g.view(perm, &[m, n], &[4, nb1], 0)?;
        let top = self.g.cont(top)?;
        let sorted = self.gather(probs, top, nv, m)?;
        let (len, neg_last) = if masked {
            let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
            let alive = self.g.gt(x, ninf)?;
            let len = self.g.sum_rows(alive)?;
            (len, Some(self.g.scale_bias(len, -1.0, 1.0)?))
        } else {
            (self.fill(&[1, n], nv as f32)?, None)
        };
        let kf = self.mirostat_k(sorted, m, neg_last, neg_m_lim, two_mu, len)?;
        // Truncated (the CPU's `as usize`); a NaN k keeps 1.
        let num = self.g.equal(kf, kf)?;
        let kf = self.g.where_(num, kf, one)?;
        let kf = self.g.cast(kf, DType::I32)?;
        let kf = self.g.cast(kf, DType::F32)?;
        let keep = self.first_in_order(x, perm, kf, true)?;
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        let kept = self.g.where_(keep, x, ninf)?;
        self.pre_select = Some(Rec::Vocab { x: kept, touched: true, pending: Pending::default(), unmasked: Some(x) });
        let (tok, valid) = self.draw_position(idx, kept, nv, graph::philox::stream::MIROSTAT)?;
        let p2 = self.g.soft_max(kept, None, 1.0)?;
        let p_sel = self.gather(p2, tok, nv, 1)?;
        self.selected_p = Some((p_sel, idx));
        Ok(Rec::Token(self.fold_token(tok, valid)?))
    }

    /// Locally typical sampling of stage `idx` on the vocabulary row `x [n_vocab, n]`
    /// (contiguous, pending transforms applied), as the CPU sampler does on its vocabulary view:
    /// the softmax and its entropy `H`, the row's `argsort` by `|ln p + H|` ascending (stable:
    /// ties by lower id), the probabilities gathered in that order and their `cumsum`, the
    /// shortest prefix whose mass exceeds `p` (a position is dropped when the mass before it
    /// exceeds `p` and it is at least `min_keep` in), and the row masked outside it (a threshold
    /// at the prefix's last entry, in token order: `Form::Masked`).
    pub(super) fn typical_vocab(&mut self, idx: usize, x: NodeId) -> R<NodeId> {
        let (n, nv) = (self.n, self.n_vocab);
        let pp = self.input(&format!("s{idx}.p"), DType::F32, &[1, n], Param::TypicalP(idx))?;
        let mk = self.input(&format!("s{idx}.neg_min_keep"), DType::F32, &[1, n], Param::TypicalNegMinKeep(idx))?;
        let zero = self.fill(&[1, 1], 0.0)?;
        let (xm, probs, ln_sum, neg_h) = self.row_entropy(x)?;
        // |-ln p - H| = |(x - max) - (ln sum - H)|: the centre is a value near 1 (an f32 ulp of
        // it is small next to the logits'), subtracted once per token; |.| by a select (exact).
        let centre = self.g.add(ln_sum, neg_h)?;
        let d = self.g.sub(xm, centre)?;
        let nd = self.g.neg(d)?;
        let nonneg = self.g.ge(d, zero)?;
        let shifted = self.g.where_(nonneg, d, nd)?;
        let perm = self.g.argsort(shifted, graph::SortOrder::Asc)?;
        // The mass in units of 2^-23, each probability rounded to the nearest (p 2^23 + 1/2 is
        // exact, the cast truncates): integers whose every partial sum stays below 2^24, so the
        // cumsum is exact in f32 in any summation order, on every backend, and equals the CPU
        // sampler's.
        let units = self.g.scale_bias(probs, TYPICAL_UNITS, 0.5)?;
        let units = self.g.cast(units, DType::I32)?;
        let units = self.g.cast(units, DType::F32)?;
        let p_perm = self.gather(units, perm, nv, nv)?;
        let cum = self.g.cumsum(p_perm)?;
        let before = self.g.sub(cum, p_perm)?;
        let threshold = self.g.scale(pp, TYPICAL_UNITS)?;
        let over = self.g.gt(before, threshold)?;
        let pos = self.neg_positions(nv)?;
        let within_mk = self.g.gt(pos, mk)?;
        let beyond_mk = self.g.scale_bias(within_mk, -1.0, 1.0)?;
        let drop = self.g.mul(over, beyond_mk)?;
        let n_drop = self.g.sum_rows(drop)?;
        let count = self.g.scale_bias(n_drop, -1.0, nv as f32)?;
        let keep = self.first_in_order(shifted, perm, count, false)?;
        let ninf = self.fill(&[1, 1], f32::NEG_INFINITY)?;
        self.g.where_(keep, x, ninf)
    }
}
