import pytest

from pipeline.envs.bfcl import BfclEnvironment
from pipeline.core.environment import CallResult
from pipeline.core.outcome import args_count, reports_failure


@pytest.mark.parametrize(
    "tool, value, failed",
    [
        ("cd", {"error": "cd: folder: No such directory"}, True),
        ("cd", {"current_working_directory": "/a"}, False),
        ("login", {"login_status": False, "message": "User not found"}, True),
        ("message_get_login_status", {"login_status": False}, False),  # a query, not a failure
        ("authenticate_twitter", {"authentication_status": False}, True),
        ("follow_user", {"follow_status": True}, False),
        ("close_ticket", {"success": False}, True),
        ("find", [{"error": "a"}, "Error: b"], True),
        ("find", [{"error": "a"}, {"ok": 1}], False),
        ("find", [], False),
        ("echo", "Error: bad thing", True),
        ("echo", "all good", False),
        ("mean", 3.5, False),
    ],
)
def test_failure_signals(tool, value, failed):
    assert reports_failure(tool, value) is failed


def test_bfcl_outcome_and_observation():
    env = BfclEnvironment(["MathAPI"])
    ok = CallResult(value={"result": 3.0})
    err = CallResult(error_type="TypeError", error_message="bad arg")
    assert env.outcome("add", ok) == "success"
    assert env.outcome("add", CallResult(value={"error": "x"})) == "failure"
    assert env.outcome("add", err) == "error"
    assert env.observation(ok) == '{"result": 3.0}'  # bfcl renders dicts with json.dumps
    assert env.observation(err) == "Error during execution: bad arg"


def test_args_count_is_top_level():
    assert args_count({}) == 0
    assert args_count({"a": {"nested": 1, "more": 2}, "b": [1, 2]}) == 2
