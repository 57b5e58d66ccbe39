"""Tool-diverse picking: an unused environment first, then an unused (env, tool) pair, then the
least-used environment and its least-used tool (pipeline/select/greedy.py), and the candidate window
of pipeline/select/selection.py per (env, tool) pair."""

import hashlib
from collections import Counter

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.select.greedy import pick_diverse
from pipeline.select.selection import _pick_cell, decontamination_note, tool_stats


def _candidates(layout: dict[str, dict[str, int]], salt: int = 0) -> list[tuple[str, str, str, str, str]]:
    """``(env, rank, step_id, sample_hash, tool)`` for ``layout[env][tool]`` candidates each, distinct hashes."""
    rows = []
    for env, tools in layout.items():
        for tool, count in tools.items():
            for i in range(count):
                step = f"{env}/{tool}/{i}"
                rank = hashlib.md5(f"{salt}:{step}".encode()).hexdigest()
                rows.append((env, rank, step, f"h:{step}", tool))
    return rows


def _tool_of(step_id: str) -> str:
    return step_id.split("/")[1]


@settings(max_examples=60, deadline=None)
@given(tools=st.integers(2, 6), per_tool=st.integers(1, 8), n=st.integers(1, 40), salt=st.integers(0, 10**6))
def test_one_environment_spreads_its_picks_across_its_tools(tools, per_tool, n, salt):
    """All candidates tie on the environment: the picks go round the tools (counts differ by at most one
    while every tool still has candidates), whatever the seeded ranks say."""
    cands = _candidates({"env": {f"t{i}": per_tool for i in range(tools)}}, salt)
    picks = pick_diverse(cands, n, Counter(), set())
    assert len(picks) == min(n, tools * per_tool)
    counts = [sum(1 for s, _ in picks if _tool_of(s) == f"t{i}") for i in range(tools)]
    top = max(counts)
    for count in counts:  # a tool with candidates left is within one pick of the most-picked tool
        assert count == per_tool or count >= top - 1, counts


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    per_tool=st.integers(1, 5),
    n=st.integers(1, 30),
    salt=st.integers(0, 10**6),
)
def test_unused_environments_then_unused_pairs_come_first(shape, per_tool, n, salt):
    """Pick order: every environment once, then every unused (env, tool) pair once, before any pair is
    picked a second time; the pick is deterministic for the candidates."""
    layout = {f"e{k}": {f"t{i}": per_tool for i in range(tools)} for k, tools in enumerate(shape)}
    cands = _candidates(layout, salt)
    picks = pick_diverse(cands, n, Counter(), set())
    assert picks == pick_diverse(list(reversed(cands)), n, Counter(), set())  # input order does not matter
    envs, pairs = len(layout), sum(shape)
    seen_envs, seen_pairs = [], []
    for step_id, env in picks:
        pair = (env, _tool_of(step_id))
        if len(seen_envs) < envs:
            assert env not in seen_envs, "an environment was reused while another was unused"
            seen_envs.append(env)
        elif len(set(seen_pairs)) < pairs:
            assert pair not in seen_pairs, "an (env, tool) pair was reused while another was unused"
        seen_pairs.append(pair)


def test_after_unused_pairs_the_least_used_environment_and_its_least_used_tool():
    """A (one tool, many candidates) and B (three tools): A, B, B's other two tools, then A again (the
    least-used environment), then B's tools in turn."""
    cands = _candidates({"A": {"a": 10}, "B": {"x": 10, "y": 10, "z": 10}})
    picks = pick_diverse(cands, 10, Counter(), set())
    order = [(env, _tool_of(s)) for s, env in picks]
    assert order[0][0] != order[1][0]  # both environments first
    assert {p for p in order[:4]} == {("A", "a"), ("B", "x"), ("B", "y"), ("B", "z")}
    assert order[4] == ("A", "a")  # every pair used: least-used environment (A: 1, B: 3)
    assert Counter(order)[("A", "a")] == 5 and all(Counter(order)[("B", t)] in (1, 2) for t in "xyz")


def test_candidates_without_tools_pick_by_environment_as_before():
    rows = [(f"e{i % 3}", f"r{i:03d}", f"s{i}", f"h{i}") for i in range(30)]
    picks = pick_diverse(rows, 9, Counter(), set())
    assert Counter(env for _, env in picks) == {"e0": 3, "e1": 3, "e2": 3}
    assert [s for s, _ in picks] == [f"s{i}" for i in range(9)]  # least-used env, then the smallest rank


def test_window_per_pair_widens_until_picking_equals_picking_from_everything():
    """A pair whose best-ranked window is all duplicates of one (s_t, a_t) makes the window widen."""
    con = duckdb.connect()
    rows = [(f"a{i:03d}", "envA", "dup" if i < 100 else f"ha{i}", f"r{i:03d}", "t1") for i in range(200)]
    rows += [(f"c{i:03d}", "envA", f"hc{i}", f"q{i:03d}", "t2") for i in range(5)]
    rows += [(f"b{i:03d}", "envB", f"hb{i}", f"s{i:03d}", "t3") for i in range(10)]
    con.execute(
        "CREATE TEMP TABLE pool(step_id VARCHAR, env_id VARCHAR, sample_hash VARCHAR, rank VARCHAR, tool VARCHAR, "
        "x INTEGER)"
    )
    con.executemany("INSERT INTO pool VALUES (?, ?, ?, ?, ?, 1)", rows)
    usage, pair_usage, taken = Counter(), Counter(), set()
    got = _pick_cell(con, "x = 1", 40, 3, usage, taken, pair_usage)
    expected = pick_diverse([(e, r, s, h, t) for s, e, h, r, t in rows], 40, Counter(), set())
    assert [(s, e) for s, e, _ in got] == expected and len(got) == 40
    assert pair_usage == Counter((e, t) for _, e, t in got)
    assert sum(usage.values()) == 40 and len(taken) == 40


def test_tool_stats_and_decontamination_note():
    stats = tool_stats("difficult", [("e1", "pay"), ("e1", "pay"), ("e2", "pay"), ("e1", "refund")])
    assert stats == {"stratum": "difficult", "tool_pairs": 3, "top_tool": "pay (e1)", "top_tool_share": 0.5}
    assert tool_stats("x", [])["tool_pairs"] == 0
    row = {"before": 4160, "removed_by_key": 4156, "removed_by_hash": 3, "key": "task_id", "benchmark": "bench-1"}
    assert (
        decontamination_note(row)
        == "; 4156 of 4160 removed by task_id decontamination against bench-1, 3 by (s_t, a_t) hash"
    )
    assert decontamination_note({**row, "removed_by_key": 0, "removed_by_hash": 0}) == ""
