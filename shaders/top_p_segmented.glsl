// top_p_segmented.glsl: sort.comp's top-p mask (TopPMask) over many workgroups, for rows longer
// than a segment (TOPP_SEG): the same nucleus, bit for bit, as the one-workgroup TOP_P_PASS (see
// sort.comp's header: weights q_i = floor(exp((x_i - M) / t) 2^40), total Q, target T = floor(p Q),
// K_m the largest key whose tail sum reaches T, K_c the largest key with max(min_keep, 1) entries
// at or above it, ties at the chosen key kept in index order). Instead of 32 bisection passes over
// the row on one workgroup, both keys are found by a radix select from the top digit down: four
// levels of 8 bits, each a histogram pass over segments of P0 entries (many workgroups; per bin the
// count and 64-bit weight sum of the entries under K_m's prefix, and the count under K_c's) and a
// select pass (one workgroup per row) that sums the segments' bins and picks the bin where the
// descending running mass reaches what is still wanted. What the select subtracts on the way is
// exactly the mass and count strictly above the final key, which the one-workgroup pass sums again.
//
// P2 = stage: 0 the segments' maxima, 1 the row's parameters and state, 2 a level's histograms
// (P1 = level), 3 a level's selection (P1 = level; level 3 also decides the cut), 4 the segments'
// counts of entries at the cut key, 5 the mask. Bindings: A the values (f32, rows contiguous),
// B the params f32 [3, rows..] (t, p, min_keep), C the scratch, D the result (contiguous). C words
// from C_OFF: 16 of state per row, then from C_NE(1) 2 per (row, segment) (maximum, bad), from
// C_NE(2) 1028 per (row, segment) (histograms: counts under K_m, weight sums low and high words,
// counts under K_c, then the segment's weight total), from C_NE(3) 1 per (row, segment) (ties);
// C_NE(0) = segments per row.

#include "fixed64.glsl"

// State words of a row.
#define S_MODE 0u    // 0 cut the nucleus, 1 pass x / t through, 2 all NaN (bad parameters)
#define S_A 1u       // the weight's scale and offset (f32 bits)
#define S_B 2u
#define S_RM 3u      // mass still wanted under K_m's prefix (2 words)
#define S_PM 5u      // K_m's prefix
#define S_MASK 6u    // the bits the prefixes fix
#define S_AM 7u      // entries above K_m's prefix region
#define S_RC 8u      // entries still wanted under K_c's prefix
#define S_PC 9u      // K_c's prefix
#define S_T 10u      // the target T (2 words)
#define S_KEY 12u    // the cut: key, ties to keep
#define S_TIES 13u
#define S_NEED 14u

shared uint h_cm[256];
shared uint h_lo[256];
shared uint h_hi[256];
shared uint h_cc[256];
shared uint sg_u[WG];
shared float sg_f[WG];
shared uvec2 sg_q[WG];

uint tp_state(uint row) { return (C_OFF >> 2) + row * 16u; }
uint tp_segs() { return C_NE(0); }
uint tp_seg_word(uint row, uint seg) { return (C_OFF >> 2) + C_NE(1) + (row * tp_segs() + seg) * 2u; }
uint tp_part_word(uint row, uint seg) { return (C_OFF >> 2) + C_NE(2) + (row * tp_segs() + seg) * 1028u; }
uint tp_tie_word(uint row, uint seg) { return (C_OFF >> 2) + C_NE(3) + row * tp_segs() + seg; }

// The float whose up_key is k (not NaN's key).
float key_value(uint k) {
    return uintBitsToFloat((k & 0x80000000u) != 0u ? (k & 0x7fffffffu) : ~k);
}

float tp_param(uvec4 r, uint i) { return uintBitsToFloat(b_w[b_at(uvec4(i, r.yzw)) >> 2]); }

void main() {
    uint stage = P2, level = P1, l = gl_LocalInvocationID.x;
    bool per_segment = stage == 0u || stage == 2u || stage == 4u || stage == 5u;
    uint row = per_segment ? gl_WorkGroupID.y : group_index();
    uint seg = per_segment ? gl_WorkGroupID.x : 0u;
    if (row >= NE1 * NE2 * NE3) return;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint base = a_at(uvec4(0u, r.yzw)) >> 2;
    uint lo_i = min(seg * P0, NE0), hi_i = min(lo_i + P0, NE0);
    uint st = tp_state(row);

    if (stage == 0u) {
        // The segment's maximum of the entries that are neither NaN nor +inf, and whether one is.
        float m = NEG_INF;
        uint bad = 0u;
        for (uint i = lo_i + l; i < hi_i; i += WG) {
            float x = uintBitsToFloat(a_w[base + i]);
            if (isnan(x) || x == POS_INF) bad = 1u; else m = max(m, x);
        }
        sg_f[l] = m;
        sg_u[l] = bad;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1u) {
            if (l < s) { sg_f[l] = max(sg_f[l], sg_f[l + s]); sg_u[l] |= sg_u[l + s]; }
            barrier();
        }
        if (l == 0u) {
            uint w = tp_seg_word(row, seg);
            c_w[w] = floatBitsToUint(sg_f[0]);
            c_w[w + 1u] = sg_u[0];
        }
        return;
    }

    if (stage == 1u) {
        if (l != 0u) return;
        float t = tp_param(r, 0u), p = tp_param(r, 1u), mk = tp_param(r, 2u);
        uint mode = 0u;
        float mx = NEG_INF;
        bool bad = false;
        if (!(t > 0.0 && t < POS_INF) || isnan(p) || isnan(mk) || mk < 0.0) {
            mode = 2u;
        } else {
            for (uint s = 0u; s < tp_segs(); s++) {
                uint w = tp_seg_word(row, s);
                mx = max(mx, uintBitsToFloat(c_w[w]));
                bad = bad || c_w[w + 1u] != 0u;
            }
            if (p >= 1.0 || bad || mx == NEG_INF) mode = 1u;
        }
        float a = (1.0 / t) * 1.4426950408889634;
        float b = -mx * a;
        c_w[st + S_MODE] = mode;
        c_w[st + S_A] = floatBitsToUint(a);
        c_w[st + S_B] = floatBitsToUint(b);
        c_w[st + S_PM] = 0u;
        c_w[st + S_MASK] = 0u;
        c_w[st + S_AM] = 0u;
        uint need = mode == 0u ? uint(min(max(mk, 1.0), float(NE0))) : 1u;
        c_w[st + S_RC] = need;
        c_w[st + S_PC] = 0u;
        c_w[st + S_NEED] = need;
        return;
    }

    uint mode = c_w[st + S_MODE];
    float t = tp_param(r, 0u);

    if (stage == 2u) {
        if (mode != 0u) return;
        float a = uintBitsToFloat(c_w[st + S_A]), b = uintBitsToFloat(c_w[st + S_B]);
        uint pfx_m = c_w[st + S_PM], pfx_c = c_w[st + S_PC], mask = c_w[st + S_MASK];
        uint shift = 24u - 8u * level;
        for (uint i = l; i < 256u; i += WG) { h_cm[i] = 0u; h_lo[i] = 0u; h_hi[i] = 0u; h_cc[i] = 0u; }
        barrier();
        uvec2 total = uvec2(0u);
        for (uint i = lo_i + l; i < hi_i; i += WG) {
            float x = uintBitsToFloat(a_w[base + i]);
            uint k = up_key(x);
            uint d = (k >> shift) & 255u;
            bool in_m = (k & mask) == pfx_m;
            uvec2 q = uvec2(0u);
            if (in_m || level == 0u) q = fixed40(weight(x, a, b));
            if (level == 0u) total = add64(total, q);
            if (in_m) {
                atomicAdd(h_cm[d], 1u);
                if (q != uvec2(0u)) {
                    uint old = atomicAdd(h_lo[d], q.x);
                    uint carry;
                    uaddCarry(old, q.x, carry);
                    atomicAdd(h_hi[d], q.y + carry);
                }
            }
            if ((k & mask) == pfx_c) atomicAdd(h_cc[d], 1u);
        }
        sg_q[l] = total;
        barrier();
        uint w = tp_part_word(row, seg);
        for (uint i = l; i < 256u; i += WG) {
            c_w[w + i] = h_cm[i];
            c_w[w + 256u + i] = h_lo[i];
            c_w[w + 512u + i] = h_hi[i];
            c_w[w + 768u + i] = h_cc[i];
        }
        if (level == 0u) {
            for (uint s = WG / 2u; s > 0u; s >>= 1u) {
                if (l < s) sg_q[l] = add64(sg_q[l], sg_q[l + s]);
                barrier();
            }
            if (l == 0u) { c_w[w + 1024u] = sg_q[0].x; c_w[w + 1025u] = sg_q[0].y; }
        }
        return;
    }

    if (stage == 3u) {
        if (mode != 0u) return;
        // Every segment's bins, summed (64-bit weights).
        for (uint i = l; i < 256u; i += WG) {
            uint cm = 0u, cc = 0u;
            uvec2 m = uvec2(0u);
            for (uint s = 0u; s < tp_segs(); s++) {
                uint w = tp_part_word(row, s);
                cm += c_w[w + i];
                m = add64(m, uvec2(c_w[w + 256u + i], c_w[w + 512u + i]));
                cc += c_w[w + 768u + i];
            }
            h_cm[i] = cm;
            h_lo[i] = m.x;
            h_hi[i] = m.y;
            h_cc[i] = cc;
        }
        barrier();
        if (l != 0u) return;
        uint shift = 24u - 8u * level;
        uvec2 rm, target;
        if (level == 0u) {
            // The total Q and the target T = floor(p Q) (p as a 64-bit fraction, exactly).
            uvec2 q = uvec2(0u);
            for (uint s = 0u; s < tp_segs(); s++) {
                uint w = tp_part_word(row, s);
                q = add64(q, uvec2(c_w[w + 1024u], c_w[w + 1025u]));
            }
            float pcl = max(tp_param(r, 1u), 0.0);
            float phi = floor(pcl * 4294967296.0);
            uvec2 pfix = uvec2(uint(pcl * 18446744073709551616.0 - phi * 4294967296.0), uint(phi));
            target = mulhi64(pfix, q);
            rm = target;
            c_w[st + S_T] = target.x;
            c_w[st + S_T + 1u] = target.y;
        } else {
            target = uvec2(c_w[st + S_T], c_w[st + S_T + 1u]);
            rm = uvec2(c_w[st + S_RM], c_w[st + S_RM + 1u]);
        }
        // K_m: from the top bin down, the first whose mass brings the running mass to what is wanted.
        uvec2 cum = uvec2(0u);
        uint above = 0u, bm = 0u;
        for (int bi = 255; bi >= 0; bi--) {
            uint b = uint(bi);
            uvec2 m = uvec2(h_lo[b], h_hi[b]);
            if (!gt64(rm, add64(cum, m)) || b == 0u) { bm = b; break; }
            cum = add64(cum, m);
            above += h_cm[b];
        }
        rm = sub64(rm, cum);
        uint pfx_m = c_w[st + S_PM] | (bm << shift);
        uint am = c_w[st + S_AM] + above;
        // K_c: likewise over the counts under its prefix.
        uint rc = c_w[st + S_RC], cumc = 0u, bc = 0u;
        for (int bi = 255; bi >= 0; bi--) {
            uint b = uint(bi);
            if (cumc + h_cc[b] >= rc || b == 0u) { bc = b; break; }
            cumc += h_cc[b];
        }
        rc -= cumc;
        uint pfx_c = c_w[st + S_PC] | (bc << shift);
        c_w[st + S_RM] = rm.x;
        c_w[st + S_RM + 1u] = rm.y;
        c_w[st + S_PM] = pfx_m;
        c_w[st + S_AM] = am;
        c_w[st + S_RC] = rc;
        c_w[st + S_PC] = pfx_c;
        c_w[st + S_MASK] = c_w[st + S_MASK] | (255u << shift);
        if (level == 3u) {
            // The mass above K_m is T minus what is still wanted; the ties at K_m the mass needs:
            // the smallest c with above + c q >= T (none when T is reached already).
            uvec2 aq = sub64(target, rm);
            uint c_m = 0u;
            if (gt64(target, aq)) {
                float a = uintBitsToFloat(c_w[st + S_A]), b = uintBitsToFloat(c_w[st + S_B]);
                uvec2 tq = fixed40(weight(key_value(pfx_m), a, b));
                if (tq != uvec2(0u)) {
                    uint lo = 0u, hi = NE0;
                    while (lo < hi) {
                        uint mid = lo + ((hi - lo) >> 1);
                        if (!gt64(target, add64(aq, mul64(mid, tq)))) hi = mid; else lo = mid + 1u;
                    }
                    c_m = lo;
                }
            }
            uint need = c_w[st + S_NEED];
            bool by_mass = am + c_m >= need;
            c_w[st + S_KEY] = by_mass ? pfx_m : pfx_c;
            c_w[st + S_TIES] = by_mass ? c_m : rc;
        }
        return;
    }

    uint key = c_w[st + S_KEY], ties = c_w[st + S_TIES];

    if (stage == 4u) {
        if (mode != 0u) return;
        uint n = 0u;
        for (uint i = lo_i + l; i < hi_i; i += WG) n += up_key(uintBitsToFloat(a_w[base + i])) == key ? 1u : 0u;
        sg_u[l] = n;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1u) {
            if (l < s) sg_u[l] += sg_u[l + s];
            barrier();
        }
        if (l == 0u) c_w[tp_tie_word(row, seg)] = sg_u[0];
        return;
    }

    // Stage 5: the mask, contiguous chunks per invocation so the ties keep their index order.
    uint out_ = (D_OFF >> 2) + row * NE0;
    if (mode != 0u) {
        for (uint i = lo_i + l; i < hi_i; i += WG) {
            d_w[out_ + i] = mode == 2u ? 0x7fc00000u : floatBitsToUint(uintBitsToFloat(a_w[base + i]) / t);
        }
        return;
    }
    uint before = 0u;
    for (uint s = 0u; s < seg; s++) before += c_w[tp_tie_word(row, s)];
    uint chunk = (hi_i - lo_i + WG - 1u) / WG;
    uint c_lo = min(lo_i + l * chunk, hi_i), c_hi = min(c_lo + chunk, hi_i);
    uint mine = 0u;
    for (uint i = c_lo; i < c_hi; i++) if (up_key(uintBitsToFloat(a_w[base + i])) == key) mine += 1u;
    sg_u[l] = mine;
    barrier();
    if (l == 0u) {
        uint run = before;
        for (uint i = 0u; i < WG; i++) { uint c = sg_u[i]; sg_u[i] = run; run += c; }
    }
    barrier();
    uint rank = sg_u[l];
    for (uint i = c_lo; i < c_hi; i++) {
        float x = uintBitsToFloat(a_w[base + i]);
        uint k = up_key(x);
        bool keep = k > key;
        if (k == key) { keep = rank < ties; rank += 1u; }
        d_w[out_ + i] = floatBitsToUint(keep ? x / t : NEG_INF);
    }
}
