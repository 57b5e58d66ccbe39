"""How sandbox workers are started: inside ``bwrap`` (the default), or — for trusted code only — as
plain subprocesses.

``bwrap`` gives each worker its own PID, network, IPC, UTS, mount and cgroup namespaces (no network
at all; processes die with the namespace), all capabilities dropped and an unprivileged host uid — under
root bwrap makes no user namespace and starts the command through ``setpriv`` as a host uid of its own
(:class:`UidSlot`: owner checks, file modes and ``RLIMIT_NPROC`` hold per sandbox), otherwise a user
namespace maps the caller to 65534 —, a read-only view of only what the interpreter needs at neutral paths
(``/usr``; the Python
installation at ``/python`` unless it is under ``/usr``; the virtual environment's ``lib`` at ``/venv``
with a generated ``pyvenv.cfg``; the project's ``pipeline`` package at ``/opt/envsim``; the directories of
installed plugin packages outside them), its options passed through ``--args FD`` (``/proc/1/cmdline`` shows
none), a private size-capped
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

import fcntl
import itertools
import os
import shutil
import sys
from dataclasses import dataclass, field
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


#: under root every bwrap sandbox (a shared worker or one environment's instance) runs as a host uid of its own,
#: ``UID_BASE + slot`` (uid = gid): not 0, owner of no file it can see, so kernel owner checks, file modes and
#: RLIMIT_NPROC hold for it alone — not shared with any other sandbox on the machine
UID_BASE, UID_SLOTS = 200_000, 50_000
UID_LOCKS = "/run/envsim-sandbox-uids"  # one lock file per slot, flock'd while a sandbox holds it
_PROBE = itertools.count()


class UidSlot:
    """A host uid no other sandbox holds (under root): slot ``k`` is taken by an exclusive ``flock`` of its lock
    file, held while the sandbox lives and released with the descriptor (also when this process dies), so
    concurrent processes never share one."""

    def __init__(self) -> None:
        os.makedirs(UID_LOCKS, 0o700, exist_ok=True)
        start = (os.getpid() * 7919 + next(_PROBE)) % UID_SLOTS  # spread concurrent processes' probes
        for k in range(UID_SLOTS):
            slot = (start + k) % UID_SLOTS
            fd = os.open(f"{UID_LOCKS}/{slot}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid, self._fd = UID_BASE + slot, fd
            return
        raise SandboxUnavailable(f"all {UID_SLOTS} sandbox uids are taken: end other pipeline runs first")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    __del__ = release


PYTHON_DIR = "/python"  # the interpreter's installation inside (when it is not under /usr)
VENV_DIR = "/venv"  # the virtual environment inside: a generated pyvenv.cfg and its lib/ only


@dataclass
class Launch:
    """How to start one worker: ``argv``, its whole environment, working directory and the descriptors
    it inherits (bwrap's ``--args`` and ``--ro-bind-data`` pipes); :meth:`close` after starting it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    pass_fds: tuple[int, ...] = ()
    uid: UidSlot | None = field(default=None)  # under root: the host uid it runs as (release when it has ended)

    def close(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = ()


def _data_fd(content: bytes) -> int:
    """A pipe's read end holding ``content`` (bwrap reads it to EOF)."""
    r, w = os.pipe()
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(w, view) :]
    finally:
        os.close(w)
    return r


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def interpreter_layout() -> tuple[list[tuple[str, str]], list[tuple[str, str]], str, dict[str, str]]:
    """Where the interpreter and virtual environment appear inside, at neutral paths: (read-only binds
    ``(host, inside)``, data files ``(inside, content)``, the executable inside, extra variables). An
    interpreter under ``/usr`` stays where it is (``/usr`` is bound as it is); another one appears at
    :data:`PYTHON_DIR`; a virtual environment at :data:`VENV_DIR` with a ``pyvenv.cfg`` written for it
    (the host's names the checkout) and only its ``lib`` directory bound."""
    base = os.path.realpath(sys.base_prefix)
    base_exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    binds: list[tuple[str, str]] = []
    files: list[tuple[str, str]] = []
    env: dict[str, str] = {}
    if _inside(base, "/usr"):
        exe = base_exe
    else:
        binds.append((base, PYTHON_DIR))
        exe = PYTHON_DIR + "/" + os.path.relpath(base_exe, base) if _inside(base_exe, base) else base_exe
        if os.path.isdir(os.path.join(base, "lib")):
            env["LD_LIBRARY_PATH"] = PYTHON_DIR + "/lib"  # a shared libpython found by its (host) RUNPATH
    prefix = os.path.realpath(sys.prefix)
    if prefix != base:
        binds.append((os.path.join(prefix, "lib"), VENV_DIR + "/lib"))
        version = ".".join(map(str, sys.version_info[:3]))
        home = os.path.dirname(exe)
        files.append(
            (
                VENV_DIR + "/pyvenv.cfg",
                f"home = {home}\ninclude-system-site-packages = false\nversion = {version}\n",
            )
        )
        files.append((VENV_DIR + "/bin/python", exe))  # a symbolic link (see bwrap_command)
        exe = VENV_DIR + "/bin/python"
    return binds, files, exe, env


def _hidden_install_records() -> list[str]:
    """Files pip wrote into site-packages that name the checkout (an editable install's ``.pth`` and
    finder, ``direct_url.json``): /dev/null is bound over them inside."""
    out = []
    for site in {os.path.realpath(p) for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)}:
        try:
            names = os.listdir(site)
        except OSError:
            continue
        for name in names:
            path = os.path.join(site, name)
            if name.startswith("__editable__"):
                out.append(path)
            elif name.endswith(".dist-info") and os.path.isfile(os.path.join(path, "direct_url.json")):
                out.append(os.path.join(path, "direct_url.json"))
    return sorted(out)


_DEST_AT = {"--ro-bind": 2, "--bind": 2, "--symlink": 2, "--ro-bind-data": 2, "--tmpfs": 1, "--proc": 1, "--dev": 1}


def _with_parents(opts: list[str]) -> list[str]:
    """``opts`` with every missing parent directory of a destination made first, mode 0755 (bwrap makes
    them 0700 as root: the unprivileged uid could not reach what is bound below)."""
    out: list[str] = []
    pending: list[str] = []  # modifiers (--perms/--size) that belong to the next option
    made = {"/", "/usr", "/tmp", "/proc", "/dev"}
    i = 0
    while i < len(opts):
        opt = opts[i]
        if opt in ("--perms", "--size"):
            pending += opts[i : i + 2]
            i += 2
            continue
        count = _DEST_AT.get(opt, 0) + 1 if opt in _DEST_AT else 1
        if opt in _DEST_AT:
            dest = opts[i + _DEST_AT[opt]]
            parents = []
            parent = os.path.dirname(dest)
            while parent not in made and parent != "/":
                parents.append(parent)
                parent = os.path.dirname(parent)
            for d in reversed(parents):
                out += ["--perms", "0755", "--dir", d]
                made.add(d)
            made.add(dest)
        elif opt in ("--hostname", "--chdir", "--remount-ro", "--uid", "--gid", "--cap-add", "--cap-drop"):
            count = 2
        elif opt == "--setenv":
            count = 3
        out += pending + opts[i : i + count]
        pending = []
        i += count
    return out + pending


def bwrap_command(tmp_mb: int, command: list[str] | None = None, preload: str | None = None) -> Launch:
    """The ``bwrap`` launch that runs one sandbox worker (or ``command`` inside the same sandbox). Its
    options travel through ``--args FD`` (``/proc/1/cmdline`` inside shows none of them); data files
    (constant ``/proc`` contents, ``pyvenv.cfg``) through ``--ro-bind-data`` pipes. Under root, bwrap
    makes no user namespace and the command is started through ``setpriv`` as a uid of its own
    (:class:`UidSlot`) with no capability and ``no_new_privs``; otherwise a user namespace maps the caller's uid
    to 65534."""
    bwrap = bwrap_path()
    binds, files, exe, extra_env = interpreter_layout()
    fds: list[int] = []
    root = os.geteuid() == 0
    if root:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable(
                "running as root, the sandbox drops to an unprivileged uid with 'setpriv' (util-linux), "
                "which is not installed: 'sudo apt-get install util-linux'"
            )
        opts = [
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_SETUID",
            "--cap-add",
            "CAP_SETGID",
        ]
    else:
        opts = [
            "--unshare-all",
            "--unshare-user",
            "--uid",
            str(_NOBODY),
            "--gid",
            str(_NOBODY),
            "--disable-userns",
            "--cap-drop",
            "ALL",
        ]
    opts += [
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        # the private /tmp first: a later bind below /tmp stays visible on it
        "--size",
        str(tmp_mb << 20),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / top
        if host.is_symlink():
            opts += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            opts += ["--ro-bind", str(host), str(host)]
    if Path("/etc/ld.so.cache").exists():
        opts += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for host, inside in binds:
        opts += ["--ro-bind", host, inside]
    for inside, content in files:
        if inside.endswith("/bin/python"):
            opts += ["--symlink", content, inside]
        else:
            fd = _data_fd(content.encode())
            fds.append(fd)
            opts += ["--perms", "0444", "--ro-bind-data", str(fd), inside]
    venv_lib = [inside for _, inside in binds if inside == VENV_DIR + "/lib"]
    for record in _hidden_install_records():
        site = os.path.realpath(os.path.join(sys.prefix, "lib"))
        if venv_lib and _inside(record, site):
            opts += ["--ro-bind", "/dev/null", VENV_DIR + "/lib" + record[len(site) :]]
    plugins = _plugin_dirs()
    for path in plugins:
        opts += ["--ro-bind", path, path]
    opts += [
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
    for dest, content in sorted(freeze.HOST_FILES.items()):  # constant host identity over the fresh /proc
        fd = _data_fd(content.encode())
        fds.append(fd)
        opts += ["--perms", "0444", "--ro-bind-data", str(fd), dest]
    for key, value in {**worker_environment(os.pathsep.join([_APP_DIR, *plugins])), **extra_env}.items():
        opts += ["--setenv", key, value]
    opts = _with_parents(opts)
    args_fd = _data_fd(b"".join(a.encode() + b"\0" for a in opts))
    fds.append(args_fd)
    if command is None:
        # its /tmp is this instance's own (fixed names in it); an instance for one environment: only its source
        command = [
            exe,
            "-P",
            "-m",
            "pipeline.execution.worker",
            "--private-tmp",
            *(["--preload", preload] if preload else []),
        ]
    slot = None
    if root:
        slot = UidSlot()
        command = [
            setpriv,
            f"--reuid={slot.uid}",
            f"--regid={slot.uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--no-new-privs",
            *command,
        ]
    return Launch([bwrap, "--args", str(args_fd), "--", *command], {}, "/", tuple(fds), slot)


def worker_command(isolation: str, tmp_mb: int, preload: str | None = None) -> Launch:
    """How to start a worker under ``isolation``; ``preload``: the one source whose modules it imports (an
    instance for one environment), else every source's."""
    if isolation == "bwrap":
        return bwrap_command(tmp_mb, preload=preload)
    if isolation == "trusted":
        pythonpath = os.pathsep.join([str(_PROJECT_ROOT), *_plugin_dirs()])
        argv = [sys.executable, "-P", "-m", "pipeline.execution.worker", *(["--preload", preload] if preload else [])]
        return Launch(argv, worker_environment(pythonpath), str(_PROJECT_ROOT))
    raise SandboxUnavailable(f"unknown sandbox isolation {isolation!r}; choose one of {', '.join(ISOLATIONS)}")


def checked_isolation(value: str) -> str:
    """``value`` when it is an isolation (``ISOLATIONS``), else a SandboxUnavailable naming the choices."""
    if value not in ISOLATIONS:
        raise SandboxUnavailable(
            f"sandbox isolation {value!r} (ENVSIM_SANDBOX, or the sandbox resource's isolation) "
            f"is not one: choose one of {', '.join(ISOLATIONS)}"
        )
    return value
