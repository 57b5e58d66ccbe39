"""Start/stop the real Dagster webserver + daemon (``dg dev``, what ``./forge ui`` runs) for end-to-end tests, and talk
to its GraphQL API."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# The instance's dagster.yaml unless a test brings its own: one step per concurrency pool at a time, and a run queue
# that looks for queued runs every second (Dagster's default: every 5 s) and launches them side by side.
INSTANCE_YAML = """\
telemetry:
  enabled: false
nux:
  enabled: false
concurrency:
  pools:
    default_limit: 1
run_queue:
  dequeue_interval_seconds: 1
  dequeue_use_threads: true
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DagsterServer:
    def __init__(
        self,
        home: Path,
        data_root: Path,
        log: Path,
        env: dict[str, str] | None = None,
        workspace: Path | None = None,
        instance_yaml: str | None = None,
        quick_backfills: bool = False,
    ) -> None:
        self.home, self.data_root, self.log = home, data_root, log
        self.workspace = workspace or ROOT / "workspace.yaml"  # another code location (tests/support/pool_defs.py)
        self.instance_yaml = instance_yaml  # dagster.yaml to use (default: INSTANCE_YAML)
        self.extra_env = dict(env or {})  # e.g. ENVSIM_SHARDS for a partitioned code location
        if quick_backfills:  # the daemon's backfill loop every few seconds, not every 30 (daemon_ticks/sitecustomize)
            path = [str(Path(__file__).parent / "daemon_ticks"), os.environ.get("PYTHONPATH", "")]
            self.extra_env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 240) -> DagsterServer:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "dagster.yaml").write_text(self.instance_yaml or INSTANCE_YAML)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(self.home),
            "DAGSTER_DISABLE_TELEMETRY": "1",
            "ENVSIM_PROFILE": "small",
            "ENVSIM_DATA_ROOT": str(self.data_root),
            **self.extra_env,
        }
        bin_dir = Path(sys.executable).parent

        def reset_signals() -> None:  # Dagster maps SIGTERM to SIGINT; both must be default to stop it
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

        self.proc = subprocess.Popen(
            [str(bin_dir / "dg"), "dev", "-w", str(self.workspace), "-h", "127.0.0.1", "-p", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=reset_signals,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dg dev exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if self.location():
                    return self
            except OSError:
                pass
            time.sleep(1)
        raise TimeoutError(f"the code location did not load within {timeout}s:\n{self.log_tail()}")

    def log_tail(self, n: int = 3000) -> str:
        return self.log.read_text()[-n:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is None:
            return
        # a short grace only: dg dev's graceful shutdown takes 10-15 s, and what is left is killed below anyway
        for sig, wait in ((signal.SIGTERM, 2), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        time.sleep(0.5)
        try:  # anything left in its session (webserver / daemon / code server children)?
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # processes of the session in process groups of their own (a run's step processes): kill them too,
        # and wait until they are gone
        deadline = time.monotonic() + 15
        while (left := self.processes_left()) and time.monotonic() < deadline:
            for line in left:
                try:
                    os.kill(int(line.split()[0]), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            time.sleep(0.3)

    def processes_left(self) -> list[str]:
        out = subprocess.run(["ps", "-eo", "pid,sid,stat,args"], capture_output=True, text=True).stdout
        # zombies are already dead (a container's PID 1 may be slow to reap them): only live processes count
        return [
            line
            for line in out.splitlines()[1:]
            if self.proc and line.split()[1] == str(self.proc.pid) and not line.split()[2].startswith("Z")
        ]

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.url}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise RuntimeError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def location(self) -> str | None:
        data = self.graphql("""{ workspaceOrError { ... on Workspace { locationEntries { name
            locationOrLoadError { __typename ... on PythonError { message } } } } } }""")
        for entry in data["workspaceOrError"]["locationEntries"]:
            kind = (entry["locationOrLoadError"] or {}).get("__typename")
            if kind == "RepositoryLocation":
                return entry["name"]
            if kind == "PythonError":
                raise RuntimeError(f"code location failed to load: {entry['locationOrLoadError']['message']}")
        return None

    def launch_all(self) -> str:
        return self.launch("__ASSET_JOB")

    def launch(
        self,
        job: str,
        assets: list[str] | None = None,
        run_config: dict | None = None,
        tags: dict[str, str] | None = None,
    ) -> str:
        """Launch a run of ``job`` (only ``assets`` of it, when given; ``tags`` e.g. ``dagster/partition``); returns the
        run id."""
        selector = {"repositoryLocationName": self.location(), "repositoryName": "__repository__", "jobName": job}
        if assets is not None:
            selector["assetSelection"] = [{"path": [a]} for a in assets]
        data = self.graphql(
            """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
                 ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
                 ... on InvalidStepError { invalidStepKey } ... on RunConfigValidationInvalid { errors { message } } }
                 }""",
            {
                "p": {
                    "selector": selector,
                    "runConfigData": run_config or {},
                    "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
                }
            },
        )
        result = data["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launch failed: {result}")
        return result["run"]["runId"]

    def launch_backfill(self, assets: list[str], run_config: dict | None = None) -> str:
        """An asset backfill of every partition of ``assets`` (run by the daemon); returns its id."""
        data = self.graphql(
            """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) { __typename
                 ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message }
                 ... on PartitionSetNotFoundError { message } ... on InvalidSubsetError { message } } }""",
            {
                "p": {
                    "assetSelection": [{"path": [a]} for a in assets],
                    "allPartitions": True,
                    **({"runConfigData": run_config} if run_config else {}),
                }
            },
        )
        result = data["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"backfill launch failed: {result}")
        return result["backfillId"]

    def wait_backfill(self, backfill_id: str, timeout: float = 600) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = self.graphql(
                "query($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename "
                "... on PartitionBackfill { status } ... on PythonError { message } } }",
                {"id": backfill_id},
            )
            status = data["partitionBackfillOrError"].get("status")
            if status in ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"):
                return status
            time.sleep(0.5)
        raise TimeoutError(f"backfill {backfill_id} did not finish in {timeout}s")

    def backfill_runs(self, backfill_id: str) -> list[dict[str, Any]]:
        """Runs of a backfill: id, status, partition, start and end time."""
        data = self.graphql(
            """query($id: String!) { runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
                 ... on Runs { results { runId status startTime endTime tags { key value } assetSelection { path } } }
                 } }""",
            {"id": backfill_id},
        )
        return [
            {
                "run_id": r["runId"],
                "status": r["status"],
                "start": r["startTime"],
                "end": r["endTime"],
                "partition": next((t["value"] for t in r["tags"] if t["key"] == "dagster/partition"), None),
                "assets": sorted("/".join(a["path"]) for a in r["assetSelection"] or []),
            }
            for r in data["runsOrError"]["results"]
        ]

    def wait_run(self, run_id: str, timeout: float = 600) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.graphql(
                "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id}
            )
            state = status["runOrError"]["status"]
            if state in ("SUCCESS", "FAILURE", "CANCELED"):
                return state
            time.sleep(0.5)
        raise TimeoutError(f"run {run_id} did not finish in {timeout}s")

    def run_events(self, run_id: str) -> tuple[set[str], dict[str, bool], list[str]]:
        """(materialized asset keys, check name -> passed, failure messages) from a run's event log."""
        data = self.graphql(
            """query($id: ID!) { logsForRun(runId: $id, limit: 20000) { ... on EventConnection { events { __typename
                 ... on MaterializationEvent { assetKey { path } }
                 ... on AssetCheckEvaluationEvent { evaluation { checkName success assetKey { path } } }
                 ... on ExecutionStepFailureEvent { stepKey error { message } } } } } }""",
            {"id": run_id},
        )
        materialized, checks, failures = set(), {}, []
        for event in data["logsForRun"]["events"]:
            kind = event["__typename"]
            if kind == "MaterializationEvent":
                materialized.add("/".join(event["assetKey"]["path"]))
            elif kind == "AssetCheckEvaluationEvent":
                ev = event["evaluation"]
                checks[f"{'/'.join(ev['assetKey']['path'])}:{ev['checkName']}"] = ev["success"]
            elif kind == "ExecutionStepFailureEvent":
                failures.append(f"{event['stepKey']}: {event['error']['message'][:300]}")
        return materialized, checks, failures

    def check_severities(self, run_id: str) -> dict[str, str]:
        """check name -> severity (ERROR / WARN) of a run's check evaluations."""
        data = self.graphql(
            """query($id: ID!) { logsForRun(runId: $id, limit: 20000) { ... on EventConnection { events { __typename
                 ... on AssetCheckEvaluationEvent { evaluation { checkName severity assetKey { path } } } } } } }""",
            {"id": run_id},
        )
        return {
            f"{'/'.join(e['evaluation']['assetKey']['path'])}:{e['evaluation']['checkName']}": e["evaluation"][
                "severity"
            ]
            for e in data["logsForRun"]["events"]
            if e["__typename"] == "AssetCheckEvaluationEvent"
        }
