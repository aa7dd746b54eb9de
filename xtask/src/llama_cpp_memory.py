"""(docs/BENCHMARKS.md, "Loading without a copy") llama.cpp (llama-cpp-python): load a GGUF, evaluate a short prompt and 16 greedy tokens, report
load time and this process's memory from /proc/self/status."""
import os, sys, time
path, threads = sys.argv[1], int(sys.argv[2])
use_mmap = len(sys.argv) < 4 or sys.argv[3] != "no-mmap"
import llama_cpp
t0 = time.time()
llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_threads=threads, n_threads_batch=threads, verbose=False, use_mmap=use_mmap)
t_load = time.time() - t0
toks = llm.tokenize(b"Once upon a time")
t1 = time.time()
llm.eval(toks)
t_prefill = time.time() - t1
t2 = time.time()
for _ in range(16):
    tok = llm.sample(temp=0.0)
    llm.eval([tok])
t_decode = time.time() - t2
st = {}
for l in open("/proc/self/status"):
    k, _, v = l.partition(":")
    if k in ("VmHWM", "RssAnon", "RssFile"):
        st[k] = int(v.split()[0]) / 1024
print(f"llama: load {t_load:.3f} s, prefill {len(toks)} tokens {t_prefill*1000:.1f} ms, 16 decode {t_decode:.2f} s; "
      f"VmHWM {st['VmHWM']:.0f} MiB, RssAnon {st['RssAnon']:.0f} MiB, RssFile {st['RssFile']:.0f} MiB (mmap={use_mmap})")
