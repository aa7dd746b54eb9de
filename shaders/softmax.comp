#version 450
// softmax.comp: SoftMax. One workgroup per row of A (NE the source shape); B is the optional mask
// (P1 = 1 when present; B_NE(1) >= NE1, broadcast over dims 2 and 3), P0 the scale. D contiguous f32.
#include "common.glsl"
#include "reduce_wg.glsl"

float item(uint base, uint mbase, uint i) {
    float x = LOAD_F(a_w, base + i * dt_size(A_T), A_T) * P0F;
    if (P1 != 0u) x += LOAD_F(b_w, mbase + i * dt_size(B_T), B_T);
    return x;
}

void main() {
    uint row = group_index();
    uint nrows = NE1 * NE2 * NE3;
    if (row >= nrows) return;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint base = a_at(uvec4(0u, r.yzw));
    uint mbase = P1 != 0u ? B_OFF + r.y * B_NB(1) + (r.z % B_NE(2)) * B_NB(2) + (r.w % B_NE(3)) * B_NB(3) : 0u;
    uint l = gl_LocalInvocationID.x;
    float m = NEG_INF;
    bool nan_ = false;
    for (uint i = l; i < NE0; i += WG) {
        float x = item(base, mbase, i);
        nan_ = nan_ || isnan(x);
        m = max(m, x);
    }
    m = wg_max(nan_ ? uintBitsToFloat(0x7fc00000u) : m);
    float s = 0.0;
    for (uint i = l; i < NE0; i += WG) s += exp(item(base, mbase, i) - m);
    s = wg_sum(s);
    float inv = 1.0 / s;
    uint out_ = (D_OFF >> 2) + row * NE0;
    for (uint i = l; i < NE0; i += WG) d_w[out_ + i] = floatBitsToUint(exp(item(base, mbase, i) - m) * inv);
}
