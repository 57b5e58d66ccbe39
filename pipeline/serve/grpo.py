"""One GRPO step of a causal LM against served environments, in plain PyTorch (no TRL): the model side runs here, in
``.venv-train`` (torch + transformers), and the environments through :class:`~pipeline.serve.adapters.GemEnv` in
the project's Python over a pipe (:mod:`pipeline.serve.gem_pipe`). Imports nothing of the project.

For each task, ``--samples`` episodes of at most ``--turns`` turns: the model writes a tool call
(``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, at most ``--max-new-tokens`` sampled tokens after
the reply's start, :data:`REPLY_START`, which the prompt gives), the
environment answers, and the episode's reward is the task's checks on the real state after its last call. The
advantage of an episode is its reward normalised within its task's group (``(r - mean) / (std + 1e-4)``); the loss
is the policy-gradient surrogate ``-A · ratio`` averaged over the model's own tokens only (the prompt, the chat
template's tokens and the environment's observations are masked out), and one AdamW step (no weight decay) updates
the model. Writes a JSON report: the loss, the rewards, each episode's calls and the parameter change.

    .venv-train/bin/python -m pipeline.serve.grpo --model DIR --env-python .venv/bin/python \\
        --task builtin-payroll-s0-00000 --task builtin-warehouse-s0-00000 --out grpo.json
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: the start of every reply, written for the model (its tokens are the prompt's, masked out of the loss): a model
#: as small as SmolLM2-135M otherwise answers in prose, no reply is a call, every reward is 0 and GRPO's
#: group-normalised advantages leave nothing to learn from
REPLY_START = '<tool_call>{"name": "'

SYSTEM = (
    "You are an agent that completes the user's task by calling tools. Answer with exactly one tool call per "
    'turn, as <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>, and nothing else.\nTools:\n'
)


class Pipe:
    """The environment side: ``python -m pipeline.serve.gem_pipe`` in the project's Python, one JSON line per call."""

    def __init__(self, python: str, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [python, "-m", "pipeline.serve.gem_pipe"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the environment process ended (exit {self.proc.wait()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"environment: {reply['error']}")
        return reply

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=120)


def closed_call(text: str) -> str:
    """The reply as the environment reads it: a call whose JSON object is complete but whose closing tag the
    model did not write (it stopped, or went on in prose) is closed after the object, as a stop sequence would;
    anything else is the reply as written."""
    opening = "<tool_call>"
    if not text.startswith(opening) or "</tool_call>" in text:
        return text
    try:
        call, end = json.JSONDecoder().raw_decode(text, len(opening))
    except ValueError:
        return text
    return text[:end] + "</tool_call>" if isinstance(call, dict) else text


def tool_lines(tools: list[dict[str, Any]]) -> str:
    """The tools as compact JSON lines (name, description, parameters) for the system prompt."""
    out = []
    for schema in tools:
        fn = schema.get("function", schema)
        out.append(json.dumps({k: fn.get(k) for k in ("name", "description", "parameters")}, separators=(",", ":")))
    return "\n".join(out)


def env_turn_text(tokenizer: Any, observation: str) -> str:
    """The chat template's text between the model's reply and its next reply when the environment answers
    ``observation`` (as a user turn): the end of the assistant turn, the observation and the next generation prompt."""
    mark = "\u2063REPLY\u2063"
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": mark},
        {"role": "user", "content": f"Tool result: {observation}"},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text[text.index(mark) + len(mark) :]


def play(model: Any, tokenizer: Any, pipe: Pipe, key: str, task_id: str, seed: int, args: Any) -> dict[str, Any]:
    """One episode: the token ids, which of them the model wrote, its calls, the environment's answers and reward."""
    import torch

    reset = pipe.ask(op="reset", env=key, seed=seed, task_id=task_id)
    messages = [
        {"role": "system", "content": SYSTEM + tool_lines(reset["info"]["tools"])},
        {"role": "user", "content": reset["obs"]},
    ]
    ids: list[int] = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if not isinstance(ids, list):  # a BatchEncoding in some versions
        ids = list(ids["input_ids"])
    start = tokenizer(REPLY_START, add_special_tokens=False)["input_ids"]
    ids = ids + start
    mask = [0] * len(ids)
    eos = tokenizer.eos_token_id
    turns, reward, rewards = [], 0.0, []
    for _ in range(args.turns):
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=args.max_new_tokens,
                do_sample=True,
                temperature=args.temperature,
                top_p=1.0,
                pad_token_id=eos,
            )
        new = out[0, len(ids) :].tolist()
        ids, mask = ids + new, mask + [1] * len(new)
        text = closed_call(REPLY_START + tokenizer.decode(new, skip_special_tokens=True))
        step = pipe.ask(op="step", env=key, action=text)
        reward = float(step["reward"])
        rewards.append(reward)
        turns.append({"reply": text, "observation": step["obs"][:500], "reward": reward, "info": step["info"]})
        if step["terminated"] or step["truncated"]:
            break
        env_ids = tokenizer(env_turn_text(tokenizer, step["obs"][:1500]), add_special_tokens=False)["input_ids"]
        if new and new[-1] == eos and env_ids and env_ids[0] == eos:
            env_ids = env_ids[1:]  # the model closed its turn itself
        env_ids += start  # the next reply starts as the first did
        ids, mask = ids + env_ids, mask + [0] * len(env_ids)
    final = pipe.ask(op="close", env=key)
    print(f"episode {key} ({task_id}, seed {seed}): {len(turns)} turns, reward {reward}", file=sys.stderr, flush=True)
    return {
        "task_id": task_id,
        "seed": seed,
        "ids": ids,
        "mask": mask,
        "turns": turns,
        "reward": reward,
        "step_rewards": rewards,
        "final_state": final["state"],
        "initial_state": final["initial"],
    }


def advantages(rewards: list[float]) -> list[float]:
    """GRPO's group-normalised advantages: (r - mean) / (std + 1e-4) within one task's group."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    return [(r - mean) / (std + 1e-4) for r in rewards]


def grpo_step(model: Any, episodes: list[dict[str, Any]], lr: float) -> dict[str, Any]:
    """One policy-gradient step over ``episodes`` (each with ``advantage``): the token-level surrogate
    ``-A · exp(logp - logp_old)`` over the model's tokens, averaged per episode then over episodes; AdamW."""
    import torch

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    optimizer.zero_grad()
    total = 0.0
    for ep in episodes:
        ids = torch.tensor([ep["ids"]])
        mask = torch.tensor(ep["mask"][1:], dtype=torch.float32)
        logits = model(ids).logits[0, :-1].float()
        logp = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
        ratio = torch.exp(logp - logp.detach())  # 1 on-policy; its gradient is ∇logp
        per_token = -ep["advantage"] * ratio
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1) / len(episodes)
        loss.backward()
        total += float(loss.detach())
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    optimizer.step()
    return {"loss": total, "grad_norm": grad_norm}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="One GRPO step against served environments (see the module doc).")
    parser.add_argument("--model", required=True, help="a Hugging Face checkpoint directory")
    parser.add_argument("--env-python", required=True, help="the project's Python (its .venv), for the environments")
    parser.add_argument("--task", action="append", required=True, help="a served task id (repeat: one group each)")
    parser.add_argument("--samples", type=int, default=4, help="episodes per task (the group)")
    parser.add_argument("--turns", type=int, default=3, help="turns per episode at most")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="new tokens per turn at most")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="the JSON report")
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(args.seed)
    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    pipe = Pipe(args.env_python, Path(__file__).resolve().parents[2])
    try:
        episodes = []
        for t, task_id in enumerate(args.task):
            group = [
                play(model, tokenizer, pipe, f"{t}-{k}", task_id, args.seed + k, args) for k in range(args.samples)
            ]
            for ep, adv in zip(group, advantages([ep["reward"] for ep in group]), strict=True):
                ep["advantage"] = adv
            episodes += group
    finally:
        pipe.close()
    played = time.monotonic() - started
    stats = grpo_step(model, episodes, args.lr)
    changed = sum(int(not torch.equal(before[n], p.detach())) for n, p in model.named_parameters())
    delta = max(float((before[n] - p.detach()).abs().max()) for n, p in model.named_parameters())
    report = {
        **stats,
        "rewards": [ep["reward"] for ep in episodes],
        "advantages": [ep["advantage"] for ep in episodes],
        "changed_tensors": changed,
        "tensors": len(before),
        "max_abs_change": delta,
        "model_tokens": sum(sum(ep["mask"]) for ep in episodes),
        "env_tokens": sum(len(ep["mask"]) - sum(ep["mask"]) for ep in episodes),
        "rollout_s": round(played, 1),
        "total_s": round(time.monotonic() - started, 1),
        "episodes": [{k: v for k, v in ep.items() if k not in ("ids", "mask")} for ep in episodes],
    }
    args.out.write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({k: report[k] for k in ("loss", "grad_norm", "rewards", "changed_tensors", "total_s")}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
