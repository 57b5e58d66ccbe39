"""Serve a checkpoint behind an OpenAI-compatible endpoint inside a job: ``llamafactory-cli api`` with the
vLLM backend when vLLM is installed in the job environment (the published serving recipe:
``--infer_backend vllm --vllm_maxlen 16384``, thinking off), else its Hugging Face backend. The server
is waited for with a bounded timeout; a server that exits or never becomes ready raises
:class:`ServerNotReady` with its log tail. The server is stopped (its whole process group) on exit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from pipeline.core.fields import setting
from pipeline.core.processes import die_with_parent
from pipeline.core.progress import Log
from pipeline.training.launchers import tail

BACKENDS = ("auto", "vllm", "huggingface")
#: the server listens on the job's own node; ``FREE_PORT`` (the default) takes a free port there
HOST = "127.0.0.1"
FREE_PORT = 0


class ServerNotReady(RuntimeError):
    """The model server exited or did not answer ``/v1/models`` in time."""


#: the fields of the served model's simulator (``SimulatorSpec`` and the ``openai`` kind's ``EndpointSettings``) an
#: evaluation job's ``serve`` sets
SERVED_SIMULATOR_FIELDS = ("max_tokens", "temperature", "concurrency", "timeout_s", "max_retries")
#: its defaults that differ from an endpoint's: longer timeouts and fewer retries, for a model on a fresh server
SERVED_SIMULATOR_DEFAULTS = {"timeout_s": 600.0, "max_retries": 2}


@dataclass(frozen=True)
class ServeSpec:
    """One checkpoint to serve. For a LoRA checkpoint ``model_name_or_path`` is the base model and
    ``adapter_name_or_path`` the checkpoint."""

    model_name_or_path: str
    template: str
    served_name: str
    adapter_name_or_path: str | None = None
    backend: Literal["auto", "vllm", "huggingface"] = setting("auto", "auto: vLLM when installed.")
    vllm_maxlen: int = setting(16384, "vLLM's maximum sequence length.")
    enable_thinking: bool = setting(False, "Let the chat template think (Qwen3).")
    infer_dtype: Literal["auto", "float16", "bfloat16", "float32"] = setting(
        "auto",
        "Compute dtype of the served model (LLaMA-Factory's infer_dtype); auto: bf16 where supported — on a "
        "CPU that is many times slower than float32.",
    )
    port: int = setting(
        FREE_PORT, f"Port of the OpenAI-compatible endpoint on the job's node ({FREE_PORT}: a free one)."
    )
    ready_timeout_s: float = setting(900.0, "Fail the job if the server is not ready by then.")
    llamafactory_cli: str = "llamafactory-cli"
    llamafactory_python: str = "python3"  # the same environment's Python (to look for vLLM)


@dataclass(frozen=True)
class Served:
    base_url: str
    backend: str
    log: Path


def has_vllm(python: str) -> bool:
    """Whether ``python`` (the LLaMA-Factory environment's) can import vLLM."""
    return subprocess.run([python, "-c", "import vllm"], capture_output=True).returncode == 0


def infer_config(spec: ServeSpec, backend: str) -> dict[str, Any]:
    """The ``llamafactory-cli api`` config for ``spec`` on ``backend`` (vllm | huggingface)."""
    cfg: dict[str, Any] = {
        "model_name_or_path": spec.model_name_or_path,
        "template": spec.template,
        "infer_backend": backend,
        "enable_thinking": spec.enable_thinking,
        "trust_remote_code": True,
        "infer_dtype": spec.infer_dtype,
    }
    if spec.adapter_name_or_path:
        cfg.update(adapter_name_or_path=spec.adapter_name_or_path, finetuning_type="lora")
    if backend == "vllm":
        cfg["vllm_maxlen"] = spec.vllm_maxlen
    return cfg


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _ready(url: str, name: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as resp:
            return resp.status == 200 and any(m.get("id") == name for m in json.load(resp).get("data", []))
    except (urllib.error.URLError, OSError, ValueError):
        return False


@contextmanager
def serve(spec: ServeSpec, workdir: Path, log: Log = print) -> Iterator[Served]:
    """Start the server, wait until ``/v1/models`` lists ``spec.served_name`` (at most
    ``spec.ready_timeout_s``), yield where it listens, stop it afterwards."""
    if spec.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {spec.backend!r}")
    backend = (
        spec.backend if spec.backend != "auto" else ("vllm" if has_vllm(spec.llamafactory_python) else "huggingface")
    )
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_path = workdir / "serve.yaml"
    cfg_path.write_text(yaml.safe_dump(infer_config(spec, backend), sort_keys=False))
    port = spec.port if spec.port != FREE_PORT else _free_port()
    url = f"http://{HOST}:{port}/v1"
    server_log = workdir / "server.log"
    # the job's PYTHONPATH (the project root) stays out of the LLaMA-Factory environment
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "API_HOST": HOST,
        "API_PORT": str(port),
        "API_MODEL_NAME": spec.served_name,
    }
    log(
        f"serving {spec.adapter_name_or_path or spec.model_name_or_path} as {spec.served_name!r} with "
        f"llamafactory-cli api ({backend} backend, template {spec.template}) on {url}; log {server_log}"
    )
    with server_log.open("w") as out:
        proc = subprocess.Popen(
            [spec.llamafactory_cli, "api", str(cfg_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,  # a command SIGKILLed still stops its server (a SIGTERM reaches the finally)
        )
    try:
        started = time.monotonic()
        while not _ready(url, spec.served_name):
            if proc.poll() is not None:
                raise ServerNotReady(
                    f"llamafactory-cli api exited with code {proc.returncode} before serving "
                    f"{spec.served_name!r}\n--- server log tail ---\n{tail(server_log, 30)}"
                )
            if time.monotonic() - started > spec.ready_timeout_s:
                raise ServerNotReady(
                    f"llamafactory-cli api did not become ready within {spec.ready_timeout_s:g}s "
                    f"({url}/models)\n--- server log tail ---\n{tail(server_log, 30)}"
                )
            time.sleep(0.5)
        log(f"server ready after {time.monotonic() - started:.1f}s")
        yield Served(url, backend, server_log)
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
