//! Views: `view`, `reshape`, `permute`, `transpose` (no computation; a new layout over the source's storage).

use crate::graph::Graph;
use crate::node::NodeId;
use crate::op::Op;
use crate::shape::{Layout, MAX_DIMS, Shape};

use super::R;

impl Graph {
    /// A strided window into `src`'s storage: element counts `ne`, byte strides `nb` (one per
    /// dimension of `ne`; `nb[0]` must be the element size) and a byte `offset` relative to `src`.
    pub fn view(&mut self, src: NodeId, ne: &[usize], nb: &[usize], offset: usize) -> R {
        const OP: &str = "view";
        let shape = self.shape_arg(OP, ne)?;
        let s = self.src(OP, src)?.clone();
        if nb.len() != ne.len() {
            return Err(self.err(OP, format!("{} strides given for {} dimensions", nb.len(), ne.len())));
        }
        if nb[0] != s.dtype.size() {
            return Err(self.err(
                OP,
                format!("nb[0] = {} must be the element size {} of {}", nb[0], s.dtype.size(), self.describe(src)),
            ));
        }
        let mut strides = [0; MAX_DIMS];
        strides[..nb.len()].copy_from_slice(nb);
        for i in nb.len()..MAX_DIMS {
            strides[i] = strides[i - 1] * shape[i - 1];
        }
        let layout = Layout { ne: shape, nb: strides, offset: s.layout.offset + offset };
        let storage = self.node(self.storage_of(src));
        let have = storage.layout.extent(storage.dtype);
        let need = layout.extent(s.dtype);
        if need > have {
            return Err(self.err(
                OP,
                format!(
                    "view {shape} with strides {nb:?} at offset {offset} of {} needs {need} bytes, its storage has {have}",
                    self.describe(src)
                ),
            ));
        }
        Ok(self.new_view(Op::View, src, layout))
    }

    /// The same elements with a new shape; `src` must be contiguous.
    pub fn reshape(&mut self, src: NodeId, ne: &[usize]) -> R {
        const OP: &str = "reshape";
        let shape = self.shape_arg(OP, ne)?;
        let s = self.src(OP, src)?;
        if !s.layout.is_contiguous(s.dtype) {
            return Err(self.err(OP, format!("{} is not contiguous; insert cont()", self.describe(src))));
        }
        if s.layout.ne.numel() != shape.numel() {
            return Err(self.err(
                OP,
                format!("{} has {} elements, {shape} has {}", self.describe(src), s.layout.ne.numel(), shape.numel()),
            ));
        }
        let layout = Layout { offset: s.layout.offset, ..Layout::contiguous(shape, s.dtype) };
        Ok(self.new_view(Op::Reshape, src, layout))
    }

    /// Moves source dimension `i` to result dimension `axes[i]` (ggml's `permute`).
    pub fn permute(&mut self, src: NodeId, axes: [usize; 4]) -> R {
        const OP: &str = "permute";
        let s = self.src(OP, src)?;
        let mut seen = [false; MAX_DIMS];
        for &a in &axes {
            if a >= MAX_DIMS || seen[a] {
                return Err(self.err(OP, format!("axes {axes:?} are not a permutation of 0..4")));
            }
            seen[a] = true;
        }
        let mut ne = [1; MAX_DIMS];
        let mut nb = [0; MAX_DIMS];
        for i in 0..MAX_DIMS {
            ne[axes[i]] = s.layout.ne[i];
            nb[axes[i]] = s.layout.nb[i];
        }
        let layout = Layout { ne: Shape(ne), nb, offset: s.layout.offset };
        let axes = axes.map(|a| a as u8);
        Ok(self.new_view(Op::Permute { axes }, src, layout))
    }

    /// Swaps dimensions 0 and 1.
    pub fn transpose(&mut self, src: NodeId) -> R {
        let s = self.src("transpose", src)?;
        let mut layout = s.layout;
        layout.ne.0.swap(0, 1);
        layout.nb.swap(0, 1);
        Ok(self.new_view(Op::Transpose, src, layout))
    }
}
