//! The Vulkan backend's error enum: every way the crate can fail, one variant each with typed fields
//! (buffer ids, ranges, sizes, shader names, nodes), and the one conversion into
//! [`sched::BackendError`] that decides which variant of it each becomes: a missing loader or device
//! is `Unavailable`, a failed memory allocation `OutOfMemory`, a failure attributed to a node
//! (unsupported, unbound or unaddressable operand, an out-of-range row id flagged by a shader)
//! `Compute`, and everything else `Other`. Causes reported by `vulkano` are kept as their text.

use crate::device::DEVICE_ENV;
use graph::NodeId;
use sched::{BackendError, MemoryKind};
use std::fmt;

/// Result alias for the crate's internal calls.
pub(crate) type Result<T> = std::result::Result<T, VulkanError>;

/// A failure of the Vulkan backend (converted into [`sched::BackendError`] at the `Backend` trait).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VulkanError {
    /// The Vulkan loader library could not be loaded.
    #[error("cannot load the Vulkan loader: {cause}")]
    LoaderUnavailable {
        /// What the loader reported.
        cause: String,
    },
    /// `vkCreateInstance` failed.
    #[error("cannot create a Vulkan instance: {cause}")]
    InstanceCreation {
        /// What Vulkan reported.
        cause: String,
    },
    /// The validation layer's debug messenger could not be created.
    #[error("cannot create the debug messenger: {cause}")]
    DebugMessenger {
        /// What Vulkan reported.
        cause: String,
    },
    /// The physical devices could not be enumerated.
    #[error("cannot enumerate devices: {cause}")]
    DeviceEnumeration {
        /// What Vulkan reported.
        cause: String,
    },
    /// The instance has no physical device at all.
    #[error("no Vulkan physical device found")]
    NoDevice,
    /// No physical device has Vulkan 1.1 and a compute queue.
    #[error("no device with Vulkan 1.1 and a compute queue (devices: {devices})")]
    NoUsableDevice {
        /// The names of the devices found, comma-separated.
        devices: String,
    },
    /// The device choice is an index, and no usable device has it.
    #[error("{env}={choice}: no usable device with that index (devices: {devices})", env = DEVICE_ENV)]
    NoDeviceAtIndex {
        /// The choice as given (`Options::device` or `GGS_VULKAN_DEVICE`).
        choice: String,
        /// The names of the devices found, comma-separated.
        devices: String,
    },
    /// The device choice is a name substring, and no usable device's name contains it.
    #[error("{env}={choice}: no usable device name contains it (devices: {devices})", env = DEVICE_ENV)]
    NoDeviceNamed {
        /// The choice as given (`Options::device` or `GGS_VULKAN_DEVICE`).
        choice: String,
        /// The names of the devices found, comma-separated.
        devices: String,
    },
    /// `vkCreateDevice` failed on the chosen physical device.
    #[error("cannot create a device on {device}: {cause}")]
    DeviceCreation {
        /// The physical device's name.
        device: String,
        /// What Vulkan reported.
        cause: String,
    },
    /// The descriptor set layout or pipeline layout every pipeline shares could not be created.
    #[error("cannot create the {what}: {cause}")]
    LayoutCreation {
        /// Which layout ("descriptor set layout", "pipeline layout").
        what: &'static str,
        /// What Vulkan reported.
        cause: String,
    },

    /// A buffer id that names no live buffer of this backend.
    #[error("unknown buffer {buffer}")]
    UnknownBuffer {
        /// The id.
        buffer: u32,
    },
    /// A transfer's byte range does not lie inside its buffer.
    #[error("range {offset}+{len} outside buffer {buffer} of {size} bytes")]
    RangeOutsideBuffer {
        /// The buffer.
        buffer: u32,
        /// First byte of the range.
        offset: usize,
        /// Length of the range in bytes.
        len: usize,
        /// The buffer's size in bytes.
        size: usize,
    },
    /// A `copy_regions` region's source or destination range does not lie inside its buffer.
    #[error("copy_regions: region {region}: {side} range {offset}+{len} outside buffer {buffer} of {size} bytes")]
    CopyRegionOutsideBuffer {
        /// Index of the region in the batch.
        region: usize,
        /// Which of its ranges.
        side: CopySide,
        /// The buffer that range is in.
        buffer: u32,
        /// First byte of the range.
        offset: usize,
        /// Length of the range in bytes.
        len: usize,
        /// The buffer's size in bytes.
        size: usize,
    },
    /// Two `copy_regions` destination ranges overlap (the result would depend on the copy order).
    #[error("copy_regions: destination ranges of regions {first} and {second} overlap")]
    CopyDestinationsOverlap {
        /// The region whose range starts first.
        first: usize,
        /// The region whose range starts inside it.
        second: usize,
    },
    /// Within one buffer, a `copy_regions` source range overlaps a destination range (its own
    /// included), which `vkCmdCopyBuffer` forbids.
    #[error(
        "copy_regions: source range of region {src_region} overlaps the destination range of region {dst_region} in \
         the same buffer"
    )]
    CopySourceOverlapsDestination {
        /// The region whose source range overlaps.
        src_region: usize,
        /// The region whose destination range it overlaps.
        dst_region: usize,
    },
    /// A buffer larger than the device's `maxStorageBufferRange` (shaders could not bind it).
    #[error("buffer of {bytes} bytes exceeds maxStorageBufferRange {max}")]
    BufferTooLarge {
        /// The requested size.
        bytes: usize,
        /// The device's limit.
        max: u64,
    },
    /// The device has no memory left for an allocation.
    #[error("out of memory allocating {bytes} bytes of {kind:?} memory")]
    OutOfMemory {
        /// The requested size.
        bytes: usize,
        /// The requested memory kind.
        kind: MemoryKind,
    },
    /// Creating a buffer failed for another reason than running out of memory.
    #[error("allocating {bytes} bytes of {kind:?} memory: {cause}")]
    Allocation {
        /// The requested size.
        bytes: usize,
        /// The requested memory kind.
        kind: MemoryKind,
        /// What Vulkan reported.
        cause: String,
    },
    /// A buffer that must be host-visible was allocated in memory the host cannot map.
    #[error("no host-visible memory for {purpose}")]
    NoHostVisibleMemory {
        /// The buffer that needed it.
        purpose: HostBuffer,
    },
    /// Mapping a host-visible buffer for reading or writing failed.
    #[error("mapping {what}: {cause}")]
    Mapping {
        /// The buffer.
        what: HostBuffer,
        /// What `vulkano` reported.
        cause: String,
    },

    /// Beginning a command buffer failed.
    #[error("cannot begin a command buffer: {cause}")]
    CommandBufferBegin {
        /// What Vulkan reported.
        cause: String,
    },
    /// Ending a command buffer failed.
    #[error("cannot end a command buffer: {cause}")]
    CommandBufferEnd {
        /// What Vulkan reported.
        cause: String,
    },
    /// Creating the fence of a submission failed.
    #[error("cannot create a fence: {cause}")]
    FenceCreation {
        /// What Vulkan reported.
        cause: String,
    },
    /// `vkQueueSubmit` failed.
    #[error("queue submit failed: {result:?}")]
    QueueSubmit {
        /// The result code.
        result: ash::vk::Result,
    },
    /// Waiting for a submission's fence failed (device lost, ...).
    #[error("waiting for the device (submission {serial}): {cause}")]
    DeviceWait {
        /// The submission's serial.
        serial: u64,
        /// What Vulkan reported.
        cause: String,
    },
    /// Creating the timestamp query pool of a split failed.
    #[error("cannot create the timestamp query pool: {cause}")]
    QueryPool {
        /// What Vulkan reported.
        cause: String,
    },

    /// A shader variant's SPIR-V was rejected when creating its module.
    #[error("shader {shader}: {cause}")]
    ShaderModule {
        /// The variant's name (`shaders/spv/<name>.spv`).
        shader: &'static str,
        /// What Vulkan reported.
        cause: String,
    },
    /// Specialising a shader variant (its workgroup size) failed.
    #[error("shader {shader}: specialising: {cause}")]
    Specialization {
        /// The variant's name.
        shader: &'static str,
        /// What `vulkano` reported.
        cause: String,
    },
    /// A shader variant has no `main` entry point.
    #[error("shader {shader} has no main")]
    NoEntryPoint {
        /// The variant's name.
        shader: &'static str,
    },
    /// Creating a shader variant's compute pipeline failed.
    #[error("pipeline {shader}: {cause}")]
    PipelineCreation {
        /// The variant's name.
        shader: &'static str,
        /// What Vulkan reported.
        cause: String,
    },
    /// Allocating the descriptor set of one dispatch failed.
    #[error("descriptor set for {shader}: {cause}")]
    DescriptorSet {
        /// The dispatched variant's name.
        shader: &'static str,
        /// What Vulkan reported.
        cause: String,
    },

    /// A dispatch needs more workgroups than a 65535 x 65535 grid holds.
    #[error("{items} items need {groups} workgroups, more than a 2-D grid allows")]
    GridTooLarge {
        /// Items to cover.
        items: u64,
        /// Workgroups needed.
        groups: u64,
    },
    /// A sort's scratch row does not fit the shaders' 32-bit addressing.
    #[error("sort scratch row of {stride} entries does not fit 32-bit addressing")]
    SortRowTooLong {
        /// Entries per scratch row.
        stride: usize,
    },
    /// A status word was asked for while no node was being encoded.
    #[error("status word requested outside a node")]
    StatusOutsideNode,
    /// More nodes asked for status words than the split has nodes.
    #[error("more checked nodes than the {capacity} nodes in the split")]
    TooManyCheckedNodes {
        /// The split's node count.
        capacity: usize,
    },
    /// A node failure raised while no node was being encoded.
    #[error("{error} (outside any node)")]
    OutsideNode {
        /// What went wrong.
        error: NodeError,
    },
    /// Node `node` failed (while encoding it, or at run time as its shader reported).
    #[error("node {node} ({op}): {error}")]
    Node {
        /// The failing node.
        node: NodeId,
        /// Its op's name.
        op: &'static str,
        /// What went wrong.
        error: NodeError,
    },
    /// A probe or op that needs `shaderFloat64` on a device without it.
    #[error("{what} needs shaderFloat64, which this device does not have")]
    NoFloat64 {
        /// What asked for it.
        what: &'static str,
    },
}

/// What went wrong with one node ([`VulkanError::Node`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// The backend does not run this node (`supports` said no).
    #[error("not supported by the Vulkan backend: {description}")]
    Unsupported {
        /// The node as `Graph::describe` prints it.
        description: String,
    },
    /// An operand (the node itself or a source) has no storage in the split's bindings.
    #[error("no storage bound for node {operand}")]
    Unbound {
        /// The operand.
        operand: NodeId,
    },
    /// An operand does not fit its buffer, or its offsets and strides do not fit 32 bits.
    #[error(
        "node {operand} ({extent} bytes at offset {offset} of buffer {buffer} of {size} bytes) does not fit its \
         buffer or 32-bit addressing"
    )]
    Unaddressable {
        /// The operand.
        operand: NodeId,
        /// Its storage's byte offset in the buffer.
        offset: usize,
        /// The bytes its layout spans from there.
        extent: usize,
        /// The buffer.
        buffer: u32,
        /// The buffer's size in bytes.
        size: usize,
    },
    /// A shader found a row id outside the indexed tensor (`get_rows`, `set_rows`).
    #[error("row id out of range")]
    RowIdOutOfRange,
}

/// Which range of a `copy_regions` region ([`VulkanError::CopyRegionOutsideBuffer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopySide {
    /// The range read.
    Source,
    /// The range written.
    Destination,
}

impl fmt::Display for CopySide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CopySide::Source => "source",
            CopySide::Destination => "destination",
        })
    }
}

/// A host-visible buffer named in [`VulkanError::Mapping`] and [`VulkanError::NoHostVisibleMemory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostBuffer {
    /// A buffer handed out by `Backend::alloc`.
    Buffer(u32),
    /// A staging buffer of the pool, of this many bytes.
    Staging(usize),
    /// The status words of a split.
    Status,
}

impl fmt::Display for HostBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostBuffer::Buffer(id) => write!(f, "buffer {id}"),
            HostBuffer::Staging(bytes) => write!(f, "a staging buffer of {bytes} bytes"),
            HostBuffer::Status => f.write_str("the status buffer"),
        }
    }
}

impl From<VulkanError> for BackendError {
    fn from(e: VulkanError) -> BackendError {
        let backend = crate::NAME.to_string();
        match e {
            VulkanError::Node { node, op, error } => {
                BackendError::Compute { backend, node, op, msg: error.to_string() }
            }
            VulkanError::OutOfMemory { bytes, kind } => BackendError::OutOfMemory { backend, bytes, kind },
            VulkanError::LoaderUnavailable { .. }
            | VulkanError::InstanceCreation { .. }
            | VulkanError::DebugMessenger { .. }
            | VulkanError::DeviceEnumeration { .. }
            | VulkanError::NoDevice
            | VulkanError::NoUsableDevice { .. }
            | VulkanError::NoDeviceAtIndex { .. }
            | VulkanError::NoDeviceNamed { .. }
            | VulkanError::DeviceCreation { .. }
            | VulkanError::LayoutCreation { .. }
            | VulkanError::NoFloat64 { .. } => BackendError::Unavailable { backend, reason: e.to_string() },
            VulkanError::UnknownBuffer { .. }
            | VulkanError::RangeOutsideBuffer { .. }
            | VulkanError::CopyRegionOutsideBuffer { .. }
            | VulkanError::CopyDestinationsOverlap { .. }
            | VulkanError::CopySourceOverlapsDestination { .. }
            | VulkanError::BufferTooLarge { .. }
            | VulkanError::Allocation { .. }
            | VulkanError::NoHostVisibleMemory { .. }
            | VulkanError::Mapping { .. }
            | VulkanError::CommandBufferBegin { .. }
            | VulkanError::CommandBufferEnd { .. }
            | VulkanError::FenceCreation { .. }
            | VulkanError::QueueSubmit { .. }
            | VulkanError::DeviceWait { .. }
            | VulkanError::QueryPool { .. }
            | VulkanError::ShaderModule { .. }
            | VulkanError::Specialization { .. }
            | VulkanError::NoEntryPoint { .. }
            | VulkanError::PipelineCreation { .. }
            | VulkanError::DescriptorSet { .. }
            | VulkanError::GridTooLarge { .. }
            | VulkanError::SortRowTooLong { .. }
            | VulkanError::StatusOutsideNode
            | VulkanError::TooManyCheckedNodes { .. }
            | VulkanError::OutsideNode { .. } => BackendError::Other { backend, msg: e.to_string() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_becomes_the_right_backend_error() {
        let e = BackendError::from(VulkanError::NoDeviceNamed { choice: "xyz".into(), devices: "llvmpipe".into() });
        assert!(
            matches!(&e, BackendError::Unavailable { backend, reason }
                if backend == "vulkan" && reason == "GGS_VULKAN_DEVICE=xyz: no usable device name contains it (devices: llvmpipe)"),
            "{e:?}"
        );
        let e = BackendError::from(VulkanError::OutOfMemory { bytes: 10, kind: MemoryKind::Device });
        assert_eq!(e, BackendError::OutOfMemory { backend: "vulkan".into(), bytes: 10, kind: MemoryKind::Device });
        let e = BackendError::from(VulkanError::Node {
            node: NodeId(7),
            op: "get_rows",
            error: NodeError::RowIdOutOfRange,
        });
        assert_eq!(e.to_string(), "vulkan: node #7 (get_rows): row id out of range");
        assert!(matches!(e, BackendError::Compute { node: NodeId(7), op: "get_rows", .. }));
        let e = BackendError::from(VulkanError::CopyRegionOutsideBuffer {
            region: 1,
            side: CopySide::Source,
            buffer: 3,
            offset: 950,
            len: 51,
            size: 1000,
        });
        assert_eq!(e.to_string(), "vulkan: copy_regions: region 1: source range 950+51 outside buffer 3 of 1000 bytes");
        assert!(matches!(e, BackendError::Other { .. }));
        let e = VulkanError::Mapping { what: HostBuffer::Staging(65536), cause: "x".into() };
        assert_eq!(e.to_string(), "mapping a staging buffer of 65536 bytes: x");
    }
}
