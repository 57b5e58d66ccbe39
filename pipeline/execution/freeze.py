"""Frozen clock and seeded randomness for one trajectory (docs/environments.md, "Determinism"; definitions §4.4).

``install`` (in the sandbox child) makes everything environment code can use to observe time, the host or
randomness a deterministic function of (trajectory id, run seed, clock start, step); ``at_step(i)`` moves it to
action *i*; ``frozen(...)`` is the in-process form, a context manager that restores everything.
"""

from __future__ import annotations

import builtins
import copyreg
import datetime as _dt
import hashlib
import io
import os
import platform as _platform
import random as _random
import resource as _resource
import secrets as _secrets
import shutil
import socket as _socket
import stat
import subprocess
import sys
import tempfile as _tempfile
import time as _time
import types
import uuid as _uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from pipeline.core.clock import DEFAULT_CLOCK_START, STEP_SECONDS, parse_clock_start
from pipeline.envs import registry

#: the monotonic clocks advance this much per read
TICK_SECONDS = 0.001
#: the CPU clocks read at least ``(i + 1) × CPU_STEP_SECONDS`` at action *i*
CPU_STEP_SECONDS = 1.0
#: ``clock_gettime`` ids that read the wall clock, and those that read the CPU counter
_WALL_CLOCK_IDS = {getattr(_time, n) for n in ("CLOCK_REALTIME", "CLOCK_TAI") if hasattr(_time, n)} | {5, 8}
_CPU_CLOCK_IDS = {
    getattr(_time, n) for n in ("CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID") if hasattr(_time, n)
}
UPTIME = "/proc/uptime"
#: what the sandbox says the host is (``uname``, ``platform``, ``gethostname``, the bwrap UTS hostname)
HOSTNAME = "envsim"
HOST_RELEASE = "envsim"
HOST_VERSION = "#1 envsim"
#: ``/proc`` files that identify the host -> the constant content ``open()`` gives (bwrap also binds them)
HOST_FILES = {
    "/proc/sys/kernel/random/boot_id": "00000000-0000-4000-8000-000000000000\n",
    "/proc/sys/kernel/osrelease": f"{HOST_RELEASE}\n",
    "/proc/sys/kernel/version": f"{HOST_VERSION}\n",
    "/proc/sys/kernel/hostname": f"{HOSTNAME}\n",
    "/proc/version": f"Linux version {HOST_RELEASE} {HOST_VERSION}\n",
    "/proc/loadavg": "0.00 0.00 0.00 1/1 1\n",
}

#: the clock below Python: a preload library (clock_below.c, :func:`clock_library`) answers libc's wall-clock
#: reads with ``ENVSIM_FROZEN_TIME``, which a child sets to its frozen clock (unset: the real ones). libfaketime
#: does not fit (a /dev/shm segment per process; it refuses ``time.sleep``). Raw system calls stay real.
FROZEN_TIME_VARIABLE = "ENVSIM_FROZEN_TIME"
_CLOCK_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clock_below.c")


def clock_library() -> str | None:
    """The clock's preload library, built by the C compiler into a per-user cache once per source version (None:
    no compiler; the frozen clock is then Python's alone)."""
    with REAL.open(_CLOCK_SOURCE, "rb") as fh:
        digest = hashlib.blake2b(fh.read(), digest_size=8).hexdigest()
    directory = private_cache("envsim-clock")
    path = os.path.join(directory, f"clock-below-{digest}-{REAL.uname().machine}.so")
    if os.path.isfile(path):
        return path
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    partial = f"{path}.{os.getpid()}.tmp"
    built = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", partial, _CLOCK_SOURCE, "-ldl"], capture_output=True, check=False
    )
    if built.returncode != 0:
        return None
    os.chmod(partial, 0o644)
    os.replace(partial, path)
    return path


def private_cache(name: str) -> str:
    """``<cache home>/envsim-forge/<name>-<uid>``: a directory only this user can write, for what workers load;
    one another user made, or a symbolic link, is refused (its files would run in every worker)."""
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    base = os.path.join(home, "envsim-forge")
    try:
        os.makedirs(base, exist_ok=True)
    except OSError:
        base = _tempfile.gettempdir()
    directory = os.path.join(base, f"{name}-{os.geteuid()}")
    with suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise PermissionError(f"{directory} is not a directory of this user's alone: remove it and run again")
    return directory


def below_python() -> bool:
    """Whether the clock below Python is loaded in this process (libc's wall clock reads a probe value)."""
    probe = 86_400.5
    os.environ[FROZEN_TIME_VARIABLE] = repr(probe)
    try:
        return REAL.time() == probe
    finally:
        del os.environ[FROZEN_TIME_VARIABLE]


#: the machine the environment sees, whatever it runs on (CPU counts, affinity, ``sysconf`` memory; the clock
#: library answers libc the same way through ``ENVSIM_CPUS``)
HOST_CPUS = 2
HOST_MEMORY_MB = 4096
CPUS_VARIABLE = "ENVSIM_CPUS"
_SYSCONF_PINNED = {
    "SC_NPROCESSORS_CONF": HOST_CPUS,
    "SC_NPROCESSORS_ONLN": HOST_CPUS,
    "SC_PHYS_PAGES": (HOST_MEMORY_MB << 20) // os.sysconf("SC_PAGE_SIZE"),
    "SC_AVPHYS_PAGES": (HOST_MEMORY_MB << 20) // os.sysconf("SC_PAGE_SIZE"),
}
#: resource limits each sandbox worker pins (soft = hard; a lower hard limit stays), so children read the same
#: ones on any host; the enforced limits are set in worker.py
PINNED_RLIMITS = {
    _resource.RLIMIT_STACK: 8 << 20,
    _resource.RLIMIT_MEMLOCK: 64 << 10,
    _resource.RLIMIT_MSGQUEUE: 819_200,
    _resource.RLIMIT_SIGPENDING: 1024,
    _resource.RLIMIT_NICE: 0,
    _resource.RLIMIT_RTPRIO: 0,
    _resource.RLIMIT_RTTIME: 1_000_000,
}


def pin_limits(limits: dict[int, int] = PINNED_RLIMITS) -> None:
    """Set ``limits`` (soft = hard, never above the hard limit) in this process: by default
    :data:`PINNED_RLIMITS` (a sandbox worker, before its children exist)."""
    for limit, value in limits.items():
        _, hard = _resource.getrlimit(limit)
        value = value if hard == _resource.RLIM_INFINITY else min(value, hard)
        _resource.setrlimit(limit, (value, value))


def _cpu_count() -> int:
    return HOST_CPUS


def _sched_getaffinity(pid: int) -> set[int]:
    REAL.sched_getaffinity(pid)  # a pid that is not there raises as before
    return set(range(HOST_CPUS))


def _sysconf(name: Any) -> int:
    pinned = name if isinstance(name, str) else next((k for k, v in os.sysconf_names.items() if v == name), None)
    if pinned in _SYSCONF_PINNED:
        return _SYSCONF_PINNED[pinned]
    return REAL.sysconf(name)


#: the uid and gid the environment sees for itself and its files (the host uid varies by sandbox slot)
VISIBLE_ID = 65534
_OWN_IDS: list[int] = []  # the process's real (uid, gid), shown as VISIBLE_ID


def _visible_id() -> int:
    return VISIBLE_ID


def _visible_ids() -> tuple[int, int, int]:
    return (VISIBLE_ID,) * 3


_REAL_DATETIME = _dt.datetime
_REAL_DATE = _dt.date

REAL = types.SimpleNamespace(
    datetime=_dt.datetime,
    time=_time.time,
    perf_counter=_time.perf_counter,
    gmtime=_time.gmtime,
    strftime=_time.strftime,
    asctime=_time.asctime,
    clock_gettime=_time.clock_gettime,
    getrandom=getattr(os, "getrandom", None),
    open=builtins.open,
    stat=os.stat,
    lstat=os.lstat,
    fstat=os.fstat,
    scandir=os.scandir,
    uname=os.uname,
    getrusage=_resource.getrusage,
    process_cpu_count=getattr(os, "process_cpu_count", None),
    sched_getaffinity=os.sched_getaffinity,
    sysconf=os.sysconf,
    Random_seed=_random.Random.seed,
)
"""The real functions and classes the stand-ins call, as they were when this module was imported."""


class _Clock:
    """The state behind every patched function."""

    def __init__(self, trajectory_id: str, seed: int, clock_start: str | None) -> None:
        self.trajectory_id = trajectory_id
        self.seed = int(seed)
        self.clock_start = clock_start or DEFAULT_CLOCK_START
        self.start = parse_clock_start(self.clock_start)
        self.reads = 0  # how often the frozen wall clock was read (:func:`fingerprint`)
        self._now = self.start
        self.mono = 1000.0
        self.cpu = 0.0
        self.rng = _random.Random(0)
        self.inodes: dict[tuple[int, int], int] = {}  # real (device, inode) -> the one stat shows
        self.below = False  # the clock below Python is loaded: it follows this one (_sync_below)
        self.phase("reset")

    def seed_for(self, phase: str) -> int:
        digest = hashlib.blake2b(f"{self.seed}:{self.trajectory_id}:{phase}".encode(), digest_size=16).digest()
        return int.from_bytes(digest, "big")

    def phase(self, name: str) -> None:
        seed = self.seed_for(name)
        self.rng.seed(seed)
        _random.seed(seed ^ 0x5EED)
        _tempfile._name_sequence = None  # re-made (seeded from the stream) at the next temp name

    @property
    def now(self) -> float:
        """The frozen wall clock (each read counted)."""
        self.reads += 1
        return self._now

    @now.setter
    def now(self, value: float) -> None:
        self._now = value

    def tick(self) -> float:
        self.mono += TICK_SECONDS
        return self.mono

    def cpu_tick(self) -> float:
        self.cpu += TICK_SECONDS
        return self.cpu


_CLOCK: list[_Clock] = []
_BELOW: list[bool] = []  # whether the clock below Python is loaded in this process (below_python, probed once)
_SAVED: list[tuple[Any, str, Any]] = []  # (owner, attribute, original) to restore


def _clock() -> _Clock:
    return _CLOCK[-1]


class _FrozenMeta(type):
    """``isinstance``/``issubclass`` against the frozen class accept the real class's instances."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._real)  # type: ignore[attr-defined]

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls._real)  # type: ignore[attr-defined]


class FrozenDate(_REAL_DATE, metaclass=_FrozenMeta):
    """``datetime.date`` with a frozen ``today()``."""

    _real = _REAL_DATE

    def __repr__(self) -> str:
        return repr(_REAL_DATE(self.year, self.month, self.day))

    @classmethod
    def today(cls) -> FrozenDate:
        t = _REAL_DATETIME.fromtimestamp(_clock().now, _dt.UTC)
        return cls(t.year, t.month, t.day)


class FrozenDateTime(_REAL_DATETIME, metaclass=_FrozenMeta):
    """``datetime.datetime`` with frozen ``now()``, ``today()`` and ``utcnow()``."""

    _real = _REAL_DATETIME

    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> FrozenDateTime:
        if tz is None:
            return cls.utcnow()
        return cls.fromtimestamp(_clock().now, tz)

    @classmethod
    def today(cls) -> FrozenDateTime:
        return cls.utcnow()

    @classmethod
    def utcnow(cls) -> FrozenDateTime:
        aware = _REAL_DATETIME.fromtimestamp(_clock().now, _dt.UTC)
        return cls(aware.year, aware.month, aware.day, aware.hour, aware.minute, aware.second, aware.microsecond)

    def date(self) -> FrozenDate:  # type: ignore[override]
        return FrozenDate(self.year, self.month, self.day)

    def __repr__(self) -> str:
        return repr(_REAL_DATETIME.combine(self.date(), self.timetz()))


for _cls, _name in ((FrozenDate, "date"), (FrozenDateTime, "datetime")):
    _cls.__name__ = _cls.__qualname__ = _name  # type(x).__name__ as env code expects


# -- patched functions ----------------------------------------------------------------------------


def _ns(seconds: Any) -> Any:
    """The ``*_ns`` form of a frozen clock function."""

    def ns(*args: Any) -> int:
        return int(round(seconds(*args) * 1_000_000_000))

    return ns


def _time_time() -> float:
    return _clock().now


def _monotonic() -> float:
    return _clock().tick()


def _gmtime(secs: float | None = None) -> _time.struct_time:
    """``gmtime`` and ``localtime`` (the frozen zone is UTC)."""
    return REAL.gmtime(_clock().now if secs is None else secs)


def _strftime(fmt: str, t: Any = None) -> str:
    return REAL.strftime(fmt, _gmtime() if t is None else t)


def _ctime(secs: float | None = None) -> str:
    return REAL.asctime(_gmtime(secs))


def _asctime(t: Any = None) -> str:
    return REAL.asctime(_gmtime() if t is None else t)


def _urandom(n: int) -> bytes:
    return _clock().rng.randbytes(int(n))


def _uuid4() -> _uuid.UUID:
    return _uuid.UUID(bytes=_clock().rng.randbytes(16), version=4)


def _uuid1(node: int | None = None, clock_seq: int | None = None) -> _uuid.UUID:
    c = _clock()
    # 100-ns intervals since the Gregorian epoch; the draw keeps ids of one call distinct
    timestamp = int(c.now * 10_000_000) + 0x01B21DD213814000 + c.rng.getrandbits(12)
    if clock_seq is None:
        clock_seq = c.rng.getrandbits(14)
    if node is None:
        node = c.rng.getrandbits(48) | 0x010000000000  # multicast bit: not a real MAC
    fields = (
        timestamp & 0xFFFFFFFF,
        (timestamp >> 32) & 0xFFFF,
        (timestamp >> 48) & 0x0FFF,
        (clock_seq >> 8) & 0x3F,
        clock_seq & 0xFF,
        node,
    )
    return _uuid.UUID(fields=fields, version=1)


class SeededSystemRandom(_random.Random):
    """``random.SystemRandom`` drawing from the trajectory's stream instead of the OS."""

    def __init__(self, x: Any = None) -> None:
        super().__init__(_clock().rng.getrandbits(128))

    def seed(self, *args: Any, **kwargs: Any) -> None:
        if args and args[0] is not None or kwargs:
            return super().seed(*args, **kwargs)
        return super().seed(_clock().rng.getrandbits(128))


def _secrets_choice(seq: Any) -> Any:
    return _clock().rng.choice(seq)


def _secrets_randbits(k: int) -> int:
    return _clock().rng.getrandbits(k)


class _SecretsRandom:
    """``secrets._sysrand`` stand-in (``randbelow`` uses its ``_randbelow``)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_clock().rng, name)


def _cpu_time() -> float:
    return _clock().cpu_tick()


def _clock_gettime(clk_id: int) -> float:
    if clk_id in _WALL_CLOCK_IDS:
        return _clock().now
    if clk_id in _CPU_CLOCK_IDS:
        return _clock().cpu_tick()
    REAL.clock_gettime(clk_id)  # an invalid id raises as before
    return _clock().tick()


def _times() -> os.times_result:
    c = _clock()
    return os.times_result((c.cpu_tick(), 0.0, 0.0, 0.0, c.tick()))


def _getrandom(size: int, flags: int = 0) -> bytes:
    if int(size) < 0:
        raise ValueError("negative argument not allowed")
    return _clock().rng.randbytes(int(size))


def _random_seed(a: Any = None, version: int = 2) -> None:
    """``random.seed``: no argument (or ``None``) seeds from the trajectory's stream, not the OS."""
    _random._inst.seed(a, version)


def _Random_seed(self: _random.Random, a: Any = None, version: int = 2) -> None:
    """``random.Random.seed`` (also what ``Random()`` calls): ``None`` draws the seed from the stream."""
    if a is None:
        a = _clock().rng.getrandbits(128) if self is not _clock().rng else 0
    REAL.Random_seed(self, a, version)


def _frozen_content(file: Any) -> str | None:
    """What reading ``file`` gives while frozen: ``/proc/uptime`` the frozen monotonic counter, a host-identity
    ``/proc`` file its constant content (None: the real file)."""
    try:
        path = os.fspath(file)
    except TypeError:
        return None  # a file descriptor
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    norm = os.path.normpath(path)
    if norm == UPTIME:
        return f"{_clock().tick():.2f} 0.00\n"
    if not path.startswith("/proc") or norm.startswith(("/proc/self/", "/proc/thread-self/")):
        return None
    return HOST_FILES.get(norm)


def _open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    """``open``/``io.open``: the frozen content of :func:`_frozen_content`'s files, read-only."""
    text = _frozen_content(file) if isinstance(mode, str) and set(mode) <= set("rbt") else None
    if text is not None:
        return io.BytesIO(text.encode()) if "b" in mode else io.StringIO(text)
    return REAL.open(file, mode, *args, **kwargs)


#: the device number every ``stat`` shows
FILE_DEVICE = 1
_TIME_FIELDS = ("st_atime", "st_mtime", "st_ctime")


def _frozen_stat(st: os.stat_result) -> os.stat_result:
    """``st`` with every file time the frozen wall clock, one device and inodes numbered in the order this
    trajectory first saw them (``samefile`` still works)."""
    clock = _clock()
    now = clock.now
    fields = list(st[:10])
    fields[1] = clock.inodes.setdefault((st.st_dev, st.st_ino), len(clock.inodes) + 1)
    fields[2] = FILE_DEVICE
    fields[4:6] = [VISIBLE_ID if v == own else v for v, own in zip(fields[4:6], _OWN_IDS or (-1, -1))]
    fields[7] = fields[8] = fields[9] = int(now)
    extra = {
        name: getattr(st, name)
        for name in ("st_blksize", "st_blocks", "st_rdev", "st_flags", "st_gen", "st_birthtime", "st_birthtime_ns")
        if hasattr(st, name)
    }
    times = _TIME_FIELDS + (("st_birthtime",) if "st_birthtime" in extra else ())
    for name in times:
        extra[name] = now
        extra[name + "_ns"] = int(round(now * 1_000_000_000))
    return os.stat_result(fields, extra)


def _frozen_stat_of(real: Any) -> Any:
    """``os.stat``/``lstat``/``fstat`` giving :func:`_frozen_stat` results."""

    def frozen_stat(*args: Any, **kwargs: Any) -> os.stat_result:
        return _frozen_stat(real(*args, **kwargs))

    return frozen_stat


_stat, _lstat, _fstat = (_frozen_stat_of(f) for f in (REAL.stat, REAL.lstat, REAL.fstat))


class _FrozenDirEntry:
    """An ``os.DirEntry`` whose ``stat()`` gives frozen file times."""

    __slots__ = ("_entry",)

    def __init__(self, entry: Any) -> None:
        self._entry = entry

    name = property(lambda self: self._entry.name)
    path = property(lambda self: self._entry.path)

    def inode(self) -> int:
        return self.stat(follow_symlinks=False).st_ino

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return self._entry.is_dir(follow_symlinks=follow_symlinks)

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._entry.is_file(follow_symlinks=follow_symlinks)

    def is_symlink(self) -> bool:
        return self._entry.is_symlink()

    def is_junction(self) -> bool:
        return False

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return _frozen_stat(self._entry.stat(follow_symlinks=follow_symlinks))

    def __fspath__(self) -> Any:
        return self._entry.__fspath__()

    def __repr__(self) -> str:
        return repr(self._entry)


class _FrozenScandir:
    """``os.scandir``'s iterator (and context manager), yielding :class:`_FrozenDirEntry`."""

    def __init__(self, it: Any) -> None:
        self._it = it

    def __iter__(self) -> _FrozenScandir:
        return self

    def __next__(self) -> _FrozenDirEntry:
        return _FrozenDirEntry(next(self._it))

    def close(self) -> None:
        self._it.close()

    def __enter__(self) -> _FrozenScandir:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._it.close()


def _scandir(path: Any = ".") -> _FrozenScandir:
    return _FrozenScandir(REAL.scandir(path))


def _getrusage(who: int) -> _resource.struct_rusage:
    REAL.getrusage(who)  # an invalid ``who`` raises as before
    return _resource.struct_rusage((_clock().cpu_tick(),) + (0,) * 15)


def _getloadavg() -> tuple[float, float, float]:
    return (0.0, 0.0, 0.0)


def _uname() -> os.uname_result:
    return os.uname_result(("Linux", HOSTNAME, HOST_RELEASE, HOST_VERSION, REAL.uname().machine))


def _gethostname() -> str:
    return HOSTNAME


def _sleep(secs: float) -> None:
    """``time.sleep``: the frozen clocks advance by ``secs`` at once, without waiting."""
    secs = float(secs)
    if not secs >= 0:
        raise ValueError("sleep length must be non-negative")
    c = _clock()
    c.now += secs
    c.mono += secs
    _sync_below(c)


def _sync_below(clock: _Clock) -> None:
    """Set the clock below Python to the frozen wall clock."""
    if clock.below:
        os.environ[FROZEN_TIME_VARIABLE] = repr(clock.now)


_MONOTONIC_NS, _CPU_TIME_NS = _ns(_monotonic), _ns(_cpu_time)
_TIME_PATCHES = {
    "time": _time_time,
    "time_ns": _ns(_time_time),
    "monotonic": _monotonic,
    "monotonic_ns": _MONOTONIC_NS,
    "perf_counter": _monotonic,
    "perf_counter_ns": _MONOTONIC_NS,
    "localtime": _gmtime,
    "gmtime": _gmtime,
    "strftime": _strftime,
    "ctime": _ctime,
    "asctime": _asctime,
    "clock_gettime": _clock_gettime,
    "clock_gettime_ns": _ns(_clock_gettime),
    "process_time": _cpu_time,
    "process_time_ns": _CPU_TIME_NS,
    "thread_time": _cpu_time,
    "thread_time_ns": _CPU_TIME_NS,
    "sleep": _sleep,
}


def _rebuild(kind: str, state: bytes, tz: Any = None) -> Any:
    """Unpickle a date/datetime as the real class."""
    cls = _REAL_DATETIME if kind == "datetime" else _REAL_DATE
    return cls(state, tz) if tz is not None else cls(state)


def _reduce(value: Any) -> Any:
    """Pickle dates/datetimes by value (while installed, pickle's by-name lookup finds the frozen class)."""
    kind = "datetime" if isinstance(value, _REAL_DATETIME) else "date"
    state = value.__reduce__()[1]
    return (_rebuild, (kind, *state))


_PICKLED = (_REAL_DATETIME, _REAL_DATE, FrozenDateTime, FrozenDate)


def _set(owner: Any, name: str, value: Any) -> None:
    _SAVED.append((owner, name, getattr(owner, name)))
    setattr(owner, name, value)


_EARLY: list[tuple[Any, str, int]] = []  # (module, attribute, id of the real object) found by prepare()


#: (owner, attribute, stand-in) patched by :func:`install` whose early-bound copies in env modules are rebound too
_REBOUND = (
    *((_time, name, fn) for name, fn in _TIME_PATCHES.items()),
    (os, "urandom", _urandom),
    (os, "times", _times),
    (os, "stat", _stat),
    (os, "lstat", _lstat),
    (os, "fstat", _fstat),
    (os, "scandir", _scandir),
    (os, "uname", _uname),
    (os, "getloadavg", _getloadavg),
    (os, "cpu_count", _cpu_count),
    (os, "sched_getaffinity", _sched_getaffinity),
    (os, "sysconf", _sysconf),
    *([(os, "getrandom", _getrandom)] if REAL.getrandom is not None else []),
    (_resource, "getrusage", _getrusage),
    (_socket, "gethostname", _gethostname),
    (_random, "seed", _random_seed),
    (_uuid, "uuid4", _uuid4),
    (_uuid, "uuid1", _uuid1),
)
_STAND_INS = {id(getattr(owner, name)): fn for owner, name, fn in _REBOUND}  # the real object's id -> stand-in


def _replacements() -> dict[int, Any]:
    return {id(_REAL_DATETIME): FrozenDateTime, id(_REAL_DATE): FrozenDate, **_STAND_INS}


def prepare() -> None:
    """Find, once before forking, the names env modules bound to the real objects (a child then rebinds a short
    list instead of scanning modules, which would copy most of the inherited heap)."""
    replacements = _replacements()
    prefixes = registry.module_prefixes()  # each adapter declares the modules it imports in the worker
    _EARLY.clear()
    for modname, module in list(sys.modules.items()):
        if module is None or not modname.startswith(prefixes):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            if id(value) in replacements:
                _EARLY.append((module, attr, id(value)))
    _EARLY.append((None, "", 0))  # marks "prepared" even when nothing was found


def _rebind_early_names() -> None:
    """Rebind names that env modules imported before the fork bound to the real objects."""
    if not _EARLY:
        prepare()
    replacements = _replacements()
    if _clock().below:  # datetime's classes stay the real ones (the clock below Python freezes their now())
        replacements.pop(id(_REAL_DATETIME))
        replacements.pop(id(_REAL_DATE))
    for module, attr, real_id in _EARLY:
        if module is not None and real_id in replacements and id(getattr(module, attr, None)) == real_id:
            _set(module, attr, replacements[real_id])


def fingerprint() -> tuple[Any, ...]:
    """Where the frozen clock and every seeded stream stand: unchanged across code that read neither."""
    c = _clock()
    return (c.reads, c._now, c.mono, c.cpu, c.rng.getstate(), _random.getstate(), _tempfile._name_sequence is None)


def installed() -> bool:
    """Whether a frozen clock is active in this process."""
    return bool(_CLOCK)


def install(trajectory_id: str, seed: int, clock_start: str | None) -> None:
    """Freeze the clock and seed all randomness of this process for one trajectory; called again, it re-targets
    the active clock to another trajectory without patching twice."""
    clock = _Clock(trajectory_id, seed, clock_start)
    if not _BELOW:  # probed once per process (the probe moves the variable: the environment's order must not)
        _BELOW.append(below_python())
    clock.below = _BELOW[0]
    _sync_below(clock)
    if _CLOCK:
        _CLOCK[-1] = clock
        return
    _CLOCK.append(clock)
    if not clock.below:  # without the clock below Python, datetime's own now()/today() are replaced
        for cls in _PICKLED:
            copyreg.pickle(cls, _reduce)
        _set(_dt, "datetime", FrozenDateTime)
        _set(_dt, "date", FrozenDate)
    for owner, name, fn in _REBOUND:
        _set(owner, name, fn)
    _OWN_IDS[:] = [os.getuid(), os.getgid()]
    for name in ("getuid", "geteuid", "getgid", "getegid"):
        _set(os, name, _visible_id)
    _set(os, "getresuid", _visible_ids)
    _set(os, "getresgid", _visible_ids)
    if REAL.process_cpu_count is not None:
        _set(os, "process_cpu_count", _cpu_count)
    os.environ[CPUS_VARIABLE] = str(HOST_CPUS)  # libc's answers (the clock library)
    _set(_platform, "_uname_cache", None)  # re-made from the frozen os.uname
    _set(_platform, "_platform_cache", {})
    _set(builtins, "open", _open)
    _set(io, "open", _open)
    _set(_random.Random, "seed", _Random_seed)
    _set(_random, "SystemRandom", SeededSystemRandom)
    _set(_secrets, "_sysrand", _SecretsRandom())
    _set(_secrets, "choice", _secrets_choice)
    _set(_secrets, "randbits", _secrets_randbits)
    _set(_secrets, "SystemRandom", SeededSystemRandom)
    _rebind_early_names()


def at_step(step_index: int) -> None:
    """Move the frozen clock to action ``step_index`` and reseed its random streams (before executing it)."""
    c = _clock()
    c.now = c.start + (step_index + 1) * STEP_SECONDS
    c.mono = max(c.mono, 1000.0 + (step_index + 1) * STEP_SECONDS)
    c.cpu = max(c.cpu, (step_index + 1) * CPU_STEP_SECONDS)
    c.phase(f"step:{step_index}")
    _sync_below(c)


def uninstall() -> None:
    """Restore every patched name (the in-process path; a sandbox child just exits)."""
    while _SAVED:
        owner, name, original = _SAVED.pop()
        setattr(owner, name, original)
    for cls in _PICKLED:
        copyreg.dispatch_table.pop(cls, None)
    if _CLOCK and _CLOCK[-1].below:
        os.environ.pop(FROZEN_TIME_VARIABLE, None)
    os.environ.pop(CPUS_VARIABLE, None)
    _CLOCK.clear()
    _OWN_IDS.clear()


def install_for(trajectory: Any) -> None:
    """``install`` with a trajectory's own id, seed and clock start, on its host profile (:func:`host_profile`)."""
    install(trajectory.trajectory_id, getattr(trajectory, "seed", 0), getattr(trajectory, "clock_start", None))
    host_profile(getattr(trajectory, "meta", {}).get(HOST_PROFILE) == VARIED)


#: a trajectory's ``meta`` key naming its host profile; :data:`VARIED`: the determinism check's re-execution
HOST_PROFILE, VARIED = "host_profile", "varied"
_AFFINITY: list[set[int]] = []  # the real CPU set this process started with


def host_profile(varied: bool) -> None:
    """Run on the ordinary host profile, or on the varied one (the real CPU affinity is its last CPU alone), so
    the determinism check sees what reads the machine past the pinned values; the frozen clock is not shifted."""
    if not _AFFINITY:
        _AFFINITY.append(set(REAL.sched_getaffinity(0)))
    cpus = sorted(_AFFINITY[0])
    with suppress(OSError):  # a machine that does not let it pin itself: the clock and seeds still apply
        os.sched_setaffinity(0, {cpus[-1]} if varied and len(cpus) > 1 else set(cpus))


@contextmanager
def frozen(trajectory_id: str, seed: int, clock_start: str | None) -> Iterator[None]:
    """In-process form of ``install``: patched inside the block, restored after it (``random``'s state too)."""
    if _CLOCK:
        raise RuntimeError("a frozen clock is already installed in this process")
    random_state = _random.getstate()
    install(trajectory_id, seed, clock_start)
    try:
        yield
    finally:
        uninstall()
        _random.setstate(random_state)
