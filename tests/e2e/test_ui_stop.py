"""``./forge ui`` started in the background by a script stops on SIGTERM or SIGINT and leaves no webserver, daemon or
code server behind, nor its port open; and it does not warn that the repository's ``dagster.yaml`` "will not be
used" (``$DAGSTER_HOME`` holds the project's copy) (issue 43, item 4; docs/ui.md "Stopping the UI")."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.support.ui_server import ROOT, DagsterServer, free_port

pytestmark = pytest.mark.slow


def _in_the_background() -> None:
    """What a script's ``./forge ui &`` gets: SIGINT ignored (a non-interactive shell's background job)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_backgrounded_ui_stops_on_a_signal_and_leaves_no_process(tmp_path, sig):
    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "ENVSIM_PROFILE": "small",
        "ENVSIM_DATA_ROOT": str(tmp_path / "data"),
    }
    log = tmp_path / "ui.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "ui", "-p", str(port), "--host", "127.0.0.1"],
        cwd=ROOT,  # where ./forge runs it: the repository root, with the project's dagster.yaml
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its session: every process the UI starts, to look for afterwards
        preexec_fn=_in_the_background,
    )
    server = DagsterServer(tmp_path / "home", tmp_path / "data", log)  # its GraphQL and process helpers only
    server.port, server.url, server.proc = port, f"http://127.0.0.1:{port}", proc
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, server.log_tail()
            try:
                if server.location():  # the code location loaded: webserver, daemon and code servers are up
                    break
            except OSError:
                pass
            time.sleep(1)
        else:
            pytest.fail(f"the UI did not come up:\n{server.log_tail()}")
        running = server.processes_left()
        assert any("dagster_webserver" in line for line in running), running
        assert any("dagster._daemon" in line for line in running), running
        os.kill(proc.pid, sig)
        assert proc.wait(timeout=120) == 0, server.log_tail()
        deadline = time.monotonic() + 10  # processes of the session only: nothing outlives ./forge ui
        while server.processes_left() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.processes_left() == [], server.processes_left()
        assert not _port_open(port)
        text = log.read_text()
        assert "KeyboardInterrupt received" in text and "Dagster services shut down" in text, text[-3000:]
        assert "will not be used" not in text and (ROOT / "dagster.yaml").exists()
    finally:
        server.stop()  # whatever is left (only when the test failed)
