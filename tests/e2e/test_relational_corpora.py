"""Corpora whose write tools succeed only with arguments that fit together, run as a user runs them (``./forge run
-c run.yaml``, the default profile): issue 41's "Done when" (tests/support/relational_corpora.py).

- a customer-service desk (30 scenarios) beside a garage that keys its spots by id: every write tool succeeds, the
  largest |Δ| one valid call can make (8, only by a consistent combination) is reached, the reference actions a
  scenario carries are replayed; two environments and 40 scenarios get a budget scaled by the scenarios, the
  progress line never passes its total, and each shortfall line says which of the three kinds it is, with the
  value in force;
- a reading room that refuses in a convention no rule knows, beside the desk whose refusals the default rule
  knows: the outcome check names the reading room, with its rule and an example refusal.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import duckdb
import pytest
import yaml

from pipeline.store.layout import DataLayout
from tests.support.relational_corpora import (
    GARAGE_RULE,
    SHOP_MAX_DELTA,
    SHOP_WRITE_TOOLS,
    desk_corpus,
    reading_room_corpus,
)
from tests.support.user_corpora import write_released

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def forge_run(tmp_path: Path, entries: list[dict], ops: dict | None = None) -> tuple[str, int, DataLayout]:
    config = tmp_path / "run.yaml"
    sources = {"builtin": {"enabled": False}, "bfcl": {"categories": []}, "envscaler": entries}
    config.write_text(yaml.safe_dump({"resources": {"sources": {"config": sources}}, **({"ops": ops} if ops else {})}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    env.update(DAGSTER_HOME=str(tmp_path / "home"), ENVSIM_DATA_ROOT=str(tmp_path / "data"))
    proc = subprocess.run(
        ["./forge", "run", "-c", str(config)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800
    )
    return proc.stdout + proc.stderr, proc.returncode, DataLayout.at(tmp_path / "data")


def _entry(directory: Path, corpus: tuple, **extra) -> dict:
    env_file, scen_file = write_released(directory, *corpus)
    return {"env_items": str(env_file), "scenarios": str(scen_file), "license": "test corpus", **extra}


def _with_reference(corpus: tuple) -> tuple:
    """The shop with reference actions in its first scenario: a pending order's cancellation (tau-bench's
    ``actions`` shape), looked up first."""
    items, scenarios = corpus
    first = scenarios[0]
    pending = next(o for o, order in first["init_config"]["orders"].items() if order["status"] == "pending")
    first["actions"] = [
        {"name": "get_order_details", "kwargs": {"order_id": pending}},
        {"name": "cancel_pending_order", "kwargs": {"order_id": pending, "reason": "ordered by mistake"}},
    ]
    return items, scenarios


@pytest.fixture(scope="module")
def desk_and_garage(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("desk")
    return forge_run(tmp, [_entry(tmp / "desk", _with_reference(desk_corpus(30, 10)), outcome_rule=GARAGE_RULE)])


def _steps(layout: DataLayout) -> str:
    return f"read_parquet({[str(p) for p in layout.step_parts()]!r}, union_by_name = true)"


def test_every_write_tool_succeeds_and_the_largest_valid_change_is_reached(desk_and_garage):
    out, rc, layout = desk_and_garage
    assert rc == 0, out[-4000:]
    con = duckdb.connect()
    per_tool = {
        (env.split("/")[-1], tool): (ok, top)
        for env, tool, ok, top in con.execute(
            f"""SELECT env_id, tool, count(*) FILTER (outcome = 'success'),
                       max(delta_size) FILTER (outcome = 'success') FROM {_steps(layout)} GROUP BY 1, 2"""
        ).fetchall()
    }
    for tool in SHOP_WRITE_TOOLS:
        assert per_tool.get(("shop", tool), (0, 0))[0] > 0, (tool, per_tool)
    for tool in ("park", "pay", "leave"):  # real spot ids: the keys of a mapping whose values are None
        assert per_tool.get(("garage", tool), (0, 0))[0] > 0, (tool, per_tool)
    assert max(top or 0 for (env, _), (_, top) in per_tool.items() if env == "shop") == SHOP_MAX_DELTA
    # the reference actions were replayed as a trajectory of their own, and succeeded
    reference = con.execute(
        f"SELECT tool, outcome FROM {_steps(layout)} WHERE trajectory_id LIKE '%/shop-0/reference' ORDER BY step_index"
    ).fetchall()
    assert reference == [("get_order_details", "success"), ("cancel_pending_order", "success")]


def test_few_environments_and_many_scenarios_get_a_budget_that_follows_them_and_truthful_shortfalls(
    desk_and_garage,
):
    out, rc, _ = desk_and_garage
    assert rc == 0, out[-4000:]
    for done, total in re.findall(r"exploration: ([\d,]+)/([\d,]+) calls", out):
        assert int(done.replace(",", "")) <= int(total.replace(",", "")), (done, total)
    finished = [line for line in out.splitlines() if "exploration:" in line and " in " in line][-1]
    total = int(re.search(r"exploration: [\d,]+/([\d,]+)", finished).group(1).replace(",", ""))
    assert total >= 40 * 200 > 2 * 3_000, finished  # 40 scenarios × calls_per_scenario, not 2 × 3,000
    # it fills what it can reach: main's policy and budget gave a 279-sample benchmark and a 2,594-sample mixture
    held = {kind: int(n) for kind, n in re.findall(r"^(benchmark|sft_mixture): current \S+ \((\d+) samples", out, re.M)}
    assert held.get("benchmark", 0) >= 350 and held.get("sft_mixture", 0) >= 5_000, held
    lines = out[out.find("SHORTFALL") :].splitlines() if "SHORTFALL" in out else []
    cells = [line for line in lines if re.match(r"\s+\w+ \(.*\): \d+ of \d+", line)]
    for line in cells:  # each short cell is one of the three kinds
        kinds = [k for k in ("unreachable", "not reached within the budget", "too few environments") if k in line]
        assert len(kinds) <= 1, line
    assert "3,000 calls per environment" not in out
    for fix in [line for line in lines if "raise" in line]:
        assert re.search(r"\(now [\d,]+", fix), fix  # the setting to raise, with its value in force


#: the outcome check needs steps of both environments, not a filled benchmark: a fixed budget (a corpus-scaled one
#: grows while deep cells still gain candidates, to the profile's 60,000 calls)
READING_ROOM_OPS = {"trajectories": {"config": {"call_budget": 2_000}}}


@pytest.fixture(scope="module")
def reading_room(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reading")
    return forge_run(tmp, [_entry(tmp / "rooms", reading_room_corpus(10))], ops=READING_ROOM_OPS)


def test_an_environment_with_an_undeclared_refusal_convention_is_named_beside_one_whose_refusals_are_known(
    reading_room,
):
    out, rc, layout = reading_room
    assert rc == 0, out[-4000:]
    warns = [line for line in out.splitlines() if "WARN CHECK outcome_labels_plausible" in line]
    assert any("environment 'envscaler/reading_room'" in w for w in warns), out[-4000:]
    (warn,) = [w for w in warns if "reading_room" in w]
    assert "outcome rule: default" in warn and "refused" in warn  # its rule, and an example refusal
    assert not any("'envscaler/shop'" in w for w in warns)
