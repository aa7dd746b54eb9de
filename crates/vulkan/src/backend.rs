//! [`VulkanBackend`]: buffers (device-local, and host-visible pinned memory that is host-cached where
//! the device offers it), uploads and downloads (mapped, or through pooled staging buffers), batched
//! buffer-to-buffer copies (`copy_regions`), one command buffer per split, fences, optional
//! timestamps (`GGS_VULKAN_TIMESTAMPS=1`) reported via `tracing`.
//!
//! Ordering: there is one queue, and every command buffer starts its work behind a full memory
//! barrier (each compute dispatch has one, see [`crate::encoder`]; every transfer command buffer
//! opens with one), so submissions run one after another in submission order and each sees the
//! writes of all earlier ones. Every command buffer ends with a barrier that makes its writes
//! visible to host reads once its fence has signalled. Submissions carry increasing serials;
//! finishing serial `s` finishes everything submitted before it.
//!
//! Waiting rules:
//! - Uploads into device memory, and the zero fill of a new device buffer, do not wait for the
//!   device: the data goes into a staging buffer and the copy is submitted behind the barrier
//!   (so it cannot overtake earlier work that reads or writes the destination). The only wait is
//!   for the previous transfer of the staging buffer about to be reused.
//! - Downloads from device memory and `copy_regions` submit one command buffer (ordered after all
//!   earlier work by its barrier, nothing is drained first) and wait for that submission's fence;
//!   the earlier submissions, already finished by then, are retired too, so their run-time errors
//!   are reported and host reads (`host_slice`) see no work in flight.
//! - Host-visible buffers are written and read in place after waiting for all in-flight work (a
//!   submitted split may read or write them); `free` also waits for everything.
//!
//! Staging: one pool of host-visible buffers in power-of-two size classes from [`STAGING_MIN`] to
//! [`STAGING_MAX`] bytes, at most [`STAGING_PER_CLASS`] per class, allocated on first use, reused
//! across transfers and freed when the backend is dropped. Transfers longer than `STAGING_MAX` go
//! through it in chunks, two of which can be in flight at once.

use crate::device::{self, Gpu, MessageLog};
use crate::encoder::{Encoder, Status};
use crate::shaders::{self, ShaderId};
use ash::vk;
use graph::{Graph, NodeId};
use sched::{Backend, BackendError, BackendResult, BufferId, CopyRegion, MemoryKind, SplitTask};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use vulkano::VulkanObject;
use vulkano::buffer::{Buffer, BufferCreateInfo, BufferMemory, BufferUsage, Subbuffer};
use vulkano::command_buffer::allocator::{StandardCommandBufferAllocator, StandardCommandBufferAllocatorCreateInfo};
use vulkano::command_buffer::{BufferCopy, CommandBufferLevel, CommandBufferUsage, CopyBufferInfo};
use vulkano::command_buffer::{CommandBuffer, CommandBufferBeginInfo, RecordingCommandBuffer};
use vulkano::descriptor_set::DescriptorSet;
use vulkano::descriptor_set::allocator::StandardDescriptorSetAllocator;
use vulkano::descriptor_set::layout::{
    DescriptorSetLayout, DescriptorSetLayoutBinding, DescriptorSetLayoutCreateInfo, DescriptorType,
};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter, StandardMemoryAllocator};
use vulkano::pipeline::compute::ComputePipelineCreateInfo;
use vulkano::pipeline::layout::{PipelineLayoutCreateInfo, PushConstantRange};
use vulkano::pipeline::{ComputePipeline, PipelineLayout, PipelineShaderStageCreateInfo};
use vulkano::query::{QueryPool, QueryResultFlags};
use vulkano::shader::{ShaderModule, ShaderModuleCreateInfo, ShaderStages, SpecializationConstant};
use vulkano::sync::fence::{Fence, FenceCreateInfo};
use vulkano::sync::{AccessFlags, DependencyInfo, MemoryBarrier, PipelineStages};

/// Construction options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Enable `VK_LAYER_KHRONOS_validation` (when installed) and record its messages.
    pub validation: bool,
    /// Device index or name substring (overrides `GGS_VULKAN_DEVICE`).
    pub device: Option<String>,
    /// Record per-node timestamps (also enabled by `GGS_VULKAN_TIMESTAMPS=1`).
    pub timestamps: bool,
    /// Where validation messages are recorded (a fresh log when `None`); lets a caller that hands
    /// the backend to a scheduler still read them.
    pub log: Option<MessageLog>,
    /// Use the shared-memory shader variants even where subgroup operations exist.
    pub no_subgroups: bool,
}

#[derive(Debug)]
pub(crate) struct Buf {
    pub sub: Subbuffer<[u8]>,
    pub host_visible: bool,
    pub coherent: bool,
    pub len: usize,
}

/// Smallest staging buffer, in bytes (the first size class).
pub const STAGING_MIN: usize = 64 << 10;
/// Largest staging buffer, in bytes (the last size class); longer transfers are split into chunks
/// of this size.
pub const STAGING_MAX: usize = 16 << 20;
/// Staging buffers kept per size class: with two, a chunked transfer fills one while the copy
/// from the other runs.
pub const STAGING_PER_CLASS: usize = 2;

/// The staging size class for a transfer (chunk) of `len` bytes: a power of two in
/// `STAGING_MIN..=STAGING_MAX`.
fn staging_class(len: usize) -> usize {
    len.clamp(STAGING_MIN, STAGING_MAX).next_power_of_two()
}

/// A pooled staging buffer and the serial of the last submission that used it (0: none).
#[derive(Debug)]
struct Staging {
    sub: Subbuffer<[u8]>,
    last_use: u64,
}

#[derive(Debug)]
struct InFlight {
    serial: u64,
    fence: Fence,
    _cb: CommandBuffer,
    _keep: Vec<Arc<DescriptorSet>>,
    /// Buffers a transfer reads or writes, kept alive until its fence signals.
    _bufs: Vec<Subbuffer<[u8]>>,
    timing: Option<(Arc<QueryPool>, Vec<String>)>,
    status: Status,
}

/// The Vulkan backend. See the crate documentation.
pub struct VulkanBackend {
    pub(crate) gpu: Gpu,
    pub(crate) mem: Arc<StandardMemoryAllocator>,
    cmd: Arc<StandardCommandBufferAllocator>,
    pub(crate) sets: Arc<StandardDescriptorSetAllocator>,
    pub(crate) set_layout: Arc<DescriptorSetLayout>,
    pub(crate) layout: Arc<PipelineLayout>,
    pipelines: HashMap<ShaderId, Arc<ComputePipeline>>,
    pub(crate) buffers: BTreeMap<u32, Buf>,
    next_id: u32,
    pub(crate) scratch: Vec<Subbuffer<[u8]>>,
    /// Submitted, not yet retired command buffers, in submission (= completion) order.
    in_flight: VecDeque<InFlight>,
    /// Serial of the next submission (serials start at 1; 0 means "never submitted").
    next_serial: u64,
    /// The staging pool (see the module documentation).
    staging: Vec<Staging>,
    log: MessageLog,
    timestamps: bool,
}

impl std::fmt::Debug for VulkanBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanBackend")
            .field("device", &self.gpu.name)
            .field("subgroups", &self.gpu.subgroups)
            .field("buffers", &self.buffers.len())
            .finish_non_exhaustive()
    }
}

fn err(msg: impl Into<String>) -> BackendError {
    BackendError::Other { backend: crate::NAME.into(), msg: msg.into() }
}

impl VulkanBackend {
    /// Opens the preferred device (see [`crate::device`]); the validation layer and the recording
    /// messenger are enabled when `GGS_VULKAN_VALIDATION=1` or `VK_LOADER_LAYERS_ENABLE` names it.
    pub fn new() -> BackendResult<VulkanBackend> {
        let validation = std::env::var_os("GGS_VULKAN_VALIDATION").is_some_and(|v| v == "1")
            || std::env::var("VK_LOADER_LAYERS_ENABLE").is_ok_and(|v| v.contains("validation"));
        VulkanBackend::with_options(Options { validation, ..Options::default() })
    }

    /// Opens a device with explicit options.
    pub fn with_options(opts: Options) -> BackendResult<VulkanBackend> {
        let log: MessageLog = opts.log.clone().unwrap_or_else(|| Arc::new(Mutex::new(Vec::new())));
        let unavailable = |reason: String| BackendError::Unavailable { backend: crate::NAME.into(), reason };
        let mut gpu = device::open(opts.validation, opts.device.as_deref(), &log).map_err(unavailable)?;
        gpu.subgroups &= !opts.no_subgroups;
        let device = gpu.device.clone();
        let mem = Arc::new(StandardMemoryAllocator::new_default(device.clone()));
        let cmd = Arc::new(StandardCommandBufferAllocator::new(
            device.clone(),
            StandardCommandBufferAllocatorCreateInfo::default(),
        ));
        let sets = Arc::new(StandardDescriptorSetAllocator::new(device.clone(), Default::default()));
        let binding = DescriptorSetLayoutBinding {
            stages: ShaderStages::COMPUTE,
            ..DescriptorSetLayoutBinding::descriptor_type(DescriptorType::StorageBuffer)
        };
        let set_layout = DescriptorSetLayout::new(
            device.clone(),
            DescriptorSetLayoutCreateInfo {
                bindings: (0..4u32).map(|i| (i, binding.clone())).collect(),
                ..Default::default()
            },
        )
        .map_err(|e| unavailable(format!("descriptor set layout: {e}")))?;
        let layout = PipelineLayout::new(
            device.clone(),
            PipelineLayoutCreateInfo {
                set_layouts: vec![set_layout.clone()],
                push_constant_ranges: vec![PushConstantRange { stages: ShaderStages::COMPUTE, offset: 0, size: 128 }],
                ..Default::default()
            },
        )
        .map_err(|e| unavailable(format!("pipeline layout: {e}")))?;
        let timestamps = (opts.timestamps || std::env::var_os("GGS_VULKAN_TIMESTAMPS").is_some_and(|v| v == "1"))
            && gpu.timestamps_valid;
        Ok(VulkanBackend {
            gpu,
            mem,
            cmd,
            sets,
            set_layout,
            layout,
            pipelines: HashMap::new(),
            buffers: BTreeMap::new(),
            next_id: 0,
            scratch: Vec::new(),
            in_flight: VecDeque::new(),
            next_serial: 1,
            staging: Vec::new(),
            log,
            timestamps,
        })
    }

    /// The selected device's name.
    pub fn device_name(&self) -> &str {
        &self.gpu.name
    }

    /// Whether the subgroup shader variants are used.
    pub fn uses_subgroups(&self) -> bool {
        self.gpu.subgroups
    }

    /// Whether the validation layer is active.
    pub fn validation_enabled(&self) -> bool {
        self.gpu.validation
    }

    /// Every validation message recorded so far (warnings and errors).
    pub fn validation_messages(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub(crate) fn pipeline(&mut self, id: ShaderId) -> BackendResult<Arc<ComputePipeline>> {
        if let Some(p) = self.pipelines.get(&id) {
            return Ok(p.clone());
        }
        let v = shaders::variant(id);
        let words = shaders::spirv_words(v);
        let device = self.gpu.device.clone();
        // SAFETY: the SPIR-V comes from glslc (checked against its source by a test) and only
        // accesses the bound buffers within the bounds the host code computes.
        let module = unsafe { ShaderModule::new(device.clone(), ShaderModuleCreateInfo::new(&words)) }
            .map_err(|e| err(format!("shader {}: {e}", v.name)))?;
        let spec = [(0u32, SpecializationConstant::U32(v.wg))].into_iter().collect();
        let entry = module
            .specialize(spec)
            .map_err(|e| err(format!("shader {}: {e}", v.name)))?
            .entry_point("main")
            .ok_or_else(|| err(format!("shader {} has no main", v.name)))?;
        let stage = PipelineShaderStageCreateInfo::new(entry);
        let p = ComputePipeline::new(device, None, ComputePipelineCreateInfo::stage_layout(stage, self.layout.clone()))
            .map_err(|e| err(format!("pipeline {}: {e}", v.name)))?;
        self.pipelines.insert(id, p.clone());
        Ok(p)
    }

    pub(crate) fn buf(&self, id: BufferId) -> BackendResult<&Buf> {
        self.buffers.get(&id.0).ok_or_else(|| err(format!("unknown buffer {}", id.0)))
    }

    pub(crate) fn new_buffer(&self, bytes: usize, kind: MemoryKind) -> BackendResult<Buf> {
        let size = bytes.max(4).next_multiple_of(4) as u64;
        if size > self.gpu.max_storage_range {
            return Err(err(format!(
                "buffer of {bytes} bytes exceeds maxStorageBufferRange {}",
                self.gpu.max_storage_range
            )));
        }
        let filter = match kind {
            MemoryKind::Device => MemoryTypeFilter::PREFER_DEVICE,
            MemoryKind::Host => MemoryTypeFilter::PREFER_HOST | MemoryTypeFilter::HOST_RANDOM_ACCESS,
        };
        let sub = Buffer::new_slice::<u8>(
            self.mem.clone(),
            BufferCreateInfo {
                usage: BufferUsage::STORAGE_BUFFER | BufferUsage::TRANSFER_SRC | BufferUsage::TRANSFER_DST,
                ..Default::default()
            },
            AllocationCreateInfo { memory_type_filter: filter, ..Default::default() },
            size,
        )
        .map_err(|e| match e {
            vulkano::Validated::Error(vulkano::buffer::AllocateBufferError::AllocateMemory(_)) => {
                BackendError::OutOfMemory { backend: crate::NAME.into(), bytes, kind }
            }
            other => err(format!("allocating {bytes} bytes: {other}")),
        })?;
        let (host_visible, coherent) = match sub.buffer().memory() {
            BufferMemory::Normal(a) => (a.mapped_slice(..).is_some(), a.atom_size().is_none()),
            _ => (false, false),
        };
        Ok(Buf { sub, host_visible, coherent, len: bytes })
    }

    fn begin(&self) -> BackendResult<RecordingCommandBuffer> {
        RecordingCommandBuffer::new(
            self.cmd.clone(),
            self.gpu.queue.queue_family_index(),
            CommandBufferLevel::Primary,
            CommandBufferBeginInfo { usage: CommandBufferUsage::OneTimeSubmit, ..Default::default() },
        )
        .map_err(|e| err(format!("begin command buffer: {e}")))
    }

    /// Ends and submits `rec` with a new fence; the returned record keeps its resources alive.
    fn submit(
        &mut self,
        rec: RecordingCommandBuffer,
        keep: Vec<Arc<DescriptorSet>>,
        timing: Option<(Arc<QueryPool>, Vec<String>)>,
        status: Status,
    ) -> BackendResult<()> {
        // SAFETY: recording followed the rules documented at each command (barriers between
        // dependent commands, resources kept alive in `InFlight` until the fence signals).
        let cb = unsafe { rec.end() }.map_err(|e| err(format!("end command buffer: {e}")))?;
        let fence =
            Fence::new(self.gpu.device.clone(), FenceCreateInfo::default()).map_err(|e| err(format!("fence: {e}")))?;
        let handles = [cb.handle()];
        let info = vk::SubmitInfo::default().command_buffers(&handles);
        let queue = self.gpu.queue.clone();
        let fns = self.gpu.device.fns();
        // SAFETY: the queue is externally synchronised by `Queue::with`; the command buffer and
        // fence are valid and unsignalled.
        let r = queue.with(|_guard| unsafe { (fns.v1_0.queue_submit)(queue.handle(), 1, &info, fence.handle()) });
        if r != vk::Result::SUCCESS {
            return Err(err(format!("queue submit failed: {r:?}")));
        }
        self.in_flight.push(InFlight { fence, _cb: cb, _keep: keep, timing, status });
        Ok(())
    }

    /// Waits for every submitted command buffer, reports timestamps, and returns the first
    /// run-time error a shader flagged (an out-of-range row id), naming its node.
    pub(crate) fn wait_all(&mut self) -> BackendResult<()> {
        let mut first_error = None;
        for f in self.in_flight.drain(..) {
            f.fence.wait(None).map_err(|e| err(format!("waiting for the device: {e}")))?;
            if let Some((buf, owners)) = &f.status
                && first_error.is_none()
            {
                let words = buf.read().map_err(|e| err(format!("mapping: {e}")))?;
                first_error = owners.iter().enumerate().find_map(|(i, &(node, op))| {
                    let w = &words[i * 4..i * 4 + 4];
                    (w != [0, 0, 0, 0]).then(|| BackendError::Compute {
                        backend: crate::NAME.into(),
                        node,
                        op,
                        msg: "row id out of range".into(),
                    })
                });
            }
            if let Some((pool, labels)) = f.timing {
                let mut ticks = vec![0u64; labels.len() + 1];
                if pool.get_results(0..ticks.len() as u32, &mut ticks, QueryResultFlags::WAIT).is_ok() {
                    let period = f64::from(self.gpu.timestamp_period);
                    for (i, l) in labels.iter().enumerate() {
                        let us = ticks[i + 1].wrapping_sub(ticks[i]) as f64 * period / 1000.0;
                        tracing::info!(target: "vulkan::timestamps", node = %l, us, "gpu time");
                    }
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Runs one transfer command buffer to completion (staging copies, zero fills).
    fn run_transfer(&mut self, f: impl FnOnce(&mut RecordingCommandBuffer)) -> BackendResult<()> {
        self.wait_all()?;
        let mut rec = self.begin()?;
        f(&mut rec);
        self.submit(rec, Vec::new(), None, None)?;
        self.wait_all()
    }

    fn check_range(&self, id: BufferId, offset: usize, len: usize) -> BackendResult<()> {
        let b = self.buf(id)?;
        if offset.checked_add(len).is_none_or(|e| e > b.len) {
            return Err(err(format!("range {offset}+{len} outside buffer {} of {} bytes", id.0, b.len)));
        }
        Ok(())
    }

    fn staging(&self, len: usize) -> BackendResult<Subbuffer<[u8]>> {
        Ok(self.new_buffer(len, MemoryKind::Host)?.sub)
    }
}

fn copy_info(src: &Subbuffer<[u8]>, so: u64, dst: &Subbuffer<[u8]>, doff: u64, len: u64) -> CopyBufferInfo {
    CopyBufferInfo {
        regions: [BufferCopy { src_offset: so, dst_offset: doff, size: len, ..Default::default() }].into(),
        ..CopyBufferInfo::buffers(src.clone(), dst.clone())
    }
}

impl Backend for VulkanBackend {
    fn name(&self) -> &str {
        crate::NAME
    }

    fn supports(&self, graph: &Graph, node: NodeId) -> bool {
        crate::ops::supports(graph, node)
    }

    fn alloc(&mut self, bytes: usize, kind: MemoryKind) -> BackendResult<BufferId> {
        let b = self.new_buffer(bytes, kind)?;
        if b.host_visible {
            let mut w = b.sub.write().map_err(|e| err(format!("mapping: {e}")))?;
            w.fill(0);
        } else {
            let sub = b.sub.clone();
            // SAFETY: the buffer is new and only this command touches it.
            self.run_transfer(|rec| unsafe {
                rec.fill_buffer_unchecked(&sub.reinterpret::<[u32]>(), 0);
            })?;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.buffers.insert(id, b);
        tracing::debug!(buffer = id, bytes, ?kind, "vulkan alloc");
        Ok(BufferId(id))
    }

    fn free(&mut self, buffer: BufferId) -> BackendResult<()> {
        self.wait_all()?;
        self.buffers.remove(&buffer.0).map(|_| ()).ok_or_else(|| err(format!("unknown buffer {}", buffer.0)))
    }

    fn upload(&mut self, buffer: BufferId, offset: usize, data: &[u8]) -> BackendResult<()> {
        self.check_range(buffer, offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.wait_all()?;
        let b = self.buf(buffer)?;
        if b.host_visible {
            let mut w = b.sub.write().map_err(|e| err(format!("mapping: {e}")))?;
            w[offset..offset + data.len()].copy_from_slice(data);
            return Ok(());
        }
        let dst = b.sub.clone();
        let st = self.staging(data.len())?;
        st.write().map_err(|e| err(format!("mapping: {e}")))?[..data.len()].copy_from_slice(data);
        let info = copy_info(&st, 0, &dst, offset as u64, data.len() as u64);
        // SAFETY: no other work is pending (`run_transfer` waits first and after).
        self.run_transfer(|rec| unsafe {
            rec.copy_buffer_unchecked(&info);
        })
    }

    fn download(&mut self, buffer: BufferId, offset: usize, out: &mut [u8]) -> BackendResult<()> {
        self.check_range(buffer, offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        self.wait_all()?;
        let b = self.buf(buffer)?;
        if b.host_visible {
            let r = b.sub.read().map_err(|e| err(format!("mapping: {e}")))?;
            out.copy_from_slice(&r[offset..offset + out.len()]);
            return Ok(());
        }
        let src = b.sub.clone();
        let st = self.staging(out.len())?;
        let info = copy_info(&src, offset as u64, &st, 0, out.len() as u64);
        // SAFETY: as in `upload`.
        self.run_transfer(|rec| unsafe {
            rec.copy_buffer_unchecked(&info);
        })?;
        out.copy_from_slice(&st.read().map_err(|e| err(format!("mapping: {e}")))?[..out.len()]);
        Ok(())
    }

    fn compute(&mut self, task: SplitTask<'_>) -> BackendResult<()> {
        let _span = tracing::debug_span!("vulkan_split", nodes = task.nodes.len()).entered();
        let rec = self.begin()?;
        let timestamps = self.timestamps;
        let mut enc = Encoder::new(self, rec, task.bindings, timestamps, task.nodes.len())?;
        for &n in task.nodes {
            let node = task.graph.node(n);
            if node.op.is_view() || matches!(node.op, graph::Op::Input) {
                continue;
            }
            crate::ops::encode(&mut enc, task.graph, n)?;
            enc.mark(task.graph, n);
        }
        let (rec, keep, timing, status) = enc.finish();
        self.submit(rec, keep, timing, status)
    }

    fn synchronize(&mut self) -> BackendResult<()> {
        self.wait_all()
    }

    fn host_slice(&self, buffer: BufferId, offset: usize, len: usize) -> Option<&[u8]> {
        let b = self.buffers.get(&buffer.0)?;
        if !b.host_visible || !b.coherent || offset.checked_add(len)? > b.len || !self.in_flight.is_empty() {
            return None;
        }
        let ptr = b.sub.mapped_slice().ok()?;
        // SAFETY: the memory is mapped, coherent, no work is in flight, and the slice borrows
        // `self`, so the buffer outlives it and `&mut self` calls (which could free it) are excluded.
        let all: &[u8] = unsafe { ptr.as_ref() };
        all.get(offset..offset + len)
    }

    fn copy_regions(&mut self, src: BufferId, dst: BufferId, regions: &[CopyRegion]) -> BackendResult<()> {
        for r in regions {
            self.check_range(src, r.src_offset, r.len)?;
            self.check_range(dst, r.dst_offset, r.len)?;
        }
        let regions: Vec<&CopyRegion> = regions.iter().filter(|r| r.len > 0).collect();
        if regions.is_empty() {
            return Ok(());
        }
        if src == dst {
            for (i, a) in regions.iter().enumerate() {
                for b in &regions[i..] {
                    let overlap = |x: usize, y: usize| x < y + b.len && y < x + a.len;
                    if overlap(a.src_offset, b.dst_offset) || overlap(a.dst_offset, b.src_offset) {
                        return Err(err("copy_regions: overlapping ranges within one buffer"));
                    }
                }
            }
        }
        let (s, d) = (self.buf(src)?.sub.clone(), self.buf(dst)?.sub.clone());
        let info = CopyBufferInfo {
            regions: regions
                .iter()
                .map(|r| BufferCopy {
                    src_offset: r.src_offset as u64,
                    dst_offset: r.dst_offset as u64,
                    size: r.len as u64,
                    ..Default::default()
                })
                .collect(),
            ..CopyBufferInfo::buffers(s, d)
        };
        // SAFETY: ranges were bounds-checked and do not overlap within one buffer; `run_transfer`
        // waits for earlier work (which may write `src`) before and for the copy after.
        self.run_transfer(|rec| unsafe {
            rec.copy_buffer_unchecked(&info);
        })
    }

    fn alignment(&self) -> usize {
        64
    }

    fn max_buffer_size(&self) -> usize {
        usize::try_from(self.gpu.max_storage_range.min(u64::from(u32::MAX))).unwrap_or(usize::MAX)
    }
}

impl Drop for VulkanBackend {
    fn drop(&mut self) {
        if let Err(e) = self.wait_all() {
            tracing::error!("vulkan: waiting for the device on drop: {e}");
        }
    }
}
