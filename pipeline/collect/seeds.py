"""Success-seeded search and refusals that teach: what exploration passes from one batch of episodes to the
next, per scenario and tool.

Coverage-guided, as fuzzers are: a call that reached something new (a tool's first success, a new (tool, outcome,
|Δ|, argument count), a candidate for a target still short) or changed more of the state than any earlier call of
its tool on that scenario becomes a **seed**, one argument of which the policy mutates
(:meth:`pipeline.execution.policy.ExplorationPolicy.from_seed`). A **refusal** (a ``failure`` step) is kept with
its arguments: the values its text names are avoided, and a state value it names (``not pending``) is a condition
the next draws prefer (:func:`pipeline.execution.relations.refusal_hints`). Learnt in the sandbox's step order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.axes import DELTA, OUTCOME
from pipeline.core.outcome import FAILURE, SUCCESS

#: seeds kept per (scenario, tool): the latest
SEEDS_PER_TOOL = 4
#: refusals kept per (scenario, tool): the latest
REFUSALS_PER_TOOL = 3
#: characters of a refusal's observation passed on
REFUSAL_CHARS = 300


@dataclass
class Teacher:
    """Seeds and refusals per (scenario, tool)."""

    seeds: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    best: dict[tuple[str, str], int] = field(default_factory=dict)
    refusals: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    succeeded: set[tuple[str, str]] = field(default_factory=set)

    def learn(self, env_id: str, task_id: str, step: Mapping[str, Any], new: bool) -> None:
        """One explored step of ``task_id``'s scenario; ``new``: it reached something new (the coverage says)."""
        tool, outcome = step["tool"], step[OUTCOME.column]
        key = (task_id, tool)
        if outcome == SUCCESS:
            delta = int(step[DELTA.column])
            first = (env_id, tool) not in self.succeeded
            self.succeeded.add((env_id, tool))
            if (delta > 0 or first) and (new or first or delta > self.best.get(key, 0)):
                self.best[key] = max(delta, self.best.get(key, 0))
                args = json.loads(step["arguments_json"])
                kept = [s for s in self.seeds.get(key, []) if s != args]
                self.seeds[key] = [*kept, args][-SEEDS_PER_TOOL:]
        elif outcome == FAILURE:
            text = str(step.get("raw_observation") or "")[:REFUSAL_CHARS]
            refusal = {"text": text, "args": json.loads(step["arguments_json"])}
            self.refusals[key] = [*self.refusals.get(key, []), refusal][-REFUSALS_PER_TOOL:]

    def for_scenario(self, task_id: str, tools: list[str]) -> tuple[dict[str, list], dict[str, list]]:
        """(seeds, refusals) by tool for an episode of ``task_id``'s scenario."""
        seeds = {t: self.seeds[(task_id, t)] for t in tools if (task_id, t) in self.seeds}
        refusals = {t: self.refusals[(task_id, t)] for t in tools if (task_id, t) in self.refusals}
        return seeds, refusals
