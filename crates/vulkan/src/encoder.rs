//! Records a split's nodes into a command buffer (the backend submits a split in several pieces):
//! binds a pipeline, a descriptor set of the four operand buffers and the push constants per
//! dispatch, with a memory barrier before each dispatch: the first one's covers every command
//! (it sees earlier submissions, uploads and copies included), a later one's the compute shaders
//! recorded before it (it sees their writes). Also hands out scratch buffers and records per-node
//! timestamps when enabled.

use crate::backend::VulkanBackend;
use crate::error::{NodeError, Result, VulkanError};
use crate::push::{Push, TensorArg};
use crate::shaders::{self, ShaderId};
use graph::{Graph, NodeId};
use sched::{Bindings, MemoryKind};
use std::sync::Arc;
use vulkano::buffer::Subbuffer;
use vulkano::command_buffer::RecordingCommandBuffer;
use vulkano::descriptor_set::{DescriptorSet, WriteDescriptorSet};
use vulkano::pipeline::PipelineBindPoint;
use vulkano::query::{QueryPool, QueryPoolCreateInfo, QueryType};
use vulkano::sync::{AccessFlags, DependencyInfo, MemoryBarrier, PipelineStage, PipelineStages};

/// A tensor operand: its buffer and its shader-side addressing.
#[derive(Debug, Clone)]
pub(crate) struct Operand {
    pub buf: Subbuffer<[u8]>,
    pub arg: TensorArg,
}

/// Records the dispatches of one split.
pub(crate) struct Encoder<'a> {
    be: &'a mut VulkanBackend,
    rec: RecordingCommandBuffer,
    bindings: &'a Bindings,
    keep: Vec<Arc<DescriptorSet>>,
    /// The buffers of dispatches whose descriptors were pushed (kept alive until the fence).
    keep_bufs: Vec<Subbuffer<[u8]>>,
    /// Whether a dispatch was recorded (the first one's barrier covers earlier submissions).
    dispatched: bool,
    timing: Option<(Arc<QueryPool>, Vec<String>, u32)>,
    node: Option<NodeId>,
    /// Host-visible status words (one per checked node) and which node owns each.
    status: Status,
    capacity: usize,
}

/// Status words of a split: the buffer and, per word, the node and op that may set it.
pub(crate) type Status = Option<(Subbuffer<[u8]>, Vec<(NodeId, &'static str)>)>;

/// A node's timestamp label after its number: the op, its first source's type and shape, and its
/// own (`mul_mat q4_1[576,1536] f32[576] -> f32[1536]`; trailing unit dimensions dropped).
fn label(g: &Graph, n: NodeId) -> String {
    let shape = |id: NodeId| {
        let node = g.node(id);
        let ne = node.layout.ne.0;
        let keep = ne.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
        let dims: Vec<String> = ne[..keep].iter().map(usize::to_string).collect();
        format!("{}[{}]", node.dtype, dims.join(","))
    };
    let node = g.node(n);
    let srcs: Vec<String> = node.srcs.iter().take(2).map(|&s| shape(s)).collect();
    format!("{} {} -> {}", node.op, srcs.join(" "), shape(n))
}

/// Grid of workgroups covering `n` items (2-D when more than 65535 groups are needed).
pub(crate) fn grid(n: u64, per_group: u64) -> Result<[u32; 3]> {
    let groups = n.div_ceil(per_group.max(1)).max(1);
    let x = groups.min(65_535);
    let y = groups.div_ceil(x);
    if y > 65_535 {
        return Err(VulkanError::GridTooLarge { items: n, groups });
    }
    Ok([x as u32, y as u32, 1])
}

impl<'a> Encoder<'a> {
    pub(crate) fn new(
        be: &'a mut VulkanBackend,
        rec: RecordingCommandBuffer,
        bindings: &'a Bindings,
        timestamps: bool,
        nodes: usize,
    ) -> Result<Encoder<'a>> {
        let mut enc = Encoder {
            be,
            rec,
            bindings,
            keep: Vec::new(),
            keep_bufs: Vec::new(),
            dispatched: false,
            timing: None,
            node: None,
            status: None,
            capacity: nodes.max(1),
        };
        if timestamps {
            let count = nodes as u32 + 1;
            let pool = QueryPool::new(
                enc.be.gpu.device.clone(),
                QueryPoolCreateInfo { query_count: count, ..QueryPoolCreateInfo::query_type(QueryType::Timestamp) },
            )
            .map_err(|e| VulkanError::QueryPool { cause: e.to_string() })?;
            // SAFETY: the pool is new; reset before use, then one timestamp per query index.
            unsafe {
                enc.rec.reset_query_pool_unchecked(&pool, 0..count);
                enc.rec.write_timestamp_unchecked(&pool, 0, PipelineStage::AllCommands);
            }
            enc.timing = Some((pool, Vec::new(), 1));
        }
        Ok(enc)
    }

    /// Whether the device has the subgroup operations the `*_sg` variants need.
    pub(crate) fn subgroups(&self) -> bool {
        self.be.gpu.subgroups
    }

    /// Whether every row runs on one workgroup (`Options::whole_rows`).
    pub(crate) fn whole_rows(&self) -> bool {
        self.be.whole_rows
    }

    /// The segments a row of `n` entries is split into, `segment` entries each, for the ops that
    /// spread long rows over many workgroups (1: the whole row on one; see `Options::whole_rows`).
    pub(crate) fn segments(&self, n: usize, segment: usize) -> usize {
        if self.be.whole_rows { 1 } else { n.div_ceil(segment).max(1) }
    }

    /// Dispatches recorded (by any encoder of this backend) since the count was `since`.
    pub(crate) fn dispatches_since(&self, since: u64) -> u64 {
        self.be.dispatches - since
    }

    /// Sets the node errors are attributed to.
    pub(crate) fn at(&mut self, n: NodeId) {
        self.node = Some(n);
    }

    /// `error`, attributed to the current node.
    pub(crate) fn fail(&self, g: &Graph, error: NodeError) -> VulkanError {
        match self.node {
            Some(node) => VulkanError::Node { node, op: g.node(node).op.name(), error },
            None => VulkanError::OutsideNode { error },
        }
    }

    /// The operand for node `n` (located at its storage's binding).
    pub(crate) fn operand(&self, g: &Graph, n: NodeId) -> Result<Operand> {
        let loc = self.bindings.get(n).ok_or_else(|| self.fail(g, NodeError::Unbound { operand: n }))?;
        let b = self.be.buf(loc.buffer)?;
        let node = g.node(n);
        let extent = node.layout.extent(node.dtype);
        let arg = TensorArg::of(node, loc.offset).filter(|_| loc.offset + extent <= b.len).ok_or_else(|| {
            let error =
                NodeError::Unaddressable { operand: n, offset: loc.offset, extent, buffer: loc.buffer.0, size: b.len };
            self.fail(g, error)
        })?;
        Ok(Operand { buf: b.sub.clone(), arg })
    }

    /// A zeroed status word for the current node (its shader sets it on a run-time error) and the
    /// host-visible buffer holding it.
    pub(crate) fn status_word(&mut self, g: &Graph) -> Result<(Subbuffer<[u8]>, u32)> {
        if self.status.is_none() {
            let b = self.be.status_buffer(self.capacity * 4)?;
            self.status = Some((b, Vec::new()));
        }
        let node = self.node.ok_or(VulkanError::StatusOutsideNode)?;
        let (buf, owners) = self.status.as_mut().expect("just made");
        if owners.len() >= self.capacity {
            return Err(VulkanError::TooManyCheckedNodes { capacity: self.capacity });
        }
        owners.push((node, g.node(node).op.name()));
        Ok((buf.clone(), owners.len() as u32 - 1))
    }

    /// Scratch buffer `slot` of at least `bytes` bytes (device memory, reused across splits).
    pub(crate) fn scratch(&mut self, slot: usize, bytes: usize) -> Result<Subbuffer<[u8]>> {
        while self.be.scratch.len() <= slot {
            let b = self.be.new_buffer(4, MemoryKind::Device)?;
            self.be.scratch.push(b.sub);
        }
        if (self.be.scratch[slot].len() as usize) < bytes {
            // Earlier submissions may still use the old buffer: keep it alive with this one.
            self.be.wait_all()?;
            let b = self.be.new_buffer(bytes.next_power_of_two(), MemoryKind::Device)?;
            self.be.scratch[slot] = b.sub;
        }
        Ok(self.be.scratch[slot].clone())
    }

    /// Records one dispatch of `shader` over `groups` with operand buffers A, B, C, D.
    pub(crate) fn dispatch(
        &mut self,
        shader: ShaderId,
        bufs: [&Subbuffer<[u8]>; 4],
        push: &Push,
        groups: [u32; 3],
    ) -> Result<()> {
        let pipeline = self.be.pipeline(shader)?;
        let writes = || bufs.iter().enumerate().map(|(i, b)| WriteDescriptorSet::buffer(i as u32, (*b).clone()));
        let set = if self.be.gpu.push_descriptors {
            None
        } else {
            let set =
                DescriptorSet::new(self.be.sets.clone(), self.be.set_layout.clone(), writes(), []).map_err(|e| {
                    VulkanError::DescriptorSet { shader: shaders::variant(shader).name, cause: e.to_string() }
                })?;
            Some(set)
        };
        // The first dispatch of a command buffer waits for everything submitted before it (uploads
        // and copies included); a later one only for the dispatches recorded before it.
        let (stages, write, read) = if self.dispatched {
            (
                PipelineStages::COMPUTE_SHADER,
                AccessFlags::SHADER_WRITE,
                AccessFlags::SHADER_READ | AccessFlags::SHADER_WRITE,
            )
        } else {
            (
                PipelineStages::ALL_COMMANDS,
                AccessFlags::MEMORY_WRITE,
                AccessFlags::MEMORY_READ | AccessFlags::MEMORY_WRITE,
            )
        };
        self.dispatched = true;
        let barrier = DependencyInfo {
            memory_barriers: [MemoryBarrier {
                src_stages: stages,
                src_access: write,
                dst_stages: stages,
                dst_access: read,
                ..Default::default()
            }]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        let words = push.words();
        // SAFETY: the pipeline, layout and set (or pushed descriptors) are compatible (one shared
        // layout); the barrier orders this dispatch after everything recorded or submitted before
        // it; the shader addresses only ranges the op modules computed from bound tensors; the set,
        // or the pushed buffers, are kept alive until the fence.
        unsafe {
            self.rec.pipeline_barrier_unchecked(&barrier);
            self.rec.bind_pipeline_compute_unchecked(&pipeline);
            match &set {
                Some(set) => {
                    self.rec.bind_descriptor_sets_unchecked(
                        PipelineBindPoint::Compute,
                        &self.be.layout,
                        0,
                        &[set.as_raw()],
                        &[],
                    );
                }
                None => {
                    // On the stack: recording is the host's cost per dispatch.
                    let w: [WriteDescriptorSet; 4] =
                        std::array::from_fn(|i| WriteDescriptorSet::buffer(i as u32, bufs[i].clone()));
                    self.rec.push_descriptor_set_unchecked(PipelineBindPoint::Compute, &self.be.layout, 0, &w);
                }
            }
            self.rec.push_constants_unchecked(&self.be.layout, 0, &words);
            self.rec.dispatch_unchecked(groups);
        }
        match set {
            Some(set) => self.keep.push(set),
            None => self.keep_bufs.extend(bufs.iter().map(|b| (*b).clone())),
        }
        self.be.dispatches += 1;
        Ok(())
    }

    /// Marks the end of node `n`'s dispatches (a timestamp when enabled).
    pub(crate) fn mark(&mut self, g: &Graph, n: NodeId) {
        if let Some((pool, labels, next)) = &mut self.timing
            && (*next as usize) < pool.query_count() as usize
        {
            // SAFETY: query `next` was reset at the start of this command buffer and is written once.
            unsafe {
                self.rec.write_timestamp_unchecked(pool, *next, PipelineStage::AllCommands);
            }
            labels.push(format!("{n} {}", label(g, n)));
            *next += 1;
        }
    }

    /// The finished recording, the descriptor sets and buffers it uses and the timing queries.
    #[allow(clippy::type_complexity)]
    pub(crate) fn finish(
        self,
    ) -> (
        RecordingCommandBuffer,
        Vec<Arc<DescriptorSet>>,
        Vec<Subbuffer<[u8]>>,
        Option<(Arc<QueryPool>, Vec<String>)>,
        Status,
    ) {
        (self.rec, self.keep, self.keep_bufs, self.timing.map(|(p, l, _)| (p, l)), self.status)
    }
}
