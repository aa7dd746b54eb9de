// common.glsl: the push-constant block, buffer bindings, dtype load/store helpers and dispatch
// indexing shared by every op family. The push-constant layout mirrors `vulkan::push::Push`
// (crates/vulkan/src/push.rs) word for word; change both together.
//
// Every tensor is addressed by a byte offset into a buffer bound as an array of 32-bit words.
// Slot A is the main (full-shape) operand, B and C are broadcast/auxiliary operands, D the result.

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(std430, set = 0, binding = 0) buffer BufA { uint a_w[]; };
layout(std430, set = 0, binding = 1) buffer BufB { uint b_w[]; };
layout(std430, set = 0, binding = 2) buffer BufC { uint c_w[]; };
layout(std430, set = 0, binding = 3) buffer BufD { uint d_w[]; };

layout(push_constant) uniform Push { uint u[32]; } pc;

// word indices of `Push`
#define NE0 pc.u[0]
#define NE1 pc.u[1]
#define NE2 pc.u[2]
#define NE3 pc.u[3]
#define TYPES pc.u[4]
#define D_OFF pc.u[5]
#define A_OFF pc.u[6]
#define A_NB(i) pc.u[7 + (i)]
#define B_OFF pc.u[11]
#define B_NE(i) pc.u[12 + (i)]
#define B_NB(i) pc.u[16 + (i)]
#define C_OFF pc.u[20]
#define C_NE(i) pc.u[21 + (i)]
#define C_NB(i) pc.u[25 + (i)]
#define P0 pc.u[29]
#define P1 pc.u[30]
#define P2 pc.u[31]
#define P0F uintBitsToFloat(pc.u[29])
#define P1F uintBitsToFloat(pc.u[30])
#define P2F uintBitsToFloat(pc.u[31])

// dtype codes, as `vulkan::push::dtype_code`
#define DT_F32 0u
#define DT_F16 1u
#define DT_BF16 2u
#define DT_I32 3u
#define A_T (TYPES & 15u)
#define B_T ((TYPES >> 4) & 15u)
#define C_T ((TYPES >> 8) & 15u)
#define D_T ((TYPES >> 12) & 15u)

#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)

float word_to_f(uint w, uint off, uint dt) {
    if (dt == DT_F32) return uintBitsToFloat(w);
    if (dt == DT_I32) return float(int(w));
    uint h = (off & 2u) != 0u ? (w >> 16) : (w & 0xffffu);
    if (dt == DT_F16) return unpackHalf2x16(h).x;
    return uintBitsToFloat(h << 16);
}

// f32 -> f16 bits, round to nearest even (as the `half` crate), NaN stays NaN.
uint f32_to_f16_bits(float v) {
    uint x = floatBitsToUint(v);
    uint sign = (x >> 16) & 0x8000u;
    uint ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u);
    if (ax >= 0x477ff000u) return sign | 0x7c00u; // rounds to >= 65520: inf
    if (ax < 0x38800000u) { // subnormal half (or zero)
        if (ax < 0x33000000u) return sign; // < 2^-25: rounds to 0
        uint e = ax >> 23;
        uint m = (ax & 0x7fffffu) | 0x800000u;
        uint shift = 126u - e; // 14..24 (bits dropped: shift)
        uint hm = m >> shift;
        uint rem = m & ((1u << shift) - 1u);
        uint half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (hm & 1u) != 0u)) hm += 1u;
        return sign | hm;
    }
    uint h = ((ax >> 13) - (112u << 10));
    uint rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h += 1u;
    return sign | h;
}

// f32 -> bf16 bits, round to nearest even; NaN stays (quiet) NaN.
uint f32_to_bf16_bits(float v) {
    uint x = floatBitsToUint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return ((x >> 16) | 0x40u) & 0xffffu;
    return ((x + 0x7fffu + ((x >> 16) & 1u)) >> 16) & 0xffffu;
}

// float -> i32: truncation toward zero, saturating, NaN -> 0.
int f_to_i32(float v) {
    if (isnan(v)) return 0;
    if (v >= 2147483648.0) return 2147483647;
    if (v <= -2147483648.0) return int(0x80000000u);
    return int(v);
}

#define LOAD_F(W, off, dt) word_to_f(W[(off) >> 2], (off), (dt))
#define LOAD_U(W, off) W[(off) >> 2]
#define LOAD_I(W, off) int(W[(off) >> 2])
#define LOAD_H(W, off) ((((off) & 2u) != 0u) ? (W[(off) >> 2] >> 16) : (W[(off) >> 2] & 0xffffu))

// Stores 16 bits without disturbing the other half of the word (other invocations may own it).
#define STORE_H(W, off, bits) { uint o_ = (off); uint s_ = (o_ & 2u) * 8u; \
    atomicAnd(W[o_ >> 2], ~(0xffffu << s_)); atomicOr(W[o_ >> 2], ((bits) & 0xffffu) << s_); }

#define STORE_F(W, off, dt, v) { uint so_ = (off); uint sd_ = (dt); float sv_ = (v); \
    if (sd_ == DT_F32) W[so_ >> 2] = floatBitsToUint(sv_); \
    else if (sd_ == DT_I32) W[so_ >> 2] = uint(f_to_i32(sv_)); \
    else if (sd_ == DT_F16) STORE_H(W, so_, f32_to_f16_bits(sv_)) \
    else STORE_H(W, so_, f32_to_bf16_bits(sv_)) }

uint dt_size(uint dt) { return (dt == DT_F16 || dt == DT_BF16) ? 2u : 4u; }

// Linear invocation index over a 2-D grid of workgroups (x up to 65535 groups).
uint global_index() {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
}

// Linear workgroup index over a 2-D grid (one workgroup per row).
uint group_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// Splits a linear index over NE into (i0, i1, i2, i3).
uvec4 unravel(uint idx, uvec4 ne) {
    uint i0 = idx % ne.x; idx /= ne.x;
    uint i1 = idx % ne.y; idx /= ne.y;
    uint i2 = idx % ne.z;
    uint i3 = idx / ne.z;
    return uvec4(i0, i1, i2, i3);
}

uvec4 pc_ne() { return uvec4(NE0, NE1, NE2, NE3); }
uint a_at(uvec4 i) { return A_OFF + i.x * A_NB(0) + i.y * A_NB(1) + i.z * A_NB(2) + i.w * A_NB(3); }
// B and C broadcast to the iteration shape (ggml's repeat rule).
uint b_at(uvec4 i) {
    return B_OFF + (i.x % B_NE(0)) * B_NB(0) + (i.y % B_NE(1)) * B_NB(1) + (i.z % B_NE(2)) * B_NB(2) + (i.w % B_NE(3)) * B_NB(3);
}
uint c_at(uvec4 i) {
    return C_OFF + (i.x % C_NE(0)) * C_NB(0) + (i.y % C_NE(1)) * C_NB(1) + (i.z % C_NE(2)) * C_NB(2) + (i.w % C_NE(3)) * C_NB(3);
}
