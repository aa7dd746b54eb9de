# llama.cpp beside `cargo xtask bench grammar` (--llama-python): its grammar sampler on the same
# GGUF vocabulary, the same GBNF text and the same token stream, through llama-cpp-python's
# low-level API. For each token of the stream: `llama_sampler_apply` on a full row of the vocabulary
# (llama.cpp's grammar-first path: every token's logit set to -inf where the grammar refuses it),
# then `llama_sampler_accept`; each timed alone (the row is refilled between, untimed). llama.cpp
# keeps no mask cache, so one pass is its cold and warm alike. Prints one JSON object on stdout
# with p50/p99 in microseconds per grammar; llama.cpp's own log goes to stderr.
# Usage: python3 llama_cpp_grammar_peer.py MODEL.gguf INPUT.json
# INPUT.json: {"stream": [token ids], "grammars": {"name": "GBNF text", ...}}
import ctypes, json, statistics, sys, time
import numpy as np
import llama_cpp as lc

path, input_path = sys.argv[1], sys.argv[2]
spec = json.load(open(input_path))
lc.llama_backend_init()
mp = lc.llama_model_default_params()
mp.vocab_only = True
model = lc.llama_model_load_from_file(path.encode(), mp)
vocab = lc.llama_model_get_vocab(model)
nv = lc.llama_vocab_n_tokens(vocab)
base = np.zeros(nv, dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
base["id"] = np.arange(nv)
base["logit"] = np.random.default_rng(3).uniform(0, 8, nv).astype(np.float32)
row = base.copy()
cur = lc.llama_token_data_array(
    row.ctypes.data_as(ctypes.POINTER(lc.llama_token_data)), nv, -1, False
)


def pct(v, q):
    v = sorted(v)
    return v[round((len(v) - 1) * q)] * 1e6


out = {"llama_cpp_python": lc.__version__, "vocab": nv, "grammars": {}}
for name, text in spec["grammars"].items():
    smpl = lc.llama_sampler_init_grammar(vocab, text.encode(), b"root")
    if not smpl:
        sys.exit(f"llama.cpp refused the {name} grammar")
    apply, accept = [], []
    for t in spec["stream"]:
        row[:] = base
        cur.selected = -1
        cur.sorted = False
        t0 = time.perf_counter()
        lc.llama_sampler_apply(smpl, ctypes.byref(cur))
        apply.append(time.perf_counter() - t0)
        if not np.isfinite(row["logit"][t]):
            sys.exit(f"llama.cpp's {name} grammar refuses the stream's token {t}")
        t0 = time.perf_counter()
        lc.llama_sampler_accept(smpl, t)
        accept.append(time.perf_counter() - t0)
    lc.llama_sampler_free(smpl)
    out["grammars"][name] = {
        "apply_p50_us": pct(apply, 0.5),
        "apply_p99_us": pct(apply, 0.99),
        "accept_p50_us": pct(accept, 0.5),
        "accept_p99_us": pct(accept, 0.99),
    }
print(json.dumps(out))
