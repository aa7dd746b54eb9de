//! Token mask (`shaders/token_mask.comp`): bans the tokens a packed per-row bitmask does not
//! allow, on rows in vocabulary order or on candidate lists with their token ids, one invocation
//! per element (each reads its entry's mask word once).

use crate::encoder::{Encoder, grid};
use crate::error::Result;
use crate::ops::{contiguous, ne32};
use crate::push::Push;
use crate::shaders::ShaderId;
use graph::{DType, Graph, Node, NodeId};

/// f32 values, i32 bits and ids (the builder checked their shapes), a contiguous result.
pub(super) fn supports(g: &Graph, n: &Node) -> bool {
    let dt = |i: usize| g.node(n.srcs[i]).dtype;
    contiguous(n) && dt(0) == DType::F32 && (1..n.srcs.len()).all(|i| dt(i) == DType::I32)
}

pub(super) fn token_mask(enc: &mut Encoder<'_>, g: &Graph, id: NodeId, ids: bool) -> Result<()> {
    let n = g.node(id);
    let x = enc.operand(g, n.srcs[0])?;
    let bits = enc.operand(g, n.srcs[1])?;
    let d = enc.operand(g, id)?;
    let mut push = Push::new(ne32(n)).a(&x.arg).b(&bits.arg).d(&d.arg);
    let list = if ids { Some(enc.operand(g, n.srcs[2])?) } else { None };
    if let Some(l) = &list {
        push = push.c(&l.arg).pu(0, 1);
    }
    // Without ids slot C is unread; `x` is bound there.
    let c = list.as_ref().map_or(&x.buf, |l| &l.buf);
    let groups = grid(n.layout.ne.numel() as u64, 256)?;
    enc.dispatch(ShaderId::TokenMask, [&x.buf, &bits.buf, c, &d.buf], &push, groups)
}
