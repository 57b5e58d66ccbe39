"""The async evaluation harness: bounded concurrency, tolerant parsing, scoring, and incremental persistence
(docs/evaluation.md: what is cached and by what key, request failures vs model errors). Every finished sample is
appended to the run's JSON-lines file at once, so a re-run of the same simulator (:meth:`SimulatorSpec.cache_identity`)
with the same prompt template skips every sample whose request completed. A *model error* is scored 0
(``status = 'answered'``); a *request failure* is the endpoint's (``'request_failed'``, metrics NULL, asked again on a
re-run), and more than ``max_request_failure_share`` of them raises :class:`MostRequestsFailed` once all is on disk."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.axes import AXES, Axis
from pipeline.evaluate.metrics import score
from pipeline.evaluate.parsing import parse_answer
from pipeline.evaluate.simulators import Completion, EndpointError, Simulator, SimulatorSpec
from pipeline.store.jsonl import Appender, read_rows

MAX_STORED_ANSWER = 20_000
ANSWERED, REQUEST_FAILED = "answered", "request_failed"


@dataclass
class RunReport:
    run_id: str
    samples: int
    skipped: int
    completed: int
    request_errors: int
    seconds: float
    failure_reasons: Counter[str] = field(default_factory=Counter)  # request_error -> count, this run

    @property
    def asked(self) -> int:
        """Requests sent in this run (answered or failed)."""
        return self.completed + self.request_errors

    def endpoint_errors(self, top: int = 3) -> str:
        """The most frequent request failures of this run, with their counts."""
        return "; ".join(f"{reason} (x{n})" for reason, n in self.failure_reasons.most_common(top))


class MostRequestsFailed(EndpointError):
    """More than the allowed share of a run's requests failed: the endpoint, not the model, is the
    problem. Raised after every result (answered or failed) is recorded; ``report`` says what ran."""

    def __init__(self, message: str, report: RunReport) -> None:
        super().__init__(message)
        self.report = report


def run_id(simulator: str, version: str) -> str:
    """``<simulator>@<split version>``; ``simulator`` is :attr:`SimulatorSpec.results_name` (the name, with
    the weights id when it has one)."""
    return f"{simulator}@{version}"


def _answered_by(row: dict[str, Any], identity: dict[str, str | None]) -> bool:
    """Whether a recorded row carries ``identity`` (:meth:`SimulatorSpec.cache_identity`). A row written
    before a key was recorded: no ``weights_id`` means no weights were known; no ``base_url`` leaves the
    endpoint unknown, and the row counts as the named model's."""
    return all(row.get(key) == value or (key == "base_url" and key not in row) for key, value in identity.items())


def finished_steps(path: Path, prompt: str | None = None, identity: dict[str, str | None] | None = None) -> set[str]:
    """Step ids whose request completed (a torn last line from a kill is ignored); with ``prompt``, only those asked
    with that prompt template (a changed template re-asks every sample); with ``identity``, only those answered by that
    simulator (other weights, or another model or endpoint under the same name, are asked again)."""
    return {
        row["step_id"]
        for row in read_rows(path)
        if row.get("request_error") is None
        and (prompt is None or row.get("prompt", "envsim") == prompt)
        and (identity is None or _answered_by(row, identity))
    }


def _axis_value(axis: Axis, sample: dict[str, Any]) -> Any:
    """A stored axis value of a sample as its result column holds it (integers as ``int``)."""
    value = sample[axis.column]
    return int(value) if axis.sql_type in ("INTEGER", "BIGINT") else value


def result_row(sample: dict[str, Any], completion: Completion, spec: SimulatorSpec, version: str) -> dict[str, Any]:
    """One result line: the sample's labels, every metric, parse and request errors, the prompt template and
    who answered (simulator, model, endpoint, weights id). A failed request (``completion.error``) is not
    scored: its metrics are NULL, ``status`` says why."""
    row: dict[str, Any] = {
        "run_id": run_id(spec.results_name, version),
        "simulator": spec.name,
        "model": spec.model,
        "weights_id": spec.weights_id,
        "base_url": spec.base_url,
        "split_version": version,
        "prompt": spec.prompt,
        "step_id": sample["step_id"],
        "stratum": sample["stratum"],
        "env_id": sample["env_id"],
        "tool": sample["tool"],
        **{axis.column: _axis_value(axis, sample) for axis in AXES if axis.stored},
        "status": ANSWERED if completion.error is None else REQUEST_FAILED,
        "fm": None,
        "cm": None,
        "cm_changed_paths": None,
        "cm_reference": None,
        "fm_reference": None,
        "reference_error": None,
        "parse_ok": None,
        "parse_error": None,
        "change_error": None,
        "request_error": completion.error,
        "latency_s": completion.latency_s,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "answer": completion.text[:MAX_STORED_ANSWER] if isinstance(completion.text, str) else "",
        "seq": time.time_ns(),
    }
    if completion.error is not None:
        return row
    parsed = parse_answer(completion.text)
    # every metric and the change error of the score, in the columns the row already holds
    row |= asdict(score(sample, parsed.answer, completion.text if isinstance(completion.text, str) else None))
    row |= {"parse_ok": parsed.ok, "parse_error": parsed.error}
    if not parsed.ok:  # no changes to apply: the parse error says why
        row["change_error"] = None
    return row


async def evaluate(samples: list[dict[str, Any]], simulator: Simulator, version: str, results: Path) -> RunReport:
    """Score ``samples`` with ``simulator`` (``spec.concurrency`` requests at once), appending each result to
    ``results`` as it finishes. Raises :class:`MostRequestsFailed` (after recording everything) when more than
    the spec's ``max_request_failure_share`` of the requests sent in this run failed."""
    spec = simulator.spec
    started = time.perf_counter()
    done = finished_steps(results, spec.prompt, spec.cache_identity())
    todo = [s for s in samples if s["step_id"] not in done]
    report = RunReport(run_id(spec.results_name, version), len(samples), len(samples) - len(todo), 0, 0, 0.0)
    with Appender(results) as out:

        def store(row: dict[str, Any]) -> None:
            out.write(row)
            report.completed += row["request_error"] is None
            report.request_errors += row["request_error"] is not None
            if row["request_error"] is not None:
                report.failure_reasons[row["request_error"]] += 1

        if todo:  # a pre-flight request: an endpoint that is down or refuses the key fails the run here
            first = await simulator.complete(todo[0])
            if first.error and first.error.startswith("unreachable"):
                raise EndpointError(f"{spec.name}: endpoint {spec.base_url} is unreachable ({first.error})")
            store(result_row(todo[0], first, spec, version))
        gate = asyncio.Semaphore(max(1, spec.concurrency))

        async def one(sample: dict[str, Any]) -> None:
            async with gate:
                completion = await simulator.complete(sample)
            store(result_row(sample, completion, spec, version))

        tasks = [asyncio.create_task(one(s)) for s in todo[1:]]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    report.seconds = time.perf_counter() - started
    share = spec.max_request_failure_share
    if report.asked and report.request_errors / report.asked > share:
        raise MostRequestsFailed(
            f"{spec.name}: {report.request_errors} of {report.asked} requests to {spec.base_url or spec.kind} failed "
            f"({100 * report.request_errors / report.asked:.0f}% > {100 * share:g}% allowed by "
            f"max_request_failure_share); the endpoint's errors: {report.endpoint_errors()}. "
            f"{report.completed} answered samples are recorded and will not be asked again",
            report,
        )
    return report
