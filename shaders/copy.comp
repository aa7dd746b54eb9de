#version 450
// copy.comp: Cont and Cast. Reads strided A (dtype A_T), writes contiguous D (dtype D_T) over the
// shape NE. Same-dtype copies move raw bits (i32 exact, f16/bf16 payloads kept).
#include "common.glsl"

void main() {
    uint idx = global_index();
    uint n = NE0 * NE1 * NE2 * NE3;
    if (idx >= n) return;
    uint src = a_at(unravel(idx, pc_ne()));
    uint dst = D_OFF + idx * dt_size(D_T);
    if (A_T == D_T) {
        if (dt_size(A_T) == 4u) {
            d_w[dst >> 2] = a_w[src >> 2];
        } else {
            STORE_H(d_w, dst, LOAD_H(a_w, src));
        }
    } else if (A_T == DT_I32) {
        STORE_F(d_w, dst, D_T, float(int(a_w[src >> 2])));
    } else {
        STORE_F(d_w, dst, D_T, LOAD_F(a_w, src, A_T));
    }
}
