#!/usr/bin/env python3
"""Writes gemma3_tokenizer.json: llama.cpp's own tokenization of a corpus with Gemma 3's vocabulary,
the reference `tests/gemma3_tokenizer.rs` checks the runner's SPM tokenizer against.

Needs llama-cpp-python (any recent version; 0.3.36 wrote the committed file) and the model file
(`cargo xtask fetch-model gemma3`). Run from the workspace root:

    python3 crates/runner/tests/data/gemma3_tokenizer_ref.py \
        [target/models/gemma-3-270m-q4_k_m.gguf] [crates/runner/tests/data/gemma3_tokenizer.json]

For each corpus string it records the ids of `llama_tokenize(text, add_special, parse_special=True)`
with add_special true (BOS first, as the model asks) and false, and the text llama.cpp's
`llama_detokenize(ids, remove_special=False, unparse_special=True)` gives back for each.
"""

import ctypes
import json
import sys

import llama_cpp

MODEL = sys.argv[1] if len(sys.argv) > 1 else "target/models/gemma-3-270m-q4_k_m.gguf"
OUT = sys.argv[2] if len(sys.argv) > 2 else "crates/runner/tests/data/gemma3_tokenizer.json"

CORPUS = [
    "",
    "Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "   three leading spaces",
    "trailing space ",
    "trailing spaces   ",
    "multiple   spaces    between  words",
    " ",
    "  ",
    "                                                  ",
    "\t",
    "tab\tseparated\tvalues",
    "\t\tdouble tab and\t\t\t\ttabs",
    "\n",
    "line one\nline two\n\nline four\n\n\n\nafter four newlines",
    "\r\n windows \r\n line endings",
    " \n \t \n\t mixed whitespace \t\n ",
    "café naïve résumé façade Ångström",
    "Ünïcödé ñ ß œ æ ø",
    "日本語のテキストです。",
    "中文文本，包含标点符号。",
    "한국어 텍스트",
    "emoji: 🙂🎉👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈",
    "combining: e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937",
    "RTL: שלום עולם و مرحبا بالعالم",
    "Ελληνικά και кириллица",
    "rare CJK: 𠀀𠀁𪚥 𰻞",
    "private use: \ue000\uf8ff \U000f0000",
    "control chars: \x00\x01\x7f",
    "digits: 0123456789 3.14159 1,000,000 -42 1e10",
    "12345678901234567890",
    "def f(x):\n    return x * 2  # doubled\n",
    "fn main() { println!(\"{}\", 1 + 2); }",
    "if (a && b || !c) { x[i] = y->z; } // <tag> & \"quotes\" 'single'",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<bos>Hello<eos>",
    "<bos>",
    "text <unused0> and <unused6241>",
    "<table><tr><td>cell</td></tr></table>",
    "[multimodal] <start_of_image> <end_of_image>",
    "<0x41> is a byte token's text",
    "<start_of_turn <end_of_turn> unfinished",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "========================================================================",
    "!!!???...,,,;;;:::",
    "▁ already escaped ▁▁",
    "https://example.com/path?query=1&x=%20#frag",
    "user@example.com, @mention, #hashtag",
    "ALL CAPS AND MixedCase wOrDs",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "The Gemma 3 model was trained on 6 trillion tokens.",
]
# A long text (about 10 KB: every string above, joined, repeated), for long runs and timing.
CORPUS.append(("\n".join(CORPUS) * 8)[:10_000])


def main():
    m = llama_cpp.Llama(model_path=MODEL, vocab_only=True, verbose=False)
    vocab = m._model.vocab

    def tokenize(text, add_special):
        b = text.encode("utf-8")
        n_max = len(b) + 8
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(vocab, b, len(b), buf, n_max, add_special, True)
        assert n >= 0, (text, n)
        return list(buf[:n])

    def detokenize(ids):
        arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
        size = 64 + 64 * len(ids)
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, True)
        assert n >= 0, (ids, n)
        return buf.raw[:n].decode("utf-8", errors="replace")

    cases = []
    for text in CORPUS:
        ids_bos = tokenize(text, True)
        ids = tokenize(text, False)
        cases.append(
            {
                "text": text,
                "ids_bos": ids_bos,
                "ids": ids,
                "decoded_bos": detokenize(ids_bos),
                "decoded": detokenize(ids),
            }
        )
    # One case a line, so that a change shows as a readable diff.
    head = {"model": MODEL.rsplit("/", 1)[-1], "llama_cpp_python": llama_cpp.__version__}
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    print(f"{len(cases)} cases -> {OUT}")


if __name__ == "__main__":
    main()
