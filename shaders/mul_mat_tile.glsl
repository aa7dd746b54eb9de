// mul_mat_tile.glsl: the tiling shared by the matrix products (mul_mat.comp for float weights,
// quant.comp for block-quantized ones). A workgroup computes a tile of TILE_R rows of A (output
// elements i along NE0) by TILE_C columns of B (j along NE1) of one batch (i2, i3): its invocations
// split the dot products' k among them, each element of B is read once per tile and used for all
// TILE_R rows, each element of A once and used for all TILE_C columns; the TILE_R * TILE_C partial
// sums are then reduced over the workgroup (subgroupAdd and one shared-memory pass when the variant
// has USE_SUBGROUP, a shared-memory tree otherwise) and invocation t < TILE_R * TILE_C stores
// result t. Rows and columns past the edge are clamped for loads and never stored.
//
// NE = result shape [m, n, NE2, NE3] (D contiguous f32); A = weights [k, m, C_NE(2), C_NE(3)]
// (broadcast as ggml: a's i2 = i2 / (NE2 / C_NE(2))); B = f32 [k, n, NE2, NE3], rows contiguous.

#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

#define TILE_R 4u
#define TILE_C 4u
#define TILE_N 16u

shared float tile_red[TILE_N * WG];

// The tile this workgroup computes: first row, first column, and the batch indices (z, w).
struct Tile { uint i0; uint j0; uint z; uint w; };

Tile tile_of(uint g) {
    uint tm = (NE0 + TILE_R - 1u) / TILE_R, tn = (NE1 + TILE_C - 1u) / TILE_C;
    uint per_batch = tm * tn;
    uint b = g / per_batch, r = g % per_batch;
    return Tile((r % tm) * TILE_R, (r / tm) * TILE_C, b % NE2, b / NE2);
}

// Byte offset of row i of A (clamped to the last row) for the tile's batch.
uint tile_a_row(Tile t, uint r) {
    uint i = min(t.i0 + r, NE0 - 1u);
    uint a2 = t.z / (NE2 / C_NE(2)), a3 = t.w / (NE3 / C_NE(3));
    return A_OFF + i * A_NB(1) + a2 * A_NB(2) + a3 * A_NB(3);
}

// Word index of column j of B (clamped to the last column) for the tile's batch.
uint tile_b_col(Tile t, uint c) {
    uint j = min(t.j0 + c, NE1 - 1u);
    return (B_OFF >> 2) + ((j * B_NB(1) + t.z * B_NB(2) + t.w * B_NB(3)) >> 2);
}

// Reduces every invocation's partial sums over the workgroup and stores the tile's results.
void tile_store(Tile t, float acc[TILE_N]) {
    uint l = gl_LocalInvocationID.x;
#ifdef USE_SUBGROUP
    for (uint a = 0u; a < TILE_N; a++) {
        float s = subgroupAdd(acc[a]);
        if (subgroupElect()) tile_red[a * WG + gl_SubgroupID] = s;
    }
    barrier();
    if (l < TILE_N) {
        float s = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) s += tile_red[l * WG + i];
        tile_red[l * WG] = s;
    }
#else
    for (uint a = 0u; a < TILE_N; a++) tile_red[a * WG + l] = acc[a];
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s) {
            for (uint a = 0u; a < TILE_N; a++) tile_red[a * WG + l] += tile_red[a * WG + l + s];
        }
        barrier();
    }
#endif
    if (l < TILE_N) {
        uint i = t.i0 + l / TILE_C, j = t.j0 + l % TILE_C;
        if (i < NE0 && j < NE1) {
            d_w[(D_OFF >> 2) + i + NE0 * (j + NE1 * (t.z + NE2 * t.w))] = floatBitsToUint(tile_red[l * WG]);
        }
    }
}
