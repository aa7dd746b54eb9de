//! The candidate array that flows through a chain (llama.cpp's `llama_token_data_array`) and the
//! chain's final output.
//!
//! # Representation
//!
//! A [`Candidates`] starts as a *vocabulary view*: it borrows the raw logits row (f32, vocab order)
//! and materialises nothing. Token `i`'s logit is `row[i] / div`, where `div` is a pending
//! temperature (1 until a `temp` stage sets it), so `temp` on the full vocabulary costs nothing.
//! The first truncating stage (top-k, top-p, min-p) or selecting stage (greedy, dist) reads the
//! row directly with the kernels of [`crate::kernels`] and, for the truncating ones, replaces the
//! view with a short *list* of [`TokenData`] (id, logit, p). A stage that has no fast path on the
//! vocabulary view (typical, mirostat, XTC, ...) first turns the view into a vocabulary-sized
//! list, exactly what llama.cpp starts from; stages that only touch a few tokens (penalties,
//! logit bias, DRY) take an owned copy of the row and edit it in place.
//!
//! A list left by a cut on the vocabulary view (min-p, top-p, typical, tail-free, xtc,
//! top-n-sigma there) is marked as the *cut*: its survivors in token-id order stand for the masked
//! vocabulary row, and the stages with vocabulary-view forms run those on it
//! ([`Candidates::cut_len`]); a stage that sorts or replaces the list ends the mark.
//!
//! The list has llama.cpp's `sorted` flag (sorted by logit descending) and `selected` index.
//! Ties are broken by the lower token id everywhere (llama.cpp leaves their order unspecified).
//!
//! Input checking is fused into the first full scan of the row: NaN and +inf logits, an all
//! `-inf` row and an empty array are errors naming the stage that found them.

use crate::error::{Result, SamplingError};
use crate::kernels;
use std::borrow::Cow;

/// One candidate token: id, logit and probability (llama.cpp's `llama_token_data`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenData {
    /// Token id (index into the vocabulary).
    pub id: u32,
    /// Logit after the stages applied so far.
    pub logit: f32,
    /// Probability, valid after a stage that computes a softmax (not necessarily normalised over
    /// the current set: llama.cpp keeps the pre-truncation probabilities after top-p).
    pub p: f32,
}

#[derive(Debug, Clone)]
enum Repr<'a> {
    /// The whole vocabulary in vocab order; token `i`'s logit is `logits[i] / div`.
    Vocab { logits: Cow<'a, [f32]>, div: f32 },
    /// An explicit list.
    List(Vec<TokenData>),
}

/// The candidates of one row while a chain runs.
#[derive(Debug, Clone)]
pub struct Candidates<'a> {
    n_vocab: usize,
    repr: Repr<'a>,
    sorted: bool,
    selected: Option<usize>,
    /// The list is what a cut on the vocabulary left (min-p, top-p, typical, tail-free, xtc or
    /// top-n-sigma on the vocabulary view): the survivors in token-id order, standing for the
    /// masked vocabulary row. The later vocabulary stages keep that order ([`Candidates::cut_len`]);
    /// cleared by every stage that sorts or replaces the list.
    cut: bool,
}

/// What a chain produced for one row: the surviving candidates sorted by `p` descending with `p`
/// normalised over them (masked, `-inf`, tokens are absent), and the selected token, if a stage
/// selected one.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleOutput {
    /// The token chosen by the chain's selecting stage, if any.
    pub selected: Option<u32>,
    /// Surviving candidates, by `p` descending (ties: lower id first).
    pub candidates: Vec<TokenData>,
}

/// The candidate lists' order: logit descending (-0.0 ties +0.0: `kernels::select::desc`, the
/// graph's `top_k` order), ties by id ascending.
pub(crate) fn desc(a: &TokenData, b: &TokenData) -> std::cmp::Ordering {
    kernels::desc(&(a.id, a.logit), &(b.id, b.logit))
}

/// Sets each entry's `p` to its probability in llama.cpp's `f32` softmax over `list`
/// (`kernels::llama_f32`: `expf`, a sequential `f32` sum in the list's order): what llama.cpp's
/// list stages decide with, where a decision must be its own to the last bit.
pub(crate) fn llama_f32_probs(list: &mut [TokenData]) {
    let (max, sum) = ::kernels::llama_f32::softmax_sum(list.iter().map(|t| t.logit));
    for t in list.iter_mut() {
        t.p = ::kernels::llama_f32::prob(t.logit, max, sum);
    }
}

/// Sorts by logit descending, ties by id ascending ([`desc`]).
pub(crate) fn sort_desc(list: &mut [TokenData]) {
    list.sort_unstable_by(desc);
}

/// Checks a list: non-empty, no NaN/+inf, not all `-inf`.
pub(crate) fn check_list(stage: &'static str, list: &[TokenData]) -> Result<()> {
    if list.is_empty() {
        return Err(SamplingError::Empty { stage });
    }
    let mut max = f32::NEG_INFINITY;
    for (i, t) in list.iter().enumerate() {
        if t.logit.is_nan() || t.logit == f32::INFINITY {
            return Err(SamplingError::BadLogit { stage, index: i, token: t.id, value: t.logit });
        }
        max = max.max(t.logit);
    }
    if max == f32::NEG_INFINITY {
        return Err(SamplingError::AllMasked { stage });
    }
    Ok(())
}

/// Turns the result of a vectorised scan into an error when it saw a bad value or no finite one.
pub(crate) fn check_scan(stage: &'static str, row: &[f32], bad: bool, max: f32) -> Result<()> {
    if bad {
        let (index, value) = kernels::first_bad(row).unwrap_or((0, f32::NAN));
        return Err(SamplingError::BadLogit { stage, index, token: index as u32, value });
    }
    if max == f32::NEG_INFINITY {
        return Err(SamplingError::AllMasked { stage });
    }
    Ok(())
}

/// Index drawn by inverse CDF from the (not necessarily normalised) weights `p` of `list` with the
/// uniform `u` in `[0, 1)` (53 bits, see `Rng::next_draw`): the first index whose cumulative weight exceeds `u * total`. A zero
/// weight is never chosen.
pub(crate) fn draw_index(list: &[TokenData], u: f64) -> usize {
    let total: f64 = list.iter().map(|t| f64::from(t.p)).sum();
    let target = u * total;
    let mut cum = 0.0f64;
    let mut last_nonzero = 0;
    for (i, t) in list.iter().enumerate() {
        if t.p > 0.0 {
            cum += f64::from(t.p);
            last_nonzero = i;
            if cum > target {
                return i;
            }
        }
    }
    last_nonzero
}

impl<'a> Candidates<'a> {
    /// A vocabulary view of a raw logits row (token `i` has logit `row[i]`). Nothing is copied.
    pub fn from_row(row: &'a [f32]) -> Result<Self> {
        if row.is_empty() {
            return Err(SamplingError::Empty { stage: "input" });
        }
        Ok(Self {
            n_vocab: row.len(),
            repr: Repr::Vocab { logits: Cow::Borrowed(row), div: 1.0 },
            sorted: false,
            selected: None,
            cut: false,
        })
    }

    /// An explicit candidate list over a vocabulary of `n_vocab` tokens (checked: non-empty, ids
    /// below `n_vocab`, no NaN/+inf, not all `-inf`).
    pub fn from_list(list: Vec<TokenData>, n_vocab: usize) -> Result<Candidates<'static>> {
        check_list("input", &list)?;
        if let Some(t) = list.iter().find(|t| t.id as usize >= n_vocab) {
            return Err(SamplingError::TokenOutOfRange { stage: "input", token: t.id, n_vocab });
        }
        Ok(Candidates { n_vocab, repr: Repr::List(list), sorted: false, selected: None, cut: false })
    }

    /// The list a cut on the vocabulary leaves (the finite entries of a masked row, in token-id
    /// order: checked as [`Candidates::from_list`], ids strictly increasing): later stages treat
    /// it as the CPU chain treats its own list after such a cut (a backend prefix ending on a
    /// masked row hands its CPU suffix this).
    pub fn from_cut_list(list: Vec<TokenData>, n_vocab: usize) -> Result<Candidates<'static>> {
        let mut c = Self::from_list(list, n_vocab)?;
        c.cut = c.in_token_order();
        Ok(c)
    }

    /// Vocabulary size of the row this array came from (mirostat's `n_vocab`).
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Vocab { logits, .. } => logits.len(),
            Repr::List(l) => l.len(),
        }
    }

    /// Whether there are no candidates (never true for a constructed array).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the array is still the lazily represented whole vocabulary.
    pub fn is_vocab_view(&self) -> bool {
        matches!(self.repr, Repr::Vocab { .. })
    }

    /// llama.cpp's `sorted` flag: the list is sorted by logit descending.
    pub fn is_sorted(&self) -> bool {
        self.sorted
    }

    /// llama.cpp's `selected`: the index (into the current array) chosen by a selecting stage.
    pub fn selected(&self) -> Option<usize> {
        self.selected
    }

    /// Token id of the selected index.
    pub fn selected_token(&self) -> Option<u32> {
        let i = self.selected?;
        match &self.repr {
            Repr::Vocab { .. } => Some(i as u32),
            Repr::List(l) => l.get(i).map(|t| t.id),
        }
    }

    /// Sets the selected index.
    pub fn set_selected(&mut self, i: Option<usize>) {
        self.selected = i;
    }

    /// The raw row and pending divisor while this is a vocabulary view.
    pub(crate) fn vocab_row(&self) -> Option<(&[f32], f32)> {
        match &self.repr {
            Repr::Vocab { logits, div } => Some((logits, *div)),
            Repr::List(_) => None,
        }
    }

    /// Applies a pending temperature division of a vocabulary view (one pass, takes a copy).
    pub(crate) fn flush_div(&mut self) {
        if let Repr::Vocab { logits, div } = &mut self.repr
            && *div != 1.0
        {
            let d = *div;
            let v: Vec<f32> = logits.iter().map(|&x| x / d).collect();
            *logits = Cow::Owned(v);
            *div = 1.0;
        }
    }

    /// Sets the pending divisor of a vocabulary view (flushing an earlier one first).
    pub(crate) fn set_div(&mut self, t: f32) {
        self.flush_div();
        if let Repr::Vocab { div, .. } = &mut self.repr {
            *div = t;
        }
    }

    /// Mutable logits of a vocabulary view (copies the row once, applies any pending division);
    /// `None` once a stage made a list (use [`Candidates::list_mut`]).
    pub fn vocab_logits_mut(&mut self) -> Option<&mut [f32]> {
        self.flush_div();
        match &mut self.repr {
            Repr::Vocab { logits, .. } => Some(logits.to_mut()),
            Repr::List(_) => None,
        }
    }

    /// The explicit list, materialising the vocabulary view first (checked, like llama.cpp's
    /// initial array: every token, `p = 0`, unsorted).
    pub fn list_mut(&mut self, stage: &'static str) -> Result<&mut Vec<TokenData>> {
        if let Repr::Vocab { logits, div } = &self.repr {
            let (max, bad) = kernels::max_bad(logits);
            check_scan(stage, logits, bad, max)?;
            let d = *div;
            let list: Vec<TokenData> = logits
                .iter()
                .enumerate()
                .map(|(i, &x)| TokenData { id: i as u32, logit: if d == 1.0 { x } else { x / d }, p: 0.0 })
                .collect();
            self.repr = Repr::List(list);
            self.sorted = false;
        }
        match &mut self.repr {
            Repr::List(l) => Ok(l),
            Repr::Vocab { .. } => unreachable!("materialised above"),
        }
    }

    /// Read-only list (materialising if needed).
    pub fn list(&mut self, stage: &'static str) -> Result<&[TokenData]> {
        Ok(self.list_mut(stage)?.as_slice())
    }

    /// Replaces the array with `list`.
    pub(crate) fn set_list(&mut self, list: Vec<TokenData>, sorted: bool) {
        self.repr = Repr::List(list);
        self.sorted = sorted;
        self.selected = None;
        self.cut = false;
    }

    /// Replaces the array with `list`, the survivors of a cut on the vocabulary in token-id order
    /// (unsorted; see [`Candidates::cut_len`]).
    pub(crate) fn set_cut_list(&mut self, list: Vec<TokenData>) {
        self.set_list(list, false);
        self.cut = true;
    }

    /// Marks the current list as a cut on the vocabulary (token-id order, unsorted).
    pub(crate) fn mark_cut(&mut self) {
        if matches!(self.repr, Repr::List(_)) {
            self.sorted = false;
            self.cut = true;
        }
    }

    /// Whether the list's ids strictly increase (token-id order).
    fn in_token_order(&self) -> bool {
        match &self.repr {
            Repr::List(l) => l.windows(2).all(|w| w[0].id < w[1].id),
            Repr::Vocab { .. } => false,
        }
    }

    /// After a cut on the vocabulary (the list in token-id order that stands for a masked row):
    /// drops the list's `-inf` entries (the masked row's read-back and the backend's counts see
    /// only finite entries) and returns how many remain; `None` for the vocabulary view and for
    /// every other list (after top-k, or a stage that reordered it). The vocabulary stages run
    /// their vocabulary-view forms on it, in token order (docs/SAMPLING.md, "Deliberate
    /// differences").
    pub(crate) fn cut_len(&mut self) -> Option<usize> {
        if !self.cut || self.sorted || !self.in_token_order() {
            self.cut = false;
            return None;
        }
        let Repr::List(l) = &mut self.repr else { return None };
        if l.iter().any(|t| t.logit == f32::NEG_INFINITY) && l.iter().any(|t| t.logit > f32::NEG_INFINITY) {
            l.retain(|t| t.logit != f32::NEG_INFINITY);
            self.selected = None;
        }
        Some(l.len())
    }

    /// Sets the `sorted` flag (a sorted list is no longer a cut's token-order list).
    pub(crate) fn set_sorted(&mut self, sorted: bool) {
        self.sorted = sorted;
        if sorted {
            self.cut = false;
        }
    }

    /// Sorts the list by logit descending (ties: lower id first) unless already sorted.
    pub(crate) fn sort(&mut self, stage: &'static str) -> Result<()> {
        if !self.sorted {
            let l = self.list_mut(stage)?;
            sort_desc(l);
            self.sorted = true;
            self.cut = false;
        }
        Ok(())
    }

    /// llama.cpp's `softmax_impl(cur_p, do_sort)`: optionally sorts, then sets `p` to the softmax
    /// of the logits over the current list. Checks the list (NaN/+inf, all `-inf`).
    pub fn softmax(&mut self, stage: &'static str, do_sort: bool) -> Result<()> {
        if do_sort {
            self.sort(stage)?;
        }
        let sorted = self.sorted;
        let l = self.list_mut(stage)?;
        check_list(stage, l)?;
        let max = if sorted { l[0].logit } else { l.iter().fold(f32::NEG_INFINITY, |m, t| m.max(t.logit)) };
        let mut sum = 0.0f64;
        for t in l.iter_mut() {
            t.p = kernels::exp_neg(t.logit - max);
            sum += f64::from(t.p);
        }
        let inv = (1.0 / sum) as f32;
        for t in l.iter_mut() {
            t.p *= inv;
        }
        Ok(())
    }

    /// The chain's output for this array: surviving tokens (logit not `-inf`), `p` normalised
    /// over them (computed in f64 from the logits), sorted by `p` descending, ties by lower id.
    pub fn output(&self) -> Result<SampleOutput> {
        let mut out = self.in_order()?;
        out.sort_unstable_by(|a, b| b.p.total_cmp(&a.p).then_with(|| desc(a, b)));
        let selected = self.selected_token();
        Ok(SampleOutput { selected, candidates: out })
    }

    /// The surviving tokens with `p` as [`Candidates::output`] gives them, in this array's own
    /// order (token-id order on the vocabulary view, list order after a stage made a list): the
    /// order `dist` walks, and speculative verification's residual draw with it.
    pub(crate) fn in_order(&self) -> Result<Vec<TokenData>> {
        const STAGE: &str = "output";
        let mut out: Vec<TokenData> = match &self.repr {
            Repr::Vocab { logits, div } => {
                let (max, bad) = kernels::max_bad(logits);
                check_scan(STAGE, logits, bad, max)?;
                logits
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| **x != f32::NEG_INFINITY)
                    .map(|(i, &x)| TokenData { id: i as u32, logit: if *div == 1.0 { x } else { x / div }, p: 0.0 })
                    .collect()
            }
            Repr::List(l) => {
                check_list(STAGE, l)?;
                l.iter().copied().filter(|t| t.logit != f32::NEG_INFINITY).collect()
            }
        };
        let max = out.iter().fold(f32::NEG_INFINITY, |m, t| m.max(t.logit));
        let w: Vec<f64> = out.iter().map(|t| (f64::from(t.logit) - f64::from(max)).exp()).collect();
        let sum: f64 = w.iter().sum();
        for (t, w) in out.iter_mut().zip(w) {
            t.p = (w / sum) as f32;
        }
        Ok(out)
    }
}

/// `token`'s rank in a raw logits `row`: 1 + how many logits are strictly greater than its own,
/// so tied tokens share a rank and the most likely token is 1 (a token outside the row, or
/// with a NaN logit, which no chain selects, is 1: nothing compares greater). The backend's
/// log-probability reservation counts the same on the device (`token_rank`).
pub fn rank(row: &[f32], token: crate::sampler::Token) -> u32 {
    let own = row.get(token as usize).copied().unwrap_or(f32::NAN);
    1 + row.iter().filter(|&&x| x > own).count() as u32
}
