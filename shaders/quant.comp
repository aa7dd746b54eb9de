#version 450
// quant.comp: the ops that read ggml's block-quantized formats (A_T = DT_Q8_0, DT_Q4_0 or DT_Q4_1;
// 32 elements per block, little-endian f16 scales), the counterpart of the CPU's `ops/quant.rs`.
// Each element is dequantized as ggml's `dequantize_row_*` defines it: q8_0 d * q, q4_0
// d * (nibble - 8), q4_1 d * nibble + m (a rounded product then a rounded sum: `precise`, no FMA).
//
// P2 = 0, GetRows: one invocation per result element. NE = result shape [ne0, m, ne2, ne3],
//   A = quantized table (contiguous rows of A_NB(1) bytes), B = i32 ids [m, ne2, ne3], D = f32
//   contiguous; P0 = rows of A, P1 = status word (set, and 0 written, for an id outside [0, P0)).
// P2 = 1, MulMat: tiled as mul_mat_tile.glsl describes (a workgroup per TILE_R x TILE_C tile of
//   the result). The invocations stride over units of 4 weights of a row, 8 units per block: q8_0
//   unit u of a block holds its bytes 4u..4u+3, a q4 unit its bytes 2u and 2u+1, that is elements
//   2u, 2u+1 (low nibbles) and 2u+16, 2u+17 (high nibbles); each unit's 4 activations per column
//   are read once for the tile's TILE_R rows. NE = result shape, A = weights [k, m, C_NE(2),
//   C_NE(3)] (broadcast as ggml), B = f32 [k, n, NE2, NE3] rows contiguous, D = f32 contiguous;
//   P0 = k. Products are summed in f32 over the dequantized weights (the CPU quantizes b's columns
//   to 8 bits first, as ggml does; the two agree within that rounding).
#include "common.glsl"
#include "mul_mat_tile.glsl"

#define DT_Q8_0 4u
#define DT_Q4_0 5u
#define DT_Q4_1 6u

uint q_block_bytes(uint dt) { return dt == DT_Q8_0 ? 34u : (dt == DT_Q4_0 ? 18u : 20u); }

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

// Element k of the quantized row starting at byte `row` of slot A.
float load_q(uint row, uint k, uint dt) {
    uint blk = row + (k >> 5) * q_block_bytes(dt);
    uint j = k & 31u;
    float d = a_half(blk);
    if (dt == DT_Q8_0) return d * float(int(a_byte(blk + 2u + j) << 24) >> 24);
    uint b = a_byte(blk + (dt == DT_Q4_0 ? 2u : 4u) + (j & 15u));
    uint nib = j < 16u ? (b & 15u) : (b >> 4);
    if (dt == DT_Q4_0) return d * float(int(nib) - 8);
    precise float p = d * float(nib);
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
            uvec4 ks = A_T == DT_Q8_0 ? blk * 32u + sub * 4u + uvec4(0u, 1u, 2u, 3u)
                                      : blk * 32u + sub * 2u + uvec4(0u, 1u, 16u, 17u);
            vec4 bv[TILE_C];
            for (uint c = 0u; c < TILE_C; c++) {
                bv[c] = vec4(uintBitsToFloat(b_w[pb[c] + ks.x]), uintBitsToFloat(b_w[pb[c] + ks.y]),
                             uintBitsToFloat(b_w[pb[c] + ks.z]), uintBitsToFloat(b_w[pb[c] + ks.w]));
            }
            for (uint r = 0u; r < TILE_R; r++) {
                uint p = pa[r] + blk * bb;
                float d = a_half(p);
                vec4 w;
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
                for (uint c = 0u; c < TILE_C; c++) acc[r * TILE_C + c] += dot(w, bv[c]);
            }
        }
        tile_store(t, acc);
    }
}
