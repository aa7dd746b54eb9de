//! The executor: [`Scheduler`] owns the backends, plans a graph (only when its topology or the pins
//! changed), allocates the plan's buffers once, and then per step writes inputs, runs the splits in
//! order with their copies, and reads outputs from host-visible memory.

use crate::backend::{Backend, Bindings, BufferId};
use crate::bind::bindings;
use crate::error::SchedError;
use crate::plan::{Plan, Region};
use crate::planner::plan_graph;
use graph::{DType, Graph, NodeId, Op};
use std::collections::BTreeMap;

/// Counters, cumulative since the scheduler was created (the `step_*` ones since the last compute).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Plans made (a re-plan happens only when the topology hash or the pins change).
    pub plans: u64,
    /// Allocation rounds (one per plan).
    pub allocations: u64,
    /// Buffers allocated in total (params carried over by a re-plan are not allocated again).
    pub buffers: u64,
    /// Completed `compute` calls.
    pub steps: u64,
    /// Copies performed between backends.
    pub copies: u64,
    /// Bytes copied between backends.
    pub bytes_between_backends: u64,
    /// Bytes read back to the host (`read*`).
    pub bytes_to_host: u64,
    /// Bytes written from the host (`set_input*`).
    pub bytes_from_host: u64,
    /// Bytes copied between backends during the last step.
    pub step_bytes_between_backends: u64,
    /// Bytes read back to the host since the last step started.
    pub step_bytes_to_host: u64,
}

/// The current plan and its resources.
#[derive(Debug)]
struct Planned {
    key: u64,
    graph: Graph,
    plan: Plan,
    /// Backend buffer of each plan buffer.
    buffers: Vec<BufferId>,
    /// Bindings of each split.
    bindings: Vec<Bindings>,
    /// Per node: written by `set_input` since the plan.
    set: Vec<bool>,
    computed: bool,
}

/// Plans graphs onto backends and runs them. See the crate docs for the flow.
#[derive(Debug)]
pub struct Scheduler {
    backends: Vec<Box<dyn Backend>>,
    pins: BTreeMap<NodeId, usize>,
    planned: Option<Planned>,
    stats: Stats,
    /// Host staging memory for copies from backends without `host_slice`, kept between steps.
    staging: Vec<u8>,
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl Scheduler {
    /// A scheduler over `backends` in preference order (the CPU last, as the fallback).
    pub fn new(backends: Vec<Box<dyn Backend>>) -> Result<Scheduler, SchedError> {
        if backends.is_empty() {
            return Err(SchedError::NoBackends);
        }
        for (i, b) in backends.iter().enumerate() {
            if backends[..i].iter().any(|o| o.name() == b.name()) {
                return Err(SchedError::DuplicateBackend(b.name().to_string()));
            }
        }
        Ok(Scheduler { backends, pins: BTreeMap::new(), planned: None, stats: Stats::default(), staging: Vec::new() })
    }

    /// The backends' names, preference order.
    pub fn backend_names(&self) -> Vec<&str> {
        self.backends.iter().map(|b| b.name()).collect()
    }

    /// Pins `node` (a compute node or a leaf; not a view) to the backend named `backend`. Takes
    /// effect at the next `plan` (a changed pin set forces a re-plan).
    pub fn pin(&mut self, node: NodeId, backend: &str) -> Result<(), SchedError> {
        let b = self.backends.iter().position(|x| x.name() == backend).ok_or_else(|| SchedError::UnknownBackend {
            name: backend.to_string(),
            known: self.backend_names().join(", "),
        })?;
        self.pins.insert(node, b);
        Ok(())
    }

    /// Removes every pin.
    pub fn clear_pins(&mut self) {
        self.pins.clear();
    }

    fn key(&self, g: &Graph) -> u64 {
        let mut h = graph::Fnv64::default();
        h.write_u64(g.topology_hash());
        for (n, b) in &self.pins {
            h.write_u64(u64::from(n.0));
            h.write_u64(*b as u64);
        }
        h.finish()
    }

    /// Plans `g` (assignment, splits, copies, buffers) and allocates its buffers, unless the current
    /// plan has the same topology hash and pins: then it is reused as is (no re-plan, no
    /// re-allocation; inputs and params keep their data).
    ///
    /// On a re-plan, params are carried over: a param of the new graph with the same name, dtype and
    /// shape as a param of the old one, placed on the same backend, keeps its buffer and data (no
    /// re-upload). Every other input and param must be set again before `compute`. When a planning
    /// pass fails (say, a node no backend supports), the previous plan stays in place; when
    /// allocating the new plan's buffers fails, no plan remains.
    pub fn plan(&mut self, g: &Graph) -> Result<&Plan, SchedError> {
        let key = self.key(g);
        if self.planned.as_ref().is_some_and(|p| p.key == key) {
            return Ok(&self.planned.as_ref().expect("checked").plan);
        }
        let plan = plan_graph(g, &self.backends, &self.pins)?;
        self.stats.plans += 1;
        let mut set = vec![false; g.len()];
        let mut adopted: Vec<Option<BufferId>> = vec![None; plan.buffers.len()];
        if let Some(old) = self.planned.take() {
            let mut kept = vec![false; old.buffers.len()];
            for (i, pb) in plan.buffers.iter().enumerate() {
                let Some(pid) = pb.param else { continue };
                let found = old.plan.buffers.iter().enumerate().find_map(|(j, ob)| {
                    let op = ob.param?;
                    let same = !kept[j]
                        && ob.backend == pb.backend
                        && ob.size == pb.size
                        && same_param(&old.graph, op, g, pid);
                    same.then_some((j, op))
                });
                if let Some((j, op)) = found {
                    kept[j] = true;
                    adopted[i] = Some(old.buffers[j]);
                    set[pid.index()] = old.set[op.index()];
                }
            }
            let mut freed = Ok(());
            for (j, (ob, &id)) in old.plan.buffers.iter().zip(&old.buffers).enumerate() {
                if !kept[j] {
                    let r = self.backends[ob.backend].free(id);
                    freed = freed.and(r);
                }
            }
            if let Err(e) = freed {
                for (pb, id) in plan.buffers.iter().zip(&adopted) {
                    if let Some(id) = id {
                        let _ = self.backends[pb.backend].free(*id);
                    }
                }
                return Err(e.into());
            }
        }
        let buffers = self.allocate(&plan, &adopted)?;
        let bindings = bindings(g, &plan, &buffers);
        self.planned = Some(Planned { key, graph: g.clone(), plan, buffers, bindings, set, computed: false });
        Ok(&self.planned.as_ref().expect("just set").plan)
    }

    /// Allocates the plan's buffers, except those `adopted` from the previous plan.
    fn allocate(&mut self, plan: &Plan, adopted: &[Option<BufferId>]) -> Result<Vec<BufferId>, SchedError> {
        let _span = tracing::debug_span!("allocate", buffers = plan.buffers.len()).entered();
        let mut out: Vec<BufferId> = Vec::with_capacity(plan.buffers.len());
        let mut fresh = 0u64;
        for (pb, carried) in plan.buffers.iter().zip(adopted) {
            if let Some(id) = carried {
                out.push(*id);
                continue;
            }
            match self.backends[pb.backend].alloc(pb.size, pb.kind) {
                Ok(id) => {
                    out.push(id);
                    fresh += 1;
                }
                Err(e) => {
                    // Give back what this round holds (adopted buffers included): the allocation
                    // error is the one to report.
                    for (done, &id) in plan.buffers.iter().zip(&out) {
                        let _ = self.backends[done.backend].free(id);
                    }
                    for (pb, id) in plan.buffers.iter().zip(adopted).skip(out.len()) {
                        if let Some(id) = id {
                            let _ = self.backends[pb.backend].free(*id);
                        }
                    }
                    return Err(e.into());
                }
            }
        }
        self.stats.allocations += 1;
        self.stats.buffers += fresh;
        Ok(out)
    }

    /// Drops the current plan and frees all of its buffers (params included); the next `plan`
    /// starts from scratch. Pins and counters are kept.
    pub fn reset(&mut self) -> Result<(), SchedError> {
        let mut freed = Ok(());
        if let Some(p) = self.planned.take() {
            for (pb, &id) in p.plan.buffers.iter().zip(&p.buffers) {
                let r = self.backends[pb.backend].free(id);
                freed = freed.and(r);
            }
        }
        Ok(freed?)
    }

    /// The graph of the current plan, if any.
    pub fn graph(&self) -> Option<&Graph> {
        self.planned.as_ref().map(|p| &p.graph)
    }

    /// The current plan, if any.
    pub fn current_plan(&self) -> Option<&Plan> {
        self.planned.as_ref().map(|p| &p.plan)
    }

    /// The current plan as text (empty before the first `plan`).
    pub fn plan_text(&self) -> String {
        self.planned.as_ref().map(|p| p.plan.to_text(&p.graph)).unwrap_or_default()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    fn check_node(&self, what: &'static str, node: NodeId) -> Result<&Planned, SchedError> {
        check_node(&self.planned, what, node)
    }

    /// Writes the data of an input or param leaf (`bytes` in element order, little endian). Params
    /// are written once and keep their data across steps; inputs are written before each step where
    /// they change.
    pub fn set_input(&mut self, node: NodeId, bytes: &[u8]) -> Result<(), SchedError> {
        let Scheduler { backends, planned, stats, .. } = self;
        let p = check_node(planned, "set_input", node)?;
        let n = p.graph.node(node);
        if n.op != Op::Input {
            return Err(SchedError::NotAnInput { node: p.graph.describe(node), op: n.op.to_string() });
        }
        if bytes.len() != n.nbytes() {
            return Err(SchedError::InputSize { node: p.graph.describe(node), expected: n.nbytes(), got: bytes.len() });
        }
        let np = &p.plan.nodes[node.index()];
        let region = np.region.expect("leaves own a region");
        let buffer = p.buffers[region.buffer];
        let _span = tracing::trace_span!("set_input", node = %node, bytes = bytes.len()).entered();
        backends[np.backend].upload(buffer, region.offset, bytes)?;
        stats.bytes_from_host += bytes.len() as u64;
        planned.as_mut().expect("checked").set[node.index()] = true;
        Ok(())
    }

    fn dtype_of(&self, what: &'static str, node: NodeId) -> Result<DType, SchedError> {
        let p = self.check_node(what, node)?;
        Ok(p.graph.node(node).dtype)
    }

    fn dtype_error(&self, what: &'static str, node: NodeId, dtype: DType, wanted: &'static str) -> SchedError {
        let node = self.planned.as_ref().map(|p| p.graph.describe(node)).unwrap_or_default();
        SchedError::DType { what, node, dtype, wanted }
    }

    /// [`Scheduler::set_input`] from f32 values; f16/bf16 tensors are converted (round to nearest even).
    pub fn set_input_f32(&mut self, node: NodeId, values: &[f32]) -> Result<(), SchedError> {
        let bytes = match self.dtype_of("set_input_f32", node)? {
            DType::F32 => f32_bytes(values),
            DType::F16 => values.iter().flat_map(|&x| graph::f16::from_f32(x).to_le_bytes()).collect(),
            DType::BF16 => values.iter().flat_map(|&x| graph::bf16::from_f32(x).to_le_bytes()).collect(),
            d => return Err(self.dtype_error("set_input_f32", node, d, "f32, f16 or bf16")),
        };
        self.set_input(node, &bytes)
    }

    /// [`Scheduler::set_input`] from i32 values (i32 tensors only).
    pub fn set_input_i32(&mut self, node: NodeId, values: &[i32]) -> Result<(), SchedError> {
        match self.dtype_of("set_input_i32", node)? {
            DType::I32 => {
                let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
                self.set_input(node, &bytes)
            }
            d => Err(self.dtype_error("set_input_i32", node, d, "i32")),
        }
    }

    /// Runs one step of the planned graph: per split, its copies, then its nodes; then waits for
    /// every backend.
    pub fn compute(&mut self) -> Result<(), SchedError> {
        let Scheduler { backends, planned, stats, staging, .. } = self;
        let p = planned.as_mut().ok_or(SchedError::NotPlanned { what: "compute" })?;
        for (id, n) in p.graph.nodes() {
            if n.op == Op::Input && !p.set[id.index()] {
                let kind = if n.flags.param { "param" } else { "input" };
                return Err(SchedError::InputNotSet { kind, node: p.graph.describe(id) });
            }
        }
        let _span = tracing::info_span!("compute", step = stats.steps, splits = p.plan.splits.len()).entered();
        stats.step_bytes_between_backends = 0;
        stats.step_bytes_to_host = 0;
        let mut used = vec![false; backends.len()];
        for (i, split) in p.plan.splits.iter().enumerate() {
            let _split =
                tracing::debug_span!("split", i, backend = backends[split.backend].name(), nodes = split.nodes.len())
                    .entered();
            for c in &split.copies {
                let _copy = tracing::debug_span!("copy", name = %c.name, bytes = c.bytes).entered();
                let (src, dst) = pair_mut(backends, c.from, c.to);
                // The source's producer must be done, and the destination's earlier splits must be
                // done with the slot's memory before it is overwritten.
                src.synchronize()?;
                dst.synchronize()?;
                let (sbuf, dbuf) = (p.buffers[c.src.buffer], p.buffers[c.dst.buffer]);
                match (*src).host_slice(sbuf, c.src.offset, c.bytes) {
                    Some(bytes) => dst.upload(dbuf, c.dst.offset, bytes)?,
                    None => {
                        staging.resize(c.bytes, 0);
                        src.download(sbuf, c.src.offset, staging)?;
                        dst.upload(dbuf, c.dst.offset, staging)?;
                    }
                }
                stats.copies += 1;
                stats.bytes_between_backends += c.bytes as u64;
                stats.step_bytes_between_backends += c.bytes as u64;
            }
            let task = crate::backend::SplitTask { graph: &p.graph, nodes: &split.nodes, bindings: &p.bindings[i] };
            backends[split.backend].compute(task)?;
            used[split.backend] = true;
        }
        for (b, u) in backends.iter_mut().zip(used) {
            if u {
                b.synchronize()?;
            }
        }
        p.computed = true;
        stats.steps += 1;
        Ok(())
    }

    /// Reads an output's bytes in the element order of a contiguous tensor (views are gathered).
    /// Reads straight from host-visible memory through `Backend::host_slice` when the backend offers
    /// it, else downloads.
    pub fn read(&mut self, node: NodeId) -> Result<Vec<u8>, SchedError> {
        let mut out = Vec::new();
        self.read_with(node, |bytes| out.extend_from_slice(bytes))?;
        Ok(out)
    }

    /// Like [`Scheduler::read`], but hands the bytes to `f` without allocating when the output is
    /// contiguous and host-visible.
    pub fn read_with(&mut self, node: NodeId, f: impl FnOnce(&[u8])) -> Result<(), SchedError> {
        let Scheduler { backends, planned, stats, .. } = self;
        let p = check_node(planned, "read", node)?;
        let n = p.graph.node(node);
        if !n.flags.output {
            return Err(SchedError::NotAnOutput { node: p.graph.describe(node) });
        }
        if !p.computed {
            return Err(SchedError::NotComputed { node: p.graph.describe(node) });
        }
        let st = p.graph.storage_of(node);
        let sp = &p.plan.nodes[st.index()];
        let region: Region = sp.region.expect("output storages own a region");
        let buffer = p.buffers[region.buffer];
        let storage_bytes = p.graph.node(st).nbytes();
        let layout = n.layout;
        let es = n.dtype.size();
        let nbytes = n.nbytes();
        let contiguous = layout.is_contiguous(n.dtype);
        let backend = &mut backends[sp.backend];
        backend.synchronize()?;
        let _span = tracing::trace_span!("read", node = %node, bytes = nbytes).entered();
        let gather = |src: &[u8]| -> Vec<u8> {
            let mut out = Vec::with_capacity(nbytes);
            let ne = layout.ne.0;
            for i3 in 0..ne[3] {
                for i2 in 0..ne[2] {
                    for i1 in 0..ne[1] {
                        for i0 in 0..ne[0] {
                            let off = layout.byte_offset([i0, i1, i2, i3]);
                            out.extend_from_slice(&src[off..off + es]);
                        }
                    }
                }
            }
            out
        };
        match backend.host_slice(buffer, region.offset, storage_bytes) {
            Some(src) if contiguous => f(&src[layout.offset..layout.offset + nbytes]),
            Some(src) => f(&gather(src)),
            None => {
                let mut tmp = vec![0u8; storage_bytes];
                backend.download(buffer, region.offset, &mut tmp)?;
                if contiguous {
                    f(&tmp[layout.offset..layout.offset + nbytes]);
                } else {
                    f(&gather(&tmp));
                }
            }
        }
        stats.bytes_to_host += nbytes as u64;
        stats.step_bytes_to_host += nbytes as u64;
        Ok(())
    }

    /// An f32 output as values (f16/bf16 outputs are converted).
    pub fn read_f32(&mut self, node: NodeId) -> Result<Vec<f32>, SchedError> {
        let dtype = self.dtype_of("read_f32", node)?;
        let conv: fn(&[u8]) -> f32 = match dtype {
            DType::F32 => |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            DType::F16 => |b| graph::f16::from_le_bytes([b[0], b[1]]).to_f32(),
            DType::BF16 => |b| graph::bf16::from_le_bytes([b[0], b[1]]).to_f32(),
            d => return Err(self.dtype_error("read_f32", node, d, "f32, f16 or bf16")),
        };
        let bytes = self.read(node)?;
        Ok(bytes.chunks_exact(dtype.size()).map(conv).collect())
    }

    /// An i32 output as values.
    pub fn read_i32(&mut self, node: NodeId) -> Result<Vec<i32>, SchedError> {
        match self.dtype_of("read_i32", node)? {
            DType::I32 => {
                let bytes = self.read(node)?;
                Ok(bytes.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
            }
            d => Err(self.dtype_error("read_i32", node, d, "i32")),
        }
    }

    /// The backends (for inspection).
    pub fn backends(&self) -> &[Box<dyn Backend>] {
        &self.backends
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if let Err(e) = self.reset() {
            tracing::warn!(error = %e, "freeing the plan's buffers failed");
        }
    }
}

/// Whether param `a` of `ga` and param `b` of `gb` are the same weight (name, dtype, shape).
fn same_param(ga: &Graph, a: NodeId, gb: &Graph, b: NodeId) -> bool {
    let (na, nb) = (ga.node(a), gb.node(b));
    na.name.is_some() && na.name == nb.name && na.dtype == nb.dtype && na.layout.ne == nb.layout.ne
}

fn check_node<'a>(planned: &'a Option<Planned>, what: &'static str, node: NodeId) -> Result<&'a Planned, SchedError> {
    let p = planned.as_ref().ok_or(SchedError::NotPlanned { what })?;
    if node.index() >= p.graph.len() {
        return Err(SchedError::UnknownNode { what, node, len: p.graph.len() });
    }
    Ok(p)
}

/// Two distinct backends, mutably.
fn pair_mut(v: &mut [Box<dyn Backend>], a: usize, b: usize) -> (&mut dyn Backend, &mut dyn Backend) {
    assert_ne!(a, b, "a copy between a backend and itself");
    if a < b {
        let (lo, hi) = v.split_at_mut(b);
        (&mut *lo[a], &mut *hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(a);
        (&mut *hi[0], &mut *lo[b])
    }
}
