//! Rope (`shaders/rope.comp`): normal and NeoX pairing, ggml's `ggml_rope_ext` parameters (linear
//! scaling, YaRN, `attn_factor`) and the optional per-pair frequency factors (operand C). YaRN's
//! correction range is computed here once ([`graph::RopeParams::corr_dims`]).

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, Node, NodeId, RopeMode, RopeParams};

pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let x = g.node(n.srcs[0]);
    contiguous(n) && x.dtype == DType::F32 && x.layout.rows_contiguous(x.dtype) && g.node(n.srcs[1]).dtype == DType::I32
}

pub(super) fn rope(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, p: &RopeParams) -> Result<()> {
    let n = g.node(id);
    let a = enc.operand(g, n.srcs[0])?;
    let pos = enc.operand(g, n.srcs[1])?;
    let ff = match n.srcs.get(2) {
        Some(&f) => Some(enc.operand(g, f)?),
        None => None,
    };
    let d = enc.operand(g, id)?;
    let mut push =
        Push::new(ne32(n)).a(&a.arg).b(&pos.arg).d(&d.arg).pu(0, p.n_dims).pf(1, p.freq_base).pf(2, p.freq_scale);
    if let Some(f) = &ff {
        push = push.c(&f.arg);
    }
    // B's element counts are free words here (only B_OFF and B_NB(0) address the positions).
    let corr = p.corr_dims();
    push.b_ne = [p.ext_factor.to_bits(), p.attn_factor.to_bits(), corr[0].to_bits(), corr[1].to_bits()];
    push.c_ne[0] = match p.mode {
        RopeMode::Normal => 0,
        RopeMode::Neox => 1,
    };
    push.c_ne[1] = u32::from(ff.is_some());
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    let c_buf = ff.as_ref().map_or(&a.buf, |f| &f.buf);
    enc.dispatch(ShaderId::Rope, [&a.buf, &pos.buf, c_buf, &d.buf], &push, groups)
}
