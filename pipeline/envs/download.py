"""Fetch EnvScaler's released corpus from the Hugging Face Hub into the data root.

Three dataset repos, as published: ``XXHStudyHard/EnvScaler-191-Env`` (env items: a JSON list of
records whose ``tools`` and ``env_func_details`` are JSON strings), ``XXHStudyHard/EnvScaler-RL-Scenario``
and ``XXHStudyHard/EnvScaler-SFT-Scenario`` (scenario records whose ``init_config`` is a JSON string).
They are downloaded with ``huggingface_hub.snapshot_download`` under ``<data root>/envscaler/<name>/``
and ``<data root>/envscaler/corpus.json`` records the files, which the ``sources`` resource picks up
as its default EnvScaler corpus (``./forge run`` then runs on it next to bfcl and the builtin pack).

``./forge download envscaler [--data-root DIR] [--endpoint URL] [--repo-prefix ORG/EnvScaler]``
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_REPO = "XXHStudyHard/EnvScaler-191-Env"
SCENARIO_REPOS = ("XXHStudyHard/EnvScaler-RL-Scenario", "XXHStudyHard/EnvScaler-SFT-Scenario")
DATA_SUFFIXES = (".json", ".jsonl", ".parquet")
CORPUS_FILE = "corpus.json"


@dataclass
class DownloadResult:
    directory: Path
    env_items: Path
    scenarios: list[Path] = field(default_factory=list)
    repos: dict[str, str] = field(default_factory=dict)  # repo id -> local folder

    def corpus(self) -> dict[str, Any]:
        return {
            "env_items": str(self.env_items),
            "scenarios": [str(p) for p in self.scenarios],
            "prefix": "envscaler",
            "license": "MIT (EnvScaler, RUC-NLPIR)",
            "repos": self.repos,
        }


def _data_files(folder: Path, repo_id: str) -> list[Path]:
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in DATA_SUFFIXES and ".cache" not in p.relative_to(folder).parts
    )
    if not files:
        raise FileNotFoundError(f"dataset {repo_id} holds no .json/.jsonl/.parquet file (downloaded to {folder})")
    return files


class DownloadError(RuntimeError):
    """A corpus download that did not complete (the message names the cause and the way out)."""


def download_envscaler(
    data_root: str | Path,
    endpoint: str | None = None,
    token: str | None = None,
    env_repo: str = ENV_REPO,
    scenario_repos: tuple[str, ...] = SCENARIO_REPOS,
    revision: str | None = None,
) -> DownloadResult:
    """Download the env items and scenario datasets and write ``envscaler/corpus.json``. ``endpoint`` and
    ``token`` left None are ``huggingface_hub``'s ($HF_ENDPOINT / https://huggingface.co; $HF_TOKEN, the
    ``hf auth login`` token file, or none: the release is public)."""
    from huggingface_hub import constants, snapshot_download

    base = Path(data_root) / "envscaler"
    created = [p for p in (base.parent, base) if not p.exists()]
    base.mkdir(parents=True, exist_ok=True)

    def fetch(repo_id: str) -> Path:
        folder = base / repo_id.split("/")[-1]
        existed = folder.exists()
        try:
            snapshot_download(
                repo_id=repo_id,
                repo_type="dataset",
                revision=revision,
                local_dir=folder,
                endpoint=endpoint,
                token=token,
                allow_patterns=[f"*{s}" for s in DATA_SUFFIXES] + ["README.md"],
            )
        except Exception as exc:  # network, auth, missing repo: one line naming the way out; no empty folder left
            for path in ([] if existed else [folder]) + created[::-1]:
                if path.is_dir() and not any(p.is_file() for p in path.rglob("*")):
                    shutil.rmtree(path, ignore_errors=True)
            cause = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise DownloadError(
                f"could not download {repo_id} from {endpoint or constants.ENDPOINT} ({type(exc).__name__}: {cause}); "
                "offline? set HF_ENDPOINT (or --endpoint) to a reachable mirror, or copy the release's files and "
                "name them in resources.sources.envscaler (docs/environments.md)"
            ) from exc
        return folder

    env_folder = fetch(env_repo)
    env_files = _data_files(env_folder, env_repo)
    if len(env_files) > 1:
        raise ValueError(
            f"dataset {env_repo} holds several data files ({[p.name for p in env_files]}); "
            f"name the env-items file in resources.sources.envscaler instead"
        )
    result = DownloadResult(base, env_files[0], repos={env_repo: str(env_folder)})
    for repo_id in scenario_repos:
        folder = fetch(repo_id)
        result.scenarios.extend(_data_files(folder, repo_id))
        result.repos[repo_id] = str(folder)
    (base / CORPUS_FILE).write_text(json.dumps(result.corpus(), indent=1))
    return result


def downloaded_corpus(data_root: str | Path) -> dict[str, Any] | None:
    """The corpus a download recorded under ``data_root`` (None when nothing was downloaded)."""
    path = Path(data_root) / "envscaler" / CORPUS_FILE
    if not path.exists():
        return None
    return json.loads(path.read_text())
