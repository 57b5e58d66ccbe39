"""Environment- and tool-diverse, seeded picking.

Every pick takes, in this order of preference:

1. a candidate from an environment not used yet;
2. else a candidate whose (env, tool) pair is not used yet;
3. else a candidate from the least-used environment, and within it from its least-used tool;

ties broken by a seeded rank. Usage counts are shared across the cells of a split (pass the same
counters), so "unused" means unused anywhere in the split so far."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence

Pair = tuple[str, str]  # (env_id, tool)


def pick_diverse(
    candidates: Iterable[Sequence[str]],
    n: int,
    env_usage: Counter[str],
    taken_hashes: set[str],
    exhausted: set | None = None,
    pair_usage: Counter[Pair] | None = None,
) -> list[tuple[str, str]]:
    """Pick up to ``n`` of ``(env_id, rank, step_id, sample_hash[, tool])`` candidates.

    ``env_usage`` and ``pair_usage`` (per (env, tool); shared across cells) and ``taken_hashes`` (one sample per (s_t,
    a_t)) are updated in place. A candidate without a tool counts as tool ``""``, so candidates without tools are picked
    by environment alone. Pairs whose candidates ran out while picking are added to ``exhausted`` as ``(env_id, tool)``.
    Returns ``(step_id, env_id)`` in pick order.
    """
    pair_usage = Counter() if pair_usage is None else pair_usage
    queues: dict[Pair, list[tuple[str, str, str]]] = {}
    for cand in candidates:
        env_id, rank, step_id, sample_hash = cand[:4]
        tool = cand[4] if len(cand) > 4 and cand[4] is not None else ""
        queues.setdefault((env_id, tool), []).append((rank, step_id, sample_hash))
    for queue in queues.values():
        queue.sort(reverse=True)  # pop() from the end = smallest rank

    def key(pair: Pair) -> tuple:
        env_used, used = env_usage[pair[0]], pair_usage[pair]
        # usage only grows and a queue's head rank only rises: keys never decrease, so a stale heap
        # entry is re-keyed when popped (lazy deletion stays exact)
        return (env_used > 0, used > 0, env_used, used, queues[pair][-1][0], pair)

    heap = [key(pair) for pair, queue in queues.items() if queue]
    heapq.heapify(heap)
    picks: list[tuple[str, str]] = []
    while heap and len(picks) < n:
        entry = heapq.heappop(heap)
        pair = entry[-1]
        queue = queues[pair]
        if not queue:
            continue
        current = key(pair)
        if current != entry:
            heapq.heappush(heap, current)
            continue
        _, step_id, sample_hash = queue.pop()
        if sample_hash not in taken_hashes:
            taken_hashes.add(sample_hash)
            picks.append((step_id, pair[0]))
            env_usage[pair[0]] += 1
            pair_usage[pair] += 1
        if queue:
            heapq.heappush(heap, key(pair))
        elif exhausted is not None:
            exhausted.add(pair)
    return picks
