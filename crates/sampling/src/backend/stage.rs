//! What a sampler looks like as graph ops: [`BackendStage`], the description a CPU sampler gives of
//! itself ([`crate::Sampler::backend_stage`]), and how it transforms the flowing record, which is
//! one of three [`Form`]s.
//!
//! The description separates *structure* (what ops are appended: the stage kind, fixed sizes such as
//! top-k's `k`, and the class of a parameter where its value changes the semantics, such as a
//! temperature of 1 (nothing) or `<= 0` (argmax only)) from *values* (written as inputs every step,
//! so changing a temperature or a `p` between steps rebuilds nothing). [`StageKey`] is the
//! structure; two sequences whose backend prefixes have equal keys share one subgraph.

use crate::sampler::Token;

/// A backend-capable sampler stage and its current parameter values.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendStage {
    /// `greedy`: the first index of the largest logit.
    Greedy,
    /// `dist(seed)`: a draw from the softmax ([`graph::Op::Categorical`]).
    Dist {
        /// The sampler's seed.
        seed: u64,
    },
    /// `top_k(k)`: `k <= 0` does nothing.
    TopK {
        /// How many to keep.
        k: i32,
    },
    /// `top_p(p, min_keep)`: `p >= 1` does nothing.
    TopP {
        /// Mass to keep (already clamped at 0 by [`crate::samplers::TopP::new`]).
        p: f32,
        /// At least this many.
        min_keep: usize,
    },
    /// `min_p(p, min_keep)`: `p <= 0` does nothing.
    MinP {
        /// Ratio to the largest probability.
        p: f32,
        /// At least this many.
        min_keep: usize,
    },
    /// `temp(t)` (and `temp_ext` with `delta <= 0`).
    Temp {
        /// The temperature.
        t: f32,
    },
    /// `temp_ext` with `delta > 0`: the dynamic temperature `min_t + range * (H / ln n)^exponent`
    /// from the entropy `H` of the `n` candidates (a sorted list, or the whole vocabulary).
    TempExt {
        /// `max(0, t - delta)`.
        min_t: f32,
        /// `max_t - min_t`, as the CPU sampler computes it.
        range: f32,
        /// The exponent.
        exponent: f32,
    },
    /// `logit_bias`: `(token, bias)` pairs added to the logits.
    LogitBias {
        /// The pairs, in order.
        biases: Vec<(Token, f32)>,
    },
    /// `penalties` over the last `last_n` tokens (`window`), or the whole history (`None`). A
    /// window's seen tokens and counts are each step's inputs (at most `last_n` entries, never a
    /// vocabulary-sized table); the whole history's counts live on the device, one state tensor
    /// per sequence and stage, which the tail keeps equal to `counts` by writing only the
    /// entries that changed (see `backend::tail`).
    Penalties {
        /// The window (`last_n`): the most distinct tokens it can hold; `None`: the whole history.
        window: Option<usize>,
        /// Repetition penalty.
        repeat: f32,
        /// Frequency penalty.
        freq: f32,
        /// Presence penalty.
        present: f32,
        /// Seen tokens and their counts in the window, by token.
        counts: Vec<(Token, u32)>,
    },
    /// `xtc(p, t, min_keep, seed)` on a sorted list; the step's coin (the Philox `XTC` stream at
    /// the sequence's step) is drawn on the host and passed as a flag.
    Xtc {
        /// Probability of applying at a step.
        p: f32,
        /// Probability threshold.
        t: f32,
        /// At least this many remain.
        min_keep: usize,
        /// The sampler's seed.
        seed: u64,
    },
    /// `mirostat_v2(tau, eta)` on a sorted list, with its current `mu`: the truncation and the draw
    /// run on the backend, which also reads back the drawn token's probability so that the CPU
    /// sampler updates `mu` ([`crate::Sampler::backend_feedback`]).
    MirostatV2 {
        /// The sampler's current `mu`.
        mu: f32,
        /// The sampler's seed.
        seed: u64,
    },
    /// `mirostat(tau, eta, m)` (v1) on a sorted list, with its current `mu`: the Zipf estimate
    /// from the `m` most probable candidates, the truncation to the top `k` and the draw run on
    /// the backend, which reads back the drawn token's probability for the CPU sampler's `mu`
    /// update, as for [`BackendStage::MirostatV2`].
    Mirostat {
        /// The sampler's current `mu`.
        mu: f32,
        /// Candidates in the estimate (`m <= 0`: all).
        m: i32,
        /// The sampler's seed.
        seed: u64,
    },
    /// `typical(p, min_keep)` with `p < 1` (a list, which comes out in typical order; or the
    /// vocabulary, masked).
    Typical {
        /// Mass to keep.
        p: f32,
        /// At least this many.
        min_keep: usize,
    },
    /// `top_n_sigma(n)` with `n > 0`.
    TopNSigma {
        /// Standard deviations below the maximum.
        n: f32,
    },
    /// A stage whose parameters disable it (llama.cpp's samplers that return at once): it appends
    /// nothing, so it does not end the backend prefix.
    Disabled(&'static str),
}

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
    /// descending (ties: lower id first), masked entries `-inf`.
    List(usize),
    /// One selected token per row, `[1, n]` i32 (-1 for a row whose logits were bad).
    Token,
}

/// The structure of one stage as appended: equal keys append equal ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StageKey {
    /// No ops (a disabled stage: `top_k(0)`, `temp(1)`, `top_p(1)`, `min_p(0)`, no biases).
    Nothing,
    /// argmax.
    Greedy,
    /// categorical.
    Dist,
    /// top-k keeping this many.
    TopK(usize),
    /// top-p mask on a list.
    TopP,
    /// top-p on the vocabulary: the `top_p_mask` op (the nucleus, in vocabulary order).
    Nucleus,
    /// min-p mask.
    MinP,
    /// division by the temperature.
    Temp,
    /// the dynamic temperature on a list.
    TempExt,
    /// scatter-add of this many biases.
    LogitBias(usize),
    /// penalties over a window of this many entries (the window's tokens and counts as inputs).
    Penalties(usize),
    /// penalties over the whole history, from device-state token counts.
    PenaltiesHistory,
    /// xtc on a list.
    Xtc,
    /// mirostat v2 on a list (selects).
    MirostatV2,
    /// mirostat v1 on a list (selects).
    Mirostat,
    /// top-n-sigma mask.
    TopNSigma,
    /// locally typical sampling on a list (reorders it).
    Typical,
    /// the dynamic temperature on the vocabulary (`backend/vocab_sorted.rs`).
    TempExtVocab,
    /// mirostat v1 on the vocabulary, its estimate from this many most probable tokens (selects;
    /// `backend/vocab_sorted.rs`).
    MirostatVocab(usize),
    /// locally typical sampling on the vocabulary: a mask (`backend/vocab_sorted.rs`).
    TypicalVocab,
    /// mirostat v2 on the vocabulary (selects: the surprise mask over the row, the draw in token
    /// order; `backend::build`'s `vocab_select`).
    MirostatV2Vocab,
    /// min-p on the vocabulary with `min_keep > 1` or `p > 1`: the passing tokens, or where fewer
    /// than `max(min_keep, 1)` pass, the top this many, in token order (a mask).
    MinPKeep(usize),
    /// top-n-sigma on the vocabulary (finite `n`): the threshold mask, survivors in token order.
    TopNSigmaVocab,
    /// xtc on the vocabulary: the removal as a mask (the `-inf` entries stay, see
    /// `backend::build`'s `vocab_select`).
    XtcVocab,
    /// the dynamic temperature after a cut on the vocabulary (a masked row): as
    /// [`StageKey::TempExtVocab`] with `n` the row's finite entries (`backend/vocab_sorted.rs`).
    TempExtMasked,
    /// xtc after a cut on the vocabulary: as [`StageKey::XtcVocab`] with `min_keep` against the
    /// row's finite entries (`backend::build`'s `vocab_select`).
    XtcMasked,
    /// mirostat v1 after a cut on the vocabulary: as [`StageKey::MirostatVocab`], its estimate
    /// from at most this many and at most the row's finite entries, `k` clamped to their count
    /// (selects; `backend/vocab_sorted.rs`).
    MirostatMasked(usize),
}

impl StageKey {
    /// The stage's name in node names and dumps.
    pub fn name(self) -> &'static str {
        match self {
            StageKey::Nothing => "nothing",
            StageKey::Greedy => "greedy",
            StageKey::Dist => "dist",
            StageKey::TopK(_) => "top_k",
            StageKey::TopP | StageKey::Nucleus => "top_p",
            StageKey::MinP => "min_p",
            StageKey::Temp => "temp",
            StageKey::TempExt => "temp_ext",
            StageKey::LogitBias(_) => "logit_bias",
            StageKey::Penalties(_) | StageKey::PenaltiesHistory => "penalties",
            StageKey::Xtc => "xtc",
            StageKey::MirostatV2 => "mirostat_v2",
            StageKey::Mirostat => "mirostat",
            StageKey::TopNSigma => "top_n_sigma",
            StageKey::Typical => "typical",
            StageKey::TempExtVocab => "temp_ext",
            StageKey::MirostatVocab(_) => "mirostat",
            StageKey::TypicalVocab => "typical",
            StageKey::MirostatV2Vocab => "mirostat_v2",
            StageKey::MinPKeep(_) => "min_p",
            StageKey::TopNSigmaVocab => "top_n_sigma",
            StageKey::XtcVocab => "xtc",
            StageKey::TempExtMasked => "temp_ext",
            StageKey::XtcMasked => "xtc",
            StageKey::MirostatMasked(_) => "mirostat",
        }
    }
}

impl BackendStage {
    /// The stage's name, as in a SPEC.
    pub fn name(&self) -> &'static str {
        match self {
            BackendStage::Greedy => "greedy",
            BackendStage::Dist { .. } => "dist",
            BackendStage::TopK { .. } => "top_k",
            BackendStage::TopP { .. } => "top_p",
            BackendStage::MinP { .. } => "min_p",
            BackendStage::Temp { .. } => "temp",
            BackendStage::TempExt { .. } => "temp_ext",
            BackendStage::LogitBias { .. } => "logit_bias",
            BackendStage::Penalties { .. } => "penalties",
            BackendStage::Xtc { .. } => "xtc",
            BackendStage::MirostatV2 { .. } => "mirostat_v2",
            BackendStage::Mirostat { .. } => "mirostat",
            BackendStage::TopNSigma { .. } => "top_n_sigma",
            BackendStage::Typical { .. } => "typical",
            BackendStage::Disabled(name) => name,
        }
    }

    /// The structure this stage appends on a record of form `form` over a vocabulary of `n_vocab`,
    /// and the form it leaves; `None` where it has no backend form for these values (the backend
    /// prefix ends before it and the CPU runs it).
    ///
    /// The cases without one: a record that is already a token; a temperature that is not finite
    /// and positive (llama.cpp keeps only the argmax, or divides by infinity); a logit bias or
    /// penalties on a list. (Penalties over the whole history have a form: their counts are a
    /// device state tensor.) On the vocabulary view itself the CPU samplers keep their survivors
    /// in token-id order, so these stages have forms there: mirostat_v2, xtc, top-n-sigma and
    /// min-p's fallback in
    /// `backend::build`'s `vocab_select`, a dynamic temp_ext, mirostat (v1) and typical in
    /// `backend/vocab_sorted.rs`. After a cut on the vocabulary (`Form::Masked`) the CPU chain's
    /// list keeps token-id order too ([`crate::Candidates`]' cut list), so they and top-p run on
    /// the masked row, counting its finite entries wherever a count matters (`min_keep`,
    /// temp_ext's `n`, mirostat's estimate): top-p's `top_p_mask`, min-p's fallback, top-n-sigma,
    /// mirostat_v2 and typical as on the vocabulary, a dynamic temp_ext, xtc and mirostat (v1)
    /// in their masked forms.
    pub fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        use BackendStage as S;
        let vocab = matches!(form, Form::Vocab | Form::Masked);
        Some(match (self, form) {
            (_, Form::Token) => return None,
            (S::Greedy, _) => (StageKey::Greedy, Form::Token),
            (S::Dist { .. }, _) => (StageKey::Dist, Form::Token),
            (S::TopK { k }, _) if *k <= 0 => (StageKey::Nothing, form),
            (S::TopK { k }, Form::List(k0)) => {
                let k = (*k as usize).min(k0);
                (StageKey::TopK(k), Form::List(k))
            }
            (S::TopK { k }, _) => {
                let k = (*k as usize).min(n_vocab);
                (StageKey::TopK(k), Form::List(k))
            }
            (S::TopP { p, .. }, _) if *p >= 1.0 => (StageKey::Nothing, form),
            (S::TopP { .. }, Form::List(_)) => (StageKey::TopP, form),
            (S::TopP { .. }, _) => (StageKey::Nucleus, Form::Masked),
            (S::MinP { p, .. }, _) if *p <= 0.0 => (StageKey::Nothing, form),
            (S::MinP { p, min_keep }, _) if vocab && (*p > 1.0 || *min_keep > 1) => {
                (StageKey::MinPKeep((*min_keep).clamp(1, n_vocab)), Form::Masked)
            }
            (S::MinP { .. }, _) if vocab => (StageKey::MinP, Form::Masked),
            (S::MinP { .. }, _) => (StageKey::MinP, form),
            (S::Temp { t }, _) if *t == 1.0 => (StageKey::Nothing, form),
            (S::Temp { t }, _) if *t > 0.0 && t.is_finite() => (StageKey::Temp, form),
            (S::Temp { .. }, _) => return None,
            (S::TempExt { .. }, Form::List(_)) => (StageKey::TempExt, form),
            (S::TempExt { .. }, Form::Vocab) if n_vocab <= 1 => (StageKey::Nothing, form),
            (S::TempExt { .. }, Form::Vocab) => (StageKey::TempExtVocab, form),
            (S::TempExt { .. }, _) => (StageKey::TempExtMasked, form),
            (S::LogitBias { biases }, _) if biases.is_empty() => (StageKey::Nothing, form),
            (S::LogitBias { biases }, _) if vocab => (StageKey::LogitBias(biases.len()), form),
            (S::LogitBias { .. }, _) => return None,
            (S::Penalties { window: Some(w), .. }, _) if vocab => (StageKey::Penalties((*w).min(n_vocab)), form),
            (S::Penalties { window: None, .. }, _) if vocab => (StageKey::PenaltiesHistory, form),
            (S::Penalties { .. }, _) => return None,
            (S::Xtc { .. }, Form::List(_)) => (StageKey::Xtc, form),
            (S::Xtc { .. }, Form::Vocab) if n_vocab < 2 => (StageKey::Nothing, form),
            (S::Xtc { .. }, Form::Vocab) => (StageKey::XtcVocab, Form::Masked),
            (S::Xtc { .. }, _) => (StageKey::XtcMasked, Form::Masked),
            (S::MirostatV2 { .. }, Form::List(_)) => (StageKey::MirostatV2, Form::Token),
            (S::MirostatV2 { .. }, _) => (StageKey::MirostatV2Vocab, Form::Token),
            (S::Mirostat { .. }, Form::List(_)) => (StageKey::Mirostat, Form::Token),
            (S::Mirostat { m, .. }, _) => {
                let m = if *m <= 0 { n_vocab } else { (*m as usize).min(n_vocab) };
                if form == Form::Vocab {
                    (StageKey::MirostatVocab(m), Form::Token)
                } else {
                    (StageKey::MirostatMasked(m), Form::Token)
                }
            }
            (S::TopNSigma { .. }, Form::List(_)) => (StageKey::TopNSigma, form),
            (S::TopNSigma { n }, _) if *n == f32::INFINITY || n_vocab < 2 => (StageKey::Nothing, form),
            (S::TopNSigma { .. }, _) => (StageKey::TopNSigmaVocab, Form::Masked),
            (S::Typical { .. }, Form::List(_)) => (StageKey::Typical, form),
            (S::Typical { .. }, _) => (StageKey::TypicalVocab, Form::Masked),
            (S::Disabled(_), _) => (StageKey::Nothing, form),
        })
    }
}
