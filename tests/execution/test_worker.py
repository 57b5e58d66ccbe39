"""Corpus code never shares a process (issue 33, items 1 and 3): every trajectory of a corpus's environment
runs in a child that has run nothing else, so what one trajectory leaves behind in its process — a profile
hook, a replaced compiled-code cache, a registered codec, a gc callback, an unlinked file held open — cannot
reach a later trajectory, whatever the determinism check samples; a child cannot lock or watch a file
another environment's child can see."""

from __future__ import annotations

import ast

import pytest

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.execution import seccomp
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox

POISON = r'''
import codecs, gc, random, sys

MARKER = "clean"

def _profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "work":
        frame.f_locals["self"].n += 1000

def _search(name):
    if name == "envsim_victim_codec":
        return codecs.CodecInfo(lambda s, errors="strict": (b"POISONED", len(s)),
                                lambda b, errors="strict": ("POISONED", len(b)), name=name)
    return None

def _reseed(phase, info):
    random.seed(0)

class Ledger:
    def __init__(self, init_config=None):
        self.n = 0

    def poison(self, how):
        """Leaves something behind in its process."""
        if how == "setprofile":
            sys.setprofile(_profile)
        elif how == "compiled":
            blobs = sys.modules["pipeline.envs.blobs"]
            for ref in list(blobs._COMPILED):
                source = blobs._BLOBS[ref].replace('MARKER = "clean"', 'MARKER = "poisoned"')
                blobs._COMPILED[ref] = compile(source, "<poisoned>", "exec")
        elif how == "codecs":
            codecs.register(_search)
        elif how == "gc_callbacks":
            gc.callbacks.append(_reseed)
        return {"success": True}

    def work(self):
        """Benign: counts, encodes with a codec it falls back from, collects garbage and draws a number."""
        self.n += 1
        try:
            encoded = "abc".encode("envsim_victim_codec").decode("latin-1")
        except LookupError:
            encoded = "none"
        gc.collect()
        return {"n": self.n, "encoded": encoded, "draw": random.randint(0, 10 ** 9), "marker": MARKER}
'''

LIMITS = Limits(call_timeout_s=10, memory_mb=512, tmp_mb=48, reuse_children=8)


def _traj(env_id: str, code: str, cls: str, tid: str, *actions: tuple[str, dict], config: dict | None = None):
    item = envscaler.parse_env_item(env_id, {"env_class_name": cls, "env_class_code": code})
    assert not item.problems, item.problems
    return Trajectory(
        tid,
        "task",
        item.spec(config or {"owner": "victim"}),
        tuple(Action(n, dict(a), turn=i) for i, (n, a) in enumerate(actions)),
    )


def _labels(result: dict) -> list:
    assert result["init"] is not None, result["init_error"]
    return [(s["raw_observation"], s["outcome"], s["state_after_hash"], s["delta_size"]) for s in result["steps"]]


@pytest.fixture(scope="module")
def alone() -> list:
    victim = _traj("ledger", POISON, "Ledger", "victim", ("work", {}), ("work", {}))
    with Sandbox(workers=1, limits=LIMITS) as box:
        [result] = [r for _, r in box.run([victim])]
    labels = _labels(result)
    assert [ast.literal_eval(obs)["marker"] for obs, *_ in labels] == ["clean", "clean"]
    assert all(outcome == "success" for _, outcome, *_ in labels)
    return labels


@pytest.mark.parametrize("how", ["setprofile", "compiled", "codecs", "gc_callbacks"])
def test_a_poisoning_trajectory_of_corpus_code_cannot_change_a_later_trajectorys_labels(how, alone):
    """The same environment and configuration, poisoner first, on one worker (where a reused child would
    carry the poison): the victim labels byte for byte as alone. No determinism check is involved."""
    poisoner = _traj("ledger", POISON, "Ledger", "poisoner", ("poison", {"how": how}), ("work", {}))
    victim = _traj("ledger", POISON, "Ledger", "victim", ("work", {}), ("work", {}))
    with Sandbox(workers=1, limits=LIMITS) as box:
        results = [r for _, r in box.run([poisoner, victim])]
    assert results[0]["steps"][0]["outcome"] == "success"  # the poison was left behind
    assert _labels(results[1]) == alone


HOG = r'''
import os

class Hog:
    def __init__(self, init_config=None):
        self.held = 0

    def fill(self):
        """Writes 20 MiB into its directory, unlinks the file and keeps it open (the fd outlives the object)."""
        path = os.path.join(os.environ["TMPDIR"], "hog.bin")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        for _ in range(20):
            os.write(fd, b"x" * (1 << 20))
        os.unlink(path)
        self.held = 20
        return {"success": True, "held_mib": self.held}
'''

INNOCENT = r"""
import os

class Notes:
    def __init__(self, init_config=None):
        path = os.path.join(os.environ["TMPDIR"], "cache.bin")
        with open(path, "wb") as fh:  # its reset needs 16 MiB of scratch space
            fh.write(b"n" * (16 << 20))
        self.size = os.path.getsize(path)

    def size_of_cache(self):
        return {"success": True, "size": self.size}
"""


def test_unlinked_files_held_open_by_a_corpus_child_do_not_fill_a_later_environments_tmp():
    """Two trajectories of an environment that fills the worker's /tmp (48 MiB) with unlinked files it
    keeps open, then an innocent environment whose reset writes 16 MiB: its reset works."""
    hogs = [_traj("hog", HOG, "Hog", f"hog-{i}", ("fill", {})) for i in range(2)]
    innocent = _traj("notes", INNOCENT, "Notes", "innocent", ("size_of_cache", {}))
    with Sandbox(workers=1, limits=LIMITS) as box:
        results = [r for _, r in box.run([*hogs, innocent])]
    assert [r["steps"][0]["outcome"] for r in results[:2]] == ["success", "success"]
    assert results[2]["init"] is not None, results[2]["init_error"]
    assert ast.literal_eval(results[2]["steps"][0]["raw_observation"])["size"] == 16 << 20


LOCKER = r'''
import errno, fcntl, os, sqlite3, struct, sys

def _try(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

class Locker:
    def __init__(self, init_config=None):
        self.n = 0

    def lock_shared_files(self):
        """Locks and lock tests on a file every child can open (the installed pipeline package), and sqlite in
        its own directory."""
        shared = sys.modules["pipeline"].__file__
        fd = os.open(shared, os.O_RDONLY)
        out = {
            "flock_ex": _try(lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),
            "flock_sh": _try(lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
            "getlk": _try(lambda: fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))),
            "ofd_getlk": _try(lambda: fcntl.fcntl(fd, 36, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))),
            "write_lock": _try(lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),
        }
        os.close(fd)
        db = sqlite3.connect(os.path.join(os.environ["TMPDIR"], "notes.db"))
        db.execute("create table t (x)")
        db.execute("insert into t values (1)")
        db.commit()
        out["sqlite"] = db.execute("select count(*) from t").fetchone()[0]
        db.close()
        return out
'''


def test_a_child_cannot_take_a_lock_another_child_sees_on_a_shared_file_and_may_test_one():
    trajectory = _traj("locker", LOCKER, "Locker", "locker", ("lock_shared_files", {}))
    with Sandbox(workers=1, limits=LIMITS) as box:
        [result] = [r for _, r in box.run([trajectory])]
    assert result["init"] is not None, result["init_error"]
    out = ast.literal_eval(result["steps"][0]["raw_observation"])
    # flock (exclusive or shared) is refused naming itself, the OFD lock test too; a write lock needs a file opened
    # for writing, which a shared file never is; F_GETLK stays (sqlite's WAL tests its own -shm file with it): on a
    # shared file it shows another child's read lock, the channel between colluding environments
    # docs/environments.md names
    import pyseccomp

    flock = str(seccomp.REFUSED_ERRNO + pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "flock"))
    assert out == {
        "flock_ex": flock,
        "flock_sh": flock,
        "getlk": "ok",
        "ofd_getlk": "EPERM",
        "write_lock": "EBADF",
        "sqlite": 1,
    }, out
