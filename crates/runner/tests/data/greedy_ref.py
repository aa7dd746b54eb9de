# Greedy decoding of Gemma 3 270M (Q4_K_M) or SmolLM2-135M-Instruct (Q4_1) with llama.cpp, for
# crates/runner/tests/gemma3.rs and smollm2.rs.
# Writes, per prompt, llama.cpp's prompt tokens (BOS added, special tokens parsed), the 64 tokens
# it chooses greedily (the argmax of each step's raw logits) and each step's gap between its two
# largest logits. The prompt is decoded in one batch, then one token per step, on the CPU, without
# flash attention (its CPU path rounds the queries to f16 and accumulates the values in f16);
# `flash_attention_moves` records, per step, how far llama.cpp's own logits move (the largest
# change among the 10 largest) when the same tokens go through its flash-attention path: the
# scale of llama.cpp's own arithmetic noise on this model.
#
# Run (llama-cpp-python 0.3.36 and numpy installed; the models fetched by
# `cargo xtask fetch-model gemma3` and `cargo xtask fetch-model`):
#   python3 crates/runner/tests/data/greedy_ref.py gemma3 target/models/gemma-3-270m-q4_k_m.gguf \
#       > crates/runner/tests/data/gemma3_greedy.json
#   python3 crates/runner/tests/data/greedy_ref.py smollm2 target/models/SmolLM2-135M-Instruct.Q4_1.gguf \
#       > crates/runner/tests/data/smollm2_greedy.json
import ctypes, json, sys
import numpy as np
import llama_cpp as lc

N = 64
# A text long enough that prompt plus generation pass 600 positions: Gemma 3's 512-token sliding
# window of five layers in six then hides the start of the prompt from them.
LONG = " ".join(
    f"Day {i}: the farmer counted {i * 7 % 23 + 2} sheep, {i * 5 % 11 + 1} cows and {i % 4 + 1} dogs."
    for i in range(1, 41)
) + " On the last day the farmer counted"
CHAT = {
    "gemma3": "<start_of_turn>user\nWrite a haiku about autumn leaves.<end_of_turn>\n<start_of_turn>model\n",
    "smollm2": "<|im_start|>user\nWrite a haiku about autumn leaves.<|im_end|>\n<|im_start|>assistant\n",
}
which, model_path = sys.argv[1], sys.argv[2]
PROMPTS = [
    ("capital", "The capital of France is"),
    ("story", "Once upon a time, in a small village by the sea,"),
    ("chat", CHAT[which]),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("long", LONG),
]

lc.llama_backend_init()
mp = lc.llama_model_default_params()
model = lc.llama_model_load_from_file(model_path.encode(), mp)
vocab = lc.llama_model_get_vocab(model)
nv = lc.llama_vocab_n_tokens(vocab)
out = {
    "generated_by": f"llama.cpp through llama-cpp-python {lc.__version__} (CPU), "
    f"{model_path.split('/')[-1]}, flash attention off, greedy on the raw logits; "
    "margins: top-1 minus top-2 logit; flash_attention_moves: see the script's header",
    "command": f"python3 crates/runner/tests/data/greedy_ref.py {which} {model_path}",
    "cases": [],
}
def run(prompt, flash, forced=None):
    """Greedy decoding (or, with `forced`, those tokens fed one by one); returns the prompt's
    tokens, the tokens chosen, each step's top-2 gap and each step's logits."""
    cp = lc.llama_context_default_params()
    cp.n_ctx = 1024
    cp.n_batch = 1024
    cp.n_ubatch = 1024
    cp.n_threads = 2
    cp.n_threads_batch = 2
    cp.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash else lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = lc.llama_init_from_model(model, cp)
    buf = (lc.llama_token * 4096)()
    raw = prompt.encode()
    nt = lc.llama_tokenize(vocab, raw, len(raw), buf, 4096, True, True)
    toks = list(buf[:nt])
    arr = (lc.llama_token * len(toks))(*toks)
    batch = lc.llama_batch_get_one(arr, len(toks))
    tokens, margins, rows = [], [], []
    for step in range(N):
        assert lc.llama_decode(ctx, batch) == 0
        logits = np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, -1), shape=(nv,)).copy()
        order = np.argsort(-logits, kind="stable")
        t = int(order[0]) if forced is None else forced[step]
        tokens.append(int(order[0]))
        margins.append(float(logits[order[0]] - logits[order[1]]))
        rows.append(logits)
        one = (lc.llama_token * 1)(t)
        batch = lc.llama_batch_get_one(one, 1)
    lc.llama_free(ctx)
    return toks, tokens, margins, rows


for name, prompt in PROMPTS:
    toks, tokens, margins, rows = run(prompt, False)
    # llama.cpp's own noise: its flash-attention path fed the same tokens; the largest change of
    # any of the reference's 10 largest logits, per step
    _, _, _, fa_rows = run(prompt, True, forced=tokens)
    moves = []
    for r, f in zip(rows, fa_rows):
        top = np.argsort(-r, kind="stable")[:10]
        moves.append(float(np.max(np.abs(r[top] - f[top]))))
    out["cases"].append({
        "name": name, "prompt": prompt, "prompt_tokens": toks, "tokens": tokens, "margins": margins,
        "flash_attention_moves": moves,
    })
    print(f"{name}: {len(toks)} prompt tokens, min margin {min(margins):.3f}, "
          f"flash attention moves the top-10 logits by up to {max(moves):.3f}", file=sys.stderr)
print(json.dumps(out, indent=1))
