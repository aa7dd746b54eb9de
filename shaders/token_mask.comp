#version 450
// token_mask.comp: TokenMask (graph::Op::TokenMask). One invocation per element of A's shape NE:
// A the values f32 [m, rows..] (strided rows), B the mask words i32 [w, rows..] (read as u32 bits),
// C with P0 = 1 the token ids i32 [m, rows..] (unread with P0 = 0: entry i is token i); D contiguous
// f32. Token t is allowed iff 0 <= t < 32 w and bit t % 32 of word t / 32 of the row is set; each
// invocation reads its entry's word once. An allowed entry is copied bit for bit; a banned one is
// x + -inf, written out on the bits so that no driver's float mode changes it: -inf for a finite
// x or -inf, NaN for a NaN (its own, quieted, as the CPU's addition keeps it) or +inf.
#include "common.glsl"

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    uvec4 i = unravel(idx, pc_ne());
    uint x = a_w[a_at(i) >> 2];
    int t = P0 != 0u ? int(c_w[c_at(i) >> 2]) : int(i.x);
    bool ok = false;
    if (t >= 0) {
        uint word = uint(t) >> 5;
        if (word < B_NE(0)) ok = ((b_w[b_at(uvec4(word, i.yzw)) >> 2] >> (uint(t) & 31u)) & 1u) != 0u;
    }
    uint r = x;
    if (!ok) {
        uint mag = x & 0x7fffffffu;
        r = mag > 0x7f800000u ? (x | 0x00400000u) : (x == 0x7f800000u ? 0x7fc00000u : 0xff800000u);
    }
    d_w[(D_OFF >> 2) + idx] = r;
}
