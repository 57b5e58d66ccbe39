"""The GPU side of the SFT experiment (docs/evaluation.md "Measured on a GPU"). Runs in the
LLaMA-Factory job environment on the GPU node, with no project import: everything it needs was prepared by
``benchmarks/gpu_sft/prepare.py`` into one folder.

  python benchmarks/gpu_sft/device.py convert  --gguf F --out DIR
  python benchmarks/gpu_sft/device.py generate --model DIR --prompts bench.jsonl --out answers.jsonl [--batch 64]
  python benchmarks/gpu_sft/device.py train    --config train.yaml

``generate`` encodes every prompt exactly as LLaMA-Factory's serving does (its ``smollm2`` template's
``encode_oneturn``, the template's stop words) and decodes greedily in length-sorted batches with
``transformers``' ``generate`` — vLLM cannot be installed on the device (no network; its wheel alone is over
the transfer limit), and LLaMA-Factory's Hugging Face backend answers one request at a time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def convert(gguf: Path, out: Path) -> dict:
    """Dequantise the GGUF to an ordinary HF checkpoint (bf16 safetensors) with transformers + gguf."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    info = {
        "gguf": gguf.name,
        "gguf_sha256": sha256(gguf),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / "envsim_base_model.json").write_text(json.dumps(info, indent=2))
    return info


def generate(model_dir: Path, prompts: Path, out: Path, batch: int, max_new_tokens: int, template: str) -> dict:
    import torch
    from llamafactory.data import get_template_and_fix_tokenizer
    from llamafactory.hparams import DataArguments
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    tmpl = get_template_and_fix_tokenizer(tok, DataArguments(template=template))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16).cuda().eval()
    rows = [json.loads(line) for line in prompts.read_text().splitlines() if line.strip()]
    encoded = []
    for row in rows:
        msgs = row["messages"]
        system = next((m["content"] for m in msgs if m["role"] == "system"), None)
        turns = [m for m in msgs if m["role"] != "system"] + [{"role": "assistant", "content": ""}]
        ids, _ = tmpl.encode_oneturn(tok, turns, system)
        encoded.append((row["step_id"], ids))
    encoded.sort(key=lambda e: len(e[1]))
    stop = tmpl.get_stop_token_ids(tok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else stop[0]
    started = time.perf_counter()
    generated_tokens = 0
    with out.open("w") as fh, torch.inference_mode():
        for i in range(0, len(encoded), batch):
            chunk = encoded[i : i + batch]
            width = max(len(ids) for _, ids in chunk)
            input_ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for j, (_, ids) in enumerate(chunk):  # left padding
                input_ids[j, width - len(ids) :] = torch.tensor(ids)
                mask[j, width - len(ids) :] = 1
            t0 = time.perf_counter()
            res = model.generate(
                input_ids=input_ids.cuda(),
                attention_mask=mask.cuda(),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                eos_token_id=stop,
                pad_token_id=pad,
            )
            took = time.perf_counter() - t0
            for j, (step_id, ids) in enumerate(chunk):
                new = res[j, width:].tolist()
                n = next((k for k, t in enumerate(new) if t in stop), len(new))
                generated_tokens += n
                fh.write(
                    json.dumps(
                        {
                            "step_id": step_id,
                            "text": tok.decode(new[:n], skip_special_tokens=True),
                            "prompt_tokens": len(ids),
                            "completion_tokens": n,
                            "latency_s": round(took / len(chunk), 4),
                        }
                    )
                    + "\n"
                )
            print(
                f"generate {model_dir.name}: {min(i + batch, len(encoded))}/{len(encoded)} in "
                f"{time.perf_counter() - started:.1f}s",
                flush=True,
            )
    seconds = time.perf_counter() - started
    return {
        "model": str(model_dir),
        "samples": len(encoded),
        "seconds": round(seconds, 2),
        "samples_per_s": round(len(encoded) / seconds, 3),
        "generated_tokens": generated_tokens,
        "generated_tokens_per_s": round(generated_tokens / seconds, 1),
        "batch": batch,
        "max_new_tokens": max_new_tokens,
        "gpu": torch.cuda.get_device_name(0),
    }


def train(config: Path) -> dict:
    started = time.perf_counter()
    proc = subprocess.run(["llamafactory-cli", "train", str(config)])
    if proc.returncode:
        sys.exit(f"llamafactory-cli train {config} failed with exit {proc.returncode}")
    return {"config": str(config), "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("--gguf", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    g = sub.add_parser("generate")
    g.add_argument("--model", type=Path, required=True)
    g.add_argument("--prompts", type=Path, required=True)
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--batch", type=int, default=64)
    g.add_argument("--max-new-tokens", type=int, default=1024)
    g.add_argument("--template", default="smollm2")
    t = sub.add_parser("train")
    t.add_argument("--config", type=Path, required=True)
    a = ap.parse_args()
    if a.cmd == "convert":
        info = convert(a.gguf, a.out)
    elif a.cmd == "generate":
        info = generate(a.model, a.prompts, a.out, a.batch, a.max_new_tokens, a.template)
    else:
        info = train(a.config)
    print("RESULT " + json.dumps({"cmd": a.cmd, **info}), flush=True)


if __name__ == "__main__":
    main()
