#version 450
// penalize.comp: Penalize (graph::Op::Penalize). One invocation per element of A's shape NE: A the
// logits f32 (strided), B the counts f32 (the same shape), C the params f32 [3, rows..] (repeat,
// freq, present per row); D contiguous f32. Where the count is positive: (x > 0 ? x / repeat :
// x * repeat) - (count * freq + present), each operation rounded to f32 in that order (`precise`:
// no fused multiply-add), as the CPU sampler does; elsewhere x.
#include "common.glsl"

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    uvec4 i = unravel(idx, pc_ne());
    float x = uintBitsToFloat(a_w[a_at(i) >> 2]);
    float c = uintBitsToFloat(b_w[b_at(i) >> 2]);
    float r = x;
    if (c > 0.0) {
        float rep = uintBitsToFloat(c_w[c_at(uvec4(0u, i.yzw)) >> 2]);
        float freq = uintBitsToFloat(c_w[c_at(uvec4(1u, i.yzw)) >> 2]);
        float present = uintBitsToFloat(c_w[c_at(uvec4(2u, i.yzw)) >> 2]);
        precise float scaled = x <= 0.0 ? x * rep : x / rep;
        precise float sub = c * freq + present;
        precise float res = scaled - sub;
        r = res;
    }
    d_w[(D_OFF >> 2) + idx] = floatBitsToUint(r);
}
