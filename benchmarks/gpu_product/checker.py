"""The trained simulator as the corpus checker (docs/evaluation.md "The corpus quality gate"): wait for
the checkpoint `sft_training` publishes under the training root, serve it with the project's serving
(`llamafactory-cli api`, :func:`pipeline.training.serve.serve`) and materialize Dagster's `environment_yield` on the
gate root (a corpus with planted defects beside good environments) with it as the gate checker, beside the anchors
`oracle` and `no_change`. Its rows land in the gate root's DuckDB (`env_yield`) under the checkpoint's weights id.

    python benchmarks/gpu_product/checker.py --train-root DIR --gate-root DIR --sources FILE --llamafactory-python PY
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from pipeline.training import checkpoints
from pipeline.training.serve import ServeSpec, serve


def wait_for_checkpoint(root: Path, timeout_s: float, ended: Path | None) -> tuple[Path, dict]:
    """The latest published checkpoint under ``root``, waiting for `sft_training` to publish one (at most
    ``timeout_s``, and no longer once the file ``ended`` exists: the training job is over)."""
    started = time.monotonic()
    while True:
        over = ended is not None and ended.exists()
        try:
            path, manifest = checkpoints.resolve(root, "latest")
            return path, manifest or {}
        except FileNotFoundError:
            if over or time.monotonic() - started > timeout_s:
                raise
            time.sleep(5)


def checker_config(name: str, weights_id: str, base_url: str, args: argparse.Namespace) -> dict:
    """`environment_yield`'s run config: the anchors and the served checkpoint, which decides the gate."""
    served = {
        "name": name,
        "kind": "openai",
        "weights_id": weights_id,
        "concurrency": args.concurrency,
        "openai": {
            "model": name,
            "base_url": base_url,
            "api_key_env": "",
            "max_tokens": args.max_tokens,
            "timeout_s": 300,
            "max_retries": 1,
        },
    }
    anchors = [{"name": "oracle", "kind": "oracle"}, {"name": "no_change", "kind": "no_change"}]
    gate = {"gate_checker": name, "checkers": [*anchors, served], "probes_per_env": args.probes}
    return {"ops": {"environment_yield": {"config": gate}}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-root", type=Path, required=True)
    parser.add_argument("--gate-root", type=Path, required=True)
    parser.add_argument("--sources", type=Path, required=True, help="run config naming the gate root's corpus")
    parser.add_argument("--llamafactory-python", required=True)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--probes", type=int, default=20, help="probes per environment")
    parser.add_argument("--wait-s", type=float, default=600)
    parser.add_argument("--until", type=Path, help="stop waiting for a checkpoint once this file exists")
    parser.add_argument("--dtype", default="auto")
    args = parser.parse_args()
    path, manifest = wait_for_checkpoint(args.train_root, args.wait_s, args.until)
    weights_id = checkpoints.weights_id(path, manifest)
    name = checkpoints.default_served_name(path, weights_id, manifest)
    template = checkpoints.chat_template(path, manifest)
    print(f"checker: {name} ({path}, weights {weights_id}, template {template})", flush=True)
    spec = ServeSpec(
        model_name_or_path=str(path),
        template=template,
        served_name=name,
        backend="huggingface",
        infer_dtype=args.dtype,
        ready_timeout_s=300,
        max_concurrent=args.concurrency,
        llamafactory_cli=str(Path(args.llamafactory_python).with_name("llamafactory-cli")),
        llamafactory_python=args.llamafactory_python,
    )
    work = args.gate_root / "jobs" / "gate-checker"
    with serve(spec, work, lambda line: print(line, flush=True)) as endpoint:
        config = work / "environment_yield.yaml"
        config.write_text(yaml.safe_dump(checker_config(name, weights_id, endpoint.base_url, args)))
        env = {**os.environ, "ENVSIM_DATA_ROOT": str(args.gate_root)}
        dagster = str(Path(sys.executable).with_name("dagster"))
        select = ["--select", "environment_yield", "-c", str(config), "-c", str(args.sources)]
        command = [dagster, "asset", "materialize", "-m", "assets.definitions", *select]
        return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
