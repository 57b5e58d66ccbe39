"""The one place an endpoint's client is built (issue 32, item 7): an ``api_key_env`` whose variable is not set is
a one-line warning naming the variable and the fix, not a silent ``Bearer not-set``."""

import logging

from pipeline.evaluate.simulators import OpenAISimulator, simulator_spec
from pipeline.models.openai_client import async_client


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_an_unset_api_key_env_is_one_warning_line(caplog, monkeypatch):
    monkeypatch.delenv("TEST_UNSET_API_KEY", raising=False)
    with caplog.at_level(logging.WARNING):
        client = async_client("http://127.0.0.1:9/v1", "TEST_UNSET_API_KEY", 5.0, 0)
        async_client("http://127.0.0.1:9/v1", "TEST_UNSET_API_KEY", 5.0, 0)  # the same pair: said once
    (line,) = _warnings(caplog)
    assert "\n" not in line and "$TEST_UNSET_API_KEY is not set" in line and "http://127.0.0.1:9/v1" in line
    assert "export TEST_UNSET_API_KEY" in line
    assert client.api_key == "not-set"  # a local server still takes the request


def test_a_set_key_is_used_without_a_warning(caplog, monkeypatch):
    monkeypatch.setenv("TEST_SET_API_KEY", "sk-test")
    with caplog.at_level(logging.WARNING):
        client = async_client("http://127.0.0.1:9/v1", "TEST_SET_API_KEY", 5.0, 0)
    assert _warnings(caplog) == [] and client.api_key == "sk-test"


def test_a_configured_simulator_with_an_unset_key_warns(caplog, monkeypatch):
    monkeypatch.delenv("TEST_SIM_API_KEY", raising=False)
    with caplog.at_level(logging.WARNING):
        OpenAISimulator(
            simulator_spec(name="mine", model="m", base_url="http://127.0.0.1:9/v1", api_key_env="TEST_SIM_API_KEY")
        )
    assert [line for line in _warnings(caplog) if "$TEST_SIM_API_KEY" in line]


def test_an_endpoint_the_pipeline_serves_itself_needs_no_key_and_warns_nothing(caplog):
    """bench-model and the evaluation job serve their own model: ``api_key_env=""``, no key, no warning."""
    with caplog.at_level(logging.WARNING):
        client = async_client("http://127.0.0.1:9/v1", "", 5.0, 0)
        OpenAISimulator(simulator_spec(name="served", model="m", base_url="http://127.0.0.1:9/v1", api_key_env=""))
    assert _warnings(caplog) == [] and client.api_key == "not-set"
