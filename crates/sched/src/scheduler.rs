//! The executor: [`Scheduler`] owns the backends and a small cache of plans keyed by topology
//! hash and pins, whose buffers come from a shared [`Pool`]; per step it writes inputs, runs the
//! current plan's splits in order with their copies, and reads outputs (whole, or some rows).
//!
//! Planning happens only for a key the cache does not hold; switching between cached plans
//! (alternating batch shapes or sampler configurations) costs nothing but re-resolving bindings
//! when a shared buffer grew. [`Scheduler::reserve`] plans the worst case first, so that later,
//! smaller plans fit the pool and allocate nothing. Reading and writing tensors lives in
//! `transfer.rs`.
//!
//! # Side plans
//!
//! A *side plan* ([`Scheduler::plan_side`]) is a small graph run after the current plan's step
//! that reads some of that plan's tensors (its *base*'s outputs or inputs) in place, without a
//! copy through the host: say, a second sampling step over a few rows of the logits the step just
//! computed. Its linked leaves are bound to the base's storage; everything else it holds lives in
//! shared buffers of its own (never the base's), so the base's inputs and outputs stay as they
//! were, and [`Scheduler::end_side`] makes the base current again without writing anything anew.
//! Side plans are cached apart from the main plans ([`SIDE_CACHE`] of them, keyed by topology,
//! links and base), and leave the cache with their base.

use crate::backend::{Backend, Bindings, BufferId};
use crate::bind::bindings;
use crate::error::SchedError;
use crate::plan::{BufferRole, Plan};
use crate::planner::plan_graph;
use crate::pool::{Pool, Slot};
use graph::{Graph, NodeId, Op};
use std::collections::BTreeMap;

/// Plans kept in the cache; the least recently used one leaves first.
pub const PLAN_CACHE: usize = 8;

/// Side plans kept in the cache (besides [`PLAN_CACHE`] main plans); the least recently used one
/// leaves first.
pub const SIDE_CACHE: usize = 8;

/// Counters, cumulative since the scheduler was created (the `step_*` ones since the last compute).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Plans made (only for a topology hash and pins the cache does not hold).
    pub plans: u64,
    /// `plan`/`reserve` calls answered from the plan cache.
    pub cache_hits: u64,
    /// Allocation rounds: plans that had to allocate (or grow) at least one buffer.
    pub allocations: u64,
    /// Buffers allocated in total (shared buffers that fit and leaves carried over are not; a
    /// param's buffer counts when it is first written, an imported param's never).
    pub buffers: u64,
    /// Completed `compute` calls of main plans.
    pub steps: u64,
    /// Completed `compute` calls of side plans ([`Scheduler::plan_side`]).
    pub side_steps: u64,
    /// Copies performed between backends.
    pub copies: u64,
    /// Bytes copied between backends.
    pub bytes_between_backends: u64,
    /// Bytes read back to the host (`read*`): exactly the bytes of the rows or elements read.
    pub bytes_to_host: u64,
    /// Bytes written from the host (`set_input*`, and `set_input_shared` where it copied).
    pub bytes_from_host: u64,
    /// Params bound in place by `set_input_shared` (the backend read the caller's bytes where they
    /// lie: nothing allocated, nothing copied).
    pub imported: u64,
    /// Bytes of those params.
    pub bytes_imported: u64,
    /// Bytes copied between backends during the last step (side steps count with their base's).
    pub step_bytes_between_backends: u64,
    /// Bytes read back to the host since the last step started (side steps count with their
    /// base's).
    pub step_bytes_to_host: u64,
}

/// A cached plan and what it needs to run.
#[derive(Debug)]
pub(crate) struct Planned {
    pub key: u64,
    pub graph: Graph,
    pub plan: Plan,
    /// Pool slot of each plan buffer.
    pub slots: Vec<Slot>,
    /// Backend buffer of each plan buffer, resolved at pool generation `generation`.
    pub buffers: Vec<BufferId>,
    /// Bindings of each split, resolved with `buffers`.
    pub bindings: Vec<Bindings>,
    pub generation: u64,
    /// Per node: an input written since this plan became current.
    pub set: Vec<bool>,
    /// Computed since this plan became current.
    pub computed: bool,
    /// Last use (a counter), for eviction.
    pub used: u64,
    /// For a side plan: its base plan's cache key.
    pub base: Option<u64>,
    /// For a side plan: its linked leaves (bound to the base's storage, never written).
    pub links: Vec<NodeId>,
}

impl Planned {
    /// A plan just made, its buffers unresolved until it first becomes current; a side plan gives
    /// its base's key and its linked leaves.
    fn new(
        key: u64,
        g: &Graph,
        plan: Plan,
        slots: Vec<Slot>,
        used: u64,
        base: Option<u64>,
        links: Vec<NodeId>,
    ) -> Self {
        Planned {
            key,
            graph: g.clone(),
            plan,
            slots,
            buffers: Vec::new(),
            bindings: Vec::new(),
            generation: u64::MAX,
            set: vec![false; g.len()],
            computed: false,
            used,
            base,
            links,
        }
    }

    /// Re-resolves the plan's buffers and bindings if the pool changed since they were resolved.
    pub fn refresh(&mut self, pool: &Pool) {
        if self.generation != pool.generation {
            self.buffers = self.slots.iter().map(|&s| pool.buffer(s)).collect();
            self.bindings = bindings(&self.graph, &self.plan, &self.buffers);
            self.generation = pool.generation;
        }
    }

    /// The pool slot of the plan buffer holding `node`'s storage.
    pub fn slot_of(&self, node: NodeId) -> Option<Slot> {
        let st = self.graph.storage_of(node);
        self.plan.nodes[st.index()].region.map(|r| self.slots[r.buffer])
    }
}

/// Plans graphs onto backends and runs them. See the crate docs for the flow.
#[derive(Debug)]
pub struct Scheduler {
    pub(crate) backends: Vec<Box<dyn Backend>>,
    pins: BTreeMap<NodeId, usize>,
    pub(crate) cache: Vec<Planned>,
    /// Index into `cache` of the current plan.
    pub(crate) current: Option<usize>,
    pub(crate) pool: Pool,
    pub(crate) stats: Stats,
    clock: u64,
    /// Host staging memory for copies from backends without `host_slice`, kept between steps.
    staging: Vec<u8>,
    /// Bytes of the last `read_*_into`, kept so reads in a decode loop do not allocate.
    pub(crate) read_scratch: Vec<u8>,
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
        Ok(Scheduler {
            backends,
            pins: BTreeMap::new(),
            cache: Vec::new(),
            current: None,
            pool: Pool::default(),
            stats: Stats::default(),
            clock: 0,
            staging: Vec::new(),
            read_scratch: Vec::new(),
        })
    }

    /// The backends' names, preference order.
    pub fn backend_names(&self) -> Vec<&str> {
        self.backends.iter().map(|b| b.name()).collect()
    }

    /// Pins `node` (a compute node or a leaf; not a view) to the backend named `backend`. Takes
    /// effect at the next `plan` (a changed pin set is another cache key).
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

    /// Makes `g` the current graph and returns its plan. A graph whose topology hash and pins the
    /// cache holds is not planned again; otherwise it is planned (assignment, splits, copies,
    /// buffers), its buffers are taken from the pool (allocating or growing only what the pool
    /// lacks), and the plan is cached (the least recently used of [`PLAN_CACHE`] plans leaves).
    ///
    /// Params and state tensors with the same name, dtype and shape on the same backend share one
    /// buffer across plans: weights are not uploaded again and state keeps its contents. A param's
    /// storage is not allocated here but when it is first given data (`set_input` allocates and
    /// copies; `set_input_shared` may read the caller's bytes in place and allocate nothing). Inputs
    /// share buffers with other plans' inputs, so whenever the current plan changes, every input
    /// must be set again before `compute` (params only once, state never). When a planning pass
    /// fails (say, a node no backend supports) or an allocation fails, the error is returned and no
    /// plan is current; cached plans stay.
    pub fn plan(&mut self, g: &Graph) -> Result<&Plan, SchedError> {
        let key = self.key(g);
        self.clock += 1;
        if let Some(i) = self.cache.iter().position(|p| p.key == key) {
            self.stats.cache_hits += 1;
            self.switch_to(i);
            return Ok(&self.cache[i].plan);
        }
        self.current = None;
        let pins = self.pins_with_state(g, self.pins.clone())?;
        let plan = plan_graph(g, &self.backends, &pins)?;
        self.stats.plans += 1;
        let (slots, fresh) = self.pool.ensure(&mut self.backends, g, &plan.buffers, key, false)?;
        if fresh > 0 {
            self.stats.allocations += 1;
            self.stats.buffers += fresh;
        }
        self.cache.push(Planned::new(key, g, plan, slots, self.clock, None, Vec::new()));
        // The new plan is the most recently used: the least recently used one leaves (with its
        // side plans), and frees the leaves (params, state) no remaining plan shares. The new plan
        // registered as a user of its leaves first, so a weight or state it shares with the
        // leaving plan stays.
        let released = self.evict_beyond(PLAN_CACHE, false);
        let i = self.cache.iter().position(|p| p.key == key).expect("just cached");
        self.switch_to(i);
        released?;
        Ok(&self.cache[i].plan)
    }

    /// While more than `max` main plans (or side plans, with `side`) are cached, the least
    /// recently used of them leaves, a main plan with its side plans.
    fn evict_beyond(&mut self, max: usize, side: bool) -> Result<(), SchedError> {
        let mut released = Ok(());
        loop {
            let of_kind = |p: &Planned| p.base.is_some() == side;
            if self.cache.iter().filter(|p| of_kind(p)).count() <= max {
                return released;
            }
            let lru = (0..self.cache.len())
                .filter(|&i| of_kind(&self.cache[i]))
                .min_by_key(|&i| self.cache[i].used)
                .expect("more than max of them");
            let key = self.cache[lru].key;
            let current = self.current.map(|i| self.cache[i].key);
            let mut gone = vec![key];
            gone.extend(self.cache.iter().filter(|p| p.base == Some(key)).map(|p| p.key));
            self.cache.retain(|p| !gone.contains(&p.key));
            for k in gone {
                released = released.and(self.pool.release(&mut self.backends, k));
            }
            self.current = current.and_then(|k| self.cache.iter().position(|p| p.key == k));
        }
    }

    /// Makes `g` the current plan as a *side plan* of the current plan (its *base*; where a side
    /// plan is current, that one's base): a graph to run after the base's step that reads some of
    /// the base's tensors in place (see the module docs). `links` pairs each *linked leaf* of `g`
    /// (an input leaf) with the base's tensor it stands for: of the same dtype and shape,
    /// contiguous, an input or output of the base (whose storage no other node reuses within a
    /// step). A linked leaf lives where the base keeps the tensor (its consumers may run
    /// elsewhere: the tensor is then copied); it is never written (`set_input` on it is an
    /// error) and needs no setting before `compute`, which it reads as the base's last
    /// `compute` left it (the base must have computed since it became current).
    ///
    /// Cached like main plans (apart from them: [`SIDE_CACHE`]); every other input of `g` must be
    /// set before each `compute`. State tensors are shared with the base by name, as between
    /// main plans. Call [`Scheduler::end_side`] to make the base current again: its inputs and
    /// outputs are as the side plan found them.
    pub fn plan_side(&mut self, g: &Graph, links: &[(NodeId, NodeId)]) -> Result<&Plan, SchedError> {
        let cur = self.current.ok_or(SchedError::NotPlanned { what: "plan_side" })?;
        let base_i = match self.cache[cur].base {
            Some(k) => self.cache.iter().position(|p| p.key == k).expect("a side plan's base stays cached"),
            None => cur,
        };
        let base_key = self.cache[base_i].key;
        let mut h = graph::Fnv64::default();
        h.write_u64(g.topology_hash());
        h.write_u64(base_key);
        for (leaf, node) in links {
            h.write_u64(u64::from(leaf.0));
            h.write_u64(u64::from(node.0));
        }
        let key = h.finish();
        self.clock += 1;
        if let Some(i) = self.cache.iter().position(|p| p.key == key) {
            self.stats.cache_hits += 1;
            self.switch_to(i);
            return Ok(&self.cache[i].plan);
        }
        let base = &self.cache[base_i];
        let mut linked = Vec::with_capacity(links.len());
        let mut pins = BTreeMap::new();
        let mut base_slots = Vec::with_capacity(links.len());
        for &(leaf, node) in links {
            let bad = |reason: &'static str| SchedError::BadLink {
                leaf: if leaf.index() < g.len() { g.describe(leaf) } else { leaf.to_string() },
                node: if node.index() < base.graph.len() { base.graph.describe(node) } else { node.to_string() },
                reason,
            };
            let (Some(l), Some(n)) = (g.get(leaf), base.graph.get(node)) else {
                return Err(bad("is not a node of its graph"));
            };
            if l.op != Op::Input || l.flags.param || l.flags.state {
                return Err(bad("the linked node must be an input leaf (neither a param nor state)"));
            }
            if links.iter().filter(|x| x.0 == leaf).count() > 1 {
                return Err(bad("is linked twice"));
            }
            if l.dtype != n.dtype || l.layout.ne != n.layout.ne {
                return Err(bad("dtype and shape must be the base tensor's"));
            }
            if !n.layout.is_contiguous(n.dtype) || n.layout.offset != 0 {
                return Err(bad("the base tensor must be contiguous and start its storage"));
            }
            let st = base.graph.storage_of(node);
            let np = &base.plan.nodes[st.index()];
            let region = np.region.expect("storages own a region");
            let pb = &base.plan.buffers[region.buffer];
            if matches!(pb.role, BufferRole::Arena | BufferRole::ReadBack | BufferRole::Linked) {
                return Err(bad("the base tensor must be an input or output of the base (an intermediate is reused)"));
            }
            linked.push(crate::alloc::Linked {
                leaf,
                backend: np.backend,
                buffer_size: pb.size,
                kind: pb.kind,
                offset: region.offset,
            });
            pins.insert(leaf, np.backend);
            base_slots.push(base.slots[region.buffer]);
        }
        let pins = self.pins_with_state(g, pins)?;
        let plan = crate::planner::plan_linked(g, &self.backends, &pins, &linked)?;
        self.stats.plans += 1;
        let own = plan.buffers.len() - linked.len();
        let (mut slots, fresh) = self.pool.ensure(&mut self.backends, g, &plan.buffers[..own], key, true)?;
        slots.extend(base_slots);
        if fresh > 0 {
            self.stats.allocations += 1;
            self.stats.buffers += fresh;
        }
        let links = links.iter().map(|l| l.0).collect();
        self.cache.push(Planned::new(key, g, plan, slots, self.clock, Some(base_key), links));
        let released = self.evict_beyond(SIDE_CACHE, true);
        let i = self.cache.iter().position(|p| p.key == key).expect("just cached");
        self.switch_to(i);
        released?;
        Ok(&self.cache[i].plan)
    }

    /// Makes the current side plan's base current again, as the side plan found it (its inputs
    /// set, its outputs readable where it had computed). Nothing happens where no side plan is
    /// current.
    pub fn end_side(&mut self) -> Result<(), SchedError> {
        let cur = self.current.ok_or(SchedError::NotPlanned { what: "end_side" })?;
        let Some(base) = self.cache[cur].base else { return Ok(()) };
        let b = self.cache.iter().position(|p| p.key == base).expect("a side plan's base stays cached");
        self.clock += 1;
        let p = &mut self.cache[b];
        p.used = self.clock;
        p.refresh(&self.pool);
        self.current = Some(b);
        Ok(())
    }

    /// Whether the current plan is a side plan ([`Scheduler::plan_side`]).
    pub fn in_side(&self) -> bool {
        self.planned().is_some_and(|p| p.base.is_some())
    }

    /// `pins` (the user's) plus one for every state tensor of `g` whose contents the pool already
    /// holds: state stays on the backend where it was first placed (a re-plan that moved it would
    /// start it from zero).
    fn pins_with_state(
        &self,
        g: &Graph,
        mut pins: BTreeMap<NodeId, usize>,
    ) -> Result<BTreeMap<NodeId, usize>, SchedError> {
        for (id, n) in g.nodes() {
            let Some(name) = n.name.as_deref().filter(|_| n.flags.state) else { continue };
            let Some(b) = self.pool.state_backend(name, n.dtype, n.layout.ne) else { continue };
            match pins.insert(id, b) {
                Some(pinned) if pinned != b => {
                    return Err(SchedError::StatePinned {
                        node: g.describe(id),
                        lives: self.backends[b].name().to_string(),
                        pinned: self.backends[pinned].name().to_string(),
                    });
                }
                _ => {}
            }
        }
        Ok(pins)
    }

    /// Plans `worst` (the largest batch and configuration the runner will use) and sizes the pool
    /// for it, so that later plans whose buffers fit allocate nothing. The worst-case plan is cached
    /// like any other and becomes current.
    pub fn reserve(&mut self, worst: &Graph) -> Result<&Plan, SchedError> {
        self.plan(worst)
    }

    /// Makes cache entry `i` current: refreshes its buffers and bindings if the pool changed, and
    /// forgets which inputs were set if another plan ran in between (they share buffers).
    fn switch_to(&mut self, i: usize) {
        let p = &mut self.cache[i];
        p.used = self.clock;
        p.refresh(&self.pool);
        if self.current != Some(i) {
            p.set.iter_mut().for_each(|s| *s = false);
            p.computed = false;
            self.current = Some(i);
        }
    }

    /// Drops every cached plan and frees all buffers (params and state included); the next `plan`
    /// starts from scratch. Pins and counters are kept.
    pub fn reset(&mut self) -> Result<(), SchedError> {
        self.cache.clear();
        self.current = None;
        self.pool.clear(&mut self.backends)
    }

    /// The graph of the current plan, if any.
    pub fn graph(&self) -> Option<&Graph> {
        self.planned().map(|p| &p.graph)
    }

    /// The current plan, if any.
    pub fn current_plan(&self) -> Option<&Plan> {
        self.planned().map(|p| &p.plan)
    }

    /// The current plan as text (empty before the first `plan`).
    pub fn plan_text(&self) -> String {
        self.planned().map(|p| p.plan.to_text(&p.graph)).unwrap_or_default()
    }

    /// Plans in the cache.
    pub fn cached_plans(&self) -> usize {
        self.cache.len()
    }

    /// Bytes the pool holds in buffers of `role` (shared and per-leaf).
    pub fn pool_bytes(&self, role: BufferRole) -> usize {
        self.pool.bytes(role)
    }

    /// Bytes of the params that backends read in place (`set_input_shared` imports), and how many
    /// params: memory the pool did not allocate.
    pub fn imported(&self) -> (usize, usize) {
        self.pool.imported()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub(crate) fn planned(&self) -> Option<&Planned> {
        self.current.map(|i| &self.cache[i])
    }

    /// Runs one step of the current plan: per split, its copies, then its nodes; then waits for
    /// every backend. A side plan's step needs its base to have computed (its linked leaves read
    /// what that step left).
    pub fn compute(&mut self) -> Result<(), SchedError> {
        let Scheduler { backends, cache, current, pool, stats, staging, .. } = self;
        let i = current.ok_or(SchedError::NotPlanned { what: "compute" })?;
        if let Some(base) = cache[i].base
            && !cache.iter().any(|p| p.key == base && p.computed)
        {
            let node = cache[i].links.first().map(|&l| cache[i].graph.describe(l)).unwrap_or_default();
            return Err(SchedError::NotComputed { node: format!("{node} (linked: its base plan)") });
        }
        let p = &mut cache[i];
        let side = p.base.is_some();
        for (id, n) in p.graph.nodes() {
            if n.op != Op::Input || n.flags.state || p.links.contains(&id) {
                continue;
            }
            let set = if n.flags.param { p.slot_of(id).is_some_and(|s| pool.leaf_set(s)) } else { p.set[id.index()] };
            if !set {
                let kind = if n.flags.param { "param" } else { "input" };
                return Err(SchedError::InputNotSet { kind, node: p.graph.describe(id) });
            }
        }
        // Params given storage since the plan was resolved (every one has some now).
        p.refresh(pool);
        let _span = tracing::info_span!("compute", step = stats.steps, side, splits = p.plan.splits.len()).entered();
        if !side {
            stats.step_bytes_between_backends = 0;
            stats.step_bytes_to_host = 0;
        }
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
        if side {
            stats.side_steps += 1;
        } else {
            stats.steps += 1;
        }
        Ok(())
    }

    /// The backends (for inspection).
    pub fn backends(&self) -> &[Box<dyn Backend>] {
        &self.backends
    }

    /// The work every backend has handed to its device so far, summed (see
    /// [`crate::WorkCounts`]; the difference across a step is that step's dispatches, submissions
    /// and host waits).
    pub fn work_counts(&self) -> crate::WorkCounts {
        self.backends.iter().map(|b| b.work_counts()).fold(crate::WorkCounts::default(), |a, b| a + b)
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if let Err(e) = self.reset() {
            tracing::warn!(error = %e, "freeing the pool's buffers failed");
        }
    }
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
