"""Bad endpoint answers never take down an evaluation: malformed, mistyped, deep and oversized responses
are per-sample request failures with their reason; deep answers are parse failures; request failures
are counted apart from wrong answers; an endpoint whose requests mostly fail fails the asset after
recording what finished, and a re-run after the fix asks only what is missing. Against the real-HTTP
fake (``tests/support/fake_openai.py``) with the unpatched ``openai`` client."""

import json
import re
import time
import tracemalloc

import duckdb
import pytest
from dagster import materialize
from dagster_duckdb import DuckDBResource

from pipeline.core.bounds import MAX_DEPTH
from pipeline.core.protocol import messages
from pipeline.envsimbench.reference import extract_json, score_reference
from pipeline.evaluate import results
from pipeline.evaluate.harness import MostRequestsFailed, result_row
from pipeline.evaluate.metrics import config_match, feedback_match, score
from pipeline.evaluate.parsing import parse_answer
from pipeline.evaluate.simulators import Completion, simulator_spec
from tests.evaluate.test_evaluate import rows, run  # the harness driver the evaluation tests use
from tests.support.fake_openai import DEEP, FakeOpenAI
from tests.support.layouts import benchmark_split
from tests.support.metadata import text


@pytest.fixture(scope="module")
def split(default_layout, tmp_path_factory):
    return benchmark_split(default_layout, tmp_path_factory.mktemp("bad-endpoint") / "data")


def spec(server, **kw):
    return simulator_spec(
        **{
            "name": "fake",
            "model": "fake-model",
            "base_url": server.url,
            "max_retries": 0,
            "timeout_s": 10,
            "concurrency": 8,
            **kw,
        }
    )


def duck(path, version, name="fake"):
    con = duckdb.connect()
    results.load_run(con, path, f"{name}@{version}")
    return con


@pytest.mark.parametrize(
    "mode, reason",
    [
        ("not_json", r'malformed response: the body is not JSON: "<html><body><h1>502 Bad Gateway'),
        ("choices_type", r"malformed response: 'choices' is object, not a list"),
        ("content_type", r"malformed response: choices\[0\]\.message\.content is object, not a string"),
        ("deep_body", r"malformed response: the body is nested deeper than 32 levels"),
    ],
)
def test_malformed_response_is_a_request_failure_with_its_reason(split, tmp_path, mode, reason):
    _, version, samples, answers = split
    path = tmp_path / "r.jsonl"
    with FakeOpenAI(answers, mode) as server:
        with pytest.raises(MostRequestsFailed, match=reason) as failed:  # every request failed: the run fails ...
            run(samples[:6], spec(server), version, path)
    assert failed.value.report.request_errors == 6
    out = rows(path)  # ... after recording each sample with the reason
    assert len(out) == 6 and {r["step_id"] for r in out} == {s["step_id"] for s in samples[:6]}
    for r in out:
        assert r["status"] == "request_failed"
        assert re.match(reason, r["request_error"]), r["request_error"]
        assert r["fm"] is None and r["cm"] is None and r["parse_ok"] is None  # not scored as a wrong answer
    con = duck(path, version)
    assert con.execute("SELECT samples, answered, request_failed, fm, cm FROM eval_runs").fetchone() == (
        6,
        0,
        6,
        None,
        None,
    )


def test_deep_answer_is_a_parse_failure_not_a_recursion_error(split, tmp_path):
    _, version, samples, answers = split
    path = tmp_path / "r.jsonl"
    with FakeOpenAI(answers, "deep_answer") as server:
        report = run(samples[:4], spec(server), version, path)
    assert report.completed == 4 and report.request_errors == 0  # the model answered: a model error, scored 0
    for r in rows(path):
        assert r["status"] == "answered" and r["parse_ok"] is False and r["fm"] is False and r["cm"] is False
        assert r["parse_error"] == f"answer is nested deeper than {MAX_DEPTH} levels"
        assert "nested deeper than" in r["reference_error"]
    con = duck(path, version)
    assert con.execute("SELECT answered, request_failed, cm, parse_fail_pct FROM eval_runs").fetchone() == (
        4,
        0,
        0.0,
        100.0,
    )


def _hidden_depth(levels: int) -> str:
    """A list nested ``levels`` deep whose every level starts with a string of closing brackets, so a
    bracket count sees depth 1 — only the parser finds the real depth."""
    return "".join('["' + "]" * 60 + '", ' for _ in range(levels)) + "1" + "]" * levels


HOSTILE = {
    "deep list": "[" * DEEP,
    "deep answer": '{"feedback": ' + "[" * DEEP + "]" * DEEP + ', "config_changes": []}',
    "deep object": '{"feedback": 1, "config_changes": [{"type": "add", "path": ["x"], "value": '
    + '{"a": ' * DEEP
    + "1"
    + "}" * DEEP
    + "}]}",
    "depth hidden by strings": '{"feedback": ' + _hidden_depth(5000) + ', "config_changes": []}',
    "deep feedback string": json.dumps({"feedback": "[" * DEEP + "]" * DEEP, "config_changes": []}),
    "hidden-depth feedback string": json.dumps({"feedback": _hidden_depth(5000), "config_changes": []}),
    "dotted path of 200k parts": json.dumps(
        {"feedback": None, "config_changes": [{"type": "add", "path": ".".join(["a"] * 200_000), "value": 1}]}
    ),
    "key-list path of 200k parts": json.dumps(
        {"feedback": None, "config_changes": [{"type": "modify", "path": ["a"] * 200_000, "value": 1}]}
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_parse_score_and_reference_metrics_are_bounded(split, name):
    """No RecursionError and no unbounded work anywhere in parsing, scoring or the reference metrics."""
    _, version, samples, _ = split
    sample = next(s for s in samples if s["delta_size"] > 0)
    text = HOSTILE[name]
    started = time.perf_counter()
    row = result_row(sample, Completion(text, 0.0), simulator_spec(name="fake", model="m"), version)
    parsed = parse_answer(text)
    s = score(sample, parsed.answer, text)
    ref = score_reference(text, {}, {"a": 1}, "x")
    extract_json(text)
    assert time.perf_counter() - started < 10
    assert row["status"] == "answered" and row["cm"] is False and s.cm is False and ref.cm is False
    if name in ("deep list", "deep answer", "deep object", "depth hidden by strings", "deep feedback string"):
        # (the bracket scan is conservative: brackets inside strings count too)
        assert row["parse_ok"] is False and "nested deeper than" in row["parse_error"]
    else:  # a well-formed answer whose content is hostile: parsed, then scored without harm
        assert row["parse_ok"] is True and row["fm"] is False
    if "path" in name:
        assert "parts is longer than 100" in row["change_error"]
        assert "parts would make the reference nest" in row["reference_error"]
        assert config_match({"a": 1}, {"a": 1}, parsed.answer["config_changes"])[0] is False


def test_deep_feedback_is_compared_as_text():
    deep = "[" * DEEP + "]" * DEEP
    assert feedback_match(deep, deep) is True and feedback_match(deep, "[]") is False
    assert feedback_match(_hidden_depth(5000), _hidden_depth(5000)) is True


@pytest.mark.parametrize("mode", ["stream_huge", "huge_length"])
def test_size_cap_aborts_a_200mb_body_early(split, tmp_path, mode):
    """The fake sends 200 MB (chunked without a length, or with one); the harness stops at the 1 MB cap:
    little time, little memory, and the server could write only a fraction before the client hung up."""
    _, version, samples, answers = split
    path = tmp_path / "r.jsonl"
    with FakeOpenAI(answers, mode) as server:
        tracemalloc.start()
        started = time.perf_counter()
        report = run(samples[:2], spec(server, concurrency=1, max_request_failure_share=1.0), version, path)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        sent = server.bytes_sent
    assert report.request_errors == 2
    out = rows(path)
    assert [r["status"] for r in out] == ["request_failed"] * 2
    expected = "Content-Length 209715" if mode == "huge_length" else "body passed the 1000000-byte cap"
    assert all(r["request_error"].startswith("response too large: ") and expected in r["request_error"] for r in out), (
        out
    )
    assert seconds < 10, seconds
    assert peak < 40_000_000, peak  # the harness, the client and the fake's own 1 MiB chunks together
    assert sent < 2 * 64_000_000, sent  # of 2 x 210 MB: the rest was never sent
    assert all(r["answer"] == "" for r in out)


def test_size_cap_is_configurable(split, tmp_path):
    _, version, samples, answers = split
    path = tmp_path / "r.jsonl"
    with FakeOpenAI(answers, "correct") as server:
        with pytest.raises(
            MostRequestsFailed, match=r"response too large: Content-Length \d+ bytes exceeds the 100-byte cap"
        ):
            run(samples[:3], spec(server, max_response_bytes=100), version, path)
        assert run(samples[:3], spec(server), version, path).completed == 3  # default cap: the same answers pass


def test_request_failures_are_not_wrong_answers(split, tmp_path):
    _, version, samples, answers = split
    subset = samples[:10]
    path = tmp_path / "r.jsonl"
    with FakeOpenAI(answers, "correct") as server:
        server.failing = {messages(s)[1]["content"] for s in subset[1:4]}  # 3 of 10 always 500
        report = run(subset, spec(server, max_retries=1), version, path)  # 30%: under the 50% threshold
    assert report.completed == 7 and report.request_errors == 3
    failed = [r for r in rows(path) if r["status"] == "request_failed"]
    assert len(failed) == 3 and all(
        r["request_error"] == "HTTP 500 after 1 retries: the model server crashed" for r in failed
    )
    con = duck(path, version)
    assert con.execute(
        "SELECT samples, answered, request_failed, fm, cm, parse_fail_pct FROM eval_runs"
    ).fetchone() == (10, 7, 3, 100.0, 100.0, 0.0)  # the oracle answers are right; failures are not in the denominators
    assert con.execute("SELECT sum(request_failed), sum(answered) FROM eval_by_group").fetchone() == (3, 7)
    table = results.summary(con, [f"fake@{version}"])
    assert table.loc[0, "request_failed"] == 3 and table.loc[0, "cm"] == 100.0


def test_failing_endpoint_fails_the_asset_and_a_fixed_rerun_resumes(split, tmp_path):
    from assets.evaluation import simulator_eval
    from resources import DataStoreResource

    layout, version, samples, answers = split
    db = tmp_path / "e.duckdb"
    resources = {"store": DataStoreResource(data_root=str(layout.root)), "duckdb": DuckDBResource(database=str(db))}
    n = len(samples)
    for name in ("oracle", "fake"):
        layout.eval_results(version, name).unlink(missing_ok=True)

    def materialize_with(server):
        config = {
            "simulators": [
                {"name": "oracle", "kind": "oracle"},
                {
                    "name": "fake",
                    "kind": "openai",
                    "concurrency": 16,
                    "openai": {"model": "fake-model", "base_url": server.url, "max_retries": 0, "timeout_s": 10},
                },
            ]
        }
        before = server.requests
        result = materialize(
            [simulator_eval],
            resources=resources,
            raise_on_error=False,
            run_config={"ops": {"simulator_eval": {"config": config}}},
        )
        return result, server.requests - before

    def runs():
        con = duckdb.connect(str(db), read_only=True)
        try:
            return {
                r[0]: r[1:]
                for r in con.execute(
                    "SELECT simulator, samples, answered, request_failed, cm FROM eval_runs"
                ).fetchall()
            }
        finally:
            con.close()

    with FakeOpenAI(answers, "correct") as server:
        server.failing = {messages(s)[1]["content"] for s in samples}  # every request: 500
        result, asked = materialize_with(server)
        assert not result.success and asked == n
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        message = failure.event_specific_data.error.message
        assert f"fake: {n} of {n} requests to {server.url} failed (100% > 50%" in message
        assert "HTTP 500 after 0 retries: the model server crashed" in message
        assert runs() == {"oracle": (n, n, 0, 100.0), "fake": (n, 0, n, None)}  # recorded, not scored as 0

        broken = samples[: n // 4]
        server.failing = {messages(s)[1]["content"] for s in broken}  # a quarter fails: under the threshold
        result, asked = materialize_with(server)
        assert result.success and asked == n  # nothing had finished
        assert runs()["fake"] == (n, n - len(broken), len(broken), 100.0)  # failures apart, CM over the answered

        server.failing = set()  # fixed
        result, asked = materialize_with(server)
        assert result.success and asked == len(broken)  # only the failed samples are asked again
        assert runs()["fake"] == (n, n, 0, 100.0)
        meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
        assert "request_failed" in text(meta["summary"])


def test_eval_job_fails_the_same_way_after_recording(split, tmp_path):
    from pipeline.training import eval_job

    layout, version, samples, answers = split
    sim = {"name": "fake_job", "kind": "openai", "model": "fake-model", "max_retries": 0, "concurrency": 16}
    layout.eval_results(version, "fake_job").unlink(missing_ok=True)
    with FakeOpenAI(answers, "not_json") as server:
        with pytest.raises(MostRequestsFailed, match=r"fake_job: 5 of 5 requests .* the body is not JSON"):
            eval_job.run(
                str(layout.root), version, [{**sim, "base_url": server.url}], max_samples=5, log=lambda _: None
            )
        server.mode = "correct"
        report = eval_job.run(
            str(layout.root), version, [{**sim, "base_url": server.url}], max_samples=5, log=lambda _: None
        )
    summary = report["runs"][f"fake_job@{version}"]
    assert (summary["samples"], summary["answered"], summary["request_failed"], summary["cm"]) == (5, 5, 0, 100.0)
