# Tiny random models of the architectures and RoPE variants no real file here has, run by
# llama.cpp, for crates/runner/tests/tiny_arch.rs.
#
# Each model is a recipe: its GGUF metadata (typed) and its tensors (name, ggml shape, dtype and a
# generator), written to tiny_arch.json with llama.cpp's logits at every position of a fixed token
# sequence. The Rust test writes the same GGUF from the recipe with the crate's own writer
# (`gguf::write`) and compares. Generators, shared with the Rust test (keep both in step; the
# fixture's `fnv` per tensor catches a drift):
#   uniform(amp): element j of tensor t (its index in the list) is amp * (k - 1024) / 1024 with
#                 k = splitmix64((seed << 48) ^ (t << 32) ^ j) >> 53 (11 bits), amp a power of
#                 two: every value is exact in f16 and f32.
#   norm:         1 + (k - 1024) / 4096 (same k).
#   freqs:        1 + j / 2 (LLaMA 3-style per-pair RoPE frequency factors, rising with the pair).
# The vocabulary is a SentencePiece ("llama") one: <unk>, <s>, </s>, the 256 byte tokens and a
# few words; the tokens are fed by id, so only its size matters.
#
# Models: qwen3 (QK norms, NeoX RoPE, head width 32 over a 64-wide residual stream), llama with
# linear RoPE scaling (factor 4), llama with rope_freqs.weight (LLaMA 3's per-pair factors),
# llama with YaRN (factor 4, original context 32), and gemma3 whose sliding-window layers are a
# per-layer bool array (`gemma3.attention.sliding_window_pattern` = [false, true, true]: layer 0
# global, no period gives that) with a window of 5, and gemma3 with linear RoPE scaling (factor 8,
# as Gemma 3 4B; NeoX pairs) and a period of 2: llama.cpp scales only the global layer 1.
#
# llama.cpp decodes the sequence one token per step on the CPU (flash attention off) and the
# fixture keeps the logits after every token at the positions in POSITIONS.
#
# Run (llama-cpp-python 0.3.36 and numpy installed; gguf-py from llama.cpp's source tree):
#   PYTHONPATH=/path/to/llama.cpp/gguf-py python3 crates/runner/tests/data/tiny_arch_ref.py \
#       > crates/runner/tests/data/tiny_arch.json
import json, os, sys, tempfile
import numpy as np
import gguf
import llama_cpp as lc

SEED = 29
N_TOK = 48
POSITIONS = [0, 3, 8, 15, 22, 31, 39, 47]
TOKENS = [(7 * i * i + 13 * i + 5) % 261 + 3 for i in range(N_TOK)]

M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(M64)
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def values(gen, t, n):
    j = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        k = (splitmix64((np.uint64(SEED) << np.uint64(48)) ^ (np.uint64(t) << np.uint64(32)) ^ j) >> np.uint64(53))
    k = k.astype(np.float64) - 1024.0
    if gen["kind"] == "uniform":
        return gen["amp"] * k / 1024.0
    if gen["kind"] == "norm":
        return 1.0 + k / 4096.0
    if gen["kind"] == "freqs":
        return 1.0 + np.arange(n, dtype=np.float64) / 2.0
    raise ValueError(gen)


def fnv1a(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & M64
    return f"{h:016x}"


def vocab():
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)] + ["\u2581a", "\u2581b", "\u2581c", "\u2581the", "\u2581and"]
    types = [2, 3, 3] + [6] * 256 + [1] * 5
    return [
        ["tokenizer.ggml.model", "str", "llama"],
        ["tokenizer.ggml.tokens", "str_array", toks],
        ["tokenizer.ggml.scores", "f32_array", [0.0] * len(toks)],
        ["tokenizer.ggml.token_type", "i32_array", types],
        ["tokenizer.ggml.unknown_token_id", "u32", 0],
        ["tokenizer.ggml.bos_token_id", "u32", 1],
        ["tokenizer.ggml.eos_token_id", "u32", 2],
        ["tokenizer.ggml.add_bos_token", "bool", False],
    ], len(toks)


def model(name, arch, *, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=128, extra_kv=(),
          qk_norm=False, post_norms=False, rope_freqs=False, base=10000.0, ctx=128):
    kv_vocab, n_vocab = vocab()
    a = lambda s: f"{arch}.{s}"
    kv = [
        ["general.architecture", "str", arch],
        [a("context_length"), "u32", ctx],
        [a("embedding_length"), "u32", n_embd],
        [a("block_count"), "u32", n_layer],
        [a("feed_forward_length"), "u32", n_ff],
        [a("attention.head_count"), "u32", n_head],
        [a("attention.head_count_kv"), "u32", n_head_kv],
        [a("attention.key_length"), "u32", head_dim],
        [a("attention.value_length"), "u32", head_dim],
        [a("attention.layer_norm_rms_epsilon"), "f32", 1e-6],
        [a("rope.freq_base"), "f32", base],
        [a("rope.dimension_count"), "u32", head_dim],
    ] + [list(x) for x in extra_kv] + kv_vocab
    q, kvw = n_head * head_dim, n_head_kv * head_dim
    u = lambda amp: {"kind": "uniform", "amp": amp}
    norm = {"kind": "norm"}
    t = [["token_embd.weight", [n_embd, n_vocab], "f16", u(0.5)]]
    if rope_freqs:
        t.append(["rope_freqs.weight", [head_dim // 2], "f32", {"kind": "freqs"}])
    for i in range(n_layer):
        b = lambda s: f"blk.{i}.{s}.weight"
        t += [
            [b("attn_norm"), [n_embd], "f32", norm],
            [b("attn_q"), [n_embd, q], "f16", u(0.25)],
            [b("attn_k"), [n_embd, kvw], "f16", u(0.25)],
            [b("attn_v"), [n_embd, kvw], "f16", u(0.25)],
            [b("attn_output"), [q, n_embd], "f16", u(0.25)],
        ]
        if qk_norm:
            t += [[b("attn_q_norm"), [head_dim], "f32", norm], [b("attn_k_norm"), [head_dim], "f32", norm]]
        if post_norms:
            t += [[b("post_attention_norm"), [n_embd], "f32", norm], [b("post_ffw_norm"), [n_embd], "f32", norm]]
        t += [
            [b("ffn_norm"), [n_embd], "f32", norm],
            [b("ffn_gate"), [n_embd, n_ff], "f16", u(0.25)],
            [b("ffn_up"), [n_embd, n_ff], "f16", u(0.25)],
            [b("ffn_down"), [n_ff, n_embd], "f16", u(0.125)],
        ]
    t += [["output_norm.weight", [n_embd], "f32", norm], ["output.weight", [n_embd, n_vocab], "f16", u(0.25)]]
    tensors = []
    for i, (tn, ne, dt, gen) in enumerate(t):
        v = values(gen, i, int(np.prod(ne))).astype(np.float16 if dt == "f16" else np.float32)
        tensors.append({"name": tn, "ne": ne, "dtype": dt, "gen": gen, "fnv": fnv1a(v.tobytes())})
    return {"name": name, "kv": kv, "tensors": tensors}


MODELS = [
    model("qwen3", "qwen3", head_dim=32, qk_norm=True, base=1000000.0),
    model("llama_linear", "llama", extra_kv=[["llama.rope.scaling.type", "str", "linear"],
                                             ["llama.rope.scaling.factor", "f32", 4.0]]),
    model("llama_rope_freqs", "llama", rope_freqs=True, base=500000.0),
    model("llama_yarn", "llama", extra_kv=[["llama.rope.scaling.type", "str", "yarn"],
                                           ["llama.rope.scaling.factor", "f32", 4.0],
                                           ["llama.rope.scaling.original_context_length", "u32", 32]]),
    model("gemma3_swa_layers", "gemma3", n_layer=3, n_head_kv=1, qk_norm=True, post_norms=True, base=1000000.0,
          extra_kv=[["gemma3.attention.sliding_window", "u32", 5],
                    ["gemma3.attention.sliding_window_pattern", "bool_array", [False, True, True]],
                    ["gemma3.rope.freq_base_swa", "f32", 10000.0]]),
    model("gemma3_linear", "gemma3", n_layer=3, n_head_kv=1, qk_norm=True, post_norms=True, base=1000000.0,
          extra_kv=[["gemma3.attention.sliding_window", "u32", 5],
                    ["gemma3.attention.sliding_window_pattern", "u32", 2],
                    ["gemma3.rope.scaling.type", "str", "linear"],
                    ["gemma3.rope.scaling.factor", "f32", 8.0]]),
]

VT = gguf.GGUFValueType
KV_TYPES = {
    "u32": (VT.UINT32, None), "f32": (VT.FLOAT32, None), "str": (VT.STRING, None), "bool": (VT.BOOL, None),
    "str_array": (VT.ARRAY, VT.STRING), "f32_array": (VT.ARRAY, VT.FLOAT32), "i32_array": (VT.ARRAY, VT.INT32),
    "bool_array": (VT.ARRAY, VT.BOOL),
}


def write(m, path):
    arch = m["kv"][0][2]
    w = gguf.GGUFWriter(path, arch)
    for key, ty, val in m["kv"]:
        if key == "general.architecture":
            continue
        vt, sub = KV_TYPES[ty]
        w.add_key_value(key, val, vt, sub_type=sub)
    for i, t in enumerate(m["tensors"]):
        n = int(np.prod(t["ne"]))
        v = values(t["gen"], i, n).astype(np.float16 if t["dtype"] == "f16" else np.float32)
        w.add_tensor(t["name"], v.reshape(list(reversed(t["ne"]))))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(path):
    mp = lc.llama_model_default_params()
    model = lc.llama_model_load_from_file(path.encode(), mp)
    assert model, path
    nv = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(model))
    cp = lc.llama_context_default_params()
    cp.n_ctx = 128
    cp.n_batch = 128
    cp.n_ubatch = 128
    cp.n_threads = 2
    cp.n_threads_batch = 2
    cp.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = lc.llama_init_from_model(model, cp)
    rows = []
    for tok in TOKENS:
        one = (lc.llama_token * 1)(tok)
        assert lc.llama_decode(ctx, lc.llama_batch_get_one(one, 1)) == 0
        rows.append(np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, -1), shape=(nv,)).copy())
    lc.llama_free(ctx)
    lc.llama_model_free(model)
    return rows


lc.llama_backend_init()
out = {
    "generated_by": f"llama.cpp through llama-cpp-python {lc.__version__} (CPU, flash attention off), "
    "one token per step; tiny random models written by gguf-py from the recipes below",
    "command": "PYTHONPATH=llama.cpp/gguf-py python3 crates/runner/tests/data/tiny_arch_ref.py",
    "seed": SEED,
    "tokens": TOKENS,
    "positions": POSITIONS,
    "models": [],
}
with tempfile.TemporaryDirectory() as d:
    for m in MODELS:
        path = os.path.join(d, m["name"] + ".gguf")
        write(m, path)
        rows = run(path)
        m["logits"] = [[float(f"{x:.6g}") for x in rows[p]] for p in POSITIONS]
        m["argmax"] = [int(np.argmax(r)) for r in rows]
        top2 = [np.sort(r)[-2:] for r in rows]
        m["margins"] = [float(f"{b - a:.4g}") for a, b in top2]
        print(f"{m['name']}: {os.path.getsize(path)} bytes, logits spread {np.std(rows[-1]):.3f}, "
              f"min top-2 margin {min(m['margins']):.4f}", file=sys.stderr)
        out["models"].append(m)
print(json.dumps(out, separators=(",", ":")))
