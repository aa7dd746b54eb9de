// fixed64.glsl: 64-bit unsigned integers as (lo, hi) pairs of 32-bit words (no shaderInt64), the
// exact fixed-point weights floor(w 2^40) of the sampling shaders, and their exponential. Shared by
// random.comp (categorical) and sort.comp (top_p_mask) so both weigh a logit the same way.

// 64-bit unsigned integers as (lo, hi).
uvec2 add64(uvec2 a, uvec2 b) {
    uint carry;
    uint lo = uaddCarry(a.x, b.x, carry);
    return uvec2(lo, a.y + b.y + carry);
}
bool gt64(uvec2 a, uvec2 b) { return a.y > b.y || (a.y == b.y && a.x > b.x); }

// High 64 bits of the 128-bit product of u (hi word u.y) and t.
uvec2 mulhi64(uvec2 u, uvec2 t) {
    uint h00, l00, h01, l01, h10, l10, h11, l11;
    umulExtended(u.x, t.x, h00, l00);
    umulExtended(u.x, t.y, h01, l01);
    umulExtended(u.y, t.x, h10, l10);
    umulExtended(u.y, t.y, h11, l11);
    uint c1, c2;
    uint mid = uaddCarry(l01, l10, c1);
    mid = uaddCarry(mid, h00, c2);
    uvec2 r = uvec2(l11, h11);
    r = add64(r, uvec2(h01, 0u));
    r = add64(r, uvec2(h10, 0u));
    return add64(r, uvec2(c1 + c2, 0u));
}

// The weight of x: exp2((x - M) s log2 e) as x a + b, `precise` so that the chunk sums and the
// rescan compute the same bits (no contraction into a fused multiply-add at one site only).
float weight(float x, float a, float b) {
    precise float y = x * a + b;
    return exp2(y);
}

// floor(w 2^40) for 0 <= w <= 1, exactly.
uvec2 fixed40(float w) {
    float hi = floor(w * 256.0);
    float lo = w * 1099511627776.0 - hi * 4294967296.0;
    return uvec2(uint(lo), uint(hi));
}

// a - b for a >= b.
uvec2 sub64(uvec2 a, uvec2 b) {
    uint borrow;
    uint lo = usubBorrow(a.x, b.x, borrow);
    return uvec2(lo, a.y - b.y - borrow);
}

// The low 64 bits of j q.
uvec2 mul64(uint j, uvec2 q) {
    uint hi, lo;
    umulExtended(j, q.x, hi, lo);
    return uvec2(lo, hi + j * q.y);
}
