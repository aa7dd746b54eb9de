// random_sampled.glsl: the main of SpecVerifySampled, included by random.comp (CATEGORICAL and
// SAMPLED) after its Philox generator, fixed-point helpers and result_of; see random.comp's
// header for the algorithm. One workgroup per row.

#define MAXQ 512u
#define NONE 0xffffffffu

shared float sh_f[WG];
shared uint sh_u[WG];
shared uvec2 sh_q[WG];   // chunk sums of w, then their exclusive prefix
shared uvec2 sh_r[WG];   // chunk sums of the residual, then their exclusive prefix
shared uint sh_e[MAXQ];  // each pair's entry (NONE: none, or merged into an earlier pair)
shared uint sh_g[MAXQ];  // each pair's g_j, then (first pairs of an entry) their merged f_j
shared uvec2 sh_qw[MAXQ]; // qW of each first pair of an entry
shared uvec2 sh_t;
shared uvec2 sh_qwd;
shared uint sh_mode;     // 0: done, 1: draw over w, 2: draw over the residual

// (g w) >> 31 for a 64-bit w: the 96-bit product shifted (the caller keeps it below 2^64).
uvec2 mul_frac31(uint g, uvec2 w) {
    uint h0, l0, h1, l1;
    umulExtended(g, w.x, h0, l0);
    umulExtended(g, w.y, h1, l1);
    uint c;
    uint mid = uaddCarry(h0, l1, c);
    uint top = h1 + c;
    return uvec2((l0 >> 31) | (mid << 1), (mid >> 31) | (top << 1));
}

uvec2 min64(uvec2 a, uvec2 b) { return gt64(a, b) ? b : a; }

// The fixed-point weight of entry i.
uvec2 w_at(uint base, uint i, float thr, float a, float b) {
    float x = uintBitsToFloat(a_w[(base >> 2) + i]);
    return x >= thr ? fixed40(weight(x, a, b)) : uvec2(0u);
}

// The entry of token t: t itself on the vocabulary, the first entry holding t on a list (scanned
// by the calling invocation alone).
uint entry_of(uint t, uvec4 r) {
    if ((P1 & 2u) == 0u) return t < NE0 ? t : NONE;
    if (int(t) < 0) return NONE;
    uint cbase = c_at(uvec4(0u, r.yzw)) >> 2;
    for (uint i = 0u; i < NE0; i++) {
        if (c_w[cbase + i] == t) return i;
    }
    return NONE;
}

// The residual weight of entry i given its weight (the first pair located at i takes its qW off).
uvec2 residual_at(uint i, uvec2 w, uint m) {
    for (uint j = 0u; j < m; j++) {
        if (sh_e[j] == i) return sub64(w, min64(w, sh_qw[j]));
    }
    return w;
}

void main() {
    uint row = group_index();
    uint nrows = NE1 * NE2 * NE3;
    if (row >= nrows) return;
    uint l = gl_LocalInvocationID.x;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint base = a_at(uvec4(0u, r.yzw));
    uint out_ = (D_OFF >> 2) + row;
    uint m = P2;
    uint kb = (B_OFF >> 2) + row * 5u;
    uint qi_base = (B_OFF >> 2) + nrows * 5u + row * m;
    uint qp_base = (B_OFF >> 2) + nrows * (5u + m) + row * m;
    uint draft = b_w[kb + 4u];
    bool has_draft = int(draft) >= 0;

    // q: every weight finite and >= 0, and its maximum (only with a draft).
    if (has_draft) {
        float qm = 0.0;
        uint qbad = 0u;
        for (uint j = l; j < m; j += WG) {
            float p = uintBitsToFloat(b_w[qp_base + j]);
            if (isnan(p) || isinf(p) || p < 0.0) qbad = 1u; else qm = max(qm, p);
        }
        sh_f[l] = qm;
        sh_u[l] = qbad;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1u) {
            if (l < s) { sh_f[l] = max(sh_f[l], sh_f[l + s]); sh_u[l] |= sh_u[l + s]; }
            barrier();
        }
        bool bad_q = sh_u[0] != 0u || !(sh_f[0] > 0.0);
        float qmax = sh_f[0];
        barrier();
        if (bad_q) {
            if (l == 0u) d_w[out_] = NONE;
            return;
        }
        // g_j = floor(q_j / max 2^31), their exact total into sh_q[0], and each pair's entry.
        uvec2 gs = uvec2(0u);
        for (uint j = l; j < m; j += WG) {
            float p = uintBitsToFloat(b_w[qp_base + j]);
            uint g = uint(floor(min(p / qmax, 1.0) * 2147483648.0));
            sh_g[j] = g;
            gs = add64(gs, uvec2(g, 0u));
            sh_e[j] = entry_of(b_w[qi_base + j], r);
        }
        sh_q[l] = gs;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1u) {
            if (l < s) sh_q[l] = add64(sh_q[l], sh_q[l + s]);
            barrier();
        }
        uvec2 gt = sh_q[0];
        float gtf = float(gt.y) * 4294967296.0 + float(gt.x);
        barrier();
        // Merge: the first pair of each entry takes the shares of the later ones (f_j in 2^-31);
        // the others leave (NONE). f_j <= 2^31 (1 + m 2^-23) stays below 2^32.
        uint f[2];
        for (uint k = 0u; k < 2u; k++) {
            uint j = l + k * WG;
            f[k] = 0u;
            if (j >= m) continue;
            uint e = sh_e[j];
            if (e == NONE) continue;
            bool first = true;
            for (uint i = 0u; i < j && first; i++) first = sh_e[i] != e;
            if (!first) { f[k] = NONE; continue; }
            float share = 0.0;
            for (uint i = j; i < m; i++) {
                if (sh_e[i] == e) share += float(sh_g[i]) / gtf;
            }
            f[k] = uint(min(share * 2147483648.0, 4294967295.0));
        }
        barrier();
        for (uint k = 0u; k < 2u; k++) {
            uint j = l + k * WG;
            if (j < m) {
                if (f[k] == NONE) sh_e[j] = NONE;
                sh_g[j] = f[k];
            }
        }
        barrier();
    }

    // Pass 1: the maximum of the non-NaN entries, and whether a NaN or +inf occurs.
    float mx = NEG_INF;
    uint bad = 0u;
    for (uint i = l; i < NE0; i += WG) {
        float x = uintBitsToFloat(a_w[(base >> 2) + i]);
        if (isnan(x) || x == POS_INF) bad = 1u; else mx = max(mx, x);
    }
    sh_f[l] = mx;
    sh_u[l] = bad;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s) { sh_f[l] = max(sh_f[l], sh_f[l + s]); sh_u[l] |= sh_u[l + s]; }
        barrier();
    }
    mx = sh_f[0];
    bool row_bad = sh_u[0] != 0u;
    barrier();
    float sc = 1.0, off = NEG_INF;
    if ((P1 & 1u) != 0u) {
        sc = uintBitsToFloat(c_w[c_at(uvec4(0u, r.yzw)) >> 2]);
        off = uintBitsToFloat(c_w[c_at(uvec4(1u, r.yzw)) >> 2]);
    }
    if (row_bad || mx == NEG_INF || isnan(sc) || sc <= 0.0 || isnan(off)) {
        if (l == 0u) d_w[out_] = NONE;
        return;
    }
    if (sc == POS_INF) {
        // Zero temperature: the first index of the maximum.
        uint first = NONE;
        for (uint i = l; i < NE0 && first == NONE; i += WG) {
            if (uintBitsToFloat(a_w[(base >> 2) + i]) == mx) first = i;
        }
        sh_u[l] = first;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1u) {
            if (l < s) sh_u[l] = min(sh_u[l], sh_u[l + s]);
            barrier();
        }
        if (l == 0u) d_w[out_] = result_of(sh_u[0], r);
        return;
    }
    float thr = mx + off;
    float a = sc * 1.4426950408889634;
    float b = -mx * a;

    // The draft entry (NONE: none), found as the pairs are.
    uint e = NONE;
    if (has_draft) {
        if ((P1 & 2u) != 0u) {
            uint cbase = c_at(uvec4(0u, r.yzw)) >> 2;
            uint first = NONE;
            for (uint i = l; i < NE0 && first == NONE; i += WG) {
                if (c_w[cbase + i] == draft) first = i;
            }
            sh_u[l] = first;
            barrier();
            for (uint s = WG / 2u; s > 0u; s >>= 1u) {
                if (l < s) sh_u[l] = min(sh_u[l], sh_u[l + s]);
                barrier();
            }
            e = sh_u[0];
            barrier();
        } else if (draft < NE0) {
            e = draft;
        }
    }

    // Pass 2: each invocation's exact fixed-point sum over its contiguous chunk.
    uint chunk = (NE0 + WG - 1u) / WG;
    uint lo_i = min(l * chunk, NE0), hi_i = min(lo_i + chunk, NE0);
    uvec2 q = uvec2(0u);
    for (uint i = lo_i; i < hi_i; i++) q = add64(q, w_at(base, i, thr, a, b));
    sh_q[l] = q;
    barrier();
    if (l == 0u) {
        uvec2 run = uvec2(0u);
        for (uint i = 0u; i < WG; i++) run = add64(run, sh_q[i]);
        sh_t = run;
        sh_qwd = uvec2(0u);
    }
    barrier();
    uvec2 total = sh_t;
    uvec2 rq = q;
    if (has_draft) {
        // Each first pair's qW, q(d)'s, and this chunk's residual sum.
        for (uint j = l; j < m; j += WG) {
            if (sh_e[j] != NONE) {
                sh_qw[j] = mul_frac31(sh_g[j], total);
                if (sh_e[j] == e) sh_qwd = sh_qw[j];
            }
        }
        barrier();
        for (uint j = 0u; j < m; j++) {
            uint i = sh_e[j];
            if (i != NONE && i >= lo_i && i < hi_i) rq = sub64(rq, min64(w_at(base, i, thr, a, b), sh_qw[j]));
        }
    }
    sh_r[l] = rq;
    barrier();
    if (l == 0u) {
        // Exclusive prefixes of both chunk sums, the residual total, the decision and the target.
        uvec2 run = uvec2(0u), rrun = uvec2(0u);
        for (uint i = 0u; i < WG; i++) {
            uvec2 t = sh_q[i]; sh_q[i] = run; run = add64(run, t);
            uvec2 u = sh_r[i]; sh_r[i] = rrun; rrun = add64(rrun, u);
        }
        uvec4 k = uvec4(b_w[kb], b_w[kb + 1u], b_w[kb + 2u], b_w[kb + 3u]);
        uvec4 c = philox(uvec4(0u, P0, k.z, k.w), k.xy);
        uvec2 uu = uvec2(c.y, c.x);
        sh_mode = 1u;
        if (run == uvec2(0u)) {
            d_w[out_] = NONE; // no weight survived the cut
            sh_mode = 0u;
        } else if (has_draft) {
            uvec4 ca = philox(uvec4(0u, 3u, k.z, k.w), k.xy);
            if (e != NONE && gt64(w_at(base, e, thr, a, b), mulhi64(uvec2(ca.y, ca.x), sh_qwd))) {
                d_w[out_] = result_of(e, r);
                sh_mode = 0u;
            } else if (rrun != uvec2(0u)) {
                sh_mode = 2u;
            }
        }
        sh_t = mulhi64(uu, sh_mode == 2u ? rrun : run);
    }
    barrier();
    uint mode = sh_mode;
    if (mode == 0u) return;
    uvec2 target = sh_t;
    uvec2 start = mode == 2u ? sh_r[l] : sh_q[l];
    uvec2 mine = mode == 2u ? rq : q;
    uvec2 end = add64(start, mine);
    // The chunk whose [start, end) holds the target rescans: the first entry whose inclusive
    // running sum exceeds it.
    if (mine != uvec2(0u) && !gt64(start, target) && gt64(end, target)) {
        uvec2 cum = start;
        for (uint i = lo_i; i < hi_i; i++) {
            uvec2 w = w_at(base, i, thr, a, b);
            if (mode == 2u) w = residual_at(i, w, m);
            if (w != uvec2(0u)) {
                cum = add64(cum, w);
                if (gt64(cum, target)) { d_w[out_] = result_of(i, r); break; }
            }
        }
    }
}
