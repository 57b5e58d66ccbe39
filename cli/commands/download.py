"""``./forge download``: a corpus fetched from the Hugging Face Hub into the data root."""

from __future__ import annotations

import argparse
import sys

from cli.base import command, data_root, say


@command("envscaler [--endpoint URL] [--data-root DIR] ...   fetch the EnvScaler corpus into the data root")
def download(argv: list[str]) -> int:
    """``./forge download envscaler``: EnvScaler's released corpus from the Hugging Face Hub into the data root."""
    from pipeline.envs import download as hub

    d = argparse.ArgumentParser(prog="./forge download", description="fetch a corpus from the Hugging Face Hub")
    d.add_argument("corpus", choices=["envscaler"])
    d.add_argument("--data-root", default=None, help="default: ENVSIM_DATA_ROOT or ./data")
    d.add_argument("--endpoint", default=None, help="Hub endpoint (default: HF_ENDPOINT or https://huggingface.co)")
    d.add_argument("--env-repo", default=hub.ENV_REPO, help=f"dataset repo of the env items (default {hub.ENV_REPO})")
    d.add_argument(
        "--scenario-repo",
        action="append",
        default=None,
        help=f"dataset repo(s) of scenarios (default: {', '.join(hub.SCENARIO_REPOS)})",
    )
    d.add_argument("--revision", default=None)
    args = d.parse_args(argv)
    root = data_root(args.data_root)
    try:
        result = hub.download_envscaler(
            root,
            endpoint=args.endpoint,
            token=None,  # huggingface_hub resolves: $HF_TOKEN, `hf auth login`
            env_repo=args.env_repo,
            scenario_repos=tuple(args.scenario_repo or hub.SCENARIO_REPOS),
            revision=args.revision,
        )
    except hub.DownloadError as exc:
        say(f"./forge download: {exc}", file=sys.stderr)
        return 1
    say(f"env items: {result.env_items}")
    for path in result.scenarios:
        say(f"scenarios: {path}")
    say(
        f"recorded in {result.directory / hub.CORPUS_FILE}: the sources resource uses it by default "
        f"(./forge run with ENVSIM_DATA_ROOT={root})"
    )
    return 0
