"""The test loop under pytest-xdist ([tool.pytest.ini_options] in pyproject.toml, docs/commands.md "Tests"): what
tests/conftest.py's hooks and session fixtures call so that each expensive set-up is made once, and each worker
keeps its temporary files to itself."""

from __future__ import annotations

import concurrent.futures
import fcntl
import json
import multiprocessing
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _pytest.assertion import rewrite as assert_rewrite

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... in an xdist worker; "" in a plain run
SLOW_TIMEOUT_S = 1800  # a test marked slow may take this long, set-up included; the others: `timeout` in pyproject


def run_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every process of this run shares: the base temporary directory, or under xdist the one above
    each worker's own (popen-gwN)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if WORKER else base


def built_once(shared: Path, name: str, build: Callable[[Path], None]) -> Path:
    """``shared / name``, made by ``build`` once for every process that asks for it in ``shared`` (the first one
    builds, the others wait on a file lock and reuse it); treat it as read-only."""
    target, done = shared / name, shared / f"{name}.done"
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            build(target)
            done.touch()
    return target


def worker_temp_dir(basetemp: str | None) -> None:
    """An xdist worker's own temporary directory (``TMPDIR``), beside its base directory popen-gwN (which pytest
    empties when it first hands out ``tmp_path``): a test that checks what is left in the temporary directory, or
    DuckDB's spill directory under it, sees only its own worker's files."""
    if not WORKER or not basetemp:
        return
    own = Path(basetemp).parent / f"tmp-{WORKER}"
    own.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(own)
    tempfile.tempdir = None  # re-read from TMPDIR


def share_rewritten_tests(config: pytest.Config) -> None:
    """Each test module's assert-rewritten code is made once per run, not once per xdist worker. pytest rewrites
    every test module it imports (about 5 s of CPU for this tree) and caches the result beside the module, except
    when bytecode writing is off (``PYTHONDONTWRITEBYTECODE``): then every worker rewrote the whole tree again. The
    cache is moved outside the tree, to :data:`REWRITE_CACHE` (pytest checks each entry against its source's hash,
    so a stale one is rewritten), and under xdist the controller fills it with every CPU before the workers
    start."""
    assert_rewrite.get_cache_dir = lambda file_path: REWRITE_CACHE.joinpath(*Path(file_path).parts[1:-1])
    if WORKER or not getattr(config.option, "numprocesses", None) or config.option.assertmode != "rewrite":
        return
    stale = [fn for fn in _test_modules(config) if _cached(fn) is None]
    if stale:
        global _CONFIG
        _CONFIG = config  # the forked processes rewrite with the controller's options
        fork = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(min(len(stale), os.cpu_count() or 1), mp_context=fork) as pool:
            list(pool.map(_rewrite_one, stale))


#: where :func:`share_rewritten_tests` keeps the rewritten test modules: one directory per user, made when the
#: controller imports this module (an xdist worker inherits its ``TMPDIR``); the paths inside mirror the modules' own,
#: so two checkouts never share an entry
REWRITE_CACHE = Path(tempfile.gettempdir()) / f"envsim-forge-rewritten-tests-{os.getuid()}"


def _test_modules(config: pytest.Config) -> list[Path]:
    """The modules pytest rewrites under ``tests/``: those its ``python_files`` patterns name, and the conftests."""
    tests = config.rootpath / "tests"
    patterns = [*config.getini("python_files"), "conftest.py"]
    return sorted({path for pattern in patterns for path in tests.rglob(pattern)})


def _pyc(fn: Path) -> Path:
    return assert_rewrite.get_cache_dir(fn) / (fn.name[:-3] + assert_rewrite.PYC_TAIL)


def _cached(fn: Path) -> Any:
    return assert_rewrite._read_pyc(fn, _pyc(fn))


_CONFIG: pytest.Config | None = None


def _rewrite_one(fn: Path) -> None:
    config = _CONFIG
    assert config is not None
    pyc = _pyc(fn)
    pyc.parent.mkdir(parents=True, exist_ok=True)
    try:
        source_hash, code = assert_rewrite._rewrite_test(fn, config)
    except SyntaxError:
        return  # the worker that imports it reports the error, as pytest does
    assert_rewrite._write_pyc(config.stash[assert_rewrite.assertstate_key], code, source_hash, pyc)


def auto_workers(cpus: int) -> int:
    """How many xdist workers ``-n auto`` starts: one more than the CPUs. The whole suite keeps 2 CPUs busy only
    about half the time with one worker each (12 min of CPU in 12.7 min of wall time, 2026-11-26): its end-to-end
    tests wait on servers, daemons, Slurm and Celery, and the extra worker runs tests meanwhile."""
    return max(1, cpus) + 1


def worker_threads() -> None:
    """Under xdist, the processes a worker starts (a served model, a training job, a conversion: torch's OpenMP
    pool) use that worker's share of the CPUs (``OMP_NUM_THREADS``, unless set): two workers' 2-thread pools on 2
    CPUs spin-wait for each other (a SmolLM2 request on a loaded machine, 2 threads vs 1: 13-23 s of CPU vs 5 s,
    15-81 s of wall time vs 5-10 s). A plain run leaves the thread count to the libraries."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if WORKER and workers:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


# End-to-end tests kept out of the fast subset (`-m "not slow"`), marked slow here rather than in their files: node
# id prefixes, each with what it runs and its time in a loaded 2-worker run of the fast subset (2026-11-26). The full
# suite (.ci/run) runs them all.
SLOW = {
    "tests/e2e/test_cli_errors.py::": "./forge's commands as subprocesses (86 s for the file)",
    "tests/execution/test_attack_corpus.py::": (
        "the attack corpus, one sandbox run each (~90 s), and its nondeterminism family labeled twice (14 s)"
    ),
    "tests/select/test_selection.py::test_step_table_suite_names_failed_expectations_and_rows": (
        "great-expectations (23 s)"
    ),
    "tests/envsimbench/test_envsimbench.py::test_import_evaluate_oracle_and_no_change": "Dagster import + eval (22 s)",
    "tests/envsimbench/test_envsimbench.py::test_imported_version_through_the_assets": "Dagster materialisation (15 s)",
    "tests/execution/test_reuse.py::test_every_bfcl_trajectory_labels_the_same_in_": "all 800 bfcl tasks twice (18 s)",
    "tests/collect/test_explore_adapts.py::test_a_corpus_that_never_passes_delta_3_": "an exploration run (16 s)",
    "tests/collect/test_explore_adapts.py::test_same_seed_same_trajectories": "three exploration runs (11 s)",
    "tests/core/test_delta.py::test_replayed_states_serialise_like_canonical_json": "replays every bfcl state (12 s)",
    "tests/project/test_test_loop.py::test_with_the_projects_options_": "a pytest-xdist run in a subprocess (11 s)",
    "tests/assets/test_assets.py::test_materialize_reports_bad_input_in_metadata_and_checks_pass": "Dagster run (11 s)",
    "tests/collect/test_honest_sources.py::test_forge_run_stops_before_anything_on_a_missing_corpus": (
        "./forge run (9 s)"
    ),
    # added 2026-11-26 (second session), times from a quiet 3-worker run of the fast subset
    "tests/core/test_registry.py::test_a_plugin_package_runs_through_the_dag": (
        "a plugin package built and installed, then the DAG through bwrap (12 s)"
    ),
    "tests/evaluate/test_bad_endpoint.py::test_failing_endpoint_fails_the_asset_and_a_fixed_rerun_resumes": (
        "two Dagster runs against a failing endpoint (9 s)"
    ),
    "tests/training/test_jobs.py::test_eval_job_caches_a_served_checkpoint_by_its_weights_not_its_name": (
        "evaluation jobs serving three checkpoints (7 s)"
    ),
    "tests/envs/test_toy_source.py::test_the_toy_source_runs_through_the_dagster_assets": "a Dagster run (5 s)",
    "tests/assets/test_export_locations.py::test_training_and_the_summary_read_the_export_where_it_went": (
        "Dagster runs of the export and training (5 s)"
    ),
    # the heaviest tests of the fast subset, each with its CPU time in a one-process run of it
    # (`-n 0`, read from the machine's CPU counters, so the sandbox's processes count too)
    "tests/labeling/test_determinism_check.py::": "the determinism check re-executing sandboxed runs (12 s)",
    "tests/training/test_jobs.py::test_eval_job_reports_through_pipes_and_lands_in_duckdb": "an eval job (3 s)",
    "tests/training/test_jobs.py::test_training_on_the_published_envsimbench_format": "a training job (3 s)",
    "tests/training/test_jobs.py::test_local_job_of_a_terminated_run_is_ended_with_its_process_group": (
        "a training job stopped mid-run (2 s)"
    ),
    "tests/training/test_jobs.py::test_training_resumes_and_registers_every_checkpoint": "two training jobs (2 s)",
    "tests/training/test_jobs.py::test_multi_gpu_training_is_validated_with_its_zero3_file": "a training job (2 s)",
    "tests/training/test_jobs.py::test_training_job_gets_the_shared_hub_cache_offline": "a training job (2 s)",
    "tests/execution/test_sandbox.py::test_a_reset_that_hangs_or_raises_is_an_init_error": "a 3 s timeout (4 s)",
    "tests/execution/test_sandbox.py::test_misbehaviour_is_an_error_step_and_the_trajectory_goes_on[hang-": (
        "a 3 s timeout (4 s)"
    ),
    "tests/execution/test_sandbox.py::test_runaway_bfcl_square_root_is_cut_at_the_timeout": "a 3 s timeout (3 s)",
    "tests/serve/test_serve.py::test_a_hang_or_crash_ends_only_its_own_session": "a session's timeout (2 s)",
    "tests/serve/test_serve.py::test_a_served_hang_or_crash_ends_only_its_own_episode_": "an episode's timeout (2 s)",
    "tests/assets/test_partitions.py::": "partitioned runs and replays through the assets (7 s for the fast tests)",
    "tests/envs/test_outcome_rule.py::": "two corpora collected and labeled four times (5 s)",
    "tests/collect/test_collection_reuse.py::test_an_unchanged_collection_is_reused_": "two collections (3 s)",
    "tests/collect/test_collection_reuse.py::test_each_partition_is_reused_on_its_own": "partitioned collections (2 s)",
    "tests/collect/test_collection_reuse.py::test_the_trajectories_asset_reports_reuse_": "Dagster runs (1 s)",
    "tests/assets/test_shortfall_check.py::test_by_default_a_short_benchmark_warns_": (
        "the split assets and the summary on the 800-task replay (4 s)"
    ),
    "tests/assets/test_shortfall_check.py::test_on_shortfall_fail_fails_the_benchmark_": "the split assets (1 s)",
    "tests/execution/test_benign_classes.py::test_benign_corpus_is_collected_labeled_and_not_quarantined": (
        "a corpus collected, labeled and re-executed by the determinism check (3 s)"
    ),
    "tests/core/test_settings.py::test_importing_pipeline_has_no_side_effect_and_the_entry_points_": (
        "two Python processes importing the package and the definitions (3 s)"
    ),
    "tests/store/test_sql_schema.py::test_forge_sql_": "./forge sql as a subprocess (2 s each)",
    "tests/project/test_no_leftover_processes.py::": "a pytest session in a subprocess (4 s, 9 s of wall time)",
    "tests/collect/test_explore_adapts.py::test_a_rarely_chosen_tool_": "an exploration run of 4,000 calls (4 s)",
    "tests/assets/test_exploration_metadata.py::": "a Dagster run of an exploration (3 s)",
    "tests/project/test_synth_corpus.py::": "a synthetic corpus made three times, on one and two workers (4 s)",
    "tests/select/test_selection.py::test_great_expectations_loads_without_scipy_stats_": (
        "a fresh Python process importing great-expectations (4 s)"
    ),
    "tests/assets/test_launch.py::test_regenerate_runs_the_schedules_job_now_": "two runs of regenerate_splits (3 s)",
    "tests/store/test_layout.py::test_processes_recording_exports_together_": "processes writing at once (3 s)",
    # the heaviest of the rest (2026-12-01), each with its time in a one-process run on a quiet machine
    "tests/select/test_selection.py::test_assets_checks_schedule_and_sensor": "Dagster runs of the split assets (5 s)",
    "tests/execution/test_isolation.py::test_a_stopped_worker_is_detected_and_replaced": "a worker stopped (4 s)",
    "tests/evaluate/test_evaluate.py::test_eval_asset_oracle_and_no_change": "a Dagster run of the eval asset (3 s)",
    "tests/collect/test_explore_adapts.py::test_a_reused_collection_reports_": "two exploration runs (3 s)",
    "tests/rollouts/test_rollouts.py::test_assets_materialize_with_metadata_": "a Dagster run of the rollouts (2 s)",
    "tests/rollouts/test_rollouts.py::test_a_resumed_run_asks_nothing_twice": "two rollout runs (2 s)",
    "tests/select/test_decontamination.py::test_explored_corpus_by_task_id_": "an exploration and two splits (2 s)",
    "tests/assets/test_launch.py::test_a_run_builds_the_definitions_once_": "a launched Dagster run (2 s)",
    "tests/envs/test_hub_corpus.py::test_hub_corpus_runs_twice_identically": "a corpus collected twice (2 s)",
    "tests/evaluate/test_late_kind.py::": "a Dagster run of a late-registered kind (2 s)",
    "tests/collect/test_agent.py::test_agent_policy_from_the_asset_config": "a Dagster run of an agent policy (2 s)",
    "tests/select/test_selection.py::test_a_custom_composition_reaches_": "Dagster runs of a custom composition (2 s)",
    "tests/store/test_sql_schema.py::test_a_plain_client_answers_every_view_": "views opened from three roots (2 s)",
    "tests/evaluate/test_evaluate.py::test_results_are_cached_by_weights_": "scoring runs of three checkpoints (2 s)",
    "tests/evaluate/test_evaluate.py::test_timeouts_are_counted_and_retried_on_rerun": "a 1 s timeout, twice (2 s)",
    "tests/evaluate/test_evaluate.py::test_resume_after_a_kill_redoes_no_finished_sample": "a killed scorer (1 s)",
    "tests/execution/test_boundary.py::test_a_poisoned_trajectory_cannot_change_": "sandbox runs, three kinds (4 s)",
    "tests/execution/test_zygote_module.py::test_an_environment_with_many_trajectories_": "a sandbox run (2 s)",
    "tests/core/test_delta.py::test_apply_diff_reproduces_target": "100 generated pairs of states (2 s)",
    "tests/core/test_strata_rules.py::test_python_and_sql_agree_property": "60 generated DuckDB queries (1 s)",
    "tests/select/test_selection.py::test_step_table_suite_validates_whole_chunks_": "great-expectations (2 s)",
    "tests/export/test_export.py::test_loading_an_export_back_draws_no_progress_bar": "an export loaded (1 s)",
    "tests/export/test_export.py::test_export_assets_push_and_check": "a Dagster run of the exports (1 s)",
    "tests/serve/test_serve.py::test_a_session_outlives_the_thread_that_opened_it": "a served session (1 s)",
    "tests/project/test_dependencies.py::test_every_imported_distribution_is_declared": "every import scanned (1 s)",
    "tests/core/test_toy_axis.py::test_the_toy_axis_is_a_quality_expectation": "a Dagster run (1 s)",
    "tests/training/test_bench_model.py::test_the_command_says_it_in_one_line_": "./forge bench-model (1 s)",
    "tests/select/test_decontamination.py::test_stricter_options_remove_what_they_name": "four splits (3 s)",
    "tests/assets/test_data_root_history.py::test_the_timings_of_forge_run_never_show_": "two launched runs (2 s)",
    "tests/select/test_selection_tools.py::test_one_environment_spreads_its_picks_": "a generated split (2 s)",
    "tests/store/test_step_schema.py::test_replay_rebuilds_every_state_and_a_subset_alike": "two replays (1 s)",
    "tests/select/test_selection.py::test_shortfalls_are_reported_per_cell_or_fail": "short splits, three ways (2 s)",
    "tests/assets/test_quality.py::test_both_assets_materialize_": "a Dagster run of the quality assets (2 s)",
    "tests/export/test_export.py::test_a_dropped_upload_connection_is_retried": "an upload cut and retried (1 s)",
    "tests/rollouts/test_rollouts.py::test_oracle_has_zero_drift_and_no_change_drift_grows": "two rollouts (1 s)",
    "tests/labeling/test_quarantine.py::test_a_labeling_process_that_dies_": "a labeling process killed (1 s)",
    "tests/serve/test_serve.py::test_capacity_is_refused_at_once_and_idle_sessions_are_reaped": "sessions reaped (1 s)",
    "tests/training/test_jobs.py::test_local_job_time_limit_ends_the_group": "a job's time limit (1 s)",
    "tests/training/test_jobs.py::test_slurm_launcher_follows_a_requeued_job": "a requeued job followed (1 s)",
    "tests/execution/test_default_deny.py::test_each_untrusted_environment_gets_an_instance_": "instances (1 s)",
    "tests/execution/test_kernel_resources.py::test_empty_files_stop_at_the_instances_inode_limit": "inodes (1 s)",
    "tests/training/test_base_models.py::test_two_jobs_asking_at_once_convert_the_model_once": "two jobs (1 s)",
    "tests/assets/test_cli.py::test_a_plugin_package_adds_a_command_by_entry_point_alone": "a plugin installed (1 s)",
}


def time_limits(items: list[pytest.Item]) -> None:
    """The end-to-end tests of :data:`SLOW` are marked slow; a test marked slow gets :data:`SLOW_TIMEOUT_S` unless
    it has its own timeout mark."""
    for item in items:
        if not item.get_closest_marker("slow") and any(item.nodeid.startswith(prefix) for prefix in SLOW):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


#: seconds per test (set-up, call and teardown) in the last recorded whole run: ``ENVSIM_RECORD_DURATIONS=1 ./forge
#: test`` rewrites it (:class:`RecordDurations`). A test it does not know counts as :data:`UNKNOWN_S`.
DURATIONS = Path(__file__).with_name("durations.json")
UNKNOWN_S = {"slow": 30.0, "shared": 5.0, "plain": 0.5}


def longest_files_first(items: list[pytest.Item], durations: dict[str, float] | None = None) -> None:
    """Under xdist, the files that take longest start first (``--dist loadfile`` hands out whole files in this
    order with ``--no-loadscope-reorder``, one more each time a worker runs low), so no worker is left with a long
    one at the end. A file's cost is the recorded time of its selected tests (:data:`DURATIONS`; run after ``-m``
    has deselected, so the fast subset is ordered by what it runs); a test not recorded yet counts by its kind
    (:data:`UNKNOWN_S`: marked slow, using a module-scoped fixture or the bfcl replay, or plain). A plain run keeps
    the collection order."""
    if not WORKER:
        return
    known = durations if durations is not None else json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    cost: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        cost[path] = cost.get(path, 0.0) + known.get(item.nodeid, UNKNOWN_S[_kind(item)])
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])  # stable: collection order within a file


def slowest_table(count: int = 10, durations: dict[str, float] | None = None) -> str:
    """The ``count`` slowest tests of the recorded run (:data:`DURATIONS`) as the Markdown table docs/commands.md
    shows (``python -m tests.support.parallel`` prints it; ``tests/project/test_docs.py`` holds the two equal)."""
    known = durations if durations is not None else json.loads(DURATIONS.read_text())
    rows = sorted(known.items(), key=lambda kv: (-kv[1], kv[0]))[:count]
    lines = ["| test | seconds |", "|---|---|"]
    lines += [f"| `{test}` | {seconds:,.0f} |" for test, seconds in rows]
    return "\n".join(lines)


def _kind(item: pytest.Item) -> str:
    if item.get_closest_marker("slow"):
        return "slow"
    info = getattr(item, "_fixtureinfo", None)
    shared = info is not None and any(
        defs[-1].scope != "function" and (defs[-1].scope != "session" or name == "default_layout")
        for name, defs in info.name2fixturedefs.items()
    )
    return "shared" if shared else "plain"


class LongestFilesFirst:
    """The plugin that orders the items last, after ``-m`` / ``-k`` have deselected (tests/conftest.py)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        longest_files_first(items)


class RecordDurations:
    """The plugin that, with ``ENVSIM_RECORD_DURATIONS=1``, sums each test's set-up, call and teardown in the
    controlling process (under xdist it sees every worker's reports) and, at the end of a run with no failure,
    writes :data:`DURATIONS`: the times of the tests this run ran replace theirs, the others stay."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.failed = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        self.failed |= report.failed

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.failed or not self.seconds:
            return
        known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
        known.update({k: round(v, 2) for k, v in self.seconds.items()})
        DURATIONS.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")


@contextmanager
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[None]:
    """Holds the run-wide lock ``name``: under xdist, two workers never do this at once (e.g. ``./forge setup``
    creating .venv in the tree, ``./forge train-env`` creating .venv-train)."""
    with (run_base(tmp_path_factory) / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def forge_environment(tmp_path_factory: pytest.TempPathFactory, command: str, venv: str, timeout: int) -> str:
    """The Python of an environment ``./forge COMMAND`` builds in the tree (``train-env`` → .venv-train,
    ``openenv-env`` → .venv-openenv), built once for the whole run: one worker at a time builds it, the others wait."""
    root = Path(__file__).resolve().parents[2]
    with one_at_a_time(tmp_path_factory, f"forge-{command}"):
        out = subprocess.run(["bash", str(root / "forge"), command], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return str(root / venv / "bin" / "python")


if __name__ == "__main__":
    print(slowest_table())
