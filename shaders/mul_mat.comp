#version 450
// mul_mat.comp: MulMat with f32/f16/bf16 weights (A, rows contiguous) times f32 activations (B),
// tiled as mul_mat_tile.glsl describes: one workgroup per TILE_R x TILE_C tile of the result, its
// invocations striding over k = P0 (consecutive invocations read consecutive elements).
#include "common.glsl"
#include "mul_mat_tile.glsl"

void main() {
    Tile t = tile_of(group_index());
    if (t.w >= NE3) return;
    uint pa[TILE_R], pb[TILE_C];
    for (uint r = 0u; r < TILE_R; r++) pa[r] = tile_a_row(t, r);
    for (uint c = 0u; c < TILE_C; c++) pb[c] = tile_b_col(t, c);
    uint es = dt_size(A_T);
    float acc[TILE_N];
    for (uint a = 0u; a < TILE_N; a++) acc[a] = 0.0;
    for (uint k = gl_LocalInvocationID.x; k < P0; k += WG) {
        float bv[TILE_C];
        for (uint c = 0u; c < TILE_C; c++) bv[c] = uintBitsToFloat(b_w[pb[c] + k]);
        for (uint r = 0u; r < TILE_R; r++) {
            float av = LOAD_F(a_w, pa[r] + k * es, A_T);
            for (uint c = 0u; c < TILE_C; c++) acc[r * TILE_C + c] += av * bv[c];
        }
    }
    tile_store(t, acc);
}
