"""Metrics, tolerant parsing and the async harness against a real local OpenAI-compatible server."""

import asyncio
import json
import socket
import time
from dataclasses import replace

import duckdb
import pytest
from dagster import materialize
from dagster_duckdb import DuckDBResource

from pipeline.evaluate import results
from pipeline.evaluate.harness import MostRequestsFailed, evaluate, finished_steps
from pipeline.evaluate.metrics import config_match, config_match_changed_paths, feedback_match
from pipeline.evaluate.parsing import parse_answer
from pipeline.evaluate.run import score, score_all
from pipeline.evaluate.simulators import EndpointError, make_simulator, simulator_spec
from tests.support.fake_openai import FakeOpenAI
from tests.support.layouts import benchmark_split
from tests.support.metadata import text

S0 = {"a": {"b": 1, "c": 2}, "n": 0}
S1 = {"a": {"c": 3}, "n": 0}  # b removed, c modified
TRUE = [{"op": "remove", "path": ["a", "b"]}, {"op": "replace", "path": ["a", "c"]}]
EXACT = [{"type": "delete", "path": ["a", "b"]}, {"type": "modify", "path": ["a", "c"], "value": 3}]


@pytest.mark.parametrize(
    "name, before, after, delta, changes, cm, changed_paths",
    [
        ("exact", S0, S1, TRUE, EXACT, True, True),
        ("extra spurious change", S0, S1, TRUE, EXACT + [{"type": "modify", "path": ["n"], "value": 9}], False, True),
        (
            "removed key set to null instead",
            S0,
            S1,
            TRUE,
            [{"type": "modify", "path": ["a", "b"], "value": None}, EXACT[1]],
            False,
            True,
        ),
        ("removal missed entirely", S0, S1, TRUE, [EXACT[1]], False, False),
        ("wrong value", S0, S1, TRUE, [EXACT[0], {"type": "modify", "path": ["a", "c"], "value": 4}], False, False),
        ("no change predicted, none happened", S0, S0, [], [], True, True),
        ("spurious change when nothing happens", S0, S0, [], [{"type": "add", "path": ["x"], "value": 1}], False, True),
        ("path that does not exist", S0, S1, TRUE, [{"type": "modify", "path": ["zz", "c"], "value": 3}], False, False),
        (
            "change type outside add/modify/delete",
            S0,
            S1,
            TRUE,
            [{"type": "rename", "path": ["a"], "value": 1}],
            False,
            False,
        ),
    ],
)
def test_cm_and_cm_changed_paths_pinned(name, before, after, delta, changes, cm, changed_paths):
    assert config_match(before, after, changes)[0] is cm, name
    assert config_match_changed_paths(before, after, delta, changes) is changed_paths, name


@pytest.mark.parametrize(
    "predicted, raw, match",
    [
        ({"success": True, "data": [1, 2]}, "{'success': True, 'data': [1, 2]}", True),  # Python literal
        ({"result": 3.0}, '{"result": 3.0}', True),  # JSON
        ('{"result": 3.0}', '{"result": 3.0}', True),
        ({"result": 3}, '{"result": 3.0}', False),  # exact: int is not float
        ("Error: no such file", "Error: no such file", True),
        ("", "{'success': True}", False),
    ],
)
def test_feedback_match(predicted, raw, match):
    assert feedback_match(predicted, raw) is match


@pytest.mark.parametrize(
    "text, ok",
    [
        ('{"feedback": 1, "config_changes": []}', True),
        ('Sure.\n```json\n{"feedback": 1, "config_changes": []}\n```\nDone.', True),
        ('My answer: {"feedback": {"x": 1}, "config_changes": []} hope it helps', True),
        ("no json here", False),
        ('{"feedback": 1, "config_changes": "none"}', False),
        ("", False),
        ("x" * 3_000_000, False),
    ],
)
def test_tolerant_parsing(text, ok):
    assert parse_answer(text).ok is ok


@pytest.fixture(scope="module")
def split(default_layout, tmp_path_factory):
    return benchmark_split(default_layout, tmp_path_factory.mktemp("eval") / "data")


def run(samples, spec, version, path):
    """One simulator scored by the evaluation loop's own step (what the asset and the job run)."""
    return score(samples, spec, version, path)


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def spec(server, **kw):
    return simulator_spec(
        name=kw.pop("name", "fake"),
        model="fake-model",
        base_url=server.url,
        max_retries=kw.pop("max_retries", 3),
        timeout_s=kw.pop("timeout_s", 10),
        concurrency=kw.pop("concurrency", 16),
        **kw,
    )


@pytest.mark.parametrize(
    "mode, fm, cm, parse_ok",
    [
        ("correct", 1.0, 1.0, 1.0),
        ("fenced", 1.0, 1.0, 1.0),
        ("garbage", 0.0, 0.0, 0.0),
        ("huge", 0.0, 0.0, 0.0),  # a 3 MB answer under an 8 MB body cap: parsed and refused as too long
        ("429", 1.0, 1.0, 1.0),  # retried with backoff by the client
        ("500", 1.0, 1.0, 1.0),
    ],
)
def test_harness_modes(split, tmp_path, mode, fm, cm, parse_ok):
    _, version, samples, answers = split
    n = 5 if mode == "huge" else 30  # 3 MB an answer: five show the refusal as well as thirty
    with FakeOpenAI(answers, mode) as server:
        report = run(samples[:n], spec(server, max_response_bytes=8_000_000), version, tmp_path / "r.jsonl")
    out = rows(tmp_path / "r.jsonl")
    assert report.completed == n and report.request_errors == 0 and len(out) == n
    assert sum(r["fm"] for r in out) / n == fm
    assert sum(r["cm"] for r in out) / n == cm
    assert sum(r["parse_ok"] for r in out) / n == parse_ok
    if not parse_ok:
        assert all(r["parse_error"] for r in out)  # counted and explained, never a silent zero
    assert all(r["prompt_tokens"] for r in out)


def test_wrong_answers_score_zero_but_parse(split, tmp_path):
    _, version, samples, answers = split
    with FakeOpenAI(answers, "wrong") as server:
        run(samples[:20], spec(server), version, tmp_path / "r.jsonl")
    out = rows(tmp_path / "r.jsonl")
    assert all(r["parse_ok"] and not r["fm"] and not r["cm"] for r in out)


def test_401_and_unreachable_fail_the_run_clearly(split, tmp_path):
    _, version, samples, answers = split
    with FakeOpenAI(answers, "401") as server:
        with pytest.raises(EndpointError, match=r"rejected the API key from \$OPENAI_API_KEY \(401\)"):
            run(samples[:5], spec(server), version, tmp_path / "a.jsonl")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    down = simulator_spec(name="down", model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout_s=2)
    with pytest.raises(EndpointError, match="unreachable"):
        run(samples[:5], down, version, tmp_path / "b.jsonl")


def test_timeouts_are_counted_and_retried_on_rerun(split, tmp_path):
    _, version, samples, answers = split
    path = tmp_path / "r.jsonl"
    with FakeOpenAI(answers, "correct") as server:
        run(samples[:1], spec(server), version, path)  # the pre-flight sample succeeds
        server.mode = "hang"
        with pytest.raises(MostRequestsFailed, match=r"5 of 5 requests .* failed .*timeout after 0.5s") as failed:
            run(samples[:6], spec(server, timeout_s=0.5, max_retries=0), version, path)  # recorded, then failed
        report = failed.value.report
        assert report.skipped == 1 and report.request_errors == 5
        assert all(r["request_error"] and not r["cm"] for r in rows(path)[1:])
        server.mode = "correct"
        again = run(samples[:6], spec(server), version, path)
    assert again.skipped == 1 and again.completed == 5
    con = duckdb.connect()
    results.load_run(con, path, "fake@" + version)
    assert con.execute("SELECT count(*), sum(cm::INT) FROM eval_results").fetchone() == (6, 6)  # latest row per step


def _settled(server: FakeOpenAI, quiet_s: float = 0.5, within_s: float = 10.0) -> int:
    """The server's request count once it has not changed for ``quiet_s`` seconds."""
    deadline, seen = time.monotonic() + within_s, -1
    while server.requests != seen and time.monotonic() < deadline:
        seen = server.requests
        time.sleep(quiet_s)
    return server.requests


def test_resume_after_a_kill_redoes_no_finished_sample(split, tmp_path):
    _, version, samples, answers = split
    path = tmp_path / "r.jsonl"
    with FakeOpenAI(answers, "correct", latency_s=0.05) as server:
        simulator = make_simulator(spec(server, concurrency=4))

        async def killed():
            task = asyncio.create_task(evaluate(samples[:80], simulator, version, path))
            while not path.exists() or len(path.read_text().splitlines()) < 12:  # killed mid-run, after 12 results
                await asyncio.sleep(0.01)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await simulator.aclose()

        asyncio.run(killed())
        finished = finished_steps(path)
        assert 12 <= len(finished) < 80
        before = _settled(server)  # a request sent just before the kill may reach the server after it
        report = run(samples[:80], spec(server), version, path)
        assert report.skipped == len(finished)
        assert server.requests - before == 80 - len(finished)  # nothing finished is asked again


def test_results_are_cached_by_weights_not_by_served_name(split):
    """Issue 25: a second checkpoint served under the same name (and model name) as the first is scored in
    full, not resumed from the first one's results, and its rows carry its own weights id; the first
    checkpoint again resumes in full; DuckDB keeps both runs apart."""
    layout, version, samples, answers = split
    subset = samples[:4]
    first = simulator_spec(name="served", model="served", weights_id="ckpt-aaaaaaaaaaaa", max_retries=0)

    def at(spec, url):  # the same weights, served at ``url``
        return replace(spec, settings=replace(spec.settings, base_url=url))

    second = replace(first, weights_id="sha256-bbbbbbbbbbbbbbbb")
    with FakeOpenAI(answers, "correct") as server:
        [a] = score_all(layout, version, subset, [at(first, server.url)])
    with FakeOpenAI(answers, "wrong") as server:  # the other checkpoint, on a new port, answers otherwise
        [b] = score_all(layout, version, subset, [at(second, server.url)])
        asked = server.requests
    assert (a.report.completed, a.report.skipped) == (4, 0)
    assert (b.report.completed, b.report.skipped) == (4, 0) and asked == 4, b.line()
    assert "4 scored, 0 resumed" in b.line()
    assert a.run_id == f"served+ckpt-aaaaaaaaaaaa@{version}" and b.run_id == f"served+sha256-bbbbbbbbbbbbbbbb@{version}"
    assert a.path != b.path
    assert {r["weights_id"] for r in rows(b.path)} == {"sha256-bbbbbbbbbbbbbbbb"} and not any(
        r["cm"] for r in rows(b.path)
    )
    assert {r["weights_id"] for r in rows(a.path)} == {"ckpt-aaaaaaaaaaaa"} and all(r["cm"] for r in rows(a.path))
    with FakeOpenAI(answers, "correct") as server:  # the first checkpoint again, served elsewhere: all resumed
        [again] = score_all(layout, version, subset, [at(first, server.url)])
        assert server.requests == 0
    assert (again.report.completed, again.report.skipped) == (0, 4)
    con = duckdb.connect()
    for run in (a, b):
        results.load_run(con, run.path, run.run_id)
    assert con.execute("SELECT simulator, weights_id, samples, cm FROM eval_runs ORDER BY weights_id").fetchall() == [
        ("served", "ckpt-aaaaaaaaaaaa", 4, 100.0),
        ("served", "sha256-bbbbbbbbbbbbbbbb", 4, 0.0),
    ]
    assert con.execute("SELECT DISTINCT weights_id FROM eval_results WHERE run_id = ?", [b.run_id]).fetchall() == [
        ("sha256-bbbbbbbbbbbbbbbb",)
    ]


def test_plain_endpoint_results_are_cached_by_name_model_and_base_url(split, tmp_path):
    """Without a weights id the cache key is the simulator's name, model and base_url (and prompt template):
    the same three resume; another model or another endpoint under the same name is scored in full."""
    _, version, samples, answers = split
    subset, path = samples[:4], tmp_path / "plain.jsonl"
    with FakeOpenAI(answers, "correct") as server:
        plain = spec(server, name="plain")
        assert run(subset, plain, version, path).completed == 4
        again = run(subset, plain, version, path)
        assert (again.completed, again.skipped) == (0, 4)
        other_model = run(subset, replace(plain, settings=replace(plain.settings, model="other-model")), version, path)
        assert (other_model.completed, other_model.skipped) == (4, 0)
        with FakeOpenAI(answers, "correct") as elsewhere:
            moved = run(subset, replace(plain, settings=replace(plain.settings, base_url=elsewhere.url)), version, path)
        assert (moved.completed, moved.skipped) == (4, 0)
    assert {(r["model"], r["base_url"], r["weights_id"]) for r in rows(path)} == {
        ("fake-model", server.url, None),
        ("other-model", server.url, None),
        ("fake-model", elsewhere.url, None),
    }


def test_eval_asset_oracle_and_no_change(split, tmp_path):
    from assets.evaluation import simulator_eval
    from resources import DataStoreResource

    layout, version, samples, _ = split
    db = tmp_path / "e.duckdb"
    result = materialize(
        [simulator_eval],
        resources={"store": DataStoreResource(data_root=str(layout.root)), "duckdb": DuckDBResource(database=str(db))},
    )
    assert result.success
    assert [e.passed for e in result.get_asset_check_evaluations()] == [True]
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    assert "data:image/png;base64," in meta["cm_by_delta"].value and "oracle@" in text(meta["summary"])
    con = duckdb.connect(str(db), read_only=True)
    runs = dict(con.execute("SELECT simulator, cm FROM eval_runs").fetchall())
    zero_share = round(100 * sum(s["delta_size"] == 0 for s in samples) / len(samples), 1)
    assert runs == {"oracle": 100.0, "no_change": zero_share}
    by_group = con.execute("SELECT grp, cm FROM eval_by_group WHERE run_id LIKE 'no_change@%' ORDER BY grp").fetchall()
    assert dict(by_group)["no_change"] == 100.0 and dict(by_group)["simple"] == 0.0


def test_max_samples_are_taken_across_the_strata(split):
    """A small ``max_samples`` compares every stratum (a GPU run of 60 samples once held only the 2 strata that
    come first in pick order): each stratum's first sample in pick order, then each one's second, and so on."""
    from pipeline.evaluate.samples import load_samples

    layout, version, samples, _ = split
    strata = {s["stratum"] for s in samples}
    by_stratum = {c: sorted(s["position"] for s in samples if s["stratum"] == c) for c in strata}
    _, first = load_samples(layout, version, max_samples=len(strata))
    assert sorted((s["stratum"], s["position"]) for s in first) == sorted((c, p[0]) for c, p in by_stratum.items())
    rounds = min(6, *(len(p) for p in by_stratum.values()))
    _, taken = load_samples(layout, version, max_samples=rounds * len(strata))
    assert {c: sorted(s["position"] for s in taken if s["stratum"] == c) for c in strata} == {
        c: p[:rounds] for c, p in by_stratum.items()
    }
    assert len(strata) > 2 and rounds >= 2  # the test data is worth the name


def test_a_plot_drawn_from_the_same_data_is_kept_and_redrawn_when_the_data_changes(tmp_path):
    """line_plot with ``data``: the same data, labels and drawing keep the PNG at its path (no new draw); other data
    draws it again; a PNG cut short is drawn again whatever its key says."""
    import base64

    from pipeline.report.plots import line_plot

    path = tmp_path / "eval" / "plot.png"
    drawn: list[str] = []

    def plot(data: str) -> str:
        def draw(ax):
            drawn.append(data)
            ax.plot([0, 1], [float(data), 1.0], label="line")

        return line_plot(path, draw, "x", "y", data=data)

    first = plot("0.5")
    assert drawn == ["0.5"] and base64.b64decode(first) == path.read_bytes()
    assert plot("0.5") == first and drawn == ["0.5"]  # kept
    assert plot("0.25") != first and drawn == ["0.5", "0.25"]  # other data: drawn again
    path.write_bytes(path.read_bytes()[:-30])  # cut short
    assert plot("0.25") and drawn == ["0.5", "0.25", "0.25"] and path.read_bytes().endswith(b"IEND\xaeB`\x82")
