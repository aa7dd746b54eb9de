//! `CpuBackend`: host buffers (64-byte aligned, both memory kinds), a thread team created once, and
//! `sched::Backend` on top of the dispatcher.
//!
//! Params given as `sched::SharedBytes` (a mapped model file's weights) are imported, not copied
//! (`import_host`), where their address is aligned as the kernels read it (the element size of a
//! float or integer dtype; any address for a quantized one, whose kernels read blocks with
//! unaligned loads): the buffer wraps the caller's memory, holds it alive, and refuses writes
//! (`upload`, a `copy_regions` destination, a node writing into it: errors, never a write).

use crate::buffer::{ALIGN, Buffer};
use crate::dispatch;
use graph::{Graph, NodeId};
use sched::{Backend, BackendError, BackendResult, BufferId, CopyRegion, MemoryKind, SharedBytes, SplitTask};

const NAME: &str = "cpu";

/// The CPU backend. Buffers of both memory kinds are ordinary host allocations, so
/// [`Backend::host_slice`] always succeeds.
#[derive(Debug)]
pub struct CpuBackend {
    team: crate::team::Team,
    buffers: Vec<Option<Buffer>>,
}

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::new()
    }
}

impl CpuBackend {
    /// A backend using every available core.
    pub fn new() -> CpuBackend {
        CpuBackend::with_threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// A backend computing on `threads` threads (at least 1): the thread calling `compute` and
    /// `threads - 1` helpers started now and reused by every `compute` (`crate::team`). Panics
    /// only if the operating system refuses to start the threads.
    pub fn with_threads(threads: usize) -> CpuBackend {
        CpuBackend { team: crate::team::Team::new(threads), buffers: Vec::new() }
    }

    /// Number of threads a `compute` runs on (the caller's included).
    pub fn threads(&self) -> usize {
        self.team.threads()
    }

    /// Stores a buffer in a free slot.
    fn insert(&mut self, buf: Buffer) -> BufferId {
        let slot = match self.buffers.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.buffers.push(None);
                self.buffers.len() - 1
            }
        };
        tracing::trace!(bytes = buf.len(), imported = !buf.writable(), buffer = slot, "cpu buffer");
        self.buffers[slot] = Some(buf);
        BufferId(slot as u32)
    }

    fn err(msg: impl Into<String>) -> BackendError {
        BackendError::Other { backend: NAME.into(), msg: msg.into() }
    }

    fn read_only(id: BufferId) -> BackendError {
        Self::err(format!("buffer {} is imported host memory: read-only", id.0))
    }

    fn buffer(&self, id: BufferId) -> BackendResult<&Buffer> {
        self.buffers
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Self::err(format!("unknown buffer {}", id.0)))
    }

    fn range(buf: &Buffer, id: BufferId, offset: usize, len: usize) -> BackendResult<std::ops::Range<usize>> {
        match offset.checked_add(len) {
            Some(end) if end <= buf.len() => Ok(offset..end),
            _ => Err(Self::err(format!(
                "bytes {offset}..{} are outside buffer {} of {} bytes",
                offset.saturating_add(len),
                id.0,
                buf.len()
            ))),
        }
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn supports(&self, graph: &Graph, node: NodeId) -> bool {
        dispatch::supports(graph, node)
    }

    fn alloc(&mut self, bytes: usize, kind: MemoryKind) -> BackendResult<BufferId> {
        let buf = Buffer::new(bytes).ok_or(BackendError::OutOfMemory { backend: NAME.into(), bytes, kind })?;
        Ok(self.insert(buf))
    }

    fn import_host(&mut self, bytes: &SharedBytes, dtype: graph::DType) -> Option<BufferId> {
        if !bytes.addr().is_multiple_of(dispatch::align(dtype)) {
            return None;
        }
        tracing::trace!(bytes = bytes.len(), %dtype, "cpu import");
        Some(self.insert(Buffer::import(bytes.clone())))
    }

    fn free(&mut self, buffer: BufferId) -> BackendResult<()> {
        self.buffer(buffer)?;
        self.buffers[buffer.0 as usize] = None;
        Ok(())
    }

    fn upload(&mut self, buffer: BufferId, offset: usize, data: &[u8]) -> BackendResult<()> {
        let buf = self.buffer(buffer)?;
        let r = Self::range(buf, buffer, offset, data.len())?;
        let buf = self.buffers[buffer.0 as usize].as_mut().expect("checked above");
        let bytes = buf.bytes_mut().ok_or_else(|| Self::read_only(buffer))?;
        bytes[r].copy_from_slice(data);
        Ok(())
    }

    fn download(&mut self, buffer: BufferId, offset: usize, out: &mut [u8]) -> BackendResult<()> {
        let buf = self.buffer(buffer)?;
        let r = Self::range(buf, buffer, offset, out.len())?;
        out.copy_from_slice(&buf.bytes()[r]);
        Ok(())
    }

    fn compute(&mut self, task: SplitTask<'_>) -> BackendResult<()> {
        let _span = tracing::debug_span!("cpu_compute", nodes = task.nodes.len(), threads = self.threads()).entered();
        let buffers = &self.buffers;
        crate::par::with_threads(&self.team, || {
            for &id in task.nodes {
                dispatch::run(task.graph, id, task.bindings, buffers)?;
            }
            Ok(())
        })
    }

    fn synchronize(&mut self) -> BackendResult<()> {
        Ok(())
    }

    fn host_slice(&self, buffer: BufferId, offset: usize, len: usize) -> Option<&[u8]> {
        let buf = self.buffer(buffer).ok()?;
        let r = Self::range(buf, buffer, offset, len).ok()?;
        Some(&buf.bytes()[r])
    }

    fn copy_regions(&mut self, src: BufferId, dst: BufferId, regions: &[CopyRegion]) -> BackendResult<()> {
        if !self.buffer(dst)?.writable() {
            return Err(Self::read_only(dst));
        }
        for r in regions {
            let rs = Self::range(self.buffer(src)?, src, r.src_offset, r.len)?;
            let rd = Self::range(self.buffer(dst)?, dst, r.dst_offset, r.len)?;
            if src == dst {
                let buf = self.buffers[src.0 as usize].as_mut().expect("checked above");
                buf.bytes_mut().expect("checked writable").copy_within(rs, rd.start);
            } else {
                let s = self.buffers[src.0 as usize].as_ref().expect("checked above").ptr();
                let d = self.buffers[dst.0 as usize].as_ref().expect("checked above").ptr();
                // SAFETY: both ranges were bounds-checked and the buffers are distinct allocations.
                unsafe { std::ptr::copy_nonoverlapping(s.add(rs.start), d.add(rd.start), r.len) };
            }
        }
        Ok(())
    }

    fn device_memory_is_host(&self) -> bool {
        true
    }

    fn allocated_bytes(&self) -> Option<usize> {
        Some(self.buffers.iter().flatten().filter(|b| b.writable()).map(Buffer::len).sum())
    }

    fn alignment(&self) -> usize {
        ALIGN
    }
}
