// reduce_wg.glsl: workgroup-wide reductions (sum, max, argmax pairs), with subgroup operations when
// the variant is compiled with USE_SUBGROUP and a shared-memory tree otherwise. Every invocation of
// the workgroup must call these (they contain barriers); each returns the result to all invocations.

#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_vote : require
#endif

shared float red_f[WG];
shared uint red_u[WG];

#ifdef USE_SUBGROUP
// Partial results per subgroup (at most WG / 4 subgroups; subgroup size is at least 4).
float wg_sum(float v) {
    float s = subgroupAdd(v);
    if (subgroupElect()) red_f[gl_SubgroupID] = s;
    barrier();
    float t = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++) t += red_f[i];
    barrier();
    return t;
}
float wg_max(float v) {
    float s = subgroupMax(v);
    // subgroupMax may drop NaN; propagate it explicitly.
    bool anynan = subgroupAny(isnan(v));
    if (subgroupElect()) red_f[gl_SubgroupID] = anynan ? uintBitsToFloat(0x7fc00000u) : s;
    barrier();
    float t = NEG_INF;
    bool n = false;
    for (uint i = 0u; i < gl_NumSubgroups; i++) { float x = red_f[i]; n = n || isnan(x); t = max(t, x); }
    barrier();
    return n ? uintBitsToFloat(0x7fc00000u) : t;
}
#else
float wg_sum(float v) {
    uint l = gl_LocalInvocationID.x;
    red_f[l] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s) red_f[l] += red_f[l + s];
        barrier();
    }
    float t = red_f[0];
    barrier();
    return t;
}
float wg_max(float v) {
    uint l = gl_LocalInvocationID.x;
    red_f[l] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s) {
            float x = red_f[l], y = red_f[l + s];
            red_f[l] = (isnan(x) || isnan(y)) ? uintBitsToFloat(0x7fc00000u) : max(x, y);
        }
        barrier();
    }
    float t = red_f[0];
    barrier();
    return t;
}
#endif

// (value, index) is better than (bv, bi) for argmax: NaN beats numbers, larger wins, ties keep the
// lower index.
bool argmax_better(float v, uint i, float bv, uint bi) {
    bool vn = isnan(v), bn = isnan(bv);
    if (vn != bn) return vn;
    if (!vn && v != bv) return v > bv;
    return i < bi;
}

// Shared-memory argmax (the subgroup path gains little here and ties need care).
uint wg_argmax(float v, uint i) {
    uint l = gl_LocalInvocationID.x;
    red_f[l] = v;
    red_u[l] = i;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s && argmax_better(red_f[l + s], red_u[l + s], red_f[l], red_u[l])) {
            red_f[l] = red_f[l + s];
            red_u[l] = red_u[l + s];
        }
        barrier();
    }
    uint t = red_u[0];
    barrier();
    return t;
}
