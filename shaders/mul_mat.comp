#version 450
// mul_mat.comp: MulMat. One workgroup per output element out[i, j, i2, i3] (NE the result shape),
// its invocations splitting the dot product over k = P0 and reducing in the workgroup.
// A = weights [k, m, C_NE(2), C_NE(3)] (f32/f16/bf16, rows contiguous; broadcast as ggml:
// a's i2 = i2 / (NE2 / C_NE(2))), B = f32 [k, n, NE2, NE3], D contiguous f32.
#include "common.glsl"
#include "reduce_wg.glsl"

void main() {
    uint g = group_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (g >= n) return;
    uvec4 o = unravel(g, pc_ne());
    uint a2 = o.z / (NE2 / C_NE(2)), a3 = o.w / (NE3 / C_NE(3));
    uint pa = A_OFF + o.x * A_NB(1) + a2 * A_NB(2) + a3 * A_NB(3);
    uint pb = (B_OFF >> 2) + ((o.y * B_NB(1) + o.z * B_NB(2) + o.w * B_NB(3)) >> 2);
    uint es = dt_size(A_T);
    float s = 0.0;
    for (uint k = gl_LocalInvocationID.x; k < P0; k += WG) {
        s += LOAD_F(a_w, pa + k * es, A_T) * uintBitsToFloat(b_w[pb + k]);
    }
    s = wg_sum(s);
    if (gl_LocalInvocationID.x == 0u) d_w[(D_OFF >> 2) + g] = floatBitsToUint(s);
}
