//! [`VulkanBackend`]: buffers (device-local, and host-visible pinned memory that is host-cached where
//! the device offers it), uploads and downloads (mapped, or through pooled staging buffers), batched
//! buffer-to-buffer copies (`copy_regions`), a split's command buffers (submitted in pieces as they
//! are recorded, so the device starts before the host has recorded the last node), fences, optional
//! timestamps (`GGS_VULKAN_TIMESTAMPS=1`) reported via `tracing`.
//!
//! Ordering: there is one queue, and every command buffer starts its work behind a full memory
//! barrier (a compute command buffer's first dispatch has one, later dispatches a barrier over the
//! compute shaders before them, see [`crate::encoder`]; every transfer command buffer opens with
//! one), so submissions run one after another in submission order and each sees the
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
//!   submitted split may read or write them); `free` also waits for everything. Device memory
//!   that the host can map (integrated GPUs, lavapipe) counts as host-visible unless
//!   [`Options::staged`] is set.
//!
//! Staging: one pool of host-visible buffers in power-of-two size classes from [`STAGING_MIN`] to
//! [`STAGING_MAX`] bytes, at most [`STAGING_PER_CLASS`] per class, allocated on first use, reused
//! across transfers and freed when the backend is dropped. Transfers longer than `STAGING_MAX` go
//! through it in chunks, two of which can be in flight at once.

use crate::device::{self, Gpu, MessageLog};
use crate::encoder::{Encoder, Status};
use crate::error::{CopySide, HostBuffer, NodeError, Result, VulkanError};
use crate::shaders::{self, ShaderId};
use ash::vk;
use graph::{Graph, NodeId};
use sched::{Backend, BackendResult, BufferId, CopyRegion, MemoryKind, SplitTask};
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
    DescriptorSetLayout, DescriptorSetLayoutBinding, DescriptorSetLayoutCreateFlags, DescriptorSetLayoutCreateInfo,
    DescriptorType,
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
    /// Allocate and write a descriptor set per dispatch even where `VK_KHR_push_descriptor` lets
    /// dispatches push their buffers (also enabled by `GGS_VULKAN_DESCRIPTOR_SETS=1`; the tests
    /// use it to cover that path).
    pub descriptor_sets: bool,
    /// Treat device-memory buffers as not host-visible even where device-local memory is mapped
    /// (integrated GPUs, lavapipe), so uploads and downloads go through the staging pool as on a
    /// discrete GPU (also enabled by `GGS_VULKAN_STAGED=1`; the tests use it to cover that path).
    pub staged: bool,
    /// Decline the ops that read quantized weights (`get_rows`/`mul_mat` on q8_0, q4_0, q4_1), so a
    /// mixed plan runs them on the CPU: lavapipe runs the `quant` shaders one workgroup per output
    /// element, too slow for long decode tests of a real model.
    pub cpu_quantized: bool,
    /// Reduce and draw every row on one workgroup, as before rows were split into segments over
    /// many workgroups (`sum_rows`, `max_rows`, `argmax`, `categorical` on rows over 8192 entries),
    /// and `top_k` by radix select over whole rows instead of by block minima: the tests compare
    /// the two.
    pub whole_rows: bool,
}

impl Options {
    /// The options `VulkanBackend::new` uses: validation when `GGS_VULKAN_VALIDATION=1` or
    /// `VK_LOADER_LAYERS_ENABLE` names it.
    pub fn from_env() -> Options {
        let validation = std::env::var_os("GGS_VULKAN_VALIDATION").is_some_and(|v| v == "1")
            || std::env::var("VK_LOADER_LAYERS_ENABLE").is_ok_and(|v| v.contains("validation"));
        Options { validation, ..Options::default() }
    }
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
    /// Host-visible status-word buffers of retired submissions, for reuse (see
    /// [`VulkanBackend::status_buffer`]).
    status_pool: Vec<Subbuffer<[u8]>>,
    /// Submitted, not yet retired command buffers, in submission (= completion) order.
    in_flight: VecDeque<InFlight>,
    /// Serial of the next submission (serials start at 1; 0 means "never submitted").
    next_serial: u64,
    /// The staging pool (see the module documentation).
    staging: Vec<Staging>,
    log: MessageLog,
    timestamps: bool,
    /// See [`Options::staged`].
    staged: bool,
    /// See [`Options::cpu_quantized`].
    cpu_quantized: bool,
    /// See [`Options::whole_rows`].
    pub(crate) whole_rows: bool,
    /// Compute dispatches recorded so far.
    pub(crate) dispatches: u64,
    /// Command buffers submitted so far.
    submissions: u64,
    /// Fence waits of the host so far.
    host_waits: u64,
    /// Signalled-then-reset fences of retired submissions, reused by the next ones.
    spare_fences: Vec<Fence>,
    /// Nanoseconds per phase of a submission's life (see [`VulkanBackend::phase_times`]).
    phase_ns: std::cell::Cell<[u64; PHASES.len()]>,
}

/// How long a fence wait on a GPU polls before it blocks.
const SPIN_BEFORE_BLOCKING: std::time::Duration = std::time::Duration::from_micros(200);

/// The most reset fences kept for reuse (more are destroyed): enough for every submission a step
/// keeps in flight (a split is submitted in pieces of [`SUBMIT_EVERY`] dispatches).
const SPARE_FENCES: usize = 64;

/// A split's first command buffer is submitted once it holds this many dispatches, so the device
/// starts while the host records the rest (an H100 ran a 668-dispatch decode step in 11.6 ms, of
/// which about 4.7 ms were the host recording while the device waited).
const FIRST_SUBMIT: u64 = 8;
/// Each later command buffer of a split is submitted once it holds this many dispatches.
const SUBMIT_EVERY: u64 = 64;

/// The most status-word buffers kept for reuse (a step's pieces each take one).
const STATUS_POOL: usize = 64;

/// The phases [`VulkanBackend::phase_times`] reports, in a submission's order.
pub const PHASES: [&str; 7] = ["begin", "end", "fence", "queue_submit", "wait", "retire", "record"];

impl std::fmt::Debug for VulkanBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanBackend")
            .field("device", &self.gpu.name)
            .field("subgroups", &self.gpu.subgroups)
            .field("buffers", &self.buffers.len())
            .finish_non_exhaustive()
    }
}

impl VulkanBackend {
    /// Opens the preferred device (see [`crate::device`]); the validation layer and the recording
    /// messenger are enabled when `GGS_VULKAN_VALIDATION=1` or `VK_LOADER_LAYERS_ENABLE` names it.
    pub fn new() -> BackendResult<VulkanBackend> {
        VulkanBackend::with_options(Options::from_env())
    }

    /// Opens a device with explicit options.
    pub fn with_options(opts: Options) -> BackendResult<VulkanBackend> {
        let log: MessageLog = opts.log.clone().unwrap_or_else(|| Arc::new(Mutex::new(Vec::new())));
        let mut gpu = device::open(opts.validation, opts.device.as_deref(), opts.descriptor_sets, &log)?;
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
        let flags = if gpu.push_descriptors {
            DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR
        } else {
            DescriptorSetLayoutCreateFlags::empty()
        };
        let set_layout = DescriptorSetLayout::new(
            device.clone(),
            DescriptorSetLayoutCreateInfo {
                flags,
                bindings: (0..4u32).map(|i| (i, binding.clone())).collect(),
                ..Default::default()
            },
        )
        .map_err(|e| VulkanError::LayoutCreation { what: "descriptor set layout", cause: e.to_string() })?;
        let layout = PipelineLayout::new(
            device.clone(),
            PipelineLayoutCreateInfo {
                set_layouts: vec![set_layout.clone()],
                push_constant_ranges: vec![PushConstantRange { stages: ShaderStages::COMPUTE, offset: 0, size: 128 }],
                ..Default::default()
            },
        )
        .map_err(|e| VulkanError::LayoutCreation { what: "pipeline layout", cause: e.to_string() })?;
        let timestamps = (opts.timestamps
            || crate::profile::enabled()
            || std::env::var_os("GGS_VULKAN_TIMESTAMPS").is_some_and(|v| v == "1"))
            && gpu.timestamps_valid;
        let staged = opts.staged || std::env::var_os("GGS_VULKAN_STAGED").is_some_and(|v| v == "1");
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
            status_pool: Vec::new(),
            in_flight: VecDeque::new(),
            next_serial: 1,
            staging: Vec::new(),
            log,
            timestamps,
            staged,
            cpu_quantized: opts.cpu_quantized,
            whole_rows: opts.whole_rows,
            dispatches: 0,
            submissions: 0,
            host_waits: 0,
            spare_fences: Vec::new(),
            phase_ns: Default::default(),
        })
    }

    /// The opened device: identity, driver and limits (see [`crate::device::DeviceInfo`]).
    pub fn device_info(&self) -> crate::device::DeviceInfo {
        self.gpu.info()
    }

    /// The selected device's name.
    pub fn device_name(&self) -> &str {
        &self.gpu.name
    }

    /// Whether the device's `shaderFloat64` is enabled (the fused sampling op `top_k_top_p_sample`
    /// runs here only then).
    pub fn has_float64(&self) -> bool {
        self.gpu.float64
    }

    /// Whether dispatches push their descriptors (`VK_KHR_push_descriptor`) rather than
    /// allocating a descriptor set each.
    pub fn uses_push_descriptors(&self) -> bool {
        self.gpu.push_descriptors
    }

    /// Whether the subgroup shader variants are used.
    pub fn uses_subgroups(&self) -> bool {
        self.gpu.subgroups
    }

    /// Whether the validation layer is active.
    pub fn validation_enabled(&self) -> bool {
        self.gpu.validation
    }

    /// The sizes of the pooled staging buffers, in bytes, in allocation order (for tests and
    /// diagnostics: the pool only grows to [`STAGING_PER_CLASS`] buffers per size class).
    pub fn staging_pool(&self) -> Vec<usize> {
        self.staging.iter().map(|s| s.sub.len() as usize).collect()
    }

    /// Every validation message recorded so far (warnings and errors).
    pub fn validation_messages(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// A test probe, not part of the engine: `exp(y)` for each of `ys` as the f64 shaders compute
    /// it (`exp64` of `shaders/sample.comp`, the `SampleExp64` variant), so that a test can compare
    /// its bits with `kernels::exp64::exp`, which the shaders' results depend on (the indices the
    /// ops return cannot tell a one-ulp difference apart). Needs `shaderFloat64`.
    #[doc(hidden)]
    pub fn probe_exp64(&mut self, ys: &[f64]) -> BackendResult<Vec<f64>> {
        if !self.gpu.float64 {
            return Err(VulkanError::NoFloat64 { what: "probe_exp64" }.into());
        }
        let input: Vec<u8> = ys.iter().flat_map(|y| y.to_le_bytes()).collect();
        let out = self.probe(ShaderId::SampleExp64, &input, ys.len(), 0)?;
        Ok(out.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
    }

    /// A test probe, not part of the engine: `2^y` for each of `ys` as `top_k_top_p_sample`'s
    /// shader computes its weights (`exp2_k` of `shaders/sample.comp`, the `SampleExp2` variant),
    /// with `fused` as the CPU's AVX2+FMA build computes it or not, for comparison with
    /// `kernels::exp::exp2::<FMA>` bit for bit. Needs `shaderFloat64` (the shader's other paths
    /// use it).
    #[doc(hidden)]
    pub fn probe_exp2(&mut self, ys: &[f32], fused: bool) -> BackendResult<Vec<f32>> {
        if !self.gpu.float64 {
            return Err(VulkanError::NoFloat64 { what: "probe_exp2" }.into());
        }
        let input: Vec<u8> = ys.iter().flat_map(|y| y.to_le_bytes()).collect();
        let out = self.probe(ShaderId::SampleExp2, &input, ys.len(), u32::from(fused))?;
        Ok(out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
    }

    /// Runs a probe variant over `n` values (`input`, their bytes) with parameter word `p0`, one
    /// invocation per value, and returns the output's bytes (as many as the input's).
    fn probe(&mut self, shader: ShaderId, input: &[u8], n: usize, p0: u32) -> BackendResult<Vec<u8>> {
        let bytes = input.len().max(8);
        let (a, d) = (self.alloc(bytes, MemoryKind::Device)?, self.alloc(bytes, MemoryKind::Device)?);
        self.upload(a, 0, input)?;
        let count = u32::try_from(n).map_err(|_| VulkanError::GridTooLarge { items: n as u64, groups: 0 })?;
        let (sa, sd) = (self.buf(a)?.sub.clone(), self.buf(d)?.sub.clone());
        let rec = self.begin()?;
        let bindings = sched::Bindings::new(0);
        let mut enc = Encoder::new(self, rec, &bindings, false, 1)?;
        let push = crate::push::Push::new([count, 1, 1, 1]).pu(0, p0);
        enc.dispatch(shader, [&sa, &sa, &sa, &sd], &push, crate::encoder::grid(u64::from(count), 256)?)?;
        let (rec, keep, mut bufs, timing, status) = enc.finish();
        bufs.extend([sa, sd]);
        self.submit(rec, keep, bufs, timing, status)?;
        let mut out = vec![0u8; input.len()];
        self.download(d, 0, &mut out)?;
        self.free(a)?;
        self.free(d)?;
        Ok(out)
    }

    pub(crate) fn pipeline(&mut self, id: ShaderId) -> Result<Arc<ComputePipeline>> {
        if let Some(p) = self.pipelines.get(&id) {
            return Ok(p.clone());
        }
        let v = shaders::variant(id);
        let words = shaders::spirv_words(v);
        let device = self.gpu.device.clone();
        // SAFETY: the SPIR-V comes from glslc (checked against its source by a test) and only
        // accesses the bound buffers within the bounds the host code computes.
        let module = unsafe { ShaderModule::new(device.clone(), ShaderModuleCreateInfo::new(&words)) }
            .map_err(|e| VulkanError::ShaderModule { shader: v.name, cause: e.to_string() })?;
        let spec = [(0u32, SpecializationConstant::U32(v.wg))].into_iter().collect();
        let entry = module
            .specialize(spec)
            .map_err(|e| VulkanError::Specialization { shader: v.name, cause: e.to_string() })?
            .entry_point("main")
            .ok_or(VulkanError::NoEntryPoint { shader: v.name })?;
        let stage = PipelineShaderStageCreateInfo::new(entry);
        let p = ComputePipeline::new(device, None, ComputePipelineCreateInfo::stage_layout(stage, self.layout.clone()))
            .map_err(|e| VulkanError::PipelineCreation { shader: v.name, cause: e.to_string() })?;
        self.pipelines.insert(id, p.clone());
        Ok(p)
    }

    pub(crate) fn buf(&self, id: BufferId) -> Result<&Buf> {
        self.buffers.get(&id.0).ok_or(VulkanError::UnknownBuffer { buffer: id.0 })
    }

    pub(crate) fn new_buffer(&self, bytes: usize, kind: MemoryKind) -> Result<Buf> {
        let size = bytes.max(4).next_multiple_of(4) as u64;
        if size > self.gpu.max_storage_range {
            return Err(VulkanError::BufferTooLarge { bytes, max: self.gpu.max_storage_range });
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
                VulkanError::OutOfMemory { bytes, kind }
            }
            other => VulkanError::Allocation { bytes, kind, cause: other.to_string() },
        })?;
        let (host_visible, coherent) = match sub.buffer().memory() {
            BufferMemory::Normal(a) => (host_mapped(a.mapped_slice(..)), a.atom_size().is_none()),
            _ => (false, false),
        };
        Ok(Buf { sub, host_visible, coherent, len: bytes })
    }

    /// A zeroed host-visible buffer of at least `bytes` bytes for a submission's status words: one
    /// a retired submission gave back, or a new one (a buffer allocation per piece of every step
    /// would cost more than recording it).
    pub(crate) fn status_buffer(&mut self, bytes: usize) -> Result<Subbuffer<[u8]>> {
        let sub = match self.status_pool.iter().position(|b| b.len() as usize >= bytes) {
            Some(i) => self.status_pool.swap_remove(i),
            None => {
                let b = self.new_buffer(bytes.max(4096).next_power_of_two(), MemoryKind::Host)?;
                if !b.host_visible {
                    return Err(VulkanError::NoHostVisibleMemory { purpose: HostBuffer::Status });
                }
                b.sub
            }
        };
        sub.write().map_err(|e| VulkanError::Mapping { what: HostBuffer::Status, cause: e.to_string() })?[..bytes]
            .fill(0);
        Ok(sub)
    }

    /// Adds the time since `since` to phase `i` (an index into [`PHASES`]).
    fn phase_done(&self, i: usize, since: std::time::Instant) {
        let mut v = self.phase_ns.get();
        v[i] += since.elapsed().as_nanos() as u64;
        self.phase_ns.set(v);
    }

    /// Host nanoseconds spent so far in each phase of a submission's life ([`PHASES`]): allocating
    /// and beginning command buffers, ending them, creating fences, `vkQueueSubmit`, waiting,
    /// retiring (status words, timestamps, freeing), and recording a split's dispatches. A
    /// diagnostic for `gpu-report`'s latency section: on a real GPU a round trip costs what these
    /// add up to.
    pub fn phase_times(&self) -> Vec<(&'static str, u64)> {
        PHASES.iter().copied().zip(self.phase_ns.get()).collect()
    }

    fn begin(&self) -> Result<RecordingCommandBuffer> {
        let t = std::time::Instant::now();
        let rec = RecordingCommandBuffer::new(
            self.cmd.clone(),
            self.gpu.queue.queue_family_index(),
            CommandBufferLevel::Primary,
            CommandBufferBeginInfo { usage: CommandBufferUsage::OneTimeSubmit, ..Default::default() },
        )
        .map_err(|e| VulkanError::CommandBufferBegin { cause: e.to_string() });
        self.phase_done(0, t);
        rec
    }

    /// Ends `rec` behind a barrier that makes its device writes visible to host reads once its
    /// fence has signalled, and submits it with a new fence. The returned serial names the
    /// submission; the in-flight record keeps its descriptor sets and buffers alive until it is
    /// retired.
    fn submit(
        &mut self,
        mut rec: RecordingCommandBuffer,
        keep: Vec<Arc<DescriptorSet>>,
        bufs: Vec<Subbuffer<[u8]>>,
        timing: Option<(Arc<QueryPool>, Vec<String>)>,
        status: Status,
    ) -> Result<u64> {
        let to_host = barrier(PipelineStages::ALL_COMMANDS, PipelineStages::HOST, AccessFlags::HOST_READ);
        // SAFETY: a memory barrier needs no resources; it only orders earlier commands' writes
        // before host reads that follow the fence wait.
        unsafe {
            rec.pipeline_barrier_unchecked(&to_host);
        }
        // SAFETY: recording followed the rules documented at each command (barriers between
        // dependent commands, resources kept alive in `InFlight` until the fence signals).
        let t = std::time::Instant::now();
        let cb = unsafe { rec.end() }.map_err(|e| VulkanError::CommandBufferEnd { cause: e.to_string() })?;
        self.phase_done(1, t);
        let t = std::time::Instant::now();
        let fence = match self.spare_fences.pop() {
            Some(f) => f,
            None => Fence::new(self.gpu.device.clone(), FenceCreateInfo::default())
                .map_err(|e| VulkanError::FenceCreation { cause: e.to_string() })?,
        };
        self.phase_done(2, t);
        let handles = [cb.handle()];
        let info = vk::SubmitInfo::default().command_buffers(&handles);
        let queue = self.gpu.queue.clone();
        let fns = self.gpu.device.fns();
        // SAFETY: the queue is externally synchronised by `Queue::with`; the command buffer and
        // fence are valid and unsignalled.
        let t = std::time::Instant::now();
        let r = queue.with(|_guard| unsafe { (fns.v1_0.queue_submit)(queue.handle(), 1, &info, fence.handle()) });
        self.phase_done(3, t);
        if r != vk::Result::SUCCESS {
            return Err(VulkanError::QueueSubmit { result: r });
        }
        let serial = self.next_serial;
        self.next_serial += 1;
        self.submissions += 1;
        self.in_flight.push_back(InFlight { serial, fence, _cb: cb, _keep: keep, _bufs: bufs, timing, status });
        Ok(serial)
    }

    /// Records a transfer command buffer — a full barrier (so it runs after, and sees, everything
    /// submitted before it), then `f`'s commands — and submits it without waiting. `bufs` are the
    /// buffers the commands touch (kept alive until the fence signals). Returns its serial.
    fn submit_transfer(
        &mut self,
        bufs: Vec<Subbuffer<[u8]>>,
        f: impl FnOnce(&mut RecordingCommandBuffer),
    ) -> Result<u64> {
        let mut rec = self.begin()?;
        let after_all = barrier(
            PipelineStages::ALL_COMMANDS,
            PipelineStages::ALL_COMMANDS,
            AccessFlags::MEMORY_READ | AccessFlags::MEMORY_WRITE,
        );
        // SAFETY: a memory barrier needs no resources; it orders the commands `f` records after
        // every command submitted earlier on this (only) queue.
        unsafe {
            rec.pipeline_barrier_unchecked(&after_all);
        }
        f(&mut rec);
        self.submit(rec, Vec::new(), bufs, None, None)
    }

    /// Waits for every submitted command buffer, reports timestamps, and returns the first
    /// run-time error a shader flagged (an out-of-range row id), naming its node.
    pub(crate) fn wait_all(&mut self) -> Result<()> {
        self.wait_through(u64::MAX)
    }

    /// Waits for the submission with serial `serial` and retires it with every earlier one (they
    /// ran before it, so their fences are already signalled or about to be), in submission order:
    /// reports timestamps and returns the first run-time error a shader flagged, naming its node.
    /// Later submissions stay in flight.
    fn wait_through(&mut self, serial: u64) -> Result<()> {
        let n = self.in_flight.iter().take_while(|f| f.serial <= serial).count();
        if n == 0 {
            return Ok(());
        }
        let wait = |f: &InFlight| {
            f.fence.wait(None).map_err(|e| VulkanError::DeviceWait { serial: f.serial, cause: e.to_string() })
        };
        self.host_waits += 1;
        let t = std::time::Instant::now();
        // On a GPU, poll the fence for a while before blocking: a blocking wait wakes the thread
        // through the kernel tens of µs after the fence signals, which is most of a small step's
        // round trip. A software device runs on the CPU's cores, so there the host blocks at once.
        if !self.gpu.cpu_device {
            let last = &self.in_flight[n - 1].fence;
            while t.elapsed() < SPIN_BEFORE_BLOCKING && !last.is_signaled().unwrap_or(true) {
                std::hint::spin_loop();
            }
        }
        let waited = wait(&self.in_flight[n - 1]);
        self.phase_done(4, t);
        waited?;
        let mut first_error = None;
        for _ in 0..n {
            wait(self.in_flight.front().expect("n entries are in flight"))?;
            let f = self.in_flight.pop_front().expect("n entries are in flight");
            let t = std::time::Instant::now();
            let e = self.retire(f)?;
            self.phase_done(5, t);
            first_error = first_error.or(e);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Reads a finished submission's status words and timestamps: the run-time error its first
    /// failing node flagged, if any.
    fn retire(&mut self, f: InFlight) -> Result<Option<VulkanError>> {
        let InFlight { fence, status, timing, .. } = f;
        let mut error = None;
        if let Some((buf, owners)) = status {
            {
                let words =
                    buf.read().map_err(|e| VulkanError::Mapping { what: HostBuffer::Status, cause: e.to_string() })?;
                error = owners.iter().enumerate().find_map(|(i, &(node, op))| {
                    let w = &words[i * 4..i * 4 + 4];
                    (w != [0, 0, 0, 0]).then_some(VulkanError::Node { node, op, error: NodeError::RowIdOutOfRange })
                });
            }
            if self.status_pool.len() < STATUS_POOL {
                self.status_pool.push(buf);
            }
        }
        if let Some((pool, labels)) = &timing {
            let mut ticks = vec![0u64; labels.len() + 1];
            if pool.get_results(0..ticks.len() as u32, &mut ticks, QueryResultFlags::WAIT).is_ok() {
                let period = f64::from(self.gpu.timestamp_period);
                for (i, l) in labels.iter().enumerate() {
                    let us = ticks[i + 1].wrapping_sub(ticks[i]) as f64 * period / 1000.0;
                    tracing::info!(target: "vulkan::timestamps", node = %l, us, "gpu time");
                    if crate::profile::enabled() {
                        crate::profile::record(l, us);
                    }
                }
            }
        }
        // Fences are reused: on NVIDIA's driver creating one and destroying one cost about 250 µs
        // each (`gpu-report`'s latency section), more than the rest of a round trip together.
        // SAFETY: the fence has signalled (the caller waited for it) and no submission uses it.
        if unsafe { fence.reset_unchecked() }.is_ok() && self.spare_fences.len() < SPARE_FENCES {
            self.spare_fences.push(fence);
        }
        Ok(error)
    }

    /// Whether submission `serial` has been retired (serial 0: nothing was ever submitted).
    fn retired(&self, serial: u64) -> bool {
        self.in_flight.front().is_none_or(|f| f.serial > serial)
    }

    fn check_range(&self, id: BufferId, offset: usize, len: usize) -> Result<()> {
        let b = self.buf(id)?;
        if offset.checked_add(len).is_none_or(|e| e > b.len) {
            return Err(VulkanError::RangeOutsideBuffer { buffer: id.0, offset, len, size: b.len });
        }
        Ok(())
    }

    /// A staging buffer of `class` bytes (see [`staging_class`]) that no unfinished transfer uses,
    /// as an index into the pool: a retired one of that class; else a new one while the class
    /// holds fewer than [`STAGING_PER_CLASS`]; else the least recently used one, after waiting for
    /// its last transfer (and what was submitted before it). The caller records its next use in
    /// `last_use`.
    fn staging(&mut self, class: usize) -> Result<usize> {
        let in_class = || self.staging.iter().enumerate().filter(|(_, s)| s.sub.len() as usize == class);
        if let Some((i, _)) = in_class().find(|(_, s)| self.retired(s.last_use)) {
            return Ok(i);
        }
        if in_class().count() < STAGING_PER_CLASS {
            let b = self.new_buffer(class, MemoryKind::Host)?;
            if !b.host_visible {
                return Err(VulkanError::NoHostVisibleMemory { purpose: HostBuffer::Staging(class) });
            }
            tracing::debug!(bytes = class, "vulkan staging buffer");
            self.staging.push(Staging { sub: b.sub, last_use: 0 });
            return Ok(self.staging.len() - 1);
        }
        let (i, s) = in_class().min_by_key(|(_, s)| s.last_use).expect("the class is full");
        let last = s.last_use;
        self.wait_through(last)?;
        Ok(i)
    }

    /// Writes `data` at `offset` of the device-memory buffer `dst` through the staging pool,
    /// chunk by chunk, without waiting for the copies (see the module documentation).
    fn upload_staged(&mut self, dst: Subbuffer<[u8]>, offset: usize, data: &[u8]) -> Result<()> {
        for (k, chunk) in data.chunks(STAGING_MAX).enumerate() {
            let i = self.staging(staging_class(chunk.len()))?;
            let st = self.staging[i].sub.clone();
            st.write().map_err(|e| staging_mapping(&st, e))?[..chunk.len()].copy_from_slice(chunk);
            let info = copy_info(&st, &dst, [(0, offset + k * STAGING_MAX, chunk.len())]);
            // SAFETY: the range was bounds-checked; the leading barrier orders the copy after
            // earlier work on `dst`, and the staging buffer's previous transfer has finished.
            let serial = self.submit_transfer(vec![st, dst.clone()], |rec| unsafe {
                rec.copy_buffer_unchecked(&info);
            })?;
            self.staging[i].last_use = serial;
        }
        Ok(())
    }

    /// Reads `out.len()` bytes at `offset` of the device-memory buffer `src` through the staging
    /// pool, chunk by chunk: each copy is submitted behind the barrier and only its fence (with the
    /// submissions before it) is waited for.
    fn download_staged(&mut self, src: Subbuffer<[u8]>, offset: usize, out: &mut [u8]) -> Result<()> {
        for (k, chunk) in out.chunks_mut(STAGING_MAX).enumerate() {
            let i = self.staging(staging_class(chunk.len()))?;
            let st = self.staging[i].sub.clone();
            let info = copy_info(&src, &st, [(offset + k * STAGING_MAX, 0, chunk.len())]);
            // SAFETY: the range was bounds-checked; the leading barrier orders the copy after the
            // work that wrote `src`, and the staging buffer's previous transfer has finished.
            let serial = self.submit_transfer(vec![src.clone(), st.clone()], |rec| unsafe {
                rec.copy_buffer_unchecked(&info);
            })?;
            self.staging[i].last_use = serial;
            self.wait_through(serial)?;
            chunk.copy_from_slice(&st.read().map_err(|e| staging_mapping(&st, e))?[..chunk.len()]);
        }
        Ok(())
    }
}

/// The error for a failed mapping of staging buffer `st`.
fn staging_mapping(st: &Subbuffer<[u8]>, e: impl std::fmt::Display) -> VulkanError {
    VulkanError::Mapping { what: HostBuffer::Staging(st.len() as usize), cause: e.to_string() }
}

/// The error for a failed mapping of buffer `id`.
fn mapping(id: u32, e: impl std::fmt::Display) -> VulkanError {
    VulkanError::Mapping { what: HostBuffer::Buffer(id), cause: e.to_string() }
}

/// A global memory barrier: everything before it in `src` stages (all memory writes) happens before
/// `dst` stages' `dst_access` accesses after it.
fn barrier(src: PipelineStages, dst: PipelineStages, dst_access: AccessFlags) -> DependencyInfo {
    DependencyInfo {
        memory_barriers: [MemoryBarrier {
            src_stages: src,
            src_access: AccessFlags::MEMORY_WRITE,
            dst_stages: dst,
            dst_access,
            ..Default::default()
        }]
        .into_iter()
        .collect(),
        ..Default::default()
    }
}

/// A copy from `src` to `dst` of the byte ranges `regions` (`src_offset`, `dst_offset`, `len`).
fn copy_info(
    src: &Subbuffer<[u8]>,
    dst: &Subbuffer<[u8]>,
    regions: impl IntoIterator<Item = (usize, usize, usize)>,
) -> CopyBufferInfo {
    CopyBufferInfo {
        regions: regions
            .into_iter()
            .map(|(so, doff, len)| BufferCopy {
                src_offset: so as u64,
                dst_offset: doff as u64,
                size: len as u64,
                ..Default::default()
            })
            .collect(),
        ..CopyBufferInfo::buffers(src.clone(), dst.clone())
    }
}

/// Checks the regions of a batched copy for overlaps: no destination range may overlap another
/// destination range (the result would depend on the copy order) and, when source and destination
/// are the same buffer, no source range may overlap any destination range (its own included), as
/// `vkCmdCopyBuffer` requires. Zero-length ranges overlap nothing. `O(n log n)` in the regions.
fn check_disjoint(same_buffer: bool, regions: &[CopyRegion]) -> Result<()> {
    // (start, end, is_destination, region index), sorted by start: an earlier-starting range
    // overlaps a later one exactly when it ends after the later one starts.
    let mut ranges: Vec<(usize, usize, bool, usize)> = Vec::with_capacity(regions.len() * 2);
    for (i, r) in regions.iter().enumerate().filter(|(_, r)| r.len > 0) {
        ranges.push((r.dst_offset, r.dst_offset + r.len, true, i));
        if same_buffer {
            ranges.push((r.src_offset, r.src_offset + r.len, false, i));
        }
    }
    ranges.sort_unstable();
    // The furthest-reaching destination and source range seen so far: (end, region index).
    let mut dst_end: Option<(usize, usize)> = None;
    let mut src_end: Option<(usize, usize)> = None;
    for &(start, end, is_dst, i) in &ranges {
        if let Some((e, j)) = dst_end
            && start < e
        {
            return Err(if is_dst {
                VulkanError::CopyDestinationsOverlap { first: j, second: i }
            } else {
                VulkanError::CopySourceOverlapsDestination { src_region: i, dst_region: j }
            });
        }
        if is_dst
            && let Some((e, j)) = src_end
            && start < e
        {
            return Err(VulkanError::CopySourceOverlapsDestination { src_region: j, dst_region: i });
        }
        let slot = if is_dst { &mut dst_end } else { &mut src_end };
        if slot.is_none_or(|(e, _)| end > e) {
            *slot = Some((end, i));
        }
    }
    Ok(())
}

/// Whether memory is mapped for the host, from vulkano's `mapped_slice`: `Some(Err(NotHostMapped))`
/// is device memory the host cannot see (a discrete GPU's device-local heap), so only `Some(Ok)`
/// counts. Every memory type of a software device (lavapipe) is host-visible, so only a real GPU
/// shows the difference: the first GPU run found `is_some()` here, which mapped device memory.
fn host_mapped<T>(m: Option<std::result::Result<T, vulkano::sync::HostAccessError>>) -> bool {
    matches!(m, Some(Ok(_)))
}

impl Backend for VulkanBackend {
    fn name(&self) -> &str {
        crate::NAME
    }

    fn work_counts(&self) -> sched::WorkCounts {
        let phases = self.phase_ns.get();
        sched::WorkCounts {
            dispatches: self.dispatches,
            submissions: self.submissions,
            host_waits: self.host_waits,
            // the phases of a submission from ending its command buffer to `vkQueueSubmit`
            submit_ns: phases[1] + phases[2] + phases[3],
            wait_ns: phases[4],
            record_ns: phases[6],
        }
    }

    fn supports(&self, graph: &Graph, node: NodeId) -> bool {
        let n = graph.node(node);
        let quantized = n.dtype.is_quantized() || n.srcs.iter().any(|&s| graph.node(s).dtype.is_quantized());
        crate::ops::supports(graph, node)
            && (self.gpu.float64 || !crate::ops::needs_float64(graph, node))
            && !(self.cpu_quantized && quantized)
    }

    fn alloc(&mut self, bytes: usize, kind: MemoryKind) -> BackendResult<BufferId> {
        let mut b = self.new_buffer(bytes, kind)?;
        b.host_visible &= !(self.staged && kind == MemoryKind::Device);
        if b.host_visible {
            let mut w = b.sub.write().map_err(|e| mapping(self.next_id, e))?;
            w.fill(0);
        } else {
            let sub = b.sub.clone();
            // SAFETY: the buffer is new and only this command touches it (its size is a multiple
            // of 4); later work on it is ordered after the fill by its leading barrier. Nothing
            // waits for the fill.
            self.submit_transfer(vec![sub.clone()], |rec| unsafe {
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
        self.buffers.remove(&buffer.0).ok_or(VulkanError::UnknownBuffer { buffer: buffer.0 })?;
        Ok(())
    }

    /// Host-visible buffers: waits for all in-flight work, then writes in place. Device memory:
    /// through the staging pool without waiting for the device (see the module documentation).
    fn upload(&mut self, buffer: BufferId, offset: usize, data: &[u8]) -> BackendResult<()> {
        self.check_range(buffer, offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let b = self.buf(buffer)?;
        if !b.host_visible {
            let dst = b.sub.clone();
            return Ok(self.upload_staged(dst, offset, data)?);
        }
        self.wait_all()?;
        let b = self.buf(buffer)?;
        let mut w = b.sub.write().map_err(|e| mapping(buffer.0, e))?;
        w[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Host-visible buffers: waits for all in-flight work, then reads in place. Device memory:
    /// one staged copy per chunk, waiting for that copy's fence (see the module documentation).
    fn download(&mut self, buffer: BufferId, offset: usize, out: &mut [u8]) -> BackendResult<()> {
        self.check_range(buffer, offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let b = self.buf(buffer)?;
        if !b.host_visible {
            let src = b.sub.clone();
            return Ok(self.download_staged(src, offset, out)?);
        }
        self.wait_all()?;
        let b = self.buf(buffer)?;
        let r = b.sub.read().map_err(|e| mapping(buffer.0, e))?;
        out.copy_from_slice(&r[offset..offset + out.len()]);
        Ok(())
    }

    /// Records the split's nodes and submits them in pieces (see [`FIRST_SUBMIT`]): the device
    /// runs the first dispatches while the host records the rest. A node that fails to record
    /// returns its error; pieces submitted before it still run.
    fn compute(&mut self, task: SplitTask<'_>) -> BackendResult<()> {
        let _span = tracing::debug_span!("vulkan_split", nodes = task.nodes.len()).entered();
        let nodes: Vec<NodeId> = task
            .nodes
            .iter()
            .copied()
            .filter(|&n| {
                let op = &task.graph.node(n).op;
                !(op.is_view() || matches!(op, graph::Op::Input))
            })
            .collect();
        let timestamps = self.timestamps;
        let mut start = 0;
        loop {
            let rec = self.begin()?;
            let budget = if start == 0 { FIRST_SUBMIT } else { SUBMIT_EVERY };
            let first_dispatch = self.dispatches;
            let mut enc = Encoder::new(self, rec, task.bindings, timestamps, nodes.len() - start)?;
            let mut end = start;
            let t = std::time::Instant::now();
            while end < nodes.len() && enc.dispatches_since(first_dispatch) < budget {
                crate::ops::encode(&mut enc, task.graph, nodes[end])?;
                enc.mark(task.graph, nodes[end]);
                end += 1;
            }
            let (rec, keep, bufs, timing, status) = enc.finish();
            self.phase_done(6, t);
            self.submit(rec, keep, bufs, timing, status)?;
            if end == nodes.len() {
                return Ok(());
            }
            start = end;
        }
    }

    fn synchronize(&mut self) -> BackendResult<()> {
        Ok(self.wait_all()?)
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

    /// All non-empty regions go into one `vkCmdCopyBuffer` in one command buffer, submitted behind
    /// the leading barrier (so earlier splits that write `src` are finished before it reads, with
    /// no host wait first); then waits for that submission's fence and retires the submissions
    /// before it (already finished), so `host_slice` can read `dst` right away.
    fn copy_regions(&mut self, src: BufferId, dst: BufferId, regions: &[CopyRegion]) -> BackendResult<()> {
        let (src_len, dst_len) = (self.buf(src)?.len, self.buf(dst)?.len);
        for (i, r) in regions.iter().enumerate() {
            for (side, id, offset, size) in
                [(CopySide::Source, src, r.src_offset, src_len), (CopySide::Destination, dst, r.dst_offset, dst_len)]
            {
                if offset.checked_add(r.len).is_none_or(|e| e > size) {
                    let e = VulkanError::CopyRegionOutsideBuffer {
                        region: i,
                        side,
                        buffer: id.0,
                        offset,
                        len: r.len,
                        size,
                    };
                    return Err(e.into());
                }
            }
        }
        check_disjoint(src == dst, regions)?;
        if regions.iter().all(|r| r.len == 0) {
            return Ok(());
        }
        let (s, d) = (self.buf(src)?.sub.clone(), self.buf(dst)?.sub.clone());
        let info = copy_info(&s, &d, regions.iter().filter(|r| r.len > 0).map(|r| (r.src_offset, r.dst_offset, r.len)));
        // SAFETY: every range was bounds-checked, no destination overlaps another or (within one
        // buffer) a source; the leading barrier orders the copy after earlier work on both buffers.
        let serial = self.submit_transfer(vec![s, d], |rec| unsafe {
            rec.copy_buffer_unchecked(&info);
        })?;
        Ok(self.wait_through(serial)?)
    }

    fn alignment(&self) -> usize {
        64
    }

    fn max_buffer_size(&self) -> usize {
        usize::try_from(self.gpu.max_storage_range.min(u64::from(u32::MAX))).unwrap_or(usize::MAX)
    }
}

impl Drop for VulkanBackend {
    /// Waits for all submitted work, then frees the staging pool (the rest drops with the fields).
    fn drop(&mut self) {
        if let Err(e) = self.wait_all() {
            tracing::error!("vulkan: waiting for the device on drop: {e}");
        }
        self.staging.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(src_offset: usize, dst_offset: usize, len: usize) -> CopyRegion {
        CopyRegion { src_offset, dst_offset, len }
    }

    #[test]
    fn device_memory_the_host_cannot_see_is_not_host_visible() {
        use vulkano::sync::HostAccessError;
        assert!(host_mapped(Some(Ok::<(), HostAccessError>(()))));
        assert!(!host_mapped::<()>(Some(Err(HostAccessError::NotHostMapped))));
        assert!(!host_mapped::<()>(Some(Err(HostAccessError::OutOfMappedRange))));
        assert!(!host_mapped::<()>(None));
    }

    #[test]
    fn staging_classes_are_powers_of_two_between_the_bounds() {
        assert_eq!(staging_class(1), STAGING_MIN);
        assert_eq!(staging_class(STAGING_MIN), STAGING_MIN);
        assert_eq!(staging_class(STAGING_MIN + 1), 2 * STAGING_MIN);
        assert_eq!(staging_class(3 << 20), 4 << 20);
        assert_eq!(staging_class(STAGING_MAX), STAGING_MAX);
        assert_eq!(staging_class(usize::MAX), STAGING_MAX);
        assert!(STAGING_MIN.is_power_of_two() && STAGING_MAX.is_power_of_two() && STAGING_MIN.is_multiple_of(4));
    }

    #[test]
    fn disjoint_regions_pass() {
        assert_eq!(check_disjoint(true, &[]), Ok(()));
        // Sources may overlap each other; destinations touch but do not overlap.
        let ok = [r(0, 100, 10), r(5, 110, 10), r(0, 120, 0), r(50, 40, 10)];
        assert_eq!(check_disjoint(true, &ok), Ok(()));
        // Across two buffers a source range may coincide with a destination range.
        assert_eq!(check_disjoint(false, &[r(0, 0, 10), r(10, 10, 10)]), Ok(()));
        // Zero-length ranges overlap nothing.
        assert_eq!(check_disjoint(true, &[r(3, 3, 0), r(0, 10, 8)]), Ok(()));
    }

    #[test]
    fn overlapping_regions_are_named() {
        let dst = |first, second| Err(VulkanError::CopyDestinationsOverlap { first, second });
        let src = |src_region, dst_region| Err(VulkanError::CopySourceOverlapsDestination { src_region, dst_region });
        assert_eq!(check_disjoint(false, &[r(0, 0, 10), r(20, 9, 4)]), dst(0, 1));
        assert_eq!(check_disjoint(true, &[r(0, 4, 8)]), src(0, 0));
        assert_eq!(check_disjoint(true, &[r(100, 0, 8), r(4, 200, 8)]), src(1, 0));
        assert_eq!(check_disjoint(true, &[r(0, 50, 8), r(200, 4, 8)]), src(0, 1));
        // A short range nested in a long earlier one is still found.
        assert_eq!(check_disjoint(false, &[r(0, 0, 100), r(0, 150, 8), r(0, 40, 4)]), dst(0, 2));
        // The messages name the regions.
        let e = check_disjoint(true, &[r(0, 4, 8)]).unwrap_err().to_string();
        assert_eq!(
            e,
            "copy_regions: source range of region 0 overlaps the destination range of region 0 in the same buffer"
        );
    }
}
