"""``./forge bench-model``: a served model scored on the benchmark."""

from __future__ import annotations

import argparse
import subprocess
import sys

from cli.base import ROOT, command, data_root, say


def _bench_model_parser() -> argparse.ArgumentParser:
    from pipeline.training import base_models

    b = argparse.ArgumentParser(
        prog="./forge bench-model",
        description="Serve a model with llamafactory-cli api (the project's serving) and score it with the "
        "evaluation harness on the first N samples of every benchmark cell; prints parse rate, "
        "FM, CM and cm_reference per cell and stores them in DuckDB (eval_results, "
        "bench_model_runs) under the weights' id.",
    )
    b.add_argument(
        "--checkpoint",
        default=base_models.DEFAULT_MODEL,
        help=f"an embedded model ({', '.join(base_models.EMBEDDED)}), a checkpoint version, 'latest', "
        f"<version>/step-N, a directory, or a Hub id whose snapshot is in the local Hugging Face cache "
        f"(HF_HOME / HF_HUB_CACHE; nothing is downloaded) (default: {base_models.DEFAULT_MODEL})",
    )
    b.add_argument("--per-cell", type=int, default=1, help="samples per benchmark cell (default 1)")
    b.add_argument("--max-tokens", type=int, default=512, help="most tokens per answer (default 512)")
    b.add_argument(
        "--backend",
        choices=["huggingface", "vllm", "auto"],
        default="huggingface",
        help="llamafactory-cli api backend (default huggingface; a before/after comparison must use one)",
    )
    b.add_argument(
        "--template",
        default=None,
        help="chat template (default: the one recorded with a checkpoint or an "
        "embedded model; needed for any other model, e.g. qwen)",
    )
    b.add_argument("--split-version", default=None, help="benchmark version (default: CURRENT)")
    b.add_argument("--data-root", default=None, help="default: ENVSIM_DATA_ROOT or ./data")
    b.add_argument("--timeout", type=float, default=900.0, help="seconds per request (default 900)")
    b.add_argument(
        "--dtype",
        choices=["auto", "float16", "bfloat16", "float32"],
        default=None,
        help="served compute dtype (default: auto with an NVIDIA GPU, else float32)",
    )
    b.add_argument(
        "--check",
        action="store_true",
        help="only check that --checkpoint's weights are here and its chat template is known (what ./forge "
        "bench-model does before it installs the serving environment); exit 2 with one line if not",
    )
    return b


@command("[--checkpoint REF] [--per-cell N] [--max-tokens N] ...   score a served model on the benchmark")
def bench_model(argv: list[str]) -> int:
    """``./forge bench-model``: the weights are checked first (one line saying how to provide them), before
    ``./forge train-env`` installs the 2 GB serving environment; then the model is served and scored."""
    args = _bench_model_parser().parse_args(argv)
    from pipeline.core.settings import settings
    from pipeline.report.tables import md_table
    from pipeline.store import duck
    from pipeline.training.bench_model import ModelUnavailable, bench_model, check_model
    from pipeline.training.launchers import find_llamafactory

    current = settings()
    duck.configure(current)
    root = data_root(args.data_root)
    try:
        found = check_model(args.checkpoint, root, args.template)
        if args.check:
            say(f"./forge bench-model --check: {found}: ready to serve")
            return 0
        if not current.llamafactory_python:  # else the environment named is used as it is
            code = subprocess.run([str(ROOT / "forge"), "train-env"], stdout=subprocess.DEVNULL).returncode
            if code:
                return code
        python, cli = find_llamafactory(current.llamafactory_python)
        result = bench_model(
            root,
            python,
            cli,
            args.checkpoint,
            args.per_cell,
            args.max_tokens,
            args.backend,
            args.template,
            args.split_version,
            args.timeout,
            dtype=args.dtype,
        )
    except ModelUnavailable as exc:
        say(f"./forge bench-model: {exc}", file=sys.stderr)
        return 2
    say(
        f"{result.run_id}: {result.scored} scored, {result.resumed} resumed of {result.samples} samples "
        f"in {result.seconds:.0f}s (weights {result.weights_id})"
    )
    say(md_table(result.cells, index=False))
    say("stored in DuckDB: eval_results / eval_runs (run_id above), bench_model_runs")
    return 0
