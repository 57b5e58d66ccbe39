"""One launch of ``./forge run``, in this process: :func:`definitions` built once from the run's settings value,
:func:`load_run_config` (``-c FILE``... ``--config-json``, ``--seed``) validated against their job by
:func:`check_launch`, :func:`launch` (``dagster.execute_job`` on the data root's run history, which ``./forge ui``
opens), then :func:`report`: the run's timings, then its failed step and one-line cause, or the summary with what it
changed; :func:`print_run_timings` the timings alone (``./forge report`` / ``./forge timings``). Imported by the
commands that launch or report, after :func:`cli.entry.main` has prepared the process (``prepare_process()``: before
anything imports pyarrow)."""

import gc
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import yaml
from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    DagsterInvalidConfigError,
    DagsterRunStatus,
    Definitions,
    JobDefinition,
    RunsFilter,
    build_reconstructable_job,
    execute_job,
    validate_run_config,
)

from assets import definitions as code_location
from assets.automation import seed_config
from assets.jobs import COLLECT_AND_LABEL, MAIN_JOB, regenerate_splits
from assets.loggers import last_step
from cli.renamed import renamed
from cli.summary import report_failed_checks, summary
from pipeline.collect.sources import SourceError, check_files
from pipeline.core import root_lock
from pipeline.core.processes import descendants, die_with_parent, end
from pipeline.core.settings import Settings
from pipeline.core.untrusted import console
from pipeline.envs.partitions import partition_keys
from pipeline.evaluate.results import HEADLINE
from pipeline.store.layout import DataLayout, disk_full
from resources import EnvironmentSourcesResource
from resources.storage import DATA_ROOT_TAG, root_tag

#: the definitions built in this process, by the settings they were built from (:func:`definitions`)
_BUILT: dict[str, Definitions] = {}


def definitions(current: Settings) -> Definitions:
    """The code location of the settings ``current`` (``build_definitions``), built once per process: the check,
    the launch and the steps that run in this process share it."""
    key = current.model_dump_json()
    if key not in _BUILT:
        _BUILT[key] = code_location.build_definitions(current)
    return _BUILT[key]


def reconstruct_job(settings_json: str, name: str) -> JobDefinition:
    """The job ``name`` of the definitions of ``settings_json`` (a :class:`Settings` as JSON): how Dagster finds the
    job again, in this process (the definitions already built) and in a step's own process (the multiprocess
    executor: built there once)."""
    return definitions(Settings.model_validate_json(settings_json)).resolve_job_def(name)


#: the run tag naming the ``./forge run`` process that runs a run (:attr:`pipeline.core.root_lock.Holder.tag`): the
#: next ``./forge run`` on the data root reclaims a run whose process is gone (:func:`reclaim`)
LAUNCHER_TAG = "envsim/launcher"
#: the signals that stop ``./forge run`` (:func:`_supervise`)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: fault injection for the kill tests: ``STEP:start|end:SIGNAL[:DELAY_S]`` sends ``./forge run`` SIGNAL (a name such as
#: KILL or INT) DELAY_S seconds after STEP started or ended (:func:`_inject_fault`)
FAULT_VARIABLE = "FORGE_FAULT"


def _execute(current: Settings, home: Path, job_name: str, run_config: dict, holder: str, **options) -> int:
    """Run ``job_name`` of ``current``'s definitions with ``run_config`` on the run history ``home``, tagged with the
    launching process ``holder`` (:data:`LAUNCHER_TAG`); 0 when it succeeded, else 1 (its failed steps are in its
    event log)."""
    recon = build_reconstructable_job(__name__, "reconstruct_job", (current.model_dump_json(), job_name))
    tags = {**options.pop("tags", {}), LAUNCHER_TAG: holder}
    with DagsterInstance.from_config(str(home)) as instance:
        run_config = _merge(console_logger_config(instance.python_log_level), run_config)
        return 0 if execute_job(recon, instance, run_config=run_config, tags=tags, **options).success else 1


def console_logger_config(level: str | None) -> dict:
    """The run config that starts the ``console`` logger (assets/loggers.py) at the instance's Python log level (INFO):
    Dagster starts a job's own loggers only when the run config names them, else its raw default logger."""
    return {"loggers": {"console": {"config": {"log_level": level or "INFO"}}}}


def _partition(current: Settings, home: Path, holder: str, key: str) -> int:
    """One partition of ``collect_and_label``, in a process of its own (:func:`launch`)."""
    return _execute(current, home, COLLECT_AND_LABEL, {}, holder, tags={"dagster/partition": key})


def _unfinished(instance: DagsterInstance, holder: str | None = None) -> list:
    """The run records not finished (queued, starting, started, canceling), of the launcher ``holder`` only when
    given."""
    statuses = [
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.QUEUED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    tags = {LAUNCHER_TAG: holder} if holder else None
    return list(instance.get_run_records(RunsFilter(statuses=statuses, tags=tags)))


def reclaim(instance: DagsterInstance) -> list[str]:
    """Free what runs whose process is gone still hold, before this launch: a run launched by a ``./forge run`` that
    is gone (killed, its machine stopped) is marked failed (``report_run_failed``) and its pool slots freed
    (``free_concurrency_slots_for_run``); so are the slots a finished run still holds (what the daemon's run
    monitoring does after ``free_slots_after_run_end_seconds``, for runs with no daemon). Runs launched from the
    UI are its daemon's (``run_monitoring`` in dagster.yaml). One line per run reclaimed."""
    lines = []
    for record in _unfinished(instance):
        run = record.dagster_run
        parsed = root_lock.parse_tag(run.tags.get(LAUNCHER_TAG, ""))
        if parsed is None or root_lock.process_alive(*parsed):
            continue
        instance.report_run_failed(
            run, f"the ./forge run process that ran this run (pid {parsed[0]}) is gone: the run is reclaimed"
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        lines.append(f"run {run.run_id[:8]} of {run.job_name} (pid {parsed[0]}, gone): marked failed, slots freed")
    if instance.event_log_storage.supports_global_concurrency_limits:
        for run_id in instance.event_log_storage.get_concurrency_run_ids():
            run = instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                instance.event_log_storage.free_concurrency_slots_for_run(run_id)
    return lines


def _current_step(instance: DagsterInstance, holder: str) -> str | None:
    """The step the unfinished runs of ``holder`` are in: those in progress, else the one started last."""
    stats = [s for r in _unfinished(instance, holder) for s in instance.get_run_step_stats(r.dagster_run.run_id)]
    running = sorted(s.step_key for s in stats if s.start_time and not s.end_time)
    if running:
        return ", ".join(running)
    started = sorted((s for s in stats if s.start_time), key=lambda s: s.start_time)
    return started[-1].step_key if started else None


class _Stopped(Exception):
    """A stop signal reached the supervising ``./forge run`` (:func:`_supervise`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


def _cancel(instance: DagsterInstance, holder: str, signum: int) -> str | None:
    """Mark the unfinished runs of ``holder`` canceled (stopped by ``signum``) and free their pool slots; returns
    the step they were at (None: before the first)."""
    step = _current_step(instance, holder)
    for record in _unfinished(instance, holder):
        name = signal.Signals(signum).name
        instance.report_run_canceled(record.dagster_run, f"./forge run was stopped by {name}")
        instance.event_log_storage.free_concurrency_slots_for_run(record.dagster_run.run_id)
    return step


def _supervise(
    work: Callable[[], int],
    instance: DagsterInstance,
    holder: str,
    last_words: Callable[[BaseException], int | None] = lambda error: None,
) -> int:
    """Run ``work`` in a forked child in a process group of its own, this process only waiting for it, so that
    SIGINT, SIGTERM and SIGHUP reach this process alone and stop the run within a few seconds, wherever it is: the
    child's group is SIGKILLed (no half-handled interrupt, no traceback from it or its helpers), every process it
    started is ended, its runs are marked canceled with their pool slots freed (:func:`_cancel`), and one line names
    the step (exit 128 + the signal). The child gets SIGKILL when this process dies (``PR_SET_PDEATHSIG``), so a
    SIGKILL here ends it too; the next run then reclaims its runs (:func:`reclaim`). An error escaping ``work`` in
    the child is ``last_words``' to say (its one line and status: a full disk) or else printed with its traceback.
    Returns ``work``'s status."""
    sys.stdout.flush()
    sys.stderr.flush()
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in STOP_SIGNALS}
    parent = os.getpid()
    gc.collect()  # this process's garbage is finalized here, where its C objects' threads and locks are still its own
    child = os.fork()
    if child == 0:  # the run: it does not see the stop signals (its own process group), only its parent's end
        gc.freeze()  # and never in the child (a DuckDB or SQLite object finalized after a fork can crash it)
        code = 1
        try:
            os.setpgid(0, 0)
            die_with_parent(signal.SIGKILL)
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
            if os.getppid() != parent:  # the parent died before the death signal was set
                os._exit(code)
            code = work()
        except BaseException as error:  # the child's last words, then its status
            said = last_words(error) if isinstance(error, Exception) else None
            if said is None:
                import traceback

                traceback.print_exc()
            else:
                code = said
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    with suppress(ProcessLookupError, PermissionError):  # the child did it first (or ended)
        os.setpgid(child, child)
    try:
        _, status = os.waitpid(child, 0)
        return os.waitstatus_to_exitcode(status)
    except _Stopped as stop:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)  # stopping once is enough
        sys.stdout.flush()
        started = descendants(os.getpid())  # before the run ends: then its own children are no longer ours
        with suppress(ProcessLookupError):
            os.killpg(child, signal.SIGKILL)  # the run's group at once: SIGKILL, so it says nothing
        os.waitpid(child, 0)
        end(started, grace_s=2.0)  # what it started in sessions of their own (sandbox workers, servers)
        try:
            step = _cancel(instance, holder, stop.signum)
        except Exception as exc:  # the run history cannot be written: the next run reclaims these runs
            step = None
            print(f"./forge run: could not mark the run canceled ({type(exc).__name__}: {exc})", file=sys.stderr)
        where = f"at step {step}" if step else "before its first step"
        print(f"./forge run: interrupted {where}; run it again to resume", file=sys.stderr, flush=True)
        return 128 + stop.signum
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _inject_fault(home: Path, holder: str, spec: str) -> None:
    """Send this process a signal at a named point of its run (:data:`FAULT_VARIABLE`'s ``spec``): the run's event
    log is read every 20 ms until ``STEP`` starts (``start``) or succeeds (``end``)."""
    step, edge, name, *delay = spec.split(":")
    wanted = DagsterEventType.STEP_START if edge == "start" else DagsterEventType.STEP_SUCCESS
    with DagsterInstance.from_config(str(home)) as instance:
        while True:
            runs = [r.dagster_run.run_id for r in _unfinished(instance, holder)]
            if any(
                e.dagster_event and e.dagster_event.step_key == step for r in runs for e in instance.all_logs(r, wanted)
            ):
                break
            time.sleep(0.02)
    time.sleep(float(delay[0]) if delay else 0.0)
    os.kill(os.getppid(), signal.Signals[f"SIG{name.upper()}"])  # the ./forge run process (:func:`_supervise`)


def in_use(root: Path, home: Path, holder: root_lock.Holder | None) -> str:
    """The line a second ``./forge run`` on a data root in use says."""
    if holder is None:
        return f"data root {root} is in use by another ./forge run; wait, or use another ENVSIM_DATA_ROOT"
    runs = []
    if home.is_dir():
        with DagsterInstance.from_config(str(home)) as instance:
            runs = [r.dagster_run.run_id for r in _unfinished(instance, holder.tag)]
    which = f"run {runs[0]}" if runs else "a run starting"
    return (
        f"data root {root} is in use by {which} (pid {holder.pid}, started {holder.started}); wait, or use "
        "another ENVSIM_DATA_ROOT"
    )


def launch(current: Settings, home: Path, run_config: dict) -> int:
    """``./forge run`` after its checks: ``envsim_main`` with ``run_config`` (with ``shards``, first the catalog and
    every partition of collection + labeling as its own run, ``parallel_runs`` processes side by side) on the data
    root taken for this process alone (:func:`_on_the_root`), then :func:`report` on this run only. Returns the exit
    status."""
    return _on_the_root(current, home, "./forge run", partial(_main, current, home, run_config))


def _on_the_root(
    current: Settings, home: Path, command: str, work: Callable[[str], int], job_name: str = MAIN_JOB
) -> int:
    """``work(holder)`` with the data root taken for this process alone (exit 2 when another holds it,
    :mod:`pipeline.core.root_lock`), after what dead runs hold is reclaimed (:func:`reclaim`), stopped by a signal
    with one line (:func:`_supervise`), a full disk under the run history said in one line naming the step of
    ``job_name`` (:func:`failed_on_full_disk`). Returns the exit status."""
    root = current.data_root
    try:
        fd, stale = root_lock.acquire(root)
    except root_lock.RootInUse as exc:
        print(f"{command}: {in_use(root, home, exc.holder)}", file=sys.stderr, flush=True)
        return 2
    holder = root_lock.Holder.me().tag
    if stale is not None:
        print(
            f"{command}: taking over data root {root} from pid {stale.pid} (started {stale.started}), which is gone",
            flush=True,
        )
    try:
        with DagsterInstance.from_config(str(home)) as instance:  # opened once: a stop has no time to open it
            for line in reclaim(instance):
                print(f"{command}: reclaimed {line}", flush=True)
            said = partial(failed_on_full_disk, home=home, data_root=root, job_name=job_name, command=command)
            return _supervise(partial(work, holder), instance, holder, last_words=said)
    finally:
        root_lock.release(fd, root)


def _main(current: Settings, home: Path, run_config: dict, holder: str) -> int:
    """The runs of one ``./forge run`` (:func:`launch`) and their report."""
    if os.environ.get(FAULT_VARIABLE):
        fault = (home, holder, os.environ[FAULT_VARIABLE])
        threading.Thread(target=_inject_fault, args=fault, name="forge-run-fault", daemon=True).start()
    status = 0
    if current.shards:  # partitioned (docs/scale-out.md): the catalog, then each partition's trajectories -> steps
        status = _execute(current, home, MAIN_JOB, {}, holder, asset_selection=[AssetKey("environment_catalog")])
        if status:
            return status
        spawn = multiprocessing.get_context("spawn")  # a fresh interpreter per worker: no forked DuckDB/Arrow threads
        workers = current.parallel_runs or multiprocessing.cpu_count()
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=spawn, initializer=die_with_parent, initargs=(signal.SIGKILL,)
        ) as pool:
            status = max(
                pool.map(partial(_partition, current, home, holder), partition_keys(current.shards)), default=0
            )
    started = time.time_ns()
    status = _execute(current, home, MAIN_JOB, run_config, holder) or status
    print(f"{MAIN_JOB}: {(time.time_ns() - started) // 1_000_000} ms wall", flush=True)
    return report(home, current.data_root, since=started // 1_000_000_000 - 1, status=status, current=current)


def regenerate(current: Settings, home: Path, seed: int) -> int:
    """``./forge regenerate``: ``weekly_splits``' job (``regenerate_splits``) now, with the seeds ``seed`` (as the
    schedule would run it), on the run history ``home`` (the UI's) and the data root taken as ``./forge run`` takes
    it (:func:`_on_the_root`), then :func:`report` on that run."""
    return _on_the_root(
        current, home, "./forge regenerate", partial(_regenerate, current, home, seed), regenerate_splits.name
    )


def _regenerate(current: Settings, home: Path, seed: int, holder: str) -> int:
    """The run of one ``./forge regenerate`` (:func:`regenerate`) and its report."""
    started = time.time_ns()
    config, tags = seed_config(seed), {"split_seed": str(seed)}
    status = _execute(current, home, regenerate_splits.name, config, holder, tags=tags)
    return report(
        home,
        current.data_root,
        regenerate_splits.name,
        since=started // 1_000_000_000 - 1,
        status=status,
        current=current,
    )


def failed_on_full_disk(
    error: BaseException, home: Path, data_root: Path, job_name: str = MAIN_JOB, command: str = "./forge run"
) -> int | None:
    """When ``error`` (escaped from a launch: Dagster's own run history, a sqlite file under ``home``, could not be
    written) says the disk is full: one line, ``./forge run: FAILED at step X: out of space writing …``, naming the
    step the latest run of ``job_name`` was in, and exit 1; None for any other error (the caller re-raises it)."""
    text, cause = [], error
    while cause is not None and len(text) < 10:
        text.append(f"{type(cause).__name__}: {cause}")
        cause = cause.__cause__ or cause.__context__
    full = disk_full(" | ".join(text), data_root)
    if full is None:
        return None
    where = ""
    with suppress(Exception):  # the run history itself is what could not be written: the step the console named last
        with DagsterInstance.from_config(str(home)) as instance:
            runs = instance.get_run_records(
                RunsFilter(job_name=job_name, tags={DATA_ROOT_TAG: root_tag(data_root)}), limit=1
            )
            if runs:
                stats = instance.get_run_step_stats(runs[0].dagster_run.run_id)
                running = [s.step_key for s in stats if s.start_time and not s.end_time] or [
                    s.step_key for s in sorted(stats, key=lambda s: s.start_time or 0)[-1:]
                ]
                where = f" at step {running[0]}" if running else ""
    if not where and last_step():
        where = f" at step {last_step()}"
    print(f"{command}: FAILED{where}: {full} (exit 1)", file=sys.stderr, flush=True)
    return 1


def _latest_run(instance: DagsterInstance, job_name: str, since: float | None, data_root: Path):
    """The latest run record of ``job_name`` (created after ``since``, tagged with ``data_root``), or None after
    saying there is none."""
    runs = instance.get_run_records(RunsFilter(job_name=job_name, tags={DATA_ROOT_TAG: root_tag(data_root)}), limit=1)
    if not runs or (since is not None and runs[0].create_timestamp.timestamp() < since):
        print(
            f"no run of {job_name} started"
            + (" by this command" if since is not None else "")
            + f" (run history: {instance.root_directory})"
        )
        return None
    return runs[0]


def print_run_timings(home: Path, data_root: Path, job_name: str = MAIN_JOB, since: float | None = None) -> bool:
    """Print where the latest run of ``job_name`` in the run history ``home`` spent its time: each step (asset or
    check) and what lies outside the steps (Dagster's orchestration). ``since`` (epoch seconds): only a run created
    after it counts; ``data_root``: only a run tagged with that root. False when there is none."""
    with DagsterInstance.from_config(str(home)) as instance:
        record = _latest_run(instance, job_name, since, data_root)
        if record is None:
            return False
        _print_timings(instance, record, job_name)
        return True


def _print_timings(instance: DagsterInstance, record, job_name: str) -> None:  # a RunRecord
    """Each step's time and what lies outside the steps, for one run record."""
    stats = [s for s in instance.get_run_step_stats(record.dagster_run.run_id) if s.start_time and s.end_time]
    if not stats or not record.start_time or not record.end_time:
        return
    total = record.end_time - record.start_time
    print(
        f"Run {record.dagster_run.run_id[:8]} of {job_name}: {total:.1f}s wall "
        f"({record.dagster_run.status.value}); time per step:"
    )
    busy = 0.0
    for s in sorted(stats, key=lambda s: s.start_time):
        seconds = s.end_time - s.start_time
        busy += seconds
        print(f"  {s.step_key:45s} {seconds:7.1f}s")
    print(f"  {'(sum of steps; they run concurrently)':45s} {busy:7.1f}s")
    print(
        f"  {'(run wall time outside any step)':45s} "
        f"{total - (max(s.end_time for s in stats) - min(s.start_time for s in stats)):7.1f}s"
    )


def _one_line(error) -> str:  # dagster's SerializableErrorInfo
    """The innermost cause of a step's error on one line, escaped (:func:`console`): ``ShortfallError: benchmark …
    cannot be filled: …`` (Dagster's wrapper "Error occurred while executing op" and the module path of the class
    left out)."""
    while error.cause is not None and error.cls_name.startswith("Dagster"):
        error = error.cause
    message = error.message.strip()
    prefix, _, rest = message.partition(": ")
    if prefix.rsplit(".", 1)[-1] == error.cls_name:
        message = rest
    text = " ".join(line.strip() for line in message.splitlines() if line.strip())
    return console(f"{error.cls_name}: {text}" if text else error.cls_name)


@dataclass
class RunOutcome:
    """What one Dagster run did, from its event log: ``failures`` (step key, one-line cause) in the order they
    happened, the run-level failure message when no step failed, and its ``simulator_eval`` scores
    (simulator -> metric -> value, on benchmark ``eval_version``)."""

    run_id: str
    status: str
    failures: list[tuple[str, str]] = field(default_factory=list)
    run_failure: str | None = None
    evaluation: dict[str, dict[str, float]] = field(default_factory=dict)
    eval_version: str | None = None

    @property
    def failed(self) -> bool:
        return self.status != DagsterRunStatus.SUCCESS.value or bool(self.failures)


def run_outcome(instance: DagsterInstance, run_id: str) -> RunOutcome:
    """The failed steps and evaluation scores of run ``run_id`` (:class:`RunOutcome`)."""
    run = instance.get_run_by_id(run_id)
    outcome = RunOutcome(run_id, run.status.value if run else "UNKNOWN")
    wanted = {DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_FAILURE, DagsterEventType.ASSET_MATERIALIZATION}
    for entry in instance.all_logs(run_id, of_type=wanted):
        event = entry.dagster_event
        if event.event_type == DagsterEventType.STEP_FAILURE:
            error = getattr(event.event_specific_data, "error", None)
            outcome.failures.append((event.step_key, _one_line(error) if error else entry.message or "failed"))
        elif event.event_type == DagsterEventType.RUN_FAILURE:
            error = getattr(event.event_specific_data, "error", None) if event.event_specific_data else None
            outcome.run_failure = _one_line(error) if error else (entry.message or event.message or "the run failed")
        else:
            materialization = event.event_specific_data.materialization
            if materialization.asset_key.path[-1] != "simulator_eval":
                continue
            for key, value in materialization.metadata.items():
                metric, _, simulator = key.partition("/")
                if metric in HEADLINE and simulator:
                    outcome.evaluation.setdefault(simulator, {})[metric] = value.value
                elif key == "split_version":
                    outcome.eval_version = value.value
    return outcome


def report(
    home: Path,
    data_root: Path,
    job_name: str = MAIN_JOB,
    since: float | None = None,
    status: int = 0,
    *,
    current: Settings,
) -> int:
    """What ``./forge run`` prints after its run (``status``: the launch's exit status), from the run history
    ``home``: the run's timings, then, when the run failed, each failed step and its one-line cause and a last line
    naming the step (nothing from earlier runs); else the summary of the data with what this run changed. Returns
    the exit status."""
    with DagsterInstance.from_config(str(home)) as instance:
        record = _latest_run(instance, job_name, since, data_root)
        if record is not None:
            _print_timings(instance, record, job_name)
            outcome = run_outcome(instance, record.dagster_run.run_id)
    if record is None:
        code = status or 1
        print(f"./forge run: FAILED: no run of {job_name} started (exit {code})", file=sys.stderr)
        return code
    layout = DataLayout.at(data_root)
    if outcome.failed:
        code = status or 1
        sys.stdout.flush()
        # a check that failed the run (ENVSIM_STRICT): its environments and reasons, from the step parts it checked
        report_failed_checks(layout, current.strict, " ".join(f"{s} {c}" for s, c in outcome.failures))
        full = next(filter(None, (disk_full(c, data_root) for _, c in outcome.failures)), None)
        for step, cause in outcome.failures:
            if not disk_full(cause, data_root):  # a full disk: the last line says it once
                print(f"step {step} failed: {cause}", file=sys.stderr)
        if not outcome.failures:
            full = disk_full(outcome.run_failure or "", data_root)
            if not full:
                print(
                    f"run {outcome.run_id[:8]} ended {outcome.status}: {outcome.run_failure or 'no step failed'}",
                    file=sys.stderr,
                )
        steps = [step for step, _ in outcome.failures]
        where = f" at step {steps[0]}" + (f" (and {', '.join(steps[1:])})" if steps[1:] else "") if steps else ""
        print(f"./forge run: FAILED{where}{': ' + full if full else ''} (exit {code})", file=sys.stderr)
        return code
    code = summary(layout, outcome.run_id, outcome.evaluation, outcome.eval_version, current)
    code = status or code
    if code:
        print(f"./forge run: FAILED (exit {code})", file=sys.stderr)
    return code


def _describe_config_error(error, job) -> str:  # dagster's EvaluationError
    from difflib import get_close_matches

    reason = error.reason.value  # DagsterEvaluationErrorReason's names (the enum is not exported)
    path = [str(getattr(e, "field_name", getattr(e, "list_index", "?"))) for e in error.stack.entries]
    where = ".".join(path) or "the top level"
    if reason in ("FIELD_NOT_DEFINED", "FIELDS_NOT_DEFINED"):
        names = [error.error_data.field_name] if reason == "FIELD_NOT_DEFINED" else list(error.error_data.field_names)
        moved = renamed(where, names)
        if moved:
            return moved
    if reason == "FIELD_NOT_DEFINED":
        name = error.error_data.field_name
        keys = _schema_keys(job, path)
        close = get_close_matches(name, keys, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        section = _section_hint(job, path, [name])
        if section:
            return f"unknown config key {name!r} under {where}: {section.replace('they belong', 'it belongs')}"
        return (
            f"unknown config key {name!r} under {where}: {hint}"
            f"{'valid keys: ' + ', '.join(keys) if keys else 'remove it'}"
        )
    if reason == "FIELDS_NOT_DEFINED":
        keys = _schema_keys(job, path)
        names = list(error.error_data.field_names)
        return (
            f"unknown config keys {', '.join(map(repr, names))} under {where}: "
            f"{_section_hint(job, path, names) or 'valid keys: ' + ', '.join(keys)}"
        )
    if reason == "RUNTIME_TYPE_MISMATCH":
        choices = [v.value for v in error.error_data.config_type_snap.enum_values or []]
        if choices:  # a closed choice (a config enum): name them
            return (
                f"config value {error.error_data.value_rep} at {where} is not one of {', '.join(choices)}: fix "
                "the value"
            )
        if error.error_data.value_rep in ("True", "False") and "enabled" in _schema_keys(job, path):
            enabled = error.error_data.value_rep.lower()
            return f"config value {enabled} at {where} is a section: write {path[-1]}: {{enabled: {enabled}}}"
        return (
            f"config value {error.error_data.value_rep} at {where} has the wrong type "
            f"(expected {error.error_data.config_type_snap.given_name or error.error_data.config_type_snap.key}): "
            "fix the value"
        )
    if reason == "MISSING_REQUIRED_FIELD":
        return f"config key {error.error_data.field_name!r} is required under {where}: add it"
    return f"config error at {where}: {error.message.splitlines()[0][:300]}"


def _schema_type(job, path: list[str]):
    """The config type the job's run config has at ``path`` (list items and optional values unwrapped), or None."""
    config_type = job.run_config_schema.config_type
    for name in path:
        while getattr(config_type, "inner_type", None) is not None:  # a list's items, an optional value
            config_type = config_type.inner_type
        if name.isdigit():  # a list index: its items' type
            continue
        fields = getattr(config_type, "fields", None)
        if not fields or name not in fields:
            return None
        config_type = fields[name].config_type
    while getattr(config_type, "inner_type", None) is not None:
        config_type = config_type.inner_type
    return config_type


def _schema_keys(job, path: list[str]) -> list[str]:
    """Field names the job's run config accepts at ``path`` (empty when it is not a mapping)."""
    return sorted(getattr(_schema_type(job, path), "fields", {}) or {})


def _section_hint(job, path: list[str], names: list[str]) -> str:
    """The fix when every key of ``names`` belongs in one section under ``path`` (a simulator kind's settings
    written beside the common fields: ``openai: {model: …}``), else ''."""
    for section in _schema_keys(job, path):
        if set(names) <= set(_schema_keys(job, [*path, section])):
            return f"they belong in its `{section}:` section: {section}: {{{', '.join(f'{n}: …' for n in names)}}}"
    return ""


def _merge(onto: dict, over: dict) -> dict:
    """``over`` merged into ``onto``, mappings key by key, any other value of ``over`` winning (Dagster's merge of run
    config files)."""
    merged = dict(onto)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = _merge(merged[key], value) if both else value
    return merged


def load_run_config(
    configs: Sequence[str] = (), config_json: str | None = None, seed: int | None = None
) -> tuple[dict, list[str]]:
    """The one run config of ``./forge run -c FILE... --config-json JSON --seed N``, built once here and run as it
    is (:func:`launch`): the YAML files deep-merged by Dagster's rule (:func:`_merge`), a file listed
    first winning over the ones after it, the JSON over them all, and ``seed`` (the benchmark's and the mixture's,
    :func:`assets.automation.seed_config`) over everything. Returns it with one line per file or JSON that cannot be
    read (naming it and the fix)."""
    problems: list[str] = []
    run_config: dict = {}
    for name in reversed(configs):  # files listed first win: each merged over the ones listed after it
        path = Path(name)
        if not path.is_file():
            problems.append(f"run config file {name} does not exist: pass an existing YAML file to -c/--config")
            continue
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            problems.append(f"run config file {name} is not valid YAML ({str(exc).splitlines()[0]}): fix the file")
            continue
        if not isinstance(loaded, dict):
            problems.append(
                f"run config file {name} holds a {type(loaded).__name__}, not a mapping: "
                "write ops:/resources: keys at its top level"
            )
            continue
        run_config = _merge(run_config, loaded)
    if config_json:
        try:
            loaded = json.loads(config_json)
            if not isinstance(loaded, dict):
                raise ValueError("not a JSON object")
            run_config = _merge(run_config, loaded)
        except ValueError as exc:
            problems.append(f"--config-json is not a JSON object ({exc}): pass e.g. '{{\"ops\": {{}}}}'")
    if seed is not None:
        run_config = _merge(run_config, seed_config(seed))
    return run_config, problems


def check_launch(job_name: str, run_config: dict, current: Settings, where: str = "run config") -> list[str]:
    """What is wrong with launching ``job_name`` with ``run_config`` (:func:`load_run_config`'s) against the
    definitions of ``current`` (:func:`definitions`: the ones the launch runs), before any run starts: the job must
    exist, Dagster validates the run config against the job's config schema (``validate_run_config``; each of its
    errors one line naming ``where`` the config came from, the key and the fix), and the files the sources name must
    be there. One line each; empty: launch."""
    defs = definitions(current)
    jobs = sorted(job.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__"))
    if job_name not in jobs:
        return [f"there is no job {job_name!r} in this code location: choose one of {', '.join(jobs)}"]
    job = defs.resolve_job_def(job_name)
    try:
        validate_run_config(job, run_config)
    except DagsterInvalidConfigError as exc:
        return [f"{where}: {_describe_config_error(error, job)}" for error in exc.errors]
    # the files the sources name: a missing one is a one-line error now, not a failed step later
    resources = run_config.get("resources") or {}
    sources_config = (resources.get("sources") or {}).get("config") or {}
    data_root = ((resources.get("store") or {}).get("config") or {}).get("data_root") or current.data_root
    try:
        check_files(EnvironmentSourcesResource(**sources_config).config(DataLayout.at(data_root)))
    except SourceError as exc:
        return str(exc).split("; ")
    except Exception:  # a config only the run can resolve (an env var...): the run reports it
        pass
    return []
