#version 450
// sort.comp: Argsort and TopK as a bounded number of passes, without a full sort of the row in one
// workgroup and without inter-workgroup barriers.
//
// Every entry is a (key, index) pair, ordered by key then index (keys are distinct after the index
// tie-break), where the key is the float's order-preserving bit pattern (complemented for descending
// order). Pass 1 (BLOCK_PASS) sorts each block of BLOCK entries of a row in shared memory (bitonic)
// and keeps its first R_out = min(BLOCK, k) indices. Each later pass (MERGE_PASS) merges pairs of
// sorted runs: an entry's place in the merged run is its position in its own run plus the number of
// entries of the sibling run that order before it (a binary search), and only places below
// R_out = min(2 R_in, k) are written. The pass that leaves one run per row writes the i32 result D.
//
// Bindings: A the source values (NE its shape, rows contiguous), B the scratch read by a merge pass,
// C the scratch written, D the result [k, rows]. Push: P0 = k, P1 = flags (bit 0 descending, bit 1
// final), B_OFF/B_NE(0) = input scratch byte offset / row stride in words, B_NE(1) = R_in,
// B_NE(2) = source entries spanned by one input run, C_OFF/C_NE(0)/C_NE(1) = output scratch offset /
// row stride / R_out.
//
// KEY64 (with BLOCK_PASS or MERGE_PASS): rows of f64 values as word pairs, ordered by the f64's
// 64-bit order key (see key_of below).
//
// TopK with k <= 512 on longer rows (at least k blocks) selects by block minima: BMIN_PASS writes
// each block's smallest key (P2 entries a block; many workgroups), THRESH_PASS (one workgroup per
// row) takes T, the k-th smallest block minimum, by a radix select in shared memory, lists the
// blocks below T (fewer than k: they hold every entry below T) and those at or below T (they hold
// every entry equal to T), and keeps every entry below the cut and the first ties at it in index
// order (the cut is T, or, when the blocks below T hold k entries or more, the k-th key among them
// by a second radix select), then sorts the k winners.
//
// TopK with k <= BLOCK otherwise selects: four HIST_PASSes find the k-th smallest key
// exactly, one radix digit (8 bits) at a time, with a shared-memory histogram per row (state: the
// key prefix, its mask and how many entries equal to the final key to keep, 4 words per row in B);
// COMPACT_PASS writes, in index order, the entries below that key and the first ones equal to it
// (exactly k) to C; the BLOCK_PASS then sorts those k candidates (P1 bit 2: indirect, read from B).
//
// TopPMask on rows longer than 8192 entries: TOPP_SEG, top_p_segmented.glsl (the same mask over
// many workgroups). TOP_P_PASS: one workgroup per row; A the values f32 (rows contiguous), B the params
// f32 [3, rows..] (t, p, min_keep), D the result f32 (contiguous, A's shape). Weights are the
// categorical draw's exact fixed point, q_i = floor(exp((x_i - M) / t) 2^40) (fixed64.glsl), Q their
// total and T = floor(p Q). The nucleus is the shortest prefix, in the order value descending,
// index ascending, whose q-sum reaches T, but at least max(min_keep, 1) entries: 32 bisection
// passes over the order key find at once the largest key K_m whose tail sum (keys >= K_m) reaches
// T and the largest key K_c with at least max(min_keep, 1) entries at or above it; the entries tied
// at the chosen key are kept in index order, as many as the prefix needs (a workgroup scan of the
// tie counts of contiguous chunks). Its decisions equal the CPU's (llama.cpp's f32 arithmetic, or
// f64 sums) except where the mass before the cut lies within rounding of p.
#include "common.glsl"

#define BLOCK 2048u

// The float order as an unsigned key: -0.0 ties +0.0, and every NaN (either sign) ranks above +inf
// (graph::Op::Argsort/TopK; the CPU's kernels::key::order_key is the same function).
uint sort_key(float v) {
    uint u = floatBitsToUint(v == 0.0 ? 0.0 : v);
    uint k = isnan(v) ? 0xFFFFFFFFu : ((u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u));
    return (P1 & 1u) != 0u ? ~k : k;
}

uint row_base(uint row) {
    uvec4 r = unravel(row * NE0, pc_ne());
    return a_at(uvec4(0u, r.yzw));
}

#ifdef KEY64
// KEY64 (block and merge passes of random_sample's f64 rows): A holds each f64 as two words, low
// first (NE0 counts f64 values); the key is the f64 order as (high word, low word), -0.0 tying
// +0.0 and every NaN above +inf, complemented for descending order. The block pass keeps only
// the indices in shared memory and reads keys from A.
#define KEY uvec2
#define KEY_NONE uvec2(0xffffffffu)
KEY key_of(uint base, uint i) {
    uint o = (base >> 2) + 2u * i;
    uint lo = a_w[o], hi = a_w[o + 1u];
    uint mag = hi & 0x7fffffffu;
    bool nan_ = mag > 0x7ff00000u || (mag == 0x7ff00000u && lo != 0u);
    if (mag == 0u && lo == 0u) hi = 0u;
    uvec2 k = nan_ ? uvec2(0xffffffffu) : ((hi & 0x80000000u) != 0u ? uvec2(~hi, ~lo) : uvec2(hi | 0x80000000u, lo));
    return (P1 & 1u) != 0u ? ~k : k;
}
bool key_lt(KEY a, KEY b) { return a.x < b.x || (a.x == b.x && a.y < b.y); }
#else
#define KEY uint
#define KEY_NONE 0xffffffffu
uint key_of(uint base, uint i) { return sort_key(LOAD_F(a_w, base + i * dt_size(A_T), A_T)); }
bool key_lt(uint a, uint b) { return a < b; }
#endif

bool before(KEY ka, uint ia, KEY kb, uint ib) { return key_lt(ka, kb) || (ka == kb && ia < ib); }

void emit(uint row, uint run, uint r_out, uint pos, uint idx) {
    if ((P1 & 2u) != 0u) {
        d_w[(D_OFF >> 2) + row * P0 + pos] = idx;
    } else {
        c_w[(C_OFF >> 2) + row * C_NE(0) + run * r_out + pos] = idx;
    }
}

#ifdef BLOCK_PASS
shared uint si[BLOCK];
#ifdef KEY64
uint g_kbase;
KEY sk_at(uint t) { return si[t] == 0xffffffffu ? KEY_NONE : key_of(g_kbase, si[t]); }
#else
shared uint sk[BLOCK];
KEY sk_at(uint t) { return sk[t]; }
#endif

void main() {
    uint block = gl_WorkGroupID.x;
    uint row = gl_WorkGroupID.y;
    uint base = row_base(row);
#ifdef KEY64
    g_kbase = base;
#endif
    uint l = gl_LocalInvocationID.x;
    bool indirect = (P1 & 4u) != 0u;
    for (uint t = l; t < BLOCK; t += WG) {
        // Indirect (top_k's last pass): the entries are the P0 candidates listed in B.
        uint i = indirect ? (t < P0 ? b_w[(B_OFF >> 2) + row * B_NE(0) + t] : 0xffffffffu) : block * BLOCK + t;
        bool ok = indirect ? t < P0 : i < NE0;
#ifndef KEY64
        sk[t] = ok ? key_of(base, i) : 0xffffffffu;
#endif
        si[t] = ok ? i : 0xffffffffu;
    }
    barrier();
    for (uint k2 = 2u; k2 <= BLOCK; k2 <<= 1u) {
        for (uint j = k2 >> 1u; j > 0u; j >>= 1u) {
            for (uint t = l; t < BLOCK; t += WG) {
                uint p = t ^ j;
                if (p > t) {
                    bool up = (t & k2) == 0u;
                    KEY ka = sk_at(t), kb = sk_at(p);
                    uint ia = si[t], ib = si[p];
                    if (before(kb, ib, ka, ia) == up) {
#ifndef KEY64
                        sk[t] = kb; sk[p] = ka;
#endif
                        si[t] = ib; si[p] = ia;
                    }
                }
            }
            barrier();
        }
    }
    uint r_out = C_NE(1);
    uint len = min(indirect ? P0 : min(BLOCK, NE0 - block * BLOCK), r_out);
    for (uint t = l; t < len; t += WG) emit(row, block, r_out, t, si[t]);
}
#endif

#ifdef MERGE_PASS
uint run_len(uint run, uint span, uint cap) {
    uint first = run * span;
    return first >= NE0 ? 0u : min(min(span, NE0 - first), cap);
}

void main() {
    uint g = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.y;
    uint r_in = B_NE(1), span = B_NE(2), r_out = C_NE(1);
    uint run = g / r_in, pos = g % r_in;
    uint len = run_len(run, span, r_in);
    if (pos >= len) return;
    uint base = row_base(row);
    uint in_ = (B_OFF >> 2) + row * B_NE(0);
    uint idx = b_w[in_ + run * r_in + pos];
    KEY key = key_of(base, idx);
    uint sib = run ^ 1u;
    uint slen = run_len(sib, span, r_in);
    uint sbase = in_ + sib * r_in;
    // number of sibling entries ordered before (key, idx)
    uint lo = 0u, hi = slen;
    while (lo < hi) {
        uint mid = (lo + hi) >> 1u;
        uint si_ = b_w[sbase + mid];
        if (before(key_of(base, si_), si_, key, idx)) lo = mid + 1u; else hi = mid;
    }
    uint rank = pos + lo;
    if (rank < r_out) emit(row, run >> 1u, r_out, rank, idx);
}
#endif

#ifdef HIST_PASS
shared uint hist[256];

// P0 = k, P2 = the digit's shift (24 first: no state read).
void main() {
    uint row = gl_WorkGroupID.x;
    uint l = gl_LocalInvocationID.x;
    for (uint i = l; i < 256u; i += WG) hist[i] = 0u;
    uint st = (B_OFF >> 2) + row * 4u;
    uint prefix = 0u, mask = 0u, kr = P0;
    if (P2 != 24u) { prefix = b_w[st]; mask = b_w[st + 1u]; kr = b_w[st + 2u]; }
    barrier();
    uint base = row_base(row);
    for (uint i = l; i < NE0; i += WG) {
        uint key = key_of(base, i);
        if ((key & mask) == prefix) atomicAdd(hist[(key >> P2) & 255u], 1u);
    }
    barrier();
    if (l == 0u) {
        uint cum = 0u, b = 0u;
        for (; b < 255u; b++) {
            uint h = hist[b];
            if (cum + h >= kr) break;
            cum += h;
        }
        b_w[st] = prefix | (b << P2);
        b_w[st + 1u] = mask | (255u << P2);
        b_w[st + 2u] = kr - cum;
    }
}
#endif

#ifdef COMPACT_PASS
shared uint cl[WG];
shared uint ce[WG];

#define PER 8u

// State in B (key T, -, entries equal to T to keep), candidates to C (row stride C_NE(0)), P0 = k.
void main() {
    uint row = gl_WorkGroupID.x;
    uint l = gl_LocalInvocationID.x;
    uint st = (B_OFF >> 2) + row * 4u;
    uint T = b_w[st], kr = b_w[st + 2u];
    uint nlt = P0 - kr;
    uint base = row_base(row);
    uint out_ = (C_OFF >> 2) + row * C_NE(0);
    uint run_lt = 0u, run_eq = 0u;
    for (uint start = 0u; start < NE0; start += WG * PER) {
        uint my_lt = 0u, my_eq = 0u;
        for (uint j = 0u; j < PER; j++) {
            uint i = start + l * PER + j;
            if (i < NE0) {
                uint key = key_of(base, i);
                my_lt += key < T ? 1u : 0u;
                my_eq += key == T ? 1u : 0u;
            }
        }
        cl[l] = my_lt;
        ce[l] = my_eq;
        barrier();
        for (uint s = 1u; s < WG; s <<= 1u) {
            uint a = l >= s ? cl[l - s] : 0u;
            uint b = l >= s ? ce[l - s] : 0u;
            barrier();
            cl[l] += a;
            ce[l] += b;
            barrier();
        }
        uint plt = run_lt + cl[l] - my_lt;
        uint peq = run_eq + ce[l] - my_eq;
        if (my_lt + my_eq != 0u) {
            for (uint j = 0u; j < PER; j++) {
                uint i = start + l * PER + j;
                if (i < NE0) {
                    uint key = key_of(base, i);
                    if (key < T) { c_w[out_ + plt] = i; plt++; }
                    else if (key == T) { if (peq < kr) c_w[out_ + nlt + peq] = i; peq++; }
                }
            }
        }
        run_lt += cl[WG - 1u];
        run_eq += ce[WG - 1u];
        barrier();
    }
}
#endif

#ifdef BMIN_PASS
// P2 = BS entries per block; C (row stride C_NE(0) words) gets each block's smallest key.
void main() {
    uint blk = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    uint row = gl_WorkGroupID.y;
    uint nb = (NE0 + P2 - 1u) / P2;
    if (blk >= nb) return;
    uint base = row_base(row);
    uint lo = blk * P2, hi = min(lo + P2, NE0);
    uint m = 0xffffffffu;
    for (uint i = lo; i < hi; i++) m = min(m, key_of(base, i));
    c_w[(C_OFF >> 2) + row * C_NE(0) + blk] = m;
}
#endif

#ifdef THRESH_PASS
#define NB_MAX 4096u
#define K_MAX 512u
shared uint tk[NB_MAX];   // block minima, then the blocks at or below T, ascending
shared uint sf[K_MAX];    // the blocks below T, ascending (fewer than k)
shared uint ok[K_MAX];    // the k winners: keys
shared uint oi[K_MAX];    // and indices
shared uint hist[256];
shared uint scan[WG];
shared uint sv[4];        // radix state: prefix, mask, entries still wanted; a counter

// Inclusive workgroup scan of v (every invocation calls it).
uint wg_scan(uint v) {
    uint l = gl_LocalInvocationID.x;
    scan[l] = v;
    barrier();
    for (uint s = 1u; s < WG; s <<= 1u) {
        uint a = l >= s ? scan[l - s] : 0u;
        barrier();
        scan[l] += a;
        barrier();
    }
    uint r = scan[l];
    barrier();
    return r;
}

// Index of enumerated entry e of a block list (blocks of P2 entries), or NE0 past the row.
uint entry_of(bool from_f, uint e) {
    uint b = from_f ? sf[e / P2] : tk[e / P2];
    return min(b * P2 + e % P2, NE0);
}

// After a histogram of one digit: the bin where the wanted count is reached (thread 0).
void radix_step(uint shift) {
    barrier();
    if (gl_LocalInvocationID.x == 0u) {
        uint cum = 0u, b = 0u, want = sv[2];
        for (; b < 255u; b++) {
            uint h = hist[b];
            if (cum + h >= want) break;
            cum += h;
        }
        sv[0] |= b << shift;
        sv[1] |= 255u << shift;
        sv[2] = want - cum;
    }
    barrier();
    for (uint i = gl_LocalInvocationID.x; i < 256u; i += WG) hist[i] = 0u;
    barrier();
}

void main() {
    uint row = group_index();
    if (row >= NE1 * NE2 * NE3) return;
    uint l = gl_LocalInvocationID.x;
    uint base = row_base(row);
    uint k = P0, bs = P2, nb = (NE0 + bs - 1u) / bs;
    uint mins = (B_OFF >> 2) + row * B_NE(0);
    for (uint t = l; t < nb; t += WG) tk[t] = b_w[mins + t];
    for (uint i = l; i < 256u; i += WG) hist[i] = 0u;
    if (l == 0u) { sv[0] = 0u; sv[1] = 0u; sv[2] = k; sv[3] = 0u; }
    barrier();
    // T: the k-th smallest block minimum (at least k entries are at or below it).
    for (int shift = 24; shift >= 0; shift -= 8) {
        uint pre = sv[0], msk = sv[1];
        for (uint t = l; t < nb; t += WG) if ((tk[t] & msk) == pre) atomicAdd(hist[(tk[t] >> uint(shift)) & 255u], 1u);
        radix_step(uint(shift));
    }
    uint T = sv[0];
    // The blocks below T (fewer than k: they hold every entry below T) and those at or below it
    // (they hold every entry equal to T), both ascending; the second in place over tk.
    uint nf = 0u, ng = 0u;
    for (uint start = 0u; start < nb; start += WG) {
        uint t = start + l;
        uint m = t < nb ? tk[t] : 0xffffffffu;
        uint f = m < T ? 1u : 0u, g = m <= T ? 1u : 0u;
        uint s = wg_scan(f | (g << 16));
        uint tot = scan[WG - 1u];
        barrier();
        if (f != 0u) sf[nf + (s & 0xffffu) - 1u] = t;
        if (g != 0u) tk[ng + (s >> 16) - 1u] = t;
        nf += tot & 0xffffu;
        ng += tot >> 16;
        barrier();
    }
    // L: entries below T. With L >= k the winners all lie below T: a radix select among those
    // entries finds the k-th key T2 and how many entries equal to it to take.
    if (l == 0u) sv[3] = 0u;
    barrier();
    uint nfe = nf * bs;
    uint lt = 0u;
    for (uint e = l; e < nfe; e += WG) {
        uint i = entry_of(true, e);
        if (i < NE0 && key_of(base, i) < T) lt++;
    }
    atomicAdd(sv[3], lt);
    barrier();
    uint L = sv[3];
    barrier();
    uint cut = T, ties = k - L;
    bool ties_from_f = false;
    if (L >= k) {
        if (l == 0u) { sv[0] = 0u; sv[1] = 0u; sv[2] = k; sv[3] = 0u; }
        barrier();
        for (int shift = 24; shift >= 0; shift -= 8) {
            uint pre = sv[0], msk = sv[1];
            for (uint e = l; e < nfe; e += WG) {
                uint i = entry_of(true, e);
                if (i < NE0) {
                    uint key = key_of(base, i);
                    if (key < T && (key & msk) == pre) atomicAdd(hist[(key >> uint(shift)) & 255u], 1u);
                }
            }
            radix_step(uint(shift));
        }
        cut = sv[0];
        ties = sv[2];
        ties_from_f = true;
    }
    barrier();
    // The winners: every entry below the cut (all in the blocks below T), in any order ...
    if (l == 0u) sv[3] = 0u;
    barrier();
    for (uint e = l; e < nfe; e += WG) {
        uint i = entry_of(true, e);
        if (i < NE0) {
            uint key = key_of(base, i);
            if (key < cut) {
                uint slot = atomicAdd(sv[3], 1u);
                ok[slot] = key;
                oi[slot] = i;
            }
        }
    }
    barrier();
    // ... then the first `ties` entries equal to it, in index order (the listed blocks are
    // ascending; stop once enough are found).
    uint have = k - ties, found = 0u;
    uint nle = (ties_from_f ? nf : ng) * bs;
    for (uint start = 0u; start < nle && found < ties; start += WG) {
        uint e = start + l;
        uint i = e < nle ? entry_of(ties_from_f, e) : NE0;
        uint f = (i < NE0 && key_of(base, i) == cut) ? 1u : 0u;
        uint s = wg_scan(f);
        uint tot = scan[WG - 1u];
        barrier();
        uint pos = found + s - 1u;
        if (f != 0u && pos < ties) {
            ok[have + pos] = cut;
            oi[have + pos] = i;
        }
        found += tot;
    }
    // Sort the k winners by (key, index) and write their indices.
    uint np = 1u;
    while (np < k) np <<= 1u;
    for (uint t = k + l; t < np; t += WG) { ok[t] = 0xffffffffu; oi[t] = 0xffffffffu; }
    barrier();
    for (uint k2 = 2u; k2 <= np; k2 <<= 1u) {
        for (uint j = k2 >> 1u; j > 0u; j >>= 1u) {
            for (uint t = l; t < np; t += WG) {
                uint p = t ^ j;
                if (p > t) {
                    bool up = (t & k2) == 0u;
                    uint ka = ok[t], kb = ok[p], ia = oi[t], ib = oi[p];
                    if (before(kb, ib, ka, ia) == up) { ok[t] = kb; ok[p] = ka; oi[t] = ib; oi[p] = ia; }
                }
            }
            barrier();
        }
    }
    for (uint t = l; t < k; t += WG) d_w[(D_OFF >> 2) + row * k + t] = oi[t];
}
#endif

#if defined(TOP_P_PASS) || defined(TOPP_SEG)
// The ascending order key (sort_key without the descending flip).
uint up_key(float v) {
    uint u = floatBitsToUint(v == 0.0 ? 0.0 : v);
    return isnan(v) ? 0xFFFFFFFFu : ((u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u));
}
#endif

#ifdef TOPP_SEG
#include "top_p_segmented.glsl"
#endif

#ifdef TOP_P_PASS
#include "fixed64.glsl"

shared float tp_f[WG];
shared uint tp_u[WG];
shared uvec2 tp_q[WG];
shared uint tp_c[WG];
shared uvec4 tp_cut; // (key, ties to keep, 0, 0)


// Workgroup sums of a 64-bit value and a count (every invocation calls it; all get the result).
void wg_sum2(uvec2 q, uint c, out uvec2 qs, out uint cs) {
    uint l = gl_LocalInvocationID.x;
    tp_q[l] = q;
    tp_c[l] = c;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s) { tp_q[l] = add64(tp_q[l], tp_q[l + s]); tp_c[l] += tp_c[l + s]; }
        barrier();
    }
    qs = tp_q[0];
    cs = tp_c[0];
    barrier();
}

void main() {
    uint row = group_index();
    uint nrows = NE1 * NE2 * NE3;
    if (row >= nrows) return;
    uint l = gl_LocalInvocationID.x;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint base = a_at(uvec4(0u, r.yzw)) >> 2;
    uint out_ = (D_OFF >> 2) + row * NE0;
    float t = uintBitsToFloat(b_w[b_at(uvec4(0u, r.yzw)) >> 2]);
    float p = uintBitsToFloat(b_w[b_at(uvec4(1u, r.yzw)) >> 2]);
    float mk = uintBitsToFloat(b_w[b_at(uvec4(2u, r.yzw)) >> 2]);
    if (!(t > 0.0 && t < POS_INF) || isnan(p) || isnan(mk) || mk < 0.0) {
        for (uint i = l; i < NE0; i += WG) d_w[out_ + i] = 0x7fc00000u;
        return;
    }
    // Pass 1: the maximum of the non-NaN entries, and whether a NaN or +inf occurs.
    float m = NEG_INF;
    uint bad = 0u;
    for (uint i = l; i < NE0; i += WG) {
        float x = uintBitsToFloat(a_w[base + i]);
        if (isnan(x) || x == POS_INF) bad = 1u; else m = max(m, x);
    }
    tp_f[l] = m;
    tp_u[l] = bad;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s) { tp_f[l] = max(tp_f[l], tp_f[l + s]); tp_u[l] |= tp_u[l + s]; }
        barrier();
    }
    float mx = tp_f[0];
    bool row_bad = tp_u[0] != 0u;
    barrier();
    if (p >= 1.0 || row_bad || mx == NEG_INF) {
        // Everything kept; a bad row passes through for its consumer's check.
        for (uint i = l; i < NE0; i += WG) d_w[out_ + i] = floatBitsToUint(uintBitsToFloat(a_w[base + i]) / t);
        return;
    }
    float a = (1.0 / t) * 1.4426950408889634;
    float b = -mx * a;
    // The total Q and the target T = floor(p Q) (p as a 64-bit fraction, exactly).
    uvec2 q = uvec2(0u);
    for (uint i = l; i < NE0; i += WG) q = add64(q, fixed40(weight(uintBitsToFloat(a_w[base + i]), a, b)));
    uvec2 total;
    uint zero;
    wg_sum2(q, 0u, total, zero);
    float pcl = max(p, 0.0);
    float phi = floor(pcl * 4294967296.0);
    uvec2 pfix = uvec2(uint(pcl * 18446744073709551616.0 - phi * 4294967296.0), uint(phi));
    uvec2 target = mulhi64(pfix, total);
    uint need = uint(min(max(mk, 1.0), float(NE0)));
    // Bisection for K_m (largest key whose tail sum reaches T) and K_c (largest key with `need`
    // entries at or above it): lo always satisfies, hi never (keys are below 0xFFFFFFFF).
    uint lo_m = 0u, hi_m = 0xFFFFFFFFu, lo_c = 0u, hi_c = 0xFFFFFFFFu;
    for (uint it = 0u; it < 32u; it++) {
        uint mid_m = lo_m + ((hi_m - lo_m) >> 1), mid_c = lo_c + ((hi_c - lo_c) >> 1);
        uvec2 qs = uvec2(0u);
        uint cs = 0u;
        for (uint i = l; i < NE0; i += WG) {
            float x = uintBitsToFloat(a_w[base + i]);
            uint k = up_key(x);
            if (k >= mid_m) qs = add64(qs, fixed40(weight(x, a, b)));
            if (k >= mid_c) cs += 1u;
        }
        uvec2 qt;
        uint ct;
        wg_sum2(qs, cs, qt, ct);
        if (!gt64(target, qt)) lo_m = mid_m; else hi_m = mid_m;
        if (ct >= need) lo_c = mid_c; else hi_c = mid_c;
    }
    // What lies strictly above each key, and the tied weight at K_m.
    uvec2 above_q = uvec2(0u), tie_q = uvec2(0u);
    uint above_m = 0u, above_c = 0u;
    for (uint i = l; i < NE0; i += WG) {
        float x = uintBitsToFloat(a_w[base + i]);
        uint k = up_key(x);
        if (k > lo_m) { above_q = add64(above_q, fixed40(weight(x, a, b))); above_m += 1u; }
        if (k == lo_m) tie_q = fixed40(weight(x, a, b));
        if (k > lo_c) above_c += 1u;
    }
    uvec2 aq, tq;
    uint am, ac;
    wg_sum2(above_q, above_m, aq, am);
    // Every tie has the same weight: the largest any invocation saw is it (0 where it saw none).
    tp_q[l] = tie_q;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s && gt64(tp_q[l + s], tp_q[l])) tp_q[l] = tp_q[l + s];
        barrier();
    }
    tq = tp_q[0];
    barrier();
    uvec2 none;
    wg_sum2(uvec2(0u), above_c, none, ac);
    if (l == 0u) {
        // Ties at K_m the mass needs: the smallest c with above + c q >= T (T = 0: none).
        uint c_m = 0u;
        if (gt64(target, aq) && tq != uvec2(0u)) {
            uint lo = 0u, hi = NE0; // c = hi satisfies (the tail sum at K_m reaches T)
            while (lo < hi) {
                uint mid = lo + ((hi - lo) >> 1);
                if (!gt64(target, add64(aq, mul64(mid, tq)))) hi = mid; else lo = mid + 1u;
            }
            c_m = lo;
        }
        uint n_m = am + c_m;
        tp_cut = n_m >= need ? uvec4(lo_m, c_m, 0u, 0u) : uvec4(lo_c, need - ac, 0u, 0u);
    }
    barrier();
    uint key = tp_cut.x, ties = tp_cut.y;
    // The output: contiguous chunks, the tied entries kept in index order.
    uint chunk = (NE0 + WG - 1u) / WG;
    uint lo_i = min(l * chunk, NE0), hi_i = min(lo_i + chunk, NE0);
    uint mine = 0u;
    for (uint i = lo_i; i < hi_i; i++) if (up_key(uintBitsToFloat(a_w[base + i])) == key) mine += 1u;
    tp_c[l] = mine;
    barrier();
    if (l == 0u) {
        uint run = 0u;
        for (uint i = 0u; i < WG; i++) { uint c = tp_c[i]; tp_c[i] = run; run += c; }
    }
    barrier();
    uint rank = tp_c[l];
    for (uint i = lo_i; i < hi_i; i++) {
        float x = uintBitsToFloat(a_w[base + i]);
        uint k = up_key(x);
        bool keep = k > key;
        if (k == key) { keep = rank < ties; rank += 1u; }
        d_w[out_ + i] = floatBitsToUint(keep ? x / t : NEG_INF);
    }
}
#endif
