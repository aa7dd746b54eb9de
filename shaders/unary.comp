#version 450
// unary.comp: Unary(*), Scale, Clamp. P2 selects the op (`vulkan::ops::unary::code`), P0/P1 are
// scale/bias or min/max. Strided A, contiguous D of the same dtype.
#include "common.glsl"

float gelu(float x) {
    const float k = 0.7978845608028654; // sqrt(2/pi)
    float t = clamp(k * (x + 0.044715 * x * x * x), -15.0, 15.0);
    return 0.5 * x * (1.0 + tanh(t));
}

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    float x = LOAD_F(a_w, a_at(unravel(idx, pc_ne())), A_T);
    float y;
    switch (P2) {
    case 0u: y = -x; break;
    case 1u: y = exp(x); break;
    case 2u: y = x == 0.0 ? NEG_INF : (x < 0.0 ? uintBitsToFloat(0x7fc00000u) : log(x)); break;
    case 3u: y = x * x; break;
    case 4u: y = sqrt(x); break;
    case 5u: y = x / (1.0 + exp(-x)); break;
    case 6u: y = gelu(x); break;
    case 7u: y = x * P0F + P1F; break;
    default: y = min(max(x, P0F), P1F); break;
    }
    STORE_F(d_w, D_OFF + idx * dt_size(D_T), D_T, y);
}
