"""Environment-diverse, seeded picking: every pick takes a candidate from the least-used
environment (an unused env_id first), ties broken by a seeded rank."""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Iterable


def pick_diverse(
    candidates: Iterable[tuple[str, str, str, str]],
    n: int,
    env_usage: Counter[str],
    taken_hashes: set[str],
    exhausted: set[str] | None = None,
) -> list[tuple[str, str]]:
    """Pick up to ``n`` of ``(env_id, rank, step_id, sample_hash)`` candidates.

    ``env_usage`` (shared across cells) and ``taken_hashes`` (one sample per (s_t, a_t)) are
    updated in place; environments whose candidates ran out while picking are added to
    ``exhausted``. Returns ``(step_id, env_id)`` in pick order.
    """
    per_env: dict[str, list[tuple[str, str, str]]] = {}
    for env_id, rank, step_id, sample_hash in candidates:
        per_env.setdefault(env_id, []).append((rank, step_id, sample_hash))
    for queue in per_env.values():
        queue.sort(reverse=True)  # pop() from the end = smallest rank
    heap = [(env_usage[env], queue[-1][0], env) for env, queue in per_env.items() if queue]
    heapq.heapify(heap)
    picks: list[tuple[str, str]] = []
    while heap and len(picks) < n:
        usage, rank, env = heapq.heappop(heap)
        queue = per_env[env]
        if usage != env_usage[env] or not queue or queue[-1][0] != rank:
            if queue:
                heapq.heappush(heap, (env_usage[env], queue[-1][0], env))
            continue
        _, step_id, sample_hash = queue.pop()
        if sample_hash not in taken_hashes:
            taken_hashes.add(sample_hash)
            picks.append((step_id, env))
            env_usage[env] += 1
        if queue:
            heapq.heappush(heap, (env_usage[env], queue[-1][0], env))
        elif exhausted is not None:
            exhausted.add(env)
    return picks
