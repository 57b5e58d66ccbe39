"""Job-script fragment that serves a checkpoint behind an OpenAI-compatible endpoint with vLLM."""

from __future__ import annotations

import shlex


def vllm_prefix(checkpoint: str, served_name: str, port: int = 8011, gpus: int = 1, wait_s: int = 900) -> str:
    ckpt, name = shlex.quote(checkpoint), shlex.quote(served_name)
    return f"""command -v vllm >/dev/null || {{ echo "vllm not found: install vLLM in the job's environment to serve a checkpoint" >&2; exit 4; }}
command -v nvidia-smi >/dev/null && nvidia-smi -L || {{ echo "no NVIDIA GPU visible to the job" >&2; exit 3; }}
vllm serve {ckpt} --served-model-name {name} --port {port} --tensor-parallel-size {gpus} &
VLLM_PID=$!
trap 'kill $VLLM_PID 2>/dev/null || true' EXIT
for i in $(seq 1 {wait_s}); do
  curl -sf http://127.0.0.1:{port}/v1/models >/dev/null && break
  kill -0 $VLLM_PID 2>/dev/null || {{ echo "vLLM exited before serving" >&2; exit 5; }}
  sleep 1
done
"""
