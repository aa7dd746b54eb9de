//! The values of a group's inputs: each step, every row's current stage parameters and draw keys
//! as the bytes of the input tensors ([`super::build::Param`] says what each input holds).

use super::build::Param;
use super::stage::BackendStage;
use crate::chain::Chain;

/// Appends the entries of input `param` for logits row `row`, whose sequence's chain (as this
/// output sees it) is `chain`, whose draws use `step` (the sequence's step plus the output index)
/// and whose draft token is `draft` (-1: none).
pub(super) fn write(
    bytes: &mut Vec<u8>,
    param: Param,
    chain: &Chain,
    step: u64,
    draft: i32,
    row: usize,
    n_vocab: usize,
) {
    let stage = |i: usize| chain.stages()[i].backend_stage().expect("a backend prefix stage has a backend form");
    let f = |b: &mut Vec<u8>, v: f32| b.extend_from_slice(&v.to_le_bytes());
    let i = |b: &mut Vec<u8>, v: i32| b.extend_from_slice(&v.to_le_bytes());
    match param {
        Param::RowIds => i(bytes, row as i32),
        Param::Keys(j) | Param::VerifyKeys(j) => {
            let seed = match stage(j) {
                BackendStage::Dist { seed }
                | BackendStage::MirostatV2 { seed, .. }
                | BackendStage::Mirostat { seed, .. } => seed,
                s => unreachable!("draw keys of {s:?}"),
            };
            for w in [seed as u32, (seed >> 32) as u32, step as u32, (step >> 32) as u32] {
                i(bytes, w as i32);
            }
            if matches!(param, Param::VerifyKeys(_)) {
                i(bytes, draft);
            }
        }
        Param::NegMu(j) => match stage(j) {
            BackendStage::MirostatV2 { mu, .. } => f(bytes, -mu),
            s => unreachable!("mu input of {s:?}"),
        },
        Param::Mirostat(j) => match stage(j) {
            BackendStage::Mirostat { mu, m, .. } => {
                f(bytes, 2f32.powf(mu));
                f(bytes, if m <= 0 { f32::NEG_INFINITY } else { -((m - 1) as f32) });
            }
            s => unreachable!("mirostat input of {s:?}"),
        },
        Param::NoKeys => (0..4).for_each(|_| i(bytes, 0)),
        Param::DraftQIds | Param::DraftQProbs => unreachable!("the tail writes the draft distributions itself"),
        Param::Greedy => {
            f(bytes, f32::INFINITY);
            f(bytes, f32::NEG_INFINITY);
        }
        Param::DrawParams { temp, min_p, masked } => {
            // The CPU chain's dist on a vocabulary view scales by `1 / t` in f32.
            let scale = temp.map_or(1.0, |j| match stage(j) {
                BackendStage::Temp { t } => 1.0 / t,
                s => unreachable!("temp input of {s:?}"),
            });
            let none = if masked { -f32::MAX } else { f32::NEG_INFINITY };
            let off = min_p.map_or(none, |j| match stage(j) {
                BackendStage::MinP { p, .. } => p.ln(),
                s => unreachable!("ln p input of {s:?}"),
            });
            f(bytes, scale);
            f(bytes, off);
        }
        Param::Nucleus { stage: j, temp } => match stage(j) {
            BackendStage::TopP { p, min_keep } => {
                f(
                    bytes,
                    temp.map_or(1.0, |t| match stage(t) {
                        BackendStage::Temp { t } => t,
                        s => unreachable!("temp input of {s:?}"),
                    }),
                );
                f(bytes, p);
                f(bytes, min_keep as f32);
            }
            s => unreachable!("top_p_mask input of {s:?}"),
        },
        Param::Xtc(j) => match stage(j) {
            BackendStage::Xtc { p, t, min_keep, seed } => {
                // The CPU sampler draws its coin at every apply: stream XTC at
                // the row's step.
                let coin =
                    graph::philox::uniform(seed, step, graph::philox::stream::element(graph::philox::stream::XTC, 0));
                f(bytes, t);
                f(bytes, -(min_keep as f32));
                f(bytes, if coin > p { 0.0 } else { 1.0 });
                f(bytes, 0.0);
            }
            s => unreachable!("xtc input of {s:?}"),
        },
        Param::TempExt(j) => match stage(j) {
            BackendStage::TempExt { min_t, range, exponent } => {
                f(bytes, min_t);
                f(bytes, range);
                f(bytes, exponent);
                f(bytes, if exponent == 0.0 { 1.0 } else { 0.0 });
            }
            s => unreachable!("temp_ext input of {s:?}"),
        },
        Param::TypicalP(j) | Param::TypicalNegMinKeep(j) => match stage(j) {
            BackendStage::Typical { p, min_keep } => {
                f(bytes, if matches!(param, Param::TypicalP(_)) { p } else { -(min_keep.max(1) as f32) })
            }
            s => unreachable!("typical input of {s:?}"),
        },
        Param::Sigma(j) => match stage(j) {
            BackendStage::TopNSigma { n } => f(bytes, n),
            s => unreachable!("top_n_sigma input of {s:?}"),
        },
        Param::Temp(j) => match stage(j) {
            BackendStage::Temp { t } => f(bytes, t),
            s => unreachable!("temp input of {s:?}"),
        },
        Param::LnP(j) => match stage(j) {
            BackendStage::MinP { p, .. } => f(bytes, p.ln()),
            s => unreachable!("ln p input of {s:?}"),
        },
        Param::TopP(j) => match stage(j) {
            BackendStage::TopP { p, .. } => f(bytes, p),
            s => unreachable!("p input of {s:?}"),
        },
        Param::NegMinKeep(j) => match stage(j) {
            BackendStage::TopP { min_keep, .. } | BackendStage::MinP { min_keep, .. } => {
                f(bytes, -(min_keep.max(1) as f32))
            }
            s => unreachable!("min_keep input of {s:?}"),
        },
        Param::ListParams { first, len } => {
            for j in first..first + len {
                match stage(j) {
                    BackendStage::TopP { p, min_keep } => {
                        f(bytes, p);
                        f(bytes, min_keep as f32);
                    }
                    // `ln p` in f32, as the CPU sampler takes it.
                    BackendStage::MinP { p, min_keep } => {
                        f(bytes, p.ln());
                        f(bytes, min_keep as f32);
                    }
                    BackendStage::Temp { t } => {
                        f(bytes, t);
                        f(bytes, 0.0);
                    }
                    s => unreachable!("list_filter input of {s:?}"),
                }
            }
        }
        Param::PenaltyIds(j) | Param::PenaltyRepeat(j) | Param::PenaltySub(j) => match stage(j) {
            BackendStage::Penalties { window: Some(capacity), repeat, freq, present, counts } => {
                let m = capacity.min(n_vocab);
                // Tokens outside the vocabulary are ignored, as on the CPU.
                let seen: Vec<(i32, f32, f32)> = counts
                    .iter()
                    .filter(|(t, _)| (*t as usize) < n_vocab)
                    .map(|&(t, c)| (t as i32, repeat, c as f32 * freq + present))
                    .collect();
                // Padding repeats an entry (the same value written twice), or is
                // an identity entry (token 0, `x * 1 - 0`) when none was seen.
                let pad = seen.first().copied().unwrap_or((0, 1.0, 0.0));
                for e in seen.iter().copied().chain(std::iter::repeat(pad)).take(m) {
                    match param {
                        Param::PenaltyIds(_) => i(bytes, e.0),
                        Param::PenaltyRepeat(_) => f(bytes, e.1),
                        _ => f(bytes, e.2),
                    }
                }
            }
            s => unreachable!("windowed penalty input of {s:?}"),
        },
        Param::Penalties(j) => match stage(j) {
            BackendStage::Penalties { repeat, freq, present, .. } => {
                for v in [repeat, freq, present] {
                    f(bytes, v);
                }
            }
            s => unreachable!("penalty input of {s:?}"),
        },
        Param::PenaltyDraftIds(_) | Param::PenaltyDraftDeltas(_) => {
            unreachable!("the tail writes the draft's penalty count corrections itself")
        }
        Param::BiasIds(j) | Param::BiasValues(j) => match stage(j) {
            BackendStage::LogitBias { biases } => {
                for &(t, b) in &biases {
                    if matches!(param, Param::BiasIds(_)) {
                        i(bytes, i32::try_from(t).unwrap_or(-1));
                    } else {
                        f(bytes, b);
                    }
                }
            }
            s => unreachable!("bias input of {s:?}"),
        },
    }
}
