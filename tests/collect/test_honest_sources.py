"""Sources that fail honestly: a configured file that is missing or unreadable, or a corpus that yields no
environment, is an error naming the config key, the file and the fix — in the catalog (a failed step) and
before `./forge run` starts anything — never a green run that silently lacks the corpus."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from dagster import materialize

from assets.environments import environment_catalog
from pipeline.collect.sources import SourceConfig, SourceError, env_items
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from resources import DataStoreResource, EnvironmentSourcesResource
from tests.support.envscaler_corpus import COUNTER_CODE
from tests.support.parallel import one_at_a_time

ROOT = Path(__file__).resolve().parents[2]


def _good(path: Path) -> Path:
    path.write_text(json.dumps({"shop": {"env_class_name": "CounterShop", "env_class_code": COUNTER_CODE}}))
    return path


def _cfg(*corpora: EnvScalerCorpus) -> SourceConfig:
    return sources_config(bfcl={"categories": [], "replay": False}, builtin={"enabled": False}, envscaler=list(corpora))


def test_a_missing_corpus_file_names_its_key(tmp_path):
    with pytest.raises(SourceError) as err:
        env_items(_cfg(EnvScalerCorpus(_good(tmp_path / "ok.json")), EnvScalerCorpus(tmp_path / "missing.json")))
    message = str(err.value)
    assert message.startswith("resources.sources.envscaler[1].env_items: ") and "missing.json does not exist" in message
    assert "fix the path" in message


def test_a_missing_scenario_file_names_its_key(tmp_path):
    with pytest.raises(
        SourceError, match=r"resources\.sources\.envscaler\[0\]\.scenarios: .*nope\.jsonl does not exist"
    ):
        env_items(_cfg(EnvScalerCorpus(_good(tmp_path / "ok.json"), scenarios=tmp_path / "nope.jsonl")))


def test_a_corpus_that_is_not_json_fails_naming_the_key_and_the_problem(tmp_path):
    bad = tmp_path / "corpus.json"
    bad.write_text("this is not JSON\nnor this\n")
    with pytest.raises(SourceError) as err:
        env_items(_cfg(EnvScalerCorpus(_good(tmp_path / "ok.json")), EnvScalerCorpus(bad)))
    message = str(err.value)
    assert (
        message.startswith("resources.sources.envscaler[1].env_items: ") and "yielded no usable environment" in message
    )
    assert "not JSON" in message and "corpus.json:1" in message


def test_a_corpus_with_some_bad_records_keeps_the_good_ones(tmp_path):
    path = tmp_path / "mixed.json"
    path.write_text(
        json.dumps(
            {
                "shop": {"env_class_name": "CounterShop", "env_class_code": COUNTER_CODE},
                "broken": {"env_class_name": "Nope", "env_class_code": "def ("},
            }
        )
    )
    items, issues = env_items(_cfg(EnvScalerCorpus(path)))
    assert [i.env_id for i in items] == ["shop"] and any(i.task_id == "broken" for i in issues)


def test_the_catalog_step_fails_with_the_one_line_cause(tmp_path):
    bad = tmp_path / "corpus.json"
    bad.write_text("{not json")
    result = materialize(
        [environment_catalog],
        raise_on_error=False,
        resources={
            "store": DataStoreResource(data_root=str(tmp_path / "data")),
            "sources": EnvironmentSourcesResource(
                bfcl={"categories": []}, builtin={"enabled": False}, envscaler=[{"env_items": str(bad)}]
            ),
        },
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    text = failure.event_specific_data.error.message
    assert "resources.sources.envscaler[0].env_items" in text and "yielded no usable environment" in text


def test_forge_run_stops_before_anything_on_a_missing_corpus(tmp_path, tmp_path_factory):
    config = tmp_path / "run.yaml"
    config.write_text(
        "resources:\n  sources:\n    config:\n      envscaler:\n        - {env_items: "
        f"{tmp_path}/191_env_metadata.json}}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    env.update(DAGSTER_HOME=str(tmp_path / "home"), ENVSIM_DATA_ROOT=str(tmp_path / "data"))
    (tmp_path / "home").mkdir()
    with one_at_a_time(tmp_path_factory, "forge-setup"):
        subprocess.run(["./forge", "setup"], cwd=ROOT, capture_output=True, timeout=1800, check=True)
    proc = subprocess.run(
        ["./forge", "run", "-c", str(config)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert (
        len(lines) == 1 and "resources.sources.envscaler[0].env_items" in lines[0] and "does not exist" in lines[0]
    ), lines
    assert not (tmp_path / "data").exists()
