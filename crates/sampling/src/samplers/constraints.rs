//! The simple constraints that serving APIs expose (vLLM's and OpenAI's sampling parameters), each
//! a stage that bans tokens given the history: `allowed_tokens` (only these ids), `bad_words`
//! (multi-token sequences banned given the history), `min_tokens` (end-of-generation tokens banned
//! until `n` tokens were accepted) and `ignore_eos` (end-of-generation tokens always banned).
//!
//! A ban adds `-inf` to a token's logit (`x + -inf`: a finite logit becomes `-inf`, a NaN or
//! `+inf` one stays a bad row), on the vocabulary view or on a candidate list (which it leaves
//! unsorted, as DRY does); tokens outside the vocabulary are ignored. None depends on the logits,
//! so each backend form is a host-computed list of banned tokens (a fixed capacity, padded with
//! -1) added with `Lowering::add_sparse`; `allowed_tokens` instead keeps a dense row of its
//! allowed ids. The end-of-generation ids are given (`eos=`), since this crate has no vocabulary.
//!
//! Edge values (no llama.cpp anchor: these follow vLLM's `SamplingParams`): `allowed_tokens` with no
//! id is an error (nothing could be sampled); `bad_words` skips empty sequences, and a one-token
//! sequence is always banned; `min_tokens(n=0)` and `bad_words` with no sequence append nothing;
//! `min_tokens` and `ignore_eos` with no `eos` id are errors.

use crate::backend::prelude::*;
use crate::candidates::Candidates;
use crate::error::{Result, invalid};
use crate::sampler::{Sampler, Token};

/// Adds `-inf` to the logits of `tokens` (those inside the vocabulary).
fn ban(cur: &mut Candidates<'_>, stage: &'static str, tokens: &[Token]) -> Result<()> {
    if tokens.is_empty() {
        return Ok(());
    }
    if let Some(logits) = cur.vocab_logits_mut() {
        for &t in tokens {
            if let Some(l) = logits.get_mut(t as usize) {
                *l += f32::NEG_INFINITY;
            }
        }
        return Ok(());
    }
    for e in cur.list_mut(stage)?.iter_mut().filter(|e| tokens.contains(&e.id)) {
        e.logit += f32::NEG_INFINITY;
    }
    cur.set_sorted(false);
    Ok(())
}

/// A stage that bans the tokens `banned` gives each step: its key (a capacity of `m` banned
/// tokens; after a cut the record keeps `-inf` entries the CPU chain's list holds, see
/// `StageKey::keeping_inf`) and its lowering (`m` ids, -1 padded, `-inf` added).
trait Bans: Sampler + Sized {
    const NAME: &'static str;

    /// The most tokens a step bans.
    fn capacity(&self) -> usize;

    /// This step's banned tokens.
    fn banned(&self) -> Vec<Token>;

    fn ban_key(&self, form: Form) -> Option<(StageKey, Form)> {
        let m = self.capacity();
        Some(match form {
            _ if m == 0 => (StageKey::nothing(), form),
            Form::Masked => (StageKey::new::<Self>(Self::NAME, 0, m).keeping_inf(), form),
            _ => (StageKey::new::<Self>(Self::NAME, 0, m), form),
        })
    }

    fn lower_bans(cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let (m, n, stage) = (key.size(), cx.n(), cx.stage());
        let ids = Field::new(move |row, out| {
            let banned = row.stage::<Self>(stage)?.banned();
            for j in 0..m {
                out.i32(banned.get(j).map_or(-1, |&t| i32::try_from(t).unwrap_or(-1)));
            }
            Ok(())
        });
        let ids = cx.input(&format!("s{stage}.banned"), DType::I32, &[m, n], vec![ids])?;
        let vals = cx.input(
            &format!("s{stage}.ban"),
            DType::F32,
            &[m, n],
            vec![Field::constant(&vec![f32::NEG_INFINITY; m])],
        )?;
        cx.add_sparse(rec, ids, vals)
    }
}

/// Implements `Sampler::backend` and `BackendStage` for a [`Bans`] stage.
macro_rules! ban_stage {
    ($t:ty) => {
        impl BackendStage for $t {
            fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
                self.ban_key(form)
            }

            fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
                <$t>::lower_bans(cx, key, rec)
            }
        }
    };
}

/// The end-of-generation ids of `stage`, checked non-empty.
fn eos_ids(stage: &'static str, eos: Vec<Token>) -> Result<Vec<Token>> {
    if eos.is_empty() {
        return Err(invalid(stage, "eos", "(none)", "must list the end-of-generation token ids"));
    }
    Ok(eos)
}

/// Bans `bad_words`: a word's last token wherever the history ends with the rest of it.
#[derive(Debug, Clone)]
pub struct BadWords {
    words: Vec<Vec<Token>>,
    /// The last `longest - 1` accepted tokens (all a match can look at).
    recent: Vec<Token>,
}

impl BadWords {
    /// Bans `words` (token sequences; empty ones skipped).
    pub fn new(words: Vec<Vec<Token>>) -> Self {
        Self { words: words.into_iter().filter(|w| !w.is_empty()).collect(), recent: Vec::new() }
    }
}

impl Bans for BadWords {
    const NAME: &'static str = "bad_words";

    fn capacity(&self) -> usize {
        self.words.len()
    }

    fn banned(&self) -> Vec<Token> {
        let mut out: Vec<Token> =
            self.words.iter().filter(|w| self.recent.ends_with(&w[..w.len() - 1])).map(|w| w[w.len() - 1]).collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

impl Sampler for BadWords {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn accept(&mut self, token: Token) {
        let keep = self.words.iter().map(Vec::len).max().unwrap_or(1).saturating_sub(1);
        self.recent.push(token);
        if self.recent.len() > keep {
            self.recent.drain(..self.recent.len() - keep);
        }
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        ban(cur, Self::NAME, &self.banned())
    }

    fn reset(&mut self) {
        self.recent.clear();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

ban_stage!(BadWords);

/// Bans the end-of-generation tokens until `n` tokens were accepted.
#[derive(Debug, Clone)]
pub struct MinTokens {
    n: usize,
    eos: Vec<Token>,
    accepted: usize,
}

impl MinTokens {
    /// At least `n` tokens before any of `eos` (`n = 0`: nothing). Error: no `eos` id.
    pub fn new(n: usize, eos: Vec<Token>) -> Result<Self> {
        Ok(Self { n, eos: eos_ids("min_tokens", eos)?, accepted: 0 })
    }
}

impl Bans for MinTokens {
    const NAME: &'static str = "min_tokens";

    fn capacity(&self) -> usize {
        if self.n == 0 { 0 } else { self.eos.len() }
    }

    fn banned(&self) -> Vec<Token> {
        if self.accepted < self.n { self.eos.clone() } else { Vec::new() }
    }
}

impl Sampler for MinTokens {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn accept(&mut self, _token: Token) {
        self.accepted += 1;
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        ban(cur, Self::NAME, &self.banned())
    }

    fn reset(&mut self) {
        self.accepted = 0;
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

ban_stage!(MinTokens);

/// Always bans the end-of-generation tokens.
#[derive(Debug, Clone)]
pub struct IgnoreEos {
    eos: Vec<Token>,
}

impl IgnoreEos {
    /// Bans `eos`. Error: no id.
    pub fn new(eos: Vec<Token>) -> Result<Self> {
        Ok(Self { eos: eos_ids("ignore_eos", eos)? })
    }
}

impl Bans for IgnoreEos {
    const NAME: &'static str = "ignore_eos";

    fn capacity(&self) -> usize {
        self.eos.len()
    }

    fn banned(&self) -> Vec<Token> {
        self.eos.clone()
    }
}

impl Sampler for IgnoreEos {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        ban(cur, Self::NAME, &self.eos)
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

ban_stage!(IgnoreEos);

/// Keeps only the allowed token ids (vLLM's `allowed_token_ids`): every other logit `-inf`.
#[derive(Debug, Clone)]
pub struct AllowedTokens {
    ids: Vec<Token>,
}

const ALLOWED: &str = "allowed_tokens";

impl AllowedTokens {
    /// Only `ids` (sorted, without repeats). Error: no id.
    pub fn new(mut ids: Vec<Token>) -> Result<Self> {
        if ids.is_empty() {
            return Err(invalid(ALLOWED, "ids", "(none)", "must list at least one token: nothing could be sampled"));
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(Self { ids })
    }
}

impl Sampler for AllowedTokens {
    fn name(&self) -> &'static str {
        ALLOWED
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if let Some(logits) = cur.vocab_logits_mut() {
            let mut next = self.ids.iter().peekable();
            for (i, l) in logits.iter_mut().enumerate() {
                if next.peek().is_some_and(|&&t| t as usize == i) {
                    next.next();
                } else {
                    *l += f32::NEG_INFINITY;
                }
            }
            return Ok(());
        }
        for e in cur.list_mut(ALLOWED)?.iter_mut().filter(|e| self.ids.binary_search(&e.id).is_err()) {
            e.logit += f32::NEG_INFINITY;
        }
        cur.set_sorted(false);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// A dense row of the allowed ids (`scatter_add` of ones into zeros), and `-inf` added where it
/// is 0: on the vocabulary row (after a cut, the row before it too), or gathered at a list's ids
/// (the list then unsorted). After a cut the record keeps `-inf` entries the CPU chain's list
/// holds (`StageKey::keeping_inf`).
impl BackendStage for AllowedTokens {
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        let key = StageKey::new::<Self>(ALLOWED, 0, self.ids.len());
        Some((if form == Form::Masked { key.keeping_inf() } else { key }, form))
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let (m, n, nv, stage) = (key.size(), cx.n(), cx.n_vocab(), cx.stage());
        let ids = Field::new(move |row, out| {
            let s = row.stage::<Self>(stage)?;
            s.ids.iter().for_each(|&t| out.token(t));
            Ok(())
        });
        let ids = cx.input(&format!("s{stage}.allowed"), DType::I32, &[m, n], vec![ids])?;
        // 0 where allowed, -inf elsewhere: a dense row of the allowed ids (`scatter_add` of
        // ones), then a select ((allowed - 1) * inf would be NaN at 0).
        let zero = cx.g.fill(DType::F32, &[nv, n], 0.0)?;
        let one = cx.fill(&[1], 1.0)?;
        let allowed = cx.g.scatter_add(zero, ids, one)?;
        let zero1 = cx.fill(&[1, 1], 0.0)?;
        let zeros = cx.fill(&[nv, n], 0.0)?;
        let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
        let is = cx.g.gt(allowed, zero1)?;
        let add = cx.g.where_(is, zeros, ninf)?;
        cx.add_row(rec, add)
    }
}
