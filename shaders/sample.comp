#version 450
// sample.comp: the fused sampling op top_k_top_p_sample (graph::Op::TopKTopPSample), computing
// exactly what the CPU kernel (crates/cpu/src/ops/sample/top_k_top_p.rs) computes, bit for bit:
// the same exponential (kernels::exp, its polynomial written out here with `precise` so nothing is
// contracted or reassociated), the same f64 sums in the same order, the same f64 ratios and the
// same comparisons. Needs shaderFloat64.
//
// PACK (one invocation per row): copies the row's parameters into the scratch B of the main pass:
// A = top_k i32 [1, rows], B = params f32 [2 + P0, rows] (top_p, min_p; random_sample: P0 = 1,
// random, topp, temperature), D = scratch; words r*4 + 0..(2 + P0) at D_OFF = (k, the params' bits).
//
// RANDOM: random_sample (graph::Op::RandomSample), see that section.
//
// Main pass (one workgroup per row), after the rows were argsorted (value descending, index
// ascending: sort.comp) into the scratch: A = logits [V, rows] (f32/f16/bf16, rows contiguous);
// B = scratch: per-row parameters at B_OFF (4 words a row), the sorted indices at word B_NE(0) + r V,
// a rank array (its inverse permutation) at word B_NE(1) + r V; C = q (qSample: f32 [V, rows];
// multinomial: i32 keys [4, R], R = C_NE(1), row r uses pair min(r, R - 1)); D = the result: i32
// [1, rows] (index, -1 for a bad row) or f32 [V, rows] (filtered logits, NaN for a bad row).
// P0 flags: bit 0 logits mode, bit 1 the CPU's row exponential is fused (AVX2+FMA: fma_exact for the
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
    if (P0 != 0u) d_w[o + 3u] = b_w[b_at(uvec4(2u, r, 0u, 0u)) >> 2];
}

#elif defined(RANDOM) || defined(EXP64)

// random_sample, one workgroup of 256 invocations per row, after the rows were argsorted (value
// descending, index ascending: sort.comp) into the scratch. Computes exactly what the CPU kernel
// (crates/cpu/src/ops/sample/random_sample.rs) computes: the same f64 exponential
// (kernels::exp64::exp, written out below with `precise`, so nothing is contracted), the same lane
// sums (lane t = invocation t adds its members i = t mod 256 in index order, then the pairwise
// tree acc[t] += acc[t + s], s = 128 .. 1) and the same chunked running sums over the order (ranks
// in chunks of 256: the chunk totals in parallel, then their running sum and the crossing chunk's
// walk in invocation 0).
// A = x [n, rows] (f32/f16/bf16, contiguous; with P0 bit 0, f64 values as word pairs, low word
// first, NE0 = n counting values); B = scratch: per row (topk, random, topp,
// temperature) at B_OFF (4 words a row), the sorted indices at word B_NE(0) + r n; D = the result
// i32 [1, rows] (-1 for a bad row). Rows of at most 262,144 entries (1024 chunks).

#define NONE_IDX 0xffffffffu
#define LANES 256u
#define CHUNK 256u
#define MAX_CHUNKS 1024u
#define D64(lo, hi) packDouble2x32(uvec2(lo, hi))

// kernels::exp64::exp (see its documentation; the same constants, bit for bit).
double exp64(double y) {
    if (isnan(y)) return y;
    if (y > D64(0xfefa39efu, 0x40862e42u)) return double(POS_INF); // 709.782712893384
    if (y < D64(0x9999999au, 0xc0874999u)) return 0.0LF; // -745.2
    precise double yk = y * D64(0x652b82feu, 0x3ff71547u);
    precise double ys = yk + D64(0x00000000u, 0x43380000u);
    precise double kd = ys - D64(0x00000000u, 0x43380000u);
    int k = int(kd);
    if (k < -1022) return 0.0LF;
    precise double h1 = kd * D64(0xfee00000u, 0x3fe62e42u);
    precise double hi = y - h1;
    precise double l1 = kd * D64(0x35793c76u, 0x3dea39efu);
    precise double r = hi - l1;
    const uvec2 c[12] = uvec2[12](uvec2(0x00000000u, 0x3fe00000u), uvec2(0x55555555u, 0x3fc55555u),
        uvec2(0x55555555u, 0x3fa55555u), uvec2(0x11111111u, 0x3f811111u), uvec2(0x16c16c17u, 0x3f56c16cu),
        uvec2(0x1a01a01au, 0x3f2a01a0u), uvec2(0x1a01a01au, 0x3efa01a0u), uvec2(0xa556c734u, 0x3ec71de3u),
        uvec2(0xb7789f5cu, 0x3e927e4fu), uvec2(0x67f544e4u, 0x3e5ae645u), uvec2(0xeff8d898u, 0x3e21eed8u),
        uvec2(0x13a86d09u, 0x3de61246u));
    precise double q = packDouble2x32(c[11]);
    for (int i = 10; i >= 0; i--) {
        precise double qr = q * r;
        q = qr + packDouble2x32(c[i]);
    }
    precise double r2 = r * r;
    precise double r2q = r2 * q;
    precise double s = r + r2q;
    precise double p = 1.0LF + s;
    if (k == -1022 && p < 1.0LF) return 0.0LF;
    if (k == 1024) {
        precise double h = p * D64(0u, 0x7fe00000u);
        precise double o = h * 2.0LF;
        return o;
    }
    precise double o = p * packDouble2x32(uvec2(0u, uint(k + 1023) << 20));
    return o;
}

#ifdef EXP64

// EXP64 (a test probe, not an op): d[i] = exp64(a[i]) for NE0 f64 values stored as word pairs (low
// word first), so a test can compare the shader's exponential with kernels::exp64::exp bit for bit
// (VulkanBackend::probe_exp64).
void main() {
    uint i = global_index();
    if (i >= NE0) return;
    uvec2 o = unpackDouble2x32(exp64(packDouble2x32(uvec2(a_w[2u * i], a_w[2u * i + 1u]))));
    d_w[2u * i] = o.x;
    d_w[2u * i + 1u] = o.y;
}

#else

shared double sh_lane[LANES];
shared double sh_chunk[MAX_CHUNKS];
shared uint sh_bad, sh_res;

uint g_base, g_ib;
double g_x0, g_t;

// Entry i of the row as f64 (f32, f16 and bf16 widen exactly).
double xv(uint i) {
    if ((P0 & 1u) != 0u) {
        uint o = (g_base >> 2) + 2u * i;
        return packDouble2x32(uvec2(a_w[o], a_w[o + 1u]));
    }
    return double(LOAD_F(a_w, g_base + i * dt_size(A_T), A_T));
}
uint sidx(uint j) { return b_w[g_ib + j]; }
double e_of(double v) {
    precise double dv = v - g_x0;
    precise double y = dv / g_t;
    return exp64(y);
}

// The lane sum of e over the row (every entry, or with `top` the first kk of the order: value
// above pv, or equal with index at most pi). Called by the whole workgroup.
double lane_sum(uint l, uint n, bool top, double pv, uint pi) {
    precise double acc = 0.0LF;
    for (uint i = l; i < n; i += LANES) {
        double v = xv(i);
        if (!top || v > pv || (v == pv && i <= pi)) {
            precise double a2 = acc + e_of(v);
            acc = a2;
        }
    }
    sh_lane[l] = acc;
    barrier();
    for (uint s = LANES / 2u; s > 0u; s >>= 1) {
        if (l < s) {
            precise double t2 = sh_lane[l] + sh_lane[l + s];
            sh_lane[l] = t2;
        }
        barrier();
    }
    double total = sh_lane[0];
    barrier();
    return total;
}

void main() {
    uint r = group_index();
    if (r >= NE1) return;
    uint l = gl_LocalInvocationID.x;
    uint n = NE0;
    g_base = A_OFF + r * A_NB(1);
    g_ib = B_NE(0) + r * n;
    uint po = (B_OFF >> 2) + r * 4u;
    int topk = int(b_w[po]);
    float rnd = uintBitsToFloat(b_w[po + 1u]);
    float topp = uintBitsToFloat(b_w[po + 2u]);
    float temp = uintBitsToFloat(b_w[po + 3u]);

    if (l == 0u) sh_bad = 0u;
    barrier();
    bool nan_ = false;
    for (uint i = l; i < n; i += LANES) nan_ = nan_ || isnan(xv(i));
    if (nan_) atomicOr(sh_bad, 1u);
    barrier();
    bool bad = sh_bad != 0u || isnan(rnd) || isnan(topp) || isnan(temp) || !(rnd >= 0.0 && rnd < 1.0) ||
        topp < 0.0 || temp < 0.0;
    // The first maximum (the order's first entry: -0.0 ties +0.0, ties by index).
    uint first = sidx(0u);
    uint res;
    if (bad) {
        res = NONE_IDX;
    } else if (rnd == 0.0 || topp == 0.0 || topk == 1 || temp == 0.0) {
        res = first;
    } else if (isinf(xv(first))) {
        res = NONE_IDX; // +inf, or every entry -inf
    } else {
        g_x0 = xv(first);
        g_t = double(temp);
        double total = lane_sum(l, n, false, 0.0LF, 0u);
        uint kk = (topk <= 0 || uint(topk) >= n) ? n : uint(topk);
        double top = total;
        if (kk < n) {
            uint pi = sidx(kk - 1u);
            top = lane_sum(l, n, true, xv(pi), pi);
        }
        precise double a = double(topp) * total;
        // Rust's f64::min: the other operand when one is NaN.
        double lim = isnan(a) ? top : (isnan(top) ? a : (a < top ? a : top));
        precise double thr = double(rnd) * lim;
        uint nch = (n + CHUNK - 1u) / CHUNK;
        for (uint c = l; c < nch; c += LANES) {
            precise double s = 0.0LF;
            for (uint j = c * CHUNK; j < min(c * CHUNK + CHUNK, n); j++) {
                precise double s2 = s + e_of(xv(sidx(j)));
                s = s2;
            }
            sh_chunk[c] = s;
        }
        barrier();
        if (l == 0u) {
            precise double base = 0.0LF;
            uint hit = NONE_IDX;
            for (uint c = 0u; c < nch; c++) {
                precise double end = base + sh_chunk[c];
                if (end >= thr) { hit = c; break; }
                base = end;
            }
            // Rounding left the threshold above the sorted total: the last rank.
            uint pick = sidx(n - 1u);
            if (hit != NONE_IDX) {
                precise double s = 0.0LF;
                for (uint j = hit * CHUNK; j < min(hit * CHUNK + CHUNK, n); j++) {
                    uint i = sidx(j);
                    precise double s2 = s + e_of(xv(i));
                    s = s2;
                    precise double c_i = base + s;
                    if (c_i >= thr) { pick = i; break; }
                }
            }
            sh_res = pick;
        }
        barrier();
        res = sh_res;
    }
    if (l == 0u) d_w[(D_OFF >> 2) + r] = res;
}

#endif

#else

#define BAD 0u
#define LIST 1u
#define ALL 2u
#define ATLEAST 3u
#define NONE_IDX 0xffffffffu

// a * b + c rounded once, as the CPU's fused multiply-add computes it, on any device: GLSL's
// fma() only promises consistency, not a single rounding (lavapipe computes it as a multiply and
// an add). In f64 the product is exact; the sum is rounded to odd (its last bit set when inexact,
// found by the error of TwoSum), and rounding that to f32 is then the correctly rounded result
// (53 >= 2 * 24 + 2 bits: Boldo and Melquiond's rounding to odd); an infinite sum (a -inf logit)
// stays as it is. Needs shaderFloat64 and an f64 -> f32 conversion that rounds to nearest even.
float fma_exact(float a, float b, float c) {
    precise double p = double(a) * double(b);
    precise double dc = double(c);
    precise double s = p + dc;
    precise double bv = s - p;
    precise double av = s - bv;
    precise double err = (p - av) + (dc - bv);
    uvec2 w = unpackDouble2x32(s);
    if (!isinf(s) && err != 0.0LF && (w.x & 1u) == 0u) {
        // One ulp towards the exact sum: up in magnitude when err has s's sign, else down.
        bool up = (err > 0.0LF) == (s > 0.0LF);
        uint lo = up ? w.x + 1u : w.x - 1u;
        uint hi = w.y + (up ? (lo == 0u ? 1u : 0u) : (w.x == 0u ? 0xffffffffu : 0u));
        s = packDouble2x32(uvec2(lo, hi));
    }
    return float(s);
}

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
            p = fma_exact(p, f, c[i]);
        } else {
            precise float pf = p * f;
            p = pf + c[i];
        }
    }
    precise float r = p * uintBitsToFloat(floatBitsToUint(t) << 23);
    return r;
}

#ifdef EXP2

// EXP2 (a test probe, not an op): d[i] = exp2_k(a[i], P0 != 0) for NE0 f32 values, so a test can
// compare the shader's exponential with kernels::exp::exp2::<FMA> bit for bit
// (VulkanBackend::probe_exp2).
void main() {
    uint i = global_index();
    if (i >= NE0) return;
    d_w[i] = floatBitsToUint(exp2_k(uintBitsToFloat(a_w[i]), P0 != 0u));
}

#else

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
    if (g_fused) return exp2_k(fma_exact(x, g_ea, g_eb), true);
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

#endif
