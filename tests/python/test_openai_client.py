#!/usr/bin/env python3
"""The official OpenAI Python client driving an infergate gateway.

    python3 tests/python/test_openai_client.py http://127.0.0.1:8080/v1 \
        [--model llama] [--adapter sql-lora] [--max-body-bytes 65536]

The gateway must serve MODEL with ADAPTER as one of its pool's loraAdapters, and its
spec.bbr.maxRequestBodyBytes must be MAX_BODY_BYTES (the 413 case sends a body just over it).
crates/infergate/tests/openai_client.rs starts a simulated fleet and `infergate serve` to match,
then runs this script. Exits 0 when every check passes; a failed check raises and exits non-zero.
"""

import argparse
import sys

try:
    import openai
except ImportError:  # pragma: no cover - the message is the point
    sys.stderr.write(
        "the `openai` module is not importable: "
        "pip install -r tests/python/requirements.txt\n"
    )
    sys.exit(3)

# The gateway's reference message for a model no pool serves (infergate_api_error::NO_MATCHING_MODEL).
NO_MATCHING_MODEL = (
    "no matching model: set the model in the request body or the x-gateway-model-name header"
)

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant that answers briefly."},
    {"role": "user", "content": "What is the capital of France?"},
]


def check_chat(client, model):
    resp = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=4)
    assert resp.object == "chat.completion", resp
    assert resp.model == model, (resp.model, model)
    assert resp.id, resp
    assert len(resp.choices) == 1, resp.choices
    choice = resp.choices[0]
    assert choice.message.role == "assistant", choice
    assert choice.message.content, choice
    assert choice.finish_reason in ("stop", "length"), choice
    usage = resp.usage
    assert usage is not None, resp
    assert usage.prompt_tokens > 0, usage
    assert 1 <= usage.completion_tokens <= 4, usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, usage
    return resp


def check_streaming_chat(client, model):
    stream = client.chat.completions.create(
        model=model,
        messages=MESSAGES,
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)  # every event until [DONE]; the iterator ends only there
    assert chunks, "no chunk"
    ids = {c.id for c in chunks}
    assert len(ids) == 1, ids
    for c in chunks:
        assert c.object == "chat.completion.chunk", c
        assert c.model == model, (c.model, model)
    content_chunks = [c for c in chunks if c.choices]
    text = "".join(c.choices[0].delta.content or "" for c in content_chunks)
    assert text, chunks
    finishes = [c.choices[0].finish_reason for c in content_chunks if c.choices[0].finish_reason]
    assert finishes in (["stop"], ["length"]), finishes
    # include_usage: the last chunk has no choices and carries the usage; no other chunk has it.
    last = chunks[-1]
    assert last.choices == [], last
    assert last.usage is not None, last
    assert all(c.usage is None for c in chunks[:-1]), chunks
    assert last.usage.prompt_tokens > 0, last.usage
    assert 1 <= last.usage.completion_tokens <= 8, last.usage
    assert (
        last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    ), last.usage
    return text


def check_completion(client, model):
    resp = client.completions.create(model=model, prompt="Once upon a time", max_tokens=3)
    assert resp.object == "text_completion", resp
    assert resp.model == model, (resp.model, model)
    assert len(resp.choices) == 1, resp.choices
    assert resp.choices[0].text, resp.choices
    assert resp.choices[0].finish_reason in ("stop", "length"), resp.choices
    assert resp.usage is not None and 1 <= resp.usage.completion_tokens <= 3, resp.usage


def check_models(client, model, adapter):
    models = client.models.list()
    ids = [m.id for m in models]
    assert model in ids, ids
    assert adapter in ids, ids
    for m in models:
        assert m.object == "model", m


def expect_status_error(cls, status, call):
    try:
        call()
    except cls as e:
        assert e.status_code == status, (e.status_code, e)
        assert isinstance(e.body, dict), e.body  # the "error" object of an OpenAI-style body
        assert e.body.get("message"), e.body
        return e
    raise AssertionError(f"expected {cls.__name__} ({status}), but the call succeeded")


def check_errors(client, model, max_body_bytes):
    # A model no pool serves: 404 with the reference message.
    e = expect_status_error(
        openai.NotFoundError,
        404,
        lambda: client.chat.completions.create(
            model="no-such-model", messages=MESSAGES, max_tokens=1
        ),
    )
    assert e.body["message"] == NO_MATCHING_MODEL, e.body
    assert e.code == "model_not_found", e.code
    assert e.type == "invalid_request_error", e.type

    # A body over spec.bbr.maxRequestBodyBytes: 413, which the client maps to no subclass.
    big = "x" * (max_body_bytes + 1024)
    e = expect_status_error(
        openai.APIStatusError,
        413,
        lambda: client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": big}], max_tokens=1
        ),
    )
    assert e.code == "request_too_large", e.body
    assert str(max_body_bytes) in e.body["message"], e.body

    # Bad requests. The gateway's own: a request naming no model.
    e = expect_status_error(
        openai.BadRequestError,
        400,
        lambda: client.chat.completions.create(model="", messages=MESSAGES, max_tokens=1),
    )
    assert e.code == "model_required", e.body
    # A body that is JSON but not what the gateway reads (`stream` must be a boolean).
    e = expect_status_error(
        openai.BadRequestError,
        400,
        lambda: client.chat.completions.create(
            model=model, messages=MESSAGES, max_tokens=1, extra_body={"stream": "yes"}
        ),
    )
    assert e.code == "invalid_json", e.body
    # The model server's own 400 (an invalid max_tokens), passed through to the client.
    expect_status_error(
        openai.BadRequestError,
        400,
        lambda: client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=-1),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url", help="the gateway's OpenAI base URL, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="llama")
    parser.add_argument("--adapter", default="sql-lora")
    parser.add_argument("--max-body-bytes", type=int, default=65536)
    args = parser.parse_args()
    base_url = args.base_url.rstrip("/")
    if not base_url.endswith("/v1"):
        base_url += "/v1"

    # No retries: a retried 5xx or 429 would hide what the gateway answered.
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30.0)
    checks = [
        ("chat completion with usage", lambda: check_chat(client, args.model)),
        ("streaming chat completion with include_usage", lambda: check_streaming_chat(client, args.model)),
        ("completion", lambda: check_completion(client, args.model)),
        ("chat completion to a LoRA adapter", lambda: check_chat(client, args.adapter)),
        ("streaming chat completion to a LoRA adapter", lambda: check_streaming_chat(client, args.adapter)),
        ("models.list()", lambda: check_models(client, args.model, args.adapter)),
        ("errors: 404, 413, 400", lambda: check_errors(client, args.model, args.max_body_bytes)),
    ]
    print(f"openai {openai.__version__} against {base_url}")
    for name, check in checks:
        check()
        print(f"ok: {name}")
    print(f"{len(checks)} passed, 0 failed")


if __name__ == "__main__":
    main()
