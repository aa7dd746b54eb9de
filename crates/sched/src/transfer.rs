//! Moving tensor data between the host and the current plan: writing inputs, params and state
//! (whole, or some rows), binding params to shared host memory without a copy where the backend
//! can read it in place (`set_input_shared`), and reading outputs and state (whole, or some rows).
//!
//! A *row* is the `ne[0]` elements at one `(i1, i2, i3)`; rows are numbered
//! `i1 + ne[1] * (i2 + ne[2] * i3)` (for logits `[n_vocab, n_outputs]`, row `i` is output `i`).
//!
//! Reads take the cheapest path the output's placement allows, and count exactly the bytes handed
//! to the caller in `Stats::bytes_to_host`:
//! - host-visible storage (the CPU backend, inputs): read in place (`Backend::host_slice`);
//! - device storage with a read-back region: the requested rows are copied into it in one batch
//!   (`Backend::copy_regions`, only those rows' bytes), then read from it;
//! - otherwise (a state tensor that is not an output, or a read-back region the host cannot map):
//!   one download per merged range of the requested rows.

use crate::backend::CopyRegion;
use crate::error::SchedError;
use crate::pool::Bound;
use crate::scheduler::{Planned, Scheduler};
use graph::{DType, Layout, NodeId, Op};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Rows of a tensor: `ne[1] * ne[2] * ne[3]`.
fn n_rows(layout: &Layout) -> usize {
    let ne = layout.ne.0;
    ne[1] * ne[2] * ne[3]
}

/// Byte ranges `(offset from the storage start, length)` of `rows` of a tensor laid out as
/// `layout`, in order: one per row when a row is contiguous, else one per element.
fn row_ranges(layout: &Layout, dtype: DType, rows: &[usize]) -> Vec<(usize, usize)> {
    let ne = layout.ne.0;
    let es = dtype.size();
    // A quantized tensor's rows are always contiguous (the builder allows no other layout).
    let contiguous_rows = ne[0] == 1 || layout.nb[0] == es;
    let mut out = Vec::with_capacity(if contiguous_rows { rows.len() } else { rows.len() * ne[0] });
    for &r in rows {
        let (i1, i2, i3) = (r % ne[1], (r / ne[1]) % ne[2], r / (ne[1] * ne[2]));
        if contiguous_rows {
            out.push((layout.byte_offset([0, i1, i2, i3]), dtype.row_bytes(ne[0])));
        } else {
            out.extend((0..ne[0]).map(|i0| (layout.byte_offset([i0, i1, i2, i3]), es)));
        }
    }
    out
}

/// The distinct bytes of `ranges` as sorted, non-overlapping, merged ranges.
fn merged(ranges: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut v = ranges.to_vec();
    v.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(v.len());
    for (o, l) in v {
        match out.last_mut() {
            Some((lo, ll)) if o <= *lo + *ll => *ll = (*ll).max(o + l - *lo),
            _ => out.push((o, l)),
        }
    }
    out
}

/// Where a readable node's bytes live: its storage's backend, buffer and byte offset, the storage's
/// size, and its read-back region (buffer and offset) if it has one.
struct Placement {
    backend: usize,
    buffer: crate::BufferId,
    offset: usize,
    storage_bytes: usize,
    readback: Option<(crate::BufferId, usize)>,
}

fn placement(p: &Planned, node: NodeId) -> Placement {
    let st = p.graph.storage_of(node);
    let sp = &p.plan.nodes[st.index()];
    let region = sp.region.expect("readable storages own a region");
    Placement {
        backend: sp.backend,
        buffer: p.buffers[region.buffer],
        offset: region.offset,
        storage_bytes: p.graph.node(st).nbytes(),
        readback: sp.readback.map(|rb| (p.buffers[rb.buffer], rb.offset)),
    }
}

fn check_node<'a>(
    cache: &'a mut [Planned],
    current: Option<usize>,
    what: &'static str,
    node: NodeId,
) -> Result<&'a mut Planned, SchedError> {
    let p = current.map(|i| &mut cache[i]).ok_or(SchedError::NotPlanned { what })?;
    if node.index() >= p.graph.len() {
        return Err(SchedError::UnknownNode { what, node, len: p.graph.len() });
    }
    Ok(p)
}

fn check_rows(p: &Planned, what: &'static str, node: NodeId, rows: &[usize]) -> Result<(), SchedError> {
    let n_rows = n_rows(&p.graph.node(node).layout);
    match rows.iter().find(|&&r| r >= n_rows) {
        Some(&row) => Err(SchedError::RowOutOfRange { what, node: p.graph.describe(node), row, rows: n_rows }),
        None => Ok(()),
    }
}

impl Scheduler {
    fn dtype_of(&self, what: &'static str, node: NodeId) -> Result<DType, SchedError> {
        let p = self.planned().ok_or(SchedError::NotPlanned { what })?;
        if node.index() >= p.graph.len() {
            return Err(SchedError::UnknownNode { what, node, len: p.graph.len() });
        }
        Ok(p.graph.node(node).dtype)
    }

    fn dtype_error(&self, what: &'static str, node: NodeId, dtype: DType, wanted: &'static str) -> SchedError {
        let node = self.planned().map(|p| p.graph.describe(node)).unwrap_or_default();
        SchedError::DType { what, node, dtype, wanted }
    }

    /// Writes the data of an input, param or state leaf (`bytes` in element order, little
    /// endian). Params are written once and keep their data across steps and plans; state starts
    /// at zero and keeps what the graph writes; inputs are written before each step where they
    /// change (and again whenever the current plan changed).
    pub fn set_input(&mut self, node: NodeId, bytes: &[u8]) -> Result<(), SchedError> {
        let n_bytes = self.leaf_check("set_input", node)?;
        if bytes.len() != n_bytes {
            let node = self.planned().expect("checked").graph.describe(node);
            return Err(SchedError::InputSize { node, expected: n_bytes, got: bytes.len() });
        }
        self.write_ranges(node, &[(0, bytes)])
    }

    /// Writes some rows of an input, param or state leaf: `bytes` holds `rows.len()` rows of
    /// `ne[0]` elements, in the order of `rows`. Other rows keep their contents (zero at first).
    /// The leaf then counts as set.
    pub fn set_input_rows(&mut self, node: NodeId, rows: &[usize], bytes: &[u8]) -> Result<(), SchedError> {
        self.leaf_check("set_input_rows", node)?;
        let p = self.planned().expect("checked");
        check_rows(p, "set_input_rows", node, rows)?;
        let n = p.graph.node(node);
        let row_bytes = n.dtype.row_bytes(n.layout.ne.0[0]);
        if bytes.len() != rows.len() * row_bytes {
            return Err(SchedError::InputSize {
                node: p.graph.describe(node),
                expected: rows.len() * row_bytes,
                got: bytes.len(),
            });
        }
        let writes: Vec<(usize, &[u8])> =
            rows.iter().zip(bytes.chunks(row_bytes)).map(|(&r, c)| (r * row_bytes, c)).collect();
        self.write_ranges(node, &writes)
    }

    /// Checks that `node` is a leaf of the current plan; returns its size in bytes.
    fn leaf_check(&mut self, what: &'static str, node: NodeId) -> Result<usize, SchedError> {
        let p = check_node(&mut self.cache, self.current, what, node)?;
        let n = p.graph.node(node);
        if n.op != Op::Input {
            return Err(SchedError::NotAnInput { node: p.graph.describe(node), op: n.op.to_string() });
        }
        if p.links.contains(&node) {
            return Err(SchedError::LinkedLeaf { what, node: p.graph.describe(node) });
        }
        Ok(n.nbytes())
    }

    /// Uploads `(offset in the leaf, bytes)` pieces into a checked leaf and marks it set.
    fn write_ranges(&mut self, node: NodeId, writes: &[(usize, &[u8])]) -> Result<(), SchedError> {
        let Scheduler { backends, cache, current, pool, stats, .. } = self;
        let p = &mut cache[current.expect("checked")];
        let n = p.graph.node(node);
        let np = &p.plan.nodes[node.index()];
        let region = np.region.expect("leaves own a region");
        let buffer = if n.flags.param || n.flags.state {
            // A param gets its buffer now if it has none, or one of its own if it was imported.
            let (id, fresh) = pool.owned(backends, p.slots[region.buffer])?;
            stats.buffers += u64::from(fresh);
            id
        } else {
            p.buffers[region.buffer]
        };
        let _span = tracing::trace_span!("set_input", node = %node, pieces = writes.len()).entered();
        for &(offset, bytes) in writes {
            backends[np.backend].upload(buffer, region.offset + offset, bytes)?;
            stats.bytes_from_host += bytes.len() as u64;
        }
        if n.flags.param || n.flags.state {
            pool.mark_set(p.slots[region.buffer]); // the leaf's own buffer
            p.refresh(pool);
        } else {
            p.set[node.index()] = true;
        }
        Ok(())
    }

    /// The bytes of a param's storage, read in place where its backend's memory is host-visible
    /// (`None` elsewhere, or before the param was given data): what the backend computes with. For
    /// a param bound by `set_input_shared` and imported, these are the caller's bytes themselves.
    pub fn param_bytes(&mut self, node: NodeId) -> Result<Option<&[u8]>, SchedError> {
        let n_bytes = self.leaf_check("param_bytes", node)?;
        let p = self.planned().expect("checked");
        if !p.graph.node(node).flags.param {
            return Err(SchedError::NotAParam { node: p.graph.describe(node) });
        }
        let slot = p.slot_of(node).expect("params own a region");
        let np = &p.plan.nodes[node.index()];
        let (b, offset) = (np.backend, np.region.expect("leaves own a region").offset);
        if !self.pool.leaf_set(slot) {
            return Ok(None);
        }
        self.backends[b].synchronize()?;
        Ok(self.backends[b].host_slice(self.pool.buffer(slot), offset, n_bytes))
    }

    /// Sets a param to `bytes` (its whole data, in element order) without copying them where its
    /// backend can read them where they lie (`Backend::import_host`: a backend computing on host
    /// memory, with the address aligned as its kernels need): the param's storage is then the
    /// caller's memory, read-only, kept alive by the buffer that wraps it, and the pool allocates
    /// nothing for it. Elsewhere (a GPU, a misaligned address) the bytes are copied like
    /// [`Scheduler::set_input`]. Like every param, it is set once and keeps its data across steps
    /// and plans; writing it again (`set_input`) gives it a buffer of its own.
    pub fn set_input_shared(&mut self, node: NodeId, bytes: &crate::SharedBytes) -> Result<(), SchedError> {
        let n_bytes = self.leaf_check("set_input_shared", node)?;
        let Scheduler { backends, cache, current, pool, stats, .. } = self;
        let p = &mut cache[current.expect("checked")];
        let n = p.graph.node(node);
        if !n.flags.param {
            return Err(SchedError::NotAParam { node: p.graph.describe(node) });
        }
        if bytes.len() != n_bytes {
            return Err(SchedError::InputSize { node: p.graph.describe(node), expected: n_bytes, got: bytes.len() });
        }
        let region = p.plan.nodes[node.index()].region.expect("leaves own a region");
        let _span = tracing::trace_span!("set_input_shared", node = %node, bytes = n_bytes).entered();
        match pool.bind_shared(backends, p.slots[region.buffer], bytes, n.dtype)? {
            Bound::Imported => {
                stats.imported += 1;
                stats.bytes_imported += n_bytes as u64;
            }
            Bound::Copied { fresh } => {
                stats.buffers += u64::from(fresh);
                stats.bytes_from_host += n_bytes as u64;
            }
        }
        p.refresh(pool);
        Ok(())
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

    /// Reads an output's (or a state tensor's) bytes in the element order of a contiguous tensor
    /// (views are gathered).
    pub fn read(&mut self, node: NodeId) -> Result<Vec<u8>, SchedError> {
        let mut out = Vec::new();
        if !self.read_in_place(node, |bytes| out.extend_from_slice(bytes))? {
            self.read_all_rows(node, &mut out)?;
        }
        Ok(out)
    }

    /// Like [`Scheduler::read`], but hands the bytes to `f`, without a copy when the output is
    /// contiguous and its memory host-visible.
    pub fn read_with(&mut self, node: NodeId, f: impl FnOnce(&[u8])) -> Result<(), SchedError> {
        let mut f = Some(f);
        if !self.read_in_place(node, |bytes| (f.take().expect("called once"))(bytes))? {
            let mut out = Vec::new();
            self.read_all_rows(node, &mut out)?;
            (f.take().expect("not called yet"))(&out);
        }
        Ok(())
    }

    /// Every row of a node that `read_in_place` checked, gathered into `out`.
    fn read_all_rows(&mut self, node: NodeId, out: &mut Vec<u8>) -> Result<(), SchedError> {
        let p = self.planned().expect("checked by read_in_place");
        let rows: Vec<usize> = (0..n_rows(&p.graph.node(node).layout)).collect();
        self.read_rows_into("read", node, &rows, out)
    }

    /// Hands a readable node's bytes to `f` straight from host-visible memory when the node is
    /// contiguous and its memory can be read in place; returns whether it did.
    fn read_in_place(&mut self, node: NodeId, f: impl FnOnce(&[u8])) -> Result<bool, SchedError> {
        let p = readable(&mut self.cache, self.current, "read", node)?;
        let n = p.graph.node(node);
        if !n.layout.is_contiguous(n.dtype) {
            return Ok(false);
        }
        let (nbytes, layout_offset) = (n.nbytes(), n.layout.offset);
        let at = placement(p, node);
        let backend = &mut self.backends[at.backend];
        backend.synchronize()?;
        let Some(src) = backend.host_slice(at.buffer, at.offset, at.storage_bytes) else { return Ok(false) };
        f(&src[layout_offset..layout_offset + nbytes]);
        self.stats.bytes_to_host += nbytes as u64;
        self.stats.step_bytes_to_host += nbytes as u64;
        Ok(true)
    }
}

/// Checks that `node` can be read (an output after a compute, or a state tensor).
fn readable<'a>(
    cache: &'a mut [Planned],
    current: Option<usize>,
    what: &'static str,
    node: NodeId,
) -> Result<&'a Planned, SchedError> {
    let p = check_node(cache, current, what, node)?;
    let n = p.graph.node(node);
    let state = p.graph.node(p.graph.storage_of(node)).flags.state;
    if !n.flags.output && !state {
        return Err(SchedError::NotAnOutput { node: p.graph.describe(node) });
    }
    if !p.computed && !state {
        return Err(SchedError::NotComputed { node: p.graph.describe(node) });
    }
    Ok(p)
}

impl Scheduler {
    /// Reads only `rows` of an output (or state tensor), in the order given (a row may repeat):
    /// `rows.len()` rows of `ne[0]` elements each, in element order. Only those rows' bytes are
    /// copied back and counted. For logits `[n_vocab, n_outputs]`, row `i` is output `i`.
    pub fn read_rows(&mut self, node: NodeId, rows: &[usize]) -> Result<Vec<u8>, SchedError> {
        let mut out = Vec::new();
        self.read_rows_into("read_rows", node, rows, &mut out)?;
        Ok(out)
    }

    /// [`Scheduler::read_rows`] as f32 values (f16/bf16 outputs are converted).
    pub fn read_rows_f32(&mut self, node: NodeId, rows: &[usize]) -> Result<Vec<f32>, SchedError> {
        let mut out = Vec::new();
        self.read_rows_f32_into(node, rows, &mut out)?;
        Ok(out)
    }

    /// Hands `rows` of an output (or state tensor) to `f` as one byte slice, in the order given:
    /// straight from host-visible memory when those rows are adjacent in memory (no copy at all),
    /// else gathered into a buffer the scheduler keeps (no allocation once it has grown). Counts
    /// the bytes like [`Scheduler::read_rows`].
    pub fn read_rows_with<T>(
        &mut self,
        node: NodeId,
        rows: &[usize],
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<T, SchedError> {
        let p = readable(&mut self.cache, self.current, "read_rows_with", node)?;
        check_rows(p, "read_rows_with", node, rows)?;
        let n = p.graph.node(node);
        let ranges = row_ranges(&n.layout, n.dtype, rows);
        let adjacent = ranges.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0);
        let at = placement(p, node);
        if adjacent && let Some(&(first, _)) = ranges.first() {
            let total: usize = ranges.iter().map(|r| r.1).sum();
            let backend = &mut self.backends[at.backend];
            backend.synchronize()?;
            if let Some(src) = backend.host_slice(at.buffer, at.offset, at.storage_bytes) {
                let t = f(&src[first..first + total]);
                self.stats.bytes_to_host += total as u64;
                self.stats.step_bytes_to_host += total as u64;
                return Ok(t);
            }
        }
        let mut bytes = std::mem::take(&mut self.read_scratch);
        bytes.clear();
        let r = self.read_rows_into("read_rows_with", node, rows, &mut bytes);
        let out = r.map(|_| f(&bytes));
        self.read_scratch = bytes;
        out
    }

    /// [`Scheduler::read_rows_f32`] into `out` (cleared first). Reuses `out`'s allocation and a byte
    /// buffer the scheduler keeps, so a decode loop reading logits rows every step allocates
    /// nothing once the buffers have grown (a fresh vocabulary-sized `Vec` each step costs page
    /// faults that dwarf the copy).
    pub fn read_rows_f32_into(&mut self, node: NodeId, rows: &[usize], out: &mut Vec<f32>) -> Result<(), SchedError> {
        let dtype = self.dtype_of("read_rows_f32", node)?;
        if !dtype.is_float() {
            return Err(self.dtype_error("read_rows_f32", node, dtype, "f32, f16 or bf16"));
        }
        let mut bytes = std::mem::take(&mut self.read_scratch);
        bytes.clear();
        let r = self.read_rows_into("read_rows_f32", node, rows, &mut bytes);
        if r.is_ok() {
            out.clear();
            decode_f32(dtype, &bytes, out).expect("a float dtype");
        }
        self.read_scratch = bytes;
        r
    }

    /// [`Scheduler::read_rows_f32_into`] of every row of the node.
    pub fn read_f32_into(&mut self, node: NodeId, out: &mut Vec<f32>) -> Result<(), SchedError> {
        let rows = {
            let p = readable(&mut self.cache, self.current, "read_f32_into", node)?;
            n_rows(&p.graph.node(node).layout)
        };
        let all: Vec<usize> = (0..rows).collect();
        self.read_rows_f32_into(node, &all, out)
    }

    /// [`Scheduler::read_rows`] as i32 values (i32 outputs only).
    pub fn read_rows_i32(&mut self, node: NodeId, rows: &[usize]) -> Result<Vec<i32>, SchedError> {
        match self.dtype_of("read_rows_i32", node)? {
            DType::I32 => Ok(i32s(&self.read_rows(node, rows)?)),
            d => Err(self.dtype_error("read_rows_i32", node, d, "i32")),
        }
    }

    fn read_rows_into(
        &mut self,
        what: &'static str,
        node: NodeId,
        rows: &[usize],
        out: &mut Vec<u8>,
    ) -> Result<(), SchedError> {
        let p = readable(&mut self.cache, self.current, what, node)?;
        check_rows(p, what, node, rows)?;
        let n = p.graph.node(node);
        let ranges = row_ranges(&n.layout, n.dtype, rows);
        let total: usize = ranges.iter().map(|r| r.1).sum();
        let Placement { backend, buffer, offset, storage_bytes, readback } = placement(p, node);
        let backend = &mut self.backends[backend];
        let _span = tracing::trace_span!("read_rows", node = %node, rows = rows.len(), bytes = total).entered();
        backend.synchronize()?;
        out.reserve(total);
        let gather = |src: &[u8], out: &mut Vec<u8>| {
            for &(o, l) in &ranges {
                out.extend_from_slice(&src[o..o + l]);
            }
        };
        if let Some(src) = backend.host_slice(buffer, offset, storage_bytes) {
            gather(src, out);
        } else if let Some((rbuf, rb_offset)) = readback {
            let regions: Vec<CopyRegion> = merged(&ranges)
                .into_iter()
                .map(|(o, len)| CopyRegion { src_offset: offset + o, dst_offset: rb_offset + o, len })
                .collect();
            backend.copy_regions(buffer, rbuf, &regions)?;
            match backend.host_slice(rbuf, rb_offset, storage_bytes) {
                Some(src) => gather(src, out),
                None => download_gather(&mut **backend, rbuf, rb_offset, &ranges, out)?,
            }
        } else {
            download_gather(&mut **backend, buffer, offset, &ranges, out)?;
        }
        self.stats.bytes_to_host += total as u64;
        self.stats.step_bytes_to_host += total as u64;
        Ok(())
    }

    /// An f32 output as values (f16/bf16 outputs are converted).
    pub fn read_f32(&mut self, node: NodeId) -> Result<Vec<f32>, SchedError> {
        let dtype = self.dtype_of("read_f32", node)?;
        let bytes = self.read(node)?;
        let mut out = Vec::with_capacity(bytes.len() / dtype.size());
        decode_f32(dtype, &bytes, &mut out)
            .ok_or_else(|| self.dtype_error("read_f32", node, dtype, "f32, f16 or bf16"))?;
        Ok(out)
    }

    /// An i32 output as values.
    pub fn read_i32(&mut self, node: NodeId) -> Result<Vec<i32>, SchedError> {
        match self.dtype_of("read_i32", node)? {
            DType::I32 => Ok(i32s(&self.read(node)?)),
            d => Err(self.dtype_error("read_i32", node, d, "i32")),
        }
    }
}

/// Downloads the distinct bytes of `ranges` (offsets from `base` in `buffer`), one download per
/// merged range, and appends `ranges` in order to `out`.
fn download_gather(
    backend: &mut dyn crate::Backend,
    buffer: crate::BufferId,
    base: usize,
    ranges: &[(usize, usize)],
    out: &mut Vec<u8>,
) -> Result<(), SchedError> {
    let pieces = merged(ranges);
    let mut bytes = Vec::with_capacity(pieces.iter().map(|p| p.1).sum());
    let mut starts = Vec::with_capacity(pieces.len());
    for &(o, l) in &pieces {
        starts.push((o, bytes.len()));
        bytes.resize(bytes.len() + l, 0);
        let at = bytes.len() - l;
        backend.download(buffer, base + o, &mut bytes[at..])?;
    }
    for &(o, l) in ranges {
        // the merged piece holding [o, o + l)
        let i = starts.partition_point(|&(po, _)| po <= o) - 1;
        let (po, at) = starts[i];
        out.extend_from_slice(&bytes[at + o - po..at + o - po + l]);
    }
    Ok(())
}

/// Appends the float values of `bytes` (of `dtype`) to `out` as f32; `None` for a non-float dtype.
/// Each dtype is one monomorphic loop (the f32 one a plain little-endian copy that vectorises).
fn decode_f32(dtype: DType, bytes: &[u8], out: &mut Vec<f32>) -> Option<()> {
    match dtype {
        DType::F32 => out.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        DType::F16 => out.extend(bytes.chunks_exact(2).map(|b| graph::f16::from_le_bytes([b[0], b[1]]).to_f32())),
        DType::BF16 => out.extend(bytes.chunks_exact(2).map(|b| graph::bf16::from_le_bytes([b[0], b[1]]).to_f32())),
        _ => return None,
    }
    Some(())
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

impl Scheduler {
    /// Whether a leaf of the current plan holds data: a param or state tensor once written (params
    /// shared with an earlier plan by name, dtype and shape count as written), an input once set
    /// since this plan became current. A runner uploads its weights where this is false, so that a
    /// second graph over the same weights (prefill and decode) uploads nothing.
    pub fn is_set(&mut self, node: NodeId) -> Result<bool, SchedError> {
        self.leaf_check("is_set", node)?;
        let p = self.planned().expect("checked");
        let n = p.graph.node(node);
        Ok(if n.flags.param || n.flags.state {
            p.slot_of(node).is_some_and(|s| self.pool.leaf_set(s))
        } else {
            p.set[node.index()]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_ranges_are_sorted_distinct_and_joined() {
        assert_eq!(merged(&[(40, 8), (0, 8), (8, 8), (40, 8), (44, 8)]), vec![(0, 16), (40, 12)]);
        assert_eq!(merged(&[]), vec![]);
    }

    #[test]
    fn row_ranges_follow_the_layout() {
        // [3, 2, 2] f32, contiguous: row r starts at 12 r.
        let l = Layout::contiguous(graph::Shape([3, 2, 2, 1]), DType::F32);
        assert_eq!(row_ranges(&l, DType::F32, &[0, 3, 1]), vec![(0, 12), (36, 12), (12, 12)]);
        // [64, 3] q4_1: 40-byte rows.
        let q = Layout::contiguous(graph::Shape([64, 3, 1, 1]), DType::Q4_1);
        assert_eq!(row_ranges(&q, DType::Q4_1, &[2, 0]), vec![(80, 40), (0, 40)]);
    }
}
