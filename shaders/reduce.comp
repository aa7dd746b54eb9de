#version 450
// reduce.comp: SumRows (P2 = 0), MaxRows (1), Argmax (2) over rows of A (rows contiguous, NE the
// source shape), any row length; D is contiguous [1, rows] (f32, or i32 for argmax).
//
// P1 = 0: one workgroup per row.
// A long row is spread over many workgroups in two passes (a row of 151,936 logits on one
// workgroup leaves a GPU idle but for one of its multiprocessors):
// P1 = 1: workgroup g reduces segment g % P0 of row g / P0, elements [s * C_NE(0), (s + 1) *
//   C_NE(0)) of the row, into the partial pair D[2 g], D[2 g + 1] (the value's bits; for argmax
//   the index of the best element, ties to the lowest index, NaN first).
// P1 = 2: one workgroup per row combines its P0 partial pairs, read from A as words, and writes D as
//   P1 = 0 does. Sums are therefore added in a different order than in one pass; max and argmax
//   are exact either way.
#include "common.glsl"
#include "reduce_wg.glsl"

// Reduces elements [lo, hi) of the row at byte `base` (invocations striding by WG): the value and,
// for argmax, its index, both returned to every invocation.
void reduce_range(uint base, uint lo, uint hi, out float value, out uint index) {
    uint es = dt_size(A_T);
    uint l = gl_LocalInvocationID.x;
    index = 0u;
    if (P2 == 0u) {
        float s = 0.0;
        for (uint i = lo + l; i < hi; i += WG) s += LOAD_F(a_w, base + i * es, A_T);
        value = wg_sum(s);
    } else if (P2 == 1u) {
        float m = NEG_INF;
        bool nan_ = false;
        for (uint i = lo + l; i < hi; i += WG) {
            float x = LOAD_F(a_w, base + i * es, A_T);
            nan_ = nan_ || isnan(x);
            m = max(m, x);
        }
        value = wg_max(nan_ ? uintBitsToFloat(0x7fc00000u) : m);
    } else {
        float bv = NEG_INF;
        uint bi = 0xffffffffu;
        for (uint i = lo + l; i < hi; i += WG) {
            float x = LOAD_F(a_w, base + i * es, A_T);
            if (argmax_better(x, i, bv, bi)) { bv = x; bi = i; }
        }
        index = wg_argmax(bv, bi);
        value = LOAD_F(a_w, base + index * es, A_T);
    }
}

// Combines the `n` partial pairs at word `w` of A.
void combine(uint w, uint n, out float value, out uint index) {
    uint l = gl_LocalInvocationID.x;
    index = 0u;
    if (P2 == 0u) {
        float s = 0.0;
        for (uint i = l; i < n; i += WG) s += uintBitsToFloat(a_w[w + 2u * i]);
        value = wg_sum(s);
    } else if (P2 == 1u) {
        float m = NEG_INF;
        bool nan_ = false;
        for (uint i = l; i < n; i += WG) {
            float x = uintBitsToFloat(a_w[w + 2u * i]);
            nan_ = nan_ || isnan(x);
            m = max(m, x);
        }
        value = wg_max(nan_ ? uintBitsToFloat(0x7fc00000u) : m);
    } else {
        float bv = NEG_INF;
        uint bi = 0xffffffffu;
        for (uint i = l; i < n; i += WG) {
            float x = uintBitsToFloat(a_w[w + 2u * i]);
            uint xi = a_w[w + 2u * i + 1u];
            if (argmax_better(x, xi, bv, bi)) { bv = x; bi = xi; }
        }
        index = wg_argmax(bv, bi);
        value = 0.0;  // only the index is stored
    }
}

void main() {
    uint g = group_index();
    uint nrows = NE1 * NE2 * NE3;
    uint l = gl_LocalInvocationID.x;
    float value;
    uint index;
    if (P1 == 1u) {
        uint row = g / P0, seg = g % P0;
        if (row >= nrows) return;
        uvec4 r = unravel(row * NE0, pc_ne());
        uint lo = seg * C_NE(0);
        reduce_range(a_at(uvec4(0u, r.yzw)), lo, min(NE0, lo + C_NE(0)), value, index);
        if (l == 0u) {
            d_w[(D_OFF >> 2) + 2u * g] = floatBitsToUint(value);
            d_w[(D_OFF >> 2) + 2u * g + 1u] = index;
        }
        return;
    }
    if (g >= nrows) return;
    if (P1 == 2u) {
        combine((A_OFF >> 2) + 2u * P0 * g, P0, value, index);
    } else {
        uvec4 r = unravel(g * NE0, pc_ne());
        reduce_range(a_at(uvec4(0u, r.yzw)), 0u, NE0, value, index);
    }
    if (l == 0u) d_w[(D_OFF >> 2) + g] = P2 == 2u ? index : floatBitsToUint(value);
}
