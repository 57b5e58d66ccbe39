"""Scale-out on a real distributed engine: the Celery configuration of docs/scale-out.md (Redis on 127.0.0.1, two
dagster-celery workers as separate processes) runs the partitioned backfill of trajectories +
labeled_steps; steps run on both workers, the data equals a single-process run's, a worker killed
mid-step has its step re-run on the other worker, and a re-run duplicates no part."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pipeline.core import processes
from pipeline.envs.partitions import partition_keys
from pipeline.store.layout import DataLayout
from tests.support.celery_cluster import (
    CeleryWorker,
    RedisServer,
    ensure_celery_extra,
    readme_celery_config,
    worker_config,
)
from tests.support.ui_server import ROOT, DagsterServer

ENGINE_EVENTS = """query($id: ID!) { logsForRun(runId: $id, limit: 20000) { ... on EventConnection { events { __typename
    ... on MessageEvent { message stepKey timestamp }
    ... on EngineEvent { metadataEntries { label ... on TextMetadataEntry { text } } } } } } }"""


def readme_commands() -> tuple[dict[str, str], str, list[list[str]], list[str], list[str]]:
    """The Celery section of docs/scale-out.md: variables, celery.yaml, the two worker commands, the catalog command,
    the backfill command."""
    env, config, commands = readme_celery_config()
    workers = [c for c in commands if c[:3] == ["dagster-celery", "worker", "start"]]
    [catalog] = [c for c in commands if c[:2] == ["dg", "launch"]]
    [backfill] = [c for c in commands if c[:3] == ["dagster", "job", "backfill"]]
    return env, config, workers, catalog, backfill


def test_readme_celery_section_is_complete():
    """What the slow test takes from docs/scale-out.md: variables, the worker config, two worker commands."""
    env, config, workers, catalog, backfill = readme_commands()
    assert env["ENVSIM_EXECUTOR"] == "celery" and int(env["ENVSIM_SHARDS"]) >= 1 and env["ENVSIM_PROFILE"] == "small"
    celery = yaml.safe_load(config)["execution"]["config"]
    assert celery["broker"].startswith("redis://127.0.0.1:6379/") and celery["backend"].startswith(
        "redis://127.0.0.1:6379/"
    )
    source = celery["config_source"]
    assert source["task_acks_late"] is True and source["worker_concurrency"] == 1
    assert source["broker_transport_options"]["visibility_timeout"] > 0
    assert len(workers) == 2 and all(
        w[:4] == ["dagster-celery", "worker", "start", "-A"] and "-y" in w for w in workers
    )
    assert len({w[w.index("-n") + 1] for w in workers}) == 2
    assert "environment_catalog" in catalog and backfill[-4:] == ["-j", "collect_and_label", "--all", "--noprompt"]


def file_digests(root: Path) -> dict[str, str]:
    """sha256 of every Parquet file of the trajectories and steps tables (sidecars hold timings)."""
    layout = DataLayout.at(root)
    files = [*layout.trajectories_dir.glob("*.parquet"), *layout.steps_dir.glob("*.parquet")]
    return {f"{p.parent.name}/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


REFERENCE = """
import os
import sys
from dagster import AssetKey, DagsterInstance
from pipeline.envs.partitions import partition_keys
from pipeline.core.settings import Settings
from assets.definitions import defs
defs = defs()
with DagsterInstance.ephemeral() as instance:
    main = defs.resolve_job_def("envsim_main")
    assert main.execute_in_process(instance=instance, asset_selection=[AssetKey("environment_catalog")]).success
    job = defs.resolve_job_def("collect_and_label")
    for key in partition_keys(Settings.from_env(os.environ).shards):
        assert job.execute_in_process(instance=instance, partition_key=key).success, key
print("reference done")
"""


def worker_steps(srv: DagsterServer, run_id: str) -> list[tuple[str, str, float]]:
    """(step key, Celery worker hostname, time) of every 'Executing steps … in celery worker' event of a run."""
    events = srv.graphql(ENGINE_EVENTS, {"id": run_id})["logsForRun"]["events"]
    out = []
    for e in events:
        if e["__typename"] == "EngineEvent" and "in celery worker" in (e.get("message") or ""):
            host = next(m["text"] for m in e["metadataEntries"] if m["label"] == "Celery worker")
            out.append((e["stepKey"], host, float(e["timestamp"])))
    return out


SANDBOX_STEPS = ("trajectories", "labeled_steps", "labeled_steps_relabel_is_deterministic")  # steps that open a sandbox
STEP_LINE = re.compile(
    r" - ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}) - \d+ - (\S+) - "
    r"(STEP_START|STEP_SUCCESS|STEP_FAILURE) - "
)


def step_log(worker: CeleryWorker) -> list[tuple[str, str, str]]:
    """(run id, step key, STEP_START / STEP_SUCCESS / STEP_FAILURE) as the worker logs them (Dagster's console
    logger)."""
    return [m.groups() for m in STEP_LINE.finditer(worker.log_text())]


def sandbox_pids(worker: CeleryWorker) -> list[int]:
    """The worker's sandbox processes: bwrap and what runs inside it (started in sessions of their own)."""
    session = set(worker.session_pids())
    return [pid for pid in worker.descendants() if pid not in session]


def run_statuses(srv: DagsterServer, runs) -> list[str]:
    return [
        srv.graphql("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": r})["runOrError"][
            "status"
        ]
        for r in runs
    ]


def all_runs(srv: DagsterServer) -> list[str]:
    return [
        r["runId"]
        for r in srv.graphql("{ runsOrError { ... on Runs { results { runId } } } }")["runsOrError"]["results"]
    ]


def step_finished(srv: DagsterServer, run_id: str, step_key: str) -> bool:
    events = srv.graphql(ENGINE_EVENTS, {"id": run_id})["logsForRun"]["events"]
    return any(
        e["__typename"] in ("ExecutionStepSuccessEvent", "ExecutionStepFailureEvent") and e.get("stepKey") == step_key
        for e in events
    )


def parts_written(srv: DagsterServer, run_id: str) -> dict[str, int]:
    data = srv.graphql(
        """query($id: ID!) { logsForRun(runId: $id, limit: 20000) { ... on EventConnection { events {
        ... on MaterializationEvent { assetKey { path } metadataEntries { label ... on IntMetadataEntry { intValue } }
        } } } } }""",
        {"id": run_id},
    )
    out = {}
    for e in data["logsForRun"]["events"]:
        if e.get("assetKey", {}).get("path") == ["labeled_steps"]:
            out.update({m["label"]: m.get("intValue") for m in e["metadataEntries"] if m["label"].startswith("parts_")})
    return out


@pytest.mark.slow
def test_backfill_on_two_celery_workers_survives_a_killed_worker(tmp_path):
    """The commands of docs/scale-out.md, as written there: Redis, two workers, `dagster dev` (what ./forge ui runs),
    the catalog, the job backfill of every partition. The second worker is SIGKILLed (with its sandbox) inside
    a step that has its sandbox open once it has finished two steps: the step is handed to the first
    worker and every run succeeds; the files equal the single-process run's byte for byte, and a re-run of
    the partition whose step was killed reuses every part."""
    ensure_celery_extra()
    readme_env, readme_yaml, worker_argvs, catalog_cmd, backfill_cmd = readme_commands()
    redis = RedisServer(tmp_path / "redis")
    config = tmp_path / "celery.yaml"
    home, data, ref = tmp_path / "dagster_home", tmp_path / "data", tmp_path / "reference"
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        **readme_env,
        "ENVSIM_EXECUTOR_CONFIG": str(config),
        "DAGSTER_HOME": str(home),
        "ENVSIM_DATA_ROOT": str(data),
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    keys = partition_keys(int(readme_env["ENVSIM_SHARDS"]))
    srv = DagsterServer(
        home,
        data,
        tmp_path / "dagster.log",
        env={**readme_env, "ENVSIM_EXECUTOR_CONFIG": str(config)},
        # ./forge's instance, with the step events (DEBUG) in the workers' logs: step_log reads them
        instance_yaml=(ROOT / "dagster.yaml").read_text().replace("python_log_level: INFO", "python_log_level: DEBUG")
        + "nux:\n  enabled: false\n",
    )
    # the worker commands of docs/scale-out.md, its celery.yaml being this test's file
    workers = [
        CeleryWorker([str(config) if a == "celery.yaml" else a for a in argv], env, tmp_path / f"worker-{i}.log")
        for i, argv in enumerate(worker_argvs)
    ]
    victim, survivor = workers[1], workers[0]

    def cli(argv: list[str]) -> str:
        out = subprocess.run(
            [str(bin_dir / argv[0]), *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, f"{argv}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
        return out.stdout

    # the single-process run: same configuration, in-process, its own data root, side by side with the cluster
    reference = subprocess.Popen(
        [sys.executable, "-c", REFERENCE],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={
            **env,
            "ENVSIM_EXECUTOR": "in_process",
            "ENVSIM_EXECUTOR_CONFIG": "",
            "ENVSIM_DATA_ROOT": str(ref),
            "DAGSTER_HOME": str(tmp_path / "ref_home"),
        },
    )
    timings = {}
    t0 = time.monotonic()
    try:
        redis.start()
        config.write_text(worker_config(readme_yaml, redis.port))
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text(srv.instance_yaml)  # the workers' instance (DagsterServer writes the same)
        from dagster import DagsterInstance

        DagsterInstance.from_config(str(home)).dispose()  # its SQLite storage created once, before anyone races to
        for w in workers:
            w.start()
        srv.start()
        for w in workers:
            w.wait_ready()
        timings["start"] = time.monotonic() - t0

        # 1. the catalog (its step on a worker), then the backfill: one queued run per partition
        cli(catalog_cmd)
        t1 = time.monotonic()
        out = cli(backfill_cmd)
        backfill = re.search(r"Launched backfill job `([^`]+)`", out).group(1)
        runs = {r["run_id"]: r["partition"] for r in srv.backfill_runs(backfill)}
        assert sorted(runs.values()) == keys

        # 2. once the victim has finished 2 steps, freeze it inside its next step that has its sandbox open
        #    (checking that the step has not finished) and SIGKILL it with everything it started
        killed, done, sandbox, polls = None, set(), [], 0
        deadline = time.monotonic() + 300
        while killed is None and time.monotonic() < deadline:
            polls += 1
            events = [e for e in step_log(victim) if e[0] in runs]
            finished = {(run, step) for run, step, kind in events if kind != "STEP_START"}
            running = [
                (run, step)
                for run, step, kind in events
                if kind == "STEP_START" and (run, step) not in finished | done and step in SANDBOX_STEPS
            ]
            if len(finished) >= 2 and running and sandbox_pids(victim):  # inside the step, its sandbox open
                victim.signal(signal.SIGSTOP)  # frozen: it cannot finish the step while we look
                sandbox = sandbox_pids(victim)
                if not sandbox or step_finished(srv, *running[0]):
                    victim.signal(signal.SIGCONT)
                    done.add(running[0])
                    continue
                victim.signal(signal.SIGKILL)
                killed = running[0]
            elif polls % 25 == 0 and all(s in ("SUCCESS", "FAILURE") for s in run_statuses(srv, runs)):
                break  # over before the victim had a step to kill
            time.sleep(0.2)
        assert killed, f"{victim.hostname} ran no step to kill:\n{victim.log_tail()}"
        timings["killed_at"] = time.monotonic() - t1
        victim.proc.wait(timeout=30)
        # its session and the sandbox (bwrap --die-with-parent, its own session) go with it; a killed process can
        # take a moment to exit on a loaded machine (seen: a pool process still exiting after the main one)
        gone_by = time.monotonic() + 20
        while (victim.processes() or any(processes.running(pid) for pid in sandbox)) and time.monotonic() < gone_by:
            time.sleep(0.2)
        assert victim.processes() == []
        assert not [pid for pid in sandbox if processes.running(pid)]  # (a zombie of the suite's subreaper has ended)

        # 3. the killed step runs again on the survivor, every run succeeds
        assert [srv.wait_run(r, timeout=400) for r in runs] == ["SUCCESS"] * len(runs), (
            srv.log_tail() + survivor.log_tail()
        )
        timings["backfill"] = time.monotonic() - t1
        placed = [(run, step, host, ts) for run in runs for step, host, ts in worker_steps(srv, run)]
        attempts = [(host, ts) for run, step, host, ts in placed if (run, step) == killed]
        assert [h for h, _ in attempts] == [victim.hostname, survivor.hostname], attempts
        redelivered_after = (attempts[1][1] - attempts[0][1]) / 1000  # GraphQL timestamps: milliseconds
        visibility = yaml.safe_load(readme_yaml)["execution"]["config"]["config_source"]["broker_transport_options"][
            "visibility_timeout"
        ]
        assert redelivered_after >= visibility - 10, attempts  # handed out again by the visibility timeout, not before
        per_worker = Counter(host for _, _, host, _ in placed)
        assert set(per_worker) == {w.hostname for w in workers}, per_worker
        assert len(placed) == 6 * len(keys) + 1  # trajectories, labeled_steps, its four checks; the killed step twice
        logged = Counter(host for run in all_runs(srv) for _, host, _ in worker_steps(srv, run))  # with the catalog's
        logged[victim.hostname] -= 1  # the killed attempt never finished
        for w in workers:  # the workers' own logs agree
            assert (
                len(re.findall(r"Task execute_plan\[[0-9a-f-]+\] succeeded in", w.log_text())) == logged[w.hostname] > 0
            ), w.log_tail()

        # 4. a re-run of the partition whose step was killed: everything reused, no part duplicated (while the
        #    single-process run may still be going)
        backfilled = file_digests(data)
        partition = runs[killed[0]]
        rerun = srv.launch(
            "collect_and_label", ["trajectories", "labeled_steps"], tags={"dagster/partition": partition}
        )
        assert srv.wait_run(rerun, timeout=180) == "SUCCESS", srv.log_tail()
        assert parts_written(srv, rerun).get("parts_written") == 0, parts_written(srv, rerun)
        assert file_digests(data) == backfilled
        timings["rerun_done"] = time.monotonic() - t0

        # 5. the same data as the single-process run, before and after the re-run: same files, same bytes (nothing
        #    lost, nothing duplicated)
        out, _ = reference.communicate(timeout=300)
        assert reference.returncode == 0, out[-3000:]
        timings["reference_done"] = time.monotonic() - t0
        expected = file_digests(ref)
        assert backfilled == expected
        step_parts = sorted(n for n in expected if n.startswith("steps/"))
        assert len(step_parts) >= 4 and {n.split("-")[1] for n in step_parts} == {"bfcl", "builtin"}
        timings["total"] = time.monotonic() - t0
        print(
            json.dumps(
                {
                    "steps_per_worker": per_worker,
                    "killed": [partition, killed[1]],
                    "sandbox_pids_killed": len(sandbox),
                    "redelivered_after_s": round(redelivered_after, 1),
                    "step_parts": len(step_parts),
                    **{k: round(v, 1) for k, v in timings.items()},
                }
            )
        )
    finally:
        if reference.poll() is None:
            reference.kill()
        for w in workers:
            w.stop()
        if srv.proc is not None:  # nothing left to save: spare `dg dev` its graceful shutdown (10-15 s)
            try:
                os.killpg(srv.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        srv.stop()
        redis.stop()
        left = srv.processes_left() + [p for w in workers for p in w.processes()]
        assert left == [], f"processes left behind: {left}"
