"""``python -m tests.support.plugin_dag DATA_ROOT PROFILE``: the code location's own assets, materialised with real
Dagster in this process — environment_catalog -> trajectories -> labeled_steps -> step_strata -> benchmark_split
-> simulator_eval, with their checks — under the profile file ``PROFILE`` (outside the tree: it turns bfcl and the
builtin pack off and configures the plugin's source, its settings and its outcome rule), the mixture by the plugin's
decontamination rule and composition, and the simulators
``oracle`` and the plugin kind ``echo`` (twice: with its defaults, and with its own setting ``feedback`` in its
``echo:`` section). Prints what landed, as JSON.
Run by tests/core/test_plugin_package.py in a process that sees the plugin package (its ``PYTHONPATH``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
from dagster import AssetKey, materialize

from assets.definitions import build_definitions
from pipeline.core.settings import Settings
from pipeline.envs import registry
from pipeline.evaluate import simulators
from pipeline.store.layout import DataLayout
from pipeline.store.versions import MIXTURE, SplitStore
from resources import SandboxResource

ASSETS = (
    "environment_catalog",
    "trajectories",
    "labeled_steps",
    "step_strata",
    "benchmark_split",
    "sft_mixture",
    "simulator_eval",
)


def main(data: Path, profile: str) -> None:
    defs = build_definitions(Settings(data_root=data, profile=profile))
    wanted = [AssetKey(k) for k in ASSETS]
    assets = [a for a in defs.assets if any(k in wanted for k in a.keys)]
    checks = [c for c in defs.asset_checks if any(k.asset_key in wanted for k in c.check_keys)]
    resources = {**defs.resources, "sandbox": SandboxResource(workers=1)}
    result = materialize(
        [*assets, *checks],
        resources=resources,
        raise_on_error=False,
        run_config={
            "resources": {"store": {"config": {"data_root": str(data)}}},
            "ops": {
                "trajectories": {"config": {"episode_length": 4, "batch_episodes": 4, "min_envs": 1}},
                "sft_mixture": {"config": {"decontaminate": "episode", "composition": "changes_only"}},
                "simulator_eval": {
                    "config": {
                        "simulators": [
                            {"name": "oracle", "kind": "oracle"},
                            {"name": "echo", "kind": "echo"},
                            {"name": "echo-said", "kind": "echo", "echo": {"feedback": "said"}},
                        ]
                    }
                },
            },
        },
    )
    layout = DataLayout.at(data)
    out = {
        "success": result.success,
        "sources": list(registry.names()),
        "kinds": list(simulators.KINDS.names()),
        "materialized": sorted(e.asset_key.to_user_string() for e in result.get_asset_materialization_events()),
    }
    if layout.environments.exists():
        out["catalog"] = [[r["source"], r["env_id"]] for r in pq.read_table(layout.environments).to_pylist()]
    if layout.trajectories.exists():
        rows = pq.read_table(layout.trajectories).to_pylist()
        out["trajectory_sources"] = sorted({r["source"] for r in rows})
        out["trajectory_adapters"] = sorted({r["adapter"] for r in rows})
        out["tasks"] = sorted({r["task_id"] for r in rows})
    out["outcomes"] = sorted(
        {
            (r["tool"], r["outcome"], r["outcome_rule"])
            for part in layout.step_parts()
            for r in pq.read_table(part, columns=["tool", "outcome", "outcome_rule"]).to_pylist()
        }
    )
    out["steps"] = sorted(
        {
            (r["env_id"], r["tool"])
            for part in layout.step_parts()
            for r in pq.read_table(part, columns=["env_id", "tool"]).to_pylist()
        }
    )
    mixture = SplitStore(layout, MIXTURE)
    if mixture.current():
        spec = mixture.manifest(mixture.current())["spec"]
        samples = pq.read_table(mixture.samples(mixture.current())).to_pylist()
        out["mixture"] = [spec["decontaminate"], spec.get("composition"), len(samples)]
        out["mixture_strata"] = sorted({r["stratum"] for r in samples})
        out["mixture_min_delta"] = min(r["delta_size"] for r in samples)
    db = layout.duckdb
    if db.exists():
        con = duckdb.connect(str(db), read_only=True)
        try:
            out["eval_runs"] = [
                list(r)
                for r in con.execute("SELECT simulator, samples, fm, cm FROM eval_runs ORDER BY simulator").fetchall()
            ]
        finally:
            con.close()
    out["failed_checks"] = [c.check_name for c in result.get_asset_check_evaluations() if not c.passed]
    print(json.dumps(out, default=list))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
