"""How sandbox workers are started: inside ``bwrap`` (the default), or, for trusted code only, as plain
subprocesses (``trusted``; never chosen silently). What the bwrap sandbox shows and hides is
docs/environments.md ("Sandbox").
"""

from __future__ import annotations

import compileall
import fcntl
import functools
import hashlib
import itertools
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.registry import plugin_paths
from pipeline.execution import freeze
from pipeline.execution.frames import write_bytes

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
        **RUNTIME_THREADS,
    }


#: native libraries start one thread each, not a pool sized by the host's CPUs (numpy and pandas import)
RUNTIME_THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _interpreter_paths() -> list[str]:
    """Directories the worker's interpreter needs, read-only (outside /usr)."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    return sorted(p for p in paths if not _inside(p, "/usr") and os.path.isdir(p))


def _plugin_dirs() -> list[str]:
    """Plugin package directories outside the interpreter's own paths (a ``pip install --target`` on
    ``PYTHONPATH``): the worker sees them read-only at the same path, so it registers the same plugins."""
    inside = [*_interpreter_paths(), "/usr"]
    return [p for p in plugin_paths() if not any(_inside(p, top) for top in inside)]


def _tool(name: str, missing: str) -> str:
    """The path of the program ``name``, or a SandboxUnavailable saying how to install it."""
    path = shutil.which(name)
    if path is None:
        raise SandboxUnavailable(missing)
    return path


#: under root every bwrap sandbox runs as a host uid of its own, ``UID_BASE + slot`` (uid = gid), owner of no
#: file it can see, so owner checks, file modes and RLIMIT_NPROC hold for it alone
UID_BASE, UID_SLOTS = 200_000, 50_000
UID_LOCKS = "/run/envsim-sandbox-uids"  # one lock file per slot, flock'd while a sandbox holds it
_PROBE = itertools.count()
_RELEASE = threading.RLock()  # re-entrant: __del__ may run inside release (the collector)


class UidSlot:
    """A host uid no other sandbox holds (under root): an exclusive ``flock`` of its slot's lock file, held while
    the sandbox lives (released with the descriptor, also when this process dies)."""

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
        """Give the slot back (once: a pool's closing thread and a host's reader thread may both end the host)."""
        with _RELEASE:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    __del__ = release


PYTHON_DIR = "/python"  # the interpreter's installation inside (when it is not under /usr)
VENV_DIR = "/venv"  # the virtual environment inside: a generated pyvenv.cfg and its lib/ only


@dataclass
class Launch:
    """How to start one worker: ``argv``, its whole environment, working directory and the descriptors it
    inherits; :meth:`close` after starting it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    pass_fds: tuple[int, ...] = ()
    uid: UidSlot | None = None  # under root: the host uid it runs as (release when it has ended)

    def close(self) -> None:
        for fd in self.pass_fds:
            os.close(fd)
        self.pass_fds = ()


def _data_fd(content: bytes) -> int:
    """A pipe's read end holding ``content`` (bwrap reads it to EOF)."""
    r, w = os.pipe()
    try:
        write_bytes(w, content)
    finally:
        os.close(w)
    return r


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def interpreter_layout(opts: _Options) -> tuple[str, dict[str, str]]:
    """Bind the interpreter (outside ``/usr``: at :data:`PYTHON_DIR`) and virtual environment (its ``lib`` at
    :data:`VENV_DIR`, a ``pyvenv.cfg`` written for it, pip's records naming the checkout hidden); returns (the
    executable inside, extra variables)."""
    base = os.path.realpath(sys.base_prefix)
    exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    env: dict[str, str] = {}
    if not _inside(base, "/usr"):
        opts.put("--ro-bind", base, PYTHON_DIR)
        exe = PYTHON_DIR + "/" + os.path.relpath(exe, base) if _inside(exe, base) else exe
        if os.path.isdir(os.path.join(base, "lib")):
            env["LD_LIBRARY_PATH"] = PYTHON_DIR + "/lib"  # a shared libpython found by its (host) RUNPATH
    prefix = os.path.realpath(sys.prefix)
    if prefix == base:
        return exe, env
    opts.put("--ro-bind", os.path.join(prefix, "lib"), VENV_DIR + "/lib")
    version = ".".join(map(str, sys.version_info[:3]))
    cfg = f"home = {os.path.dirname(exe)}\ninclude-system-site-packages = false\nversion = {version}\n"
    opts.data(VENV_DIR + "/pyvenv.cfg", cfg)
    opts.put("--symlink", exe, VENV_DIR + "/bin/python")
    site = os.path.realpath(os.path.join(sys.prefix, "lib"))
    for record in _hidden_install_records():
        if _inside(record, site):
            opts.put("--ro-bind", "/dev/null", VENV_DIR + "/lib" + record[len(site) :])
    return VENV_DIR + "/bin/python", env


def _hidden_install_records() -> list[str]:
    """Files pip wrote into site-packages that name the checkout (/dev/null is bound over them inside)."""
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


class _Options(list[str]):
    """bwrap options; :meth:`put` makes every missing parent of its destination first, mode 0755 (as root bwrap
    makes them 0700: the sandbox's uid could not reach below)."""

    def __init__(self, *opts: str) -> None:
        super().__init__(opts)
        self.made = {"/", "/usr", "/tmp", "/proc", "/dev"}
        self.fds: list[int] = []

    def put(self, *opt: str) -> None:
        """An option whose last argument is its destination inside."""
        parent, missing = os.path.dirname(opt[-1]), []
        while parent not in self.made and parent != "/":
            missing.append(parent)
            parent = os.path.dirname(parent)
        for directory in reversed(missing):
            self += ["--perms", "0755", "--dir", directory]
            self.made.add(directory)
        self.made.add(opt[-1])
        self += opt

    def data(self, inside: str, content: str) -> None:
        """A read-only file inside holding ``content`` (through a pipe bwrap reads)."""
        fd = _data_fd(content.encode())
        self.fds.append(fd)
        self.put("--perms", "0444", "--ro-bind-data", str(fd), inside)


#: under root: no user namespace; ``setpriv`` drops to a uid of its own after the children's tmpfs is mounted
_AS_ROOT = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
_AS_ROOT_CAPS = ("--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")
_AS_ROOT_CAPS += ("--cap-add", "CAP_SYS_ADMIN")
#: otherwise: a user namespace maps the caller to 65534
_AS_USER = ("--unshare-all", "--unshare-user", "--uid", str(_NOBODY), "--gid", str(_NOBODY), "--disable-userns")


def _bind_system(opts: _Options) -> tuple[str, dict[str, str]]:
    """Bind ``/usr``, the top-level system directories, the interpreter, the clock library and plugin
    directories; returns (the executable, variables)."""
    opts.put("--ro-bind", "/usr", "/usr")
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / top
        if host.is_symlink():
            opts.put("--symlink", os.readlink(host), str(host))
        elif host.is_dir():
            opts.put("--ro-bind", str(host), str(host))
    if Path("/etc/ld.so.cache").exists():
        opts.put("--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache")
    exe, env = interpreter_layout(opts)
    env.update(_bind_clock(opts))
    plugins = _plugin_dirs()
    for path in plugins:
        opts.put("--ro-bind", path, path)
    return exe, {**worker_environment(os.pathsep.join([_APP_DIR, *plugins])), **env}


#: the sandbox's synthetic ``/etc``: its user (:data:`freeze.VISIBLE_ID`), ``localhost``, files-only name services,
#: and a constant ``mime.types``
ETC_FILES = {
    "/etc/passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\nenvsim:x:{freeze.VISIBLE_ID}:{freeze.VISIBLE_ID}:"
    f"envsim sandbox:/tmp:/usr/sbin/nologin\n",
    "/etc/group": f"root:x:0:\nenvsim:x:{freeze.VISIBLE_ID}:\n",
    "/etc/hosts": f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{freeze.HOSTNAME}\n",
    "/etc/nsswitch.conf": "".join(f"{db}: files\n" for db in ("passwd", "group", "hosts", "networks", "services")),
    "/etc/mime.types": (Path(__file__).parent / "mime.types").read_text(),
}
#: the only device nodes inside (no ``/dev/ptmx``, ``/dev/tty`` or ``/dev/full``)
DEVICES = ("null", "zero", "random", "urandom")


def _bind_etc_and_dev(opts: _Options) -> None:
    """A synthetic read-only ``/etc`` and a ``/dev`` of only :data:`DEVICES`, the descriptor links and a small
    ``/dev/shm``."""
    for dest, content in sorted(ETC_FILES.items()):
        opts.data(dest, content)
    opts.put("--size", str(64 << 10), "--perms", "0755", "--tmpfs", "/dev")
    for name in DEVICES:
        opts.put("--dev-bind", f"/dev/{name}", f"/dev/{name}")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        opts.put("--symlink", target, f"/dev/{name}")
    opts.put("--symlink", "/proc/self/fd/2", "/dev/stderr")
    opts.put("--size", str(SHM_MB << 20), "--tmpfs", "/dev/shm")


CLOCK_LIBRARY = "/opt/envsim-clock/clock-below.so"  # the clock below Python inside (freeze.clock_library)


def _bind_clock(opts: _Options) -> dict[str, str]:
    """The library below Python (:func:`pipeline.execution.freeze.clock_library`), bound read-only and preloaded;
    nothing when it cannot be built here."""
    library = freeze.clock_library()
    if library is None:
        return {}
    opts.put("--ro-bind", library, CLOCK_LIBRARY)
    return {"LD_PRELOAD": CLOCK_LIBRARY}


def _bind_private(opts: _Options) -> None:
    """The project's package at its neutral path, a fresh ``/proc`` with constant host files over it, the
    synthetic ``/etc`` and ``/dev``."""
    opts.put("--ro-bind", neutral_package(), f"{_APP_DIR}/pipeline")
    opts.put("--proc", "/proc")
    _bind_etc_and_dev(opts)
    opts += ["--remount-ro", "/dev", "--chdir", "/tmp", "--hostname", freeze.HOSTNAME]
    for dest, content in sorted(freeze.HOST_FILES.items()):
        opts.data(dest, content)


#: the program a sandbox worker runs (``python -m``)
WORKER_MODULE = "pipeline.execution.worker"


def bwrap_command(
    tmp_mb: int, command: list[str] | None = None, preload: str | None = None, module: str = WORKER_MODULE
) -> Launch:
    """The ``bwrap`` launch that runs one sandbox worker (or ``command``), its options through ``--args FD``
    (invisible inside); under root as a uid of its own (:class:`UidSlot`) through ``setpriv``, no capability."""
    bwrap = _tool(
        "bwrap",
        "the sandbox needs bubblewrap ('bwrap'), which is not installed: run './forge setup' (installs Debian's "
        "'bubblewrap' when it can) or 'sudo apt-get install bubblewrap'; to run only trusted environment code "
        "without isolation set ENVSIM_SANDBOX=trusted (or the sandbox resource's isolation: trusted)",
    )
    root = os.geteuid() == 0
    setpriv = ""
    if root:
        setpriv = _tool(
            "setpriv",
            "running as root, the sandbox drops to an unprivileged uid with 'setpriv' (util-linux), "
            "which is not installed: 'sudo apt-get install util-linux'",
        )
    opts = _Options(*(_AS_ROOT + _AS_ROOT_CAPS if root else _AS_USER + ("--cap-drop", "ALL")))
    opts += ["--die-with-parent", "--new-session", "--clearenv"]
    opts.put("--size", str(tmp_mb << 20), "--perms", "1777", "--tmpfs", "/tmp")  # first: binds below stay visible
    exe, env = _bind_system(opts)
    _bind_private(opts)
    for key, value in env.items():
        opts += ["--setenv", key, value]
    args_fd = _data_fd(b"".join(a.encode() + b"\0" for a in opts))
    fds = (*opts.fds, args_fd)
    if command is None:  # its /tmp is this instance's own; an instance for one environment: only its source
        command = [exe, "-P", "-m", module, "--private-tmp"]
        command += ["--preload", preload] if preload else []
    slot = UidSlot() if root else None
    if slot is not None:
        ids = [f"--reuid={slot.uid}", f"--regid={slot.uid}", "--clear-groups", "--inh-caps=-all", "--no-new-privs"]
        command = _with_inode_limit(tmp_mb, [setpriv, *ids, *command])
    return Launch([bwrap, "--args", str(args_fd), "--", *command], {}, "/", fds, slot)


#: inodes of an instance's ``/tmp``: what it holds in kernel memory stays bounded
TMP_INODES = 16_384
WORK_DIR = "/tmp/work"  # where a worker makes its children's directories (``worker._root``)


def _with_inode_limit(tmp_mb: int, command: list[str]) -> list[str]:
    """Under root: ``command`` run after :data:`WORK_DIR` is mounted as a root-owned sticky tmpfs of ``tmp_mb``
    MiB and :data:`TMP_INODES` inodes (bwrap's ``--tmpfs`` takes no inode count), with the sandbox's one
    ``CAP_SYS_ADMIN``, which ``setpriv`` drops before ``command`` runs."""
    mount = shutil.which("mount") or "/usr/bin/mount"
    options = f"size={tmp_mb << 20},nr_inodes={TMP_INODES},mode=1777,nosuid,nodev"
    script = f'mkdir -p {WORK_DIR} && {mount} -n -t tmpfs -o "$0" tmpfs {WORK_DIR} && exec "$@"'
    return ["/bin/sh", "-c", script, options, *command]


def kernel_memory_note(cgroup_root: str = "/sys/fs/cgroup") -> str:
    """One line for the start of a sandbox: whether a delegated cgroup v2 memory controller exists (the sandbox
    does not use one) and what bounds an instance's kernel memory instead."""
    controllers = os.path.join(cgroup_root, "cgroup.controllers")
    try:
        delegated = "memory" in Path(controllers).read_text().split() and os.access(cgroup_root, os.W_OK)
    except OSError:
        delegated = False
    where = "a delegated cgroup v2 memory controller is not used" if delegated else "no cgroup v2 memory controller"
    return (
        f"sandbox: {where}: an instance's kernel memory is bounded by its tmpfs (tmp_mb, {TMP_INODES} inodes under "
        "root), RLIMIT_AS, RLIMIT_NPROC and the refused channels (docs/environments.md 'Sandbox')"
    )


@functools.cache
def neutral_package() -> str:
    """A copy of the ``pipeline`` package alone, compiled as if it lay at its path inside (no ``.pyc`` names the
    checkout), built once per content in a per-user cache and bound read-only in its place."""
    source = _PROJECT_ROOT / "pipeline"
    files = sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.blake2b(sys.version.encode(), digest_size=12)
    for path in files:
        st = path.stat()
        digest.update(f"{path.relative_to(source)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    cache = Path(freeze.private_cache("envsim-package"))
    final = cache / digest.hexdigest()
    if not final.is_dir():
        partial = Path(tempfile.mkdtemp(dir=cache))
        for path in files:
            target = partial / "pipeline" / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        compileall.compile_dir(partial / "pipeline", ddir=f"{_APP_DIR}/pipeline", quiet=2)
        for path in (partial, *partial.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)  # readable by a sandbox's own uid
        try:
            partial.rename(final)
        except OSError:  # another process built it first
            shutil.rmtree(partial, ignore_errors=True)
    return str(final / "pipeline")


@functools.cache
def _compiled() -> None:
    """Compile the ``pipeline`` package where it lies, once per process, for a trusted worker."""
    compileall.compile_dir(_PROJECT_ROOT / "pipeline", quiet=2)


def worker_command(isolation: str, tmp_mb: int, preload: str | None = None, module: str = WORKER_MODULE) -> Launch:
    """How to start a worker under ``isolation``; ``preload``: the one adapter it imports (an instance), else
    every adapter; ``module``: the worker's program (or the session host of :mod:`pipeline.serve.host`)."""
    if isolation == "bwrap":
        return bwrap_command(tmp_mb, preload=preload, module=module)
    _compiled()
    pythonpath = os.pathsep.join([str(_PROJECT_ROOT), *_plugin_dirs()])  # trusted (checked_isolation holds)
    argv = [sys.executable, "-P", "-m", module, *(["--preload", preload] if preload else [])]
    library = freeze.clock_library()
    env = {**worker_environment(pythonpath), **({"LD_PRELOAD": library} if library else {})}
    return Launch(argv, env, str(_PROJECT_ROOT))


def checked_isolation(value: str) -> str:
    """``value`` when it is an isolation (``ISOLATIONS``), else a SandboxUnavailable naming the choices."""
    if value not in ISOLATIONS:
        raise SandboxUnavailable(
            f"sandbox isolation {value!r} (ENVSIM_SANDBOX, or the sandbox resource's isolation) "
            f"is not one: choose one of {', '.join(ISOLATIONS)}"
        )
    return value
