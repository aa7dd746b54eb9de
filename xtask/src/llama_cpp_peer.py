# llama.cpp beside `cargo xtask bench runner` (--llama-python): the same GGUF file, threads, batch,
# prompt length and decode steps, through llama-cpp-python's low-level API: BATCH sequences (one
# llama_decode over all their prompts of PROMPT tokens each, the median of REPS runs with the cache
# cleared between them, then STEPS steps of one token per sequence in one llama_decode, their
# median). Prompt tokens follow the bench's own formula for each sequence. Each sequence has its own
# cache cells (kv_unified off, as llama.cpp advises for sequences that share no prefix).
# Prints one JSON object on stdout; llama.cpp's own log goes to stderr.
# Usage: python3 llama_cpp_peer.py MODEL.gguf THREADS PROMPT STEPS REPS [BATCH]
import json, statistics, sys, time
import llama_cpp as lc

path, threads, prompt, steps, reps = sys.argv[1], *map(int, sys.argv[2:6])
batch = int(sys.argv[6]) if len(sys.argv) > 6 else 1
lc.llama_backend_init()
model = lc.llama_model_load_from_file(path.encode(), lc.llama_model_default_params())
vocab = lc.llama_model_get_vocab(model)
nv = lc.llama_vocab_n_tokens(vocab)
cp = lc.llama_context_default_params()
per_seq = (prompt + steps + 16 + 255) // 256 * 256
cp.n_ctx = per_seq * batch
cp.n_seq_max = batch
cp.kv_unified = False
cp.n_batch = cp.n_ubatch = max(prompt * batch, 32)
cp.n_threads = cp.n_threads_batch = threads
ctx = lc.llama_init_from_model(model, cp)
assert ctx, "llama_init_from_model failed"


def decode(lists, starts):
    """One llama_decode of each sequence's token list at its start position; logits at each last."""
    n = sum(len(t) for t in lists)
    b = lc.llama_batch_init(n, 0, 1)
    i = 0
    for s, toks in enumerate(lists):
        for j, tok in enumerate(toks):
            b.token[i], b.pos[i], b.n_seq_id[i] = tok, starts[s] + j, 1
            b.seq_id[i][0] = s
            b.logits[i] = j == len(toks) - 1
            i += 1
    b.n_tokens = n
    t = time.perf_counter()
    assert lc.llama_decode(ctx, b) == 0
    dt = time.perf_counter() - t
    lc.llama_batch_free(b)
    return dt


prompts = [[(s * 7919 + j * 104729 + 13) % nv for j in range(prompt)] for s in range(batch)]
pre = []
for _ in range(reps):
    lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
    pre.append(decode(prompts, [0] * batch))
dec = []
for i in range(steps):
    one = [[(i * 7919 + s * 31 + 5) % nv] for s in range(batch)]
    dec.append(decode(one, [prompt + i] * batch))
print(json.dumps({
    "llama_cpp_python": lc.__version__,
    "batch": batch,
    "prefill_tokens_per_s": batch * prompt / statistics.median(pre),
    "decode_tokens_per_s": batch / statistics.median(dec),
}))
