//! Test support: a host-memory mock backend with configurable op support, alignment, largest buffer
//! and host visibility, which executes a handful of simple f32 ops (add/sub/mul/div with broadcast,
//! neg, scale, cont, fill, set_rows) and records every call in a shared log.

#![allow(dead_code)]

use graph::{BinaryOp, DType, Graph, NodeId, Op, UnaryOp};
use sched::{Backend, BackendError, BackendResult, BufferId, CopyRegion, MemoryKind, SplitTask};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The shared call log: one line per backend call (`gpu alloc 256 Device`, `cpu compute #3 #4`).
pub type Log = Arc<Mutex<Vec<String>>>;

/// A mock backend.
#[derive(Debug)]
pub struct Mock {
    name: String,
    refuse: Vec<&'static str>,
    only: Option<Vec<&'static str>>,
    host_visible: bool,
    align: usize,
    max: usize,
    buffers: HashMap<u32, (Vec<u8>, MemoryKind)>,
    next: u32,
    log: Log,
    /// Fail the alloc call with this index (0-based) with OutOfMemory.
    fail_alloc: Option<u32>,
    allocs: u32,
}

impl Mock {
    /// A mock that supports every op, host-visible, 64-byte alignment.
    pub fn new(name: &str, log: &Log) -> Mock {
        Mock {
            name: name.into(),
            refuse: Vec::new(),
            only: None,
            host_visible: true,
            align: 64,
            max: usize::MAX,
            buffers: HashMap::new(),
            next: 0,
            log: log.clone(),
            fail_alloc: None,
            allocs: 0,
        }
    }
    /// Refuses these ops (by name).
    pub fn refusing(mut self, ops: &[&'static str]) -> Mock {
        self.refuse = ops.to_vec();
        self
    }
    /// Supports only these ops (by name).
    pub fn only(mut self, ops: &[&'static str]) -> Mock {
        self.only = Some(ops.to_vec());
        self
    }
    /// No `host_slice`: reads and copies go through `download`.
    pub fn device_only(mut self) -> Mock {
        self.host_visible = false;
        self
    }
    pub fn align(mut self, a: usize) -> Mock {
        self.align = a;
        self
    }
    pub fn max_buffer(mut self, m: usize) -> Mock {
        self.max = m;
        self
    }
    /// The `n`-th alloc call (0-based) fails with OutOfMemory.
    pub fn fail_alloc(mut self, n: u32) -> Mock {
        self.fail_alloc = Some(n);
        self
    }
    pub fn boxed(self) -> Box<dyn Backend> {
        Box::new(self)
    }

    fn note(&self, s: String) {
        self.log.lock().unwrap().push(format!("{} {s}", self.name));
    }

    fn err(&self, msg: impl Into<String>) -> BackendError {
        BackendError::Other { backend: self.name.clone(), msg: msg.into() }
    }

    fn range(&self, b: BufferId, off: usize, len: usize) -> BackendResult<std::ops::Range<usize>> {
        let (buf, _) = self.buffers.get(&b.0).ok_or_else(|| self.err(format!("bad buffer {}", b.0)))?;
        if off + len > buf.len() {
            return Err(self.err(format!("{}..{} out of buffer {} of {} bytes", off, off + len, b.0, buf.len())));
        }
        Ok(off..off + len)
    }

    fn get(&self, t: &SplitTask<'_>, id: NodeId, idx: [usize; 4]) -> f32 {
        let n = t.graph.node(id);
        let loc = t.bindings.loc(id);
        let at = loc.offset + n.layout.byte_offset(idx);
        let buf = &self.buffers[&loc.buffer.0].0;
        match n.dtype {
            DType::F32 => f32::from_le_bytes(buf[at..at + 4].try_into().unwrap()),
            DType::I32 => i32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as f32,
            DType::F16 => graph::f16::from_le_bytes(buf[at..at + 2].try_into().unwrap()).to_f32(),
            DType::BF16 => graph::bf16::from_le_bytes(buf[at..at + 2].try_into().unwrap()).to_f32(),
            _ => panic!("the mock reads no quantized tensor"),
        }
    }

    fn put(&mut self, t: &SplitTask<'_>, id: NodeId, idx: [usize; 4], v: f32) {
        let n = t.graph.node(id);
        assert_eq!(n.dtype, DType::F32, "mock writes f32 only");
        let loc = t.bindings.loc(id);
        let at = loc.offset + n.layout.byte_offset(idx);
        let buf = &mut self.buffers.get_mut(&loc.buffer.0).unwrap().0;
        buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
}

fn each(ne: [usize; 4]) -> impl Iterator<Item = [usize; 4]> {
    (0..ne[3]).flat_map(move |i3| {
        (0..ne[2]).flat_map(move |i2| (0..ne[1]).flat_map(move |i1| (0..ne[0]).map(move |i0| [i0, i1, i2, i3])))
    })
}

fn bcast(idx: [usize; 4], ne: [usize; 4]) -> [usize; 4] {
    [idx[0] % ne[0], idx[1] % ne[1], idx[2] % ne[2], idx[3] % ne[3]]
}

impl Backend for Mock {
    fn name(&self) -> &str {
        &self.name
    }

    fn supports(&self, g: &Graph, node: NodeId) -> bool {
        let op = g.node(node).op.name();
        !self.refuse.contains(&op) && self.only.as_ref().is_none_or(|o| o.contains(&op))
    }

    fn alloc(&mut self, bytes: usize, kind: MemoryKind) -> BackendResult<BufferId> {
        self.note(format!("alloc {bytes} {kind:?}"));
        let call = self.allocs;
        self.allocs += 1;
        if bytes > self.max || self.fail_alloc == Some(call) {
            return Err(BackendError::OutOfMemory { backend: self.name.clone(), bytes, kind });
        }
        let id = self.next;
        self.next += 1;
        self.buffers.insert(id, (vec![0; bytes], kind));
        Ok(BufferId(id))
    }

    fn free(&mut self, buffer: BufferId) -> BackendResult<()> {
        self.note(format!("free b{}", buffer.0));
        self.buffers.remove(&buffer.0).map(|_| ()).ok_or_else(|| self.err("double free"))
    }

    fn upload(&mut self, buffer: BufferId, offset: usize, data: &[u8]) -> BackendResult<()> {
        self.note(format!("upload b{}+{offset} {}", buffer.0, data.len()));
        let r = self.range(buffer, offset, data.len())?;
        self.buffers.get_mut(&buffer.0).unwrap().0[r].copy_from_slice(data);
        Ok(())
    }

    fn download(&mut self, buffer: BufferId, offset: usize, out: &mut [u8]) -> BackendResult<()> {
        self.note(format!("download b{}+{offset} {}", buffer.0, out.len()));
        let r = self.range(buffer, offset, out.len())?;
        out.copy_from_slice(&self.buffers[&buffer.0].0[r]);
        Ok(())
    }

    fn compute(&mut self, t: SplitTask<'_>) -> BackendResult<()> {
        let ids: Vec<String> = t.nodes.iter().map(|n| n.to_string()).collect();
        self.note(format!("compute {}", ids.join(" ")));
        for &id in t.nodes {
            let n = t.graph.node(id).clone();
            let ne = n.ne();
            let src_ne = |i: usize| t.graph.node(n.srcs[i]).ne();
            let vals: Vec<([usize; 4], f32)> = match n.op {
                Op::Binary(op) => each(ne)
                    .map(|i| {
                        let a = self.get(&t, n.srcs[0], i);
                        let b = self.get(&t, n.srcs[1], bcast(i, src_ne(1)));
                        let v = match op {
                            BinaryOp::Add => a + b,
                            BinaryOp::Sub => a - b,
                            BinaryOp::Mul => a * b,
                            BinaryOp::Div => a / b,
                        };
                        (i, v)
                    })
                    .collect(),
                Op::Unary(UnaryOp::Neg) => each(ne).map(|i| (i, -self.get(&t, n.srcs[0], i))).collect(),
                Op::Scale { scale, bias } => each(ne).map(|i| (i, self.get(&t, n.srcs[0], i) * scale + bias)).collect(),
                Op::Cont => each(ne).map(|i| (i, self.get(&t, n.srcs[0], i))).collect(),
                Op::Fill { value } => each(ne).map(|i| (i, value)).collect(),
                Op::SetRows => {
                    let (values, ids) = (n.srcs[1], n.srcs[2]);
                    let mut out = Vec::new();
                    for j in each(t.graph.node(values).ne()) {
                        let row = self.get(&t, ids, [j[1], j[2], j[3], 0]) as usize;
                        if row >= ne[1] {
                            return Err(BackendError::Compute {
                                backend: self.name.clone(),
                                node: id,
                                op: "set_rows",
                                msg: format!("row id {row} out of range 0..{}", ne[1]),
                            });
                        }
                        out.push(([j[0], row, j[2], j[3]], self.get(&t, values, j)));
                    }
                    out
                }
                other => {
                    return Err(BackendError::Compute {
                        backend: self.name.clone(),
                        node: id,
                        op: other.name(),
                        msg: "the mock does not execute this op".into(),
                    });
                }
            };
            for (i, v) in vals {
                self.put(&t, id, i, v);
            }
        }
        Ok(())
    }

    fn synchronize(&mut self) -> BackendResult<()> {
        Ok(())
    }

    fn host_slice(&self, buffer: BufferId, offset: usize, len: usize) -> Option<&[u8]> {
        if !self.host_visible {
            return None;
        }
        let buf = &self.buffers.get(&buffer.0)?.0;
        buf.get(offset..offset + len)
    }

    fn copy_regions(&mut self, src: BufferId, dst: BufferId, regions: &[CopyRegion]) -> BackendResult<()> {
        let bytes: usize = regions.iter().map(|r| r.len).sum();
        self.note(format!("copy_regions b{}->b{} {} regions {bytes} B", src.0, dst.0, regions.len()));
        for r in regions {
            let rs = self.range(src, r.src_offset, r.len)?;
            let rd = self.range(dst, r.dst_offset, r.len)?;
            let piece = self.buffers[&src.0].0[rs].to_vec();
            self.buffers.get_mut(&dst.0).unwrap().0[rd].copy_from_slice(&piece);
        }
        Ok(())
    }

    /// A host-visible mock is host memory throughout (like the CPU backend); a `device_only` one
    /// models a GPU: its outputs get read-back regions.
    fn device_memory_is_host(&self) -> bool {
        self.host_visible
    }

    fn alignment(&self) -> usize {
        self.align
    }

    fn max_buffer_size(&self) -> usize {
        self.max
    }
}

/// A new shared log.
pub fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

/// Log lines containing `pat`.
pub fn count(log: &Log, pat: &str) -> usize {
    log.lock().unwrap().iter().filter(|l| l.contains(pat)).count()
}

/// Reads a fixture from `fixtures/graphs`.
pub fn fixture(name: &str) -> Graph {
    let path = format!("{}/../../fixtures/graphs/{name}.graph", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    graph::fixture::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}
