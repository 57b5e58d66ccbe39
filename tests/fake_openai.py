"""A small OpenAI-compatible chat-completions server on 127.0.0.1 (real HTTP, for the unpatched
``openai`` client). It answers each prompt according to a mode: correct, wrong, garbage, fenced,
429/500 bursts, slow, hang, or 401."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # bursts of concurrent clients must not be refused
    daemon_threads = True
from typing import Any


class FakeOpenAI:
    def __init__(self, answers: dict[str, str], mode: str = "correct", latency_s: float = 0.0, script: Any = None) -> None:
        self.answers = answers  # user prompt -> correct answer text
        self.script = script  # optional: request body -> assistant message dict, or (status, error body)
        self.mode = mode
        self.latency_s = latency_s
        self.failures: dict[str, int] = {}  # user prompt -> remaining transient failures (429/500 modes)
        self.burst = 2
        self.requests = 0
        self.lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _reply(self, prompt: str) -> tuple[int, dict[str, Any] | None, str | None]:
        mode = self.mode
        if mode == "401":
            return 401, {"error": {"message": "Incorrect API key", "type": "invalid_request_error", "code": "invalid_api_key"}}, None
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
            "wrong": json.dumps({"feedback": "nope", "config_changes": [{"type": "add", "path": ["spurious"], "value": 1}]}),
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

            def do_POST(self) -> None:  # noqa: N802
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
                    message = {"role": "assistant", "content": reply.get("content"), **({"tool_calls": reply["tool_calls"]} if reply.get("tool_calls") else {})}
                    return self._send(200, {
                        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": body.get("model", ""),
                        "choices": [{"index": 0, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop", "message": message}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                    })
                prompt = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
                status, error, text = fake._reply(prompt)
                if error is not None:
                    return self._send(status, error)
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": body.get("model", ""),
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4,
                              "total_tokens": (len(prompt) + len(text)) // 4},
                })

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def serve_forever(mode: str = "correct", latency_s: float = 0.0) -> None:
    """Run a server in this process until killed; prints its URL on the first line of stdout."""
    import sys

    with FakeOpenAI({}, mode, latency_s) as server:
        print(server.url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


if __name__ == "__main__":
    import sys

    serve_forever(sys.argv[1] if len(sys.argv) > 1 else "correct", float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
