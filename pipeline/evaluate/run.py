"""The evaluation loop: score each simulator of a run, one after the other, on one split version's samples
with the harness (:func:`pipeline.evaluate.harness.evaluate`), each into its own per-sample results file.
The ``simulator_eval`` asset and the evaluation job (:mod:`pipeline.training.eval_job`) both run this loop;
they differ only in where the results land afterwards (the asset's DuckDB, the job's report)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.evaluate.harness import MostRequestsFailed, RunReport, evaluate, run_id
from pipeline.evaluate.simulators import SimulatorSpec, make_simulator
from pipeline.store.layout import DataLayout


@dataclass
class Scored:
    """One simulator's run: its results file and report; ``failure`` is the :class:`MostRequestsFailed`
    message when most of its requests failed (every result recorded all the same)."""

    spec: SimulatorSpec
    run_id: str
    path: Path
    report: RunReport
    failure: str | None = None

    def line(self) -> str:
        """What ran, for the log."""
        r = self.report
        return (
            f"{r.run_id}: {r.completed} scored, {r.skipped} resumed, {r.request_errors} "
            f"request failures in {r.seconds:.1f}s" + (f" ({r.endpoint_errors()})" if r.request_errors else "")
        )


def score(samples: list[dict[str, Any]], spec: SimulatorSpec, version: str, path: Path) -> RunReport:
    """Score ``samples`` with the simulator of ``spec`` into ``path`` (resuming what it holds), the
    simulator closed afterwards. Raises :class:`MostRequestsFailed` as the harness does."""
    simulator = make_simulator(spec)

    async def go() -> RunReport:
        try:
            return await evaluate(samples, simulator, version, path)
        finally:
            await simulator.aclose()

    return asyncio.run(go())


def score_all(
    layout: DataLayout,
    version: str,
    samples: list[dict[str, Any]],
    specs: Sequence[SimulatorSpec],
    on_scored: Callable[[Scored], None] = lambda _s: None,
    keep_going: bool = True,
) -> list[Scored]:
    """Score every simulator of ``specs`` on ``samples`` of split ``version``, in order, each into
    ``layout.eval_results(version, spec.results_name)`` (its name, with its weights id when it has one;
    every name checked before the first request), calling
    ``on_scored`` after each. A simulator whose requests mostly failed is recorded with its ``failure``
    and the next one runs (``keep_going``), or its :class:`MostRequestsFailed` is raised at once."""
    paths = [layout.eval_results(version, spec.results_name) for spec in specs]
    out = []
    for spec, path in zip(specs, paths):
        try:
            scored = Scored(spec, run_id(spec.results_name, version), path, score(samples, spec, version, path))
        except MostRequestsFailed as exc:
            if not keep_going:
                raise
            scored = Scored(spec, run_id(spec.results_name, version), path, exc.report, str(exc))
        on_scored(scored)
        out.append(scored)
    return out
