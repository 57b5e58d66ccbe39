"""A typed corpus (tests/support/typed_corpus: pydantic database, str/int/Flag enums, tools that refuse by raising,
a decorator that answers ``Error: <message>``, ``$defs``/``$ref`` schemas, plain objects a constructor must build)
run as a user runs it (``./forge run -c run.yaml``, the default profile with a call budget of its own), twice
over: with the corpus's declared ``raises`` rule (prefix ``typed``) and without it (prefix ``typedraw``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from pipeline.store.layout import DataLayout
from tests.support.typed_corpus import APPS, ENUM_CLASSES, RAISES_RULE, write_typed_corpus
from tests.support.user_corpora import forge_run

pytestmark = pytest.mark.slow

#: exploration's calls over both corpora (6 environments, 24 scenarios)
CALL_BUDGET = 3_000


@pytest.fixture(scope="module")
def typed_run(tmp_path_factory):
    tmp: Path = tmp_path_factory.mktemp("typed")
    env_file, scen_file = write_typed_corpus(tmp / "corpus")
    entry = {"env_items": str(env_file), "scenarios": str(scen_file), "license": "test corpus"}
    sources = {
        "builtin": {"enabled": False},
        "bfcl": {"categories": []},
        "envscaler": [{**entry, "prefix": "typed", "outcome_rule": RAISES_RULE}, {**entry, "prefix": "typedraw"}],
    }
    # a call budget of its own: the corpus's environment code is heavy (pydantic classes made in every child)
    ops = {"trajectories": {"config": {"call_budget": CALL_BUDGET}}}
    proc, layout = forge_run(tmp, {"resources": {"sources": {"config": sources}}, "ops": ops})
    return proc.stdout + proc.stderr, proc.returncode, layout


def _steps(layout: DataLayout) -> str:
    return f"read_parquet({[str(p) for p in layout.step_parts()]!r}, union_by_name = true)"


def _trajectories(layout: DataLayout) -> str:
    return f"read_parquet({[str(p) for p in layout.trajectory_files()]!r}, union_by_name = true)"


def test_no_state_or_answer_holds_an_enum_class_name(typed_run):
    out, rc, layout = typed_run
    assert rc == 0, out[-4000:]
    con = duckdb.connect()
    states = [s for (s,) in con.execute(f"SELECT initial_state_json FROM {_trajectories(layout)}").fetchall()]
    deltas = [str(d) for (d,) in con.execute(f"SELECT CAST(delta AS VARCHAR) FROM {_steps(layout)}").fetchall()]
    answers = [
        o
        for (o,) in con.execute(
            f"SELECT observation_json FROM {_steps(layout)} WHERE observation_json IS NOT NULL"
        ).fetchall()
    ]
    assert states and deltas and answers
    pattern = re.compile(rf"\b({'|'.join(ENUM_CLASSES)})\.[A-Z]")
    for text in [*states, *deltas, *answers]:
        assert not pattern.search(text), text[:300]
    # the enum-keyed counts hold the values, and the status changes Δ records are values too
    phone = [json.loads(s) for s in states if '"status_counts"' in s]
    assert phone and all(set(s["db"]["status_counts"]) <= {"Active", "Suspended", "Closed"} for s in phone)
    # the device's apps are stored in the order the environment holds them (its answers list them that way)
    assert all(list(s["db"]["device"]["apps"]) == list(APPS) for s in phone)
    listed = con.execute(
        f"""SELECT observation_json FROM {_steps(layout)} WHERE tool = 'check_installed_apps'
            AND outcome = 'success' AND step_index = 0"""
    ).fetchall()
    assert listed and all(json.loads(o) == list(APPS) for (o,) in listed)


def test_raises_are_failures_under_the_declared_rule_and_errors_without_it(typed_run):
    out, rc, layout = typed_run
    assert rc == 0, out[-4000:]
    con = duckdb.connect()
    rows = con.execute(
        f"""SELECT split_part(env_id, '/', 1), outcome, count(*), list(DISTINCT raw_observation),
                   count(*) FILTER (error_type IS NOT NULL)
            FROM {_steps(layout)} WHERE tool = 'port_number' GROUP BY 1, 2"""
    ).fetchall()
    by = {(prefix, outcome): (n, obs, typed) for prefix, outcome, n, obs, typed in rows}
    # with the rule: every port_number call (it always raises ValueError) is a failure shown as tau2 shows it
    n, shown, typed = by[("typed", "failure")]
    assert n > 0 and typed == 0, by
    assert "Error: porting is not allowed while the account is under contract" in shown, shown
    assert all(o.startswith("Error: ") and "ValueError" not in o for o in shown), shown
    assert ("typed", "error") not in by
    # without it: an error, and the quality gate says which rule would label it
    assert by[("typedraw", "error")][0] > 0 and ("typedraw", "failure") not in by
    quality = pq.read_table(layout.env_quality).to_pylist()
    problems = {r["env_id"]: r["problems"] or "" for r in quality}
    raw = problems["typedraw/phone_lines"]
    assert "tool port_number always raises" in raw and "raises: [{type: ValueError" in raw, raw
    assert "always raises" not in problems["typed/phone_lines"], problems["typed/phone_lines"]
    # a pydantic ValidationError is declared too: an APN without its name is a refusal, not an error
    apn = con.execute(
        f"""SELECT outcome, count(*) FROM {_steps(layout)} WHERE tool = 'set_apn_settings'
            AND env_id = 'typed/phone_lines' GROUP BY 1"""
    ).fetchall()
    assert "error" not in dict(apn), apn


def test_code_of_a_decorated_tool_holds_its_decorator(typed_run):
    out, rc, layout = typed_run
    assert rc == 0, out[-4000:]
    rows = pq.read_table(layout.tool_code).to_pylist()
    # one row per distinct code: both corpora's phone lines share it
    code = next(r["code"] for r in rows if r["owner"].endswith("/phone_lines") and r["tool"] == "install_app")
    assert "@refusal_as_error\ndef install_app" in code and "def refusal_as_error(fn):" in code, code
    # the decorator's answer is a failure under the default rule (an "Error: …" text), and install_app succeeds too
    con = duckdb.connect()
    outcomes = dict(
        con.execute(f"SELECT outcome, count(*) FROM {_steps(layout)} WHERE tool = 'install_app' GROUP BY 1").fetchall()
    )
    assert outcomes.get("success", 0) > 0 and outcomes.get("failure", 0) > 0 and "error" not in outcomes, outcomes


def test_typed_construction_works_and_its_failure_is_named(typed_run):
    out, rc, layout = typed_run
    assert rc == 0, out[-4000:]
    con = duckdb.connect()
    ok = dict(
        con.execute(
            f"""SELECT env_id, count(*) FILTER (outcome = 'success') FROM {_steps(layout)}
                WHERE split_part(env_id, '/', 1) = 'typed' GROUP BY 1"""
        ).fetchall()
    )
    # the annotated pydantic database and the declared constructor build working environments
    assert ok["typed/phone_lines"] > 0 and ok["typed/ledger_typed"] > 0 and ok["typed/ledger_untyped"] == 0, ok
    quality = {r["env_id"]: r for r in pq.read_table(layout.env_quality).to_pylist()}
    main = quality["typed/ledger_untyped"]["main_problem"] or ""
    assert main.startswith("construction: ") and "AttributeError" in main and "'dict' object has no attribute" in main
    assert "env_constructor" in main, main
    assert "construction" not in (quality["typed/ledger_typed"]["problems"] or "")
