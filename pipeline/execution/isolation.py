"""How sandbox workers are started: inside ``bwrap`` (the default), or — for trusted code only — as
plain subprocesses.

``bwrap`` gives each worker its own user, PID, network, IPC, UTS and cgroup namespaces (no network
at all; processes die with the namespace), all capabilities dropped and an unprivileged uid, a
read-only view of only what the interpreter needs (``/usr`` and the Python installation and
virtual environment, the project's ``pipeline`` package at a neutral path, the directories of installed plugin
packages outside them), a private size-capped
``/tmp``, a fresh ``/proc``, a minimal read-only ``/dev`` with a small size-capped ``/dev/shm``, an
empty environment (``--clearenv``: no variable of the parent, so no API key or token), a new session
and ``--die-with-parent``. The interpreter runs with ``-P`` (``PYTHONSAFEPATH``): neither the working
directory nor any other writable directory is on ``sys.path``. (A cgroup memory limit per worker is not
used: cgroups are not delegated to unprivileged users here — memory in ``/dev/shm`` is capped by its
size, ``memfd_create`` is refused by seccomp, and Landlock refuses writes under ``/dev``.) The data root,
``DAGSTER_HOME`` and the home directory are simply not there. Inside, each child adds its own
resource limits, a seccomp filter and the audit-hook guards (see :mod:`pipeline.execution.worker`).

``trusted`` starts the same worker without the namespace boundary (still with an empty
environment, seccomp and limits in the child): for code you wrote yourself, or machines where
user namespaces are disabled. It is never chosen silently: a missing or broken ``bwrap`` is an
error that says how to install it or opt out.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pipeline.core.registry import plugin_paths
from pipeline.execution import freeze

ISOLATIONS = ("bwrap", "trusted")
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
_APP_DIR = "/opt/envsim"  # where the pipeline package appears inside the sandbox
_NOBODY = 65534
SHM_MB = 8  # size of the sandbox's /dev/shm (POSIX shared memory is not counted by RLIMIT_AS)


class SandboxUnavailable(RuntimeError):
    """The requested isolation cannot be started on this machine."""


def worker_environment(pythonpath: str) -> dict[str, str]:
    """The whole environment of a worker: nothing of the parent's."""
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": pythonpath,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONSAFEPATH": "1",
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
    }


def _interpreter_paths() -> list[str]:
    """Directories the worker's interpreter needs, read-only (outside /usr)."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    return sorted(p for p in paths if p != "/usr" and not p.startswith("/usr/") and os.path.isdir(p))


def _plugin_dirs() -> list[str]:
    """The directories of installed plugin packages (:func:`pipeline.core.registry.plugin_paths`) the
    interpreter's own paths do not hold (a ``pip install --target`` directory on ``PYTHONPATH``): the worker
    sees them read-only at the same path, on its ``PYTHONPATH``, so it registers the same plugins."""
    inside = [*_interpreter_paths(), "/usr"]
    return [p for p in plugin_paths() if not any(p == top or p.startswith(top.rstrip("/") + "/") for top in inside)]


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(
            "the sandbox needs bubblewrap ('bwrap'), which is not installed: run './forge setup' (installs Debian's "
            "'bubblewrap' when it can) or 'sudo apt-get install bubblewrap'; to run only trusted environment code "
            "without isolation set ENVSIM_SANDBOX=trusted (or the sandbox resource's isolation: trusted)"
        )
    return path


_HOST_FILES: dict[str, str] = {}


def _remove_host_files(folder: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked process that exits normally
        shutil.rmtree(folder, ignore_errors=True)


def _host_files() -> dict[str, str]:
    """``/proc`` path -> a file (written once per process, again if removed) holding its constant
    content (:data:`pipeline.execution.freeze.HOST_FILES`), to bind over the worker's ``/proc``."""
    if _HOST_FILES and all(Path(p).is_file() for p in _HOST_FILES.values()):
        return _HOST_FILES
    folder = Path(tempfile.mkdtemp(prefix="envsim-host-"))
    atexit.register(_remove_host_files, folder, os.getpid())
    _HOST_FILES.clear()
    for i, (dest, content) in enumerate(sorted(freeze.HOST_FILES.items())):
        source = folder / f"{i}-{Path(dest).name}"
        source.write_text(content)
        _HOST_FILES[dest] = str(source)
    return _HOST_FILES


def bwrap_command(tmp_mb: int) -> list[str]:
    """The ``bwrap`` command line that runs one sandbox worker."""
    cmd = [
        bwrap_path(),
        "--unshare-all",
        "--unshare-user",
        "--uid",
        str(_NOBODY),
        "--gid",
        str(_NOBODY),
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        # the private /tmp first: a later bind below /tmp (a virtual environment there) stays visible on it
        "--size",
        str(tmp_mb << 20),
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / top
        if host.is_symlink():
            cmd += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            cmd += ["--ro-bind", str(host), str(host)]
    if Path("/etc/ld.so.cache").exists():
        cmd += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    plugins = _plugin_dirs()
    for path in [*_interpreter_paths(), *plugins]:
        cmd += ["--ro-bind", path, path]
    cmd += [
        "--ro-bind",
        str(_PROJECT_ROOT / "pipeline"),
        f"{_APP_DIR}/pipeline",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(SHM_MB << 20),
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--chdir",
        "/tmp",
        "--hostname",
        freeze.HOSTNAME,
    ]
    for dest, source in _host_files().items():  # constant host identity over the fresh /proc
        cmd += ["--ro-bind", source, dest]
    for key, value in worker_environment(os.pathsep.join([_APP_DIR, *plugins])).items():
        cmd += ["--setenv", key, value]
    cmd += ["--", sys.executable, "-P", "-m", "pipeline.execution.worker"]
    return cmd


def worker_command(isolation: str, tmp_mb: int) -> tuple[list[str], dict[str, str], str]:
    """(argv, environment, working directory) of a worker under ``isolation``."""
    if isolation == "bwrap":
        return bwrap_command(tmp_mb), {}, "/"
    if isolation == "trusted":
        pythonpath = os.pathsep.join([str(_PROJECT_ROOT), *_plugin_dirs()])
        argv = [sys.executable, "-P", "-m", "pipeline.execution.worker"]
        return argv, worker_environment(pythonpath), str(_PROJECT_ROOT)
    raise SandboxUnavailable(f"unknown sandbox isolation {isolation!r}; choose one of {', '.join(ISOLATIONS)}")


def checked_isolation(value: str) -> str:
    """``value`` when it is an isolation (``ISOLATIONS``), else a SandboxUnavailable naming the choices."""
    if value not in ISOLATIONS:
        raise SandboxUnavailable(
            f"sandbox isolation {value!r} (ENVSIM_SANDBOX, or the sandbox resource's isolation) "
            f"is not one: choose one of {', '.join(ISOLATIONS)}"
        )
    return value
