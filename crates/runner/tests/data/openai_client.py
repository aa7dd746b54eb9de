"""The official `openai` Python client against `runner serve` (run by tests/serve.rs with the
server's base URL): models, completions with logprobs, chat, streaming with usage, structured
output, and a 400 the client raises as BadRequestError."""
import json
import sys

import openai

base = sys.argv[1]
c = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
model = c.models.list().data[0].id

r = c.completions.create(model=model, prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=2)
ch = r.choices[0]
assert ch.finish_reason == "length", r
assert "Paris" in ch.text, r
assert r.usage.completion_tokens == 6 and r.usage.prompt_tokens == 5, r.usage
assert len(ch.logprobs.tokens) == 6 and all(len(t) == 2 for t in ch.logprobs.top_logprobs), ch.logprobs
assert "".join(ch.logprobs.tokens) == ch.text

msgs = [{"role": "user", "content": "Say hello to the world."}]
r = c.chat.completions.create(model=model, messages=msgs, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2)
whole = r.choices[0].message.content
assert r.choices[0].message.role == "assistant"
content = r.choices[0].logprobs.content
assert len(content) == r.usage.completion_tokens and all(len(t.top_logprobs) == 2 for t in content), content
assert all(t.token == t.top_logprobs[0].token for t in content), "greedy takes the most likely token"

s = c.chat.completions.create(model=model, messages=msgs, max_tokens=8, temperature=0, stream=True,
                              stream_options={"include_usage": True})
text, usage, finish = "", None, None
for chunk in s:
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
    if chunk.usage:
        usage = chunk.usage
assert text == whole, (text, whole)
assert usage is not None and usage.completion_tokens == r.usage.completion_tokens, usage
assert finish in ("stop", "length"), finish

schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Name a city, as JSON."}],
                              max_tokens=40, seed=5,
                              response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}})
v = json.loads(r.choices[0].message.content)
assert isinstance(v["city"], str), v

try:
    c.completions.create(model=model, prompt="x", top_p=7)
    raise AssertionError("top_p 7 was accepted")
except openai.BadRequestError as e:
    assert e.status_code == 400 and "top_p" in str(e), e

print("openai client: ok")
