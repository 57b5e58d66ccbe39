"""Every table of ``envsim.duckdb``, each one declaration (with what it and its own columns mean) of one of three
storages: ``parquet`` (files under the data root, read through a DuckDB view over the files that exist),
``duckdb`` (a table inside ``envsim.duckdb``, maybe filled from split manifests) or ``derived`` (a view a stage
builds from the others). The layout, the warehouse and the catalog iterate them; adding one is a
:class:`TableOfRecord` registered in :data:`TABLES`, here or by a plugin (docs/extending.md "Add a table").
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
    """A ``duckdb`` table's rows from the manifests of ``kind``'s versions: the list ``field``; each row gets the
    version (first column), ``renamed`` columns (column -> row key) and ``from_spec`` ones (column -> spec path)."""

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
    """One table of ``envsim.duckdb``: ``description``, its comment; ``columns``, column -> meaning where it is the
    table's own word. ``parquet``: ``files`` (globs; the first one's ``*`` is the part a writer names) and ``view``
    (``{files}``: the existing files). ``duckdb``: ``sql_columns`` (in table order), ``key`` and
    ``from_manifests``. ``derived``: ``family``, one view per key named ``<name>_<key>`` (``eval_by_env``)."""

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


#: ``split_members`` columns taken from a version's ``samples.parquet`` (after kind and version)
MEMBER_COLUMNS = (
    *("position", "stratum", "step_id", "trajectory_id", "task_id", "env_id", "tool"),
    *AXES.stored_columns,
    "sample_hash",
)

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
                *schema.fields_of(pa.string(), "main_problem", "problems"),
                *schema.fields_of(pa.int32(), "tools", "tools_used", "scenarios"),
                *schema.fields_of(pa.int64(), "steps", "success_steps", "failure_steps", "error_steps"),
                pa.field("error_share", pa.float64()),
                *schema.fields_of(pa.string(), "error_tools", "determinism", "quarantine_reason"),
                pa.field("max_delta", pa.int32()),
                pa.field("cells", pa.string()),
                *schema.fields_of(pa.int32(), "cells_reached", "mismatches"),
                *schema.fields_of(pa.string(), "mismatch_detail", "state_problems"),
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
                *schema.fields_of(pa.int64(), "steps", "success_steps", "failure_steps", "error_steps"),
                pa.field("error_share", pa.float64()),
                pa.field("top_exception", pa.string()),
                pa.field("top_exception_steps", pa.int64()),
                *schema.fields_of(pa.string(), "example_step", "example_call"),
                pa.field("max_delta", pa.int32()),
                *schema.fields_of(
                    pa.string(), "schema_only_args", "code_only_args", "mismatch_detail", "input_fingerprint"
                ),
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
                *schema.fields_of(pa.string(), "model", "weights_id"),
                pa.field("corpus_fingerprint", pa.string(), nullable=False),
                pa.field("threshold", pa.float64(), nullable=False),
                pa.field("probes_per_env", pa.int32()),
                pa.field("seed", pa.int64()),
                pa.field("env_id", pa.string(), nullable=False),
                *schema.fields_of(pa.int32(), "probes", "positives", "negatives", "answered"),
                *schema.fields_of(pa.int32(), "request_failures", "pass_count", "warning_count", "fail_count"),
                *schema.fields_of(pa.float64(), "fm", "cm", "cm_reference", "pass_acc", "not_fail_acc"),
                *schema.fields_of(pa.string(), "checker_verdict", "executor_verdict", "executor_problem"),
                pa.field("accepted", pa.bool_()),
                *schema.fields_of(pa.int64(), "prompt_tokens", "completion_tokens"),
                *schema.fields_of(pa.float64(), "checker_yield", "checker_seconds"),
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
                *schema.fields_of(pa.bool_(), "fm", "cm", "state_match"),
                *schema.fields_of(pa.int32(), "drift_before", "drift"),
                ("diverged_before", pa.bool_()),
                ("predicted_changes", pa.int32()),
                ("parse_ok", pa.bool_()),
                *schema.fields_of(pa.string(), "parse_error", "change_error", "feedback_json", "answer"),
                ("latency_s", pa.float64()),
                *schema.fields_of(pa.int64(), "prompt_tokens", "completion_tokens"),
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
                *schema.fields_of(pa.string(), "run_id", "simulator", "model", "agent", "rollout_id", "task_id"),
                *schema.fields_of(pa.string(), "env_id", "source", "adapter", "status", "stop_reason"),
                *schema.fields_of(
                    pa.int32(), "steps", "parse_failures", "first_divergence", "final_drift", "max_drift"
                ),
                *schema.fields_of(pa.float64(), "fm_rate", "cm_rate"),
                ("verified_steps", pa.int32()),
                *schema.fields_of(pa.string(), "tools_json", "messages_json"),
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
    duckdb_table(
        "split_versions",
        "One row per split version of every kind (benchmark, sft_mixture, curriculum), old versions kept: seed, "
        "input fingerprint, spec, when it was created and by which Dagster run, and its parent.",
        {
            **dict.fromkeys(("kind", "version"), "VARCHAR"),
            "seed": "BIGINT",
            **dict.fromkeys(("input_fingerprint", "spec_json"), "VARCHAR"),
            **dict.fromkeys(("samples", "shortfalls"), "INTEGER"),
            "is_current": "BOOLEAN",
            "created_at": "TIMESTAMPTZ",
            **dict.fromkeys(("dagster_run_id", "parent_version"), "VARCHAR"),
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
            **dict.fromkeys(("run_id", "simulator", "model", "weights_id", "base_url", "split_version"), "VARCHAR"),
            **dict.fromkeys(("prompt", "step_id", "stratum", "env_id", "tool"), "VARCHAR"),
            **{a.column: a.sql_type for a in AXES if a.stored},  # the sample's value on every stored axis
            **dict.fromkeys(("fm", "cm", "cm_changed_paths", "cm_reference", "fm_reference"), "BOOLEAN"),
            "reference_error": "VARCHAR",
            "parse_ok": "BOOLEAN",
            **dict.fromkeys(("parse_error", "change_error", "status", "request_error"), "VARCHAR"),
            "latency_s": "DOUBLE",
            **dict.fromkeys(("prompt_tokens", "completion_tokens"), "BIGINT"),
            "answer": "VARCHAR",
            "seq": "BIGINT",
        },
        columns={"status": "answered or request_failed."},
    ),
    duckdb_table(
        "bench_model_runs",
        "One row per `./forge bench-model` measurement: the model, its weights, the settings and throughput.",
        {
            **dict.fromkeys(("run_id", "model", "path", "weights_id", "gguf_sha256", "checkpoint_version"), "VARCHAR"),
            **dict.fromkeys(("template", "backend", "dtype", "split_version"), "VARCHAR"),
            **dict.fromkeys(("per_cell", "samples", "max_tokens", "scored", "resumed"), "INTEGER"),
            **dict.fromkeys(("seconds", "samples_per_s"), "DOUBLE"),
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
            **dict.fromkeys(("checkpoint_version", "mixture_version", "base_model", "finetuning_type"), "VARCHAR"),
            "template": "VARCHAR",
            "gpus": "INTEGER",
            **dict.fromkeys(("settings_json", "path"), "VARCHAR"),
            **dict.fromkeys(("train_loss", "train_runtime_s"), "DOUBLE"),
            "tokens_seen": "BIGINT",
            **dict.fromkeys(("job_id", "dagster_run_id"), "VARCHAR"),
            "nodes": "INTEGER",
            **dict.fromkeys(("base_model_revision", "library_versions_json"), "VARCHAR"),
        },
        columns={"path": "Filesystem path of the published checkpoint."},
    ),
    duckdb_table(
        "sft_checkpoint_steps",
        "One row per intermediate checkpoint of an SFT run: step, loss, path and whether it is still there.",
        {
            **dict.fromkeys(("checkpoint_version", "parent_version", "mixture_version"), "VARCHAR"),
            "step": "INTEGER",
            "path": "VARCHAR",
            "present": "BOOLEAN",
            **dict.fromkeys(("loss", "epoch"), "DOUBLE"),
            "written_at": "TIMESTAMPTZ",
            **dict.fromkeys(("job_id", "dagster_run_id"), "VARCHAR"),
        },
        columns={"path": "Filesystem path of the intermediate checkpoint."},
    ),
    duckdb_table(
        "eval_job_runs",
        "One row per evaluation job: the checkpoint served, how, on which benchmark version, its job ids.",
        dict.fromkeys(
            ("run_id", "simulator", "served_model", "checkpoint_version", "checkpoint_path", "template", "backend")
            + ("split_version", "job_id", "dagster_run_id", "weights_id"),
            "VARCHAR",
        ),
    ),
    duckdb_table(
        "curriculum_groups",
        "One row per α-curriculum version and group: estimate, weight, candidates, quota and selected.",
        {
            **dict.fromkeys(("version", "run_id", "grp"), "VARCHAR"),
            "estimate": "DOUBLE",
            **dict.fromkeys(("eval_samples", "eval_successes"), "INTEGER"),
            "weight": "DOUBLE",
            **dict.fromkeys(("candidates", "quota", "selected"), "INTEGER"),
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
        "checkpoint_scores", "Scores of every evaluated checkpoint: eval_runs joined to the checkpoint and its mixture."
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
