#version 450
// rope.comp: Rope. One invocation per element of x [head_dim, n_head, n_tokens, 1] (NE, A strided
// rows), B = positions i32 [n_tokens] (B_NB(0) stride). P0 = n_dims, P1 = freq_base, P2 = freq_scale,
// C_NE(0) = mode (0 normal: pairs (2i, 2i+1); 1 neox: pairs (i, i + n_dims/2)). D contiguous f32.
#include "common.glsl"

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    uvec4 i = unravel(idx, pc_ne());
    uint row = a_at(uvec4(0u, i.yzw));
    uint nd = P0;
    float y;
    if (i.x >= nd) {
        y = uintBitsToFloat(a_w[(row >> 2) + i.x]);
    } else {
        uint p, e0, e1;
        bool first;
        if (C_NE(0) == 0u) { p = i.x >> 1u; e0 = 2u * p; e1 = e0 + 1u; first = (i.x & 1u) == 0u; }
        else { uint h = nd >> 1u; p = i.x % h; e0 = p; e1 = p + h; first = i.x < h; }
        float pos = float(LOAD_I(b_w, B_OFF + i.z * B_NB(0)));
        float theta = pos * P2F * pow(P1F, -2.0 * float(p) / float(nd));
        float c = cos(theta), s = sin(theta);
        float x0 = uintBitsToFloat(a_w[(row >> 2) + e0]);
        float x1 = uintBitsToFloat(a_w[(row >> 2) + e1]);
        y = first ? x0 * c - x1 * s : x0 * s + x1 * c;
    }
    d_w[(D_OFF >> 2) + idx] = floatBitsToUint(y);
}
