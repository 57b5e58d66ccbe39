"""Labels computed outside the sandbox from the raw data a sandboxed trajectory reports.

:class:`TrajectoryLabels` consumes the frames of one trajectory and builds the result the pipeline stores
(states, observations, outcomes, Δ and hashes). Every value from inside is parsed as plain JSON and
re-canonicalised here; a malformed frame becomes an ``error`` step or a truncation, never a label taken on trust.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any

from pipeline.core import bounds
from pipeline.core.canonical import MAX_DEPTH as CANONICAL_DEPTH
from pipeline.core.canonical import canonical_json, canonicalize, state_hash, stored_json
from pipeline.core.delta import DeltaTooLarge, diff
from pipeline.core.environment import EnvSpec
from pipeline.core.outcome import ERROR, FAILURE, SANDBOX_REFUSED, args_count
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import registry
from pipeline.execution import seccomp
from pipeline.store.schema import encode_delta


class UntrustedData(ValueError):
    """Raw data from the sandbox that is not what the protocol allows."""


class OverBudget(ValueError):
    """A step's Δ is past the per-step or per-trajectory budget (the message names its size)."""


#: bounds of the fields of a frame (every kind): what an honest sandbox can send, with room to spare
MAX_STEP_INDEX = 1_000_000  # steps of one trajectory (stored as int32)
MAX_TURN = 1_000_000
MAX_CALL_SECONDS = 1e6  # a call is stopped after its wall-clock limit: minutes, never days
MAX_NAME_CHARS = 200  # a tool name, an error type, a mutated argument's name
MAX_MESSAGE_CHARS = 2000  # an error or issue message
MAX_ARGUMENTS_CHARS = 1 << 20  # canonical JSON of one call's arguments
#: a state or return value from inside is at most as deep as ``canonicalize`` makes it (it truncates
#: below :data:`pipeline.core.canonical.MAX_DEPTH`), plus its ``$truncated`` marker
MAX_STATE_DEPTH = CANONICAL_DEPTH + 3

#: the Δ the parent labels, per step and per trajectory (records, and bytes of their stored values and paths): a
#: step past either is an ``error`` step (:data:`OVER_BUDGET`) that ends its trajectory, bounding the parent's work
MAX_DELTA_RECORDS = 20_000
MAX_DELTA_BYTES = 16 << 20
MAX_TRAJECTORY_DELTA_RECORDS = 100_000
MAX_TRAJECTORY_DELTA_BYTES = 64 << 20
OVER_BUDGET = "DeltaBudgetExceeded"

_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))  # an ASCII digit stays, the rest blank


def _long_digits(text: str) -> bool:
    """Whether ``text`` holds a run of 16 ASCII digits or more: a number that may be beyond 2**53 (at C speed)."""
    return b"0" * 16 in text.encode("utf-8", "surrogatepass").translate(_DIGITS_ONLY)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_canonical(text: Any, what: str) -> tuple[Any, str]:
    """(value, canonical text in its own key order: :func:`~pipeline.core.canonical.stored_json`) of a JSON text
    from inside. ``NaN``/``Infinity``, nesting past :data:`MAX_STATE_DEPTH` (checked before recursing) and lone
    surrogates are refused. A text that re-serialises to itself, with no number past 2**53, is canonical already
    (``canonicalize`` is skipped)."""
    if not isinstance(text, str):
        raise UntrustedData(f"frame field {what!r} is not a JSON text")
    if bounds.json_too_deep(text, MAX_STATE_DEPTH):
        raise UntrustedData(f"frame field {what!r} is nested deeper than {MAX_STATE_DEPTH} levels")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
        try:
            again = stored_json(value)
        except ValueError:  # a float literal beyond the double range (1e999) parses as inf
            again = None
        if again != text or _long_digits(text):
            value = canonicalize(value)
            again = stored_json(value)
        again.encode("utf-8")
    except UnicodeEncodeError:
        raise UntrustedData(f"frame field {what!r} holds a lone surrogate (not UTF-8)") from None
    except (ValueError, RecursionError, OverflowError) as exc:
        raise UntrustedData(f"frame field {what!r} is not valid JSON: {str(exc)[:200]}") from None
    return value, again


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _message(value: Any, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A free-text message from inside, cut to ``limit``, lone surrogates made U+FFFD."""
    text = value if isinstance(value, str) else str(value)
    text = text[:limit]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")[:limit]
    return text


def _int_field(msg: dict[str, Any], field: str, limit: int, optional: bool = False) -> int | None:
    value = msg.get(field)
    if value is None and optional:
        return None
    if type(value) is not int:
        raise UntrustedData(f"frame field {field!r} is not an integer")
    if not 0 <= value <= limit:
        raise UntrustedData(f"frame field {field!r} out of range (0..{limit})")
    return value


def _str_field(msg: dict[str, Any], field: str, limit: int, optional: bool = False) -> str | None:
    value = msg.get(field)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise UntrustedData(f"frame field {field!r} is not a string")
    if len(value) > limit:
        raise UntrustedData(f"frame field {field!r} is longer than {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UntrustedData(f"frame field {field!r} holds a lone surrogate (not UTF-8)") from None
    return value


def _seconds_field(msg: dict[str, Any]) -> float | None:
    value = msg.get("call_seconds")
    if value is None:
        return None
    if type(value) not in (int, float):
        raise UntrustedData("frame field 'call_seconds' is not a number")
    if type(value) is int and not 0 <= value <= MAX_CALL_SECONDS:  # before float(): a 401-digit int overflows it
        raise UntrustedData("frame field 'call_seconds' out of range")
    seconds = float(value)
    if not (math.isfinite(seconds) and 0.0 <= seconds <= MAX_CALL_SECONDS):
        raise UntrustedData("frame field 'call_seconds' out of range")
    return seconds


def _arguments_text(arguments: Any, field: str = "arguments") -> str:
    """Canonical JSON of a call's arguments from inside: a JSON object, bounded in depth and size."""
    if not isinstance(arguments, dict):
        raise UntrustedData(f"frame field {field!r} is not a JSON object")
    if bounds.value_depth(arguments, bounds.MAX_DEPTH) > bounds.MAX_DEPTH:
        raise UntrustedData(f"frame field {field!r} is nested deeper than {bounds.MAX_DEPTH} levels")
    try:
        text = canonical_json(canonicalize(arguments))
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UntrustedData(f"frame field {field!r} holds a lone surrogate (not UTF-8)") from None
    except (ValueError, RecursionError, OverflowError) as exc:
        raise UntrustedData(f"frame field {field!r} is not valid JSON: {str(exc)[:200]}") from None
    if len(text) > MAX_ARGUMENTS_CHARS:
        raise UntrustedData(f"frame field {field!r} is larger than {MAX_ARGUMENTS_CHARS} characters")
    return text


@lru_cache(maxsize=256)
def _declared_tools(source: str, env_id: str, options: str) -> frozenset[str] | None:
    """Names of the tools an environment declares (read outside the sandbox), or None when they cannot be read."""
    try:
        spec = EnvSpec(source, env_id, {}, json.loads(options))
        return frozenset(t.get("function", t).get("name") for t in registry.tool_schemas(spec) if isinstance(t, dict))
    except Exception:  # a catalog problem shows up elsewhere; without names, no check
        return None


def _outcome(
    outcome: str, raised: bool, error_type: str | None, message: str | None, raw: str, max_chars: int
) -> dict[str, Any]:
    """A step's outcome and error fields: ``sandbox_refused`` naming the syscall when its error or observation shows
    a seccomp refusal, else as the rule labeled it."""
    syscall = seccomp.refused_syscall(message if raised else None) or seccomp.refused_syscall(raw[:4096])
    if syscall is not None:
        shown = (message if raised else raw) or ""
        return {
            "outcome": SANDBOX_REFUSED,
            "error_type": "SandboxRefused",
            "error_message": _text(f"the sandbox refused syscall {syscall!r}: {shown}", max_chars),
        }
    return {
        "outcome": outcome,
        "error_type": _text(error_type, 200) if raised else None,
        "error_message": _text(message, max_chars) if raised else None,
    }


def empty_result(trajectory_id: str, init_error: str | None = None) -> dict[str, Any]:
    """A trajectory's result before any frame (``init_error``: why it never started)."""
    return {"trajectory_id": trajectory_id, "init": None, "init_error": init_error, "steps": [], "issues": []}


class TrajectoryLabels:
    """Assembles one trajectory's result from its raw frames (see module docstring)."""

    def __init__(self, trajectory: Trajectory, max_observation_chars: int) -> None:
        self.trajectory = trajectory
        self.max_chars = max_observation_chars
        self.outcome_rule = registry.outcome_rule(trajectory.env)  # the adapter's, under a declared one
        self.result = empty_result(trajectory.trajectory_id)
        self.state: Any = None
        self.state_hash: str | None = None
        self.live_action: Action | None = None  # exploration: the action being executed
        self.truncated = False  # after a failed resume check: later frames are not this trajectory's
        self.delta_records = self.delta_bytes = 0  # the trajectory's Δ so far (its budget: MAX_TRAJECTORY_DELTA_*)

    # -- frames ----------------------------------------------------------------------------------
    def feed(self, msg: dict[str, Any]) -> None:
        """One frame from inside, every field range-checked; a frame that breaks the protocol or raises anything
        while it is labelled becomes an ``error`` step and truncates the trajectory: never an exception."""
        if self.truncated:
            return
        try:
            kind = msg.get("kind")
            if kind == "init":
                self._init(msg)
            elif kind == "action":
                self._action(msg)
            elif kind == "step":
                self._step(msg)
            elif kind == "resumed":
                self._resumed(msg)
            elif kind == "lost":
                index = _int_field(msg, "step_index", MAX_STEP_INDEX, optional=True)
                self.lost(index, _message(msg.get("error_type"), MAX_NAME_CHARS), _message(msg.get("error", "")))
            elif kind == "issue":
                self.result["issues"].append(_message(msg.get("message", "")))
            elif kind == "init_error":
                self.result["init_error"] = _message(msg.get("error", ""))
        except OverBudget as exc:
            self._stop(str(exc))
        except UntrustedData as exc:
            self._refuse(f"UntrustedData: {exc}")
        except Exception as exc:  # untrusted data: whatever it raises is that frame's fault
            self._refuse(
                f"UntrustedData: frame {_message(msg.get('kind'), 40)!r}: {type(exc).__name__}: "
                f"{_message(str(exc), 300)}",
            )

    def _refuse(self, reason: str) -> None:
        """A frame that breaks the protocol: the call it describes is an error step, the rest is dropped."""
        if self.state_hash is None:
            self.result["init_error"] = reason[:2000]
        else:
            index = self.next_index()  # the call in flight, whatever the frame claims
            self.lost(index, "UntrustedData", f"the sandbox reported malformed data: {reason}"[:2000])
            self.result["issues"].append(f"trajectory truncated at step {index}: malformed data from the sandbox")
        self.truncated = True

    def _stop(self, reason: str) -> None:
        """The call in flight is past the Δ budget: an ``error`` step (:data:`OVER_BUDGET`) ending the trajectory."""
        index = self.next_index()
        self.lost(index, OVER_BUDGET, reason)
        self.result["issues"].append(f"trajectory stopped at step {index}: {reason}")
        self.truncated = True

    def _init(self, msg: dict[str, Any]) -> None:
        if self.state_hash is not None:
            raise UntrustedData("a second initial state")
        self.state, text = _parse_canonical(msg.get("state"), "state")
        self.state_hash = state_hash(self.state)
        self.result["init"] = {"kind": "init", "state_json": text, "state_hash": self.state_hash}

    def _resumed(self, msg: dict[str, Any]) -> None:
        index = _int_field(msg, "step_index", MAX_STEP_INDEX, optional=True)
        rebuilt = state_hash(_parse_canonical(msg.get("state"), "state")[0])
        if rebuilt != self.state_hash:
            self.result["issues"].append(
                f"trajectory truncated: resume_mismatch: rebuilt state before step {index} "
                f"has hash {rebuilt}, expected {self.state_hash}"
            )
            self.truncated = True

    def _action(self, msg: dict[str, Any]) -> None:
        """Exploration: the action the policy chose (a declared tool, a bounded JSON object of arguments)."""
        if self.trajectory.meta.get("explore") is None:
            raise UntrustedData("an 'action' frame in a replayed trajectory")
        index = _int_field(msg, "step_index", MAX_STEP_INDEX)
        tool = _str_field(msg, "tool", MAX_NAME_CHARS)
        arguments_text = _arguments_text(msg.get("arguments"))
        mutated = _str_field(msg, "mutated_arg", MAX_NAME_CHARS, optional=True)
        declared = self._declared_tools()
        if declared is not None and tool not in declared:
            raise UntrustedData(f"frame field 'tool' names {tool[:80]!r}, not a tool the environment declares")
        expected = self.next_index()
        if self.live_action is not None or index != (len(self.result["steps"]) if expected is None else expected):
            raise UntrustedData(f"frame field 'step_index' is {index}, not the next action")
        self.live_action = Action(tool, json.loads(arguments_text), index, mutated_arg=mutated)

    def _declared_tools(self) -> frozenset[str] | None:
        spec = self.trajectory.env
        try:
            options = json.dumps(spec.options, sort_keys=True, default=str)
        except (TypeError, ValueError):
            return None
        return _declared_tools(spec.source, spec.env_id, options)

    def _step(self, msg: dict[str, Any]) -> None:
        if self.state_hash is None:
            raise UntrustedData("a step before the initial state")
        index = _int_field(msg, "step_index", MAX_STEP_INDEX)
        turn = _int_field(msg, "turn", MAX_TURN, optional=True)
        tool = _str_field(msg, "tool", MAX_NAME_CHARS)
        arguments = msg.get("arguments")
        arguments_text = _arguments_text(arguments)
        # the call must be the one the parent sent (replay) or the policy announced (exploration)
        action = self.pending_action(index)
        expected = self.next_index()
        if action is None or index != expected:
            raise UntrustedData(f"frame field 'step_index' is {index}, not the call in flight ({expected})")
        if tool != action.name:
            raise UntrustedData(f"frame field 'tool' names {tool[:80]!r}, not the action sent ({action.name[:80]!r})")
        if arguments_text != _arguments_text(action.arguments, "sent arguments"):
            raise UntrustedData("frame field 'arguments' differs from the action sent")
        if turn is not None and turn != action.turn:
            raise UntrustedData(f"frame field 'turn' is {turn}, not the action's ({action.turn})")
        raised = msg.get("raised")
        if raised is not None and not isinstance(raised, bool):
            raise UntrustedData("frame field 'raised' is not a boolean")
        raised = bool(raised)
        error_type = _str_field(msg, "error_type", 10 * MAX_NAME_CHARS, optional=True)
        error_message = _str_field(msg, "error_message", 1 << 30, optional=True)
        env_output = _str_field(msg, "env_output", 1 << 30, optional=True)
        raw = _str_field(msg, "observation", 1 << 30)
        seconds = _seconds_field(msg)
        refusal = self.outcome_rule.refusal(error_type, error_message) if raised else None
        if refusal is not None:  # the corpus refuses by raising this type: a failure, shown as its runner shows it
            raw, raised, error_type, error_message = refusal, False, None, None
        before, before_hash = self.state, self.state_hash
        if msg.get("state") is not None:
            after = _parse_canonical(msg["state"], "state")[0]
            after_hash = state_hash(after)
        else:
            after, after_hash = before, before_hash
        value, parsed_json = None, None
        if refusal is not None:  # the refusal text is what the call answered
            value, parsed_json = refusal, canonical_json(refusal)
        elif not raised and msg.get("value") is not None:
            value, parsed_json = _parse_canonical(msg["value"], "value")
        truncated = len(raw) > self.max_chars or (not raised and parsed_json is None)
        raw = raw[: self.max_chars]
        if parsed_json is not None and len(parsed_json) > self.max_chars:
            parsed_json, truncated = None, True
        delta, encoded = self._delta(before, after) if after_hash != before_hash else ([], [])
        self.result["steps"].append(
            {
                "kind": "step",
                "step_index": index,
                "turn": action.turn,
                "mutated_arg": action.mutated_arg,
                "tool": action.name,
                "arguments_json": arguments_text,
                "args_count": args_count(action.arguments),
                "raw_observation": raw,
                "observation_json": parsed_json,
                "observation_truncated": truncated,
                "outcome_rule": self.outcome_rule.id,
                **_outcome(
                    FAILURE if refusal is not None else self.outcome_rule(tool, raised, value),
                    raised,
                    error_type,
                    error_message,
                    raw,
                    self.max_chars,
                ),
                "delta": encoded,
                "delta_size": len(delta),
                "state_before_hash": before_hash,
                "state_after_hash": after_hash,
                "call_seconds": seconds,
                "env_output": _text(env_output, self.max_chars),
            }
        )
        self.state, self.state_hash = after, after_hash
        self.live_action = None

    def _delta(self, before: Any, after: Any) -> tuple[list[Any], list[dict[str, Any]]]:
        """(Δ, its stored form) of one step, within the step's and the trajectory's budget (:class:`OverBudget`)."""
        records = min(MAX_DELTA_RECORDS, MAX_TRAJECTORY_DELTA_RECORDS - self.delta_records)
        try:
            delta = diff(before, after, limit=records)
            encoded = encode_delta(delta)
        except DeltaTooLarge as exc:
            raise OverBudget(self._over(f"more than {exc.limit} Δ records", "records")) from None
        except (RecursionError, ValueError, OverflowError) as exc:
            raise UntrustedData(f"frame field 'state': its Δ cannot be computed ({type(exc).__name__})") from None
        size = sum(len(r["before"] or "") + len(r["after"] or "") + sum(map(len, r["path"])) for r in encoded)
        if size > min(MAX_DELTA_BYTES, MAX_TRAJECTORY_DELTA_BYTES - self.delta_bytes):
            raise OverBudget(self._over(f"a Δ of {len(delta)} records and {size} bytes", "bytes"))
        self.delta_records += len(delta)
        self.delta_bytes += size
        return delta, encoded

    def _over(self, size: str, unit: str) -> str:
        """The reason of a step past the Δ budget: its size and the budgets."""
        step, total, used = (
            (MAX_DELTA_RECORDS, MAX_TRAJECTORY_DELTA_RECORDS, self.delta_records)
            if unit == "records"
            else (MAX_DELTA_BYTES, MAX_TRAJECTORY_DELTA_BYTES, self.delta_bytes)
        )
        return (
            f"Δ budget exceeded: {size} (per step at most {step} {unit}; per trajectory {total}, "
            f"{used} used before this step)"
        )

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
        self.result["steps"].append(
            {
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
                "outcome_rule": self.outcome_rule.id,
                "error_type": error_type,
                "error_message": message,
                "delta": [],
                "delta_size": 0,
                "state_before_hash": self.state_hash,
                "state_after_hash": self.state_hash,
                "call_seconds": None,
                "env_output": None,
            }
        )
        self.live_action = None

    def next_index(self) -> int | None:
        """The action the sandbox is executing now, judged from the steps received so far."""
        if self.trajectory.meta.get("explore") is not None:
            return self.live_action.turn if self.live_action else None
        done = {s["step_index"] for s in self.result["steps"]}
        return next((i for i in range(len(self.trajectory.actions)) if i not in done), None)
