"""Embedded base models (pipeline/training/base_models.py): a conversion happens once per data root, also when two
jobs ask for the same model at the same time (the training and the evaluation job of one root, started together)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from pipeline.training import base_models
from pipeline.training.gguf_convert import MARK

#: a stand-in for the LLaMA-Factory environment's Python running gguf_convert.py: it counts its runs, takes a
#: while, writes the checkpoint where the request says and reports as the script does
FAKE_CONVERTER = """#!{python}
import json, sys, time
from pathlib import Path
request = json.load(sys.stdin)
with open({runs!r}, "a") as fh:
    fh.write("run\\n")
time.sleep(1.0)
out = Path(request["out"])
out.mkdir(parents=True)
(out / "model.safetensors").write_bytes(b"weights")
print({mark!r} + json.dumps({{"ok": True, "gguf_sha256": request["gguf_sha256"], "parameters": 7, "dtype": "bfloat16",
      "versions": {{}}, "seconds": 1.0}}))
"""


def test_two_jobs_asking_at_once_convert_the_model_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    python = tmp_path / "python"
    python.write_text(FAKE_CONVERTER.format(python=sys.executable, runs=str(runs), mark=MARK))
    python.chmod(0o755)
    name = base_models.DEFAULT_MODEL
    got: list[Path] = []

    def ask() -> None:
        got.append(base_models.materialize(name, tmp_path / "data", str(python), log=lambda _: None))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert runs.read_text().splitlines() == ["run"]  # the second waited for the first and took its checkpoint
    assert got == [base_models.models_dir(tmp_path / "data") / name] * 2
    assert (got[0] / "model.safetensors").read_bytes() == b"weights"
    assert json.loads((got[0] / base_models.LINEAGE).read_text())["parameters"] == 7
    assert not list(got[0].parent.glob(f".{name}.converting"))
