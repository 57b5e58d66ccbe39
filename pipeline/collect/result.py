"""What a collection returns: its report, exploration coverage, agent episodes and, for a partition,
what the shard held (kept with the trajectories by :mod:`pipeline.collect.reuse`); and what the
``trajectories`` asset reports of it (:meth:`CollectionResult.facts`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from pipeline.collect.collector import CollectReport
from pipeline.collect.explore import Coverage
from pipeline.report.tables import Facts, Markdown, Table
from pipeline.store.layout import DataLayout
from pipeline.store.partitions import Shard


@dataclass
class CollectionResult:
    report: CollectReport
    coverage: Coverage | None
    agent_episodes: list[dict] = field(default_factory=list)
    shard: ShardSummary | None = None
    without_scenarios: list[str] = field(default_factory=list)  # corpus environments no scenario names
    explored_without: list[str] = field(default_factory=list)  # ... of them explored from their class defaults
    reused: bool = False  # the recorded result of an identical earlier collection (pipeline.collect.reuse)

    def facts(self, layout: DataLayout, agent_model: str | None) -> Facts:
        """What the ``trajectories`` asset reports of this collection (``layout``: the partition's, when partitioned):
        counts, rejected tasks, environments without scenarios, the shard, the agent's episodes (``agent_model``:
        None when no agent ran) and exploration's coverage, with the warnings to log."""
        report = self.report
        facts = Facts(warnings=[f"task {issue.task_id} ({issue.stage}): {issue.reason}" for issue in report.issues])
        values = facts.values
        values.update(
            {
                "reused": self.reused,
                "trajectories": report.trajectories,
                "actions": report.actions,
                "environments": len(report.by_env),
                "rejected_tasks": len(report.issues),
                **{
                    f"by_{by}": Table(
                        [{by: k, "trajectories": n} for k, n in sorted(getattr(report, f"by_{by}").items())],
                        [by, "trajectories"],
                    )
                    for by in ("strategy", "category")
                },
                "rejected": Table([asdict(i) for i in report.issues], ["task_id", "stage", "reason", "origin"]),
                "path": layout.trajectories.resolve(),
            }
        )
        if self.without_scenarios:
            explored = set(self.explored_without)
            groups = [
                (how, envs)
                for how, was in (
                    ("explored from their class defaults (init config {})", True),
                    ("not explored (explore_class_defaults is off)", False),
                )
                if (envs := [e for e in self.without_scenarios if (e in explored) == was])
            ]
            facts.warnings += [
                f"{len(envs)} corpus environments have no scenario; {how}: " + ", ".join(envs[:20])
                for how, envs in groups
            ]
            values["environments_without_scenarios"] = len(self.without_scenarios)
            values["without_scenarios"] = Markdown(
                "\n\n".join(f"{how}:\n\n" + "\n".join(f"- {e}" for e in envs[:200]) for how, envs in groups)
            )
        if self.shard is not None:
            values["partition"] = self.shard.shard.key
            values["partition_note"] = self.shard.note
        if agent_model is None:
            values["agent"] = "skipped: no model endpoint configured (config agent.model / agent.base_url)"
        else:
            statuses = pd.Series([r["status"] for r in self.agent_episodes]).value_counts().to_dict()
            events = pd.Series([e["kind"] for r in self.agent_episodes for e in r["events"]]).value_counts().to_dict()
            values["agent"] = f"{len(self.agent_episodes)} episodes with {agent_model}: {statuses}; events {events}"
        if self.coverage is not None:
            cov = self.coverage
            values["exploration_calls"] = cov.steps
            values["exploration_call_budget"] = cov.call_budget
            values["exploration_stopped"] = cov.stop_reason
            values["exploration_coverage"] = Table(
                [
                    {
                        "cell": c.name,
                        "target": cov.targets()[c.name],
                        "candidates": cov.cells[c.name],
                        "environments": len(cov.cell_envs.get(c.name, ())),
                        "status": cov.status(c.name),
                    }
                    for c in cov.composition.cells
                ],
                ["cell", "target", "candidates", "environments", "status"],
            )
            if lines := cov.unreachable_lines():
                values["exploration_unreachable"] = Markdown("\n".join(f"- {line}" for line in lines))
                facts.warnings.append(
                    f"exploration: {len(lines)} coverage target(s) no explored environment can reach: "
                    + "; ".join(lines)
                )
        return facts


@dataclass
class ShardSummary:
    """What one partition of a sharded collection held."""

    shard: Shard
    source_envs: set[str] = field(default_factory=set)  # environments of the shard's source seen, all shards
    shard_envs: set[str] = field(default_factory=set)  # ... of them in this shard
    note: str = ""
