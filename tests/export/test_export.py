"""Hugging Face export, the shared prompt protocol, SFT records and the Hub push (local fake Hub)."""

import json
import re
import shutil

import pandas as pd
import pytest
from dagster import materialize

from pipeline.core.canonical import canonical_json
from pipeline.core.protocol import ChangeError, apply_changes, delta_to_changes, messages
from pipeline.export.hf_layout import ExportConflict, export_split
from pipeline.export.hub import PushError, push_export
from pipeline.export.records import alpaca_record, chat_record
from pipeline.export.verify import kept_export_checks, verify_answers, verify_card, verify_roundtrip
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from tests.support.fake_hub import FakeHub
from tests.support.layouts import stratified_copy

SIZES = {"failure": 5, "no_change": 120, "simple": 120, "complex": 40}


@pytest.fixture(scope="module")
def splits(default_layout, tmp_path_factory):
    layout = stratified_copy(default_layout, tmp_path_factory.mktemp("export") / "data")
    bench = build_benchmark(layout, seed=2, on_shortfall="warn")
    mix = build_mixture(layout, SIZES, seed=2)
    return layout, bench, mix


@pytest.fixture(scope="module")
def exported(splits, tmp_path_factory):
    layout, bench, mix = splits
    root = tmp_path_factory.mktemp("hf")
    return {
        BENCHMARK: export_split(layout, BENCHMARK, None, root / "bench", max_shard_bytes=200_000),
        MIXTURE: export_split(layout, MIXTURE, None, root / "sft", max_shard_bytes=200_000),
    }


def test_every_answer_reproduces_the_next_state(splits):
    _, bench, mix = splits
    for path in (bench.path, mix.path):
        for row in pd.read_parquet(path).to_dict("records"):
            after = apply_changes(json.loads(row["state_before_json"]), delta_to_changes(row["delta"]))
            assert canonical_json(after) == canonical_json(json.loads(row["state_after_json"])), row["step_id"]


@pytest.mark.parametrize(
    "changes, error",
    [
        ([{"type": "modify", "path": ["nope", "x"], "value": 1}], "does not exist"),
        ([{"type": "rename", "path": ["a"], "value": 1}], "unknown type"),
        ([{"type": "add", "path": ["a"], "value": 1}], "add of existing"),
        ([{"type": "delete", "path": ["b"]}], "cannot delete missing"),
        ([{"type": "modify", "path": []}], "non-empty list"),
        ({"type": "modify"}, "must be a list"),
    ],
)
def test_malformed_changes_are_rejected(changes, error):
    with pytest.raises(ChangeError, match=error):
        apply_changes({"a": 1}, changes)


def test_one_prompt_for_training_and_evaluation(splits):
    _, bench, _ = splits
    sample = pd.read_parquet(bench.path).iloc[0].to_dict()
    prompt = messages(sample)
    chat, alpaca = chat_record(sample), alpaca_record(sample)
    assert chat["messages"][:2] == prompt  # SFT records reuse the evaluation prompt verbatim
    assert alpaca["instruction"] == prompt[0]["content"] and alpaca["input"] == prompt[1]["content"]
    assert json.loads(chat["messages"][2]["content"]) == json.loads(alpaca["output"])
    assert sample["tool"] in prompt[1]["content"] and sample["code"].strip() in prompt[1]["content"]


def test_loading_an_export_back_draws_no_progress_bar(splits, exported):
    """The export check loads each version back with ``datasets``: no "Generating … split" bar lands between the
    run's log lines (issue 43, item 8). In a process of its own, without the tests' HF_DATASETS_DISABLE_PROGRESS_BARS;
    the bars are as they were afterwards."""
    import os
    import subprocess
    import sys

    layout, _, _ = splits
    report = exported[BENCHMARK]
    code = (
        "import sys, datasets\n"
        "from pathlib import Path\n"
        "from pipeline.export.verify import verify_roundtrip\n"
        "assert not datasets.are_progress_bars_disabled()\n"
        "problems = verify_roundtrip(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])\n"
        "assert problems == [] and not datasets.are_progress_bars_disabled(), problems\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HF_DATASETS_DISABLE_PROGRESS_BARS"}
    samples = SplitStore(layout, BENCHMARK).samples(report.version)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(report.directory), str(samples), report.split],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Generating" not in proc.stderr + proc.stdout and "examples/s" not in proc.stderr


def test_exports_load_back_exactly_with_matching_cards(splits, exported):
    layout, _, _ = splits
    for kind, report in exported.items():
        samples = SplitStore(layout, kind).samples(report.version)
        assert verify_roundtrip(report.directory, samples, report.split) == []
        assert verify_card(report.directory, samples, report.split) == []
    sft = exported[MIXTURE]
    assert len([f for f in sft.files if f.startswith("data/train-")]) > 1  # size-bounded shards
    checked, problems = verify_answers(sft.directory, SplitStore(layout, MIXTURE).samples(sft.version))
    assert checked == sft.rows and problems == []
    info = json.loads((sft.directory / "dataset_info.json").read_text())
    assert info["envsim_chat"]["formatting"] == "sharegpt" and info["envsim_alpaca"]["columns"]["response"] == "output"


def test_tampered_card_is_caught(exported, splits, tmp_path):
    layout, _, _ = splits
    report = exported[BENCHMARK]
    copy = tmp_path / "bench"
    shutil.copytree(report.directory, copy)
    card = (copy / "README.md").read_text().replace("Total: **", "Total: **1", 1)
    (copy / "README.md").write_text(card)
    problems = verify_card(copy, SplitStore(layout, BENCHMARK).samples(report.version), "test")
    assert any("total" in p for p in problems)


def test_export_checks_are_kept_per_content_and_a_card_changed_in_place_is_checked_again(
    exported, splits, tmp_path, monkeypatch
):
    """The export's checks are computed once per content of the files they read: the second call loads nothing
    (``datasets`` is never asked), and a card rewritten in place (the same length, the total forged) is checked
    again and fails."""
    import pipeline.export.verify as verify

    layout, _, _ = splits
    report = exported[BENCHMARK]
    copy = tmp_path / "bench"
    shutil.copytree(report.directory, copy)
    samples = SplitStore(layout, BENCHMARK).samples(report.version)
    first, kept = kept_export_checks(layout, "benchmark", copy, samples, report.split, False)
    assert not kept and first == [("loads_back_exactly", []), ("card_matches_data", [])]

    def no_load(*_):
        raise AssertionError("the dataset was loaded again")

    with monkeypatch.context() as patched:
        patched.setattr(verify, "_load", no_load)
        assert kept_export_checks(layout, "benchmark", copy, samples, report.split, False) == (first, True)
    card = (copy / "README.md").read_text()
    total = re.search(r"Total: \*\*(\d)", card)
    assert total is not None
    forged = str((int(total.group(1)) + 1) % 10)
    (copy / "README.md").write_text(card[: total.start(1)] + forged + card[total.end(1) :])
    again, kept = kept_export_checks(layout, "benchmark", copy, samples, report.split, False)
    assert not kept and again[0] == ("loads_back_exactly", []) and any("total" in p for p in again[1][1])


def test_a_tampered_row_and_a_tampered_answer_are_named(exported, splits, tmp_path):
    """One value changed in an exported shard, and one chat answer's changes emptied: each check names its row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    layout, _, _ = splits
    report = exported[MIXTURE]
    copy = tmp_path / "sft"
    shutil.copytree(report.directory, copy)
    shard = sorted((copy / "data").glob("train-*.parquet"))[0]
    table = pq.read_table(shard)
    tools = table.column("tool").to_pylist()
    table = table.set_column(table.schema.get_field_index("tool"), "tool", pa.array([tools[0] + "x"] + tools[1:]))
    pq.write_table(table, shard)
    chat = sorted((copy / "sft" / "chat").glob("train-*.parquet"))[0]
    records = pq.read_table(chat)
    messages = records.column("messages").to_pylist()
    changed = next(i for i, m in enumerate(messages) if json.loads(m[-1]["content"])["config_changes"])
    answer = json.loads(messages[changed][-1]["content"])
    messages[changed][-1]["content"] = json.dumps({**answer, "config_changes": []})
    column = pa.array(messages, type=records.schema.field("messages").type)
    pq.write_table(records.set_column(records.schema.get_field_index("messages"), "messages", column), chat)
    samples = SplitStore(layout, MIXTURE).samples(report.version)

    step_id = table.column("step_id")[0].as_py()
    assert verify_roundtrip(copy, samples, "train") == [f"row 0 ({step_id}): columns ['tool'] differ"]
    _, problems = verify_answers(copy, samples)
    assert problems == [f"{records.column('step_id')[changed].as_py()}: answer applied to s_t does not give s'_t"]


def test_card_has_data_fields_num_bytes_limitations_and_citation(exported, splits, tmp_path):
    """The card describes every column of the data files, states their bytes, its limitations and how to cite it;
    verify_card catches a card that does not."""
    import pyarrow.parquet as pq
    import yaml

    from pipeline.export.verify import CARD_SECTIONS
    from pipeline.select.samples import SAMPLE
    from pipeline.store.schema import COLUMN_DOCS

    assert set(SAMPLE.names) <= set(COLUMN_DOCS), sorted(set(SAMPLE.names) - set(COLUMN_DOCS))  # one home, complete
    layout, _, _ = splits
    for kind, report in exported.items():
        text = (report.directory / "README.md").read_text()
        for section in CARD_SECTIONS:
            assert f"\n{section}\n" in text, (kind, section)
        data = sorted((report.directory / "data").glob(f"{report.split}-*.parquet"))
        [entry] = yaml.safe_load(text.split("---\n", 2)[1])["dataset_info"]["splits"]
        assert entry["num_bytes"] == sum(f.stat().st_size for f in data) > 0
        fields = text.split("\n## Data Fields\n", 1)[1].split("\n## ", 1)[0]
        for column in pq.read_schema(data[0]).names:
            assert f"- `{column}` (" in fields and COLUMN_DOCS[column] in fields, column
        assert "@misc{" in text.split("\n## Citation\n", 1)[1] and "EnvSimBench" in text
        assert "frozen" in text.split("\n## Limitations\n", 1)[1].lower()
    report = exported[BENCHMARK]
    samples = SplitStore(layout, BENCHMARK).samples(report.version)
    copy = tmp_path / "bench"
    shutil.copytree(report.directory, copy)
    card = (copy / "README.md").read_text()
    num = re.search(r"num_bytes: (\d+)", card).group(1)
    (copy / "README.md").write_text(
        card.replace(f"num_bytes: {num}", f"num_bytes: {int(num) + 1}", 1).replace(
            "- `sample_hash` (", "- `sample_hash_gone` (", 1
        )
    )
    problems = verify_card(copy, samples, "test")
    assert any("bytes" in p for p in problems) and any("sample_hash" in p for p in problems), problems


def test_directory_with_another_version_is_refused(splits, exported):
    layout, _, _ = splits
    target = exported[BENCHMARK].directory
    before = sorted(p.name for p in target.rglob("*"))
    other = build_benchmark(layout, seed=99, on_shortfall="warn", make_current=False)
    with pytest.raises(ExportConflict, match=f"holds benchmark version {exported[BENCHMARK].version}"):
        export_split(layout, BENCHMARK, other.version, target)
    assert sorted(p.name for p in target.rglob("*")) == before  # untouched


def test_push_creates_repo_uploads_one_commit_and_tags(exported):
    report = exported[MIXTURE]
    with FakeHub() as hub:
        dry = push_export(report.directory, "me/envsim-sft", hub.token, hub.url, dry_run=True)
        assert dry.dry_run and not hub.log and "README.md" in [f for f, _ in dry.files]
        pushed = push_export(report.directory, "me/envsim-sft", hub.token, hub.url)
        repo = hub.dataset("me/envsim-sft")
        assert sorted(repo["files"]) == sorted(f for f, _ in pushed.files)
        assert len(repo["commits"]) == 1 and repo["tags"] == {report.version: pushed.commit}
        for path, _ in pushed.files:
            assert repo["files"][path] == (report.directory / path).read_bytes()


def test_push_token_is_huggingface_hubs_when_none_is_given(exported, monkeypatch, tmp_path):
    """No token from the caller: huggingface_hub's own resolution ($HF_TOKEN here); none at all is a clear error."""
    report = exported[MIXTURE]
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))  # no `hf auth login` token file
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    with FakeHub() as hub:
        with pytest.raises(PushError, match="no Hugging Face token"):
            push_export(report.directory, "me/env-token", None, hub.url)
        assert not hub.log
        monkeypatch.setenv("HF_TOKEN", hub.token)
        pushed = push_export(report.directory, "me/env-token", None, hub.url)
        assert hub.dataset("me/env-token")["tags"] == {report.version: pushed.commit}


@pytest.mark.parametrize(
    "route, outcome, message",
    [
        ("commit", 401, "rejected (401)"),
        ("commit", 403, "may not write to this repo (403)"),
        ("commit", "drop", "network or protocol error"),
    ],
)
def test_failed_push_is_clear_and_a_retry_completes(exported, route, outcome, message):
    report = exported[BENCHMARK]
    with FakeHub() as hub:
        hub.fail(route, *([outcome] * 3))
        with pytest.raises(PushError, match=re.escape(message)) as err:
            push_export(report.directory, "me/bench", hub.token, hub.url)
        assert hub.token not in str(err.value)
        assert (report.directory / "README.md").exists()  # local export intact
        hub.faults.clear()
        pushed = push_export(report.directory, "me/bench", hub.token, hub.url)
        assert hub.dataset("me/bench")["tags"] == {report.version: pushed.commit}


def test_wrong_token_and_wrong_repo_type(exported):
    report = exported[BENCHMARK]
    with FakeHub() as hub:
        with pytest.raises(PushError, match="401"):
            push_export(report.directory, "me/bench", "hf_wrong", hub.url)
        hub.repos["model/me/taken"] = {"files": {}, "commits": [], "tags": {}, "head": "0" * 40}
        with pytest.raises(PushError, match="not a dataset repo"):
            push_export(report.directory, "me/taken", hub.token, hub.url)


def test_card_that_does_not_parse_fails_the_push(exported, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(exported[BENCHMARK].directory, broken)
    (broken / "README.md").write_text("---\nlicense: [unclosed\n---\n# x\n")
    with FakeHub() as hub:
        with pytest.raises((PushError, ValueError)):
            push_export(broken, "me/broken", hub.token, hub.url)
        assert not hub.dataset("me/broken")["commits"]


def test_export_assets_push_and_check(splits, tmp_path):
    from assets.export import benchmark_dataset, sft_dataset
    from resources import DataStoreResource, HuggingFaceHubResource

    layout, _, _ = splits
    with FakeHub() as hub:
        result = materialize(
            [benchmark_dataset, sft_dataset],
            resources={
                "store": DataStoreResource(data_root=str(layout.root)),
                "hub": HuggingFaceHubResource(token=hub.token, endpoint=hub.url),
            },
            run_config={
                "ops": {
                    "benchmark_dataset": {"config": {"directory": str(tmp_path / "b"), "repo_id": "me/b"}},
                    "sft_dataset": {"config": {"directory": str(tmp_path / "s")}},
                }
            },
        )
        assert result.success
        checks = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in result.get_asset_check_evaluations()}
        assert all(checks.values()) and len(checks) == 5
        meta = {
            e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
            for e in result.get_asset_materialization_events()
        }
        assert meta["benchmark_dataset"]["hub"].value.startswith("pushed to me/b")
        assert meta["sft_dataset"]["hub"].value == "exported locally only (no repo_id configured)"
        assert hub.token not in json.dumps({k: str(v) for m in meta.values() for k, v in m.items()})


def test_a_dropped_upload_connection_is_retried(exported):
    report = exported[BENCHMARK]
    with FakeHub() as hub:
        hub.fail("lfs_put", "drop")
        pushed = push_export(report.directory, "me/flaky", hub.token, hub.url)
        repo = hub.dataset("me/flaky")
        assert repo["tags"] == {report.version: pushed.commit}
        assert all(repo["files"][p] == (report.directory / p).read_bytes() for p, _ in pushed.files)


def test_card_features_match_what_datasets_writes():
    """The card's features are written without importing datasets; they must equal its own conversion."""
    from datasets import Features

    from pipeline.export.hf_layout import features_yaml
    from pipeline.export.records import ALPACA, CHAT
    from pipeline.select.samples import SAMPLE

    for schema in (SAMPLE, CHAT, ALPACA):
        assert features_yaml(schema) == Features.from_arrow_schema(schema)._to_yaml_list()


def test_batched_records_equal_the_single_record_builders(splits):
    import pyarrow.parquet as pq

    from pipeline.export.records import RECORD_COLUMNS, record_tables

    _, _, mix = splits
    table = pq.read_table(mix.path, columns=RECORD_COLUMNS).slice(0, 40)
    chat, alpaca = record_tables(table)
    samples = table.to_pylist()
    assert chat.to_pylist() == [chat_record(s) for s in samples]
    assert alpaca.to_pylist() == [alpaca_record(s) for s in samples]


def test_answer_text_is_the_sorted_json_of_feedback_and_changes(splits):
    import pyarrow.parquet as pq

    from pipeline.core.protocol import answer, feedback_of

    _, bench, mix = splits
    for path in (bench.path, mix.path):
        for sample in pq.read_table(path, columns=["raw_observation", "delta"]).to_pylist():
            expected = json.dumps(
                {"feedback": feedback_of(sample), "config_changes": delta_to_changes(sample["delta"])},
                ensure_ascii=False,
                sort_keys=True,
            )
            assert answer(sample) == expected


def test_an_export_removes_what_a_killed_export_left_beside_it(tmp_path):
    """A run killed inside an export leaves ``.NAME.staging-PID`` (or ``.NAME.old-PID``) beside the export; the
    next export of that directory removes those of processes that are gone and keeps a live process's."""
    import os

    from pipeline.export.hf_layout import staged

    target = tmp_path / "export" / "sft-1"
    gone = os.getpid() + 10**7  # above any pid_max: no such process
    dead = [target.with_name(f".sft-1.staging-{gone}"), target.with_name(f".sft-1.old-{gone}")]
    live = target.with_name(f".sft-1.staging-{os.getppid()}")
    for d in [*dead, live]:
        (d / "data").mkdir(parents=True)
    with staged(target) as staging:
        staging.mkdir()
        (staging / "README.md").write_text("new")
    assert (target / "README.md").read_text() == "new"
    assert not any(d.exists() for d in dead) and live.exists()
