"""Labels computed outside the sandbox from the raw data a sandboxed trajectory reports.

:class:`TrajectoryLabels` consumes the frames of one trajectory (``init``, ``action``, ``step``,
``lost``, ``resumed``, ``issue``, ``init_error``) and builds the result the pipeline stores:
canonical state text and hash, and per step the observation (raw text and parsed value), outcome,
``args_count``, Δ, |Δ| and the hashes of ``s_t`` and ``s'_t``. Every value from inside is parsed
as plain JSON and re-canonicalised here; a malformed frame becomes an ``error`` step or a
truncation, never a label taken on trust.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import registry
from pipeline.core.outcome import ERROR, args_count
from pipeline.core.canonical import canonical_json, canonicalize, text_hash
from pipeline.core.delta import diff
from pipeline.store.schema import encode_delta


class UntrustedData(ValueError):
    """Raw data from the sandbox that is not what the protocol allows."""


def _parse_canonical(text: Any, what: str) -> tuple[Any, str]:
    """(value, canonical text) of a JSON text from inside, re-canonicalised here.

    Fast path: a text that re-serialises to itself is canonical already (sorted keys, compact, no
    NaN), so the Python-level walk of ``canonicalize`` is skipped; any other text is canonicalised."""
    if not isinstance(text, str):
        raise UntrustedData(f"{what} is not a JSON text")
    try:
        value = json.loads(text)
        try:
            again = canonical_json(value)
        except ValueError:  # NaN/Infinity: canonicalize encodes them
            again = None
        if again != text:
            value = canonicalize(value)
            again = canonical_json(value)
    except (ValueError, RecursionError) as exc:
        raise UntrustedData(f"{what} is not valid JSON: {str(exc)[:200]}") from None
    return value, again


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) else None


class TrajectoryLabels:
    """Assembles one trajectory's result from its raw frames (see module docstring)."""

    def __init__(self, trajectory: Trajectory, max_observation_chars: int) -> None:
        self.trajectory = trajectory
        self.max_chars = max_observation_chars
        self.outcome_rule = registry.outcome_rule(trajectory.source)
        self.result: dict[str, Any] = {
            "trajectory_id": trajectory.trajectory_id, "init": None, "init_error": None, "steps": [], "issues": [],
        }
        self.state: Any = None
        self.state_hash: str | None = None
        self.live_action: Action | None = None  # exploration: the action being executed
        self.truncated = False  # after a failed resume check: later frames are not this trajectory's

    # -- frames ----------------------------------------------------------------------------------
    def feed(self, msg: dict[str, Any]) -> None:
        if self.truncated:
            return
        kind = msg.get("kind")
        try:
            if kind == "init":
                self._init(msg)
            elif kind == "action":
                mutated = msg.get("mutated_arg")
                self.live_action = Action(str(msg["tool"]), dict(msg["arguments"]), int(msg["step_index"]),
                                          mutated_arg=mutated if isinstance(mutated, str) else None)
            elif kind == "step":
                self._step(msg)
            elif kind == "resumed":
                self._resumed(msg)
            elif kind == "lost":
                self.lost(msg.get("step_index"), str(msg.get("error_type")), str(msg.get("error", ""))[:2000])
            elif kind == "issue":
                self.result["issues"].append(str(msg.get("message", ""))[:2000])
            elif kind == "init_error":
                self.result["init_error"] = str(msg.get("error", ""))[:2000]
        except (UntrustedData, KeyError, TypeError, ValueError) as exc:
            self._refuse(msg, f"{type(exc).__name__}: {exc}")

    def _refuse(self, msg: dict[str, Any], reason: str) -> None:
        """A frame that breaks the protocol: the call it describes is an error step, the rest is dropped."""
        if self.state_hash is None:
            self.result["init_error"] = f"UntrustedData: {reason}"[:2000]
        else:
            index = msg.get("step_index") if isinstance(msg.get("step_index"), int) else len(self.result["steps"])
            self.lost(index, "UntrustedData", f"the sandbox reported malformed data: {reason}"[:2000])
            self.result["issues"].append(f"trajectory truncated at step {index}: malformed data from the sandbox")
        self.truncated = True

    def _init(self, msg: dict[str, Any]) -> None:
        self.state, text = _parse_canonical(msg["state"], "initial state")
        self.state_hash = text_hash(text)
        self.result["init"] = {"kind": "init", "state_json": text, "state_hash": self.state_hash}

    def _resumed(self, msg: dict[str, Any]) -> None:
        _, text = _parse_canonical(msg["state"], "rebuilt state")
        rebuilt = text_hash(text)
        if rebuilt != self.state_hash:
            self.result["issues"].append(
                f"trajectory truncated: resume_mismatch: rebuilt state before step {msg.get('step_index')} "
                f"has hash {rebuilt}, expected {self.state_hash}"
            )
            self.truncated = True

    def _step(self, msg: dict[str, Any]) -> None:
        if self.state_hash is None:
            raise UntrustedData("a step before the initial state")
        tool = msg["tool"]
        arguments = msg["arguments"]
        if not isinstance(tool, str) or not isinstance(arguments, dict):
            raise UntrustedData("tool/arguments of the wrong type")
        raised = bool(msg.get("raised"))
        before, before_hash = self.state, self.state_hash
        if msg.get("state") is not None:
            after, after_text = _parse_canonical(msg["state"], "state after the call")
            after_hash = text_hash(after_text)
        else:
            after, after_hash = before, before_hash
        value, parsed_json = None, None
        if not raised and msg.get("value") is not None:
            value, parsed_json = _parse_canonical(msg["value"], "return value")
        raw = msg.get("observation")
        if not isinstance(raw, str):
            raise UntrustedData("observation is not text")
        truncated = len(raw) > self.max_chars or (not raised and msg.get("value") is None)
        raw = raw[: self.max_chars]
        if parsed_json is not None and len(parsed_json) > self.max_chars:
            parsed_json, truncated = None, True
        delta = diff(before, after) if after_hash != before_hash else []
        seconds = msg.get("call_seconds")
        index = int(msg["step_index"])
        action = self.pending_action(index)
        self.result["steps"].append({
            "kind": "step",
            "step_index": index,
            "turn": int(msg.get("turn") or 0),
            "mutated_arg": action.mutated_arg if action is not None else None,
            "tool": tool,
            "arguments_json": canonical_json(canonicalize(arguments)),
            "args_count": args_count(arguments),
            "raw_observation": raw,
            "observation_json": parsed_json,
            "observation_truncated": truncated,
            "outcome": self.outcome_rule(tool, raised, value),
            "error_type": _text(msg.get("error_type"), 200) if raised else None,
            "error_message": _text(msg.get("error_message"), self.max_chars) if raised else None,
            "delta": encode_delta(delta),
            "delta_size": len(delta),
            "state_before_hash": before_hash,
            "state_after_hash": after_hash,
            "call_seconds": float(seconds) if isinstance(seconds, (int, float)) else None,
            "env_output": _text(msg.get("env_output"), self.max_chars),
        })
        self.state, self.state_hash = after, after_hash
        self.live_action = None

    # -- calls that produced no frame ---------------------------------------------------------------
    def pending_action(self, index: int | None) -> Action | None:
        if self.trajectory.meta.get("explore") is not None:
            return self.live_action
        if index is None or not 0 <= index < len(self.trajectory.actions):
            return None
        return self.trajectory.actions[index]

    def lost(self, index: Any, error_type: str, message: str) -> None:
        """The call at ``index`` was lost (timeout, crash, refused data): an ``error`` step, Δ = 0."""
        action = self.pending_action(index if isinstance(index, int) else None)
        if action is None or self.state_hash is None:
            return
        if any(s["step_index"] == (index if isinstance(index, int) else action.turn) for s in self.result["steps"]):
            return
        self.result["steps"].append({
            "kind": "step",
            "step_index": index if isinstance(index, int) else action.turn,
            "turn": action.turn,
            "mutated_arg": action.mutated_arg,
            "tool": action.name,
            "arguments_json": canonical_json(canonicalize(action.arguments)),
            "args_count": args_count(action.arguments),
            "raw_observation": f"Error: {message}",
            "observation_json": None,
            "observation_truncated": False,
            "outcome": ERROR,
            "error_type": error_type,
            "error_message": message,
            "delta": [],
            "delta_size": 0,
            "state_before_hash": self.state_hash,
            "state_after_hash": self.state_hash,
            "call_seconds": None,
            "env_output": None,
        })
        self.live_action = None

    def next_index(self) -> int | None:
        """The action the sandbox is executing now, judged from the steps received so far."""
        if self.trajectory.meta.get("explore") is not None:
            return self.live_action.turn if self.live_action else None
        done = {s["step_index"] for s in self.result["steps"]}
        return next((i for i in range(len(self.trajectory.actions)) if i not in done), None)
