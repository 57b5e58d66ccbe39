"""The default run (builtin pack + bfcl) fills every cell of the 400-sample composition."""

import duckdb
import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core.strata import BALANCE2_GROUP_SQL, BALANCE2_GROUPS, BENCHMARK_CELL_SQL, BENCHMARK_CELLS
from pipeline.envs.catalog import build_catalog
from pipeline.envs.registry import sources_config
from pipeline.labeling.steps import label
from pipeline.quality.outcomes import check_outcomes
from pipeline.store import queries
from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import verify_steps

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def default_run(tmp_path_factory, sandbox):
    layout = DataLayout.at(tmp_path_factory.mktemp("default-run"))
    cfg = sources_config()
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    collected = collect_all(cfg, layout, sandbox, ExploreSettings())
    label(layout, sandbox)
    return layout, collected


def test_every_cell_has_twice_its_quota_from_ten_environments(default_run):
    layout, collected = default_run
    table = queries.cell_coverage(layout).set_index("cell")
    for cell in BENCHMARK_CELLS:
        assert table.loc[cell.name, "candidates"] >= 2 * cell.quota, cell.name
        assert table.loc[cell.name, "environments"] >= 10, cell.name
    assert collected.coverage.satisfied()  # exploration stopped because every target was met
    assert collected.coverage.steps < collected.coverage.call_budget <= ExploreSettings().max_call_budget
    assert not collected.coverage.unreachable()  # the embedded default reaches every stratum


def test_the_outcome_check_does_not_fire_on_the_default(default_run):
    """bfcl (16 failures in 4,625 steps) and the builtin pack (about 42% failures) are plausible."""
    report = check_outcomes(default_run[0])
    assert report.ok, report.warnings()
    assert {c.corpus for c in report.corpora} == {"bfcl", "builtin"}


def test_enough_left_for_balance2_after_decontamination(default_run):
    """Pick a 400-sample benchmark the simple way (one step per task, envs round-robin), remove every
    step of its tasks (task_id decontamination), and check every Balance2 group still fills."""
    layout, _ = default_run
    steps = f"read_parquet({layout.step_parts()!r})"
    con = duckdb.connect()
    picks = con.execute(f"""
        WITH c AS (SELECT task_id, env_id, step_id, {BENCHMARK_CELL_SQL} AS cell FROM {steps}),
        ranked AS (SELECT *, row_number() OVER (PARTITION BY cell, env_id ORDER BY step_id) AS r_env
        FROM c WHERE cell IS NOT NULL),
        ordered AS (SELECT *, row_number() OVER (PARTITION BY cell ORDER BY r_env, env_id, step_id) AS r FROM ranked)
        SELECT cell, task_id FROM ordered
    """).df()
    quota = {c.name: c.quota for c in BENCHMARK_CELLS}
    chosen: set[str] = set()
    for cell, group in picks.groupby("cell"):
        tasks = [t for t in dict.fromkeys(group["task_id"])][: quota[cell]]
        assert len(tasks) == quota[cell], cell
        chosen.update(tasks)
    left = con.execute(
        f"SELECT {BALANCE2_GROUP_SQL} AS g, count(*) FROM {steps} WHERE task_id NOT IN (SELECT unnest(?)) GROUP BY ALL",
        [sorted(chosen)],
    ).fetchall()
    available = dict(left)
    for group, size in BALANCE2_GROUPS.items():
        assert available.get(group, 0) >= size, (group, available)


def test_all_steps_verify(default_run):
    layout, _ = default_run
    assert verify_steps(layout).ok


def test_benchmark_has_exactly_the_default_composition(default_run):
    import pandas as pd

    from pipeline.quality.suites import overlap_suite
    from pipeline.select.selection import build_benchmark, build_mixture
    from pipeline.select.stratify import stratify
    from pipeline.store.versions import EmptySelection

    layout, _ = default_run
    stratify(layout)
    bench = build_benchmark(layout, seed=0, on_shortfall="fail")
    df = pd.read_parquet(bench.path)
    assert len(df) == 400 and not bench.shortfalls
    assert df.groupby("stratum").size().to_dict() == {c.name: c.quota for c in BENCHMARK_CELLS}
    assert df["env_id"].nunique() >= 25  # bfcl composites + all 10 builtin domains
    for cell in ("medium_4", "medium_6", "difficult"):
        assert df[df["stratum"] == cell]["env_id"].nunique() >= 10, cell
    for mode in ("trajectory", "task_id", "env_id"):
        try:
            mix = build_mixture(
                layout,
                seed=0,
                decontaminate=mode,
                benchmark_version=bench.version,
                on_shortfall="warn" if mode == "env_id" else "fail",
            )
        except EmptySelection as exc:
            # the benchmark covers every environment of the default run, so decontaminating by env_id leaves
            # nothing: a clear error naming the decontamination, never an empty version
            assert mode == "env_id" and "decontamination" in str(exc), exc
            envs = pd.read_parquet(layout.strata, columns=["env_id"])["env_id"].nunique()
            assert df["env_id"].nunique() == envs
            continue
        assert overlap_suite(mix.path, bench.path, mode).success
        if mode != "env_id":
            assert mix.samples == sum(BALANCE2_GROUPS.values())
