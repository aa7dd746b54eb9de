#version 450
// reduce.comp: SumRows (P2 = 0), MaxRows (1), Argmax (2). One workgroup per row of A (rows
// contiguous, NE the source shape), any row length; D is contiguous [1, rows] (f32, or i32 for argmax).
#include "common.glsl"
#include "reduce_wg.glsl"

void main() {
    uint row = group_index();
    uint nrows = NE1 * NE2 * NE3;
    if (row >= nrows) return;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint base = a_at(uvec4(0u, r.yzw));
    uint es = dt_size(A_T);
    uint l = gl_LocalInvocationID.x;
    if (P2 == 0u) {
        float s = 0.0;
        for (uint i = l; i < NE0; i += WG) s += LOAD_F(a_w, base + i * es, A_T);
        s = wg_sum(s);
        if (l == 0u) d_w[(D_OFF >> 2) + row] = floatBitsToUint(s);
    } else if (P2 == 1u) {
        float m = NEG_INF;
        bool nan_ = false;
        for (uint i = l; i < NE0; i += WG) {
            float x = LOAD_F(a_w, base + i * es, A_T);
            nan_ = nan_ || isnan(x);
            m = max(m, x);
        }
        m = wg_max(nan_ ? uintBitsToFloat(0x7fc00000u) : m);
        if (l == 0u) d_w[(D_OFF >> 2) + row] = floatBitsToUint(m);
    } else {
        float bv = NEG_INF;
        uint bi = 0xffffffffu;
        for (uint i = l; i < NE0; i += WG) {
            float x = LOAD_F(a_w, base + i * es, A_T);
            if (argmax_better(x, i, bv, bi)) { bv = x; bi = i; }
        }
        uint best = wg_argmax(bv, bi);
        if (l == 0u) d_w[(D_OFF >> 2) + row] = best;
    }
}
