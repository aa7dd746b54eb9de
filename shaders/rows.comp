#version 450
// rows.comp: GetRows (P2 = 0) and SetRows (P2 = 1). P0 = rows of the indexed tensor. An id outside
// [0, P0) reads 0 / is skipped and sets word P1 of the status buffer (C for get_rows, D for
// set_rows), which the host turns into a run-time error naming the node.
// get_rows: NE = result shape [ne0, m, ne2, ne3], A = source, B = ids [m, ne2, ne3], D contiguous.
// set_rows: NE = values shape [ne0, m, ne2, ne3], A = destination (written in place, strided rows),
// B = values, C = ids.
#include "common.glsl"

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    uvec4 i = unravel(idx, pc_ne());
    if (P2 == 0u) {
        int id = LOAD_I(b_w, B_OFF + i.y * B_NB(0) + i.z * B_NB(1) + i.w * B_NB(2));
        uint dst = D_OFF + idx * dt_size(D_T);
        if (id < 0 || uint(id) >= P0) { d_w[dst >> 2] = 0u; atomicOr(c_w[P1], 1u); return; }
        uint src = a_at(uvec4(i.x, uint(id), i.z, i.w));
        if (A_T == DT_I32) d_w[dst >> 2] = a_w[src >> 2];
        else d_w[dst >> 2] = floatBitsToUint(LOAD_F(a_w, src, A_T));
    } else {
        int id = LOAD_I(c_w, C_OFF + i.y * C_NB(0) + i.z * C_NB(1) + i.w * C_NB(2));
        if (id < 0 || uint(id) >= P0) { atomicOr(d_w[P1], 1u); return; }
        uint src = B_OFF + i.x * B_NB(0) + i.y * B_NB(1) + i.z * B_NB(2) + i.w * B_NB(3);
        uint dst = a_at(uvec4(i.x, uint(id), i.z, i.w));
        if (A_T == DT_I32) a_w[dst >> 2] = b_w[src >> 2];
        else if (A_T == B_T && dt_size(A_T) == 2u) STORE_H(a_w, dst, LOAD_H(b_w, src))
        else STORE_F(a_w, dst, A_T, LOAD_F(b_w, src, B_T));
    }
}
