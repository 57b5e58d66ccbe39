"""The simulator-judged gate (docs/evaluation.md "The corpus quality gate"): EnvScaler's stage 3
("check environments") with a simulator as the checker, as EnvSimBench's fourth contribution does.

For every environment a **probe set** is drawn from its labeled steps: :attr:`YieldSettings.probes_per_env`
calls, seeded, alternating positive (``success``) and negative (``failure`` / ``error``) calls while both last
(EnvScaler's positive and negative test cases). Each configured checker — any simulator kind of
:data:`pipeline.evaluate.simulators.KINDS`: ``oracle`` and ``no_change`` as anchors, a served model, a trained
checkpoint — predicts each probe's observation and state change from s_t, the call and the tool's code; the
harness scores it against the executor (FM, CM, ``cm_reference``; :mod:`pipeline.evaluate.metrics`).

EnvScaler's checker judges each test call ``pass`` / ``warning`` / ``fail`` and keeps an environment when
``pass_acc = pass / total`` (or ``not_fail_acc = (pass + warning) / total``) clears a threshold (0.85). Here a
probe is a ``pass`` when the checker's prediction matches the executor on both the observation and the state
change (FM and CM), a ``warning`` when it matches on one of them, a ``fail`` on neither; a probe whose request
failed is in no denominator. An environment passes a checker when ``pass_acc >= threshold``.

Every row carries the corpus fingerprint (the step table's), the checker's weights id and the threshold. The
executor's verdict (:mod:`pipeline.quality.environment_report`) is its own column, ``executor_verdict``, never
mixed into a checker's score; ``accepted`` is both (the environment passes the checker and the executor).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipeline.core.fields import setting
from pipeline.envs.config import EnvScalerCorpus
from pipeline.evaluate.harness import ANSWERED
from pipeline.evaluate.run import score
from pipeline.evaluate.samples import with_env_code
from pipeline.evaluate.simulators import SimulatorSpec, kind_of
from pipeline.labeling.quarantine import input_fingerprint, quarantined
from pipeline.quality.accepted_corpus import AcceptedCorpus, export_accepted
from pipeline.quality.environment_report import PASS
from pipeline.report.tables import Facts, Markdown, Table
from pipeline.store.duck import connect
from pipeline.store.jsonl import read_rows
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table
from pipeline.store.tables import TABLES

POSITIVE, NEGATIVE = "positive", "negative"
#: how the probes' samples are materialised (states rebuilt and verified): ``(layout, [(step_id, stratum)], strata
#: table, out) -> count``, i.e. :func:`pipeline.select.samples.materialize_samples`, which the caller passes in (the
#: gate runs below the CLI, which imports quality; select would add a floor to the import graph, docs/layout.md)
Materialize = Callable[[DataLayout, Sequence[tuple[str, str]], Path, Path], int]
#: EnvScaler's per-call statuses
CALL_PASS, CALL_WARNING, CALL_FAIL = "pass", "warning", "fail"


@dataclass(frozen=True)
class YieldSettings:
    """How the gate probes and judges."""

    probes_per_env: int = setting(20, "Calls drawn per environment (alternately positive and negative).")
    seed: int = setting(0, "Seed of the probe draw.")
    threshold: float = setting(
        0.85, "An environment passes a checker when its pass_acc reaches this (EnvScaler: 0.85)."
    )

    def __post_init__(self) -> None:
        if self.probes_per_env < 1:
            raise ValueError(f"probes_per_env must be at least 1, not {self.probes_per_env}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be between 0 and 1, not {self.threshold}")


ENV_YIELD = TABLES["env_yield"].schema


@dataclass
class CheckerYield:
    """One checker's gate: its rows (one per environment) and what it cost."""

    spec: SimulatorSpec
    rows: list[dict[str, Any]]
    seconds: float
    path: Any = None

    @property
    def passing(self) -> list[str]:
        return [r["env_id"] for r in self.rows if r["checker_verdict"] == PASS]

    @property
    def accepted(self) -> list[str]:
        return [r["env_id"] for r in self.rows if r["accepted"]]

    @property
    def yield_(self) -> float:
        """The share of the probed environments that pass (a quarantined one has a row, and no probes)."""
        probed = sum(1 for r in self.rows if r["probes"])
        return len(self.passing) / probed if probed else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "checker": self.spec.results_name,
            "kind": self.spec.kind,
            "environments": len(self.rows),
            "passing": len(self.passing),
            "yield": round(self.yield_, 4),
            "accepted": len(self.accepted),
            "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in self.rows),
            "completion_tokens": sum(r["completion_tokens"] or 0 for r in self.rows),
            "seconds": round(self.seconds, 2),
        }


@dataclass
class YieldReport:
    fingerprint: str
    settings: YieldSettings
    probes: int
    checkers: list[CheckerYield] = field(default_factory=list)

    def table(self) -> list[dict[str, Any]]:
        return [c.summary() for c in self.checkers]

    def facts(self, accepted: AcceptedCorpus) -> Facts:
        """What the gate reports (``environment_yield``'s metadata): the probe set, each checker's yield, and the
        accepted corpus with its card."""
        return Facts(
            {
                "corpus_fingerprint": self.fingerprint,
                "probes": self.probes,
                "threshold": self.settings.threshold,
                "checkers": Table(self.table(), YIELD_COLUMNS),
                **{f"yield/{c.spec.results_name}": c.yield_ for c in self.checkers},
                "accepted_environments": len(accepted.environments),
                "accepted_scenarios": accepted.scenarios,
                "accepted_corpus": accepted.directory.resolve(),
                "card": Markdown((accepted.directory / "CARD.md").read_text()),
            }
        )


#: the columns of a checker's line in the gate's metadata (:meth:`YieldReport.table`)
YIELD_COLUMNS = ["checker", "kind", "environments", "passing", "yield", "accepted", "prompt_tokens"]
YIELD_COLUMNS += ["completion_tokens", "seconds"]


def probe_picks(layout: DataLayout, probes_per_env: int, seed: int, skip: Sequence[str] = ()) -> list[tuple[str, str]]:
    """``(step_id, positive|negative)`` of every environment's probe set but ``skip``'s, from the strata table:
    seeded (an md5 of the seed and the step id orders each environment's positives and negatives), alternating
    positive and negative while both last, at most ``probes_per_env`` per environment."""
    with connect() as con:
        rows = con.execute(
            """WITH s AS (
                   SELECT step_id, env_id, CASE WHEN outcome = 'success' THEN 'positive' ELSE 'negative' END AS polarity
                   FROM read_parquet(?) WHERE NOT list_contains(?::VARCHAR[], env_id)),
               r AS (SELECT *, row_number() OVER (PARTITION BY env_id, polarity
                                                  ORDER BY md5(? || step_id), step_id) AS k
                     FROM s),
               o AS (SELECT *, row_number() OVER (PARTITION BY env_id ORDER BY k, polarity DESC) AS n FROM r)
               SELECT step_id, polarity FROM o WHERE n <= ? ORDER BY env_id, n""",
            [str(layout.strata), list(skip), f"{seed}:", probes_per_env],
        ).fetchall()
    return [(str(s), str(p)) for s, p in rows]


def probe_samples(
    layout: DataLayout, settings: YieldSettings, materialize: Materialize
) -> tuple[str, list[dict[str, Any]]]:
    """(corpus fingerprint, the probe samples): materialised once per fingerprint and settings at
    ``layout.quality_probes`` (full states rebuilt, verified, as a split's samples are). A quarantined environment is
    not probed (:func:`pipeline.labeling.quarantine.quarantined`): its labels are not the executor's to judge by."""
    key = f"{input_fingerprint(layout)}-n{settings.probes_per_env}-s{settings.seed}"
    path = layout.quality_probes(key)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        picks = probe_picks(layout, settings.probes_per_env, settings.seed, sorted(quarantined(layout)))
        materialize(layout, picks, layout.strata, path)
    return key, with_env_code(layout, pq.read_table(path).to_pylist())


def _executor_verdicts(layout: DataLayout) -> dict[str, tuple[str, str | None]]:
    if not layout.env_quality.exists():
        return {}
    table = pq.read_table(layout.env_quality, columns=["env_id", "verdict", "main_problem"]).to_pylist()
    return {r["env_id"]: (r["verdict"], r["main_problem"]) for r in table}


def _mean(values: list[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def call_status(row: dict[str, Any]) -> str:
    """EnvScaler's status of one answered probe: pass (FM and CM), warning (one of them), fail (neither)."""
    right = bool(row.get("fm")) + bool(row.get("cm"))
    return CALL_PASS if right == 2 else CALL_WARNING if right == 1 else CALL_FAIL


def env_rows(
    spec: SimulatorSpec,
    results: Sequence[dict[str, Any]],
    samples: Sequence[dict[str, Any]],
    settings: YieldSettings,
    fingerprint: str,
    verdicts: dict[str, tuple[str, str | None]],
    seconds: float,
    unprobed: dict[str, str],
) -> list[dict[str, Any]]:
    """One row per environment of ``samples`` from a checker's ``results`` (the harness's rows; the last row of each
    step counts), and one without probes for each environment of ``unprobed`` (env -> why it was not probed)."""
    by_step = {r["step_id"]: r for r in results}
    probes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for sample in samples:
        probes[sample["env_id"]].append(sample)
    rows = []
    for env_id in sorted(set(probes) | set(unprobed)):
        mine = probes[env_id]
        requested = [by_step[s["step_id"]] for s in mine if s["step_id"] in by_step]
        answered = [r for r in requested if r.get("status") == ANSWERED]
        statuses = [call_status(r) for r in answered]
        n = len(answered)
        passed, warned = statuses.count(CALL_PASS), statuses.count(CALL_WARNING)
        pass_acc = passed / n if n else None
        executor, problem = verdicts.get(env_id, (None, None))
        if env_id in unprobed and not mine:
            problem = problem or f"not probed: quarantined ({unprobed[env_id]})"
        checker = None if pass_acc is None else PASS if pass_acc >= settings.threshold - 1e-12 else "fail"
        rows.append(
            {
                "checker": spec.results_name,
                "kind": spec.kind,
                "model": spec.model or None,
                "weights_id": spec.weights_id,
                "corpus_fingerprint": fingerprint,
                "threshold": settings.threshold,
                "probes_per_env": settings.probes_per_env,
                "seed": settings.seed,
                "env_id": env_id,
                "probes": len(mine),
                "positives": sum(s["stratum"] == POSITIVE for s in mine),
                "negatives": sum(s["stratum"] == NEGATIVE for s in mine),
                "answered": n,
                "request_failures": len(requested) - n,
                "pass_count": passed,
                "warning_count": warned,
                "fail_count": statuses.count(CALL_FAIL),
                "fm": _mean([r.get("fm") for r in answered]),
                "cm": _mean([r.get("cm") for r in answered]),
                "cm_reference": _mean([r.get("cm_reference") for r in answered]),
                "pass_acc": None if pass_acc is None else round(pass_acc, 4),
                "not_fail_acc": round((passed + warned) / n, 4) if n else None,
                "checker_verdict": checker,
                "executor_verdict": executor,
                "executor_problem": problem,
                "accepted": checker == PASS and executor == PASS,
                "prompt_tokens": sum(int(r.get("prompt_tokens") or 0) for r in answered),
                "completion_tokens": sum(int(r.get("completion_tokens") or 0) for r in answered),
                "checker_yield": None,
                "checker_seconds": round(seconds, 3),
            }
        )
    probed = [r for r in rows if r["probes"]]
    share = sum(r["checker_verdict"] == PASS for r in probed) / len(probed) if probed else 0.0
    for row in rows:
        row["checker_yield"] = round(share, 4)
    return rows


def environment_yield(
    layout: DataLayout,
    checkers: Sequence[SimulatorSpec],
    materialize: Materialize,
    settings: YieldSettings = YieldSettings(),
) -> YieldReport:
    """Score every checker on the probe sets and write its rows to ``layout.env_yield(<checker>)`` (the
    ``env_yield`` view). Needs the strata table (``step_strata``); reads the executor's verdicts from
    ``env_quality`` when :func:`pipeline.quality.environment_report.environment_report` wrote it."""
    for spec in checkers:
        kind_of(spec)  # an unknown kind is refused before anything runs
    names = [spec.results_name for spec in checkers]
    if len(set(names)) != len(names):
        raise ValueError(f"two checkers share a name: {sorted({n for n in names if names.count(n) > 1})}")
    key, samples = probe_samples(layout, settings, materialize)
    fingerprint = key.split("-n", 1)[0]
    verdicts = _executor_verdicts(layout)
    unprobed = quarantined(layout)
    report = YieldReport(fingerprint, settings, len(samples))
    for spec in checkers:
        path = layout.yield_results(key, spec.results_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        if samples:
            score(samples, spec, f"probes-{key}", path)
        seconds = time.perf_counter() - started
        rows = env_rows(spec, list(read_rows(path)), samples, settings, fingerprint, verdicts, seconds, unprobed)
        out = layout.env_yield(spec.results_name)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_table(out, rows, ENV_YIELD)
        report.checkers.append(CheckerYield(spec, rows, seconds, out))
    return report


def _rejection(row: dict[str, Any]) -> str:
    """Why an environment is not accepted: the executor's main problem first, else the checker's shortfall."""
    if row["executor_verdict"] != PASS:
        return row["executor_problem"] or "no executor verdict (environment_report has not run)"
    if row["pass_acc"] is None:
        return "the checker answered no probe"
    return f"pass_acc {row['pass_acc']:.2f} < {row['threshold']:g} ({row['checker']})"


def gate(
    layout: DataLayout,
    checkers: Sequence[SimulatorSpec],
    corpora: Sequence[EnvScalerCorpus],
    materialize: Materialize,
    settings: YieldSettings = YieldSettings(),
    gate_checker: str | None = None,
) -> tuple[YieldReport, AcceptedCorpus]:
    """The gate: every checker's yield (:func:`environment_yield`), then the accepted corpus of the gate
    checker (``gate_checker``, a checker's name; default: the first) exported from ``corpora``."""
    report = environment_yield(layout, checkers, materialize, settings)
    chosen = next((c for c in report.checkers if gate_checker in (c.spec.name, c.spec.results_name)), None)
    if gate_checker is not None and chosen is None:
        raise ValueError(
            f"gate_checker {gate_checker!r} is not one of the checkers: "
            f"{', '.join(c.spec.results_name for c in report.checkers)}"
        )
    chosen = chosen or report.checkers[0]
    card = {
        "checker": chosen.spec.results_name,
        "kind": chosen.spec.kind,
        "model": chosen.spec.model or None,
        "weights_id": chosen.spec.weights_id,
        "threshold": settings.threshold,
        "yield": round(chosen.yield_, 4),
        "of": len(chosen.rows),
        "fingerprint": report.fingerprint,
        "probes_per_env": settings.probes_per_env,
        "seed": settings.seed,
        # wall time is a measurement, not a property of the corpus: it stays in env_yield, off the card, so the
        # card of a re-run on the same input is byte-identical
        "checkers": [{k: v for k, v in row.items() if k != "seconds"} for row in report.table()],
    }
    rejected = {r["env_id"]: _rejection(r) for r in chosen.rows if not r["accepted"]}
    return report, export_accepted(layout, corpora, set(chosen.accepted), card, rejected)
