#version 450
// scatter.comp: ScatterAdd, second pass (the first copies `base` into D). One invocation per row
// adds the row's values `P2..P0` in order (deterministic, no float atomics); the host runs the
// row's m values as consecutive segments, one dispatch each, so that no invocation loops more
// than a segment (lavapipe silently ends loops past 65,535 iterations in one dispatch). NE = base
// shape, B = ids [m, rows..], C = values (same shape as ids, or a single value when P1 = 1), D =
// result (contiguous f32, already holding `base` and the earlier segments).
#include "common.glsl"

void main() {
    uint row = global_index();
    uint nrows = NE1 * NE2 * NE3;
    if (row >= nrows) return;
    uvec4 r = unravel(row * NE0, pc_ne());
    uint ib = B_OFF + r.y * B_NB(1) + r.z * B_NB(2) + r.w * B_NB(3);
    uint vb = C_OFF + r.y * C_NB(1) + r.z * C_NB(2) + r.w * C_NB(3);
    uint out_ = (D_OFF >> 2) + row * NE0;
    for (uint j = P2; j < P0; j++) {
        int id = LOAD_I(b_w, ib + j * 4u);
        if (id < 0 || uint(id) >= NE0) continue;
        float v = P1 != 0u ? uintBitsToFloat(c_w[C_OFF >> 2]) : uintBitsToFloat(c_w[(vb >> 2) + j]);
        d_w[out_ + uint(id)] = floatBitsToUint(uintBitsToFloat(d_w[out_ + uint(id)]) + v);
    }
}
