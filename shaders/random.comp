#version 450
// random.comp: RandomUniform and (with CATEGORICAL) Categorical, both on the Philox4x32-10 generator
// bit-identical to `graph::philox` (umulExtended for the 64-bit products).
//
// RandomUniform: NE = result shape [n, rows..]; A = keys i32 [4, rows..] (seed lo, seed hi, step lo,
// step hi); P0 = stream; D contiguous f32.
//
// Categorical: one workgroup per row. NE = logits shape [n, rows..]; A = logits f32 (rows
// contiguous); B = keys i32 [4, rows..]; C = params f32 [2, rows..] (scale s, threshold offset off)
// when P1 bit 0 is set (else s = 1, off = -inf), or with P1 bit 1 the token ids i32 [n, rows..] of
// the entries (rows contiguous; the result is then the chosen entry's id, not its index); P0 =
// stream; D contiguous i32 [1, rows..].
// Pass 1: the row maximum M and whether a NaN or +inf occurs (then -1). s = +inf: the first index
// of M. Otherwise weights w_i = exp2((x_i - M) s log2 e) where x_i >= M + off (else 0) as 64-bit
// fixed point q_i = floor(w_i 2^40) (w_i <= 1; rows up to 2^23 entries cannot overflow), summed
// exactly per invocation over a contiguous chunk and prefixed across the workgroup; the target is
// the high 64 bits of U * Q for the 64-bit uniform U (the generator's first two words) and the total
// Q, and the result is the first index whose inclusive running sum exceeds it. Integer sums make the
// choice exact for the fixed-point weights (T < Q always, so some index is chosen). Against the
// CPU's f64 sums of its own exponential it can differ only where u W falls near a bracket end: within
// the exponentials' last bits (builtin exp2 here, the CPU's polynomial there: about 1e-7 of a weight)
// plus the floors, each under 2^-40 of the maximum weight (a running sum and the total lose under
// n 2^-40 together, and W >= 1). A weight below 2^-40 of the maximum is never drawn.
//
// SpecVerify (CATEGORICAL and VERIFY): B = keys i32 [5, rows..], the fifth word the draft token d;
// C = params (P1 bit 0) or, with P1 bit 1, the token ids i32 [n, rows..] of the entries. The draft
// entry e is d itself (d < n) or the first entry whose id is d. Its fixed-point weight q_e is left
// out of the chunk sums, so they total Q' = Q - q_e: e is the result when the high 64 bits of
// A (Q' + q_e) are below q_e (A the 64-bit uniform of the SPECULATIVE stream, 3), else the draw with
// target T = high 64 bits of U Q' over the entries without e (e itself when Q' = 0). Without a
// draft entry it is exactly the categorical draw. With the ids the result is e's or the drawn
// entry's id.
//
// SpecVerifySampled (CATEGORICAL and SAMPLED, main in random_sampled.glsl): a draft token d drawn
// from a distribution q of P2 = m (token id, weight) pairs per row. B = a scratch the host filled
// with three contiguous blocks: the keys i32 [5, rows], the q ids i32 [m, rows], the q weights
// f32 [m, rows]; C and P1 as for SpecVerify. d < 0: exactly the categorical draw. Otherwise q is
// checked first (a weight NaN, infinite or negative, or all zero: -1), then the row as
// categorical's (bad: -1; s = +inf: the first maximum). The weights w_i and their total W are
// categorical's fixed point. q is made exact too: g_j = floor(q_j / max q 2^31), summed exactly
// (G); each pair's share of W is qW_j = (f_j W) >> 31 with f_j = g_j / G 2^31 in f32 (about 2e-7
// of qW_j off). Pairs are located as the draft is (an id past the vocabulary, not in the list,
// or -1 has no entry) and pairs of one entry merged into its first. The draft entry e is
// accepted when the high 64 bits of A qW(d) are below w_e; else the draw with T = high 64 bits of
// U R over the residual r_i = w_i - min(w_i, qW(i)) (R its exact total), or over w where R = 0
// (q covers p). Chunk sums and the rescan compute r_i from the same bits, so some entry is always
// chosen. At most 512 pairs a row (the host checks; longer ones run on another backend).
//
// CategoricalSeg (CATEGORICAL and SEGMENTED, main in random_segmented.glsl): Categorical over rows
// longer than 8192 entries in four dispatches over many workgroups, with the same result.
#include "common.glsl"

uvec4 philox(uvec4 c, uvec2 key) {
    for (uint round_ = 0u; round_ < 10u; round_++) {
        if (round_ > 0u) key += uvec2(0x9E3779B9u, 0xBB67AE85u);
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ key.x, lo1, hi0 ^ c.w ^ key.y, lo0);
    }
    return c;
}

#ifndef CATEGORICAL

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    uvec4 i = unravel(idx, pc_ne());
    uint kb = a_at(uvec4(0u, i.yzw)) >> 2;
    uvec4 c = philox(uvec4(i.x, P0, a_w[kb + 2u], a_w[kb + 3u]), uvec2(a_w[kb], a_w[kb + 1u]));
    d_w[(D_OFF >> 2) + idx] = floatBitsToUint(float(c.x >> 8) * (1.0 / 16777216.0));
}

#else

#include "fixed64.glsl"

// The result for the chosen entry i: i, or with an ids source (P1 bit 1) the entry's token id.
uint result_of(uint i, uvec4 r) {
    return (P1 & 2u) != 0u ? c_w[(c_at(uvec4(0u, r.yzw)) >> 2) + i] : i;
}

#ifdef SAMPLED
#include "random_sampled.glsl"
#elif defined(SEGMENTED)
#include "random_segmented.glsl"
#else

shared float sh_f[WG];
shared uint sh_u[WG];
shared uvec2 sh_q[WG];
shared uvec2 sh_t;
#ifdef VERIFY
shared uvec2 sh_qe;
shared uint sh_done;
#endif

void main() {
    uint row = group_index();
    uint nrows = NE1 * NE2 * NE3;
    if (row >= nrows) return;
    uint l = gl_LocalInvocationID.x;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint base = a_at(uvec4(0u, r.yzw));
    uint out_ = (D_OFF >> 2) + row;

    // Pass 1: the maximum of the non-NaN entries, and whether a NaN or +inf occurs.
    float m = NEG_INF;
    uint bad = 0u;
    for (uint i = l; i < NE0; i += WG) {
        float x = uintBitsToFloat(a_w[(base >> 2) + i]);
        if (isnan(x) || x == POS_INF) bad = 1u; else m = max(m, x);
    }
    sh_f[l] = m;
    sh_u[l] = bad;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s) { sh_f[l] = max(sh_f[l], sh_f[l + s]); sh_u[l] |= sh_u[l + s]; }
        barrier();
    }
    float mx = sh_f[0];
    bool row_bad = sh_u[0] != 0u;
    barrier();
    float sc = 1.0, off = NEG_INF;
    if ((P1 & 1u) != 0u) {
        sc = uintBitsToFloat(c_w[c_at(uvec4(0u, r.yzw)) >> 2]);
        off = uintBitsToFloat(c_w[c_at(uvec4(1u, r.yzw)) >> 2]);
    }
    if (row_bad || mx == NEG_INF || isnan(sc) || sc <= 0.0 || isnan(off)) {
        if (l == 0u) d_w[out_] = 0xffffffffu;
        return;
    }
    if (sc == POS_INF) {
        // Zero temperature: the first index of the maximum.
        uint first = 0xffffffffu;
        for (uint i = l; i < NE0 && first == 0xffffffffu; i += WG) {
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

#ifdef VERIFY
    // The draft entry (0xffffffff: none).
    uint draft = b_w[b_at(uvec4(4u, r.yzw)) >> 2];
    uint e = 0xffffffffu;
    if ((P1 & 2u) != 0u) {
        if (int(draft) >= 0) {
            uint cbase = c_at(uvec4(0u, r.yzw)) >> 2;
            uint first = 0xffffffffu;
            for (uint i = l; i < NE0 && first == 0xffffffffu; i += WG) {
                if (c_w[cbase + i] == draft) first = i;
            }
            sh_u[l] = first;
            barrier();
            for (uint s = WG / 2u; s > 0u; s >>= 1u) {
                if (l < s) sh_u[l] = min(sh_u[l], sh_u[l + s]);
                barrier();
            }
            e = sh_u[0];
        }
    } else if (draft < NE0) {
        e = draft;
    }
    if (l == 0u) { sh_qe = uvec2(0u); sh_done = 0u; }
    barrier();
#endif

    // Pass 2: each invocation's exact fixed-point sum over its contiguous chunk.
    uint chunk = (NE0 + WG - 1u) / WG;
    uint lo_i = min(l * chunk, NE0), hi_i = min(lo_i + chunk, NE0);
    uvec2 q = uvec2(0u);
    for (uint i = lo_i; i < hi_i; i++) {
        float x = uintBitsToFloat(a_w[(base >> 2) + i]);
#ifdef VERIFY
        if (i == e) {
            if (x >= thr) sh_qe = fixed40(weight(x, a, b));
            continue;
        }
#endif
        if (x >= thr) q = add64(q, fixed40(weight(x, a, b)));
    }
    sh_q[l] = q;
    barrier();
    if (l == 0u) {
        // Exclusive prefix of the chunk sums (in place), the total, and the target.
        uvec2 run = uvec2(0u);
        for (uint i = 0u; i < WG; i++) { uvec2 t = sh_q[i]; sh_q[i] = run; run = add64(run, t); }
        uvec4 k = uvec4(b_w[b_at(uvec4(0u, r.yzw)) >> 2], b_w[b_at(uvec4(1u, r.yzw)) >> 2],
                        b_w[b_at(uvec4(2u, r.yzw)) >> 2], b_w[b_at(uvec4(3u, r.yzw)) >> 2]);
        uvec4 c = philox(uvec4(0u, P0, k.z, k.w), k.xy);
        sh_t = mulhi64(uvec2(c.y, c.x), run);
#ifdef VERIFY
        if (e != 0xffffffffu) {
            // Accept the draft entry when A (Q' + q_e) < q_e; with nothing else weighing, it is
            // the result whatever A.
            uvec4 ca = philox(uvec4(0u, 3u, k.z, k.w), k.xy);
            uvec2 qe = sh_qe;
            if (gt64(qe, mulhi64(uvec2(ca.y, ca.x), add64(run, qe))) || (run == uvec2(0u) && qe != uvec2(0u))) {
                d_w[out_] = result_of(e, r);
                sh_done = 1u;
            }
        }
        if (sh_done == 0u && run == uvec2(0u)) d_w[out_] = 0xffffffffu; // no weight survived the cut
#else
        if (run == uvec2(0u)) d_w[out_] = 0xffffffffu; // no weight survived the cut
#endif
    }
    barrier();
#ifdef VERIFY
    if (sh_done != 0u) return;
#endif
    uvec2 target = sh_t;
    uvec2 start = sh_q[l];
    uvec2 end = add64(start, q);
    // The chunk whose [start, end) holds the target rescans: the first index whose inclusive
    // running sum exceeds the target.
    if (q != uvec2(0u) && !gt64(start, target) && gt64(end, target)) {
        uvec2 cum = start;
        for (uint i = lo_i; i < hi_i; i++) {
            float x = uintBitsToFloat(a_w[(base >> 2) + i]);
#ifdef VERIFY
            if (i == e) continue;
#endif
            if (x >= thr) {
                cum = add64(cum, fixed40(weight(x, a, b)));
                if (gt64(cum, target)) { d_w[out_] = result_of(i, r); break; }
            }
        }
    }
}

#endif // SAMPLED, SEGMENTED

#endif
