#version 450
// norm.comp: RmsNorm (P0 = eps). One workgroup per row of A; D contiguous f32.
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
    float s = 0.0;
    for (uint i = l; i < NE0; i += WG) {
        float x = LOAD_F(a_w, base + i * es, A_T);
        s += x * x;
    }
    s = wg_sum(s);
    float scale = 1.0 / sqrt(s / float(NE0) + P0F);
    uint out_ = (D_OFF >> 2) + row * NE0;
    for (uint i = l; i < NE0; i += WG) d_w[out_ + i] = floatBitsToUint(LOAD_F(a_w, base + i * es, A_T) * scale);
}
