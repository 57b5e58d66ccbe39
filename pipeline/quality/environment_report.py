"""The report card of every environment, and the executor's verdict on it (docs/evaluation.md "The corpus
quality gate", which lists what each row holds).

One row per environment (:data:`ENV_QUALITY`) and one per (environment, tool) (:data:`TOOL_QUALITY`), computed
with DuckDB over the labeled steps (streamed, never loaded whole), the trajectories' states, the catalog, the
collection's issues and the determinism findings (:mod:`pipeline.labeling.quarantine`). The verdict (``pass`` /
``fail`` and the ``main_problem``) applies :class:`Thresholds`; it is the executor's alone: a checker's agreement
(:mod:`pipeline.quality.environment_yield`) is reported beside it, never mixed in.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipeline.core.axes import AXES
from pipeline.core.fields import setting
from pipeline.core.outcome import SANDBOX_REFUSED, raises_rule_hint
from pipeline.core.strata import Composition
from pipeline.envs.envscaler import SOURCE as ENVSCALER
from pipeline.labeling.quarantine import excluded_files, input_fingerprint, write_findings
from pipeline.quality.outcomes import REFUSAL_WORDS
from pipeline.report.tables import Facts, Table
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table
from pipeline.store.tables import TABLES

PASS, FAIL, UNTESTED = "pass", "fail", "untested"  # untested: in the catalog, no call executed
DETERMINISTIC, UNCHECKED = "deterministic", "unchecked"
NONDETERMINISTIC, QUARANTINED = "non-deterministic", "quarantined"
#: markers of values that are not plain JSON in a canonical state (pipeline.core.canonical)
NON_JSON = r'"\$(repr|type|decimal|float|int|cycle|truncated|complex)"'
_EXAMPLE_CHARS = 300


@dataclass(frozen=True)
class Thresholds:
    """When the executor fails an environment (each criterion can be relaxed)."""

    max_error_share: float = setting(0.25, "Fail an environment whose share of error steps (exceptions) is above this.")
    broken_tool_share: float = setting(
        1.0, "Fail an environment with a tool whose share of error steps reaches this (1.0: every call raises)."
    )
    min_tool_steps: int = setting(3, "Steps a tool needs before its error share can call it broken.")
    allow_nondeterministic: bool = setting(False, "Pass non-deterministic (and quarantined) environments.")
    max_mismatches: int = setting(0, "Fail an environment with more schema/code mismatches than this.")
    require_state_change: bool = setting(True, "Fail an environment in which no call changed the state.")
    max_state_bytes: int = setting(1_000_000, "Report an initial state larger than this many bytes (not a failure).")


ENV_QUALITY = TABLES["env_quality"].schema
TOOL_QUALITY = TABLES["env_tool_quality"].schema

_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'")
_MISSING = re.compile(r"missing \d+ required (?:positional |keyword-only )?arguments?: (.+)")
_DECLARES = re.compile(r"tool '([^']+)' declares parameter\(s\) \[([^\]]*)\]")
_OMITS = re.compile(r"tool '([^']+)' omits required parameter\(s\) \[([^\]]*)\]")
_TOOL = re.compile(r"tool '([^']+)'")
_QUOTED = re.compile(r"'([^']+)'")
_LAST_QUOTED = re.compile(r"'[^']*'$")  # "'dict' object has no attribute 'device'": the attribute


@dataclass
class ToolRow:
    env_id: str
    tool: str
    in_catalog: bool = False
    steps: int = 0
    success_steps: int = 0
    failure_steps: int = 0
    error_steps: int = 0
    top_exception: str | None = None
    top_exception_steps: int = 0
    #: the type of its most frequent exception when the message reads like a refusal (REFUSAL_WORDS)
    refusing_raise: str | None = None
    example_step: str | None = None
    example_call: str | None = None
    max_delta: int = 0
    schema_only: set[str] = field(default_factory=set)
    code_only: set[str] = field(default_factory=set)
    details: list[str] = field(default_factory=list)

    @property
    def error_share(self) -> float:
        return self.error_steps / self.steps if self.steps else 0.0

    @property
    def mismatches(self) -> int:
        return (
            len(self.schema_only)
            + len(self.code_only)
            + sum(1 for d in self.details if not _DECLARES.match(d) and not _OMITS.match(d))
        )

    def row(self, fingerprint: str) -> dict[str, Any]:
        """The ``env_tool_quality`` row: the counts as they are, the argument sets and details joined."""
        skip = ("schema_only", "code_only", "details", "refusing_raise")
        return {k: v for k, v in vars(self).items() if k not in skip} | {
            "error_share": round(self.error_share, 4),
            "schema_only_args": ", ".join(sorted(self.schema_only)) or None,
            "code_only_args": ", ".join(sorted(self.code_only)) or None,
            "mismatch_detail": "; ".join(self.details) or None,
            "input_fingerprint": fingerprint,
        }


@dataclass
class EnvRow:
    env_id: str
    source: str | None = None
    tools: int = 0
    tools_used: int = 0
    scenarios: int = 0
    steps: int = 0
    success_steps: int = 0
    failure_steps: int = 0
    error_steps: int = 0
    determinism: str = UNCHECKED
    quarantine_reason: str | None = None
    max_delta: int = 0
    cells: list[str] = field(default_factory=list)
    state_problems: list[str] = field(default_factory=list)
    #: where no call succeeded: its most frequent answers (observation, calls)
    refusals: list[tuple[str, int]] = field(default_factory=list)
    max_state_bytes: int = 0
    not_loaded: str | None = None
    problems: list[str] = field(default_factory=list)
    #: its error steps per (exception type, message with the last quoted name generalised), and an example message
    error_kinds: Counter = field(default_factory=Counter)
    error_examples: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def error_share(self) -> float:
        return self.error_steps / self.steps if self.steps else 0.0

    @property
    def verdict(self) -> str:
        return FAIL if self.problems else PASS if self.steps else UNTESTED


@dataclass
class EnvironmentReport:
    """The report card of every environment (:attr:`envs`, :attr:`tools`) and the input it judged."""

    envs: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    fingerprint: str

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [e for e in self.envs if e["verdict"] == FAIL]

    def worst(self, n: int = 5) -> list[dict[str, Any]]:
        """The ``n`` worst environments (failing first: most problems, then highest error share)."""
        ranked = sorted(
            self.envs,
            key=lambda e: (
                e["verdict"] != FAIL,
                -len((e["problems"] or "").split("; ")),
                -(e["error_share"] or 0.0),
                e["env_id"],
            ),
        )
        return [e for e in ranked[:n] if e["verdict"] == FAIL]

    @property
    def untested(self) -> list[str]:
        """The environments without steps (in the catalog, no call of theirs executed on their own), by id."""
        return sorted(e["env_id"] for e in self.envs if e["verdict"] == UNTESTED)

    def headline(self, names: int = 8) -> str:
        """One line: how many pass of how many (those with steps, and the catalog's without), how many fail, and
        the untested ones by name (the first ``names``)."""
        untested = self.untested
        passing = sum(e["verdict"] == PASS for e in self.envs)
        stepped = sum(bool(e["steps"]) for e in self.envs)
        shown = ", ".join(untested[:names]) + (f", … ({len(untested) - names} more)" if len(untested) > names else "")
        return (
            f"{passing} of {len(self.envs)} environments pass the executor's checks"
            + (f" ({stepped} with steps, {len(self.envs) - stepped} without)" if stepped < len(self.envs) else "")
            + (f"; failing: {len(self.failing)}" if self.failing else "")
            + (f"; untested (no steps of their own, determinism 'untested'): {shown}" if untested else "")
        )

    def facts(self, path: Path) -> Facts:
        """What the report card reports (``environment_report``'s metadata; ``path``: ``env_quality``'s file):
        the headline, the counts, the worst environments, every environment and the tools with errors or
        mismatches; each failing environment among the worst a warning."""
        tools = [t for t in self.tools if t["error_steps"] or t["mismatch_detail"]]
        return Facts(
            {
                "headline": self.headline(),
                "environments": len(self.envs),
                "failing": len(self.failing),
                "worst": Table(self.worst(), ["env_id", "main_problem"]),
                "environments_table": Table(self.envs, ENV_COLUMNS),
                "tools_table": Table(tools, TOOL_COLUMNS),
                "input_fingerprint": self.fingerprint,
                "path": path.resolve(),
            },
            [f"environment {e['env_id']} fails: {e['main_problem']}" for e in self.worst()],
        )


#: the columns of the environments and tools the report's metadata shows
ENV_COLUMNS = ["env_id", "verdict", "main_problem", "tools", "tools_used", "scenarios", "steps", "error_share"]
ENV_COLUMNS += ["determinism", "max_delta", "cells", "mismatches", "state_problems"]
TOOL_COLUMNS = ["env_id", "tool", "steps", "error_steps", "top_exception", "example_call", "schema_only_args"]
TOOL_COLUMNS += ["code_only_args"]


def _catalog(layout: DataLayout) -> dict[str, tuple[str, list[str]]]:
    """env_id -> (source, tool names) of the catalog."""
    if not layout.environments.exists():
        return {}
    with connect() as con:
        rows = con.execute("SELECT env_id, source, tools FROM read_parquet(?)", [str(layout.environments)]).fetchall()
    return {env: (source, list(tools or [])) for env, source, tools in rows}


def _issue_env(task_id: str, known: dict[str, Any]) -> str:
    """The catalog environment an issue about corpus item ``task_id`` belongs to (``<corpus>/<task_id>``)."""
    return min((e for e in known if e.split("/", 1)[-1] == task_id), default=task_id)


def _unloaded_env(task_id: str, origin: str | None, prefixes: dict[str, str]) -> str:
    """The id of an env item the loader refused (so not in the catalog), with its corpus's prefix as every loaded
    environment has it: the prefix of the env-items file the issue's ``origin`` names (``envs.json:bank``,
    ``more.json[2]:bank``; ``prefixes``: file name -> prefix), else the only one configured, else EnvScaler's
    default (the loader that refuses env items reads EnvScaler's format)."""
    file = re.sub(r"\[\d+\]$", "", (origin or "").rsplit(":", 1)[0])
    distinct = set(prefixes.values())
    prefix = prefixes.get(file) or (distinct.pop() if len(distinct) == 1 else ENVSCALER)
    return task_id if task_id.startswith(f"{prefix}/") else f"{prefix}/{task_id}"


def _quoted(text: str) -> set[str]:
    return set(_QUOTED.findall(text))


def _determinism(layout: DataLayout) -> tuple[bool, dict[str, tuple[str, str]]]:
    """(whether the determinism check ran on the current steps, env -> (status, reason))."""
    checked = False
    found: dict[str, tuple[str, str]] = {}
    for path in excluded_files(layout, gate=False):  # the gate's own file is this report's output, not its input
        doc = json.loads(Path(path).with_suffix(".json").read_text())
        status = QUARANTINED if doc.get("check") == "delta_roundtrip" else NONDETERMINISTIC
        checked |= status == NONDETERMINISTIC
        for env in doc.get("environments", []):
            reason = (doc.get("reasons") or {}).get(env) or doc.get("headline", "")
            found.setdefault(env, (status, str(reason)[:_EXAMPLE_CHARS]))
    return checked, found


def _clip(text: Any) -> str | None:
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= _EXAMPLE_CHARS else text[:_EXAMPLE_CHARS] + "…"


def environment_report(
    layout: DataLayout,
    thresholds: Thresholds = Thresholds(),
    composition: Composition | None = None,
    write: bool = True,
    prefixes: dict[str, str] | None = None,
) -> EnvironmentReport:
    """Compute (and with ``write``, store at ``layout.env_quality`` / ``layout.env_tool_quality``) the report
    card of every environment of the catalog and the steps, with the executor's verdict. ``prefixes`` (env-items
    file name -> its corpus's prefix) names an env item the loader refused as its corpus does (``envscaler/bank``)."""
    composition = composition or Composition()
    parts = layout.step_parts()
    catalog = _catalog(layout)
    fingerprint = input_fingerprint(layout, gate=False)
    envs: dict[str, EnvRow] = {}
    tools: dict[tuple[str, str], ToolRow] = {}

    def env(env_id: str) -> EnvRow:
        return envs.setdefault(env_id, EnvRow(env_id))

    def tool(env_id: str, name: str) -> ToolRow:
        env(env_id)
        return tools.setdefault((env_id, name), ToolRow(env_id, name))

    for env_id, (source, names) in catalog.items():
        row = env(env_id)
        row.source, row.tools = source, len(names)
        for name in names:
            tool(env_id, name).in_catalog = True

    with connect() as con:
        if parts:
            relation = AXES.relation("read_parquet(?, union_by_name = true)")
            cells = ", ".join(f"CASE WHEN bool_or({c.sql()}) THEN '{c.name}' END" for c in composition.cells)
            for env_id, source, steps, scenarios, used, ok, failed, errors, max_delta, reached in con.execute(
                f"""SELECT env_id, any_value(source), count(*), count(DISTINCT task_id), count(DISTINCT tool),
                               count(*) FILTER (outcome = 'success'), count(*) FILTER (outcome = 'failure'),
                               count(*) FILTER (outcome = 'error'), max(delta_size),
                               list_filter([{cells}], lambda c: c IS NOT NULL)
                        FROM {relation} GROUP BY env_id ORDER BY env_id""",
                [parts],
            ).fetchall():
                row = env(env_id)
                row.source = row.source or source
                row.steps, row.scenarios, row.tools_used = int(steps), int(scenarios), int(used)
                row.success_steps, row.failure_steps, row.error_steps = int(ok), int(failed), int(errors)
                row.max_delta, row.cells = int(max_delta or 0), list(reached or [])
            for env_id, observation, n in con.execute(  # what an environment no call could change answered
                f"""SELECT env_id, answer, n FROM (
                       SELECT env_id, answer, count(*) AS n,
                              row_number() OVER (PARTITION BY env_id ORDER BY count(*) DESC, answer) AS k
                       FROM (SELECT env_id, CASE WHEN outcome = '{SANDBOX_REFUSED}' THEN error_message
                                                 ELSE raw_observation END AS answer
                             FROM read_parquet(?, union_by_name = true) WHERE outcome <> 'success')
                       GROUP BY env_id, answer)
                   WHERE k <= 3 AND env_id IN (SELECT env_id FROM read_parquet(?, union_by_name = true)
                                               GROUP BY env_id HAVING count(*) FILTER (outcome = 'success') = 0)
                   ORDER BY env_id, k""",
                [parts, parts],
            ).fetchall():
                env(env_id).refusals.append((_clip(str(observation)) or "", int(n)))
            for env_id, name, steps, ok, failed, errors, max_delta in con.execute(
                """SELECT env_id, tool, count(*), count(*) FILTER (outcome = 'success'),
                              count(*) FILTER (outcome = 'failure'), count(*) FILTER (outcome = 'error'),
                              max(delta_size)
                       FROM read_parquet(?, union_by_name = true) GROUP BY ALL ORDER BY ALL""",
                [parts],
            ).fetchall():
                t = tool(env_id, name)
                t.steps, t.success_steps, t.failure_steps, t.error_steps = int(steps), int(ok), int(failed), int(errors)
                t.max_delta = int(max_delta or 0)
            # the errors per tool and exception: the most frequent one, an example, and the mismatch evidence
            for env_id, name, etype, message, n, step_id, call in con.execute(
                """SELECT env_id, tool, coalesce(error_type, 'error'),
                              left(coalesce(error_message, raw_observation), 300),
                              count(*), min(step_id), arg_min(arguments_json, step_id)
                       FROM read_parquet(?, union_by_name = true) WHERE outcome = 'error'
                       GROUP BY ALL ORDER BY env_id, tool, count(*) DESC, min(step_id)""",
                [parts],
            ).fetchall():
                t = tool(env_id, name)
                kind = (str(etype), _LAST_QUOTED.sub("'…'", str(message or "")))
                env(env_id).error_kinds[kind] += int(n)
                env(env_id).error_examples.setdefault(kind, str(message or ""))
                if t.top_exception is None:
                    if re.search(REFUSAL_WORDS, message or "", re.IGNORECASE):
                        t.refusing_raise = str(etype)
                    t.top_exception = _clip(f"{etype}: {message}")
                    t.top_exception_steps, t.example_step, t.example_call = int(n), step_id, _clip(f"{name}({call})")
                if etype == "TypeError":
                    if unexpected := _UNEXPECTED.search(message or ""):
                        t.schema_only.add(unexpected.group(1))
                    if missing := _MISSING.search(message or ""):
                        t.code_only |= _quoted(missing.group(1))
            for env_id, bad in con.execute(
                f"""SELECT env_id, count(*) FROM read_parquet(?, union_by_name = true)
                        WHERE regexp_matches(CAST(delta AS VARCHAR), '{NON_JSON}') GROUP BY 1""",
                [parts],
            ).fetchall():
                env(env_id).state_problems.append(f"{bad} step(s) change the state to values that are not plain JSON")
        if trajectories := layout.trajectory_files():
            for env_id, biggest, bad in con.execute(
                f"""SELECT env_id, max(octet_length(encode(initial_state_json))),
                               count(*) FILTER (regexp_matches(initial_state_json, '{NON_JSON}'))
                        FROM read_parquet(?, union_by_name = true) GROUP BY 1""",
                [trajectories],
            ).fetchall():
                row = env(env_id)
                row.max_state_bytes = int(biggest or 0)
                if bad:
                    row.state_problems.insert(0, f"{bad} initial state(s) hold values that are not plain JSON")
                if row.max_state_bytes > thresholds.max_state_bytes:
                    row.state_problems.append(
                        f"initial state of {row.max_state_bytes:,} bytes (> {thresholds.max_state_bytes:,})"
                    )
        if issues := layout.collection_issue_files():
            for stage, task_id, reason, origin in con.execute(
                "SELECT stage, task_id, reason, origin FROM read_parquet(?, union_by_name = true) "
                "WHERE stage IN ('tools', 'env') ORDER BY ALL",
                [issues],
            ).fetchall():
                env_id = _issue_env(str(task_id), catalog)
                if stage == "env":
                    if env_id not in catalog and task_id != origin:  # an item, not a whole file the loader refused
                        env(_unloaded_env(env_id, origin, prefixes or {})).not_loaded = _clip(reason)
                    continue
                if (name := _TOOL.search(reason or "")) is None:
                    continue
                t = tool(env_id, name.group(1))
                t.details.append(_clip(reason) or "")
                if m := _DECLARES.match(reason):
                    t.schema_only |= _quoted(m.group(2))
                elif m := _OMITS.match(reason):
                    t.code_only |= _quoted(m.group(2))

    checked, determinism = _determinism(layout)
    for row in envs.values():
        if status := determinism.get(row.env_id):
            row.determinism, row.quarantine_reason = status
        else:  # no step of it was re-executed when it has none: untested, never a claim of determinism
            row.determinism = (DETERMINISTIC if checked else UNCHECKED) if row.steps else UNTESTED
    out_envs, out_tools = _judge(envs, tools, thresholds, fingerprint)
    if write:
        layout.quality_dir.mkdir(parents=True, exist_ok=True)
        write_table(layout.env_quality, out_envs, ENV_QUALITY)
        write_table(layout.env_tool_quality, out_tools, TOOL_QUALITY)
    return EnvironmentReport(out_envs, out_tools, fingerprint)


#: the run config that lets the environments the gate leaves out back into the splits
GATE_SETTING = "ops: environment_report: config: {gate_splits: false}"
GATE_CHECK = "quality_gate"


def gate_splits(layout: DataLayout, report: EnvironmentReport, enabled: bool = True) -> list[str]:
    """The quality gate: with ``enabled``, every step of each environment the executor fails (``report.failing``:
    schema/code mismatch, no state change, non-deterministic, always raising...) is written to
    ``layout.quality_gate`` with the reason ``quality gate: <main problem>``, which stratification excludes from the
    splits (:func:`pipeline.labeling.quarantine.excluded_files`); no failing environment (or ``enabled`` false):
    no gate file. Returns the environments left out."""
    failing = {e["env_id"]: e["main_problem"] or "fails the executor's checks" for e in report.failing}
    parts = layout.step_parts()
    if not enabled or not failing or not parts:
        for path in (layout.quality_gate, layout.quality_gate.with_suffix(".json")):
            path.unlink(missing_ok=True)
        return []
    with connect() as con:
        found = con.execute(
            """SELECT step_id, trajectory_id, env_id, step_index, 'quality gate: ' || r.reason AS reason
               FROM read_parquet(?, union_by_name = true) JOIN (SELECT unnest(?) AS env, unnest(?) AS reason) r
                    ON env_id = r.env
               ORDER BY step_id""",
            [parts, list(failing), list(failing.values())],
        ).fetchall()
    columns = ("step_id", "trajectory_id", "env_id", "step_index", "reason")
    rows = [dict(zip(columns, row, strict=True)) for row in found]
    gated = sorted({row["env_id"] for row in rows})
    doc = {
        "check": GATE_CHECK,
        "ok": True,  # a verdict applied, not a failed check (pipeline.labeling.quarantine.failed_checks)
        "environments": gated,
        "reasons": {env: failing[env] for env in gated},
        "setting": GATE_SETTING,
        "headline": f"{len(gated)} environment(s) fail the executor's checks: left out of the splits",
    }
    write_findings(layout.quality_gate, rows, doc, parts)
    return gated


def gate_lines(layout: DataLayout) -> list[str]:
    """What the run summary says of the gate: each environment it left out of the splits with its reason, and the
    one setting that lets them back in (nothing when it left none out)."""
    sidecar = layout.quality_gate.with_suffix(".json")
    if not layout.quality_gate.exists() or not sidecar.exists():
        return []
    doc = json.loads(sidecar.read_text())
    reasons = doc.get("reasons") or {}
    return [
        f"Left out of the splits by the quality gate: {len(reasons)} environment(s) that fail the executor's checks "
        f"(`{doc.get('setting', GATE_SETTING)}` lets them back in):",
        *(f"  {env}: {_clip(reason)}" for env, reason in sorted(reasons.items())),
    ]


def _judge(
    envs: dict[str, EnvRow], tools: dict[tuple[str, str], ToolRow], th: Thresholds, fingerprint: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The verdict of every environment (its problems in priority order: the first is the main one) and the rows."""
    by_env: dict[str, list[ToolRow]] = {}
    for t in tools.values():
        by_env.setdefault(t.env_id, []).append(t)
    out_envs = []
    for env_id in sorted(envs):
        row = envs[env_id]
        own = sorted(by_env.get(env_id, []), key=lambda t: t.tool)
        if row.not_loaded:
            row.problems.append(f"not loaded: {row.not_loaded}")
        if row.determinism in (NONDETERMINISTIC, QUARANTINED) and not th.allow_nondeterministic:
            row.problems.append(f"{row.determinism}: {row.quarantine_reason or ''}".rstrip(": "))
        mismatched = [t for t in own if t.schema_only or t.code_only or t.details]
        mismatches = sum(max(t.mismatches, 1) for t in mismatched)
        if mismatches > th.max_mismatches:
            row.problems.append("schema/code mismatch: " + "; ".join(_mismatch_text(t) for t in mismatched))
        broken = [t for t in own if t.steps >= th.min_tool_steps and t.error_share >= th.broken_tool_share]
        if construction := _construction_problem(row):
            row.problems.append(construction)
        for t in broken:
            hint = f"; {raises_rule_hint(t.refusing_raise)}" if t.refusing_raise else ""
            how = "always raises" if t.error_share >= 1.0 else f"raises in {t.error_share:.0%} of {t.steps} calls"
            row.problems.append(f"tool {t.tool} {how} ({t.top_exception}){hint}")
        if row.steps and row.error_share > th.max_error_share:
            worst = Counter({t.tool: t.error_steps for t in own if t.error_steps}).most_common(1)
            row.problems.append(
                f"{row.error_share:.0%} of {row.steps} steps raise (> {th.max_error_share:.0%})"
                + (f", most in {worst[0][0]}" if worst else "")
            )
        if th.require_state_change and row.steps and row.max_delta == 0 and row.success_steps:
            row.problems.append(
                f"cannot change state: none of its {row.success_steps} successful calls (of {row.steps}) changed it"
            )
        elif th.require_state_change and row.steps and row.max_delta == 0:
            got = "; ".join(f"{obs!r} ({n})" for obs, n in row.refusals)
            row.problems.append(
                f"no call succeeded: all {row.steps} calls were refused or raised, so no state change was reached "
                f"(exploration's arguments may not fit the environment){'; it answered: ' + got if got else ''}"
            )
        error_tools = ", ".join(
            f"{t.tool} ({t.error_steps})" for t in sorted(own, key=lambda t: -t.error_steps) if t.error_steps
        )
        # EnvRow's fields that are env_quality columns as they are; its lists joined, and the verdict, below
        copied = {k: v for k, v in vars(row).items() if k in ENV_QUALITY.names}
        out_envs.append(
            copied
            | {
                "verdict": row.verdict,
                "main_problem": row.problems[0]
                if row.problems
                else None
                if row.steps or row.not_loaded
                else _no_steps(env_id, [e for e, r in envs.items() if r.steps]),
                "problems": "; ".join(row.problems) or None,
                "error_share": round(row.error_share, 4),
                "error_tools": error_tools or None,
                "cells": ", ".join(row.cells) or None,
                "cells_reached": len(row.cells),
                "mismatches": mismatches,
                "mismatch_detail": "; ".join(_mismatch_text(t) for t in mismatched) or None,
                "state_problems": "; ".join(row.state_problems) or None,
                "input_fingerprint": fingerprint,
            }
        )
    return out_envs, [tools[k].row(fingerprint) for k in sorted(tools)]


#: the exception types that say an attribute holds the wrong kind of object (typed construction failed)
CONSTRUCTION_ERRORS = ("AttributeError", "TypeError")
#: the share of an environment's calls that raise one of them, the same way, that names construction as the cause
CONSTRUCTION_SHARE = 0.9


def _construction_problem(row: EnvRow) -> str | None:
    """The environment's line when nearly every call (:data:`CONSTRUCTION_SHARE`) raises the same
    :data:`CONSTRUCTION_ERRORS` exception that is not about the call's arguments: it was likely built with plain
    dicts where its code expects typed objects."""
    if not row.steps or not row.error_kinds:
        return None
    kind, n = row.error_kinds.most_common(1)[0]
    etype, message = kind[0], row.error_examples[kind]
    if etype not in CONSTRUCTION_ERRORS or n < CONSTRUCTION_SHARE * row.steps:
        return None
    if _UNEXPECTED.search(message) or _MISSING.search(message) or "positional argument" in message:
        return None  # the calls' arguments, not the instance
    return (
        f"construction: {n} of {row.steps} calls raise the same {etype} ({_clip(message)}), so the instance likely "
        "holds plain dicts where its code expects typed objects; fix: declare env_constructor in the env item, or "
        "annotate the attributes with their pydantic/dataclass types (docs/environments.md#typed-construction)"
    )


def _no_steps(env_id: str, stepped: list[str]) -> str:
    """Why an environment without steps is not judged, naming the composite environments its code ran in (a bfcl
    task that involves several classes runs them together as one environment, ``bfcl/A+B``)."""
    source, _, name = env_id.partition("/")
    within = sorted(e for e in stepped if e.startswith(f"{source}/") and name in e.split("/", 1)[1].split("+"))
    if not within:
        return "no steps: no call of this environment was executed (not judged)"
    more = f", … ({len(within) - 3} more)" if len(within) > 3 else ""
    return (
        f"no steps of its own (not judged): no task uses it alone; its code ran in {len(within)} composite "
        f"environment(s): {', '.join(within[:3])}{more}"
    )


def _mismatch_text(t: ToolRow) -> str:
    said = []
    if t.schema_only:
        said.append(f"schema declares {sorted(t.schema_only)} the code rejects")
    if t.code_only:
        said.append(f"code requires {sorted(t.code_only)} the schema omits")
    return f"{t.tool}: " + (", ".join(said) or "; ".join(t.details))


def summary_lines(layout: DataLayout, n: int = 5) -> list[str]:
    """What the run summary says of the environments (the report ``environment_report`` last wrote under
    ``layout``): the headline and the ``n`` worst, one line each."""
    if not layout.env_quality.exists():
        return []
    envs = pq.read_table(layout.env_quality).to_pylist()
    report = EnvironmentReport(envs, [], envs[0]["input_fingerprint"] if envs else "")
    worst = report.worst(n)
    lines = [
        f"Environment quality ({layout.env_quality}, SQL: env_quality): {report.headline()}"
        + (f"; the {len(worst)} worst:" if worst else "")
    ]
    lines += [f"  {e['env_id']}: {e['main_problem']}" for e in worst]
    return lines
