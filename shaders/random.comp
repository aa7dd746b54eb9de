#version 450
// random.comp: RandomUniform, bit-identical to `graph::philox::uniform` (Philox4x32-10 with
// umulExtended for the 64-bit products). NE = result shape [n, rows..]; A = keys i32 [4, rows..]
// (seed lo, seed hi, step lo, step hi); P0 = stream; D contiguous f32.
#include "common.glsl"

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    uvec4 i = unravel(idx, pc_ne());
    uint kb = a_at(uvec4(0u, i.yzw)) >> 2;
    uvec2 key = uvec2(a_w[kb], a_w[kb + 1u]);
    uvec4 c = uvec4(i.x, P0, a_w[kb + 2u], a_w[kb + 3u]);
    for (uint round_ = 0u; round_ < 10u; round_++) {
        if (round_ > 0u) key += uvec2(0x9E3779B9u, 0xBB67AE85u);
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ key.x, lo1, hi0 ^ c.w ^ key.y, lo0);
    }
    d_w[(D_OFF >> 2) + idx] = floatBitsToUint(float(c.x >> 8) * (1.0 / 16777216.0));
}
