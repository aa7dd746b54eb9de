#!/usr/bin/env python3
"""Writes dry_breakers.json: llama.cpp's DRY with string sequence breakers (its
`llama_sampler_init_dry(vocab, ...)`, which turns each breaker into token sequences over the
vocabulary, `get_overlapping_token_sequences`) run on crafted histories, the reference
`tests/dry_breakers.rs` checks ours against (the same breakers as a quoted SPEC value, over the
runner's vocabulary and tokenizer of the same file).

Needs llama-cpp-python (0.3.36 wrote the committed file) and the model files in target/models
(`cargo xtask fetch-model`, `cargo xtask fetch-model gemma3`). Run from the workspace root:

    python3 crates/runner/tests/data/dry_breakers_ref.py [crates/runner/tests/data/dry_breakers.json] 2>/dev/null

For each model and breaker set, a set of histories: for each breaker, its own tokenization
inside a repeated stretch (which a recognised breaker cuts), and seeded random histories over a
pool of tokens whose text holds a breaker byte, the tokens of the breakers' tails, and a few
others, each with a repeated stretch. A history is accepted into a fresh DRY sampler, which is
applied to an all-zero logit row over the whole vocabulary; the record is every token whose logit
changed and by how much (`penalty = -change`).
"""

import ctypes
import json
import random
import sys

import llama_cpp

OUT = sys.argv[1] if len(sys.argv) > 1 else "crates/runner/tests/data/dry_breakers.json"

MULTIPLIER, BASE, ALLOWED, LAST_N = 0.8, 1.75, 2, 64

MODELS = [
    ("smollm2", "target/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("gemma3", "target/models/gemma-3-270m-q4_k_m.gguf"),
]

BREAKER_SETS = [
    # llama.cpp's default (common_params_sampling::dry_sequence_breakers).
    ["\n", ":", '"', "*"],
    # Multi-byte breakers: overlaps at a token's end need the tails tokenized.
    ["\n\n", "User:", "###", " the end", "<|im_end|>", "<end_of_turn>"],
    # Non-ASCII (tokens ending inside a character), a breaker cut at 40 bytes, a tail cut at 20
    # tokens, a breaker with spaces and punctuation (clean_spaces), and `|`, `;`, `,`, `)`, `\`.
    ["é:", "abcdefghij" * 5, "1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0", " ?!", "a|b;c,d)e\\f"],
]


def load(path):
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    if not model:
        sys.exit(f"cannot load {path}")
    return model, llama_cpp.llama_model_get_vocab(model)


def tokenize(vocab, text):
    raw = text.encode()
    buf = (llama_cpp.llama_token * (len(raw) + 16))()
    n = llama_cpp.llama_tokenize(vocab, raw, len(raw), buf, len(raw) + 16, False, False)
    assert n >= 0
    return list(buf[:n])


def piece(vocab, t):
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, t, buf, 256, 0, True)
    return buf.raw[: max(n, 0)]


def penalties(vocab, n_vocab, breakers, history):
    arr = (ctypes.c_char_p * len(breakers))(*[b.encode() for b in breakers])
    smpl = llama_cpp.llama_sampler_init_dry(vocab, MULTIPLIER, BASE, ALLOWED, LAST_N, arr, len(breakers))
    for t in history:
        llama_cpp.llama_sampler_accept(smpl, t)
    data = (llama_cpp.llama_token_data * n_vocab)()
    for i in range(n_vocab):
        data[i].id, data[i].logit, data[i].p = i, 0.0, 0.0
    cur = llama_cpp.llama_token_data_array(data, n_vocab, -1, False)
    llama_cpp.llama_sampler_apply(smpl, ctypes.byref(cur))
    llama_cpp.llama_sampler_free(smpl)
    out = []
    for i in range(cur.size):
        if data[i].logit != 0.0:
            out.append([data[i].id, -data[i].logit])
    return sorted(out)


def histories(vocab, n_vocab, breakers, rng):
    out = []
    plain = tokenize(vocab, " x y z w v u")
    for b in breakers:
        seq = tokenize(vocab, b)[:24]
        stretch = plain[:2] + seq + plain[2:4]
        # The stretch, something else, the stretch again: what follows it the first time
        # (plain[4]) extends the repeat, unless the breaker in it cuts the repeat short.
        out.append(stretch + plain[4:6] + stretch)
    bytes_ = {c for b in breakers for c in b.encode()}
    pool = [t for t in range(n_vocab) if bytes_ & set(piece(vocab, t))]
    rng.shuffle(pool)
    pool = pool[:80]
    for b in breakers:
        raw = b.encode()
        for k in range(1, min(len(raw), 8)):
            pool += tokenize(vocab, raw[k:].decode("utf-8", "replace"))[:4]
    pool += plain
    for _ in range(24):
        stretch = [rng.choice(pool) for _ in range(rng.randint(3, 10))]
        noise = lambda: [rng.choice(pool) for _ in range(rng.randint(0, 4))]
        out.append(noise() + stretch + noise() + stretch)
    return out


def main():
    llama_cpp.llama_backend_init()
    rng = random.Random(32)
    cases = []
    for name, path in MODELS:
        model, vocab = load(path)
        n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        for breakers in BREAKER_SETS:
            for h in histories(vocab, n_vocab, breakers, rng):
                cases.append(
                    {
                        "model": name,
                        "breakers": breakers,
                        "history": h,
                        "penalties": penalties(vocab, n_vocab, breakers, h),
                    }
                )
        llama_cpp.llama_model_free(model)
    doc = {
        "generated_by": f"crates/runner/tests/data/dry_breakers_ref.py, llama-cpp-python {llama_cpp.__version__}",
        "multiplier": MULTIPLIER,
        "base": BASE,
        "allowed_length": ALLOWED,
        "last_n": LAST_N,
        "cases": cases,
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=0, ensure_ascii=True)
        f.write("\n")
    print(f"{len(cases)} cases -> {OUT}", file=sys.stderr)


main()
