#version 450
// quant.comp: the ops that read ggml's block-quantized formats (A_T = DT_Q8_0, DT_Q4_0 or DT_Q4_1;
// 32 elements per block, little-endian f16 scales), the counterpart of the CPU's `ops/quant.rs`.
// Each element is dequantized as ggml's `dequantize_row_*` defines it: q8_0 d * q, q4_0
// d * (nibble - 8), q4_1 d * nibble + m (a rounded product then a rounded sum: `precise`, no FMA).
//
// P2 = 0, GetRows: one invocation per result element. NE = result shape [ne0, m, ne2, ne3],
//   A = quantized table (contiguous rows of A_NB(1) bytes), B = i32 ids [m, ne2, ne3], D = f32
//   contiguous; P0 = rows of A, P1 = status word (set, and 0 written, for an id outside [0, P0)).
// P2 = 1, MulMat: one workgroup per output element (each invocation whole blocks), reduced in the
//   workgroup as mul_mat.comp. NE = result shape, A = weights
//   [k, m, C_NE(2), C_NE(3)] (broadcast as ggml), B = f32 [k, n, NE2, NE3] rows contiguous, D = f32
//   contiguous; P0 = k. Products are summed in f32 over the dequantized weights (the CPU quantizes
//   b's columns to 8 bits first, as ggml does; the two agree within that rounding).
#include "common.glsl"
#include "reduce_wg.glsl"

#define DT_Q8_0 4u
#define DT_Q4_0 5u
#define DT_Q4_1 6u

uint q_block_bytes(uint dt) { return dt == DT_Q8_0 ? 34u : (dt == DT_Q4_0 ? 18u : 20u); }

// Byte `off` of slot A.
uint a_byte(uint off) { return (a_w[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }

// The f16 at even byte `off` of slot A.
float a_half(uint off) { return unpackHalf2x16(a_w[off >> 2] >> ((off & 2u) * 8u)).x; }

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
        uint g = group_index();
        if (g >= NE0 * NE1 * NE2 * NE3) return;
        uvec4 o = unravel(g, pc_ne());
        uint a2 = o.z / (NE2 / C_NE(2)), a3 = o.w / (NE3 / C_NE(3));
        uint pa = A_OFF + o.x * A_NB(1) + a2 * A_NB(2) + a3 * A_NB(3);
        uint pb = (B_OFF >> 2) + ((o.y * B_NB(1) + o.z * B_NB(2) + o.w * B_NB(3)) >> 2);
        // each invocation takes whole blocks: their scales read once, two nibbles per byte
        uint bb = q_block_bytes(A_T);
        float s = 0.0;
        for (uint blk = gl_LocalInvocationID.x; blk < (P0 >> 5); blk += WG) {
            uint p = pa + blk * bb, pk = pb + blk * 32u;
            float d = a_half(p);
            if (A_T == DT_Q8_0) {
                for (uint j = 0u; j < 32u; j++) {
                    s += d * float(int(a_byte(p + 2u + j) << 24) >> 24) * uintBitsToFloat(b_w[pk + j]);
                }
            } else {
                bool q41 = A_T == DT_Q4_1;
                float m = q41 ? a_half(p + 2u) : 0.0;
                for (uint j = 0u; j < 16u; j++) {
                    uint b = a_byte(p + (q41 ? 4u : 2u) + j);
                    float lo, hi;
                    if (q41) {
                        precise float pl = d * float(b & 15u), ph = d * float(b >> 4);
                        precise float rl = pl + m, rh = ph + m;
                        lo = rl; hi = rh;
                    } else {
                        lo = d * float(int(b & 15u) - 8);
                        hi = d * float(int(b >> 4) - 8);
                    }
                    s += lo * uintBitsToFloat(b_w[pk + j]) + hi * uintBitsToFloat(b_w[pk + j + 16u]);
                }
            }
        }
        s = wg_sum(s);
        if (gl_LocalInvocationID.x == 0u) d_w[(D_OFF >> 2) + g] = floatBitsToUint(s);
    }
}
