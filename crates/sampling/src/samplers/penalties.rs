//! `penalties`: repetition, frequency and presence penalties over the last `last_n` accepted
//! tokens (llama.cpp's `llama_sampler_init_penalties`). For a token seen `c > 0` times in the
//! window: a logit `<= 0` is multiplied by `repeat`, a positive one divided by it, then
//! `c * freq + present` is subtracted.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_penalties`,
//! `llama_sampler_penalties_apply`; `common/common.cpp` and `common/arg.cpp` for `last_n`):
//! * `last_n = 0`, or `repeat = 1, freq = 0, present = 0`: disabled (`init_penalties` returns the
//!   empty sampler);
//! * `last_n = -1`: the whole history since reset. This is the common layer's meaning (it
//!   replaces -1 by the context size before calling `init_penalties`, which itself would clamp
//!   every negative `last_n` to 0, disabled); `last_n < -1` is an error, as in the common layer's
//!   `--repeat-last-n` ("invalid repeat-last-n") and the server;
//! * `repeat < 0`: plain arithmetic (a seen token's logit changes sign), accepted; `repeat = +inf`:
//!   a seen token's negative logit becomes `-inf` (banned) and a positive one 0, accepted (an
//!   exact 0 logit becomes `0 * inf = NaN`, which the next stage reports, as any NaN or `+inf`
//!   logit made inside a chain, e.g. a masked token times a negative `repeat`);
//!   `repeat = 0` is an error (every seen positive logit divided by 0 becomes `+inf`), as is
//!   `repeat = -inf` (every seen negative logit becomes `+inf`);
//! * `freq = +inf` or `present = +inf`: every seen token's logit becomes `-inf`, a ban, accepted;
//!   `-inf` would make it `+inf` and is an error;
//! * NaN `repeat`, `freq` or `present`: error.

use crate::backend::prelude::*;
use crate::candidates::Candidates;
use crate::error::{Result, invalid, not_nan};
use crate::sampler::{Sampler, Token};
use std::collections::{HashMap, VecDeque};

/// Repetition / frequency / presence penalties.
#[derive(Debug, Clone)]
pub struct Penalties {
    last_n: Option<usize>,
    repeat: f32,
    freq: f32,
    present: f32,
    prev: VecDeque<Token>,
    counts: HashMap<Token, u32>,
}

const NAME: &str = "penalties";

impl Penalties {
    /// Penalties over the last `last_n` tokens (-1: all, 0: disabled).
    pub fn new(last_n: i32, repeat: f32, freq: f32, present: f32) -> Result<Self> {
        if last_n < -1 {
            return Err(invalid(
                NAME,
                "last_n",
                last_n,
                "must be -1 (all) or >= 0 (llama.cpp's common layer rejects < -1)",
            ));
        }
        not_nan(NAME, "repeat", repeat)?;
        if repeat == 0.0 {
            return Err(invalid(NAME, "repeat", repeat, "must not be 0: a positive logit divided by 0 becomes +inf"));
        }
        if repeat == f32::NEG_INFINITY {
            return Err(invalid(NAME, "repeat", repeat, "must not be -inf: a negative logit times -inf becomes +inf"));
        }
        for (param, v) in [("freq", freq), ("present", present)] {
            not_nan(NAME, param, v)?;
            if v == f32::NEG_INFINITY {
                return Err(invalid(NAME, param, v, "must not be -inf: a seen token's logit would become +inf"));
            }
        }
        let last_n = if last_n == -1 { None } else { Some(last_n as usize) };
        Ok(Self { last_n, repeat, freq, present, prev: VecDeque::new(), counts: HashMap::new() })
    }

    /// `c > 0`: the counts hold no zero (`accept` removes a token whose count reaches 0).
    fn penalise(&self, logit: &mut f32, c: u32) {
        *logit = kernels::penalize::penalize(*logit, c as f32, self.repeat, self.freq, self.present);
    }
}

impl Sampler for Penalties {
    fn name(&self) -> &'static str {
        NAME
    }

    fn accept(&mut self, token: Token) {
        if self.last_n == Some(0) {
            return;
        }
        *self.counts.entry(token).or_insert(0) += 1;
        if let Some(n) = self.last_n
            && self.prev.len() >= n
            && let Some(old) = self.prev.pop_front()
            && let Some(c) = self.counts.get_mut(&old)
        {
            *c -= 1;
            if *c == 0 {
                self.counts.remove(&old);
            }
        }
        self.prev.push_back(token);
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.last_n == Some(0)
            || (self.repeat == 1.0 && self.freq == 0.0 && self.present == 0.0)
            || self.counts.is_empty()
        {
            return Ok(());
        }
        if let Some(logits) = cur.vocab_logits_mut() {
            for (&tok, &c) in &self.counts {
                if let Some(l) = logits.get_mut(tok as usize) {
                    self.penalise(l, c);
                }
            }
            return Ok(());
        }
        let list = cur.list_mut(NAME)?;
        for t in list.iter_mut() {
            if let Some(&c) = self.counts.get(&t.id) {
                self.penalise(&mut t.logit, c);
            }
        }
        cur.set_sorted(false);
        Ok(())
    }

    fn reset(&mut self) {
        self.prev.clear();
        self.counts.clear();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

const WINDOW: u32 = 0;
const HISTORY: u32 = 1;

/// On the vocabulary (or after a cut on it); on a list it has no form. Over a window of `last_n`
/// tokens: the window's seen tokens and `count * freq + present` are each step's inputs (at most
/// `last_n` entries, never a vocabulary-sized table), their logits gathered, penalised and
/// written into a copy of the row. Over the whole history: the counts live on the device (one
/// state tensor per sequence and stage, written as they change), and one `penalize` pass.
impl BackendStage for Penalties {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        if self.last_n == Some(0) || (self.repeat == 1.0 && self.freq == 0.0 && self.present == 0.0) {
            return Some((StageKey::nothing(), form));
        }
        if !matches!(form, Form::Vocab | Form::Masked) {
            return None;
        }
        Some(match self.last_n {
            Some(w) => (StageKey::new::<Self>(NAME, WINDOW, w.min(n_vocab)), form),
            None => (StageKey::new::<Self>(NAME, HISTORY, 0), form),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let Record::Vocab { x, unmasked, .. } = cx.materialize(rec)? else { return Ok(rec) };
        let (n, nv) = (cx.n(), cx.n_vocab());
        if key.variant() == HISTORY {
            // One pass (`graph::Op::Penalize`, the CPU sampler's f32 arithmetic) where a token's
            // count is positive. Penalties keep finite values finite: the unmasked row stays.
            let c = cx.token_values(|s, _| s.downcast_ref::<Self>().map(|p| p.counts.clone()))?;
            let par = cx.param::<Self>("penalties", 3, |s, out| {
                for v in [s.repeat, s.freq, s.present] {
                    out.f32(v);
                }
            })?;
            let x = cx.g.penalize(x, c, par)?;
            return Ok(Record::Vocab { x, touched: true, pending: Pending::default(), unmasked });
        }
        let m = key.size();
        let stage = cx.stage();
        let field = |part: u8| {
            Field::new(move |row, out| {
                let s = row.stage::<Self>(stage)?;
                window_entries(s, m, row.n_vocab(), |e| match part {
                    0 => out.i32(e.0),
                    1 => out.f32(e.1),
                    _ => out.f32(e.2),
                });
                Ok(())
            })
        };
        // The window's tokens' logits are gathered, penalised as the CPU sampler does, and
        // written into a copy of the row (the logits themselves stay as they are).
        let ids = cx.input(&format!("s{stage}.pen_ids"), DType::I32, &[m, n], vec![field(0)])?;
        let rep = cx.input(&format!("s{stage}.pen_repeat"), DType::F32, &[m, n], vec![field(1)])?;
        let sub = cx.input(&format!("s{stage}.pen_sub"), DType::F32, &[m, n], vec![field(2)])?;
        let v = cx.gather(x, ids, nv, m)?;
        let zero = cx.fill(&[1, 1], 0.0)?;
        let positive = cx.g.gt(v, zero)?;
        let down = cx.g.div(v, rep)?;
        let up = cx.g.mul(v, rep)?;
        let scaled = cx.g.where_(positive, down, up)?;
        let pen = cx.g.sub(scaled, sub)?;
        let copy = cx.g.cont(x)?;
        let flat = cx.g.reshape(copy, &[1, nv * n])?;
        let at = cx.flat_index(ids, nv, m)?;
        let vals = cx.g.reshape(pen, &[1, m * n])?;
        let written = cx.g.set_rows(flat, vals, at)?;
        // Penalties keep finite values finite: the unmasked row stays as it was.
        Ok(Record::Vocab { x: cx.g.reshape(written, &[nv, n])?, touched: true, pending: Pending::default(), unmasked })
    }
}

/// The `m` entries of a window's penalties, `(token, repeat, count * freq + present)` in f32 as
/// the CPU sampler computes it, by token: padded by repeating an entry (the same value written
/// twice), or with an identity entry (token 0, `x * 1 - 0`) when none was seen. Tokens outside
/// the vocabulary are ignored, as on the CPU.
fn window_entries(s: &Penalties, m: usize, n_vocab: usize, mut put: impl FnMut((i32, f32, f32))) {
    let mut seen: Vec<(i32, f32, f32)> = s
        .counts
        .iter()
        .filter(|&(&t, _)| (t as usize) < n_vocab)
        .map(|(&t, &c)| (t as i32, s.repeat, kernels::penalize::subtrahend(c as f32, s.freq, s.present)))
        .collect();
    seen.sort_unstable_by_key(|e| e.0);
    let pad = seen.first().copied().unwrap_or((0, 1.0, 0.0));
    seen.iter().copied().chain(std::iter::repeat(pad)).take(m).for_each(&mut put);
}
