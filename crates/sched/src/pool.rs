//! The backend buffers that plans share: [`Pool`].
//!
//! Plans do not own buffers. Each plan buffer resolves to a pool buffer:
//! - a **shared** buffer per `(backend, role, chunk)` for the roles whose contents live at most
//!   one step (inputs, outputs, read-back regions, arenas): every cached plan uses the same ones,
//!   grown (freed and allocated again, larger) only when a plan needs more than they hold, so
//!   after `Scheduler::reserve` of the worst case, smaller plans allocate nothing;
//! - a **leaf** buffer per param or state tensor, identified by backend, role, name, dtype and
//!   shape: every plan that has the same weight or state shares it and its data, so a re-plan
//!   neither re-uploads weights nor loses a KV cache. A leaf buffer is freed when no cached plan
//!   uses it any more.
//!
//! A shared buffer that grows gets a new [`BufferId`]; the pool's `generation` counts such
//! changes so that cached plans re-resolve their bindings before they run again.

use crate::backend::{Backend, BufferId};
use crate::error::SchedError;
use crate::plan::{BufferRole, Plan};
use graph::{DType, Graph, Shape};
use std::collections::{BTreeSet, HashMap};

/// A param's or state tensor's buffer and what identifies it across graphs.
#[derive(Debug)]
struct Leaf {
    backend: usize,
    role: BufferRole,
    /// `None` for an unnamed leaf, which only the plan that made it uses.
    name: Option<String>,
    dtype: DType,
    ne: Shape,
    size: usize,
    id: BufferId,
    /// Written since allocation (params must be, before a compute).
    set: bool,
    /// Cache keys of the plans that use it.
    users: BTreeSet<u64>,
}

/// Buffers shared by the cached plans (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Pool {
    shared: HashMap<(usize, BufferRole, usize), (BufferId, usize)>,
    leaves: Vec<Option<Leaf>>,
    /// Bumped whenever a shared buffer is replaced.
    pub generation: u64,
}

/// What a plan buffer resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Shared(usize, BufferRole, usize),
    Leaf(usize),
}

impl Pool {
    /// Makes sure every buffer of `plan` (cache key `key`) exists at its size, allocating or
    /// growing what is missing; returns each plan buffer's slot and how many buffers were
    /// allocated. On an allocation failure, what this call allocated for leaves is given back
    /// (grown shared buffers stay, larger) and the error is returned.
    pub fn ensure(
        &mut self,
        backends: &mut [Box<dyn Backend>],
        g: &Graph,
        plan: &Plan,
        key: u64,
    ) -> Result<(Vec<Slot>, u64), SchedError> {
        let mut slots = Vec::with_capacity(plan.buffers.len());
        let mut fresh = 0u64;
        let mut new_leaves = Vec::new();
        for pb in &plan.buffers {
            let r = match pb.leaf {
                Some(leaf) => {
                    let n = g.node(leaf);
                    let found = self.leaves.iter().position(|l| {
                        l.as_ref().is_some_and(|l| {
                            l.backend == pb.backend
                                && l.role == pb.role
                                && l.name.is_some()
                                && l.name == n.name
                                && l.dtype == n.dtype
                                && l.ne == n.layout.ne
                                && l.size == pb.size
                        })
                    });
                    match found {
                        Some(i) => {
                            self.leaves[i].as_mut().expect("found").users.insert(key);
                            Ok(Slot::Leaf(i))
                        }
                        None => backends[pb.backend].alloc(pb.size, pb.kind).map(|id| {
                            fresh += 1;
                            let leaf = Leaf {
                                backend: pb.backend,
                                role: pb.role,
                                name: n.name.clone(),
                                dtype: n.dtype,
                                ne: n.layout.ne,
                                size: pb.size,
                                id,
                                set: false,
                                users: BTreeSet::from([key]),
                            };
                            let i = match self.leaves.iter().position(Option::is_none) {
                                Some(i) => i,
                                None => {
                                    self.leaves.push(None);
                                    self.leaves.len() - 1
                                }
                            };
                            self.leaves[i] = Some(leaf);
                            new_leaves.push(i);
                            Slot::Leaf(i)
                        }),
                    }
                }
                None => {
                    let k = (pb.backend, pb.role, pb.chunk);
                    match self.shared.get(&k) {
                        Some(&(_, size)) if size >= pb.size => Ok(Slot::Shared(k.0, k.1, k.2)),
                        old => {
                            // The larger buffer first: if it cannot be had, the old one (and every
                            // cached plan using it) stays as it was.
                            let old = old.map(|&(id, _)| id);
                            match backends[pb.backend].alloc(pb.size, pb.kind) {
                                Ok(id) => {
                                    fresh += 1;
                                    self.shared.insert(k, (id, pb.size));
                                    match old {
                                        Some(old) => {
                                            self.generation += 1;
                                            backends[pb.backend].free(old).map(|()| Slot::Shared(k.0, k.1, k.2))
                                        }
                                        None => Ok(Slot::Shared(k.0, k.1, k.2)),
                                    }
                                }
                                Err(e) => Err(e),
                            }
                        }
                    }
                }
            };
            match r {
                Ok(s) => slots.push(s),
                Err(e) => {
                    for i in new_leaves {
                        if let Some(l) = self.leaves[i].take() {
                            let _ = backends[l.backend].free(l.id);
                        }
                    }
                    for l in self.leaves.iter_mut().flatten() {
                        l.users.remove(&key);
                    }
                    return Err(e.into());
                }
            }
        }
        Ok((slots, fresh))
    }

    /// The backend holding the state tensor `name` of this dtype and shape, if the pool has it.
    pub fn state_backend(&self, name: &str, dtype: DType, ne: Shape) -> Option<usize> {
        self.leaves.iter().flatten().find_map(|l| {
            (l.role == BufferRole::State && l.name.as_deref() == Some(name) && l.dtype == dtype && l.ne == ne)
                .then_some(l.backend)
        })
    }

    /// The backend buffer of a slot.
    pub fn buffer(&self, slot: Slot) -> BufferId {
        match slot {
            Slot::Shared(b, role, chunk) => self.shared[&(b, role, chunk)].0,
            Slot::Leaf(i) => self.leaves[i].as_ref().expect("live leaf").id,
        }
    }

    /// Whether the leaf of `slot` has been written (always true for shared slots).
    pub fn leaf_set(&self, slot: Slot) -> bool {
        match slot {
            Slot::Leaf(i) => self.leaves[i].as_ref().is_some_and(|l| l.set),
            Slot::Shared(..) => true,
        }
    }

    /// Records that the leaf of `slot` was written.
    pub fn mark_set(&mut self, slot: Slot) {
        if let Slot::Leaf(i) = slot
            && let Some(l) = self.leaves[i].as_mut()
        {
            l.set = true;
        }
    }

    /// A plan left the cache: frees the leaves no other cached plan uses.
    pub fn release(&mut self, backends: &mut [Box<dyn Backend>], key: u64) -> Result<(), SchedError> {
        let mut r = Ok(());
        for slot in &mut self.leaves {
            if let Some(l) = slot
                && l.users.remove(&key)
                && l.users.is_empty()
            {
                let l = slot.take().expect("checked");
                r = r.and(backends[l.backend].free(l.id));
            }
        }
        Ok(r?)
    }

    /// Frees every buffer.
    pub fn clear(&mut self, backends: &mut [Box<dyn Backend>]) -> Result<(), SchedError> {
        let mut r = Ok(());
        for ((b, _, _), (id, _)) in self.shared.drain() {
            r = r.and(backends[b].free(id));
        }
        for l in self.leaves.drain(..).flatten() {
            r = r.and(backends[l.backend].free(l.id));
        }
        self.generation += 1;
        Ok(r?)
    }

    /// Bytes held, per role (for stats and tests).
    pub fn bytes(&self, role: BufferRole) -> usize {
        let shared: usize = self.shared.iter().filter(|(k, _)| k.1 == role).map(|(_, v)| v.1).sum();
        let leaves: usize = self.leaves.iter().flatten().filter(|l| l.role == role).map(|l| l.size).sum();
        shared + leaves
    }
}
