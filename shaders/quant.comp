#version 450
// quant.comp: the ops that read ggml's block-quantized formats (A_T = DT_Q8_0 .. DT_Q6_K: 32
// elements per block, or 256 for the K-quants; little-endian f16 scales), the counterpart of the
// CPU's `ops/quant.rs`. Each element is dequantized as ggml's `dequantize_row_*` defines it: q8_0
// d * q, q4_0 d * (nibble - 8), q4_1 d * nibble + m (a rounded product then a rounded sum:
// `precise`, no FMA), q5_0 d * (q5 - 16), q5_1 d * q5 + m, q4_K/q5_K (d * sc) * q - dmin * m with
// the 6-bit scale and min of the element's sub-block, q6_K (d * sc) * (q6 - 32); the layouts are
// described in `kernels::quant` and `kernels::quant::kquants`.
//
// P2 = 0, GetRows: one invocation per result element. NE = result shape [ne0, m, ne2, ne3],
//   A = quantized table (contiguous rows of A_NB(1) bytes), B = i32 ids [m, ne2, ne3], D = f32
//   contiguous; P0 = rows of A, P1 = status word (set, and 0 written, for an id outside [0, P0)).
// P2 = 1, MulMat: tiled as mul_mat_tile.glsl describes (a workgroup per TILE_R x TILE_C tile of
//   the result). The invocations stride over units of 4 weights of a row, 8 units per block: q8_0
//   unit u of a block holds its bytes 4u..4u+3, a q4 unit its bytes 2u and 2u+1, that is elements
//   2u, 2u+1 (low nibbles) and 2u+16, 2u+17 (high nibbles); for the other formats unit u is
//   elements 4u..4u+3 of the row, each dequantized by `load_q`; each unit's 4 activations per column
//   are read once for the tile's TILE_R rows. NE = result shape, A = weights [k, m, C_NE(2),
//   C_NE(3)] (broadcast as ggml), B = f32 [k, n, NE2, NE3] rows contiguous, D = f32 contiguous;
//   P0 = k. Products are summed in f32 over the dequantized weights (the CPU quantizes b's columns
//   to 8 bits first, as ggml does; the two agree within that rounding).
#include "common.glsl"
#include "mul_mat_tile.glsl"

#define DT_Q8_0 4u
#define DT_Q4_0 5u
#define DT_Q4_1 6u
#define DT_Q5_0 7u
#define DT_Q5_1 8u
#define DT_Q4_K 9u
#define DT_Q5_K 10u
#define DT_Q6_K 11u

uint q_block_bytes(uint dt) {
    switch (dt) {
    case DT_Q8_0: return 34u;
    case DT_Q4_0: return 18u;
    case DT_Q4_1: return 20u;
    case DT_Q5_0: return 22u;
    case DT_Q5_1: return 24u;
    case DT_Q4_K: return 144u;
    case DT_Q5_K: return 176u;
    default: return 210u;
    }
}

// Elements per block.
uint q_block_elems(uint dt) { return dt >= DT_Q4_K ? 256u : 32u; }

// Byte `off` of slot A.
uint a_byte(uint off) { return (a_w[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }

// The f16 at even byte `off` of slot A.
float a_half(uint off) { return unpackHalf2x16(a_w[off >> 2] >> ((off & 2u) * 8u)).x; }

// The 16 bits at even byte `off` of slot A.
uint a_half_bits(uint off) { return (a_w[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }

// The 32 bits at even byte `off` of slot A (two words when `off` is not a multiple of 4).
uint a_word2(uint off) {
    uint w0 = a_w[off >> 2];
    return (off & 2u) == 0u ? w0 : (w0 >> 16) | (a_w[(off >> 2) + 1u] << 16);
}

// Element j of the K-quant block at byte `blk` of slot A.
float load_k(uint blk, uint j, uint dt) {
    if (dt == DT_Q6_K) {
        uint h = j >> 7, quarter = (j >> 5) & 3u, l = j & 31u;
        uint b = a_byte(blk + 64u * h + 32u * (quarter & 1u) + l);
        uint lo = quarter < 2u ? (b & 15u) : (b >> 4);
        uint hi = (a_byte(blk + 128u + 32u * h + l) >> (2u * quarter)) & 3u;
        int sc = int(a_byte(blk + 192u + (j >> 4)) << 24) >> 24;
        precise float ds = a_half(blk + 208u) * float(sc);
        precise float r = ds * float(int(lo | (hi << 4)) - 32);
        return r;
    }
    // q4_K, q5_K: the sub-block's 6-bit scale and min (scale bytes at blk + 4)
    uint sb = j >> 5, l = j & 31u;
    uint sc, m;
    if (sb < 4u) {
        sc = a_byte(blk + 4u + sb) & 63u;
        m = a_byte(blk + 8u + sb) & 63u;
    } else {
        uint b = a_byte(blk + 8u + sb);
        sc = (b & 15u) | ((a_byte(blk + sb) >> 6) << 4);
        m = (b >> 4) | ((a_byte(blk + 4u + sb) >> 6) << 4);
    }
    uint b = a_byte(blk + (dt == DT_Q4_K ? 16u : 48u) + 32u * (sb >> 1) + l);
    uint q = (sb & 1u) == 0u ? (b & 15u) : (b >> 4);
    if (dt == DT_Q5_K) q |= ((a_byte(blk + 16u + l) >> sb) & 1u) << 4;
    precise float d1 = a_half(blk) * float(sc);
    precise float m1 = a_half(blk + 2u) * float(m);
    precise float p = d1 * float(q);
    precise float r = p - m1;
    return r;
}

// Element k of the quantized row starting at byte `row` of slot A.
float load_q(uint row, uint k, uint dt) {
    uint qk = q_block_elems(dt);
    uint blk = row + (k / qk) * q_block_bytes(dt);
    uint j = k % qk;
    if (dt >= DT_Q4_K) return load_k(blk, j, dt);
    float d = a_half(blk);
    if (dt == DT_Q8_0) return d * float(int(a_byte(blk + 2u + j) << 24) >> 24);
    bool q5 = dt == DT_Q5_0 || dt == DT_Q5_1;
    uint qs = dt == DT_Q4_0 ? 2u : (dt == DT_Q4_1 ? 4u : (dt == DT_Q5_0 ? 6u : 8u));
    uint b = a_byte(blk + qs + (j & 15u));
    uint q = j < 16u ? (b & 15u) : (b >> 4);
    if (q5) q |= ((a_word2(blk + qs - 4u) >> j) & 1u) << 4;
    if (dt == DT_Q4_0) return d * float(int(q) - 8);
    if (dt == DT_Q5_0) return d * float(int(q) - 16);
    precise float p = d * float(q);
    precise float r = p + a_half(blk + 2u);
    return r;
}

void main() {
    if (P2 == 0u) {
        uint idx = global_index();
        if (idx >= NE0 * NE1 * NE2 * NE3) return;
        uvec4 i = unravel(idx, pc_ne());
        int id = LOAD_I(b_w, B_OFF + i.y * B_NB(0) + i.z * B_NB(1) + i.w * B_NB(2));
        uint dst = (D_OFF >> 2) + idx;
        if (id < 0 || uint(id) >= P0) { d_w[dst] = 0u; atomicOr(c_w[P1], 1u); return; }
        uint row = A_OFF + uint(id) * A_NB(1) + i.z * A_NB(2) + i.w * A_NB(3);
        d_w[dst] = floatBitsToUint(load_q(row, i.x, A_T));
    } else {
        Tile t = tile_of(group_index());
        if (t.w >= NE3) return;
        uint pa[TILE_R], pb[TILE_C];
        for (uint r = 0u; r < TILE_R; r++) pa[r] = tile_a_row(t, r);
        for (uint c = 0u; c < TILE_C; c++) pb[c] = tile_b_col(t, c);
        uint bb = q_block_bytes(A_T);
        float acc[TILE_N];
        for (uint a = 0u; a < TILE_N; a++) acc[a] = 0.0;
        for (uint u = gl_LocalInvocationID.x; u < (P0 >> 2); u += WG) {
            uint blk = u >> 3, sub = u & 7u;
            // the unit's elements within the row, and their activations for each column
            bool nibbled = A_T == DT_Q4_0 || A_T == DT_Q4_1;
            uvec4 ks = nibbled ? blk * 32u + sub * 2u + uvec4(0u, 1u, 16u, 17u) : u * 4u + uvec4(0u, 1u, 2u, 3u);
            vec4 bv[TILE_C];
            for (uint c = 0u; c < TILE_C; c++) {
                bv[c] = vec4(uintBitsToFloat(b_w[pb[c] + ks.x]), uintBitsToFloat(b_w[pb[c] + ks.y]),
                             uintBitsToFloat(b_w[pb[c] + ks.z]), uintBitsToFloat(b_w[pb[c] + ks.w]));
            }
            for (uint r = 0u; r < TILE_R; r++) {
                vec4 w;
                if (A_T > DT_Q4_1) {
                    w = vec4(load_q(pa[r], ks.x, A_T), load_q(pa[r], ks.y, A_T), load_q(pa[r], ks.z, A_T),
                             load_q(pa[r], ks.w, A_T));
                } else {
                    uint p = pa[r] + blk * bb;
                    float d = a_half(p);
                    if (A_T == DT_Q8_0) {
                        uint q = a_word2(p + 2u + sub * 4u);
                        w = d * vec4(float(int(q << 24) >> 24), float(int(q << 16) >> 24),
                                     float(int(q << 8) >> 24), float(int(q) >> 24));
                    } else {
                        bool q41 = A_T == DT_Q4_1;
                        uint q = a_half_bits(p + (q41 ? 4u : 2u) + sub * 2u);
                        uvec4 nib = uvec4(q & 15u, (q >> 8) & 15u, (q >> 4) & 15u, (q >> 12) & 15u);
                        if (q41) {
                            precise vec4 pr = d * vec4(nib);
                            precise vec4 rr = pr + a_half(p + 2u);
                            w = rr;
                        } else {
                            w = d * (vec4(nib) - 8.0);
                        }
                    }
                }
                for (uint c = 0u; c < TILE_C; c++) acc[r * TILE_C + c] += dot(w, bv[c]);
            }
        }
        tile_store(t, acc);
    }
}
