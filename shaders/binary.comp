#version 450
// binary.comp: Binary(*), Compare(*) and Where. Iterates over A's shape NE (strided A); B and C
// broadcast. P2 selects the op (`vulkan::ops::binary::code`). For Where, B is the mask and C the
// "else" operand. D is contiguous with dtype D_T.
#include "common.glsl"

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    uvec4 i = unravel(idx, pc_ne());
    uint dst = D_OFF + idx * dt_size(D_T);
    uint op = P2;
    if (op == 7u) { // where(mask, a, c)
        float m = LOAD_F(b_w, b_at(i), B_T);
        uint pa = a_at(i), pcc = c_at(i);
        if (A_T == DT_I32) {
            d_w[dst >> 2] = m != 0.0 ? a_w[pa >> 2] : c_w[pcc >> 2];
        } else {
            float v = m != 0.0 ? LOAD_F(a_w, pa, A_T) : LOAD_F(c_w, pcc, C_T);
            STORE_F(d_w, dst, D_T, v);
        }
        return;
    }
    if (A_T == DT_I32) { // i32 comparisons, exact
        int xi = LOAD_I(a_w, a_at(i)), yi = LOAD_I(b_w, b_at(i));
        bool t = op == 4u ? xi >= yi : (op == 5u ? xi > yi : xi == yi);
        d_w[dst >> 2] = floatBitsToUint(t ? 1.0 : 0.0);
        return;
    }
    float x = LOAD_F(a_w, a_at(i), A_T);
    float y = LOAD_F(b_w, b_at(i), B_T);
    float r;
    switch (op) {
    case 0u: r = x + y; break;
    case 1u: r = x - y; break;
    case 2u: r = x * y; break;
    case 3u: r = x / y; break;
    case 4u: r = x >= y ? 1.0 : 0.0; break;
    case 5u: r = x > y ? 1.0 : 0.0; break;
    default: r = x == y ? 1.0 : 0.0; break;
    }
    STORE_F(d_w, dst, D_T, r);
}
