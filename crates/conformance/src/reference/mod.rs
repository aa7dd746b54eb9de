//! The f64 reference: a straightforward interpreter of a `graph::Graph` that follows the doc comments
//! of `graph::Op` exactly, written for obvious correctness rather than speed.
//!
//! Storage is modelled like a backend's: every node that owns storage (see
//! `Graph::storage_of`) has a vector of element slots, and a node's element `idx` is slot
//! `layout.byte_offset(idx) / dtype.size()` of its storage, so views, strides, offsets and the
//! in-place `set_rows` behave as they do on a device. Every op computes in f64 from the stored source
//! values and rounds its results to the node's dtype when storing them ([`crate::values::round_to`]).

mod kernels;
pub mod sample;
mod spec_sampled;

use crate::compare::DrawRow;
use crate::error::ConformanceError;
use crate::values::{self, flat, indices, round_to};
use graph::{DType, Graph, Node, NodeId, Op, philox};

pub use kernels::{argmax_row, argsort_row, softmax_row, top_k_row};

/// The slot of element `idx` of `n` in its storage: `byte_offset / size` for the plain dtypes; a
/// quantized tensor (always a contiguous leaf: no view reads one) stores its dequantized values in
/// ggml order.
fn slot(n: &Node, idx: [usize; 4]) -> usize {
    if n.dtype.is_quantized() {
        return flat(n.ne(), idx);
    }
    n.layout.byte_offset(idx) / n.dtype.size()
}

/// A graph evaluated by the reference interpreter: the contents of every storage.
#[derive(Debug)]
pub struct Reference<'g> {
    g: &'g Graph,
    store: Vec<Option<Vec<f64>>>,
}

type R<T> = Result<T, ConformanceError>;

/// A row of i32 key words (as the reference holds them, f64) as `u32`s, with the 64-bit pairs of
/// words 0-1 (a seed) and 2-3 (a step or an offset).
fn key_words(row: &[f64]) -> (Vec<u32>, u64, u64) {
    let key: Vec<u32> = row.iter().map(|&v| v as i32 as u32).collect();
    let lo_hi = |i: usize| u64::from(key[i]) | u64::from(key[i + 1]) << 32;
    let (a, b) = (lo_hi(0), lo_hi(2));
    (key, a, b)
}

impl<'g> Reference<'g> {
    /// Evaluates every node of `g`, reading input and parameter data from `inputs` (bytes of the node's
    /// dtype, contiguous, ggml order).
    pub fn evaluate(g: &'g Graph, inputs: &[(NodeId, Vec<u8>)]) -> R<Reference<'g>> {
        let _span = tracing::debug_span!("reference", nodes = g.len()).entered();
        let mut r = Reference { g, store: vec![None; g.len()] };
        for (id, n) in g.nodes() {
            r.eval(id, n, inputs)?;
        }
        Ok(r)
    }

    /// The logical values of node `id` (any node, views included), contiguous in ggml order.
    pub fn values(&self, id: NodeId) -> Vec<f64> {
        let n = self.g.node(id);
        if n.layout.is_contiguous(n.dtype) {
            let store = self.store[self.g.storage_of(id).index()].as_ref().expect("storage evaluated");
            let start = n.layout.offset / n.dtype.size();
            return store[start..start + n.layout.ne.numel()].to_vec();
        }
        indices(n.ne()).map(|idx| self.at(id, idx)).collect()
    }

    /// Element `idx` of node `id`.
    pub fn at(&self, id: NodeId, idx: [usize; 4]) -> f64 {
        let n = self.g.node(id);
        let s = self.g.storage_of(id);
        let store = self.store[s.index()].as_ref().expect("storage evaluated before its users");
        store[slot(n, idx)]
    }

    /// Each row of the `Op::Categorical` node `id` as [`Cmp::Draw`](crate::compare::Cmp::Draw)
    /// checks it: the running sums of its weights and its target `u W` (empty sums where it draws
    /// -1; a one-entry bracket at the first maximum for `s = +inf`). Empty for any other op.
    pub fn draw_rows(&self, id: NodeId) -> Vec<DrawRow> {
        let stream = match self.g.node(id).op {
            Op::Categorical { stream, .. } | Op::SpecVerify { stream, .. } => stream,
            Op::SpecVerifySampled { stream, .. } => {
                return self.sampled_rows(id, stream).map(|r| r.draw_row()).collect();
            }
            _ => return Vec::new(),
        };
        self.categorical_rows(id, stream)
            .map(|(x, u, sc, off, draft, ids)| match kernels::categorical_weights(&x, sc, off) {
                kernels::Weights::None => DrawRow { cum: Vec::new(), target: 0.0, accept: None, ids },
                kernels::Weights::First(i) => {
                    let cum = (0..x.len()).map(|j| if j < i { 0.0 } else { 1.0 }).collect();
                    DrawRow { cum, target: 0.5, accept: None, ids }
                }
                kernels::Weights::Cumulative(cum) => match draft {
                    None => {
                        let target = u * cum.last().copied().unwrap_or(0.0);
                        DrawRow { cum, target, accept: None, ids }
                    }
                    Some((e, a)) => {
                        let v = kernels::verify_weights(&cum, e, a, u);
                        DrawRow { cum: v.residual, target: v.target, accept: Some(v.accept), ids }
                    }
                },
            })
            .collect()
    }

    /// The rows of the `Op::Categorical` or `Op::SpecVerify` node `id` in output order: the
    /// logits, the uniform the row's keys give, its scale and threshold offset (1 and -inf without
    /// params), for `spec_verify` the draft entry with the acceptance uniform, and with `ids` the
    /// entries' token ids.
    #[allow(clippy::type_complexity)]
    fn categorical_rows(
        &self,
        id: NodeId,
        stream: u32,
    ) -> impl Iterator<Item = (Vec<f64>, f64, f64, f64, Option<(usize, f64)>, Option<Vec<f64>>)> + '_ {
        let n = self.g.node(id);
        let ne = n.ne();
        let srcs = n.srcs.clone();
        // `ids`: `Some(has ids)` for `spec_verify`, `None` for `categorical`.
        let (ids, has_ids) = match n.op {
            Op::SpecVerify { ids, .. } => (Some(ids), ids),
            Op::Categorical { ids, .. } => (None, ids),
            _ => (None, false),
        };
        (0..ne[1] * ne[2] * ne[3]).map(move |r| {
            let (i1, i2, i3) = (r % ne[1], (r / ne[1]) % ne[2], r / (ne[1] * ne[2]));
            let (key, seed, step) = key_words(&self.row(srcs[1], i1, i2, i3));
            let u = philox::uniform_f64(seed, step, philox::stream::element(u64::from(stream), 0));
            let x = self.row(srcs[0], i1, i2, i3);
            let (sc, off) = match (srcs.get(2), has_ids) {
                (Some(&p), false) => {
                    let p = self.row(p, i1, i2, i3);
                    (p[0], p[1])
                }
                _ => (1.0, f64::NEG_INFINITY),
            };
            let draft = ids.and_then(|ids| {
                let d = key[4] as i32;
                let e = if ids {
                    let tokens = self.row(srcs[2], i1, i2, i3);
                    tokens.iter().position(|&t| d >= 0 && t == f64::from(d))
                } else {
                    usize::try_from(d).ok().filter(|&e| e < x.len())
                }?;
                let a = philox::uniform_f64(seed, step, philox::stream::element(philox::stream::SPECULATIVE, 0));
                Some((e, a))
            });
            let tokens = has_ids.then(|| self.row(srcs[2], i1, i2, i3));
            (x, u, sc, off, draft, tokens)
        })
    }

    /// The rows of the `Op::SpecVerifySampled` node `id` in output order.
    fn sampled_rows(&self, id: NodeId, stream: u32) -> impl Iterator<Item = spec_sampled::SampledRow> + '_ {
        let n = self.g.node(id);
        let ne = n.ne();
        let srcs = n.srcs.clone();
        let has_ids = matches!(n.op, Op::SpecVerifySampled { ids: true, .. });
        (0..ne[1] * ne[2] * ne[3]).map(move |r| {
            let (i1, i2, i3) = (r % ne[1], (r / ne[1]) % ne[2], r / (ne[1] * ne[2]));
            let (key, seed, step) = key_words(&self.row(srcs[1], i1, i2, i3));
            let u = philox::uniform_f64(seed, step, philox::stream::element(u64::from(stream), 0));
            let a = philox::uniform_f64(seed, step, philox::stream::element(philox::stream::SPECULATIVE, 0));
            let (s, off) = match (srcs.get(4), has_ids) {
                (Some(&p), false) => {
                    let p = self.row(p, i1, i2, i3);
                    (p[0], p[1])
                }
                _ => (1.0, f64::NEG_INFINITY),
            };
            spec_sampled::SampledRow {
                x: self.row(srcs[0], i1, i2, i3),
                u,
                a,
                s,
                off,
                draft: i64::from(key[4] as i32),
                q_ids: self.row(srcs[2], i1, i2, i3),
                q_probs: self.row(srcs[3], i1, i2, i3),
                tokens: has_ids.then(|| self.row(srcs[4], i1, i2, i3)),
            }
        })
    }

    fn row(&self, id: NodeId, i1: usize, i2: usize, i3: usize) -> Vec<f64> {
        let n = self.g.node(id);
        if n.layout.rows_contiguous(n.dtype) {
            let store = self.store[self.g.storage_of(id).index()].as_ref().expect("storage evaluated");
            let start = slot(n, [0, i1, i2, i3]);
            return store[start..start + n.ne()[0]].to_vec();
        }
        (0..n.ne()[0]).map(|i0| self.at(id, [i0, i1, i2, i3])).collect()
    }

    fn err(&self, id: NodeId, msg: impl Into<String>) -> ConformanceError {
        ConformanceError::Compute { node: id, op: self.g.node(id).op.name(), msg: msg.into() }
    }

    /// Stores a contiguous result for a node that owns its storage, rounding to its dtype.
    fn put(&mut self, id: NodeId, n: &Node, vals: Vec<f64>) {
        debug_assert_eq!(vals.len(), n.layout.ne.numel());
        let d = n.dtype;
        self.store[id.index()] = Some(vals.into_iter().map(|v| round_to(d, v)).collect());
    }

    /// A result computed element by element from its index.
    fn map(&mut self, id: NodeId, n: &Node, f: impl Fn(&Self, [usize; 4]) -> f64) {
        let vals = indices(n.ne()).map(|idx| f(self, idx)).collect();
        self.put(id, n, vals);
    }

    /// A result computed row by row: `f(row values, [i1, i2, i3])` gives the output row.
    fn rows(&mut self, id: NodeId, n: &Node, src: NodeId, f: impl Fn(&[f64]) -> Vec<f64>) {
        let ne = self.g.node(src).ne();
        let mut out = Vec::with_capacity(n.layout.ne.numel());
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    out.extend(f(&self.row(src, i1, i2, i3)));
                }
            }
        }
        self.put(id, n, out);
    }

    fn check_aligned(&self, id: NodeId, n: &Node) -> R<()> {
        let size = n.dtype.size();
        if !n.layout.offset.is_multiple_of(size) || n.layout.nb.iter().any(|b| !b.is_multiple_of(size)) {
            return Err(self.err(id, format!("layout {:?} is not aligned to the element size {size}", n.layout)));
        }
        Ok(())
    }

    fn eval(&mut self, id: NodeId, n: &Node, inputs: &[(NodeId, Vec<u8>)]) -> R<()> {
        self.check_aligned(id, n)?;
        let s = |i: usize| n.srcs[i];
        let bcast = |b: NodeId, idx: [usize; 4], g: &Graph| {
            let bn = g.node(b).ne();
            [idx[0] % bn[0], idx[1] % bn[1], idx[2] % bn[2], idx[3] % bn[3]]
        };
        let g = self.g;
        match n.op {
            Op::Input => {
                let name = n.name.clone().unwrap_or_else(|| "-".into());
                let bytes = inputs
                    .iter()
                    .find(|(i, _)| *i == id)
                    .map(|(_, b)| b)
                    .ok_or(ConformanceError::MissingInput { node: id, name })?;
                if bytes.len() != n.nbytes() {
                    return Err(ConformanceError::InputSize {
                        node: id,
                        dtype: n.dtype.name(),
                        shape: n.layout.ne.to_string(),
                        expected: n.nbytes(),
                        got: bytes.len(),
                    });
                }
                self.store[id.index()] = Some(values::decode(n.dtype, bytes));
            }
            Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => {}
            Op::Cont | Op::Cast => self.map(id, n, |r, idx| r.at(s(0), idx)),
            Op::Unary(u) => self.map(id, n, |r, idx| kernels::unary(u, r.at(s(0), idx))),
            Op::Scale { scale, bias } => {
                let (sc, b) = (f64::from(scale), f64::from(bias));
                self.map(id, n, |r, idx| r.at(s(0), idx) * sc + b);
            }
            Op::Clamp { min, max } => {
                let (lo, hi) = (f64::from(min), f64::from(max));
                self.map(id, n, |r, idx| r.at(s(0), idx).max(lo).min(hi));
            }
            Op::Binary(b) => {
                // Computed in f32: the exact f64 result of two f32 values rounds to the f32 result.
                self.map(id, n, |r, idx| {
                    round_to(DType::F32, kernels::binary(b, r.at(s(0), idx), r.at(s(1), bcast(s(1), idx, g))))
                });
            }
            Op::Compare(c) => {
                self.map(id, n, |r, idx| kernels::compare(c, r.at(s(0), idx), r.at(s(1), bcast(s(1), idx, g))));
            }
            Op::Where => self.map(id, n, |r, idx| {
                if r.at(s(0), bcast(s(0), idx, g)) != 0.0 { r.at(s(1), idx) } else { r.at(s(2), bcast(s(2), idx, g)) }
            }),
            Op::Fill { value } => self.map(id, n, |_, _| f64::from(value)),
            Op::Arange { start, step } => {
                let (a, st) = (f64::from(start), f64::from(step));
                self.map(id, n, |_, idx| a + st * idx[0] as f64);
            }
            Op::GetRows => self.get_rows(id, n)?,
            Op::SetRows => self.set_rows(id, n)?,
            Op::ScatterAdd => self.scatter_add(id, n),
            Op::MulMat => self.mul_mat(id, n),
            Op::RmsNorm { eps } => self.rows(id, n, s(0), |x| kernels::rms_norm_row(x, f64::from(eps))),
            Op::Rope(p) => {
                let ne = n.ne();
                let half = p.n_dims as usize / 2;
                let ff: Vec<f64> = match n.srcs.get(2) {
                    Some(&f) => (0..half).map(|i| self.at(f, [i, 0, 0, 0])).collect(),
                    None => vec![1.0; half],
                };
                let mut out = Vec::with_capacity(n.layout.ne.numel());
                for i2 in 0..ne[2] {
                    let pos = self.at(s(1), [i2, 0, 0, 0]);
                    for i1 in 0..ne[1] {
                        let head = self.row(s(0), i1, i2, 0);
                        out.extend(kernels::rope_head(&head, pos, &p, &ff));
                    }
                }
                self.put(id, n, out);
            }
            Op::SoftMax { scale } => self.soft_max(id, n, f64::from(scale)),
            Op::SumRows => self.rows(id, n, s(0), |x| vec![x.iter().sum()]),
            Op::MaxRows => self.rows(id, n, s(0), |x| vec![kernels::max_row(x)]),
            Op::Argmax => self.rows(id, n, s(0), |x| vec![kernels::argmax_row(x) as f64]),
            Op::Argsort { order } => {
                self.rows(id, n, s(0), |x| kernels::argsort_row(x, order).into_iter().map(|i| i as f64).collect());
            }
            Op::TopK { k, masked: false } => {
                let k = k as usize;
                self.rows(id, n, s(0), |x| kernels::top_k_row(x, k).into_iter().map(|i| i as f64).collect());
            }
            Op::TopK { k, masked: true } => {
                // The row as `token_mask` bans it, then the same top-k.
                let (k, ne) = (k as usize, n.ne());
                let mut out = Vec::with_capacity(n.layout.ne.numel());
                for i3 in 0..ne[3] {
                    for i2 in 0..ne[2] {
                        for i1 in 0..ne[1] {
                            let x = self.row(s(0), i1, i2, i3);
                            let words: Vec<u32> = self.row(s(1), i1, i2, i3).iter().map(|&w| w as i32 as u32).collect();
                            // Allowed iff t < 32 w and bit t % 32 of word t / 32 (as `TokenMask`).
                            let allowed = |t: usize| words.get(t / 32).is_some_and(|w| (w >> (t % 32)) & 1 == 1);
                            let m: Vec<f64> = x
                                .iter()
                                .enumerate()
                                .map(|(t, &v)| if allowed(t) { v } else { v + f64::NEG_INFINITY })
                                .collect();
                            out.extend(kernels::top_k_row(&m, k).into_iter().map(|i| i as f64));
                        }
                    }
                }
                self.put(id, n, out);
            }
            Op::Cumsum => self.rows(id, n, s(0), kernels::cumsum_row),
            Op::TopPMask => {
                let ne = n.ne();
                let mut out = Vec::with_capacity(n.layout.ne.numel());
                for i3 in 0..ne[3] {
                    for i2 in 0..ne[2] {
                        for i1 in 0..ne[1] {
                            let pr = self.row(s(1), i1, i2, i3);
                            out.extend(kernels::top_p_mask_row(&self.row(s(0), i1, i2, i3), pr[0], pr[1], pr[2]));
                        }
                    }
                }
                self.put(id, n, out);
            }
            Op::Penalize => self.map(id, n, |r, idx| {
                let (x, c) = (r.at(s(0), idx), r.at(s(1), idx));
                if c > 0.0 {
                    let p = |j: usize| r.at(s(2), [j, idx[1], idx[2], idx[3]]);
                    let scaled = if x > 0.0 { x / p(0) } else { x * p(0) };
                    scaled - (c * p(1) + p(2))
                } else {
                    x
                }
            }),
            Op::TokenMask { ids } => {
                let w = g.node(s(1)).ne()[0];
                self.map(id, n, |r, idx| {
                    let x = r.at(s(0), idx);
                    let t = if ids { r.at(s(2), idx) } else { idx[0] as f64 };
                    // Allowed iff 0 <= t < 32 w and bit t % 32 of word t / 32 (an i32 read as u32).
                    let allowed = t >= 0.0 && t < 32.0 * w as f64 && {
                        let t = t as usize;
                        let word = r.at(s(1), [t / 32, idx[1], idx[2], idx[3]]) as i32 as u32;
                        (word >> (t % 32)) & 1 == 1
                    };
                    if allowed { x } else { x + f64::NEG_INFINITY }
                });
            }
            Op::ListFilter(stages) => {
                let ne = n.ne();
                let mut out = Vec::with_capacity(n.layout.ne.numel());
                for i3 in 0..ne[3] {
                    for i2 in 0..ne[2] {
                        for i1 in 0..ne[1] {
                            let pr = self.row(s(1), i1, i2, i3);
                            out.extend(kernels::list_filter_row(&self.row(s(0), i1, i2, i3), stages.as_slice(), &pr));
                        }
                    }
                }
                self.put(id, n, out);
            }
            Op::RandomUniform { stream } => {
                self.map(id, n, |r, idx| {
                    let key = |i: usize| r.at(s(0), [i, idx[1], idx[2], idx[3]]) as i32 as u32;
                    let seed = u64::from(key(0)) | u64::from(key(1)) << 32;
                    let step = u64::from(key(2)) | u64::from(key(3)) << 32;
                    let element = philox::stream::element(u64::from(stream), idx[0] as u64);
                    f64::from(philox::uniform(seed, step, element))
                });
            }
            Op::Categorical { stream, .. } | Op::SpecVerify { stream, .. } => {
                let out = self
                    .categorical_rows(id, stream)
                    .map(|(x, u, sc, off, draft, tokens)| {
                        let at = match draft {
                            None => kernels::categorical_row(&x, u, sc, off),
                            Some((e, a)) => kernels::spec_verify_row(&x, u, sc, off, e, a),
                        };
                        // With ids, the chosen entry's token id (-1 stays -1).
                        match tokens {
                            Some(t) if at >= 0.0 => t[at as usize],
                            _ => at,
                        }
                    })
                    .collect();
                self.put(id, n, out);
            }
            Op::TopKTopPSample(a) => {
                let [v, rows, _, _] = self.g.node(s(0)).ne();
                let mut out = Vec::with_capacity(n.layout.ne.numel());
                for r in 0..rows {
                    let x = self.row(s(0), r, 0, 0);
                    let k = self.row(s(1), r, 0, 0)[0] as i64;
                    let pr = self.row(s(2), r, 0, 0);
                    let q = n.srcs.get(3).map(|&q| (q, self.g.node(q).ne()[1]));
                    let qrow;
                    let post = match (a.post, q) {
                        (graph::fused::PostSample::QSample, Some((q, _))) => {
                            qrow = self.row(q, r, 0, 0);
                            sample::RefPost::QSample(&qrow)
                        }
                        (graph::fused::PostSample::Multinomial, Some((q, nq))) => {
                            let (_, seed, off) = key_words(&self.row(q, r.min(nq - 1), 0, 0));
                            sample::RefPost::Multinomial(graph::fused::multinomial_uniform(seed, off))
                        }
                        _ => sample::RefPost::None,
                    };
                    let picked = sample::top_k_top_p_row(&x, k, pr[0], pr[1], &a, post);
                    match a.output {
                        graph::fused::FusedOutput::Index => out.push(picked.map_or(-1.0, |p| p.index as f64)),
                        graph::fused::FusedOutput::Logits => {
                            let fill = if a.input_is_logits { f64::NEG_INFINITY } else { 0.0 };
                            match picked {
                                Some(p) => out.extend((0..v).map(|t| if p.kept[t] { x[t] } else { fill })),
                                None => out.extend(std::iter::repeat_n(f64::NAN, v)),
                            }
                        }
                    }
                }
                self.put(id, n, out);
            }
            Op::SpecVerifySampled { stream, .. } => {
                let out = self.sampled_rows(id, stream).map(|r| r.value()).collect();
                self.put(id, n, out);
            }
            Op::RandomSample { f64_rows, .. } => {
                let ne = self.g.node(s(0)).ne();
                let mut out = Vec::new();
                for i3 in 0..ne[3] {
                    for i2 in 0..ne[2] {
                        for i1 in 0..ne[1] {
                            let raw = self.row(s(0), i1, i2, i3);
                            let x: Vec<f64> = if f64_rows {
                                raw.chunks_exact(2)
                                    .map(|w| {
                                        f64::from_bits(
                                            u64::from(w[0] as i32 as u32) | u64::from(w[1] as i32 as u32) << 32,
                                        )
                                    })
                                    .collect()
                            } else {
                                raw
                            };
                            let pr = self.row(s(1), i1, i2, i3);
                            let topk = self.row(s(2), i1, i2, i3)[0] as i64;
                            let i = sample::random_sample_row(&x, pr[0], pr[1], pr[2], topk);
                            out.push(i.map_or(-1.0, |i| i as f64));
                        }
                    }
                }
                self.put(id, n, out);
            }
        }
        Ok(())
    }

    fn row_id(&self, id: NodeId, ids: NodeId, at: [usize; 4], n_rows: usize) -> R<usize> {
        let v = self.at(ids, at);
        if v < 0.0 || v >= n_rows as f64 {
            return Err(self.err(id, format!("row id {v} at {at:?} of node {ids} is outside 0..{n_rows}")));
        }
        Ok(v as usize)
    }

    fn get_rows(&mut self, id: NodeId, n: &Node) -> R<()> {
        let (a, ids) = (n.srcs[0], n.srcs[1]);
        let n_rows = self.g.node(a).ne()[1];
        let mut out = Vec::with_capacity(n.layout.ne.numel());
        for idx in indices(n.ne()) {
            let r = self.row_id(id, ids, [idx[1], idx[2], idx[3], 0], n_rows)?;
            out.push(self.at(a, [idx[0], r, idx[2], idx[3]]));
        }
        self.put(id, n, out);
        Ok(())
    }

    fn set_rows(&mut self, id: NodeId, n: &Node) -> R<()> {
        let (dst, vals, ids) = (n.srcs[0], n.srcs[1], n.srcs[2]);
        let dn = self.g.node(dst);
        let (dtype, n_rows) = (dn.dtype, dn.ne()[1]);
        let mut writes = Vec::new();
        for idx in indices(self.g.node(vals).ne()) {
            let r = self.row_id(id, ids, [idx[1], idx[2], idx[3], 0], n_rows)?;
            let slot = dn.layout.byte_offset([idx[0], r, idx[2], idx[3]]) / dtype.size();
            writes.push((slot, round_to(dtype, self.at(vals, idx))));
        }
        let storage = self.g.storage_of(id);
        let store = self.store[storage.index()].as_mut().expect("set_rows destination evaluated");
        for (slot, v) in writes {
            store[slot] = v;
        }
        Ok(())
    }

    fn scatter_add(&mut self, id: NodeId, n: &Node) {
        let (base, ids, vals) = (n.srcs[0], n.srcs[1], n.srcs[2]);
        let ne = n.ne();
        let mut out = self.values(base);
        let constant = self.g.node(vals).layout.ne.numel() == 1 && self.g.node(ids).layout.ne.numel() != 1;
        for idx in indices(self.g.node(ids).ne()) {
            let target = self.at(ids, idx);
            if target < 0.0 || target >= ne[0] as f64 {
                continue;
            }
            let v = if constant { self.at(vals, [0; 4]) } else { self.at(vals, idx) };
            out[flat(ne, [target as usize, idx[1], idx[2], idx[3]])] += v;
        }
        self.put(id, n, out);
    }

    fn mul_mat(&mut self, id: NodeId, n: &Node) {
        let (a, b) = (n.srcs[0], n.srcs[1]);
        let (an, bn) = (self.g.node(a).ne(), self.g.node(b).ne());
        // ggml's rule: `a` batch index = `b` batch index / (ratio of the batch sizes).
        let (r2, r3) = (bn[2] / an[2], bn[3] / an[3]);
        self.map(id, n, |r, [i, j, i2, i3]| {
            (0..an[0]).map(|k| r.at(a, [k, i, i2 / r2, i3 / r3]) * r.at(b, [k, j, i2, i3])).sum()
        });
    }

    fn soft_max(&mut self, id: NodeId, n: &Node, scale: f64) {
        let (x, mask) = (n.srcs[0], n.srcs.get(1).copied());
        let ne = n.ne();
        let mut out = Vec::with_capacity(n.layout.ne.numel());
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    let mut row: Vec<f64> = self.row(x, i1, i2, i3).iter().map(|v| v * scale).collect();
                    if let Some(m) = mask {
                        let mn = self.g.node(m).ne();
                        let mrow = self.row(m, i1, i2 % mn[2], i3 % mn[3]);
                        row.iter_mut().zip(mrow).for_each(|(v, mv)| *v += mv);
                    }
                    out.extend(kernels::softmax_row(&row));
                }
            }
        }
        self.put(id, n, out);
    }
}

/// Evaluates `g` and returns the logical values of `outputs`.
pub fn run(g: &Graph, inputs: &[(NodeId, Vec<u8>)], outputs: &[NodeId]) -> R<Vec<Vec<f64>>> {
    let r = Reference::evaluate(g, inputs)?;
    Ok(outputs.iter().map(|&o| r.values(o)).collect())
}

#[cfg(test)]
mod tests;
