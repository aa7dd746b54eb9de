// random_segmented.glsl: Categorical (random.comp with CATEGORICAL and SEGMENTED) over rows longer
// than one segment of SEG entries, spread over many workgroups in four dispatches, so that a batch-1
// row does not run on one multiprocessor. Same result as the one-workgroup draw, bit for bit: the
// maximum is exact, each weight is computed by the same `precise` expression, and the fixed-point
// sums are integers, whose total does not depend on how they are grouped.
//
// Bindings as the one-workgroup draw (A logits, B keys, C params or ids, D the result) except where
// a pass says otherwise; P0 = stream, P1 = the source flags, P2 = pass + 4 S with S = segments per
// row. The scratch (words): entry (row, s) at 4 (row S + s): [max of the non-NaN entries, NaN or
// +inf seen, then the segment's sum lo / first index of the maximum, sum hi]; after the rows * S
// entries, a record per row: [code (0: the result is -1, 1: greedy, 2: draw), index or segment,
// target lo, target hi].
// Pass 0 (a workgroup per segment, D = scratch): the entry's maximum and flag.
// Pass 1 (a workgroup per segment, D = scratch): the row's maximum M from its entries; at zero
//   temperature the segment's first index of M, else its exact sum of the weights above the cut.
// Pass 2 (a workgroup per row, D = scratch): the row's code; for a draw the target T = high 64 bits
//   of U Q (Q the total) and the segment holding it, T made relative to the segment's start.
// Pass 3 (a workgroup per row, B = scratch): the result; a draw rescans its segment as the
//   one-workgroup draw rescans the row.

#define SEG 8192u

shared float sh_f[WG];
shared uint sh_u[WG];
shared uvec2 sh_q[WG];

// The row's maximum and bad flag from its S entries of the scratch at word `w` of `W`.
#define ROW_STATS(W, w, S, mx, bad) { \
    float m_ = NEG_INF; uint b_ = 0u; \
    for (uint s_ = gl_LocalInvocationID.x; s_ < (S); s_ += WG) { \
        m_ = max(m_, uintBitsToFloat(W[(w) + 4u * s_])); b_ |= W[(w) + 4u * s_ + 1u]; } \
    sh_f[gl_LocalInvocationID.x] = m_; sh_u[gl_LocalInvocationID.x] = b_; barrier(); \
    for (uint h_ = WG / 2u; h_ > 0u; h_ >>= 1u) { \
        if (gl_LocalInvocationID.x < h_) { \
            sh_f[gl_LocalInvocationID.x] = max(sh_f[gl_LocalInvocationID.x], sh_f[gl_LocalInvocationID.x + h_]); \
            sh_u[gl_LocalInvocationID.x] |= sh_u[gl_LocalInvocationID.x + h_]; } \
        barrier(); } \
    mx = sh_f[0]; bad = sh_u[0] != 0u; barrier(); }

// The draw's parameters (scale and cut offset) of row r.
void params_of(uvec4 r, out float sc, out float off) {
    sc = 1.0;
    off = NEG_INF;
    if ((P1 & 1u) != 0u) {
        sc = uintBitsToFloat(c_w[c_at(uvec4(0u, r.yzw)) >> 2]);
        off = uintBitsToFloat(c_w[c_at(uvec4(1u, r.yzw)) >> 2]);
    }
}

bool draw_invalid(bool bad, float mx, float sc, float off) {
    return bad || mx == NEG_INF || isnan(sc) || sc <= 0.0 || isnan(off);
}

void main() {
    uint pass_ = P2 & 3u, S = P2 >> 2;
    uint nrows = NE1 * NE2 * NE3;
    uint l = gl_LocalInvocationID.x;
    uint g = group_index();
    if (pass_ <= 1u) {
        uint row = g / S, seg = g % S;
        if (row >= nrows) return;
        uvec4 r = unravel(row * NE0, pc_ne());
        uint base = a_at(uvec4(0u, r.yzw)) >> 2;
        uint lo = seg * SEG, hi = min(NE0, lo + SEG);
        uint e = (D_OFF >> 2) + 4u * g;
        if (pass_ == 0u) {
            float m = NEG_INF;
            uint bad = 0u;
            for (uint i = lo + l; i < hi; i += WG) {
                float x = uintBitsToFloat(a_w[base + i]);
                if (isnan(x) || x == POS_INF) bad = 1u; else m = max(m, x);
            }
            sh_f[l] = m;
            sh_u[l] = bad;
            barrier();
            for (uint h = WG / 2u; h > 0u; h >>= 1u) {
                if (l < h) { sh_f[l] = max(sh_f[l], sh_f[l + h]); sh_u[l] |= sh_u[l + h]; }
                barrier();
            }
            if (l == 0u) { d_w[e] = floatBitsToUint(sh_f[0]); d_w[e + 1u] = sh_u[0]; }
            return;
        }
        float mx;
        bool bad;
        ROW_STATS(d_w, (D_OFF >> 2) + 4u * row * S, S, mx, bad);
        float sc, off;
        params_of(r, sc, off);
        if (draw_invalid(bad, mx, sc, off)) return;
        if (sc == POS_INF) {
            uint first = 0xffffffffu;
            for (uint i = lo + l; i < hi && first == 0xffffffffu; i += WG) {
                if (uintBitsToFloat(a_w[base + i]) == mx) first = i;
            }
            sh_u[l] = first;
            barrier();
            for (uint h = WG / 2u; h > 0u; h >>= 1u) {
                if (l < h) sh_u[l] = min(sh_u[l], sh_u[l + h]);
                barrier();
            }
            if (l == 0u) { d_w[e + 2u] = sh_u[0]; d_w[e + 3u] = 0u; }
            return;
        }
        float thr = mx + off, a = sc * 1.4426950408889634, b = -mx * a;
        uvec2 q = uvec2(0u);
        for (uint i = lo + l; i < hi; i += WG) {
            float x = uintBitsToFloat(a_w[base + i]);
            if (x >= thr) q = add64(q, fixed40(weight(x, a, b)));
        }
        // An exact tree sum (integers: the grouping does not change the total).
        sh_q[l] = q;
        barrier();
        for (uint h = WG / 2u; h > 0u; h >>= 1u) {
            if (l < h) sh_q[l] = add64(sh_q[l], sh_q[l + h]);
            barrier();
        }
        if (l == 0u) { d_w[e + 2u] = sh_q[0].x; d_w[e + 3u] = sh_q[0].y; }
        return;
    }
    uint row = g;
    if (row >= nrows) return;
    uvec4 r = unravel(row * NE0, pc_ne());
    float sc, off;
    params_of(r, sc, off);
    if (pass_ == 2u) {
        uint w = (D_OFF >> 2) + 4u * row * S;
        float mx;
        bool bad;
        ROW_STATS(d_w, w, S, mx, bad);
        if (l != 0u) return;
        uint rec = (D_OFF >> 2) + 4u * (nrows * S + row);
        if (draw_invalid(bad, mx, sc, off)) { d_w[rec] = 0u; return; }
        if (sc == POS_INF) {
            uint first = 0xffffffffu;
            for (uint s = 0u; s < S; s++) first = min(first, d_w[w + 4u * s + 2u]);
            d_w[rec] = 1u;
            d_w[rec + 1u] = first;
            return;
        }
        uvec2 total = uvec2(0u);
        for (uint s = 0u; s < S; s++) total = add64(total, uvec2(d_w[w + 4u * s + 2u], d_w[w + 4u * s + 3u]));
        if (total == uvec2(0u)) { d_w[rec] = 0u; return; } // no weight survived the cut
        uvec4 k = uvec4(b_w[b_at(uvec4(0u, r.yzw)) >> 2], b_w[b_at(uvec4(1u, r.yzw)) >> 2],
                        b_w[b_at(uvec4(2u, r.yzw)) >> 2], b_w[b_at(uvec4(3u, r.yzw)) >> 2]);
        uvec4 c = philox(uvec4(0u, P0, k.z, k.w), k.xy);
        uvec2 target = mulhi64(uvec2(c.y, c.x), total);
        // The segment whose [start, end) holds the target (T < Q, so there is one).
        uvec2 start = uvec2(0u);
        for (uint s = 0u; s < S; s++) {
            uvec2 end = add64(start, uvec2(d_w[w + 4u * s + 2u], d_w[w + 4u * s + 3u]));
            if (gt64(end, target)) {
                uvec2 t = sub64(target, start);
                d_w[rec] = 2u;
                d_w[rec + 1u] = s;
                d_w[rec + 2u] = t.x;
                d_w[rec + 3u] = t.y;
                return;
            }
            start = end;
        }
        return;
    }
    // Pass 3: B = scratch (B_OFF 0).
    uint out_ = (D_OFF >> 2) + row;
    uint rec = 4u * (nrows * S + row);
    uint code = b_w[rec];
    if (code == 0u) { if (l == 0u) d_w[out_] = 0xffffffffu; return; }
    if (code == 1u) { if (l == 0u) d_w[out_] = result_of(b_w[rec + 1u], r); return; }
    float mx;
    bool bad;
    ROW_STATS(b_w, 4u * row * S, S, mx, bad);
    uint seg = b_w[rec + 1u];
    uvec2 target = uvec2(b_w[rec + 2u], b_w[rec + 3u]);
    float thr = mx + off, a = sc * 1.4426950408889634, b = -mx * a;
    uint base = a_at(uvec4(0u, r.yzw)) >> 2;
    uint lo = seg * SEG, hi = min(NE0, lo + SEG);
    uint chunk = (hi - lo + WG - 1u) / WG;
    uint lo_i = min(lo + l * chunk, hi), hi_i = min(lo_i + chunk, hi);
    uvec2 q = uvec2(0u);
    for (uint i = lo_i; i < hi_i; i++) {
        float x = uintBitsToFloat(a_w[base + i]);
        if (x >= thr) q = add64(q, fixed40(weight(x, a, b)));
    }
    sh_q[l] = q;
    barrier();
    if (l == 0u) {
        uvec2 run = uvec2(0u);
        for (uint i = 0u; i < WG; i++) { uvec2 t = sh_q[i]; sh_q[i] = run; run = add64(run, t); }
    }
    barrier();
    uvec2 start = sh_q[l];
    uvec2 end = add64(start, q);
    if (q != uvec2(0u) && !gt64(start, target) && gt64(end, target)) {
        uvec2 cum = start;
        for (uint i = lo_i; i < hi_i; i++) {
            float x = uintBitsToFloat(a_w[base + i]);
            if (x >= thr) {
                cum = add64(cum, fixed40(weight(x, a, b)));
                if (gt64(cum, target)) { d_w[out_] = result_of(i, r); break; }
            }
        }
    }
}
