# llama.cpp beside `cargo xtask bench runner` (--llama-python): the same GGUF file, threads, prompt
# length and decode steps, through llama-cpp-python's low-level API (llama_decode on one sequence:
# a prompt of PROMPT tokens, the median of REPS runs with the cache cleared between them, then STEPS
# single-token steps, their median). Prompt tokens follow the bench's own formula for sequence 0.
# Prints one JSON object on stdout; llama.cpp's own log goes to stderr.
# Usage: python3 llama_cpp_peer.py MODEL.gguf THREADS PROMPT STEPS REPS
import json, statistics, sys, time
import llama_cpp as lc

path, threads, prompt, steps, reps = sys.argv[1], *map(int, sys.argv[2:6])
lc.llama_backend_init()
model = lc.llama_model_load_from_file(path.encode(), lc.llama_model_default_params())
vocab = lc.llama_model_get_vocab(model)
nv = lc.llama_vocab_n_tokens(vocab)
cp = lc.llama_context_default_params()
cp.n_ctx = (prompt + steps + 16 + 15) // 16 * 16
cp.n_batch = cp.n_ubatch = max(prompt, 32)
cp.n_threads = cp.n_threads_batch = threads
ctx = lc.llama_init_from_model(model, cp)
toks = [(j * 104729 + 13) % nv for j in range(prompt)]
arr = (lc.llama_token * prompt)(*toks)
pre = []
for _ in range(reps):
    lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
    t = time.perf_counter()
    assert lc.llama_decode(ctx, lc.llama_batch_get_one(arr, prompt)) == 0
    pre.append(time.perf_counter() - t)
dec = []
for i in range(steps):
    one = (lc.llama_token * 1)((i * 7919 + 5) % nv)
    t = time.perf_counter()
    assert lc.llama_decode(ctx, lc.llama_batch_get_one(one, 1)) == 0
    dec.append(time.perf_counter() - t)
print(json.dumps({
    "llama_cpp_python": lc.__version__,
    "prefill_tokens_per_s": prompt / statistics.median(pre),
    "decode_tokens_per_s": 1 / statistics.median(dec),
}))
