//! `xtc`: "exclude top choices" (llama.cpp's `llama_sampler_init_xtc`). With probability `p` per
//! step (coin from the Philox `XTC` stream), removes every token whose probability is at least
//! `t` except the least likely of them, provided at least `min_keep` tokens remain.
//!
//! Edge values (llama.cpp): `p <= 0` or `t > 0.5` disables it, as do fewer than two candidates;
//! `p`, `t` outside `[0, 1]` or NaN: error. The step advances on every apply (the coin is drawn
//! even when unused), so the coin of step k does not depend on earlier rows.

use crate::candidates::Candidates;
use crate::error::{Result, unit};
use crate::sampler::{Rng, Sampler, rng_methods};
use graph::philox::stream;

/// Exclude-top-choices.
#[derive(Debug, Clone)]
pub struct Xtc {
    p: f32,
    t: f32,
    min_keep: usize,
    rng: Rng,
}

const NAME: &str = "xtc";

impl Xtc {
    /// XTC with probability `p`, threshold `t`, `min_keep` and `seed`.
    pub fn new(p: f32, t: f32, min_keep: usize, seed: u64) -> Result<Self> {
        unit(NAME, "p", p)?;
        unit(NAME, "t", t)?;
        Ok(Self { p, t, min_keep, rng: Rng::new(seed, stream::XTC) })
    }
}

impl Sampler for Xtc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let chance = self.rng.next_uniform();
        if self.p <= 0.0 || self.t > 0.5 || cur.len() < 2 || chance > self.p {
            return Ok(());
        }
        cur.softmax(NAME, true)?;
        let list = cur.list_mut(NAME)?;
        let mut pos_last = 0;
        for (i, e) in list.iter().enumerate() {
            if e.p >= self.t {
                pos_last = i;
            } else {
                break;
            }
        }
        if list.len() - pos_last >= self.min_keep && pos_last > 0 {
            list.drain(..pos_last);
            cur.set_selected(None);
        }
        Ok(())
    }

    fn reset(&mut self) {
        self.rng.step = 0;
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();
}
