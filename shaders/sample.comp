#version 450
// sample.comp: the fused sampling op top_k_top_p_sample (graph::Op::TopKTopPSample), computing
// exactly what the CPU kernel (crates/cpu/src/ops/sample/top_k_top_p.rs) computes, bit for bit:
// the same exponential (kernels::exp, its polynomial written out here with `precise` so nothing is
// contracted or reassociated), the same f64 sums in the same order, the same f64 ratios and the
// same comparisons. Needs shaderFloat64.
//
// PACK (one invocation per row): copies the row's parameters into the scratch B of the main pass:
// A = top_k i32 [1, rows], B = params f32 [2, rows] (top_p, min_p), D = scratch; words r*4 + 0..2
// at D_OFF = (k, top_p bits, min_p bits).
//
// Main pass (one workgroup per row), after the rows were argsorted (value descending, index
// ascending: sort.comp) into the scratch: A = logits [V, rows] (f32/f16/bf16, rows contiguous);
// B = scratch: per-row parameters at B_OFF (4 words a row), the sorted indices at word B_NE(0) + r V,
// a rank array (its inverse permutation) at word B_NE(1) + r V; C = q (qSample: f32 [V, rows];
// multinomial: i32 keys [4, R], R = C_NE(1), row r uses pair min(r, R - 1)); D = the result: i32
// [1, rows] (index, -1 for a bad row) or f32 [V, rows] (filtered logits, NaN for a bad row).
// P0 flags: bit 0 logits mode, bit 1 the CPU's row exponential is fused (AVX2+FMA: fma for the
// affine argument and the polynomial, as kernels::row::exp2_into does there), bits 2-3 post (0 none,
// 1 qSample, 2 multinomial), bit 4 write the filtered logits. P1 = min(ks_max, 1024). P2 = eps.
//
// The parallel parts are exact by construction (the bad-row flags, the rank array, the output
// row); every order-dependent f64 sum runs in invocation 0 in the CPU's order (index order for the
// row totals, sorted order for top-K's total and the top-P prefixes, index order for the draw).
#include "common.glsl"

#define LOG2E_F uintBitsToFloat(0x3fb8aa3bu)
#define ROUND_F uintBitsToFloat(0x4b40007fu)

#ifdef PACK

void main() {
    uint r = global_index();
    if (r >= NE1) return;
    uint o = (D_OFF >> 2) + r * 4u;
    d_w[o] = a_w[a_at(uvec4(0u, r, 0u, 0u)) >> 2];
    d_w[o + 1u] = b_w[b_at(uvec4(0u, r, 0u, 0u)) >> 2];
    d_w[o + 2u] = b_w[b_at(uvec4(1u, r, 0u, 0u)) >> 2];
}

#else

#define BAD 0u
#define LIST 1u
#define ALL 2u
#define ATLEAST 3u
#define NONE_IDX 0xffffffffu

// kernels::exp::exp2 with FMA = fused (see the module documentation there).
float exp2_k(float y, bool fused) {
    precise float yc = y > -127.0 ? y : -127.0;
    precise float t = yc + ROUND_F;
    precise float n = t - ROUND_F;
    precise float f = yc - n;
    const float c[6] = float[6](uintBitsToFloat(0x3f800001u), uintBitsToFloat(0x3f317218u),
        uintBitsToFloat(0x3e75fc83u), uintBitsToFloat(0x3d6357b6u), uintBitsToFloat(0x3c1e8838u),
        uintBitsToFloat(0x3aaf8448u));
    precise float p = c[5];
    for (int i = 4; i >= 0; i--) {
        if (fused) {
            p = fma(p, f, c[i]);
        } else {
            precise float pf = p * f;
            p = pf + c[i];
        }
    }
    precise float r = p * uintBitsToFloat(floatBitsToUint(t) << 23);
    return r;
}

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

// graph::fused::multinomial_uniform of row r's (seed, offset) pair: philox::uniform_f64 with
// element = stream::element(16, 0), the top 53 of the 64 bits (first word high).
double multinomial_u(uint r) {
    uint pr = min(r, C_NE(1) - 1u);
    uint o = (C_OFF + pr * C_NB(1)) >> 2;
    uvec4 w = philox(uvec4(0u, 16u, c_w[o + 2u], c_w[o + 3u]), uvec2(c_w[o], c_w[o + 1u]));
    double v = double(w.x) * 2097152.0LF + double(w.y >> 11);
    return v * (1.0LF / 9007199254740992.0LF);
}

uint g_base, g_ib, g_rb, g_qb, g_v;
bool g_logits, g_fused, g_special;
float g_ea, g_eb;

float xv(uint i) { return LOAD_F(a_w, g_base + i * dt_size(A_T), A_T); }
uint sidx(uint j) { return b_w[g_ib + j]; }
uint rank_of(uint i) { return b_w[g_rb + i]; }
float qv(uint i) { return uintBitsToFloat(c_w[g_qb + i]); }

// The row weight (kernels::row::exp2_into: fused where the CPU has AVX2+FMA).
float w_row(float x) {
    if (!g_logits) return x;
    if (g_fused) return exp2_k(fma(x, g_ea, g_eb), true);
    precise float xa = x * g_ea;
    precise float y = xa + g_eb;
    return exp2_k(y, false);
}

// The list weight of sorted position j (list_weights: kernels::exp::exp_at, never fused).
float w_list(uint j) {
    if (g_special) return 1.0;
    float x = xv(sidx(j));
    if (!g_logits) return x;
    precise float xa = x * g_ea;
    precise float y = xa + g_eb;
    return exp2_k(y, false);
}

// The order-dependent passes (f64 sums in the CPU's order) run element by element in order, but
// split into OWNERS consecutive segments, segment s run by invocation 8 s after segment s - 1
// (a barrier between): llvmpipe (lavapipe) ends a SIMD chunk's loops once it has made 65535 loop
// iterations in one dispatch, so no chunk of up to 8 invocations may walk a whole long row.
// Each pass is a function over [a, b) that carries its state through shared memory.
// Short rows take fewer segments (at least 2048 entries each), so they pay fewer barriers.
#define OWNERS (WG / 8u)
#define NSEG(n) clamp(((n) + 2047u) / 2048u, 1u, OWNERS)
#define SEG(n) (((n) + NSEG(n) - 1u) / NSEG(n))
#define DRIVE(fn, n) \
    for (uint s_ = 0u; s_ < NSEG(n); s_++) { \
        if (l == s_ * 8u && sh_stop == 0u) fn(min(s_ * SEG(n), (n)), min((s_ + 1u) * SEG(n), (n))); \
        barrier(); \
    }
// Resets the pass state (after every invocation has read the previous pass's results).
#define BEGIN(acc0, pos0) \
    barrier(); \
    if (l == 0u) { sh_acc = (acc0); sh_stop = 0u; sh_pos = (pos0); sh_last = NONE_IDX; sh_best = double(NEG_INF); } \
    barrier();

shared uint sh_flags;
shared double sh_acc, sh_best, sh_z;
shared uint sh_stop, sh_pos, sh_last;

// Uniform per-row values the passes read.
double g_z, g_dp, g_cut, g_deps, g_target;
uint g_len, g_kind;

bool survives(double wi) { return g_kind == ALL || wi >= g_cut; }

// Z over the row in index order.
void p_zrow(uint a, uint b) {
    double acc = sh_acc;
    for (uint i = a; i < b; i++) acc += double(w_row(xv(i)));
    sh_acc = acc;
}

// The nucleus end: the first sorted position whose exclusive prefix exceeds p Z.
void p_nucleus(uint a, uint b) {
    double acc = sh_acc;
    for (uint j = a; j < b; j++) {
        if (acc / g_z > g_dp) { sh_pos = j; sh_stop = 1u; break; }
        acc += double(w_row(xv(sidx(j))));
    }
    sh_acc = acc;
}

// min-P on the sorted list: the first position below the cut.
void p_minp(uint a, uint b) {
    for (uint j = a; j < b; j++) {
        if (double(w_list(j)) / g_z < g_cut) { sh_pos = j; sh_stop = 1u; break; }
    }
}

// qSample over the sorted list (q by sorted position; ties to the earlier position).
void p_qs_list(uint a, uint b) {
    double bv = sh_best;
    uint bp = sh_pos;
    for (uint j = a; j < b; j++) {
        double rr = double(w_list(j)) / g_z / (double(qv(j)) + g_deps);
        if (rr > bv) { bv = rr; bp = j; }
    }
    sh_best = bv;
    sh_pos = bp;
}

// The survivors' total in index order (sorted list: rank below the length).
void p_total_list(uint a, uint b) {
    double acc = sh_acc;
    for (uint i = a; i < b; i++) {
        uint j = rank_of(i);
        if (j < g_len) acc += double(w_list(j)) / g_z;
    }
    sh_acc = acc;
}

// The draw in index order over the sorted list's survivors.
void p_draw_list(uint a, uint b) {
    double run = sh_acc;
    uint last = sh_last;
    for (uint i = a; i < b; i++) {
        uint j = rank_of(i);
        if (j >= g_len) continue;
        double pj = double(w_list(j)) / g_z;
        if (pj > 0.0LF) {
            run += pj;
            last = i;
            if (run > g_target) { sh_pos = i; sh_stop = 1u; break; }
        }
    }
    sh_acc = run;
    sh_last = last;
}

// qSample over the unsorted row (q by token id).
void p_qs_row(uint a, uint b) {
    double bv = sh_best;
    uint bp = sh_pos;
    for (uint i = a; i < b; i++) {
        double wi = double(w_row(xv(i))) / g_z;
        if (survives(wi)) {
            double rr = wi / (double(qv(i)) + g_deps);
            if (rr > bv) { bv = rr; bp = i; }
        }
    }
    sh_best = bv;
    sh_pos = bp;
}

void p_total_row(uint a, uint b) {
    double acc = sh_acc;
    for (uint i = a; i < b; i++) {
        double wi = double(w_row(xv(i))) / g_z;
        if (survives(wi)) acc += wi;
    }
    sh_acc = acc;
}

void p_draw_row(uint a, uint b) {
    double run = sh_acc;
    uint last = sh_last;
    for (uint i = a; i < b; i++) {
        double wi = double(w_row(xv(i))) / g_z;
        if (!survives(wi)) continue;
        if (wi > 0.0LF) {
            run += wi;
            last = i;
            if (run > g_target) { sh_pos = i; sh_stop = 1u; break; }
        }
    }
    sh_acc = run;
    sh_last = last;
}

void main() {
    uint r = group_index();
    if (r >= NE1) return;
    uint l = gl_LocalInvocationID.x;
    uint V = NE0;
    g_v = V;
    g_base = A_OFF + r * A_NB(1);
    g_ib = B_NE(0) + r * V;
    g_rb = B_NE(1) + r * V;
    g_qb = (C_OFF + r * C_NB(1)) >> 2;
    g_logits = (P0 & 1u) != 0u;
    g_fused = (P0 & 2u) != 0u;
    g_special = false;
    uint post = (P0 >> 2) & 3u;
    bool out_logits = (P0 & 16u) != 0u;
    uint pw = (B_OFF >> 2) + r * 4u;
    int k = int(b_w[pw]);
    float p = uintBitsToFloat(b_w[pw + 1u]);
    float m = uintBitsToFloat(b_w[pw + 2u]);

    // The bad-row flags (bit 0: NaN or +inf; bit 1: a value other than -inf; bit 2: a value
    // outside [0, 1]) and the rank array.
    if (l == 0u) { sh_flags = 0u; sh_stop = 0u; }
    barrier();
    uint fl = 0u;
    for (uint i = l; i < V; i += WG) {
        float x = xv(i);
        if (isnan(x) || x == POS_INF) fl |= 1u;
        if (x != NEG_INF) fl |= 2u;
        if (!(x >= 0.0 && x <= 1.0)) fl |= 4u;
        b_w[g_rb + sidx(i)] = i;
    }
    if (fl != 0u) atomicOr(sh_flags, fl);
    memoryBarrierBuffer();
    barrier();
    fl = sh_flags;
    bool bad = isnan(p) || p == POS_INF || isnan(m) || m == POS_INF
        || (g_logits ? ((fl & 1u) != 0u || (fl & 2u) == 0u) : (fl & 4u) != 0u);

    uint first = sidx(0u);
    float x0 = xv(first);
    g_ea = LOG2E_F;
    precise float nx0 = -x0;
    precise float eb = nx0 * g_ea;
    g_eb = eb;
    g_dp = double(p);
    g_deps = double(uintBitsToFloat(P2));
    double dm = double(m);

    // Everything below is uniform across the workgroup (the passes end in barriers).
    uint kind = BAD, len = 0u, index = NONE_IDX;
    double z = 1.0LF, cut = 0.0LF;
    bool top_k_runs = k >= 1 && uint(k) <= min(V, P1);
    if (!bad && (top_k_runs || p < 1.0)) {
        kind = LIST;
        if (top_k_runs) {
            // At most 2 x 1024 steps: invocation 0 alone.
            if (l == 0u) {
                uint n = uint(k);
                double zz = 1.0LF;
                if (g_logits) {
                    zz = -0.0LF;
                    for (uint j = 0u; j < n; j++) zz += double(w_list(j));
                }
                if (p <= 0.0) {
                    n = 1u;
                } else if (p < 1.0) {
                    double excl = 0.0LF;
                    uint end = n;
                    for (uint j = 0u; j < n; j++) {
                        if (excl / zz > g_dp) { end = j; break; }
                        excl += double(w_list(j));
                    }
                    n = end;
                }
                sh_z = zz;
                sh_pos = n;
            }
            barrier();
            z = sh_z;
            len = sh_pos;
        } else if (p <= 0.0) {
            len = 1u;
            g_special = true;
        } else {
            if (g_logits) {
                BEGIN(-0.0LF, 0u)
                DRIVE(p_zrow, V)
                z = sh_acc;
            }
            g_z = z;
            BEGIN(0.0LF, V)
            DRIVE(p_nucleus, V)
            len = sh_pos;
        }
        g_z = z;
        // min-P on the sorted survivors (a prefix).
        if (m >= 1.0) {
            len = 1u;
        } else if (m > 0.0) {
            g_cut = double(w_list(0u)) / z * dm;
            BEGIN(0.0LF, len)
            DRIVE(p_minp, len)
            len = sh_pos;
        }
        g_len = len;
        index = sidx(0u);
        if (post == 1u) {
            BEGIN(0.0LF, 0u)
            DRIVE(p_qs_list, len)
            index = sidx(sh_pos);
        } else if (post == 2u) {
            BEGIN(-0.0LF, 0u)
            DRIVE(p_total_list, V)
            g_target = multinomial_u(r) * sh_acc;
            BEGIN(0.0LF, NONE_IDX)
            DRIVE(p_draw_list, V)
            uint hit = sh_pos == NONE_IDX ? sh_last : sh_pos;
            if (hit != NONE_IDX) index = hit;
        }
    } else if (!bad) {
        // top-K and top-P skipped: nothing is ordered.
        index = first;
        if (g_logits) {
            BEGIN(-0.0LF, 0u)
            DRIVE(p_zrow, V)
            z = sh_acc;
        }
        g_z = z;
        if (m >= 1.0) {
            kind = LIST;
            len = 1u;
        } else {
            kind = m > 0.0 ? ATLEAST : ALL;
            if (m > 0.0) cut = double(w_row(x0)) / z * dm;
            g_kind = kind;
            g_cut = cut;
            if (post == 1u) {
                BEGIN(0.0LF, first)
                DRIVE(p_qs_row, V)
                index = sh_pos;
            } else if (post == 2u) {
                BEGIN(-0.0LF, 0u)
                DRIVE(p_total_row, V)
                g_target = multinomial_u(r) * sh_acc;
                BEGIN(0.0LF, NONE_IDX)
                DRIVE(p_draw_row, V)
                uint hit = sh_pos == NONE_IDX ? sh_last : sh_pos;
                if (hit != NONE_IDX) index = hit;
            }
        }
    }
    if (kind == BAD) index = NONE_IDX;

    if (!out_logits) {
        if (l == 0u) d_w[(D_OFF >> 2) + r] = index;
        return;
    }
    float fill = g_logits ? NEG_INF : 0.0;
    uint ob = (D_OFF >> 2) + r * V;
    for (uint i = l; i < V; i += WG) {
        float x = xv(i);
        float o;
        if (kind == BAD) o = uintBitsToFloat(0x7fc00000u);
        else if (kind == ALL) o = x;
        else if (kind == LIST) o = rank_of(i) < len ? x : fill;
        else o = double(w_row(x)) / z >= cut ? x : fill;
        d_w[ob + i] = floatBitsToUint(o);
    }
}

#endif
