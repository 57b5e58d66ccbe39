"""The client of an OpenAI-compatible endpoint, built in one place for every stage that asks a model (the simulators of
the evaluation and of rollouts, the collection agent, the rollout agent): :func:`async_client` takes the API key from
the environment variable the caller names, sets the timeout and the ``openai`` client's own retries (backoff on 429 /
5xx / timeouts / connection errors), and — when given a ``max_response_bytes`` — caps response bodies at the HTTP layer.

* :class:`CappedTransport` wraps ``httpx2``'s transport (the HTTP library of ``openai`` ≥ 3, passed as
  ``http_client=``): a ``Content-Length`` above the cap is refused before any of the body is read, and a
  body without one (chunked, compressed) is read — decoded — chunk by chunk and abandoned as soon as it
  passes the cap, the connection closed. So a 200 MB answer costs at most the cap in memory. The refusal
  is a :class:`ResponseTooLarge`, an ``openai.OpenAIError``, which the client passes on as it is (no
  retry: the same request would get the same body).
* :data:`openai` is the ``openai`` package, imported on first use (`import openai` takes about 0.5 s, which a command
  that asks no model skips); every stage takes it from here.
* :func:`read_completion` reads a body the way the harness trusts it: valid UTF-8 JSON, nested at most
  :data:`MAX_BODY_DEPTH` levels, an object whose ``choices`` is a non-empty list whose first entry has a
  ``message`` with a string (or null) ``content``; anything else is a :class:`MalformedResponse` naming
  what is wrong.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
import urllib.request
from typing import Any

import httpx2

from pipeline.core.bounds import TooDeep, loads

#: a chat-completions body is a handful of levels deep; its content is a string
MAX_BODY_DEPTH = 32
_SNIPPET = 160

log = logging.getLogger(__name__)
#: (variable, endpoint) pairs already warned about in this process: one line each, not one per client
_WARNED_UNSET: set[tuple[str, str | None]] = set()


class _OnFirstUse:
    """The ``openai`` package's attributes, the package imported when one is first read (Python's import is
    thread-safe, unlike ``importlib.util.LazyLoader`` before 3.12)."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module("openai"), attr)


openai: Any = _OnFirstUse()


@functools.cache
def _response_too_large() -> type:
    class ResponseTooLarge(openai.OpenAIError):
        """The response body is larger than the cap; it was not read past the cap."""

    ResponseTooLarge.__module__, ResponseTooLarge.__qualname__ = __name__, "ResponseTooLarge"
    return ResponseTooLarge


def __getattr__(name: str) -> Any:
    """:class:`ResponseTooLarge`, an ``openai.OpenAIError`` made when first named (so ``openai`` loads then)."""
    if name == "ResponseTooLarge":
        return _response_too_large()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class MalformedResponse(ValueError):
    """A 200 body that is not a chat completion (not JSON, wrong types, too deep)."""


class CappedTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that refuses response bodies over ``max_bytes`` (see the module doc)."""

    def __init__(self, max_bytes: int, inner: httpx2.AsyncBaseTransport) -> None:
        self.max_bytes = max_bytes
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await response.aclose()
            raise _response_too_large()(
                f"response too large: Content-Length {int(declared)} bytes exceeds the "
                f"{self.max_bytes}-byte cap (max_response_bytes); not read"
            )
        # read (and decode) the body here, chunk by chunk, so that a body without a length stops at the cap
        reader = httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=response.stream,
            request=request,
            extensions=response.extensions,
        )
        body = bytearray()
        try:
            async for chunk in reader.aiter_bytes():
                body += chunk
                if len(body) > self.max_bytes:
                    raise _response_too_large()(
                        f"response too large: body passed the {self.max_bytes}-byte cap "
                        f"(max_response_bytes) after {len(body)} bytes; the rest was not read"
                    )
        finally:
            await reader.aclose()
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx2.Response(
            response.status_code, headers=headers, content=bytes(body), request=request, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _env_proxy(base_url: str | None) -> str | None:
    """The proxy the environment names for ``base_url`` (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY``),
    since a client with its own transport does not mount the environment's proxies itself."""
    if not base_url:
        return None
    url = httpx2.URL(base_url)
    if urllib.request.proxy_bypass(url.host or ""):
        return None
    return urllib.request.getproxies().get(url.scheme)


def capped_client(max_bytes: int, base_url: str | None, timeout_s: float) -> httpx2.AsyncClient:
    """An ``http_client`` for ``openai.AsyncOpenAI`` whose responses are capped at ``max_bytes``."""
    inner = httpx2.AsyncHTTPTransport(
        limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=100), proxy=_env_proxy(base_url)
    )
    return httpx2.AsyncClient(
        transport=CappedTransport(max_bytes, inner), timeout=timeout_s, follow_redirects=True, trust_env=False
    )


def async_client(
    base_url: str | None, api_key_env: str, timeout_s: float, max_retries: int, max_response_bytes: int | None = None
) -> openai.AsyncOpenAI:
    """The ``openai.AsyncOpenAI`` client of an endpoint: the key from ``$api_key_env`` (unset or empty: a
    one-line warning, once per variable and endpoint, and the placeholder ``"not-set"``, which a local server
    takes; ``api_key_env`` empty: no key and no warning, for an endpoint the pipeline serves itself), ``timeout_s`` per
    request, ``max_retries`` retries with the client's backoff, and with ``max_response_bytes`` response bodies capped
    at the HTTP layer (:class:`CappedTransport`; without, the ``openai`` client's own HTTP client)."""
    if max_response_bytes is not None and max_response_bytes < 1:
        raise ValueError(f"max_response_bytes must be positive, not {max_response_bytes}")
    if api_key_env and not os.environ.get(api_key_env) and (api_key_env, base_url) not in _WARNED_UNSET:
        _WARNED_UNSET.add((api_key_env, base_url))
        log.warning(
            "api_key_env: $%s is not set, so requests to %s carry no API key (a local server may not need "
            "one): export %s, or set api_key_env to the variable that holds the key",
            api_key_env,
            base_url or "the OpenAI API",
            api_key_env,
        )
    capped = (
        {} if max_response_bytes is None else {"http_client": capped_client(max_response_bytes, base_url, timeout_s)}
    )
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=(os.environ.get(api_key_env) if api_key_env else None) or "not-set",
        timeout=timeout_s,
        max_retries=max_retries,
        **capped,
    )


def _snippet(text: str) -> str:
    return json.dumps(text[:_SNIPPET], ensure_ascii=False) + ("…" if len(text) > _SNIPPET else "")


def _kind(value: Any) -> str:
    names = {type(None): "null", dict: "object", list: "list", str: "string", bool: "boolean"}
    return names.get(type(value), type(value).__name__)


def read_completion(body: bytes) -> tuple[str | None, int | None, int | None]:
    """``(content, prompt_tokens, completion_tokens)`` of a chat-completions body, or
    :class:`MalformedResponse` saying what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedResponse(f"malformed response: the body is not UTF-8 (byte {exc.start})") from None
    try:
        data = loads(text, "the body", MAX_BODY_DEPTH)
    except TooDeep as exc:
        raise MalformedResponse(f"malformed response: {exc}") from None
    except ValueError:
        raise MalformedResponse(f"malformed response: the body is not JSON: {_snippet(text)}") from None
    if not isinstance(data, dict):
        raise MalformedResponse(f"malformed response: the body is a JSON {_kind(data)}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list):
        raise MalformedResponse(f"malformed response: 'choices' is {_kind(choices)}, not a list")
    if not choices:
        raise MalformedResponse("malformed response: 'choices' is empty")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        raise MalformedResponse(f"malformed response: choices[0].message is {_kind(message)}, not an object")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise MalformedResponse(f"malformed response: choices[0].message.content is {_kind(content)}, not a string")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return content, count("prompt_tokens"), count("completion_tokens")
