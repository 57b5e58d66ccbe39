"""Safe names everywhere (issue 24, item 7): environment and tool ids from untrusted corpora are
validated at ingestion (an unsafe id is skipped with its reason, the others load), and every output
escapes what it shows: Markdown tables, the dataset card, the console summary, Dagster metadata."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core import untrusted
from pipeline.envs import envscaler
from pipeline.report.tables import md_records, md_table

CODE = (
    "class Shop:\n    def __init__(self, init_config=None):\n        self.n = 0\n    def buy(self, qty: int):\n "
    "       self.n += qty\n        return {'success': True}\n"
)

HOSTILE_IDS = [
    '<img src=x onerror="alert(1)">',
    "esc\x1b[2J\x1b[31mred",
    "line\nbreak| fake | row |",
    "carriage\rreturn",
    "bidi\u202eevil",
    "a" * 201,
    "",
]


def assert_markdown_safe(text: str) -> None:
    assert "<img" not in text and "\x1b" not in text and "\r" not in text and "\u202e" not in text


def test_unsafe_env_ids_are_skipped_at_ingestion_with_a_reason(tmp_path):
    items = {"good_shop": {"env_class_name": "Shop", "env_class_code": CODE}}
    items.update({i: {"env_class_name": "Shop", "env_class_code": CODE} for i in HOSTILE_IDS})
    path = tmp_path / "envs.json"
    path.write_text(json.dumps(items))
    results = list(envscaler.load_env_items(path))
    loaded = [r for r in results if isinstance(r, envscaler.EnvItem)]
    issues = [r for r in results if not isinstance(r, envscaler.EnvItem)]
    assert [i.env_id for i in loaded] == ["good_shop"]  # the others go on
    assert len(issues) == len(HOSTILE_IDS)
    for issue in issues:
        assert "not a safe name" in issue.reason or "safe" in issue.reason, issue.reason
        for text in (issue.task_id, issue.reason, issue.origin):
            assert "\x1b" not in text and "\n" not in text and "\r" not in text and "\u202e" not in text


def test_a_source_prefix_outside_the_safe_set_is_refused():
    result = envscaler.parse_env_item("shop", {"env_class_name": "Shop", "env_class_code": CODE}, prefix="x y")
    assert not isinstance(result, envscaler.EnvItem) and "qualified env id" in result.reason


def test_unsafe_tool_names_are_dropped_with_their_reason():
    code = CODE + "    def caf\u00e9(self):\n        return 1\n"
    derived = envscaler.parse_env_item("shop", {"env_class_name": "Shop", "env_class_code": code})
    assert derived.tool_names == ["buy"] and any("caf" in p and "safe" in p for p in derived.problems)
    schemas = [
        {"type": "function", "function": {"name": "buy<script>", "parameters": {"type": "object", "properties": {}}}},
        {
            "type": "function",
            "function": {"name": "buy", "parameters": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
        },
    ]
    declared = envscaler.parse_env_item("shop", {"env_class_name": "Shop", "env_class_code": CODE, "tools": schemas})
    assert declared.tool_names == ["buy"] and any("safe" in p for p in declared.problems)


@pytest.mark.parametrize("bad", HOSTILE_IDS[:5])
def test_markdown_tables_escape_every_cell(bad):
    rows = [{"env_id": bad, "samples": 3}, {"env_id": "ok", "samples": 1}]
    for text in (
        md_records(rows, ["env_id", "samples"]),
        md_table(pd.DataFrame(rows), index=False),
    ):
        assert_markdown_safe(text)
        lines = text.splitlines()
        assert len(lines) == 4 and len({line.count("|") - line.count("\\|") for line in lines}) == 1, (
            text
        )  # no cell adds a column or a row


def test_md_escapes_html_links_and_pipes():
    assert untrusted.md("[x](javascript:alert(1)) <b>&") == "\\[x\\](javascript:alert(1)) &lt;b&gt;&amp;"
    assert untrusted.md("a|b\nc") == "a\\|b\\x0ac"
    assert untrusted.md("bfcl/GorillaFileSystem") == "bfcl/GorillaFileSystem"  # a safe id reads as itself


def test_console_report_shows_control_characters_visibly(capsys):
    from cli.summary import _say

    _say("env esc\x1b[2Jx\rback\u202e", md_table(pd.DataFrame([{"env_id": "e\x1b[31m", "n": 1}]), index=False))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert "\\x1b[2J" in out and "\n" in out  # visible, and the table's lines stay lines
    assert untrusted.console("a\nb") == "a\\x0ab"


def test_dataset_card_escapes_environment_ids(tmp_path):
    from pipeline.export.hf_layout import dataset_card
    from pipeline.store.layout import DataLayout

    layout = DataLayout.at(tmp_path / "data")
    samples = tmp_path / "samples.parquet"
    ids = ['envscaler/<img src=x onerror="alert(1)">', "envscaler/esc\x1b[31m", "envscaler/a|b\nc", "bfcl/MathAPI"]
    pq.write_table(pa.table({"env_id": ids, "tool": ["t"] * 4}), samples)
    manifest = {
        "spec": {"seed": 0, "input": "abc"},
        "strata": [{"stratum": "s<script>", "requested": 1, "selected": 4, "environments": 4, "missing": 0}],
    }
    configs = [{"config_name": "default", "data_files": [{"split": "test", "path": "data/test-*.parquet"}]}]
    text = dataset_card(layout, "benchmark", "v1", manifest, samples, configs, "apache-2.0", "envsim <b>name</b>")
    body = text.split("---\n", 2)[2]
    assert_markdown_safe(body)
    assert "<script" not in body and "<b>" not in body and "a\\|b" in body
    assert "bfcl/MathAPI" in body
