#version 450
// list_filter.comp: ListFilter (graph::Op::ListFilter). One invocation per row: the row's list
// (A f32, rows contiguous, NE0 <= graph::ListStages::MAX_LEN entries) is copied to D (contiguous
// f32), then the stages run in order, each walking D's row: P0 holds the stage kinds, 2 bits each
// from the lowest (0 top_p, 1 min_p, 2 temp), P1 their number; B the params f32 [2 P1, rows..]
// (rows contiguous), stage s reading entries 2 s and 2 s + 1. The same f32 operations in the same
// order as the CPU (kernels::list, llama.cpp's top-p arithmetic), with the device's exp: a top-p
// cut can differ from the CPU's only where the running sum at the cut lies within that exp's
// rounding of p. A row whose list or params hold a NaN comes out all NaN. The passes over a row
// stay far below lavapipe's 65,535 loop iterations per dispatch (3 per top-p stage, at most 8
// stages of 1024 entries).
#include "common.glsl"

void main() {
    uint row = global_index();
    uint nrows = NE1 * NE2 * NE3;
    if (row >= nrows) return;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint a0 = a_at(uvec4(0u, r.yzw)) >> 2;
    uint p0 = (B_OFF + r.y * B_NB(1) + r.z * B_NB(2) + r.w * B_NB(3)) >> 2;
    uint d0 = (D_OFF >> 2) + row * NE0;
    uint n = NE0;
    uint ns = P1;
    bool bad = false;
    for (uint i = 0u; i < n; i++) {
        uint w = a_w[a0 + i];
        bad = bad || isnan(uintBitsToFloat(w));
        d_w[d0 + i] = w;
    }
    for (uint s = 0u; s < 2u * ns; s++) bad = bad || isnan(uintBitsToFloat(b_w[p0 + s]));
    if (bad) {
        for (uint i = 0u; i < n; i++) d_w[d0 + i] = 0x7fc00000u;
        return;
    }
    for (uint s = 0u; s < ns; s++) {
        uint kind = (P0 >> (2u * s)) & 3u;
        float pa = uintBitsToFloat(b_w[p0 + 2u * s]);
        float pb = uintBitsToFloat(b_w[p0 + 2u * s + 1u]);
        // min_keep as a count: a fraction rounds down, below 1 keeps the first (0 and 1 alike).
        uint mk = uint(min(max(pb, 0.0), float(n) + 1.0));
        if (kind == 2u) {
            for (uint i = 0u; i < n; i++) {
                precise float q = uintBitsToFloat(d_w[d0 + i]) / pa;
                d_w[d0 + i] = floatBitsToUint(q);
            }
            continue;
        }
        uint kept = n;
        if (kind == 0u) {
            if (pa >= 1.0) continue;
            // llama.cpp's softmax in f32 (the sum in list order), then the running sum of the
            // probabilities in list order up to the first that reaches p with min_keep kept.
            float m = NEG_INF;
            for (uint i = 0u; i < n; i++) m = max(m, uintBitsToFloat(d_w[d0 + i]));
            precise float sum = 0.0;
            for (uint i = 0u; i < n; i++) {
                float v = uintBitsToFloat(d_w[d0 + i]);
                sum += v == NEG_INF ? 0.0 : exp(v - m);
            }
            precise float cum = 0.0;
            for (uint i = 0u; i < n; i++) {
                float v = uintBitsToFloat(d_w[d0 + i]);
                precise float q = (v == NEG_INF ? 0.0 : exp(v - m)) / sum;
                cum += q;
                if (cum >= pa && i + 1u >= mk) {
                    kept = i + 1u;
                    break;
                }
            }
        } else {
            // min-p: the threshold from the first entry; the first position at or past min_keep
            // below it ends the list.
            precise float thr = uintBitsToFloat(d_w[d0]) + pa;
            kept = 1u;
            while (kept < n) {
                if (uintBitsToFloat(d_w[d0 + kept]) < thr && kept >= mk) break;
                kept++;
            }
        }
        for (uint i = kept; i < n; i++) d_w[d0 + i] = floatBitsToUint(NEG_INF);
    }
}
