"""A real Celery cluster on localhost for the tests: Debian's ``redis-server`` (broker and result
backend) on 127.0.0.1 and ``dagster-celery`` workers as separate processes, each in its own session
so that one can be frozen or killed with everything it started. Installs what is missing (the
``redis-server`` package, the ``celery`` extra of pyproject.toml pinned to the installed dagster)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import yaml

from tests.support.ui_server import ROOT, free_port

SCALE_OUT_DOC = ROOT / "docs" / "scale-out.md"  # the Celery section (linked from README.md)


def ensure_redis() -> str:
    """The ``redis-server`` binary, installed from Debian's packages when absent."""
    path = shutil.which("redis-server")
    if path:
        return path
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = [
        *sudo,
        "apt-get",
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "-o",
        "DPkg::Lock::Timeout=600",
        "redis-server",
    ]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run([*sudo, "apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(cmd, env=env, check=True, capture_output=True)
    path = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(path).exists():
        raise RuntimeError("apt-get installed redis-server but there is no redis-server binary")
    return path


def ensure_celery_extra() -> None:
    """pyproject.toml's ``celery`` extra in this interpreter's environment (``./forge`` does not install
    it), constrained to the installed dagster so that pip picks the matching dagster-celery."""
    try:
        import dagster_celery
        import redis

        return
    except ImportError:
        pass
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["celery"]
    pin = f"dagster=={importlib.metadata.version('dagster')}"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", *extra, pin], capture_output=True, text=True, timeout=600
    )
    if out.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(extra)} {pin} failed:\n{out.stderr[-3000:]}")


def readme_celery_section() -> str:
    text = SCALE_OUT_DOC.read_text()
    start = text.index("**Celery (dagster-celery).**")
    end = text.find("\n## ", start)
    return text[start : end if end >= 0 else len(text)]


def readme_celery_config() -> tuple[dict[str, str], str, list[list[str]]]:
    """From the Celery section of docs/scale-out.md: the ``ENVSIM_*`` variables it exports, the ``celery.yaml`` text
    and its ``dg`` / ``dagster`` / ``dagster-celery`` command lines (as argument lists, comments and ``&`` dropped)."""
    section = readme_celery_section()
    export = re.search(r"^export (.*?[^\\])$", section, re.S | re.M)
    assert export, "docs/scale-out.md Celery section: no export line"
    words = export.group(1).replace("\\\n", " ").split()
    env = dict(w.split("=", 1) for w in words if w.startswith("ENVSIM_") and "$" not in w)
    config = re.search(r"cat > celery\.yaml <<'YAML'\n(.*?)\nYAML\n", section, re.S)
    assert config, "docs/scale-out.md Celery section: no celery.yaml block"
    commands = [
        [w for w in shlex.split(line, comments=True) if w != "&"]
        for line in section.splitlines()
        if line.startswith(("dg ", "dagster ", "dagster-celery "))
    ]
    return env, config.group(1) + "\n", commands


class RedisServer:
    """``redis-server`` on 127.0.0.1 and a free port, nothing persisted, stopped with its session."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.log = directory / "redis.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> RedisServer:
        binary = ensure_redis()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
                "--logfile",
                str(self.log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.proc.returncode}: "
                    f"{self.log.read_text()[-2000:] if self.log.exists() else ''}"
                )
            try:
                if self.command("PING") == "+PONG":
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"redis-server did not answer PING within {timeout}s")

    def command(self, *args: str) -> str:
        """One Redis command over RESP; the first line of the reply."""
        payload = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(payload.encode())
            return s.recv(65536).decode().split("\r\n")[0]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


class CeleryWorker:
    """``dagster-celery worker start`` (which runs ``celery worker``) in the repository root, in a session of its
    own."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.name = argv[argv.index("-n") + 1]
        self.hostname = f"{self.name}@{socket.gethostname()}"  # what -n NAME becomes (Celery's %h)
        self.proc: subprocess.Popen | None = None

    def start(self) -> CeleryWorker:
        bin_dir = str(Path(sys.executable).parent)
        env = {**self.env, "PATH": bin_dir + os.pathsep + self.env.get("PATH", "")}  # dagster-celery runs `celery`
        self.proc = subprocess.Popen(
            [str(Path(bin_dir) / self.argv[0]), *self.argv[1:]],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            if f"{self.hostname} ready." in self.log_text():
                return
            time.sleep(0.5)
        raise TimeoutError(f"worker {self.name} not ready within {timeout}s:\n{self.log_tail()}")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def log_tail(self, n: int = 3000) -> str:
        return self.log_text()[-n:]

    def signal(self, sig: int) -> None:
        """``sig`` to the worker's whole session: dagster-celery, celery and its pool processes (the
        sandbox's bwrap runs with --die-with-parent)."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def descendants(self) -> list[int]:
        """Every process the worker started, in its session or not (the sandbox's bwrap has its own)."""
        out = subprocess.run(["ps", "-eo", "pid,ppid"], capture_output=True, text=True).stdout
        children: dict[int, list[int]] = {}
        for line in out.splitlines()[1:]:
            pid, ppid = map(int, line.split())
            children.setdefault(ppid, []).append(pid)
        found, todo = [], [self.proc.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                found.append(child)
                todo.append(child)
        return found

    def session_pids(self) -> list[int]:
        return [int(line.split()[0]) for line in self.processes()]

    def processes(self) -> list[str]:
        out = subprocess.run(["ps", "-eo", "pid,sid,stat,args"], capture_output=True, text=True).stdout
        return [
            line
            for line in out.splitlines()[1:]
            if self.proc and line.split()[1] == str(self.proc.pid) and not line.split()[2].startswith("Z")
        ]

    def stop(self) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def worker_config(readme_yaml: str, port: int) -> str:
    """The celery.yaml of docs/scale-out.md with the test's Redis port; checked to be the executor's run-config form."""
    text = readme_yaml.replace("127.0.0.1:6379", f"127.0.0.1:{port}")
    parsed = yaml.safe_load(text)
    assert set(parsed) == {"execution"} and "broker" in parsed["execution"]["config"], parsed
    return text
