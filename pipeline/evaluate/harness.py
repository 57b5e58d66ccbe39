"""The async evaluation harness: bounded concurrency, tolerant parsing, scoring, and incremental
persistence — every finished sample is appended (and flushed) to the run's JSON-lines file at once,
so a killed run loses at most the requests in flight and a re-run of the same (simulator, split
version) skips every sample whose request completed. Cost per sample is constant: nothing is
rewritten."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pipeline.evaluate.metrics import score
from pipeline.evaluate.parsing import parse_answer
from pipeline.evaluate.simulators import Completion, EndpointError, Simulator

MAX_STORED_ANSWER = 20_000


@dataclass
class RunReport:
    run_id: str
    samples: int
    skipped: int
    completed: int
    request_errors: int
    seconds: float


def run_id(simulator: str, version: str) -> str:
    return f"{simulator}@{version}"


def finished_steps(path: Path, prompt: str | None = None) -> set[str]:
    """Step ids whose request completed (a torn last line from a kill is ignored); with ``prompt``,
    only those asked with that prompt template (a changed template re-asks every sample)."""
    done: set[str] = set()
    if not path.exists():
        return done
    with path.open() as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row.get("request_error") is None and (prompt is None or row.get("prompt", "envsim") == prompt):
                done.add(row["step_id"])
    return done


def result_row(sample: dict[str, Any], completion: Completion, sim_name: str, model: str, version: str,
               prompt: str = "envsim") -> dict[str, Any]:
    """One result line: the sample's labels, every metric, parse and request errors, the prompt template."""
    parsed = parse_answer(completion.text) if completion.error is None else None
    s = score(sample, parsed.answer if parsed else None, completion.text if completion.error is None else None)
    return {
        "run_id": run_id(sim_name, version), "simulator": sim_name, "model": model, "split_version": version,
        "step_id": sample["step_id"], "stratum": sample["stratum"], "env_id": sample["env_id"], "tool": sample["tool"],
        "outcome": sample["outcome"], "delta_size": int(sample["delta_size"]), "args_count": int(sample["args_count"]),
        "prompt": prompt, "fm": s.fm, "cm": s.cm, "cm_changed_paths": s.cm_changed_paths,
        "cm_reference": s.cm_reference, "fm_reference": s.fm_reference, "reference_error": s.reference_error,
        "parse_ok": bool(parsed and parsed.ok), "parse_error": parsed.error if parsed else None,
        "change_error": s.change_error if parsed and parsed.ok else None,
        "request_error": completion.error, "latency_s": completion.latency_s,
        "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
        "answer": (completion.text or "")[:MAX_STORED_ANSWER], "seq": time.time_ns(),
    }


async def evaluate(
    samples: list[dict[str, Any]],
    simulator: Simulator,
    version: str,
    results: Path,
    concurrency: int | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> RunReport:
    """Score ``samples`` with ``simulator``, appending each result to ``results`` as it finishes."""
    spec = simulator.spec
    started = time.perf_counter()
    done = finished_steps(results, spec.prompt)
    todo = [s for s in samples if s["step_id"] not in done]
    report = RunReport(run_id(spec.name, version), len(samples), len(samples) - len(todo), 0, 0, 0.0)
    results.parent.mkdir(parents=True, exist_ok=True)
    with results.open("a", encoding="utf-8") as fh:

        def store(row: dict[str, Any]) -> None:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            report.completed += row["request_error"] is None
            report.request_errors += row["request_error"] is not None
            progress(report.completed + report.skipped, report.samples)

        if todo:  # a pre-flight request: an endpoint that is down or refuses the key fails the run here
            first = await simulator.complete(todo[0])
            if first.error and first.error.startswith("unreachable"):
                raise EndpointError(f"{spec.name}: endpoint {spec.base_url} is unreachable ({first.error})")
            store(result_row(todo[0], first, spec.name, spec.model, version, spec.prompt))
        gate = asyncio.Semaphore(max(1, concurrency or spec.concurrency))

        async def one(sample: dict[str, Any]) -> None:
            async with gate:
                completion = await simulator.complete(sample)
            store(result_row(sample, completion, spec.name, spec.model, version, spec.prompt))

        tasks = [asyncio.create_task(one(s)) for s in todo[1:]]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    report.seconds = time.perf_counter() - started
    return report
