//! `dist`: draws a token from the softmax of the candidates' logits (llama.cpp's
//! `llama_sampler_init_dist`), with the uniform number from the Philox generator at
//! `(seed, step, DRAW stream)`.
//!
//! On the vocabulary view it never builds a candidate array: one pass computes each 1024-token
//! block's max and sum of exponentials (online softmax), the uniform number picks the block by its
//! mass, and only that block is rescanned to find the token. llama.cpp selects the first index
//! whose running sum reaches `u * sum`; here the first index whose running sum *exceeds* it, so a
//! zero-probability (masked) token is never drawn even when `u = 0`.
//!
//! Edge values: the only parameter is the seed, any `u64` (llama.cpp's `llama_sampler_init_dist`
//! takes a `uint32_t` and treats `LLAMA_DEFAULT_SEED` as "random"; here every seed is a seed).
//! One candidate: selected (llama.cpp's `llama_sampler_dist_apply` returns early with it).

use crate::backend::prelude::*;
use crate::candidates::{Candidates, check_scan, draw_index};
use crate::error::Result;
use crate::kernels::{self, BlockStats};
use crate::sampler::{Rng, Sampler, rng_methods};
use graph::philox::stream;

/// Draws from the softmax distribution.
#[derive(Debug, Clone)]
pub struct Dist {
    rng: Rng,
    stats: BlockStats,
}

const NAME: &str = "dist";

impl Dist {
    /// A dist sampler with `seed`, at step 0.
    pub fn new(seed: u64) -> Self {
        Self { rng: Rng::new(seed, stream::DRAW), stats: BlockStats::default() }
    }
}

/// Draws an index of a raw row (logits `row[i] * s`) with the uniform `u`, using one pass of
/// block statistics and a rescan of one block ([`::kernels::draw`], which the CPU backend's
/// `categorical` op shares).
pub(crate) fn draw_from_row(stage: &'static str, row: &[f32], s: f32, u: f64, st: &mut BlockStats) -> Result<usize> {
    kernels::block_stats(row, s, st);
    check_scan(stage, row, st.bad, st.row_max)?;
    Ok(::kernels::draw::from_stats(row, s, u, st))
}

impl Sampler for Dist {
    fn name(&self) -> &'static str {
        NAME
    }

    /// The step moves on here, not when drawing (see [`crate::sampler::Rng`]).
    fn accept(&mut self, _token: crate::Token) {
        self.rng.commit();
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let u = self.rng.next_draw();
        if let Some((row, div)) = cur.vocab_row() {
            let i = draw_from_row(NAME, row, 1.0 / div, u, &mut self.stats)?;
            cur.set_selected(Some(i));
            return Ok(());
        }
        cur.softmax(NAME, false)?;
        let i = draw_index(cur.list(NAME)?, u);
        cur.set_selected(Some(i));
        Ok(())
    }

    fn reset(&mut self) {
        self.rng.restart();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// `categorical` on the `DRAW` stream (`spec_verify` of each row's draft where the group
/// verifies): on the vocabulary with the pending temperature and min-p cut as its parameters (a
/// masked row is drawn with a cut that removes no finite value, so that `categorical` skips the
/// blocks the mask left all `-inf`); on a list in list order.
impl BackendStage for Dist {
    fn key(&self, _form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        Some((StageKey::new::<Self>(NAME, 0, 0).clearing_inf(), Form::Token))
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
        let stream = graph::philox::stream::DRAW;
        Ok(Record::Token(match rec {
            Record::Vocab { x, pending, unmasked, .. } => {
                draw_vocab(cx, x, pending, unmasked.is_some(), cx.verifies())?
            }
            Record::List { ids, vals, .. } => cx.draw_token(ids, vals, stream)?,
            Record::Token(t) => t,
        }))
    }
}

/// A draw on the `DRAW` stream from the vocabulary row `x` with its pending transforms as
/// `categorical`'s parameters (`masked`: after a cut, drawn with a cut that removes no finite
/// value, so that `categorical` skips the blocks the mask left all `-inf`); with `verify`, each
/// row's draft verified (`spec_verify`).
pub(crate) fn draw_vocab(cx: &mut Lowering<'_>, x: NodeId, pending: Pending, masked: bool, verify: bool) -> R<NodeId> {
    let stream = graph::philox::stream::DRAW as u32;
    let params = if pending.is_empty() && !masked {
        None
    } else {
        // `1 / t` in f32, as the CPU chain's dist on a vocabulary view scales.
        let scale = Field::scalar(pending.temp.map(|t| t.1), |t| 1.0 / t, 1.0);
        let none = if masked { -f32::MAX } else { f32::NEG_INFINITY };
        let cut = Field::scalar(pending.min_p.map(|m| m.1), f32::ln, none);
        Some(cx.input("draw", DType::F32, &[2, cx.n()], vec![scale, cut])?)
    };
    if verify {
        let aux = params.map_or(graph::SpecAux::None, graph::SpecAux::Params);
        cx.verify_draw(x, aux, stream)
    } else {
        let keys = cx.draw_keys_input()?;
        cx.g.categorical(x, keys, params, None, stream)
    }
}
