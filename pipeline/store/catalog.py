"""What every table, view and column of ``envsim.duckdb`` means, from which the ``COMMENT ON`` statements are
generated (:func:`describe`): the tables' words are in their declarations (:mod:`pipeline.store.tables`), the
shared column vocabulary here (a column name means the same in every table that has it, docs/definitions.md §5).
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

from pipeline.core.axes import quote
from pipeline.store import tables
from pipeline.store.glossary import Described
from pipeline.store.schema import COLUMN_DOCS

#: column name -> description in every table and view that has it (the step and sample columns: ``COLUMN_DOCS``)
_MEANINGS: dict[str, str] = {
    "call": "The action as a call string.",
    "real_observation": "The executor's observation for the action (rollouts).",
    # strata
    "benchmark_cell": "Default benchmark cell the step is a candidate for",
    "balance2_group": "Balance2 group of the step",
    "benchmark_group": "Benchmark group of the sample (|Δ| beyond the difficult bucket counts as difficult)",
    "grp": "Group: the benchmark group (eval_by_group), or the curriculum group key (curriculum_groups).",
    "excluded": "Whether the step is kept out of every split (error, or non-deterministic on re-execution).",
    "excluded_reason": "Why the step is excluded (error, non-deterministic, "
    "…) or beyond the buckets (|Δ| > 12); NULL otherwise.",
    # trajectories and environments
    "category": "Task category (bfcl: base, long_context, miss_func, miss_param).",
    "strategy": "How the trajectory was produced: ground_truth (a task's replay), explore, agent, replay-messages "
    "(a recorded message history).",
    "fingerprint": "Fingerprint of the environment's code and options.",
    "env_options_json": "Environment options (JSON).",
    "init_config_json": "The task's initial configuration (JSON).",
    "initial_state_json": "Canonical initial state of the trajectory (stored once per trajectory).",
    "initial_state_hash": "Content hash of the initial state.",
    "num_actions": "Number of actions in the trajectory.",
    "actions": "The trajectory's actions (tool, arguments, call).",
    "messages_json": "The full OpenAI message history (agent trajectories and rollouts).",
    "seed": "Seed (of the run's sandbox randomness, of a split's draw, or of the training job).",
    "clock_start": "Start of the trajectory's frozen clock (ISO 8601, UTC).",
    "env_class": "Class implementing the environment.",
    "license": "License of the environment's source.",
    "num_tools": "Number of tools of the environment.",
    "tools": "The environment's tool names.",
    "tools_json": "The tools' OpenAI function schemas (JSON).",
    "class_code_ref": "Reference of the environment class's source code.",
    # split versions
    "kind": "Split kind",
    "version": "Split version id (bench-…, sft-…, cur-…): a hash of seed, input fingerprint and spec.",
    "version_a": "The first version of the pair compared.",
    "version_b": "The second version of the pair compared.",
    "change": "added: in version_b, not in version_a; removed: in version_a, not in version_b.",
    "input_fingerprint": "Fingerprint of the step table the version was selected from.",
    "spec_json": "The version's full spec (seed, input, composition, …) as JSON.",
    "shortfalls": "Number of cells (strata) the version could not fill to their quota.",
    "is_current": "Whether the version is its kind's CURRENT one.",
    "created_at": "When the row's subject was created (split version: first written; bench-model run: measured).",
    "dagster_run_id": "Dagster run that produced the row (NULL outside Dagster or when not known).",
    "parent_version": "Version this one was first derived from: the one current when it was first made current (split "
    "versions; making it current again never rewrites it, so the lineage has no cycle), or the checkpoint "
    "version an intermediate step belongs to (sft_checkpoint_steps); NULL when none.",
    # evaluation
    "run_id": "Run identifier: an evaluation run is <simulator>@<benchmark version>; a rollout run names its own.",
    "simulator": "Simulator name (oracle, no_change, a model endpoint's configured name, …).",
    "model": "Model name the simulator / agent / bench-model run used.",
    "weights_id": "The weights that answered: a checkpoint version or a weights hash; NULL when unknown.",
    "base_url": "OpenAI-compatible endpoint the simulator called.",
    "split_version": "Benchmark version scored.",
    "prompt": "Prompt template the simulator was given.",
    "fm": "Feedback Match: the predicted feedback equals the observation (rates: percent of answered samples).",
    "cm": "Config Match (exact): the predicted changes applied to s_t give s'_t (rates: percent of answered samples).",
    "cm_changed_paths": "CM checked on the truly changed paths only.",
    "cm_reference": "CM as the EnvSimBench evaluation code computes it, quirk for quirk.",
    "fm_reference": "FM as the EnvSimBench evaluation code computes it.",
    "reference_error": "Why the reference metrics could not be computed for the answer.",
    "parse_ok": "Whether the answer parsed.",
    "parse_error": "Why the answer did not parse.",
    "change_error": "Why the predicted changes could not be applied.",
    "status": "answered or request_failed (evaluation); how the rollout ended (rollouts).",
    "request_error": "Why the request failed (the endpoint's failure, not a wrong answer); NULL when answered.",
    "latency_s": "Seconds the request took.",
    "prompt_tokens": "Prompt tokens used.",
    "completion_tokens": "Completion tokens generated.",
    "answer": "The simulator's raw answer.",
    "seq": "Order in which results were written (the latest per step wins).",
    "samples": "Number of samples.",
    "answered": "Samples answered (request succeeded).",
    "request_failed": "Samples whose request failed (left out of every metric).",
    "parse_fail_pct": "Percent of answered samples whose answer did not parse.",
    "mean_latency_s": "Mean request latency of the answered samples (seconds).",
    # bench-model, checkpoints, jobs
    "path": "Filesystem path of the model / checkpoint.",
    "gguf_sha256": "SHA-256 of the GGUF file served.",
    "checkpoint_version": "SFT checkpoint version id.",
    "template": "Chat template of the model.",
    "backend": "Serving backend (vllm, llamafactory, …).",
    "dtype": "Numeric type the weights ran in.",
    "per_cell": "Samples scored per benchmark cell.",
    "max_tokens": "Generation limit per answer.",
    "scored": "Samples scored in this measurement.",
    "resumed": "Samples reused from an earlier, interrupted measurement.",
    "seconds": "Wall-clock seconds of the measurement.",
    "samples_per_s": "Samples scored per second.",
    "mixture_version": "SFT mixture version trained on.",
    "base_model": "Base model fine-tuned.",
    "finetuning_type": "full or lora.",
    "gpus": "GPUs the job used.",
    "nodes": "Nodes the job used.",
    "settings_json": "Training settings (JSON).",
    "train_loss": "Final training loss.",
    "train_runtime_s": "Training wall-clock seconds.",
    "tokens_seen": "Input tokens seen in training.",
    "job_id": "Launcher job id (local process or Slurm job).",
    "base_model_revision": "Revision of the base model.",
    "library_versions_json": "Library versions of the training job (JSON).",
    "step": "Training step of the checkpoint.",
    "present": "Whether the checkpoint is still on disk (not rotated away).",
    "loss": "Training loss at the step.",
    "epoch": "Training epoch at the step.",
    "written_at": "When the checkpoint was written.",
    "served_model": "Model name the checkpoint was served under.",
    "checkpoint_path": "Path of the checkpoint served.",
    # curriculum
    "estimate": "Smoothed success estimate p̂ of the group.",
    "eval_samples": "Evaluation samples behind the estimate.",
    "eval_successes": "Successes among them.",
    "weight": "The group's weight from the curve.",
    "filtered": "Why the difficulty filter dropped the group (NULL when kept).",
    "candidates": "Training candidates in the group.",
    "quota": "Samples allotted to the group.",
    "selected": "Samples picked for the group.",
    # rollouts
    "agent": "Agent that acted in the rollout.",
    "rollout_id": "Rollout identifier.",
    "state_match": "Whether the simulated state equals the real state after the step.",
    "drift_before": "|diff(simulated state, real state)| before the step.",
    "drift": "|diff(simulated state, real state)| after the step.",
    "diverged_before": "Whether the rollout had diverged before the step.",
    "predicted_changes": "Number of changes the simulator predicted.",
    "feedback_json": "The simulator's predicted feedback (JSON).",
    "stop_reason": "Why the rollout stopped.",
    "steps": "Number of steps.",
    "parse_failures": "Answers that did not parse.",
    "first_divergence": "Step index of the first divergence (NULL when none).",
    "final_drift": "Drift at the end of the rollout.",
    "max_drift": "Largest drift in the rollout.",
    "fm_rate": "Share of steps with FM.",
    "cm_rate": "Share of steps with CM.",
    "verified_steps": "Steps of the executor-verified prefix.",
    "rollouts": "Number of rollouts.",
    "mean_drift": "Mean drift per step.",
    "diverged_pct": "Percent of steps taken after a divergence.",
    # served episodes
    "episodes": "Number of served episodes.",
    "rewarded": "Episodes whose task has checks (a reward that is not NULL).",
    "mean_reward": "Mean final reward of the episodes with one.",
    "min_reward": "Lowest final reward.",
    "max_reward": "Highest final reward.",
    # the corpus quality gate
    "verdict": "The executor's verdict on the environment: pass, fail, or untested (in the catalog, no step) "
    '(docs/evaluation.md "The corpus quality gate").',
    "main_problem": "The first problem of a failing environment (NULL when it passes); of an untested one, why "
    "(naming the composite environments its code ran in).",
    "problems": "Every problem of a failing environment, in priority order, separated by '; '.",
    "tools_used": "Distinct tools called in the environment's steps.",
    "scenarios": "Distinct scenarios (tasks) the environment's steps ran.",
    "success_steps": "Steps labeled success.",
    "failure_steps": "Steps labeled failure.",
    "error_steps": "Steps labeled error (the call raised).",
    "error_share": "Share (0-1) of the steps labeled error.",
    "error_tools": "Tools with error steps and their counts, most first.",
    "determinism": "deterministic (checked), unchecked, non-deterministic, quarantined (Δ does not verify) or "
    "untested (no steps of its own: nothing of it was re-executed).",
    "quarantine_reason": "Why the environment is non-deterministic or quarantined (NULL otherwise).",
    "max_delta": "Largest |Δ| of the steps.",
    "cells": "Benchmark cells of the composition in force its steps can fill (comma-separated).",
    "cells_reached": "Number of those cells.",
    "mismatches": "Schema/code mismatches: arguments the schema declares that the code rejects, and the reverse.",
    "mismatch_detail": "The mismatches, per tool.",
    "state_problems": "Values that are not plain JSON in its states, an oversized initial state (NULL when none).",
    "max_state_bytes": "Size of the largest initial state (canonical JSON, bytes).",
    "in_catalog": "Whether the tool is in the catalog (false: its schema was dropped at load, see mismatch_detail).",
    "top_exception": "The most frequent exception of the tool's error steps (type: message).",
    "top_exception_steps": "Steps that raised it.",
    "example_step": "One step that raised it.",
    "example_call": "That step's call.",
    "schema_only_args": "Arguments the schema declares that the code rejects.",
    "code_only_args": "Arguments the code requires that the schema does not declare.",
    "checker": "The checker (a simulator: its name, with its weights id when known).",
    "corpus_fingerprint": "Fingerprint of the step table the probes were drawn from.",
    "threshold": "pass_acc an environment needs to pass the checker.",
    "probes_per_env": "Probe calls drawn per environment.",
    "probes": "Probe calls of the environment.",
    "positives": "Probes whose call succeeded (EnvScaler's positive cases).",
    "negatives": "Probes whose call failed or raised (negative cases).",
    "request_failures": "Probes whose request failed (in no denominator).",
    "pass_count": "Probes the checker got right on observation and state (FM and CM): EnvScaler's pass.",
    "warning_count": "Probes right on one of observation and state: EnvScaler's warning.",
    "fail_count": "Probes right on neither: EnvScaler's fail.",
    "pass_acc": "EnvScaler's pass_acc: pass / answered probes.",
    "not_fail_acc": "EnvScaler's not_fail_acc: (pass + warning) / answered probes.",
    "checker_verdict": "pass when pass_acc reaches the threshold, else fail (NULL: no probe answered).",
    "executor_verdict": "The executor's verdict (env_quality.verdict), never mixed into the checker's score.",
    "executor_problem": "The executor's main problem (env_quality.main_problem).",
    "accepted": "Whether the environment passes both the checker and the executor (the accepted corpus).",
    "checker_yield": "Share (0-1) of the environments that pass the checker.",
    "checker_seconds": "Wall-clock seconds the checker took on the probe sets.",
}
COLUMNS: Described = Described({**_MEANINGS, **COLUMN_DOCS.meanings})


def table_description(name: str) -> str | None:
    """The description of table / view ``name`` from its declaration (a family's view: the family's, with the key)."""
    declared = tables.declared()
    if name in declared:
        return declared[name].description
    for family in (t for t in declared.values() if t.family):
        if name.startswith(family.name + "_"):
            return f"{family.description} Key: {name[len(family.name) + 1 :]}."
    return None


def column_description(table: str, column: str, declared: dict[str, tables.TableOfRecord] | None = None) -> str | None:
    """What ``column`` means in ``table``: the table's own word (``declared``: the declarations, read once by a
    caller), else the shared vocabulary's."""
    own_table = (declared if declared is not None else tables.declared()).get(table)
    own = own_table.columns.get(column) if own_table is not None else None
    return own or COLUMNS.get(column)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def describe(con: duckdb.DuckDBPyConnection) -> list[str]:
    """``COMMENT ON`` every user table, view and column of ``con`` (temporary ones included) where the comment
    differs; returns what has no description."""
    missing: list[str] = []
    readonly = read_only(con)
    declared = tables.declared()
    objects = con.execute(
        """SELECT database_name, schema_name, table_name, 'TABLE', comment FROM duckdb_tables()
           WHERE NOT internal AND NOT temporary
           UNION ALL SELECT database_name, schema_name, view_name, 'VIEW', comment FROM duckdb_views()
           WHERE NOT internal
           AND schema_name NOT IN ('information_schema', 'pg_catalog')"""
    ).fetchall()
    columns: dict[tuple[str, str, str], list[tuple[str, str | None]]] = {}
    for database, schema, name, column, col_comment in con.execute(
        "SELECT database_name, schema_name, table_name, column_name, comment FROM duckdb_columns() "
        "WHERE NOT internal ORDER BY column_index"
    ).fetchall():  # one scan for every object: a scan per object costs O(objects²) on a root with many views
        columns.setdefault((database, schema, name), []).append((column, col_comment))
    for database, schema, name, kind, current in objects:
        if readonly and database != "temp":
            continue
        qualified = ".".join(_ident(p) for p in (database, schema, name))
        text = table_description(name)
        if text is None:
            missing.append(name)
        elif text != current:
            con.execute(f"COMMENT ON {kind} {qualified} IS {quote(text)}")
        for column, col_comment in columns.get((database, schema, name), []):
            text = column_description(name, column, declared)
            if text is None:
                missing.append(f"{name}.{column}")
            elif text != col_comment:
                con.execute(f"COMMENT ON COLUMN {qualified}.{_ident(column)} IS {quote(text)}")
    return missing


def read_only(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con`` is a read-only connection."""
    try:
        return bool(con.execute("SELECT current_setting('access_mode') = 'read_only'").fetchone()[0])
    except duckdb.Error:
        return False


def undocumented(con: duckdb.DuckDBPyConnection) -> Iterable[str]:
    """Every user table, view and column of ``con`` without a comment (``table`` / ``table.column``)."""
    rows = con.execute(
        """SELECT table_name FROM duckdb_tables() WHERE NOT internal AND comment IS NULL
           UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal AND comment IS NULL
             AND schema_name NOT IN ('information_schema', 'pg_catalog')
           UNION ALL SELECT c.table_name || '.' || c.column_name FROM duckdb_columns() c
             WHERE NOT c.internal AND c.comment IS NULL AND c.schema_name NOT IN ('information_schema', 'pg_catalog')"""
    ).fetchall()
    return sorted(r[0] for r in rows)
