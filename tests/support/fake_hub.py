"""A local stand-in for the part of the Hugging Face Hub HTTP API that ``huggingface_hub`` uses to
create a dataset repo, upload a folder in one commit (preupload, LFS batch + basic PUT, commit
NDJSON) and tag it, and to download a dataset (repo info, HEAD/GET ``resolve``) — what
``snapshot_download`` uses. Real HTTP on 127.0.0.1; faults can be injected per route."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # bursts of concurrent clients must not be refused
    daemon_threads = True


from typing import Any


class FakeHub:
    def __init__(self, token: str = "hf_test_token") -> None:
        self.token = token
        self.repos: dict[
            str, dict[str, Any]
        ] = {}  # "type/repo_id" -> {"files": {path: bytes}, "commits": [...], "tags": {}}
        self.lfs: dict[str, bytes] = {}
        self.faults: dict[str, list[int | str]] = {}  # route name -> queue of status codes or "drop"
        self.log: list[tuple[str, str]] = []
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail(self, route: str, *outcomes: int | str) -> None:
        self.faults.setdefault(route, []).extend(outcomes)

    def dataset(self, repo_id: str) -> dict[str, Any]:
        return self.repos[f"dataset/{repo_id}"]

    def add_dataset(self, repo_id: str, files: dict[str, bytes]) -> None:
        """Publish a (public) dataset repo with these files, as if pushed earlier."""
        sha = hashlib.sha1(
            json.dumps(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in files.items())).encode()
        ).hexdigest()
        self.repos[f"dataset/{repo_id}"] = {
            "files": dict(files),
            "commits": [{"oid": sha, "summary": "published"}],
            "tags": {},
            "head": sha,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stalls

            def log_message(self, *args: Any) -> None:
                pass

            def _send(
                self, status: int, body: Any = None, content_type: str = "application/json", headers: dict | None = None
            ) -> None:
                data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _authorized(self) -> bool:
                return self.headers.get("Authorization") == f"Bearer {hub.token}"

            def _fault(self, route: str) -> bool:
                queue = hub.faults.get(route)
                if not queue:
                    return False
                outcome = queue.pop(0)
                if outcome == "drop":
                    self._body()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return True
                self._body()
                self._send(
                    int(outcome), {"error": f"injected {outcome}"}, headers={"X-Error-Message": f"injected {outcome}"}
                )
                return True

            def _resolve(self, with_body: bool) -> bool:
                """``/datasets/<repo>/resolve/<revision>/<path>``: a file's bytes with the headers
                ``huggingface_hub`` reads (commit, ETag, size)."""
                m = re.match(r"^/datasets/(.+?)/resolve/([^/]+)/(.+)$", self.path.split("?")[0])
                if not m:
                    return False
                from urllib.parse import unquote

                if self._fault("resolve"):
                    return True
                repo = hub.repos.get(f"dataset/{unquote(m.group(1))}")
                path = unquote(m.group(3))
                if repo is None or path not in repo["files"]:
                    code = "RepoNotFound" if repo is None else "EntryNotFound"
                    self._send(404, {"error": code}, headers={"X-Error-Code": code})
                    return True
                data = repo["files"][path]
                headers = {"X-Repo-Commit": repo["head"], "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}
                if not with_body:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    return True
                self._send(200, data, "application/octet-stream", headers)
                return True

            def do_HEAD(self) -> None:
                hub.log.append(("HEAD", self.path))
                if not self._resolve(with_body=False):
                    self._send(404)

            def do_GET(self) -> None:
                hub.log.append(("GET", self.path))
                if self._resolve(with_body=True):
                    return
                t = re.match(r"^/api/datasets/(.+?)/tree/([^/]+)(?:/(.*))?$", self.path.split("?")[0])
                if t:  # the file listing snapshot_download pages through (one page here)
                    repo = hub.repos.get(f"dataset/{t.group(1)}")
                    if repo is None:
                        return self._send(
                            404, {"error": "Repository not found"}, headers={"X-Error-Code": "RepoNotFound"}
                        )
                    entries = [
                        {"type": "file", "path": p, "size": len(d), "oid": hashlib.sha1(d).hexdigest()}
                        for p, d in sorted(repo["files"].items())
                    ]
                    return self._send(200, entries)
                m = re.match(r"^/api/(models|datasets|spaces)/(.+?)(?:/revision/(.+))?$", self.path.split("?")[0])
                if m:
                    key = f"{m.group(1)[:-1]}/{m.group(2)}"
                    repo = hub.repos.get(key)
                    if repo is None:
                        return self._send(
                            404, {"error": "Repository not found"}, headers={"X-Error-Code": "RepoNotFound"}
                        )
                    return self._send(
                        200,
                        {
                            "id": m.group(2),
                            "sha": repo["head"],
                            "private": True,
                            "siblings": [{"rfilename": f} for f in sorted(repo["files"])],
                        },
                    )
                self._send(404, {"error": "not found"})

            def do_PUT(self) -> None:
                hub.log.append(("PUT", self.path))
                if self._fault("lfs_put"):
                    return
                m = re.match(r"^/lfs-upload/([0-9a-f]{64})$", self.path)
                data = self._body()
                if not m or hashlib.sha256(data).hexdigest() != m.group(1):
                    return self._send(400, {"error": "bad upload"})
                hub.lfs[m.group(1)] = data
                self._send(200, {})

            def do_POST(self) -> None:
                path = self.path.split("?")[0]
                hub.log.append(("POST", path))
                if not self._authorized():
                    self._body()
                    return self._send(401, {"error": "Invalid credentials"})
                if path == "/api/validate-yaml":
                    content = json.loads(self._body())["content"]
                    import yaml

                    try:
                        front = content.split("---\n")[1] if content.startswith("---\n") else ""
                        meta = yaml.safe_load(front) or {}
                        if not isinstance(meta, dict):
                            raise ValueError("metadata is not a mapping")
                    except Exception as exc:  # the Hub answers 400 with the reasons
                        return self._send(400, {"errors": [{"message": str(exc)}], "warnings": []})
                    return self._send(200, {"errors": [], "warnings": []})
                if path == "/api/repos/create":
                    if self._fault("create"):
                        return
                    payload = json.loads(self._body())
                    kind = payload.get("type", "model")
                    name = (
                        f"{payload['organization']}/{payload['name']}"
                        if payload.get("organization")
                        else payload["name"]
                    )
                    if any(k.endswith("/" + name) for k in hub.repos):
                        return self._send(
                            409, {"error": f"You already created this {kind} repo", "url": f"{hub.url}/{name}"}
                        )
                    hub.repos[f"{kind}/{name}"] = {"files": {}, "commits": [], "tags": {}, "head": "0" * 40}
                    return self._send(
                        200, {"url": f"{hub.url}/datasets/{name}" if kind == "dataset" else f"{hub.url}/{name}"}
                    )
                m = re.match(r"^/api/datasets/(.+)/(preupload|commit|tag)/(.+)$", path)
                if m:
                    repo_id, action = m.group(1), m.group(2)
                    repo = hub.repos.get(f"dataset/{repo_id}")
                    if repo is None:
                        self._body()
                        return self._send(
                            404, {"error": "Repository not found"}, headers={"X-Error-Code": "RepoNotFound"}
                        )
                    if self._fault(action):
                        return
                    payload = self._body()
                    if action == "preupload":
                        files = json.loads(payload)["files"]
                        return self._send(
                            200,
                            {
                                "files": [
                                    {
                                        "path": f["path"],
                                        "uploadMode": "lfs" if f["path"].endswith(".parquet") else "regular",
                                        "shouldIgnore": False,
                                    }
                                    for f in files
                                ]
                            },
                        )
                    if action == "commit":
                        return self._commit(repo, repo_id, payload)
                    tag = json.loads(payload)["tag"]
                    if tag in repo["tags"]:
                        return self._send(409, {"error": "tag exists"})
                    repo["tags"][tag] = repo["head"]
                    return self._send(200, {})
                m = re.match(r"^/datasets/(.+)\.git/info/lfs/objects/batch$", path)
                if m:
                    if self._fault("lfs_batch"):
                        return
                    objects = json.loads(self._body())["objects"]
                    out = []
                    for obj in objects:
                        entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
                        if obj["oid"] not in hub.lfs:
                            entry["actions"] = {"upload": {"href": f"{hub.url}/lfs-upload/{obj['oid']}", "header": {}}}
                        out.append(entry)
                    return self._send(200, {"transfer": "basic", "objects": out}, "application/vnd.git-lfs+json")
                self._body()
                self._send(404, {"error": "unknown route"})

            def _commit(self, repo: dict[str, Any], repo_id: str, payload: bytes) -> None:
                files = dict(repo["files"])
                summary = ""
                for line in payload.decode().splitlines():
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    value = item["value"]
                    if item["key"] == "header":
                        summary = value.get("summary", "")
                    elif item["key"] == "file":
                        files[value["path"]] = base64.b64decode(value["content"])
                    elif item["key"] == "lfsFile":
                        if value["oid"] not in hub.lfs:
                            return self._send(422, {"error": f"LFS object {value['oid']} was never uploaded"})
                        files[value["path"]] = hub.lfs[value["oid"]]
                    elif item["key"] == "deletedFile":
                        files.pop(value["path"], None)
                sha = hashlib.sha1(
                    json.dumps(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in files.items())).encode()
                ).hexdigest()
                repo["files"], repo["head"] = files, sha
                repo["commits"].append({"oid": sha, "summary": summary})
                self._send(
                    200,
                    {
                        "commitUrl": f"{hub.url}/datasets/{repo_id}/commit/{sha}",
                        "commitOid": sha,
                        "pullRequestUrl": None,
                    },
                )

        return Handler
