"""Reading bfcl multi-turn task files (JSON lines) and their ground-truth answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.fields import setting
from pipeline.core.issues import TaskIssue
from pipeline.envs import bfcl
from pipeline.envs.records import FirstSeen, clip, read_lines


@dataclass(frozen=True)
class BfclTask:
    task_id: str
    category: str
    involved_classes: list[str]
    initial_config: dict[str, Any]
    ground_truth: list[list[str]]  # per turn, call strings
    excluded_functions: list[str] = field(default_factory=list)
    origin: str = ""  # file:line, for error messages
    turns: list[str] = field(default_factory=list)  # the user's message per turn


@dataclass(frozen=True)
class BfclTaskFile:
    """A task file in bfcl's multi-turn format plus its ground-truth file."""

    tasks: Path = setting(description="JSON-lines task file (id, involved_classes, initial_config, ...).")
    answers: Path = setting(description="JSON-lines ground-truth file (id, ground_truth).")
    category: str = setting("custom", "Category label; 'long_context' loads long-context scenarios.")


def default_task_files(categories: tuple[str, ...] | list[str] = bfcl.CATEGORIES) -> list[BfclTaskFile]:
    root = bfcl.data_dir()
    files = []
    for cat in categories:
        if cat not in bfcl.CATEGORIES:
            raise ValueError(f"unknown bfcl multi-turn category {cat!r}; known: {bfcl.CATEGORIES}")
        name = f"BFCL_v4_multi_turn_{cat}.json"
        files.append(BfclTaskFile(root / name, root / "possible_answer" / name, cat))
    return files


def _read_jsonl(path: Path) -> Iterator[tuple[int, Any | None, str | None]]:
    """(line number, object, error) per non-blank line; a line that is not UTF-8 or not JSON is an error."""
    for lineno, line, err in read_lines(path):
        if err:
            yield lineno, None, err
            continue
        try:
            yield lineno, json.loads(line), None
        except json.JSONDecodeError as exc:
            yield lineno, None, f"line is not JSON: {exc.msg} at column {exc.colno}"
        except RecursionError:
            yield lineno, None, "line is not usable JSON: nested too deeply"


def iter_tasks(files: list[BfclTaskFile]) -> Iterator[BfclTask | TaskIssue]:
    """Yield every task of ``files`` joined with its ground truth, or a ``TaskIssue`` per bad line.

    A task id given twice (in one file or across files) keeps its first task, and an answer id given
    twice in one answers file its first answer; each later one is an issue naming both lines."""
    task_ids = FirstSeen()
    for spec in files:
        answers: dict[str, Any] = {}
        answer_ids = FirstSeen()
        for lineno, obj, err in _read_jsonl(spec.answers):
            origin = f"{spec.answers.name}:{lineno}"
            if err or not isinstance(obj, dict) or "id" not in obj:
                yield TaskIssue(origin, "parse", err or "answer line without an 'id'", origin)
                continue
            first = answer_ids.seen(str(obj["id"]), origin)
            if first is not None:
                why = answer_ids.message("answer id", str(obj["id"]), origin, first)
                yield TaskIssue(clip(obj["id"], 100), "parse", why, origin)
                continue
            answers[str(obj["id"])] = obj.get("ground_truth")
        for lineno, obj, err in _read_jsonl(spec.tasks):
            origin = f"{spec.tasks.name}:{lineno}"
            if err:
                yield TaskIssue(origin, "parse", err, origin)
                continue
            if not isinstance(obj, dict) or "id" not in obj:
                yield TaskIssue(origin, "parse", "task line is not an object with an 'id'", origin)
                continue
            task_id = str(obj["id"])
            first = task_ids.seen(task_id, origin)
            if first is not None:
                yield TaskIssue(task_id, "parse", task_ids.message("task id", task_id, origin, first), origin)
                continue
            problem = _validate(obj, answers.get(task_id))
            if problem:
                yield TaskIssue(task_id, "parse", problem, origin)
                continue
            yield BfclTask(
                task_id=task_id,
                category=spec.category,
                involved_classes=list(obj["involved_classes"]),
                initial_config=obj.get("initial_config") or {},
                ground_truth=answers[task_id],
                excluded_functions=list(obj.get("excluded_function") or []),
                origin=origin,
                turns=[
                    " ".join(m.get("content", "") for m in turn if isinstance(m, dict) and m.get("role") == "user")
                    for turn in (obj.get("question") or [])
                    if isinstance(turn, list)
                ],
            )


def _validate(obj: dict[str, Any], truth: Any) -> str | None:
    classes = obj.get("involved_classes")
    if not isinstance(classes, list) or not classes:
        return "missing or empty 'involved_classes'"
    if not all(isinstance(c, str) for c in classes):
        return f"'involved_classes' holds a non-string: {clip(repr(classes), 80)}"
    excluded = obj.get("excluded_function")
    if excluded is not None and not (isinstance(excluded, list) and all(isinstance(f, str) for f in excluded)):
        return f"'excluded_function' is not a list of names: {clip(repr(excluded), 80)}"
    question = obj.get("question")
    if question is not None and not (
        isinstance(question, list)
        and all(
            isinstance(turn, list) and all(isinstance(m, dict) and isinstance(m.get("content", ""), str) for m in turn)
            for turn in question
        )
    ):
        return "'question' is not a list of turns of messages with string 'content'"
    unknown = [c for c in classes if c not in bfcl.CLASSES]
    if unknown:
        return f"unknown involved class(es) {unknown}"
    if not isinstance(obj.get("initial_config", {}), dict):
        return "'initial_config' is not an object"
    if truth is None:
        return "no ground truth for this id"
    if not isinstance(truth, list) or not all(
        isinstance(turn, list) and all(isinstance(c, str) for c in turn) for turn in truth
    ):
        return "ground truth is not a list of turns of call strings"
    return None
