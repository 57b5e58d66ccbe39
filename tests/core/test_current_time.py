"""The simulator prompt states the current time: a sample's ``current_time`` is the frozen wall clock
its action ran under (``clock.step_time(clock_start, step_index)``), and the ``envsim`` prompt — SFT
records, the exported dataset and what the evaluation harness sends — carries it, so a timestamp the
environment wrote into Δ with ``datetime.now()`` / ``time.time()`` is in the prompt. The ``envsimbench``
template stays the reference's prompt, without it."""

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core import clock
from pipeline.core.protocol import answer, messages, time_section, user_prompt
from pipeline.core.strata import Cell
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from pipeline.evaluate.harness import evaluate
from pipeline.evaluate.samples import load_samples
from pipeline.evaluate.simulators import make_simulator, simulator_spec
from pipeline.export.hf_layout import export_split
from pipeline.export.records import chat_record, record_tables
from pipeline.labeling.steps import label
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.select.stratify import stratify
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, MIXTURE
from tests.support.fake_openai import FakeOpenAI
from tests.support.hub_corpus import write_hub_corpus


def test_time_section_states_iso_naive_and_epoch():
    text = time_section("2025-03-01T12:01:00+00:00")
    assert "2025-03-01T12:01:00+00:00" in text and "2025-03-01 12:01:00" in text and str(1740830460) in text
    assert time_section("2025-03-01T12:01:00Z") == text == time_section("2025-03-01T12:01:00")  # naive = UTC
    assert time_section(None) == time_section(float("nan")) == ""
    with pytest.raises(ValueError, match="not an ISO 8601"):
        time_section("yesterday")
    bare = user_prompt("{}", "f", "{}", "def f(): pass")
    assert "Current time" not in bare and bare.startswith("## Current state")


@pytest.fixture(scope="module")
def timed(tmp_path_factory, sandbox):
    """The Hub-format corpus (its Ledger stamps entries with datetime.now() and time.time()) collected,
    labeled and split: a benchmark of writes and a mixture."""
    tmp = tmp_path_factory.mktemp("clock")
    envs, scenarios = write_hub_corpus(tmp / "corpus")
    layout = DataLayout.at(tmp / "data")
    cfg = sources_config(
        bfcl={"categories": [], "replay": False},
        builtin={"enabled": False},
        envscaler=[EnvScalerCorpus(envs, scenarios[0], more_scenarios=tuple(scenarios[1:]))],
    )
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues, disabled=("bfcl",))
    collect_all(
        cfg,
        layout,
        sandbox,
        ExploreSettings(seed=7, call_budget=120, batch_episodes=8, min_envs=1, episode_length=8, mutate_rate=0.2),
    )
    label(layout, sandbox)
    stratify(layout)
    bench = build_benchmark(
        layout, [Cell("write", "simple", 12, delta_min=1, delta_max=12)], seed=1, on_shortfall="warn"
    )
    mix = build_mixture(
        layout, {"failure": 5, "no_change": 5, "simple": 20, "complex": 5}, seed=1, decontaminate="task_id"
    )
    return layout, bench, mix


def _stamped(samples):
    """Samples whose Δ adds a ledger entry stamped by the environment's clock."""
    out = []
    for s in samples:
        for d in s["delta"]:
            if d["op"] == "add" and list(d["path"])[:1] == ["entries"]:
                entry = json.loads(d["after"])
                if isinstance(entry, dict) and "booked_at" in entry:
                    out.append((s, entry))
    return out


def test_sample_prompt_carries_the_time_written_into_delta(timed):
    layout, bench, _ = timed
    version, samples = load_samples(layout, bench.version)
    stamped = _stamped(samples)
    assert stamped, "the benchmark holds no add_entry write"
    clocks = {
        r["trajectory_id"]: r["clock_start"]
        for f in layout.trajectory_files()
        for r in pq.read_table(f, columns=["trajectory_id", "clock_start"]).to_pylist()
    }
    for sample, entry in stamped:
        assert sample["current_time"] == clock.step_time(clocks[sample["trajectory_id"]], int(sample["step_index"]))
        prompt = messages(sample)[1]["content"]
        section = prompt.split("## Current state")[0]  # the time section, not an older stamp in s_t
        assert entry["booked_at"] in section.replace(" ", "T")  # datetime.now().isoformat() of the env code
        assert f"time.time() = {entry['epoch']}" in section  # int(time.time())
        assert prompt.startswith("## Current time\n" + sample["current_time"])
        # the SFT record builders (single and batched) put the same time in the user message
        assert chat_record(sample)["messages"][1]["content"] == prompt
        reference = messages(sample, "envsimbench")  # the reference prompt is kept as published: no time
        assert sample["current_time"] not in reference[0]["content"] + reference[1]["content"]
    # every sample of a run has its own step's time; trajectories start at different clocks
    assert len({s["current_time"] for s in samples}) > 1


def test_exported_dataset_and_sft_records_carry_current_time(timed, tmp_path):
    layout, bench, mix = timed
    report = export_split(layout, BENCHMARK, bench.version, tmp_path / "bench")
    card = (report.directory / "README.md").read_text()
    assert "name: current_time" in card and "`current_time`" in card
    data = pq.read_table(report.directory / "data" / "test-00000-of-00001.parquet")
    assert data.column("current_time").null_count == 0
    exported = export_split(layout, MIXTURE, mix.version, tmp_path / "mix")
    chat = pq.read_table(next((exported.directory / "sft" / "chat").glob("*.parquet"))).to_pylist()
    samples = {r["step_id"]: r for r in pq.read_table(mix.path).to_pylist()}
    for record in chat:
        user = record["messages"][1]["content"]
        assert user.startswith("## Current time\n" + samples[record["step_id"]]["current_time"])
    # samples written before current_time existed: records without a time section, no error
    old = pq.read_table(mix.path).drop_columns(["current_time"])
    chat_old, _ = record_tables(old)
    assert not any("Current time" in m["content"] for r in chat_old.to_pylist() for m in r["messages"])


def test_harness_sends_the_time(timed, tmp_path):
    """The fake endpoint answers right only for the exact prompt with the time: CM = 1 on the stamped
    samples proves the harness sent it; a prompt built without it would be answered wrong."""
    layout, bench, _ = timed
    version, samples = load_samples(layout, bench.version)
    stamped = [s for s, _ in _stamped(samples)]
    answers = {messages(s)[1]["content"]: answer(s) for s in stamped}
    untimed = {messages({**s, "current_time": None})[1]["content"] for s in stamped}
    assert not untimed & set(answers)
    with FakeOpenAI(answers) as server:
        spec = simulator_spec(name="fake", model="fake-model", base_url=server.url, max_retries=1, timeout_s=10)
        simulator = make_simulator(spec)

        async def go():
            try:
                return await evaluate(stamped, simulator, version, tmp_path / "fake.jsonl")
            finally:
                await simulator.aclose()

        asyncio.run(go())
    rows = [json.loads(line) for line in Path(tmp_path / "fake.jsonl").read_text().splitlines()]
    assert len(rows) == len(stamped) and all(r["cm"] and r["fm"] for r in rows)
