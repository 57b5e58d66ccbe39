"""The audit hook (issue 33, item 3): environment code cannot switch it off. Its policy is not kept in a
closure cell, a global or a dict env code could rebind or fill (the attack that worked: replacing the
``watched`` set's closure cell), and its code and bound policy cannot be replaced."""

from __future__ import annotations

import ast

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.execution import guards
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox

ATTACK = r'''
import gc, socket, sys, types

def _socket():
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
        return "allowed"
    except PermissionError as exc:
        return "refused: " + str(exc)[:60]

class Unhook:
    def __init__(self, init_config=None):
        self.n = 0

    def unhook(self):
        """Finds the sandbox's audit hook and tries every way to switch it off, then opens a socket."""
        out = {"before": _socket()}
        hooks = [o for o in gc.get_objects() if isinstance(o, types.FunctionType)
                 and o.__module__ == "pipeline.execution.guards" and o.__name__ == "hook"]
        out["found"] = len(hooks)
        tries = {}
        for hook in hooks:
            for i, cell in enumerate(hook.__closure__ or ()):  # the issue's attack: its policy in a cell
                try:
                    value = cell.cell_contents
                    cell.cell_contents = frozenset() if isinstance(value, (set, frozenset)) else value
                    tries[f"cell{i}"] = "set"
                except Exception as exc:
                    tries[f"cell{i}"] = type(exc).__name__
            try:
                hook.__code__ = (lambda *a, **k: None).__code__
                tries["code"] = "set"
            except Exception as exc:
                tries["code"] = type(exc).__name__
            try:
                hook.__defaults__ = tuple(frozenset() for _ in hook.__defaults__ or ())
                tries["defaults"] = "set"
            except Exception as exc:
                tries["defaults"] = type(exc).__name__
            for value in list(hook.__defaults__ or ()) + [hook.__globals__]:
                if isinstance(value, (set, dict)):  # a mutable policy: empty it
                    value.clear() if isinstance(value, set) else [value.__setitem__(k, frozenset()) for k in list(value)
                                                                   if isinstance(value[k], (set, frozenset))]
                    tries["mutable"] = "cleared"
        guards = sys.modules["pipeline.execution.guards"]
        for name in ("_NETWORK", "_PROCESSES", "_NATIVE", "WATCHED"):  # its module's globals
            if hasattr(guards, name):
                setattr(guards, name, frozenset())
        out["tries"] = tries
        out["after"] = _socket()
        return out
'''


def test_env_code_cannot_switch_the_audit_hook_off():
    item = envscaler.parse_env_item("unhook", {"env_class_name": "Unhook", "env_class_code": ATTACK})
    assert not item.problems, item.problems
    trajectory = Trajectory("unhook", "task", item.spec({}), (Action("unhook", {}, turn=0),))
    with Sandbox(workers=1, limits=Limits(call_timeout_s=10, memory_mb=512, tmp_mb=48)) as box:
        [(_, result)] = list(box.run([trajectory]))
    assert result["init"] is not None, result["init_error"]
    out = ast.literal_eval(result["steps"][0]["raw_observation"])
    assert out["found"] == 1, out  # the hook is reachable from env code (gc): that is the premise
    assert out["before"].startswith("refused: sandbox: network access is disabled"), out
    assert out["after"].startswith("refused: sandbox: network access is disabled"), out
    assert out["tries"].get("code") == "PermissionError" and out["tries"].get("defaults") == "PermissionError", out


def test_the_hook_keeps_its_policy_in_no_cell_global_or_mutable_default():
    hook = guards.make_hook("/tmp/somewhere")
    assert hook.__closure__ is None and hook.__kwdefaults__ is None
    assert not hook.__code__.co_freevars
    assert set(hook.__code__.co_names) <= {"__code__", "f_code"}  # attribute names only: no global is read
    for value in hook.__defaults__:
        assert isinstance(value, (frozenset, tuple, str, int, type)) or callable(value), value
        if isinstance(value, tuple):
            assert all(isinstance(k, str) and isinstance(v, tuple) for k, v in value)
