# ggml_rope_ext as today's ggml computes it (the libggml that llama-cpp-python 0.3.36 ships, called
# through ctypes), for crates/cpu/tests/ggml_diff.rs: the tests' ggml-sys-bleedingedge is b2757,
# older than rope's per-pair frequency factors (and its neox mode applied freq_scale twice).
# Each case: x [head_dim, n_head, n_tokens] uniform in [-1, 1) (numpy, seeded), positions, the
# frequency factors (or none), the parameters, and ggml's result (f32 printed with 9 digits).
#
# Run (llama-cpp-python 0.3.36 and numpy installed):
#   python3 crates/cpu/tests/data/rope_ext_ref.py > crates/cpu/tests/data/rope_ext.json
import ctypes as C, json, os
import numpy as np
import llama_cpp

LIB = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
base = C.CDLL(os.path.join(LIB, "libggml-base.so"), mode=C.RTLD_GLOBAL)
cpu = C.CDLL(os.path.join(LIB, "libggml-cpu.so"), mode=C.RTLD_GLOBAL)


class InitParams(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]


P = C.c_void_p
base.ggml_init.restype = P
base.ggml_init.argtypes = [InitParams]
base.ggml_new_tensor_1d.restype = P
base.ggml_new_tensor_1d.argtypes = [P, C.c_int, C.c_int64]
base.ggml_new_tensor_3d.restype = P
base.ggml_new_tensor_3d.argtypes = [P, C.c_int, C.c_int64, C.c_int64, C.c_int64]
base.ggml_get_data.restype = P
base.ggml_get_data.argtypes = [P]
base.ggml_rope_ext.restype = P
base.ggml_rope_ext.argtypes = [P, P, P, P, C.c_int, C.c_int, C.c_int] + [C.c_float] * 6
base.ggml_new_graph.restype = P
base.ggml_new_graph.argtypes = [P]
base.ggml_build_forward_expand.argtypes = [P, P]
base.ggml_free.argtypes = [P]
cpu.ggml_graph_compute_with_ctx.argtypes = [P, P, C.c_int]
F32, I32 = 0, 26  # GGML_TYPE_F32, GGML_TYPE_I32


def put(t, arr):
    C.memmove(base.ggml_get_data(t), arr.ctypes.data, arr.nbytes)


def rope(x, pos, ff, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext, attn, beta_fast, beta_slow):
    ctx = base.ggml_init(InitParams(16 << 20, None, False))
    hd, nh, nt = x.shape[2], x.shape[1], x.shape[0]
    a = base.ggml_new_tensor_3d(ctx, F32, hd, nh, nt)
    p = base.ggml_new_tensor_1d(ctx, I32, nt)
    put(a, x)
    put(p, pos)
    c = None
    if ff is not None:
        c = base.ggml_new_tensor_1d(ctx, F32, len(ff))
        put(c, ff)
    r = base.ggml_rope_ext(ctx, a, p, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext, attn, beta_fast, beta_slow)
    g = base.ggml_new_graph(ctx)
    base.ggml_build_forward_expand(g, r)
    assert cpu.ggml_graph_compute_with_ctx(ctx, g, 1) == 0
    out = np.ctypeslib.as_array(C.cast(base.ggml_get_data(r), C.POINTER(C.c_float)), shape=(x.size,)).copy()
    base.ggml_free(ctx)
    return out


rng = np.random.default_rng(29)
cases = []
# (mode 0 normal / 2 neox, head_dim, n_dims, factors?, freq_base, freq_scale, ext_factor, attn_factor, n_ctx_orig)
for mode, hd, nd, with_ff, fb, fs, ext, attn, orig in [
    (0, 32, 32, True, 500000.0, 1.0, 0.0, 1.0, 0),
    (2, 32, 32, True, 500000.0, 1.0, 0.0, 1.0, 0),
    (2, 32, 32, False, 10000.0, 0.125, 0.0, 1.0, 0),
    (2, 48, 32, True, 1000000.0, 0.25, 0.0, 1.0, 0),
    (0, 32, 32, True, 10000.0, 0.25, 1.0, 1.0, 2048),
    (2, 64, 64, True, 1000000.0, 0.125, 1.0, 0.9, 4096),
    (0, 24, 16, True, 10000.0, 0.5, 0.0, 0.8, 0),
]:
    nh, nt = 2, 5
    x = rng.uniform(-1, 1, size=(nt, nh, hd)).astype(np.float32)
    pos = np.array([0, 1, 17, 250, 3000], dtype=np.int32)
    ff = (1.0 + rng.uniform(0, 7, size=nd // 2)).astype(np.float32) if with_ff else None
    y = rope(x, pos, ff, nd, mode, orig, fb, fs, ext, attn, 32.0, 1.0)
    cases.append({
        "mode": "neox" if mode == 2 else "normal", "ne": [hd, nh, nt], "n_dims": nd, "freq_base": fb,
        "freq_scale": fs, "ext_factor": ext, "attn_factor": attn, "beta_fast": 32.0, "beta_slow": 1.0,
        "n_ctx_orig": orig, "x": [float(v) for v in x.ravel()], "pos": pos.tolist(),
        "freq_factors": None if ff is None else [float(v) for v in ff],
        "want": [float(f"{v:.9g}") for v in y],
    })
print(json.dumps({"generated_by": f"ggml_rope_ext of llama-cpp-python {llama_cpp.__version__}'s libggml (CPU)",
                  "command": "python3 crates/cpu/tests/data/rope_ext_ref.py", "cases": cases}))
