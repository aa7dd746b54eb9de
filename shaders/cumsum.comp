#version 450
// cumsum.comp: Cumsum. One workgroup per row of A; the row is scanned in chunks of WG * 4 entries
// (each invocation sums 4 consecutive entries, a shared-memory Hillis-Steele scan combines them)
// carrying the running total between chunks. D contiguous f32.
#include "common.glsl"

shared float part[WG];

void main() {
    uint row = group_index();
    uint nrows = NE1 * NE2 * NE3;
    if (row >= nrows) return;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint base = a_at(uvec4(0u, r.yzw));
    uint es = dt_size(A_T);
    uint l = gl_LocalInvocationID.x;
    uint out_ = (D_OFF >> 2) + row * NE0;
    float carry = 0.0;
    for (uint start = 0u; start < NE0; start += WG * 4u) {
        float v[4];
        float t = 0.0;
        for (uint j = 0u; j < 4u; j++) {
            uint i = start + l * 4u + j;
            float x = i < NE0 ? LOAD_F(a_w, base + i * es, A_T) : 0.0;
            t += x;
            v[j] = t;
        }
        part[l] = t;
        barrier();
        for (uint s = 1u; s < WG; s <<= 1u) {
            float add = l >= s ? part[l - s] : 0.0;
            barrier();
            part[l] += add;
            barrier();
        }
        float before = carry + (l > 0u ? part[l - 1u] : 0.0);
        for (uint j = 0u; j < 4u; j++) {
            uint i = start + l * 4u + j;
            if (i < NE0) d_w[out_ + i] = floatBitsToUint(before + v[j]);
        }
        carry += part[WG - 1u];
        barrier();
    }
}
