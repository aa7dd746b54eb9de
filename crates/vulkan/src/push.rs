//! The push-constant block every shader reads, defined once: [`Push`] mirrors `shaders/common.glsl`
//! word for word (the GLSL side names the words with macros). 128 bytes, the minimum every Vulkan
//! device guarantees; a compile-time check keeps it there.

use graph::{DType, Node};

/// One tensor operand as the shaders address it: byte offset of element 0 in its bound buffer,
/// element counts, byte strides and dtype code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TensorArg {
    /// Byte offset of element `[0, 0, 0, 0]`.
    pub off: u32,
    /// Element counts.
    pub ne: [u32; 4],
    /// Byte strides.
    pub nb: [u32; 4],
    /// Dtype code ([`dtype_code`]).
    pub dt: u32,
}

/// The shaders' dtype codes (`DT_*` in `common.glsl`).
pub(crate) const fn dtype_code(d: DType) -> u32 {
    match d {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        DType::I32 => 3,
        // read by `shaders/quant.comp` only (`DT_Q8_0` .. `DT_Q6_K` there)
        DType::Q8_0 => 4,
        DType::Q4_0 => 5,
        DType::Q4_1 => 6,
        DType::Q5_0 => 7,
        DType::Q5_1 => 8,
        DType::Q4_K => 9,
        DType::Q5_K => 10,
        DType::Q6_K => 11,
    }
}

impl TensorArg {
    /// The operand for `node` whose storage starts at byte `base` of its buffer; `None` when an
    /// offset or stride does not fit in 32 bits.
    pub(crate) fn of(node: &Node, base: usize) -> Option<TensorArg> {
        let l = &node.layout;
        let off = u32::try_from(base.checked_add(l.offset)?).ok()?;
        let end = base.checked_add(l.extent(node.dtype))?;
        u32::try_from(end).ok()?;
        let mut ne = [0u32; 4];
        let mut nb = [0u32; 4];
        for i in 0..4 {
            ne[i] = u32::try_from(l.ne[i]).ok()?;
            nb[i] = u32::try_from(l.nb[i]).ok()?;
        }
        Some(TensorArg { off, ne, nb, dt: dtype_code(node.dtype) })
    }
}

/// The push-constant block (see `common.glsl` for each word's name).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Push {
    /// Iteration shape (`NE0..NE3`).
    pub ne: [u32; 4],
    /// Dtype codes, 4 bits each: A, B, C, D.
    pub types: u32,
    /// Byte offset of the result.
    pub d_off: u32,
    /// A: offset, nb[4].
    pub a_off: u32,
    /// A's byte strides.
    pub a_nb: [u32; 4],
    /// B: offset.
    pub b_off: u32,
    /// B's element counts (broadcast source) or op-specific words.
    pub b_ne: [u32; 4],
    /// B's byte strides.
    pub b_nb: [u32; 4],
    /// C: offset.
    pub c_off: u32,
    /// C's element counts or op-specific words.
    pub c_ne: [u32; 4],
    /// C's byte strides.
    pub c_nb: [u32; 4],
    /// Op parameters (`P0..P2`; floats as bits).
    pub p: [u32; 3],
}

const _: () = assert!(size_of::<Push>() <= 128, "push constants must fit the guaranteed 128 bytes");
const _: () = assert!(size_of::<Push>() == 32 * 4, "common.glsl declares exactly 32 words");

impl Push {
    /// A block with iteration shape `ne`.
    pub(crate) fn new(ne: [u32; 4]) -> Push {
        Push { ne, ..Push::default() }
    }

    /// Sets operand A.
    pub(crate) fn a(mut self, t: &TensorArg) -> Push {
        self.a_off = t.off;
        self.a_nb = t.nb;
        self.types = (self.types & !0xf) | t.dt;
        self
    }

    /// Sets operand B.
    pub(crate) fn b(mut self, t: &TensorArg) -> Push {
        self.b_off = t.off;
        self.b_ne = t.ne;
        self.b_nb = t.nb;
        self.types = (self.types & !0xf0) | (t.dt << 4);
        self
    }

    /// Sets operand C.
    pub(crate) fn c(mut self, t: &TensorArg) -> Push {
        self.c_off = t.off;
        self.c_ne = t.ne;
        self.c_nb = t.nb;
        self.types = (self.types & !0xf00) | (t.dt << 8);
        self
    }

    /// Sets the result D.
    pub(crate) fn d(mut self, t: &TensorArg) -> Push {
        self.d_off = t.off;
        self.types = (self.types & !0xf000) | (t.dt << 12);
        self
    }

    /// Sets parameter word `i` to `v`.
    pub(crate) fn pu(mut self, i: usize, v: u32) -> Push {
        self.p[i] = v;
        self
    }

    /// Sets parameter word `i` to the bits of `v`.
    pub(crate) fn pf(self, i: usize, v: f32) -> Push {
        self.pu(i, v.to_bits())
    }

    /// The block as the 32 words the shaders see.
    pub(crate) fn words(&self) -> [u32; 32] {
        let mut w = [0u32; 32];
        w[0..4].copy_from_slice(&self.ne);
        w[4] = self.types;
        w[5] = self.d_off;
        w[6] = self.a_off;
        w[7..11].copy_from_slice(&self.a_nb);
        w[11] = self.b_off;
        w[12..16].copy_from_slice(&self.b_ne);
        w[16..20].copy_from_slice(&self.b_nb);
        w[20] = self.c_off;
        w[21..25].copy_from_slice(&self.c_ne);
        w[25..29].copy_from_slice(&self.c_nb);
        w[29..32].copy_from_slice(&self.p);
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_follow_common_glsl_indices() {
        let t = TensorArg { off: 7, ne: [1, 2, 3, 4], nb: [4, 8, 16, 32], dt: 1 };
        let w = Push::new([9, 8, 7, 6]).a(&t).b(&t).c(&t).d(&t).pu(0, 11).pf(2, 1.5).words();
        assert_eq!(&w[0..4], &[9, 8, 7, 6]);
        assert_eq!(w[4], 0x1111);
        assert_eq!((w[5], w[6], w[11], w[20]), (7, 7, 7, 7));
        assert_eq!(&w[7..11], &[4, 8, 16, 32]);
        assert_eq!(&w[12..16], &[1, 2, 3, 4]);
        assert_eq!(&w[25..29], &[4, 8, 16, 32]);
        assert_eq!((w[29], w[31]), (11, 1.5f32.to_bits()));
    }
}
