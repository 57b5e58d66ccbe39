"""Which environments and tasks feed a run: the registered sources (:mod:`pipeline.envs.registry`) under the
run's :class:`~pipeline.envs.config.SourceConfig`, and recorded message histories."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.collect.agent import AgentTask, actions_from_messages
from pipeline.collect.explore import ScenarioRef
from pipeline.core.environment import EnvSpec
from pipeline.core.issues import TaskIssue
from pipeline.core.outcome import RULE_OPTION, OutcomeRuleError, rule_of_id
from pipeline.core.trajectory import Trajectory
from pipeline.envs import envscaler, registry
from pipeline.envs.config import SourceConfig, SourceError
from pipeline.envs.records import FirstSeen, clip, read_lines, undecodable
from pipeline.envs.sources.served import ENV_FIELDS


def configured_files(cfg: SourceConfig) -> list[tuple[str, Path]]:
    """Every file the configuration names, with its config key (``resources.sources.…``): each source's,
    then the message histories."""
    files = [f for source in registry.sources() for f in source.files(cfg)]
    files += [(f"message_histories[{i}]", Path(p)) for i, p in enumerate(cfg.message_histories)]
    return [(f"resources.sources.{key}", path) for key, path in files]


def check_files(cfg: SourceConfig) -> None:
    """Every configured file exists and can be opened; else :class:`SourceError` naming each one."""
    problems = []
    for key, path in configured_files(cfg):
        try:
            open(path, "rb").close()
        except FileNotFoundError:
            problems.append(
                f"{key}: {path} does not exist: fix the path (relative paths are read from "
                f"{Path.cwd()}) or remove the entry"
            )
        except IsADirectoryError:
            problems.append(f"{key}: {path} is a directory: name the data file in it")
        except OSError as exc:
            problems.append(f"{key}: {path} cannot be read ({exc.strerror}): fix its permissions or the path")
    if problems:
        raise SourceError("; ".join(problems))


def disabled_sources(cfg: SourceConfig) -> dict[str, str]:
    """The sources this configuration leaves out, with why (what the catalog does not list or count,
    whose partitions stay empty): :meth:`pipeline.envs.source.EnvironmentSource.why_disabled`."""
    return {s.name: why for s in registry.sources() if (why := s.why_disabled(cfg)) is not None}


def env_items(cfg: SourceConfig) -> tuple[list[envscaler.EnvItem], list[TaskIssue]]:
    """Every usable EnvScaler-format environment (builtin pack + corpora), and the bad ones."""
    check_files(cfg)
    items: list[envscaler.EnvItem] = []
    issues: list[TaskIssue] = []
    ids = FirstSeen()  # an env id given twice (in one file or across sources): the first is kept
    for source in registry.sources():
        more, problems = source.env_items(cfg, ids)
        items += more
        issues += problems
    return items, issues


def replay_trajectories(cfg: SourceConfig, only: str | None = None) -> Iterator[Trajectory | TaskIssue]:
    """Every source's ready-made trajectories (bfcl's ground truth, served episodes); ``only``: of that source alone.
    A trajectory on an environment of no known adapter is an issue naming it (and its line, ``meta["origin"]``)."""
    for source in registry.sources():
        if only is None or source.name == only:
            for t in source.ruled_replay(cfg):
                if isinstance(t, TaskIssue) or t.env.source in registry.ADAPTERS:
                    yield t
                else:
                    why = (
                        f"{source.name} trajectory {t.trajectory_id}: its environment's source {t.env.source[:60]!r} "
                        f"is not a known adapter ({', '.join(sorted(registry.ADAPTERS))}): fix or drop it"
                    )
                    yield TaskIssue(t.task_id, "parse", why, str(t.meta.get("origin", source.name)))


def _interleaved(queues: list[list]) -> list:
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def exploration_scenarios(
    cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None = None
) -> tuple[list[ScenarioRef], list[TaskIssue]]:
    """Every source's scenarios to explore (:meth:`pipeline.envs.source.EnvironmentSource.scenarios`),
    interleaved across environments so every environment gets episodes. Corpus environments that no
    scenario names are appended to ``without`` (when given)."""
    refs: list[ScenarioRef] = []
    issues: list[TaskIssue] = []
    for source in registry.sources():
        tasks, problems = source.ruled_scenarios(cfg, items, without)
        issues += problems
        refs += [ScenarioRef(t.task_id, t.env, t.category, t.text, t.reference, source.relational) for t in tasks]
    return _interleaved(_by_env(refs)), issues


def agent_tasks(
    cfg: SourceConfig, items: list[envscaler.EnvItem], sources: list[str], limit: int | None
) -> list[AgentTask]:
    """Tasks for the agent policy from the chosen sources (registered names: "builtin", "envscaler",
    "bfcl"…), interleaved across env-id namespaces."""
    per_namespace: dict[str, list[AgentTask]] = {}
    for source in registry.sources():
        if source.name in sources:
            for t in _interleaved(_by_env(source.ruled_agent_tasks(cfg, items))):
                per_namespace.setdefault(t.env.env_id.split("/")[0], []).append(
                    AgentTask(t.task_id, t.env, list(t.turns))
                )
    tasks = _interleaved(list(per_namespace.values()))
    return tasks[:limit] if limit else tasks


def _by_env(tasks: list) -> list[list]:
    per_env: dict[str, list] = {}
    for t in tasks:
        per_env.setdefault(t.env.env_id, []).append(t)
    return list(per_env.values())


def task_turns(cfg: SourceConfig, items: list[envscaler.EnvItem]) -> dict[tuple[str, str], tuple[str, ...]]:
    """The user turns of every task of the configured sources, keyed by (env id, task id), exactly as the
    agent policy is given them (:func:`agent_tasks`): what a recorded trajectory of that task was asked."""
    return {(t.env.env_id, t.task_id): tuple(t.turns) for t in agent_tasks(cfg, items, list(registry.names()), None)}


def history_trajectories(cfg: SourceConfig, items: list[envscaler.EnvItem]) -> Iterator[Trajectory | TaskIssue]:
    """Replay source: recorded OpenAI message histories (this pipeline's ``data/agent/*.jsonl`` or any
    tool's), one JSON object per line with ``task_id``, ``messages`` and either ``env`` (an env spec as
    recorded here) or ``env_id`` (+ ``init_config``) naming a catalogued EnvScaler/builtin environment.
    Their tool calls are re-executed through the labeling core; no model is needed."""

    by_id = {i.qualified_id: i for i in items} | {i.env_id: i for i in items}
    trajectory_ids = FirstSeen()  # a task replayed twice on one environment: the first record is kept
    for path in cfg.message_histories:
        for lineno, line, err in read_lines(Path(path)):
            origin = f"{Path(path).name}:{lineno}"
            if err:
                yield TaskIssue(origin, "parse", err, origin)
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as exc:
                why = f"not a message-history record: line is not JSON: {clip(exc, 120)}"
                yield TaskIssue(origin, "parse", why, origin)
                continue
            if problem := _history_record_problem(row):
                named = isinstance(row, dict) and isinstance(row.get("task_id"), (str, int))
                task_id = str(row["task_id"]) if named else origin
                yield TaskIssue(clip(task_id, 200), "parse", f"not a message-history record: {problem}", origin)
                continue
            task_id, messages = str(row["task_id"]), row["messages"]
            if row.get("env") is not None:
                env = EnvSpec(**row["env"])
            elif isinstance(row.get("env_id"), str) and row["env_id"] in by_id:
                env = by_id[row["env_id"]].spec(row.get("init_config") or {})
            else:
                yield TaskIssue(task_id, "parse", f"unknown environment {clip(repr(row.get('env_id')), 80)}", origin)
                continue
            trajectory_id = f"{env.env_id}/{task_id}/history-{Path(path).stem}"
            if (first := trajectory_ids.seen(trajectory_id, origin)) is not None:
                why = trajectory_ids.message(f"task id on {env.env_id}:", task_id, origin, first)
                yield TaskIssue(task_id, "parse", why, origin)
                continue
            actions, malformed = actions_from_messages(messages)
            for bad in malformed:
                why = f"tool call {clip(repr(bad['tool']), 80)} not replayed: {clip(bad['reason'])}"
                yield TaskIssue(task_id, "collect", why, origin)
            meta = {"messages": messages}
            yield Trajectory(trajectory_id, task_id, env, tuple(actions), "history", "replay-messages", meta)


def _history_record_problem(row: Any) -> str | None:
    """Why a parsed message-history line cannot be replayed (shape and types), or None."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got a {type(row).__name__}"
    if bad := undecodable(row):
        return bad
    if not isinstance(row.get("task_id"), (str, int)) or isinstance(row.get("task_id"), bool):
        return f"'task_id' must be a string, got {clip(repr(row.get('task_id')), 60)}"
    messages = row.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return f"'messages' must be a list of message objects, got {clip(repr(messages), 80)}"
    env = row.get("env")
    if env is None:
        if not isinstance(row.get("init_config", {}), (dict, type(None))):
            return f"'init_config' must be an object, got {clip(repr(row.get('init_config')), 80)}"
        return None
    if not isinstance(env, dict):
        return f"'env' must be an environment object, got {clip(repr(env), 80)}"
    if unknown := sorted(set(map(str, env)) - set(ENV_FIELDS)):
        return f"'env' has unknown field(s) {clip(unknown, 80)} (expected {sorted(ENV_FIELDS)}): {clip(repr(env), 120)}"
    for key, kind in ENV_FIELDS.items():
        if key in ("source", "env_id") and key not in env:
            return f"'env' lacks {key!r}: {clip(repr(env), 120)}"
        if key in env and not isinstance(env[key], kind):
            return f"'env.{key}' must be a {kind.__name__}, got {clip(repr(env[key]), 80)}"

    adapter = registry.ADAPTERS.find(env["source"])
    if adapter is None:
        return (
            f"'env.source' {clip(repr(env['source']), 60)} is not a known adapter ({sorted(registry.ADAPTERS.names())})"
        )
    if missing := [k for k in adapter.needs if k not in env.get("options", {})]:
        return f"'env.options' lacks {missing} for source {env['source']!r}"
    rule = env.get("options", {}).get(RULE_OPTION)
    if rule is not None:  # a declared outcome rule, as recorded (its canonical JSON text)
        try:
            if not isinstance(rule, str):
                raise OutcomeRuleError(f"a {type(rule).__name__}, not the rule's canonical JSON text as recorded")
            rule_of_id(rule)
        except OutcomeRuleError as exc:
            return f"'env.options.{RULE_OPTION}' is not an outcome rule: {clip(str(exc), 200)}"
    return None
