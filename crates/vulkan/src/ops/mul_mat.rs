//! MulMat (`shaders/mul_mat.comp`): f32/f16/bf16 weights times f32 activations, tiled for GPUs
//! (`shaders/mul_mat_tile.glsl`): a workgroup per 4 x 4 tile of the result (4 weight rows by 4
//! activation columns), so each weight is read once per 4 columns and each activation once per 4
//! rows, the partial sums reduced with subgroup operations where the device has them. A decode
//! step (1-4 columns) reads every weight row once; the quantized weights (`quant.rs`) share the
//! tiling.

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, float, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, Node, NodeId};

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let (a, b) = (g.node(n.srcs[0]), g.node(n.srcs[1]));
    contiguous(n)
        && float(a.dtype)
        && b.dtype == DType::F32
        && a.layout.rows_contiguous(a.dtype)
        && b.layout.rows_contiguous(b.dtype)
        && n.layout.ne[2].is_multiple_of(a.layout.ne[2])
        && n.layout.ne[3].is_multiple_of(a.layout.ne[3])
}

pub(super) fn mul_mat(enc: &mut Encoder<'_>, g: &Graph, id: NodeId) -> Result<()> {
    let n = g.node(id);
    let an = g.node(n.srcs[0]);
    let a = enc.operand(g, n.srcs[0])?;
    let b = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let mut push = Push::new(ne32(n)).a(&a.arg).b(&b.arg).d(&d.arg).pu(0, an.layout.ne[0] as u32);
    push.c_ne = ne32(an);
    let shader = if enc.subgroups() { ShaderId::MulMatSg } else { ShaderId::MulMat };
    enc.dispatch(shader, [&a.buf, &b.buf, &a.buf, &d.buf], &push, tile_grid(n)?)
}

/// The workgroups of a tiled product with result `n`: one per 4 x 4 tile (`TILE_R` x `TILE_C` of
/// `shaders/mul_mat_tile.glsl`) of each batch.
pub(super) fn tile_grid(n: &Node) -> Result<[u32; 3]> {
    let ne = n.layout.ne;
    let tiles = (ne[0].div_ceil(TILE_R) * ne[1].div_ceil(TILE_C) * ne[2] * ne[3]) as u64;
    grid(tiles, 1)
}

/// Rows and columns of a tile (`TILE_R`, `TILE_C` in `shaders/mul_mat_tile.glsl`).
const TILE_R: usize = 4;
const TILE_C: usize = 4;
