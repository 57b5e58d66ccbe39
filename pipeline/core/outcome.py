"""Outcome and argument count of a step (docs/definitions.md §4.3).

``outcome ∈ {success, failure, error, sandbox_refused}``: ``sandbox_refused`` when the sandbox refused a syscall
the call made (excluded like an error, never a quarantine); ``error`` when the call raised; ``failure`` when the
environment refused it in its own convention; else ``success``. Both rules read the step's observation value
(:func:`observation_value`): the **default rule** (:func:`reports_failure`) recognises the common conventions, and
a corpus may **declare** its own (:class:`OutcomeRule`: ``outcome_rule: {failure_if: [...], extends_default:
true, raises: [...]}``), validated by :func:`parse_rule`. The rule is recorded with each step (``outcome_rule``)
and travels in the spec's options (:data:`RULE_OPTION`), so a changed rule is a new input, labeled again.
"""

from __future__ import annotations

import ast
import difflib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pipeline.core import bounds
from pipeline.core.canonical import canonical_json, canonicalize

SUCCESS, FAILURE, ERROR, SANDBOX_REFUSED = "success", "failure", "error", "sandbox_refused"
OUTCOMES = (SUCCESS, FAILURE, ERROR, SANDBOX_REFUSED)
#: outcomes of steps no benchmark or training split takes (the strata mark them excluded)
EXCLUDED_OUTCOMES = (ERROR, SANDBOX_REFUSED)

#: the ``outcome_rule`` of a step labeled by the default rule alone
DEFAULT_RULE_ID = "default"
#: the key of ``EnvSpec.options`` that carries a declared rule (its :attr:`OutcomeRule.id`)
RULE_OPTION = "outcome_rule"

#: ``status`` values (case-insensitive) that report a refusal
FAILED_STATUSES = frozenset({"error", "failed", "failure", "fail"})

#: a text observation longer than this is not parsed as a literal (it is matched as text)
MAX_LITERAL_CHARS = 1 << 16
_MAX_LITERAL_DEPTH = 32

#: ``(tool, raised, observation value) -> outcome``
OutcomeFn = Callable[[str, bool, Any], str]


def args_count(arguments: Mapping[str, Any]) -> int:
    """Number of top-level arguments of an action."""
    return len(arguments)


def is_error_text(value: Any) -> bool:
    return isinstance(value, str) and value.lstrip().lower().startswith("error")


def observation_value(value: Any) -> Any:
    """What the rules look at: ``value`` itself, except a text holding a dict or list literal (JSON, else a Python
    literal, as ``str(return value)`` writes), which is that value in canonical form; a long or deep text stays text."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "{[" or len(text) > MAX_LITERAL_CHARS or bounds.too_deep(text, _MAX_LITERAL_DEPTH):
        return value
    for parse in (json.loads, ast.literal_eval):
        try:
            return canonicalize(parse(text))
        except Exception:  # not a literal (or not one canonical form holds): the text itself
            continue
    return value


def _empty(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, (str, list, dict)) and len(value) == 0)


def _dict_fails(tool: str, value: dict[str, Any]) -> bool:
    """The default rule on one object (see :func:`reports_failure`)."""
    for flag in ("success", "ok"):
        if isinstance(value.get(flag), bool):
            return value[flag] is False  # an explicit success flag decides
    status = value.get("status")
    if status is False:
        return True
    if isinstance(status, str) and (status.strip().lower() in FAILED_STATUSES or is_error_text(status)):
        return True
    if not _empty(value.get("error")) or not _empty(value.get("errors")):
        return True
    return "get_" not in tool and any(
        k.endswith("_status") and v is False for k, v in value.items() if isinstance(k, str)
    )


def reports_failure(tool: str, value: Any) -> bool:
    """The default rule (docs/definitions.md §4.3): whether an observation value reports a refusal in one of the
    common conventions: an object whose boolean ``success`` / ``ok`` is false, else whose ``status`` is false or a
    failure text, else with a non-empty ``error`` / ``errors``, else with a false ``*_status`` (not for ``get_…``
    tools); a non-empty list of failing objects and ``Error…`` texts; a text starting with ``Error``."""
    value = observation_value(value)
    if isinstance(value, dict):
        return _dict_fails(tool, value)
    if isinstance(value, list) and value:
        return all((isinstance(v, dict) and _dict_fails(tool, v)) or is_error_text(v) for v in value)
    return is_error_text(value)


def default_outcome(tool: str, raised: bool, value: Any) -> str:
    """The default rule as an outcome: ``error`` when the call raised, else :func:`reports_failure`."""
    if raised:
        return ERROR
    return FAILURE if reports_failure(tool, value) else SUCCESS


# -- declared rules --------------------------------------------------------------------------------


class OutcomeRuleError(ValueError):
    """A declared outcome rule that is not valid: the message names the key and the fix (one line)."""


_KEY_OPS = ("equals", "in", "starts_with", "not_empty")
_TEXT_OPS = ("text_starts_with", "text_contains")
_CONDITION_FORMS = (
    "{key: K, equals: V}, {key: K, in: [V, ...]}, {key: K, starts_with: TEXT}, "
    "{key: K, not_empty: true}, {text_starts_with: TEXT} or {text_contains: TEXT}"
)
_RULE_KEYS = ("failure_if", "raises", "extends_default")
_RAISE_KEYS = ("type", "observation")
#: the observation text of a declared raise when the rule gives none (tau2-bench's and EnvSimBench's feedback)
DEFAULT_RAISE_OBSERVATION = "Error: {message}"


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``false`` is not ``0``, ``1`` equals ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _no_unknown_keys(raw: Mapping, known: tuple[str, ...], where: str, fix: str) -> None:
    """Raise for the first key of ``raw`` not in ``known``, with the closest known one and the fix."""
    for key in raw:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise OutcomeRuleError(f"{where}: unknown key {str(key)[:60]!r}{hint}: {fix}")


@dataclass(frozen=True)
class Condition:
    """One condition of ``failure_if``: ``op`` over the observation's top-level ``key``, or over its text (None)."""

    op: str
    operand: Any
    key: str | None = None

    def holds(self, value: Any) -> bool:
        if self.key is None:
            if not isinstance(value, str):
                return False
            text, needle = value.strip().lower(), str(self.operand).lower()
            return text.startswith(needle) if self.op == "text_starts_with" else needle in text
        if not isinstance(value, dict) or self.key not in value:
            return False
        field = value[self.key]
        if self.op == "equals":
            return _same(field, self.operand)
        if self.op == "in":
            return any(_same(field, v) for v in self.operand)
        if self.op == "starts_with":
            return isinstance(field, str) and field.strip().lower().startswith(str(self.operand).lower())
        return not _empty(field)  # not_empty

    def doc(self) -> dict[str, Any]:
        return {self.op: self.operand} if self.key is None else {"key": self.key, self.op: self.operand}


def _condition(raw: Any, where: str) -> Condition:
    if not isinstance(raw, Mapping):
        raise OutcomeRuleError(
            f"{where}: a condition is a mapping, not {type(raw).__name__} "
            f"{str(raw)[:60]!r}: write one of {_CONDITION_FORMS}"
        )
    _no_unknown_keys(raw, ("key", *_KEY_OPS, *_TEXT_OPS), where, f"write one of {_CONDITION_FORMS}")
    ops = [k for k in raw if k != "key"]
    if len(ops) != 1:
        raise OutcomeRuleError(
            f"{where}: {'no test' if not ops else 'more than one test (' + ', '.join(ops) + ')'} "
            f"in one condition: write one of {_CONDITION_FORMS} (list several conditions for several tests)"
        )
    op, operand = ops[0], raw[ops[0]]
    if op in _TEXT_OPS:
        if "key" in raw:
            raise OutcomeRuleError(
                f"{where}: {op} tests the observation text and takes no 'key': "
                f"drop 'key' or use {{key: K, starts_with: TEXT}}"
            )
        if not isinstance(operand, str) or not operand:
            raise OutcomeRuleError(f'{where}: {op} must be a non-empty text, e.g. {op}: "Sorry"')
        return Condition(op, operand)
    key = raw.get("key")
    if not isinstance(key, str) or not key:
        raise OutcomeRuleError(
            f"{where}: {op} needs the observation key it tests: add key: <name>, e.g. {{key: status, {op}: ...}}"
        )
    if op == "in" and (not isinstance(operand, (list, tuple)) or not operand):
        raise OutcomeRuleError(f"{where}: 'in' must be a non-empty list of values, e.g. in: [400, 404]")
    if op == "starts_with" and (not isinstance(operand, str) or not operand):
        raise OutcomeRuleError(f"{where}: 'starts_with' must be a non-empty text, e.g. starts_with: \"Sorry\"")
    if op == "not_empty" and operand is not True:
        raise OutcomeRuleError(
            f"{where}: 'not_empty' takes true (the key holds a value that is not null, false, "
            f'"", [] or {{}}): write not_empty: true'
        )
    if op in ("equals", "in"):
        try:
            operand = canonicalize(list(operand) if op == "in" else operand)
            canonical_json(operand)
        except (TypeError, ValueError, RecursionError):
            raise OutcomeRuleError(f"{where}: {op} must hold JSON values (text, numbers, true/false, null)") from None
    return Condition(op, operand, key)


@dataclass(frozen=True)
class RaiseRule:
    """Exception types (by name) by which a corpus refuses a call, and the observation text its runner shows for
    them (``{message}`` and ``{type}`` replaced)."""

    types: tuple[str, ...]
    observation: str = DEFAULT_RAISE_OBSERVATION

    def text(self, error_type: str, message: str) -> str:
        """The observation of a call that raised ``error_type`` (one of :attr:`types`)."""
        return self.observation.replace("{type}", error_type).replace("{message}", message)

    def doc(self) -> dict[str, Any]:
        return {"observation": self.observation, "type": list(self.types)}


def raises_rule_hint(error_type: str) -> str:
    """The one-line fix for a tool that refuses by raising ``error_type``: the rule that labels it failure."""
    return (
        f"if {error_type} is how the corpus refuses, declare outcome_rule: {{raises: [{{type: {error_type}, "
        f'observation: "{DEFAULT_RAISE_OBSERVATION}"}}]}} in its source config (docs/environments.md#outcome-rule)'
    )


@dataclass(frozen=True)
class OutcomeRule:
    """A corpus's declared outcome rule: an observation value meeting any ``failure_if`` condition is a ``failure``;
    otherwise the default rule decides (``extends_default``) or it is a ``success``. A call that raised is an
    ``error``, unless ``raises`` names its exception type (a ``failure``, :meth:`refusal`)."""

    failure_if: tuple[Condition, ...]
    extends_default: bool = True
    raises: tuple[RaiseRule, ...] = ()

    @property
    def id(self) -> str:
        """The rule as canonical JSON: what the steps' ``outcome_rule`` column and the spec options hold."""
        doc: dict[str, Any] = {
            "extends_default": self.extends_default,
            "failure_if": [c.doc() for c in self.failure_if],
        }
        if self.raises:
            doc["raises"] = [r.doc() for r in self.raises]
        return canonical_json(doc)

    def refusal(self, error_type: str | None, message: str | None) -> str | None:
        """The observation text of a raise the rule declares a refusal (a ``failure``); None: it stays an ``error``."""
        return next((r.text(error_type, message or "") for r in self.raises if error_type in r.types), None)

    def outcome(self, tool: str, raised: bool, value: Any, base: OutcomeFn = default_outcome) -> str:
        """The outcome under this rule; ``base`` is the default it extends (the adapter's rule)."""
        if raised:
            return ERROR
        observed = observation_value(value)
        if any(c.holds(observed) for c in self.failure_if):
            return FAILURE
        return base(tool, raised, value) if self.extends_default else SUCCESS


def parse_rule(raw: Any, where: str = "outcome_rule") -> OutcomeRule:
    """A declared rule from its config value (``{failure_if: [...], extends_default: true}``), validated:
    :class:`OutcomeRuleError` names the first wrong key (under ``where``) and the fix."""
    if not isinstance(raw, Mapping):
        raise OutcomeRuleError(
            f"{where}: must be a mapping like {{failure_if: [{{key: status, equals: false}}], "
            f"extends_default: true}}, not {type(raw).__name__}"
        )
    fix = "an outcome rule has failure_if (a list of conditions) and extends_default (true/false)"
    _no_unknown_keys(raw, _RULE_KEYS, where, fix)
    raises = _raise_rules(raw.get("raises"), f"{where}.raises")
    conditions = raw.get("failure_if", [] if raises else None)
    if not isinstance(conditions, (list, tuple)) or (not conditions and not raises):
        raise OutcomeRuleError(
            f"{where}.failure_if: must be a non-empty list of conditions ({_CONDITION_FORMS}) unless raises is "
            "given, or remove outcome_rule to use the default rule"
        )
    extends = raw.get("extends_default", True)
    if not isinstance(extends, bool):
        raise OutcomeRuleError(f"{where}.extends_default: must be true or false, not {str(extends)[:40]!r}")
    return OutcomeRule(
        tuple(_condition(c, f"{where}.failure_if[{i}]") for i, c in enumerate(conditions)), extends, raises
    )


def _raise_rules(raw: Any, where: str) -> tuple[RaiseRule, ...]:
    """``raises: [{type: ValueError | [ValueError, KeyError], observation: "Error: {message}"}, ...]``."""
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)) or not raw:
        raise OutcomeRuleError(
            f'{where}: must be a non-empty list like [{{type: ValueError, observation: "{DEFAULT_RAISE_OBSERVATION}"}}]'
        )
    out = []
    for i, item in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise OutcomeRuleError(f"{here}: a mapping {{type: <exception type>, observation: <text>}}, not {item!r}")
        _no_unknown_keys(item, _RAISE_KEYS, here, "a raise rule has type and observation")
        types = item.get("type")
        types = [types] if isinstance(types, str) else types
        if not (
            isinstance(types, (list, tuple)) and types and all(isinstance(t, str) and t.isidentifier() for t in types)
        ):
            raise OutcomeRuleError(f"{here}.type: an exception type's name (ValueError) or a list of them")
        observation = item.get("observation", DEFAULT_RAISE_OBSERVATION)
        if not isinstance(observation, str) or not observation:
            raise OutcomeRuleError(f'{here}.observation: a non-empty text, e.g. "{DEFAULT_RAISE_OBSERVATION}"')
        out.append(RaiseRule(tuple(sorted(set(types))), observation))
    return tuple(out)


@lru_cache(maxsize=64)
def rule_of_id(rule_id: str) -> OutcomeRule:
    """The declared rule a spec option / ``outcome_rule`` column holds (its :attr:`OutcomeRule.id`)."""
    try:
        doc = json.loads(rule_id)
    except ValueError:
        raise OutcomeRuleError(f"{RULE_OPTION}: {rule_id[:80]!r} is not a declared rule (canonical JSON)") from None
    return parse_rule(doc)


@dataclass(frozen=True)
class Labeler:
    """The outcome rule of one environment: its adapter's (``base``) and its corpus's declared one on top, if any."""

    base: OutcomeFn
    declared: OutcomeRule | None = None

    @property
    def id(self) -> str:
        return DEFAULT_RULE_ID if self.declared is None else self.declared.id

    def __call__(self, tool: str, raised: bool, value: Any) -> str:
        if self.declared is None:
            return self.base(tool, raised, value)
        return self.declared.outcome(tool, raised, value, self.base)

    def refusal(self, error_type: str | None, message: str | None) -> str | None:
        """:meth:`OutcomeRule.refusal` of the declared rule; None without one."""
        return None if self.declared is None else self.declared.refusal(error_type, message)


def labeler(base: OutcomeFn, options: Mapping[str, Any]) -> Labeler:
    """The :class:`Labeler` of an environment whose spec options are ``options`` (:data:`RULE_OPTION`)."""
    declared = options.get(RULE_OPTION)
    return Labeler(base, rule_of_id(declared) if isinstance(declared, str) else None)
