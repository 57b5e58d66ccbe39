"""Interoperation with the published EnvSimBench: our samples written as reference-format benchmark and
process files, imported back as benchmark split versions, and scored by the harness (oracle in both answer
formats, no_change); the reference-format export and the envsimbench prompt template."""

import json

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from dagster import materialize

from pipeline.core.protocol import answer, messages
from pipeline.envsimbench.export import iter_reference_samples, reference_sample, write_benchmark
from pipeline.envsimbench.importer import import_envsimbench, method_code
from pipeline.evaluate import results
from pipeline.evaluate.harness import run_id
from pipeline.evaluate.samples import load_samples
from pipeline.evaluate.simulators import SimulatorSpec
from pipeline.export.hf_layout import export_split
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from tests.evaluate.test_evaluate import run  # the harness driver the evaluation tests use
from tests.support.layouts import stratified_copy


@pytest.fixture(scope="module")
def ours(default_layout, tmp_path_factory):
    layout = stratified_copy(default_layout, tmp_path_factory.mktemp("esb") / "data")
    bench = build_benchmark(layout, seed=0, on_shortfall="warn")
    build_mixture(layout, sizes={"failure": 20, "no_change": 20, "simple": 30, "complex": 30}, seed=0)
    return layout, bench


@pytest.fixture(scope="module")
def reference_files(ours, tmp_path_factory):
    """Our benchmark written as the reference benchmark file (JSON list) and as process data (one
    record per task with a ``trajectory`` of its steps, JSON lines)."""
    layout, bench = ours
    out = tmp_path_factory.mktemp("ref")
    n = write_benchmark(layout, SplitStore(layout, BENCHMARK).samples(bench.version), out / "benchmark.json")
    refs = list(iter_reference_samples(layout, SplitStore(layout, BENCHMARK).samples(bench.version)))
    tasks: dict[str, dict] = {}
    for ref in refs:
        rec = tasks.setdefault(
            ref["task_info"]["task_id"],
            {"task_info": {**ref["task_info"]}, "env_code": ref["env_code"], "trajectory": []},
        )
        rec["trajectory"].append({**ref["step_detail"], "step": ref["task_info"]["step"]})
    with (out / "process.jsonl").open("w") as fh:
        for rec in tasks.values():
            fh.write(json.dumps(rec) + "\n")
    return out / "benchmark.json", out / "process.jsonl", n


def test_reference_file_has_the_published_shape(reference_files):
    bench_file, _, n = reference_files
    data = json.loads(bench_file.read_text())
    assert isinstance(data, list) and len(data) == n > 100
    for ref in data:
        assert set(ref) == {"task_info", "env_code", "step_detail"}
        assert set(ref["task_info"]) == {"task_id", "env_id", "task", "step"}
        detail = ref["step_detail"]
        assert set(detail) == {"action", "observation", "config_before", "config_after", "config_change"}
        assert set(detail["action"]) == {"name", "arguments"} and isinstance(detail["observation"]["content"], str)
        assert detail["config_change"]["change_count"] == len(detail["config_change"]["changes"])
        assert all(
            set(c) == {"path", "type", "before", "after"} and isinstance(c["path"], str)
            for c in detail["config_change"]["changes"]
        )
        assert "class " in ref["env_code"]  # the whole class, not code(a_t)
    assert '"$int"' not in bench_file.read_text()


def test_import_evaluate_oracle_and_no_change(ours, reference_files, tmp_path):
    layout, bench = ours
    bench_file, process_file, n = reference_files
    original = {
        (r["task_id"], r["step_index"]): r
        for r in pd.read_parquet(SplitStore(layout, BENCHMARK).samples(bench.version)).to_dict("records")
    }
    for name, path in (("benchmark", bench_file), ("process", process_file)):
        report = import_envsimbench(layout, [path], name)
        assert report.samples == n and not report.skipped and not report.change_count_mismatches, report.skipped[:3]
        again = import_envsimbench(layout, [path], name)  # same files -> same version, byte-identical samples
        assert again.version == report.version
        version, samples = load_samples(layout, report.version)
        assert SplitStore(layout, BENCHMARK).manifest(version)["imported"]["source"] == "envsimbench"
        for s in samples:  # Δ recomputed, strata from our rules, code(a_t) cut out of the class
            o = original[(s["task_id"], s["step_index"])]
            assert s["state_before_hash"] == o["state_before_hash"] and s["state_after_hash"] == o["state_after_hash"]
            assert [(d["op"], list(d["path"]), d["after"]) for d in s["delta"]] == [
                (d["op"], list(d["path"]), d["after"]) for d in o["delta"]
            ]
            assert (s["delta_size"], s["outcome"], s["stratum"]) == (o["delta_size"], o["outcome"], o["stratum"])
            assert (
                s["code"] and f"def {s['tool']}" in s["code"] and s["env_code"] and s["sample_hash"] == o["sample_hash"]
            )
        zero = round(100 * sum(s["delta_size"] == 0 for s in samples) / len(samples), 1)
        con = duckdb.connect()
        for kind in ("oracle", "oracle_envsimbench", "no_change"):
            path_ = tmp_path / name / f"{kind}.jsonl"
            run(samples, SimulatorSpec(name=kind, kind=kind), version, path_)
            results.load_run(con, path_, run_id(kind, version))
        runs = {r[0]: r[1:] for r in con.execute("SELECT simulator, fm, cm, samples FROM eval_runs").fetchall()}
        assert runs["oracle"] == (100.0, 100.0, n) and runs["oracle_envsimbench"] == (100.0, 100.0, n)
        assert runs["no_change"][1] == zero and runs["no_change"][2] == n


def test_imported_version_through_the_assets(ours, reference_files, tmp_path):
    from assets.envsimbench import envsimbench_import
    from assets.evaluation import simulator_eval
    from resources import DataStoreResource, HuggingFaceHubResource
    from resources.storage import DataStoreDuckDBResource

    layout, _ = ours
    bench_file, _, n = reference_files
    db = tmp_path / "e.duckdb"
    res = {
        "store": DataStoreResource(data_root=str(layout.root)),
        "duckdb": DataStoreDuckDBResource(store=DataStoreResource(data_root=str(layout.root)), database=str(db)),
        "hub": HuggingFaceHubResource(),
    }
    imported = materialize(
        [envsimbench_import],
        resources=res,
        run_config={"ops": {"envsimbench_import": {"config": {"benchmark_files": [str(bench_file)]}}}},
    )
    assert imported.success
    version = import_envsimbench(layout, [bench_file], "benchmark").version
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT samples FROM split_versions WHERE version = ?", [version]).fetchone() == (n,)
    con.close()
    sims = [
        {"name": "oracle", "kind": "oracle"},
        {"name": "no_change", "kind": "no_change"},
        {"name": "oracle_ref", "kind": "oracle_envsimbench", "prompt": "envsimbench"},
    ]
    scored = materialize(
        [simulator_eval],
        resources=res,
        run_config={"ops": {"simulator_eval": {"config": {"split_version": version, "simulators": sims}}}},
    )
    assert scored.success and [e.passed for e in scored.get_asset_check_evaluations()] == [True]
    con = duckdb.connect(str(db), read_only=True)
    rows = {r[0]: r[1:] for r in con.execute("SELECT simulator, prompt, fm, cm FROM eval_runs").fetchall()}
    assert rows["oracle"] == ("envsim", 100.0, 100.0) and rows["oracle_ref"] == ("envsimbench", 100.0, 100.0)
    cols = {r[0] for r in con.execute("DESCRIBE eval_by_group").fetchall()}
    assert {"cm", "cm_reference", "fm_reference", "cm_changed_paths"} <= cols and "cm_lenient" not in cols


def test_unrepresentable_samples_are_reported_by_id(ours, reference_files, tmp_path):
    layout, _ = ours
    good = json.loads(reference_files[0].read_text())[:3]
    bad_args = json.loads(json.dumps(good[0]))
    bad_args["task_info"]["task_id"] = "bad-args"
    bad_args["step_detail"]["action"]["arguments"] = [1, 2]
    no_cfg = json.loads(json.dumps(good[1]))
    no_cfg["task_info"]["task_id"] = "no-config"
    no_cfg["step_detail"]["config_after"] = None
    miscount = json.loads(json.dumps(good[2]))
    miscount["step_detail"]["config_change"]["change_count"] += 1
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(good + [bad_args, no_cfg, miscount, "not a sample"]))
    report = import_envsimbench(layout, [path], "mixed")
    assert report.samples == 4
    reasons = {s["id"].split(" ")[0]: s["reason"] for s in report.skipped}
    assert "arguments must be an object" in reasons["envsimbench/bad-args/" + str(good[0]["task_info"]["step"])]
    assert "config_after must be objects" in reasons["envsimbench/no-config/" + str(good[1]["task_info"]["step"])]
    assert any("must be an object" in r for i, r in reasons.items() if i.startswith("mixed.json:6"))
    assert [m["change_count"] - m["delta_size"] for m in report.change_count_mismatches] == [1]


def test_method_code_is_cut_from_the_class():
    code = (
        "class A:\n    def x(self):\n        return 1\n\nclass B(A):\n    @staticmethod\n    def x():\n        "
        "return 2\n"
    )
    assert method_code(code, "x") == "@staticmethod\ndef x():\n    return 2"
    assert method_code(code, "nope") is None and method_code("not python (", "x") is None


def test_export_in_the_reference_format_and_envsimbench_prompt(ours, tmp_path):
    layout, bench = ours
    b = export_split(layout, BENCHMARK, None, tmp_path / "bench", envsimbench_format=True)
    assert "envsimbench/benchmark.json" in b.files
    assert len(json.loads((b.directory / "envsimbench" / "benchmark.json").read_text())) == b.rows
    m = export_split(layout, MIXTURE, None, tmp_path / "sft", prompt="envsimbench", envsimbench_format=True)
    info = json.loads((m.directory / "dataset_info.json").read_text())
    assert info["envsim_envsimbench_alpaca"]["file_name"] == "envsimbench/sft_alpaca.jsonl"
    records = [json.loads(line) for line in (m.directory / "envsimbench" / "sft_alpaca.jsonl").read_text().splitlines()]
    assert len(records) == m.rows
    first = records[0]
    assert (
        first["instruction"].startswith("You are simulating a task execution environment.")
        and "class " in first["instruction"]
    )
    assert set(json.loads(first["input"])) == {"initial_config", "tool_call"}
    out = json.loads(first["output"])
    assert isinstance(out["feedback"], str) and all(isinstance(c["path"], str) for c in out["config_changes"])
    chat = pq.read_table(next((m.directory / "sft" / "chat").glob("*.parquet"))).to_pylist()[0]["messages"]
    assert chat[0]["content"].startswith("Environment code:\n\n") and "Initial config:\n{\n  " in chat[0]["content"]
    assert chat[1]["content"].startswith("Tool call: ") and chat[1]["content"].endswith(
        "\n\nReturn the JSON as specified."
    )
    assert json.loads(m.directory.joinpath(".envsim-export.json").read_text())["prompt"] == "envsimbench"


def test_no_internal_encodings_in_model_facing_text():
    big = 2**64 + 1
    smp = {
        "step_id": "s",
        "env_id": "e",
        "tool": "t",
        "code": "def t(self): ...",
        "env_code": "class E:\n    def t(self): ...",
        "state_before_json": json.dumps({"n": {"$int": str(big)}, "x": {"$float": "inf"}}),
        "arguments_json": json.dumps({"id": {"$int": str(big)}}),
        "raw_observation": str({"id": big}),
        "delta": [
            {
                "op": "replace",
                "path": ["n"],
                "before": json.dumps({"$int": str(big)}),
                "after": json.dumps({"$int": str(big + 1)}),
            }
        ],
        "state_after_json": json.dumps({"n": {"$int": str(big + 1)}, "x": {"$float": "inf"}}),
        "task_id": "k",
        "step_index": 0,
    }
    texts = [m["content"] for t in ("envsim", "envsimbench") for m in messages(smp, t)] + [answer(smp)]
    texts.append(json.dumps(reference_sample(smp, smp["env_code"])))
    for text in texts:
        assert "$int" not in text and "$float" not in text
    assert (
        str(big + 1) in answer(smp)
        and str(big) in messages(smp)[1]["content"]
        and "Infinity" in messages(smp)[1]["content"]
    )


ENV_CODE = """class Café:
    def __init__(self):
        self.zoo = {}

    def rename(self, user_id, nom):
        self.zoo[user_id]["nom"] = nom
        return {"success": True}
"""


def _published_sample(k: int) -> dict:
    """A reference-format sample whose keys are not sorted, with non-ASCII text and nesting."""
    before = {
        "zoo": {
            "u2": {"nom": "Zoë", "âge": 3, "tags": ["β", "α"]},
            "u1": {"nom": "Ægir", "meta": {"z": 1, "a": {"y": None, "b": 2.5}}},
        },
        "Ωmega": [{"b": 1, "a": 2}],
        "alpha": k,
        "big": 2**70,
    }
    after = json.loads(json.dumps(before))
    after["zoo"]["u2"]["nom"] = "Zoé"
    return {
        "task_info": {"task_id": f"t{k}", "env_id": "café_env", "task": "renommer", "step": 0},
        "env_code": ENV_CODE,
        "step_detail": {
            "action": {"name": "rename", "arguments": {"user_id": "u2", "nom": "Zoé"}},
            "observation": {"content": "{'success': True}"},
            "config_before": before,
            "config_after": after,
            "config_change": {"changes": [], "change_count": 1},
        },
    }


def test_envsimbench_prompt_of_an_imported_file_equals_the_reference_byte_for_byte(tmp_path):
    """Issue 24, item 8: keys not sorted in the published file stay in its order in model-facing text; the
    canonical (sorted) form is used for hashes and Δ only."""
    from pipeline.core.canonical import canonical_json, canonicalize, text_hash
    from pipeline.core.protocol import ENVSIMBENCH_SYSTEM_TEMPLATE, ENVSIMBENCH_USER_TEMPLATE
    from pipeline.store.layout import DataLayout

    layout = DataLayout.at(tmp_path / "data")
    published = [_published_sample(k) for k in range(3)]
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps(published, ensure_ascii=False, indent=2), encoding="utf-8")
    report = import_envsimbench(layout, [path], "unsorted")
    assert report.samples == 3 and not report.skipped
    _, samples = load_samples(layout, report.version)
    by_task = {s["task_id"]: s for s in samples}
    for ref in json.loads(path.read_text(encoding="utf-8")):  # what the reference evaluation code builds from the file
        detail = ref["step_detail"]
        action = detail["action"]
        expected = [
            {
                "role": "system",
                "content": ENVSIMBENCH_SYSTEM_TEMPLATE.format(
                    env_code=ref["env_code"], config=json.dumps(detail["config_before"], ensure_ascii=False, indent=2)
                ),
            },
            {
                "role": "user",
                "content": ENVSIMBENCH_USER_TEMPLATE.format(
                    call=f"{action['name']}({json.dumps(action['arguments'], ensure_ascii=False)})"
                ),
            },
        ]
        sample = by_task[ref["task_info"]["task_id"]]
        got = messages(sample, "envsimbench")
        assert [m["content"].encode("utf-8") for m in got] == [m["content"].encode("utf-8") for m in expected]
        # the canonical form stays what hashes and Δ use
        canonical = canonical_json(canonicalize(detail["config_before"]))
        assert sample["state_before_json"] == canonical and sample["state_before_hash"] == text_hash(canonical)
        assert sample["delta_size"] == 1 and list(sample["delta"][0]["path"]) == ["zoo", "u2", "nom"]
