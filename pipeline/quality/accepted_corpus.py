"""The accepted corpus: the environments that pass the gate — the executor's verdict and the gate
checker's — with their scenarios, exported in EnvScaler's released layout, so that a rerun of the pipeline on
it (``./forge run -c <export>/run.yaml``) is the "clean corpus" run.

Under ``layout.accepted_corpus`` (``quality/accepted/``): one folder per EnvScaler-format corpus of the run
(``<prefix>/env_metadata.json``: ``{env_id: item}`` as the corpus gave each item, ``<prefix>/scenarios.json``:
the scenarios of the kept environments as given), ``run.yaml`` (the run config that reads them, with each
corpus's prefix, license and outcome rule), ``card.json`` and ``CARD.md`` (checker, threshold, yield, what was
kept and what was dropped, why). Environments of other sources (bfcl, the embedded builtin pack) are not in
EnvScaler's released format as given; the card counts them apart.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.envscaler import read_records
from pipeline.report.tables import md_records
from pipeline.store.layout import DataLayout, safe_name
from pipeline.store.parquet_io import atomic_path

ENV_FILE, SCENARIO_FILE, RUN_FILE, CARD_FILE = "env_metadata.json", "scenarios.json", "run.yaml", "card.json"


@dataclass
class AcceptedCorpus:
    """What was exported: the directory, the kept environments and scenarios, the card."""

    directory: Path
    environments: list[str] = field(default_factory=list)
    scenarios: int = 0
    card: dict[str, Any] = field(default_factory=dict)

    @property
    def run_config(self) -> Path:
        return self.directory / RUN_FILE


def _env_records(path: Path) -> list[tuple[str, Any]]:
    """(env id, raw item) of an env-items file, in file order (as :func:`pipeline.envs.envscaler.load_env_items`
    reads them; unreadable records are the loader's to report and are skipped here)."""
    out: list[tuple[str, Any]] = []
    for origin, doc, err in read_records(path):
        if err or not isinstance(doc, dict):
            continue
        if "env_class_code" in doc or "env_id" in doc:
            out.append((str(doc.get("env_id") or origin), doc))
        else:
            out.extend((str(k), v) for k, v in doc.items())
    return out


def _scenario_records(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _origin, doc, err in read_records(path):
        if err:
            continue
        items = doc.items() if isinstance(doc, dict) and "env_id" not in doc else [(None, doc)]
        for key, obj in items:
            if isinstance(obj, dict) and "env_id" in obj:
                out.append(obj if key is None or "task_id" in obj else {"task_id": str(key), **obj})
    return out


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(value, indent=1, ensure_ascii=False, default=str))


def export_accepted(
    layout: DataLayout,
    corpora: Sequence[EnvScalerCorpus],
    accepted: set[str],
    card: dict[str, Any],
    rejected: dict[str, str | None] | None = None,
) -> AcceptedCorpus:
    """Write the accepted corpus: the environments of ``corpora`` whose qualified id (``<prefix>/<env_id>``) is
    in ``accepted`` and their scenarios; ``card`` (checker, threshold, yield, fingerprint…) and the ``rejected``
    environments with their main problem go on the card. A previous export is replaced."""
    out = AcceptedCorpus(layout.accepted_corpus)
    if out.directory.exists():
        shutil.rmtree(out.directory)
    out.directory.mkdir(parents=True)
    run_corpora = []
    used: set[str] = set()
    exported: set[str] = set()
    for n, corpus in enumerate(corpora):
        folder = safe_name(corpus.prefix, "corpus prefix")
        if folder in used:
            folder = f"{folder}-{n}"
        used.add(folder)
        items = {
            env_id: item
            for env_id, item in _env_records(Path(corpus.env_items))
            if f"{corpus.prefix}/{env_id}" in accepted
        }
        scenarios = [
            s for path in corpus.scenario_files() for s in _scenario_records(Path(path)) if str(s["env_id"]) in items
        ]
        env_file, scen_file = out.directory / folder / ENV_FILE, out.directory / folder / SCENARIO_FILE
        _write_json(env_file, items)
        _write_json(scen_file, scenarios)
        exported |= {f"{corpus.prefix}/{env_id}" for env_id in items}
        out.scenarios += len(scenarios)
        entry: dict[str, Any] = {
            "env_items": str(env_file.resolve()),
            "scenarios": str(scen_file.resolve()),
            "prefix": corpus.prefix,
            "license": corpus.license,
        }
        if corpus.outcome_rule is not None:
            entry["outcome_rule"] = corpus.outcome_rule
        run_corpora.append(entry)
    out.environments = sorted(exported)
    not_exportable = sorted(accepted - exported)
    out.card = {
        **card,
        "environments": len(out.environments),
        "scenarios": out.scenarios,
        "accepted": out.environments,
        "accepted_not_exportable": not_exportable,
        "rejected": dict(sorted((rejected or {}).items())),
    }
    if out.environments:  # JSON is YAML: `./forge run -c run.yaml` reads it; the accepted corpora, no bfcl, no builtin
        _write_json(
            out.run_config,
            {
                "resources": {
                    "sources": {
                        "config": {"builtin": {"enabled": False}, "bfcl": {"categories": []}, "envscaler": run_corpora}
                    }
                }
            },
        )
    _write_json(out.directory / CARD_FILE, out.card)
    with atomic_path(out.directory / "CARD.md") as tmp:
        tmp.write_text(card_markdown(out.card))
    return out


def card_markdown(card: dict[str, Any]) -> str:
    """The accepted corpus's card: the gate (checker, threshold, yield) and what it kept and dropped."""
    gate = {
        "checker": card.get("checker"),
        "weights id": card.get("weights_id") or "",
        "threshold": card.get("threshold"),
        "checker yield": card.get("yield"),
        "accepted": card.get("environments"),
        "of": card.get("of"),
        "scenarios": card.get("scenarios"),
        "corpus fingerprint": card.get("fingerprint"),
    }
    lines = [
        "# Accepted corpus",
        "",
        (
            f'The environments that pass the quality gate (docs/evaluation.md "The corpus quality gate"): the '
            f"executor's verdict and the checker `{card.get('checker')}` (pass_acc ≥ {card.get('threshold')})."
        ),
        "",
        md_records([gate], list(gate)),
        "",
    ]
    if card.get("accepted_not_exportable"):
        lines += [
            (
                f"Accepted but not in EnvScaler's released format (other sources): "
                f"{', '.join(card['accepted_not_exportable'])}."
            ),
            "",
        ]
    if card.get("rejected"):
        lines += [
            "## Rejected",
            "",
            md_records(
                [{"environment": env, "main problem": why or ""} for env, why in card["rejected"].items()],
                ["environment", "main problem"],
                limit=10_000,
            ),
            "",
        ]
    if card.get("environments"):
        lines += ["Rerun the pipeline on it: `./forge run -c run.yaml` (this folder's)."]
    else:
        lines += ["No environment of an EnvScaler-format corpus was accepted: nothing to rerun (no `run.yaml`)."]
    return "\n".join(lines) + "\n"
