"""Which environments and tasks feed a run: bfcl-eval tasks, the builtin pack, EnvScaler corpora."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from pipeline.core import profile
from pipeline.core.fields import setting
from pipeline.collect.explore import ScenarioRef
from pipeline.collect.replay import bfcl_env_spec, ground_truth_trajectories
from pipeline.core.trajectory import Trajectory
from pipeline.envs import bfcl, builtin, envscaler
from pipeline.core.issues import TaskIssue
from pipeline.envs.bfcl_tasks import BfclTaskFile, default_task_files, iter_tasks
from pipeline.envs.records import FirstSeen, clip, read_lines, undecodable
from pipeline.collect.agent import actions_from_messages
from pipeline.core.environment import EnvSpec
from pipeline.envs.registry import BUILDERS
from pipeline.collect.agent import AgentTask


@dataclass(frozen=True)
class EnvScalerCorpus:
    """A corpus in EnvScaler's released format, e.g. 191_env_metadata.json plus a scenario file."""

    env_items: Path = setting(description="Env items: a JSON dict env_id -> item (191_env_metadata.json) or the Hub "
                              "release (list of records; tools/env_func_details as JSON strings), JSON, JSON lines or Parquet.")
    scenarios: Path | None = setting(None, "Scenario/task items: JSON list, JSON lines, dict or Parquet; "
                                           "init_config may be a JSON string.")
    prefix: str = setting(envscaler.SOURCE, "Namespace of the env ids: '<prefix>/<env_id>'.")
    license: str = setting("", "License of the corpus, recorded in the catalog.")
    more_scenarios: tuple[Path, ...] = setting((), "Further scenario files (the Hub release has two: RL and SFT).")

    def scenario_files(self) -> list[Path]:
        return ([self.scenarios] if self.scenarios is not None else []) + list(self.more_scenarios)


@dataclass(frozen=True)
class SourceConfig:
    """The environment sources: bfcl-eval's multi-turn tasks, the builtin pack, EnvScaler corpora."""

    bfcl_files: list[BfclTaskFile] = setting(factory=lambda: default_task_files(profile.current().bfcl_categories),
                                             description="bfcl-eval task files (default: the profile's categories).")
    bfcl_replay: bool = setting(True, "Collect bfcl tasks by ground-truth replay.")
    bfcl_explore: bool = setting(False, "Also explore bfcl task configs with the policy.")
    builtin: bool = setting(True, "Use the builtin environment pack.")
    builtin_scenarios_per_env: int = setting(factory=lambda: profile.current().builtin_scenarios_per_env,
                                             description="Seeded scenarios generated per builtin env.")
    builtin_seed: int = setting(0, "Seed of the builtin scenario generators.")
    envscaler: list[EnvScalerCorpus] = setting(factory=list, description="EnvScaler-format corpora.")
    message_histories: list[Path] = setting(
        factory=list, description="JSON-lines files of recorded OpenAI message histories to replay (no model needed).")
    explore_class_defaults: bool = setting(
        True, "Explore corpus environments that no scenario names from their class defaults (init config {}).")


class SourceError(ValueError):
    """A configured source that cannot be used: its file is missing or unreadable, or it yields no
    environment. The message names the config key, the file and what to do."""


def configured_files(cfg: SourceConfig) -> list[tuple[str, Path]]:
    """Every file the configuration names, with its config key (``resources.sources.…``)."""
    files: list[tuple[str, Path]] = []
    if cfg.bfcl_replay or cfg.bfcl_explore:
        for i, f in enumerate(cfg.bfcl_files):
            files += [(f"bfcl_task_files[{i}].tasks", Path(f.tasks)), (f"bfcl_task_files[{i}].answers", Path(f.answers))]
    for i, corpus in enumerate(cfg.envscaler):
        files.append((f"envscaler[{i}].env_items", Path(corpus.env_items)))
        if corpus.scenarios is not None:
            files.append((f"envscaler[{i}].scenarios", Path(corpus.scenarios)))
        files += [(f"envscaler[{i}].more_scenarios[{j}]", Path(p)) for j, p in enumerate(corpus.more_scenarios)]
    files += [(f"message_histories[{i}]", Path(p)) for i, p in enumerate(cfg.message_histories)]
    return [(f"resources.sources.{key}", path) for key, path in files]


def check_files(cfg: SourceConfig) -> None:
    """Every configured file exists and can be opened; else :class:`SourceError` naming each one."""
    problems = []
    for key, path in configured_files(cfg):
        try:
            with open(path, "rb"):
                pass
        except FileNotFoundError:
            problems.append(f"{key}: {path} does not exist: fix the path (relative paths are read from "
                            f"{Path.cwd()}) or remove the entry")
        except IsADirectoryError:
            problems.append(f"{key}: {path} is a directory: name the data file in it")
        except OSError as exc:
            problems.append(f"{key}: {path} cannot be read ({exc.strerror}): fix its permissions or the path")
    if problems:
        raise SourceError("; ".join(problems))


def bfcl_enabled(cfg: SourceConfig) -> bool:
    """Whether bfcl-eval is a source of the run: its tasks are replayed or explored, or message
    histories are configured (they may name bfcl environments)."""
    return (bool(cfg.bfcl_files) and (cfg.bfcl_replay or cfg.bfcl_explore)) or bool(cfg.message_histories)


def disabled_sources(cfg: SourceConfig) -> dict[str, str]:
    """The sources this configuration leaves out, with why (what the catalog does not list or count)."""
    off: dict[str, str] = {}
    if not bfcl_enabled(cfg):
        off["bfcl"] = ("no bfcl-eval task files" if not cfg.bfcl_files else "bfcl_replay and bfcl_explore are off")
    if not cfg.builtin:
        off["builtin"] = "builtin: false"
    if not cfg.envscaler:
        off["envscaler"] = "no EnvScaler corpus configured"
    return off


def env_items(cfg: SourceConfig) -> tuple[list[envscaler.EnvItem], list[TaskIssue]]:
    """Every usable EnvScaler-format environment (builtin pack + corpora), and the bad ones."""
    items: list[envscaler.EnvItem] = builtin.parsed_items() if cfg.builtin else []
    issues: list[TaskIssue] = []
    ids = FirstSeen()  # an env id given twice (in one file or across corpora): the first is kept
    for item in items:
        ids.seen(item.qualified_id, item.origin or item.prefix)
    check_files(cfg)
    for index, corpus in enumerate(cfg.envscaler):
        before, first_issue = len(items), len(issues)
        for result in envscaler.load_env_items(corpus.env_items, corpus.prefix, corpus.license):
            item, problems = envscaler.split_item(result)
            env_id = result.env_id if item is not None else result.task_id
            if item is not None or result.task_id != result.origin:  # a record (not a whole bad file) claims its id
                qualified = f"{corpus.prefix}/{env_id}"
                first = ids.seen(qualified, result.origin)
                if first is not None:
                    issues.append(TaskIssue(env_id, "env", ids.message("env id", qualified, result.origin, first), result.origin))
                    continue
            issues.extend(problems)
            if item is not None:
                items.append(item)
        if len(items) == before:  # a configured corpus that gives nothing is a mistake, not a quiet run
            own = issues[first_issue:]
            why = (f"{len(own)} problem(s), first: {clip(own[0].reason, 300)} ({own[0].origin})" if own
                   else "it holds no env item")
            raise SourceError(f"resources.sources.envscaler[{index}].env_items: {corpus.env_items} yielded no usable "
                              f"environment ({why}): fix the file (EnvScaler's env-items format: JSON, JSON lines or "
                              "Parquet) or remove the entry")
    return items, issues


def replay_trajectories(cfg: SourceConfig) -> Iterator[Trajectory | TaskIssue]:
    if cfg.bfcl_replay and cfg.bfcl_files:
        yield from ground_truth_trajectories(iter_tasks(cfg.bfcl_files))


def exploration_scenarios(
    cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None = None
) -> tuple[list[ScenarioRef], list[TaskIssue]]:
    """Scenarios to explore, interleaved across environments so every environment gets episodes.

    Corpus environments that no scenario names are appended to ``without`` (when given) and, with
    ``explore_class_defaults``, explored from their class defaults (init config ``{}``: the
    constructor's own state; a class that cannot be built so is reported as a reset issue)."""
    by_id = {i.qualified_id: i for i in items}
    per_env: dict[str, list[ScenarioRef]] = {}
    issues: list[TaskIssue] = []
    task_ids = FirstSeen()  # (env, task id) given twice: the first scenario is kept

    def add(ref: ScenarioRef) -> None:
        per_env.setdefault(ref.env.env_id, []).append(ref)

    if cfg.builtin:
        for sc in builtin.scenarios(cfg.builtin_scenarios_per_env, cfg.builtin_seed):
            item = by_id[f"{builtin.PREFIX}/{sc['env_id']}"]
            add(ScenarioRef(sc["task_id"], item.spec(sc["init_config"]), task=sc["task"]))
    for corpus in cfg.envscaler:
        for path in corpus.scenario_files():
            for sc in envscaler.load_scenarios(path):
                if isinstance(sc, TaskIssue):
                    issues.append(sc)
                    continue
                item = by_id.get(f"{corpus.prefix}/{sc.env_id}")
                if item is None:
                    issues.append(TaskIssue(sc.task_id, "parse", f"unknown or unusable env_id {clip(repr(sc.env_id), 80)}", sc.origin))
                    continue
                first = task_ids.seen((item.qualified_id, sc.task_id), sc.origin)
                if first is not None:
                    issues.append(TaskIssue(sc.task_id, "parse", task_ids.message(f"task id of {item.qualified_id}:", sc.task_id, sc.origin, first), sc.origin))
                    continue
                add(ScenarioRef(sc.task_id, item.spec(sc.init_config), task=sc.task))
        prefix = f"{corpus.prefix}/"
        for item in items:
            if item.prefix == corpus.prefix and item.qualified_id not in per_env and item.qualified_id.startswith(prefix):
                if without is not None:
                    without.append(item.qualified_id)
                if cfg.explore_class_defaults:
                    add(ScenarioRef(f"{item.env_id}/class-defaults", item.spec({}), category="explore-defaults",
                                    task="Explore the environment from its class defaults."))
    if cfg.bfcl_explore:
        for task in iter_tasks(cfg.bfcl_files):
            if not isinstance(task, TaskIssue):
                add(ScenarioRef(f"{task.task_id}", bfcl_env_spec(task), task="\n".join(task.turns)))
    queues = list(per_env.values())
    interleaved = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    return interleaved, issues


AGENT_SOURCES = ("builtin", "envscaler", "bfcl")


def _agent_tasks_by_source(cfg: SourceConfig, items: list[envscaler.EnvItem], sources: list[str]) -> dict[str, list[AgentTask]]:
    """Every task of the chosen sources, per source, with its user turns as an agent is given them: a
    scenario's task text, each bfcl question turn (an empty one as "Continue.")."""
    per_source: dict[str, list[AgentTask]] = {}
    if "builtin" in sources or "envscaler" in sources:
        scenarios, _ = exploration_scenarios(
            SourceConfig(bfcl_files=[], bfcl_replay=False, builtin=cfg.builtin and "builtin" in sources,
                         builtin_scenarios_per_env=cfg.builtin_scenarios_per_env, builtin_seed=cfg.builtin_seed,
                         envscaler=cfg.envscaler if "envscaler" in sources else []),
            items,
        )
        for ref in scenarios:
            per_source.setdefault(ref.env.env_id.split("/")[0], []).append(AgentTask(ref.task_id, ref.env, [ref.task or "Complete the task."]))
    if "bfcl" in sources:
        for task in iter_tasks(cfg.bfcl_files):
            if not isinstance(task, TaskIssue):
                per_source.setdefault("bfcl", []).append(
                    AgentTask(task.task_id, bfcl_env_spec(task), [t or "Continue." for t in task.turns] or ["Complete the task."]))
    return per_source


def agent_tasks(cfg: SourceConfig, items: list[envscaler.EnvItem], sources: list[str], limit: int | None) -> list[AgentTask]:
    """Tasks for the agent policy from the chosen sources ("builtin", "envscaler", "bfcl"), interleaved."""
    queues = list(_agent_tasks_by_source(cfg, items, sources).values())
    tasks = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    return tasks[:limit] if limit else tasks


def task_turns(cfg: SourceConfig, items: list[envscaler.EnvItem]) -> dict[tuple[str, str], tuple[str, ...]]:
    """The user turns of every task of the configured sources, keyed by (env id, task id), exactly as the
    agent policy is given them (:func:`agent_tasks`): what a recorded trajectory of that task was asked."""
    return {(t.env.env_id, t.task_id): tuple(t.turns)
            for tasks in _agent_tasks_by_source(cfg, items, list(AGENT_SOURCES)).values() for t in tasks}


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
                yield TaskIssue(origin, "parse", f"not a message-history record: line is not JSON: {clip(exc, 120)}", origin)
                continue
            problem = _history_record_problem(row)
            if problem:
                task_id = str(row["task_id"]) if isinstance(row, dict) and isinstance(row.get("task_id"), (str, int)) else origin
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
            first = trajectory_ids.seen(trajectory_id, origin)
            if first is not None:
                yield TaskIssue(task_id, "parse", trajectory_ids.message(f"task id on {env.env_id}:", task_id, origin, first), origin)
                continue
            actions, malformed = actions_from_messages(messages)
            for bad in malformed:
                yield TaskIssue(task_id, "collect", f"tool call {clip(repr(bad['tool']), 80)} not replayed: {clip(bad['reason'])}", origin)
            yield Trajectory(trajectory_id, task_id, env, tuple(actions),
                             category="history", strategy="replay-messages", meta={"messages": messages})


_ENV_FIELDS = {"source": str, "env_id": str, "init_config": dict, "options": dict}


def _history_record_problem(row: Any) -> str | None:
    """Why a parsed message-history line cannot be replayed (shape and types), or None."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got a {type(row).__name__}"
    bad = undecodable(row)
    if bad:
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
    unknown = sorted(set(map(str, env)) - set(_ENV_FIELDS))
    if unknown:
        return f"'env' has unknown field(s) {clip(unknown, 80)} (expected {sorted(_ENV_FIELDS)}): {clip(repr(env), 120)}"
    for key, kind in _ENV_FIELDS.items():
        if key in ("source", "env_id") and key not in env:
            return f"'env' lacks {key!r}: {clip(repr(env), 120)}"
        if key in env and not isinstance(env[key], kind):
            return f"'env.{key}' must be a {kind.__name__}, got {clip(repr(env[key]), 80)}"

    if env["source"] not in BUILDERS:
        return f"'env.source' {clip(repr(env['source']), 60)} is not a known environment source ({sorted(BUILDERS)})"
    needs = {"envscaler": ("class_name", "code_ref", "tools_ref"), "bfcl": ("classes",)}.get(env["source"], ())
    missing = [k for k in needs if k not in env.get("options", {})]
    if missing:
        return f"'env.options' lacks {missing} for source {env['source']!r}"
    return None


def source_of(env: EnvSpec) -> str:
    """The source an environment belongs to (its shard is chosen within it, ``pipeline.store.partitions``):
    bfcl-eval classes, the builtin pack, or an EnvScaler corpus."""
    if env.source == bfcl.SOURCE:
        return "bfcl"
    if env.env_id.startswith(f"{builtin.PREFIX}/"):
        return "builtin"
    return "envscaler"
