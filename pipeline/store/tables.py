"""Every table of ``envsim.duckdb``, each one declaration, of one of three storages:

- ``parquet``: files under the data root (their globs, their Arrow schema when a stage writes them from Arrow rows)
  read through a DuckDB view over the files that exist;
- ``duckdb``: a table kept inside ``envsim.duckdb`` (its typed columns and its key), created and brought up to date by
  :func:`pipeline.store.warehouse.ensure_table`, and, for one filled from split manifests, where its rows come from;
- ``derived``: a view a stage builds from the others (its SQL is that stage's; a ``family`` is one view per key).

What the table and its table-specific columns mean is in the same declaration. The layout
(:meth:`pipeline.store.layout.DataLayout.table`), the warehouse (views, tables, manifest rows) and the catalog's
comments (:mod:`pipeline.store.catalog`) iterate them. Adding one is a :class:`TableOfRecord` registered in
:data:`TABLES`, here or by a plugin's entry point (docs/extending.md "Add a table").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from pipeline.core.axes import AXES
from pipeline.core.registry import Registry
from pipeline.store import schema
from pipeline.store.kinds import SPLIT_KINDS, split_kind

#: the view over the existing files of a table (``{files}``: one SQL path expression, or a list of them)
READ = "SELECT * FROM read_parquet({files})"
#: the view over files whose columns grew over time (a column an older file lacks is NULL)
READ_UNION = "SELECT * FROM read_parquet({files}, union_by_name = true)"


#: the storages of a table (the module docstring)
PARQUET, DUCKDB, DERIVED = "parquet", "duckdb", "derived"


@dataclass(frozen=True)
class ManifestRows:
    """Where a ``duckdb`` table's rows come from when a split kind keeps them in its versions' manifests: the
    manifest's list ``field`` of row objects, for every version of ``kind``; each row gets the version (the table's
    first column), ``renamed`` columns (column -> the row's key) and ``from_spec`` ones (column -> its path in the
    manifest's ``spec``)."""

    kind: str
    field: str
    renamed: Mapping[str, str] = field(default_factory=dict)
    from_spec: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def rows(self, version: str, manifest: Mapping, columns: Mapping[str, str]) -> list[dict]:
        """A version's rows, one value per column (None where the row has none)."""
        spec_values = {}
        for column, path in self.from_spec.items():
            value = manifest.get("spec", {})
            for key in path:
                value = value.get(key) if isinstance(value, Mapping) else None
            spec_values[column] = value
        version_column = next(iter(columns))
        out = []
        for row in manifest.get(self.field) or []:
            values = {**row, **{c: row.get(k) for c, k in self.renamed.items()}, **spec_values, version_column: version}
            out.append({c: values.get(c) for c in columns})
        return out


@dataclass(frozen=True)
class TableOfRecord:
    """One table of ``envsim.duckdb`` (the module docstring). ``description``: the table comment; ``columns``:
    column -> meaning, where the table's meaning differs from the shared vocabulary's or the word is the table's
    own; ``storage``: ``parquet``, ``duckdb`` or ``derived``.

    A ``parquet`` table: ``files``, its files under the data root (globs; a ``*`` in the first is the part a writer
    names, :meth:`file`); ``view``, the SELECT of its DuckDB view, ``{files}`` standing for the existing files (no
    view while none exists). A ``duckdb`` table: ``sql_columns``, column -> DuckDB type in table order; ``key``, its
    primary key; ``from_manifests``, where its rows come from when split manifests hold them. A ``derived`` view:
    ``family``, one view per key named ``<name>_<key>`` (``eval_by_env``)."""

    name: str
    files: tuple[str, ...]
    description: str
    schema: pa.Schema | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    view: str = READ
    storage: str = PARQUET
    sql_columns: Mapping[str, str] = field(default_factory=dict)
    key: tuple[str, ...] = ()
    from_manifests: ManifestRows | None = None
    family: bool = False

    def file(self, root: Path, part: str | None = None) -> Path:
        """The file of this table under ``root`` (``part`` replaces the ``*`` of its first glob)."""
        pattern = self.files[0]
        return root / (pattern.replace("*", part) if part is not None else pattern)


#: read_json's arguments for the served episode log (JSON lines; the columns the views read, the rest ignored)
_SERVED_READ = (
    "format = 'newline_delimited', columns = {'task_id': 'VARCHAR', 'served_task_id': 'VARCHAR', "
    "'episode_id': 'VARCHAR', 'env': 'STRUCT(env_id VARCHAR)', 'source': 'VARCHAR', 'mode': 'VARCHAR', "
    "'simulator': 'VARCHAR', 'seed': 'BIGINT', 'reward': 'DOUBLE', 'steps': 'STRUCT(step_index INTEGER, "
    "tool VARCHAR, outcome VARCHAR, delta_size INTEGER, reward DOUBLE, fm BOOLEAN, cm BOOLEAN, "
    "drift_before INTEGER, drift INTEGER)[]'}"
)

#: every table of record by name (the project's own below, then the plugins' ``envsim_forge.tables`` entry points)
TABLES: Registry[TableOfRecord] = Registry(
    "table of record", "envsim_forge.tables", check=lambda e: isinstance(e, TableOfRecord)
)


def _step(name: str) -> tuple[str, pa.DataType]:
    """A step-table column a rollout step row restates (its type from the step schema; nullable here)."""
    return name, schema.STEPS.field(name).type


_RESTATED_STEP = ["task_id", "env_id", "source", "adapter", "step_index", "turn", "tool", "arguments_json"]

for _table in (
    TableOfRecord(
        "steps",
        ("steps/part-*.parquet",),
        "One row per executed tool call (the labeled step table of record, data/steps/part-*.parquet): the action, "
        "its observation, outcome, Δ and |Δ|, and content hashes of s_t and s'_t.",
        schema.STEPS,
    ),
    TableOfRecord(
        "trajectories",
        ("trajectories/part-*.parquet", "trajectories/trajectories.parquet"),
        "One row per trajectory: its environment, task, initial state (stored once) and actions.",
        schema.TRAJECTORIES,
    ),
    TableOfRecord(
        "environments",
        ("environments.parquet",),
        "One row per environment of the catalog: its class, license and tools.",
        schema.ENVIRONMENTS,
    ),
    TableOfRecord(
        "strata",
        ("strata/strata.parquet",),
        "One row per labeled step with its strata: outcome, |Δ| bucket, argument cardinality, default benchmark "
        "cell, Balance2 group and why it is excluded from the splits.",
    ),
    TableOfRecord(
        "env_quality",
        ("quality/env_quality.parquet",),
        "One row per environment (the corpus quality gate, data/quality/env_quality.parquet): tools and scenarios "
        "used, steps by outcome, determinism, max |Δ| and the cells it can fill, schema/code mismatches, state "
        "problems, and the executor's verdict with its main problem.",
        pa.schema(
            [
                pa.field("env_id", pa.string(), nullable=False),
                pa.field("source", pa.string()),
                pa.field("verdict", pa.string(), nullable=False),
                pa.field("main_problem", pa.string()),
                pa.field("problems", pa.string()),
                pa.field("tools", pa.int32()),
                pa.field("tools_used", pa.int32()),
                pa.field("scenarios", pa.int32()),
                pa.field("steps", pa.int64()),
                pa.field("success_steps", pa.int64()),
                pa.field("failure_steps", pa.int64()),
                pa.field("error_steps", pa.int64()),
                pa.field("error_share", pa.float64()),
                pa.field("error_tools", pa.string()),
                pa.field("determinism", pa.string()),
                pa.field("quarantine_reason", pa.string()),
                pa.field("max_delta", pa.int32()),
                pa.field("cells", pa.string()),
                pa.field("cells_reached", pa.int32()),
                pa.field("mismatches", pa.int32()),
                pa.field("mismatch_detail", pa.string()),
                pa.field("state_problems", pa.string()),
                pa.field("max_state_bytes", pa.int64()),
                pa.field("input_fingerprint", pa.string()),
            ]
        ),
        {
            "tools": "Tools of the environment in the catalog.",
            "steps": "Labeled steps of the environment.",
            "input_fingerprint": "Fingerprint of the step table the report was computed from.",
        },
    ),
    TableOfRecord(
        "env_tool_quality",
        ("quality/env_tool_quality.parquet",),
        "One row per environment and tool: steps by outcome, the most frequent exception with an example call, and "
        "the arguments the schema and the code disagree on.",
        pa.schema(
            [
                pa.field("env_id", pa.string(), nullable=False),
                pa.field("tool", pa.string(), nullable=False),
                pa.field("in_catalog", pa.bool_()),
                pa.field("steps", pa.int64()),
                pa.field("success_steps", pa.int64()),
                pa.field("failure_steps", pa.int64()),
                pa.field("error_steps", pa.int64()),
                pa.field("error_share", pa.float64()),
                pa.field("top_exception", pa.string()),
                pa.field("top_exception_steps", pa.int64()),
                pa.field("example_step", pa.string()),
                pa.field("example_call", pa.string()),
                pa.field("max_delta", pa.int32()),
                pa.field("schema_only_args", pa.string()),
                pa.field("code_only_args", pa.string()),
                pa.field("mismatch_detail", pa.string()),
                pa.field("input_fingerprint", pa.string()),
            ]
        ),
        {
            "steps": "Labeled steps calling the tool.",
            "max_delta": "Largest |Δ| of the tool's steps.",
            "input_fingerprint": "Fingerprint of the step table the report was computed from.",
        },
    ),
    TableOfRecord(
        "env_yield",
        ("quality/env_yield/*.parquet",),
        "One row per checker and environment (data/quality/env_yield/<checker>.parquet): the checker's agreement "
        "with the executor on the environment's probe set (FM, CM, cm_reference, EnvScaler's pass_acc / "
        "not_fail_acc), its verdict at the threshold, the executor's verdict beside it, and the checker's yield, "
        "tokens and wall time.",
        pa.schema(
            [
                pa.field("checker", pa.string(), nullable=False),
                pa.field("kind", pa.string(), nullable=False),
                pa.field("model", pa.string()),
                pa.field("weights_id", pa.string()),
                pa.field("corpus_fingerprint", pa.string(), nullable=False),
                pa.field("threshold", pa.float64(), nullable=False),
                pa.field("probes_per_env", pa.int32()),
                pa.field("seed", pa.int64()),
                pa.field("env_id", pa.string(), nullable=False),
                *(pa.field(n, pa.int32()) for n in ("probes", "positives", "negatives", "answered")),
                *(pa.field(n, pa.int32()) for n in ("request_failures", "pass_count", "warning_count", "fail_count")),
                *(pa.field(n, pa.float64()) for n in ("fm", "cm", "cm_reference", "pass_acc", "not_fail_acc")),
                pa.field("checker_verdict", pa.string()),
                pa.field("executor_verdict", pa.string()),
                pa.field("executor_problem", pa.string()),
                pa.field("accepted", pa.bool_()),
                pa.field("prompt_tokens", pa.int64()),
                pa.field("completion_tokens", pa.int64()),
                pa.field("checker_yield", pa.float64()),
                pa.field("checker_seconds", pa.float64()),
            ]
        ),
        {
            "kind": "The checker's simulator kind (oracle, no_change, openai, recorded, …).",
            "fm": "Share (0-1) of the answered probes with Feedback Match.",
            "cm": "Share (0-1) of the answered probes with exact Config Match.",
            "cm_reference": "Share (0-1) of the answered probes with CM as the EnvSimBench code computes it.",
            "answered": "Probes the checker answered (request succeeded).",
            "seed": "Seed of the probe draw.",
        },
        READ_UNION,
    ),
    TableOfRecord(
        "rollout_steps",
        ("rollouts/*/steps.parquet",),
        "One row per step of a simulated rollout: the simulator's prediction scored against the executor shadowing "
        "it (FM, CM, drift).",
        pa.schema(
            [
                *((n, pa.string()) for n in ("run_id", "simulator", "model", "agent", "rollout_id")),
                *map(_step, [*_RESTATED_STEP, "outcome", "delta_size"]),
                (AXES["delta"].label, pa.string()),
                ("real_observation", pa.string()),
                ("fm", pa.bool_()),
                ("cm", pa.bool_()),
                ("state_match", pa.bool_()),
                ("drift_before", pa.int32()),
                ("drift", pa.int32()),
                ("diverged_before", pa.bool_()),
                ("predicted_changes", pa.int32()),
                ("parse_ok", pa.bool_()),
                *((n, pa.string()) for n in ("parse_error", "change_error", "feedback_json", "answer")),
                ("latency_s", pa.float64()),
                ("prompt_tokens", pa.int64()),
                ("completion_tokens", pa.int64()),
            ]
        ),
        view=READ_UNION,
    ),
    TableOfRecord(
        "rollouts",
        ("rollouts/*/rollouts.parquet",),
        "One row per simulated rollout: how it ended, its first divergence and drift.",
        pa.schema(
            [
                *((n, pa.string()) for n in ("run_id", "simulator", "model", "agent", "rollout_id", "task_id")),
                *((n, pa.string()) for n in ("env_id", "source", "adapter", "status", "stop_reason")),
                *((n, pa.int32()) for n in ("steps", "parse_failures", "first_divergence", "final_drift")),
                ("max_drift", pa.int32()),
                ("fm_rate", pa.float64()),
                ("cm_rate", pa.float64()),
                ("verified_steps", pa.int32()),
                ("tools_json", pa.string()),
                ("messages_json", pa.string()),
            ]
        ),
        {"steps": "Steps in the rollout.", "status": "How the rollout ended."},
        READ_UNION,
    ),
    TableOfRecord(
        "served_episodes",
        ("served/episodes.jsonl",),
        "One row per served episode (./forge serve-env, the gem.Env and TRL adapters): task, environment, mode, "
        "simulator, seed, final reward and number of steps.",
        columns={
            "task_id": "The served task (an episode's record id is its own: `record_id`).",
            "record_id": "The episode record's unique id (the `task_id` of its `served` trajectory).",
            "episode_id": "The episode id the client gave at reset (default: task/seed).",
            "mode": "How the episode was served: exec, sim or shadow.",
            "reward": "The mean of the task's checks on the real state after the last step (NULL: the task has none).",
        },
        view="SELECT served_task_id AS task_id, task_id AS record_id, episode_id, env.env_id AS env_id, source, "
        f"mode, simulator, seed, reward, len(steps) AS steps FROM read_json({{files}}, {_SERVED_READ})",
    ),
    TableOfRecord(
        "served_steps",
        ("served/episodes.jsonl",),
        "One row per step of a served episode: the call's executor labels, the reward after it and, in shadow mode, "
        "the simulator's FM, CM and drift from the real state.",
        columns={
            "task_id": "The served task.",
            "episode_id": "The episode id the client gave at reset (default: task/seed).",
            "mode": "How the episode was served: exec, sim or shadow.",
            "reward": "The mean of the task's checks on the real state after this step (NULL: the task has none).",
        },
        view="SELECT e.served_task_id AS task_id, e.episode_id, e.env.env_id AS env_id, e.mode, e.simulator, "
        "s.step_index, s.tool, s.outcome, s.delta_size, s.reward, s.fm, s.cm, s.drift_before, s.drift "
        f"FROM read_json({{files}}, {_SERVED_READ}) e, unnest(e.steps) AS t(s)",
    ),
):
    TABLES.register(_table)


def duckdb_table(
    name: str,
    description: str,
    sql_columns: Mapping[str, str],
    key: tuple[str, ...] = (),
    columns: Mapping[str, str] | None = None,
    from_manifests: ManifestRows | None = None,
) -> TableOfRecord:
    """The declaration of a table kept inside ``envsim.duckdb``."""
    return TableOfRecord(
        name,
        (),
        description,
        columns=columns or {},
        storage=DUCKDB,
        sql_columns=dict(sql_columns),
        key=key,
        from_manifests=from_manifests,
    )


def derived_view(
    name: str, description: str, family: bool = False, columns: Mapping[str, str] | None = None
) -> TableOfRecord:
    """The declaration of a view a stage derives from the other tables (``family``: one per key, ``<name>_<key>``)."""
    return TableOfRecord(name, (), description, columns=columns or {}, storage=DERIVED, family=family)


#: ``split_members`` columns taken from a version's ``samples.parquet`` (after kind and version): the sample's
#: place, stratum and ids, and its value on every stored axis; types from the sample schema
MEMBER_COLUMNS = (
    "position",
    "stratum",
    "step_id",
    "trajectory_id",
    "task_id",
    "env_id",
    "tool",
    *AXES.stored_columns,
    "sample_hash",
)

for _table in (
    duckdb_table(
        "split_versions",
        "One row per split version of every kind (benchmark, sft_mixture, curriculum), old versions kept: seed, "
        "input fingerprint, spec, when it was created and by which Dagster run, and its parent.",
        {
            "kind": "VARCHAR",
            "version": "VARCHAR",
            "seed": "BIGINT",
            "input_fingerprint": "VARCHAR",
            "spec_json": "VARCHAR",
            "samples": "INTEGER",
            "shortfalls": "INTEGER",
            "is_current": "BOOLEAN",
            "created_at": "TIMESTAMPTZ",
            "dagster_run_id": "VARCHAR",
            "parent_version": "VARCHAR",
        },
        key=("kind", "version"),
        columns={"samples": "Samples in the version."},
    ),
    duckdb_table(
        "split_members",
        "One row per sample of every split version (kind, version, position): the step it is and its strata.",
        {"kind": "VARCHAR", "version": "VARCHAR", **schema.duck_columns(schema.SAMPLE, MEMBER_COLUMNS)},
        key=("kind", "version", "position"),
    ),
    duckdb_table(
        "eval_results",
        "One row per evaluation run and sample: the simulator's answer and its scores (FM, CM, cm_reference, …), "
        "latency and tokens; `split_version` names the benchmark version scored.",
        {
            "run_id": "VARCHAR",
            "simulator": "VARCHAR",
            "model": "VARCHAR",
            "weights_id": "VARCHAR",
            "base_url": "VARCHAR",
            "split_version": "VARCHAR",
            "prompt": "VARCHAR",
            "step_id": "VARCHAR",
            "stratum": "VARCHAR",
            "env_id": "VARCHAR",
            "tool": "VARCHAR",
            **{a.column: a.sql_type for a in AXES if a.stored},  # the sample's value on every stored axis
            "fm": "BOOLEAN",
            "cm": "BOOLEAN",
            "cm_changed_paths": "BOOLEAN",
            "cm_reference": "BOOLEAN",
            "fm_reference": "BOOLEAN",
            "reference_error": "VARCHAR",
            "parse_ok": "BOOLEAN",
            "parse_error": "VARCHAR",
            "change_error": "VARCHAR",
            "status": "VARCHAR",
            "request_error": "VARCHAR",
            "latency_s": "DOUBLE",
            "prompt_tokens": "BIGINT",
            "completion_tokens": "BIGINT",
            "answer": "VARCHAR",
            "seq": "BIGINT",
        },
        columns={"status": "answered or request_failed."},
    ),
    duckdb_table(
        "bench_model_runs",
        "One row per `./forge bench-model` measurement: the model, its weights, the settings and throughput.",
        {
            "run_id": "VARCHAR",
            "model": "VARCHAR",
            "path": "VARCHAR",
            "weights_id": "VARCHAR",
            "gguf_sha256": "VARCHAR",
            "checkpoint_version": "VARCHAR",
            "template": "VARCHAR",
            "backend": "VARCHAR",
            "dtype": "VARCHAR",
            "split_version": "VARCHAR",
            "per_cell": "INTEGER",
            "samples": "INTEGER",
            "max_tokens": "INTEGER",
            "scored": "INTEGER",
            "resumed": "INTEGER",
            "seconds": "DOUBLE",
            "samples_per_s": "DOUBLE",
            "created_at": "TIMESTAMPTZ",
        },
        columns={
            "samples": "Samples in the benchmark version measured.",
            "run_id": "The evaluation run of the measurement (rows in eval_results).",
            "path": "Filesystem path of the weights measured.",
        },
    ),
    duckdb_table(
        "sft_checkpoints",
        "One row per published SFT checkpoint version: the mixture trained on, base model, settings, loss.",
        {
            "checkpoint_version": "VARCHAR",
            "mixture_version": "VARCHAR",
            "base_model": "VARCHAR",
            "finetuning_type": "VARCHAR",
            "template": "VARCHAR",
            "gpus": "INTEGER",
            "settings_json": "VARCHAR",
            "path": "VARCHAR",
            "train_loss": "DOUBLE",
            "train_runtime_s": "DOUBLE",
            "tokens_seen": "BIGINT",
            "job_id": "VARCHAR",
            "dagster_run_id": "VARCHAR",
            "nodes": "INTEGER",
            "base_model_revision": "VARCHAR",
            "library_versions_json": "VARCHAR",
        },
        columns={"path": "Filesystem path of the published checkpoint."},
    ),
    duckdb_table(
        "sft_checkpoint_steps",
        "One row per intermediate checkpoint of an SFT run: step, loss, path and whether it is still there.",
        {
            "checkpoint_version": "VARCHAR",
            "parent_version": "VARCHAR",
            "mixture_version": "VARCHAR",
            "step": "INTEGER",
            "path": "VARCHAR",
            "present": "BOOLEAN",
            "loss": "DOUBLE",
            "epoch": "DOUBLE",
            "written_at": "TIMESTAMPTZ",
            "job_id": "VARCHAR",
            "dagster_run_id": "VARCHAR",
        },
        columns={"path": "Filesystem path of the intermediate checkpoint."},
    ),
    duckdb_table(
        "eval_job_runs",
        "One row per evaluation job: the checkpoint served, how, on which benchmark version, its job ids.",
        dict.fromkeys(
            (
                "run_id",
                "simulator",
                "served_model",
                "checkpoint_version",
                "checkpoint_path",
                "template",
                "backend",
                "split_version",
                "job_id",
                "dagster_run_id",
                "weights_id",
            ),
            "VARCHAR",
        ),
    ),
    duckdb_table(
        "curriculum_groups",
        "One row per α-curriculum version and group: estimate, weight, candidates, quota and selected.",
        {
            "version": "VARCHAR",
            "run_id": "VARCHAR",
            "grp": "VARCHAR",
            "estimate": "DOUBLE",
            "eval_samples": "INTEGER",
            "eval_successes": "INTEGER",
            "weight": "DOUBLE",
            "candidates": "INTEGER",
            "quota": "INTEGER",
            "selected": "INTEGER",
            "filtered": "VARCHAR",
        },
        from_manifests=ManifestRows(
            "curriculum", "groups", renamed={"grp": "group"}, from_spec={"run_id": ("curriculum", "run_id")}
        ),
    ),
    derived_view(
        "split_diff",
        "Per pair of versions of the same kind (version_a, version_b): each step in one and not the other (change = "
        "'added' in version_b / 'removed' from version_a), with its stratum in the version it is in.",
    ),
    derived_view(
        "eval_results_strata",
        "eval_results with each sample's strata: its cell (`stratum`), benchmark group and |Δ| bucket.",
    ),
    derived_view(
        "eval_runs",
        "One row per evaluation run: samples, answered, request failures and the metrics over the answered samples.",
        columns={"samples": "Samples scored in the run."},
    ),
    derived_view(
        "eval_by",
        "Metrics of each evaluation run broken down by one key (the view's suffix); percent of the answered samples.",
        family=True,
    ),
    derived_view(
        "checkpoint_scores",
        "Scores of every evaluated checkpoint: eval_runs joined to the checkpoint and its mixture.",
    ),
    derived_view(
        "served_reward",
        "Reward of the served episodes by task, environment and mode: episodes, rewarded (with a check), mean / min / "
        "max final reward.",
        columns={"task_id": "The served task.", "mode": "How the episodes were served: exec, sim or shadow."},
    ),
    derived_view(
        "served_drift_by_step",
        "Shadow-mode served steps by simulator and step index: mean and max drift from the real state, FM and CM "
        "rates (0-1).",
    ),
    derived_view(
        "rollout_by", "Rollout step metrics of each run broken down by one key (the view's suffix).", family=True
    ),
):
    TABLES.register(_table)


def table(name: str) -> TableOfRecord:
    """The declaration of table ``name``, or a KeyError naming the known ones."""
    declared_now = declared()
    if name not in declared_now:
        raise KeyError(f"unknown table {name!r}; known: {sorted(declared_now)}")
    return declared_now[name]


def stored(storage: str) -> dict[str, TableOfRecord]:
    """Every declared table of one storage (``parquet``, ``duckdb``, ``derived``) by name."""
    return {name: t for name, t in declared().items() if t.storage == storage}


#: the samples view of a split kind: every version's ``samples.parquet``, ``version`` from its directory
SAMPLES_VIEW = (
    "SELECT regexp_extract(filename, '([^/\\\\]+)[/\\\\]samples\\.parquet$', 1) AS version, * EXCLUDE (filename) "
    "FROM read_parquet({files}, filename = true, union_by_name = true)"
)


def samples_table(kind: str) -> TableOfRecord:
    """The ``<kind>_samples`` table of a split kind (its versions' ``samples.parquet``)."""
    return TableOfRecord(
        f"{kind}_samples",
        (f"splits/{kind}/*/samples.parquet",),
        split_kind(kind).describe_samples(),
        schema.SAMPLE,
        view=SAMPLES_VIEW,
    )


def declared() -> dict[str, TableOfRecord]:
    """Every table of record by name: the registered ones, then one samples table per split kind."""
    return {**dict(TABLES.items()), **{t.name: t for t in map(samples_table, SPLIT_KINDS)}}
