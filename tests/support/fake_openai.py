"""A small OpenAI-compatible chat-completions server on 127.0.0.1 (real HTTP, for the unpatched
``openai`` client). It answers each prompt according to a mode: correct, wrong, garbage, fenced,
429/500 bursts, slow, hang, or 401 — and the bad answers of a broken endpoint: ``not_json`` (a 200
whose body is an HTML error page), ``choices_type`` (``choices`` an object), ``content_type``
(``content`` a JSON object instead of a string), ``deep_answer`` (a string answer nested 100 000
levels), ``deep_body`` (``content`` itself a list nested 100 000 levels, written raw), ``stream_huge``
(a 200 MB chunked body without a length) and ``huge_length`` (200 MB with its ``Content-Length``).
Prompts in ``failing`` always get a 500, whatever the mode. ``bytes_sent`` counts the body bytes the
streaming modes managed to write before the client hung up. ``GET /v1/models`` lists ``models`` (what a
model server's readiness check asks); ``port`` binds a given port (0: a free one). A 429 or 5xx carries
``retry-after-ms: retry_after_ms`` (OpenAI's own header, which the ``openai`` client's backoff obeys), so a retried
request waits milliseconds, not the client's default half-second-and-doubling backoff."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # bursts of concurrent clients must not be refused
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(
            sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)
        ):  # a client hanging up is no error
            super().handle_error(request, client_address)


from typing import Any


class FakeOpenAI:
    def __init__(
        self,
        answers: dict[str, str],
        mode: str = "correct",
        latency_s: float = 0.0,
        script: Any = None,
        port: int = 0,
        models: tuple[str, ...] = (),
    ) -> None:
        self.answers = answers  # user prompt -> correct answer text
        self.script = script  # optional: request body -> assistant message dict, or (status, error body)
        self.mode = mode
        self.latency_s = latency_s
        self.failures: dict[str, int] = {}  # user prompt -> remaining transient failures (429/500 modes)
        self.burst = 2
        self.requests = 0
        self.failing: set[str] = set()  # user prompts that always get a 500
        self.huge_bytes = 200 * 1024 * 1024  # the streaming modes' body size
        self.bytes_sent = 0
        self.lock = threading.Lock()
        self.models = models
        self.retry_after_ms = 20
        self.server = _Server(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _reply(self, prompt: str) -> tuple[int, dict[str, Any] | None, str | None]:
        mode = self.mode
        if prompt in self.failing:
            return 500, {"error": {"message": "the model server crashed", "type": "server_error"}}, None
        if mode == "401":
            return (
                401,
                {"error": {"message": "Incorrect API key", "type": "invalid_request_error", "code": "invalid_api_key"}},
                None,
            )
        if mode in ("429", "500"):
            with self.lock:
                left = self.failures.setdefault(prompt, self.burst)
                if left > 0:
                    self.failures[prompt] = left - 1
                    return int(mode), {"error": {"message": "try again", "type": "server_error"}}, None
            mode = "correct"
        if mode == "hang":
            time.sleep(30)
        correct = self.answers.get(prompt, '{"feedback": null, "config_changes": []}')
        text = {
            "correct": correct,
            "wrong": json.dumps(
                {"feedback": "nope", "config_changes": [{"type": "add", "path": ["spurious"], "value": 1}]}
            ),
            "garbage": "I think the state will probably change somehow.",
            "fenced": f"Sure! Here is my prediction:\n```json\n{correct}\n```\nLet me know if you need more.",
            "huge": "x" * 3_000_000,
        }.get(mode, correct)
        return 200, None, text

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stalls

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if not self.path.endswith("/models"):
                    return self._send(404, {"error": {"message": "not found"}})
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    fake.requests += 1
                if fake.latency_s:
                    time.sleep(fake.latency_s)
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                if fake.script is not None:
                    reply = fake.script(body)
                    if isinstance(reply, tuple):
                        return self._send(reply[0], reply[1])
                    message = {
                        "role": "assistant",
                        "content": reply.get("content"),
                        **({"tool_calls": reply["tool_calls"]} if reply.get("tool_calls") else {}),
                    }
                    return self._send(
                        200,
                        {
                            "id": "chatcmpl-fake",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": body.get("model", ""),
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
                                    "message": message,
                                }
                            ],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                        },
                    )
                prompt = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
                if fake.mode in BROKEN and prompt not in fake.failing:
                    return self._broken(fake.mode, body, prompt)
                status, error, text = fake._reply(prompt)
                if error is not None:
                    retry = {"retry-after-ms": str(fake.retry_after_ms)} if status == 429 or status >= 500 else None
                    return self._send(status, error, retry)
                self._send(
                    200,
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", ""),
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                        "usage": {
                            "prompt_tokens": len(prompt) // 4,
                            "completion_tokens": len(text) // 4,
                            "total_tokens": (len(prompt) + len(text)) // 4,
                        },
                    },
                )

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), headers=headers)

            def _send_raw(
                self,
                status: int,
                data: bytes,
                content_type: str = "application/json",
                headers: dict[str, str] | None = None,
            ) -> None:
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _broken(self, mode: str, body: dict[str, Any], prompt: str) -> None:
                """A 200 that is not a usable chat completion (see the module doc)."""
                head = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", ""),
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
                message = {"role": "assistant", "content": fake.answers.get(prompt, "")}
                choice = {"index": 0, "finish_reason": "stop", "message": message}
                if mode == "not_json":
                    return self._send_raw(200, b"<html><body><h1>502 Bad Gateway</h1>nginx</body></html>")
                if mode == "choices_type":
                    return self._send(200, {**head, "choices": {"0": choice}})
                if mode == "content_type":
                    content = json.loads(message["content"]) if message["content"] else {"feedback": None}
                    return self._send(
                        200, {**head, "choices": [{**choice, "message": {**message, "content": content}}]}
                    )
                if mode == "deep_answer":
                    deep = '{"feedback": ' + "[" * DEEP + "]" * DEEP + ', "config_changes": []}'
                    return self._send(200, {**head, "choices": [{**choice, "message": {**message, "content": deep}}]})
                if mode == "deep_body":
                    raw = json.dumps({**head, "choices": [{**choice, "message": {**message, "content": "@@"}}]})
                    return self._send_raw(200, raw.replace('"@@"', "[" * DEEP + "]" * DEEP).encode())
                # stream_huge / huge_length: a valid start, then 'x' until huge_bytes, in 1 MiB writes
                start = json.dumps({**head, "choices": [{**choice, "message": {**message, "content": "@@"}}]}).split(
                    '@@"'
                )[0]
                chunk = b"x" * (1024 * 1024)
                pieces = [start.encode()] + [chunk] * (fake.huge_bytes // len(chunk))
                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    if mode == "huge_length":
                        self.send_header("Content-Length", str(sum(map(len, pieces))))
                    else:
                        self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for piece in pieces:
                        self.wfile.write(piece if mode == "huge_length" else b"%x\r\n%s\r\n" % (len(piece), piece))
                        with fake.lock:
                            fake.bytes_sent += len(piece)
                    if mode != "huge_length":
                        self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


BROKEN = ("not_json", "choices_type", "content_type", "deep_answer", "deep_body", "stream_huge", "huge_length")
DEEP = 100_000


def serve_forever(mode: str = "correct", latency_s: float = 0.0) -> None:
    """Run a server in this process until killed; prints its URL on the first line of stdout."""
    import sys

    with FakeOpenAI({}, mode, latency_s) as server:
        print(server.url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


if __name__ == "__main__":
    import sys

    serve_forever(sys.argv[1] if len(sys.argv) > 1 else "correct", float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
