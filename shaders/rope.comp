#version 450
// rope.comp: Rope, as ggml's ggml_rope_ext. One invocation per element of x [head_dim, n_head,
// n_tokens, 1] (NE, A strided rows), B = positions i32 [n_tokens] (B_NB(0) stride). P0 = n_dims,
// P1 = freq_base, P2 = freq_scale; B_NE(0..3) = ext_factor, attn_factor and YaRN's correction
// range low, high (f32 bits); C_NE(0) = mode (0 normal: pairs (2i, 2i+1); 1 neox: pairs
// (i, i + n_dims/2)); C_NE(1) = 1 when C holds the per-pair frequency factors (f32, C_NB(0)
// stride). D contiguous f32.
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
        float ff = C_NE(1) != 0u ? uintBitsToFloat(c_w[(C_OFF + p * C_NB(0)) >> 2]) : 1.0;
        float freq_scale = P2F;
        float ext_factor = uintBitsToFloat(B_NE(0));
        float mscale = uintBitsToFloat(B_NE(1));
        float theta_extrap = pos * pow(P1F, -2.0 * float(p) / float(nd)) / ff;
        float theta = freq_scale * theta_extrap;
        if (ext_factor != 0.0) {
            float low = uintBitsToFloat(B_NE(2)), high = uintBitsToFloat(B_NE(3));
            float ramp = 1.0 - clamp((float(p) - low) / max(0.001, high - low), 0.0, 1.0);
            float mix_ = ramp * ext_factor;
            theta = theta * (1.0 - mix_) + theta_extrap * mix_;
            mscale *= 1.0 + 0.1 * log(1.0 / freq_scale);
        }
        float c = cos(theta) * mscale, s = sin(theta) * mscale;
        float x0 = uintBitsToFloat(a_w[(row >> 2) + e0]);
        float x1 = uintBitsToFloat(a_w[(row >> 2) + e1]);
        y = first ? x0 * c - x1 * s : x0 * s + x1 * c;
    }
    d_w[(D_OFF >> 2) + idx] = floatBitsToUint(y);
}
