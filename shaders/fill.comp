#version 450
// fill.comp: Fill (P0 = value) and Arange (P0 = start, P1 = step; P2 = 1) into a contiguous D of
// NE elements, dtype D_T.
#include "common.glsl"

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    float v = P2 == 0u ? P0F : P0F + P1F * float(idx % NE0);
    STORE_F(d_w, D_OFF + idx * dt_size(D_T), D_T, v);
}
