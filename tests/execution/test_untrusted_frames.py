"""Nothing in a frame from inside the sandbox crashes a run (issue 24, item 5).

Every numeric, string and depth field of every frame kind is range-checked; what is out of range
becomes an ``error`` step naming the field (the trajectory is truncated there, as a lost call is),
and a step frame must describe the call the parent sent (replay) or the policy announced
(exploration) in a tool the environment declares. Frames are fed to :class:`TrajectoryLabels`
directly, then one environment in the real sandbox forges such frames on its own frame pipe."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pyarrow as pa
import pytest

from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.execution.frames import FrameError, decode, encode
from pipeline.execution.labels import TrajectoryLabels
from pipeline.labeling.rows import step_row
from pipeline.store import schema

SPEC = EnvSpec("envscaler", "victim", {}, {})
ACTIONS = (Action("bump", {"by": 1}, turn=0), Action("bump", {"by": 2}, turn=1))


def deep(n: int) -> str:
    return '{"a":' * n + "1" + "}" * n


def good_step(index: int = 0, **over):
    frame = {
        "kind": "step",
        "step_index": index,
        "turn": index,
        "tool": "bump",
        "arguments": {"by": index + 1},
        "raised": False,
        "error_type": None,
        "error_message": None,
        "observation": "{'success': True}",
        "value": '{"success":true}',
        "state": json.dumps({"n": index + 1}),
        "call_seconds": 0.01,
        "env_output": None,
        "trajectory_id": "t",  # a tag the boundary adds to forwarded frames: tolerated
    }
    frame.update(over)
    return frame


def labels_of(*frames, trajectory: Trajectory | None = None) -> dict:
    labels = TrajectoryLabels(trajectory or Trajectory("t", "task", SPEC, ACTIONS), 10_000)
    labels.feed({"kind": "init", "state": '{"n":0}'})
    for frame in frames:
        labels.feed(frame)
    return labels.result


def assert_writable(result: dict) -> None:
    """What downstream writes from a result: step rows to Parquet, JSON dumps without ASCII escapes."""
    traj = Trajectory("t", "task", SPEC, ACTIONS)
    rows = [step_row(traj, step, None) for step in result["steps"]]
    pa.Table.from_pylist(rows, schema=schema.STEPS)
    json.dumps(result, ensure_ascii=False).encode("utf-8")


HOSTILE = [
    ("turn", {"turn": float("inf")}),
    ("turn", {"turn": float("nan")}),
    ("turn", {"turn": 10**30}),
    ("turn", {"turn": -1}),
    ("step_index", {"step_index": 10**30}),
    ("step_index", {"step_index": True}),
    ("call_seconds", {"call_seconds": int("9" * 401)}),
    ("call_seconds", {"call_seconds": float("inf")}),
    ("call_seconds", {"call_seconds": -5.0}),
    ("observation", {"observation": "ok \ud800 bad"}),
    ("observation", {"observation": ["not", "text"]}),
    ("error_type", {"raised": True, "error_type": "Err\udc00"}),
    ("env_output", {"env_output": "out \udfff"}),
    ("tool", {"tool": "b\ud800ump"}),
    ("arguments", {"arguments": {"by": "\ud800"}}),
    ("arguments", {"arguments": json.loads(deep(300))}),
    ("arguments", {"arguments": [1]}),
    ("state", {"state": deep(900)}),
    ("state", {"state": deep(5000)}),
    ("state", {"state": '{"n":"\\ud800"}'}),
    ("state", {"state": '{"n":NaN}'}),
    ("state", {"state": '{"n":' + "9" * 5000 + "}"}),
    ("value", {"value": deep(900)}),
    ("value", {"value": '{"v":"\\udbff"}'}),
    ("value", {"value": "[Infinity]"}),
    ("raised", {"raised": "yes"}),
]


@pytest.mark.parametrize("field, over", HOSTILE, ids=[f"{f}-{i}" for i, (f, _) in enumerate(HOSTILE)])
def test_a_hostile_field_is_an_error_step_naming_it(field, over):
    result = labels_of(good_step(**over), good_step(1))
    [step] = result["steps"]  # truncated at the bad frame, as a lost call is
    assert step["outcome"] == "error" and step["error_type"] == "UntrustedData"
    assert f"'{field}'" in step["error_message"], step["error_message"]
    assert step["tool"] == "bump" and step["turn"] == 0 and step["arguments_json"] == '{"by":1}'  # the action sent
    assert step["delta_size"] == 0 and step["call_seconds"] is None
    assert any("truncated" in issue for issue in result["issues"])
    assert_writable(result)


def test_good_frames_label_as_before_and_big_ints_in_state_are_encoded():
    big = 10**30
    result = labels_of(good_step(), good_step(1, state=json.dumps({"n": big}), call_seconds=2))
    a, b = result["steps"]
    assert a["outcome"] == b["outcome"] == "success" and a["delta_size"] == 1
    assert b["call_seconds"] == 2.0
    assert b["delta"][0]["after"] == json.dumps({"$int": str(big)}, separators=(",", ":"))
    assert_writable(result)


@pytest.mark.parametrize("n", [2**53 + 1, -(2**53) - 1, 10**15 + 7])
def test_an_int_is_encoded_exactly_when_beyond_2_53_whatever_its_digits(n):
    """The fast path keeps a canonical text as it is unless it holds 16 digits in a row; the 16-digit numbers
    around 2**53 go through ``canonicalize``, which encodes only those beyond it."""
    result = labels_of(good_step(state=json.dumps({"n": n, "s": "\u0663" * 20})))  # Arabic-Indic digits: a string
    after = json.loads(result["steps"][0]["delta"][0]["after"])
    assert after == ({"$int": str(n)} if abs(n) > 2**53 else n)
    assert_writable(result)


def test_a_deep_or_surrogate_initial_state_is_an_init_error_not_a_crash():
    for state, field in ((deep(900), "state"), ('{"a":"\\udc80"}', "state"), ('{"a":Infinity}', "state")):
        labels = TrajectoryLabels(Trajectory("t", "task", SPEC, ACTIONS), 100)
        labels.feed({"kind": "init", "state": state})
        labels.feed(good_step())
        assert labels.result["init"] is None and labels.result["steps"] == []
        assert f"'{field}'" in labels.result["init_error"] and "UntrustedData" in labels.result["init_error"]


def test_messages_from_inside_are_stored_encodable():
    result = labels_of(
        {"kind": "issue", "message": "issue \ud800"},
        {"kind": "lost", "step_index": 0, "error_type": "Timeout\udc00", "error": "lost \udfff" + "x" * 10_000},
        {"kind": "lost", "step_index": 10**40, "error_type": "X", "error": "y"},
    )
    step, refused = result["steps"]
    assert step["outcome"] == "error" and len(step["error_message"]) <= 2000
    assert "\ufffd" in step["error_message"] and "\ufffd" in step["error_type"]
    assert refused["step_index"] == 1 and "'step_index'" in refused["error_message"]
    assert_writable(result)


@pytest.mark.parametrize(
    "over, field",
    [
        ({"tool": "delete_everything"}, "tool"),
        ({"arguments": {"by": 1000}}, "arguments"),
        ({"arguments": {"by": 1, "extra": True}}, "arguments"),
        ({"turn": 7}, "turn"),
        ({"step_index": 1}, "step_index"),
    ],
)
def test_a_step_must_be_the_call_the_parent_sent(over, field):
    result = labels_of(good_step(**over))
    [step] = result["steps"]
    assert step["outcome"] == "error" and f"'{field}'" in step["error_message"], step["error_message"]
    assert step["tool"] == "bump" and step["arguments_json"] == '{"by":1}'
    assert "delete_everything" not in step["tool"] + step["arguments_json"]  # the forged call is only named


def test_a_second_step_for_a_labelled_call_is_refused():
    result = labels_of(good_step(), good_step(0))
    first, refused = result["steps"]
    assert first["outcome"] == "success"
    assert refused["step_index"] == 1 and refused["outcome"] == "error" and "'step_index'" in refused["error_message"]


@pytest.fixture(scope="module")
def explore_trajectory():
    code = (
        "class Counter:\n    def __init__(self, init_config=None):\n        self.n = 0\n    def bump(self, by: "
        "int):\n        self.n += by\n        return {'success': True}\n"
    )
    item = envscaler.parse_env_item("counter", {"env_class_name": "Counter", "env_class_code": code})
    return Trajectory("t", "task", item.spec({}), (), meta={"explore": SimpleNamespace(episode_length=3)})


def action(tool="bump", arguments=None, index=0, **over):
    frame = {
        "kind": "action",
        "step_index": index,
        "tool": tool,
        "arguments": {"by": 1} if arguments is None else arguments,
        "mutated_arg": None,
    }
    frame.update(over)
    return frame


def test_exploration_labels_the_announced_action(explore_trajectory):
    result = labels_of(
        action(), good_step(), action(arguments={"by": 2}, index=1), good_step(1), trajectory=explore_trajectory
    )
    assert [s["outcome"] for s in result["steps"]] == ["success", "success"]


@pytest.mark.parametrize(
    "frame, field",
    [
        (action(tool="rm_rf"), "tool"),
        (action(arguments=[1, 2]), "arguments"),
        (action(arguments={"by": json.loads(deep(300))}), "arguments"),
        (action(arguments={"by": "\ud800"}), "arguments"),
        (action(index=10**30), "step_index"),
        (action(index=5), "step_index"),
        (action(mutated_arg=["x"]), "mutated_arg"),
    ],
)
def test_exploration_action_frames_are_checked(explore_trajectory, frame, field):
    result = labels_of(frame, good_step(), trajectory=explore_trajectory)
    assert (
        result["steps"] == []
        and any("truncated" in i for i in result["issues"])
        or (result["steps"] and result["steps"][0]["outcome"] == "error")
    )
    labels = TrajectoryLabels(explore_trajectory, 100)
    labels.feed({"kind": "init", "state": '{"n":0}'})
    labels.feed(frame)
    assert labels.truncated
    assert_writable(labels.result)
    reason = " ".join(labels.result["issues"]) + " ".join(s["error_message"] for s in labels.result["steps"])
    assert labels.result["steps"] == [] or f"'{field}'" in reason


def test_exploration_step_must_match_the_announced_action(explore_trajectory):
    result = labels_of(action(), good_step(tool="rm_rf"), trajectory=explore_trajectory)
    [step] = result["steps"]
    assert step["outcome"] == "error" and "'tool'" in step["error_message"] and step["tool"] == "bump"
    result = labels_of(good_step(), trajectory=explore_trajectory)  # a step nobody announced
    assert not [s for s in result["steps"] if s["outcome"] != "error"]


# -- decode: the wire format itself ------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, field",
    [
        (b'{"kind":"step","turn":Infinity}', "turn"),
        (b'{"kind":"step","call_seconds":NaN}', "call_seconds"),
        (b'{"kind":"step","arguments":{"x":[-Infinity]}}', "arguments.x.0"),
        (b'{"kind":"step","observation":"a\\ud800b"}', "observation"),
        (b'{"kind":"step","arguments":{"\\udc00":1}}', "arguments.<key>"),
        (b'{"kind":"step","arguments":' + deep(150).encode() + b"}", "arguments"),
        (b'{"kind":"step","observation":"a\xed\xa0\x80b"}', "observation"),  # a surrogate as raw bytes
        ('{"kind":"step","observation":"a\ud800b"}'.encode("utf-16-le", "surrogatepass"), "observation"),
        (b'\xef\xbb\xbf{"kind":"step","turn":1,"observation":"\\ud800"}', "observation"),  # behind a BOM
    ],
)
def test_decode_refuses_what_is_not_json_naming_the_field(body, field):
    with pytest.raises(FrameError) as err:
        decode(body)
    assert repr(field)[1:-1] in str(err.value), str(err.value)


def test_decode_keeps_good_frames_and_extra_fields():
    frame = good_step(observation="héllo ✓ 😀 \\ud800 as text")  # a pair, and a backslash before "ud800"
    assert decode(encode(frame)[4:]) == frame
    assert decode(b'{"kind":"step","observation":"\\ud83d\\ude00"}')["observation"] == "😀"  # an escaped pair


# -- end to end: environment code in the real sandbox forges frames on its own frame pipe -------------

FORGER_CODE = r"""
import json, os, stat, struct

class Forger:
    def __init__(self, init_config=None):
        self.n = 0

    def bump(self):
        self.n += 1
        return {"success": True, "data": self.n}

    def forge(self, case: str, index: int):
        frame = {"kind": "step", "step_index": index, "turn": index, "tool": "forge",
                 "arguments": {"case": case, "index": index}, "raised": False, "error_type": None,
                 "error_message": None, "observation": "forged", "value": "1", "call_seconds": 0.5,
                 "env_output": None}
        state = None
        if case == "turn_infinity":
            frame["turn"] = float("inf")
        elif case == "huge_seconds":
            frame["call_seconds"] = int("9" * 401)
        elif case == "huge_turn":
            frame["turn"] = 10 ** 30
        elif case == "surrogate":
            frame["observation"] = "forged \ud800"
        elif case == "deep_state":
            state = '{"a":' * 900 + "1" + "}" * 900
        elif case == "other_tool":
            frame["tool"], frame["arguments"] = "bump", {}
        header = json.dumps(frame).encode()  # NaN/Infinity as Python writes them, surrogates escaped
        body = header + (b"\n" + state.encode() if state is not None else b"")
        data = struct.pack("!I", len(body)) + body
        for fd in range(3, 256):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, data)
            except OSError:
                pass
        self.n += 100
        return {"success": True, "data": self.n}
"""

E2E = [
    ("turn_infinity", "turn"),
    ("huge_seconds", "call_seconds"),
    ("huge_turn", "turn"),
    ("surrogate", "observation"),
    ("deep_state", "state"),
    ("other_tool", "tool"),
]


@pytest.fixture(scope="module")
def box():
    from pipeline.execution.child import Limits
    from pipeline.execution.sandbox import Sandbox

    with Sandbox(workers=1, limits=Limits(call_timeout_s=5, memory_mb=512)) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def forger():
    item = envscaler.parse_env_item("forger", {"env_class_name": "Forger", "env_class_code": FORGER_CODE})
    return item.spec({})


def test_environment_code_forging_frames_never_crashes_the_run(box, forger):
    trajectories = [
        Trajectory(
            f"t-{case}",
            "task",
            forger,
            (
                Action("bump", {}, turn=0),
                Action("forge", {"case": case, "index": 1}, turn=1),
                Action("bump", {}, turn=2),
            ),
        )
        for case, _ in E2E
    ]
    victim = Trajectory("victim", "task", forger, (Action("bump", {}, turn=0), Action("bump", {}, turn=1)))
    results = list(box.run([*trajectories, victim]))  # before: OverflowError / RecursionError out of run()
    for (case, field), (traj, result) in zip(E2E, results):
        assert result["init"] is not None, (case, result["init_error"])
        first, forged, *rest = result["steps"]
        assert first["outcome"] == "success", case
        assert forged["step_index"] == 1 and forged["outcome"] == "error", (case, forged)
        assert forged["error_type"] == "UntrustedData" and f"'{field}'" in forged["error_message"], (
            case,
            forged["error_message"],
        )
        assert forged["tool"] == "forge" and forged["turn"] == 1
        assert all(s["outcome"] == "success" for s in rest)  # the trajectory goes on, or is truncated there
        rows = [step_row(traj, step, None) for step in result["steps"]]
        pa.Table.from_pylist(rows, schema=schema.STEPS)
        json.dumps(result, ensure_ascii=False).encode("utf-8")
    _, clean = results[-1]
    assert [s["observation_json"] for s in clean["steps"]] == ['{"data":1,"success":true}', '{"data":2,"success":true}']
