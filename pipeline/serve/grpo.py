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
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

#: the start of every reply, written for the model (its tokens are the prompt's, masked out of the loss): a model
#: as small as SmolLM2-135M otherwise answers in prose, no reply is a call, every reward is 0 and GRPO's
#: group-normalised advantages leave nothing to learn from
REPLY_START = '<tool_call>{"name": "'
CALL_END = "</tool_call>"  # generation stops after it

SYSTEM = (
    "You are an agent that completes the user's task by calling tools. Answer with exactly one tool call per "
    'turn, as <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>, and nothing else.\nTools:\n'
)


class Pipe:
    """The environment side: ``python -m pipeline.serve.gem_pipe`` in the project's Python, one JSON line per call."""

    def __init__(self, python: str, cwd: Path, scenarios: int = 1) -> None:
        self.proc = subprocess.Popen(
            [python, "-m", "pipeline.serve.gem_pipe", "--scenarios", str(scenarios)],
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


def call_skeletons(tools: list[dict[str, Any]]) -> list[list[str]]:
    """Each tool's call as the literal text between its argument values (after :data:`REPLY_START`): its name and
    first required key, the next keys, and the end of the call; a string value's quotes are part of the literals."""
    out = []
    for tool in tools:
        fn = tool.get("function", tool)
        parameters = fn.get("parameters") or {}
        properties = parameters.get("properties") or {}
        required = [k for k in parameters.get("required") or [] if isinstance(k, str)]
        literals, head = [], f'{fn["name"]}", "arguments": {{'
        for i, key in enumerate(required):
            quote = '"' if (properties.get(key) or {}).get("type") == "string" else ""
            literals.append(f'{head}{", " if i else ""}"{key}": {quote}')
            head = quote  # a string's closing quote opens the next literal
        literals.append(f"{head}}}}}{CALL_END}")
        out.append(literals)
    return out


def value_types(tools: list[dict[str, Any]]) -> list[list[str]]:
    """Each tool's required argument types, in the order of its skeleton's values (:func:`call_skeletons`)."""
    out = []
    for tool in tools:
        parameters = tool.get("function", tool).get("parameters") or {}
        properties = parameters.get("properties") or {}
        required = [k for k in parameters.get("required") or [] if isinstance(k, str)]
        out.append([str((properties.get(k) or {}).get("type", "")) for k in required])
    return out


#: the longest string value a constrained reply writes (characters): then its closing quote is forced, as a JSON
#: schema's ``maxLength`` bounds guided decoding; a 135M model otherwise writes on inside a string to the token limit
#: and the call never closes
MAX_STRING_CHARS = 16
#: the longest number a constrained reply writes (characters), and the characters one is written with
MAX_NUMBER_CHARS = 6
_NUMBER_TEXT = re.compile(r"^[0-9.\-]+$")
_UNQUOTED = "\0unquoted"  # token_pieces' entry: the tokens a JSON string's inside may hold (no quote, newline, end)
_NUMERIC = "\0numeric"  # token_pieces' entry: the tokens a number may be written with (digits, '.', '-')
_IN_STRING = "\0"  # marks a rest that follows a string value still being written (see CallShape.__call__)
_IN_NUMBER = "\1"  # marks a rest that follows a number still being written


def forced_rests(skeleton: list[str], text: str, types: list[str] | None = None) -> list[str] | None:
    """What ``text`` (the reply so far) must continue with to follow ``skeleton``: ``[]`` when it no longer can,
    ``None`` when a value is being written (free), else the rest of the current literal. With ``types``
    (:func:`value_types`) a number is written with digits only, at most :data:`MAX_NUMBER_CHARS` of them."""
    decoder, at = json.JSONDecoder(), 0
    for i, literal in enumerate(skeleton):
        if i:  # a value precedes this literal: where it ends (a string's closing quote is the literal's)
            quoted = skeleton[i - 1].endswith('"')
            numeric = bool(types) and types[i - 1] in ("number", "integer")  # type: ignore[index]
            number = [_IN_NUMBER + literal] if len(text) - at < MAX_NUMBER_CHARS else [literal]
            try:
                if quoted:
                    _, end = decoder.raw_decode(text, at - 1)
                    end -= 1
                else:
                    _, end = decoder.raw_decode(text, at)
            except ValueError:
                # still writing the value; a string ends only with a token that is the closing literal's start, and
                # must once it is MAX_STRING_CHARS long
                if not quoted:
                    return number if numeric else None
                return [_IN_STRING + literal] if len(text) - at < MAX_STRING_CHARS else [literal]
            if end >= len(text):
                return number if numeric else None  # the value may go on (a number's next digit)
            at = end
        written = text[at : at + len(literal)]
        if not literal.startswith(written):
            return []
        if len(written) < len(literal):
            return [literal[len(written) :]]
        at += len(literal)
    return [] if at < len(text) else [""]


class CallShape:
    """A logits processor for ``generate``: a reply (after :data:`REPLY_START`) is decoded as one call of the task's
    tools (:func:`call_skeletons`): the tool's name, its required keys in order and the call's end are forced, and
    each value is the model's own, a string up to :data:`MAX_STRING_CHARS` characters and a number written in digits
    up to :data:`MAX_NUMBER_CHARS` (as a schema's ``maxLength`` bounds guided decoding). (Grammar-constrained
    decoding of a call's shape, as guided decoding does in RL rollouts: a 135M model otherwise invents names and
    keys, every reward is 0 and GRPO has nothing to learn from.)
    The forced tokens are sampled from the model's own distribution over the allowed ones, and the loss takes the
    model's unmasked log-probabilities of every token of the reply, so the policy learns to write the shape itself.
    A reply that has left every skeleton (a value written past its end) is not constrained further."""

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]], pieces: dict[str, list[int]]) -> None:
        self.tokenizer, self.pieces, self.skeletons = tokenizer, pieces, call_skeletons(tools)
        self.types = value_types(tools)
        self.free = {_IN_STRING: pieces[_UNQUOTED], _IN_NUMBER: pieces.get(_NUMERIC, [])}  # no quote / digits
        self.start = 0

    def at(self, prompt_length: int) -> CallShape:
        """This processor for a reply generated after ``prompt_length`` tokens."""
        self.start = prompt_length
        return self

    def rests(self, text: str) -> list[str] | None:
        """The literal continuations ``text`` allows (None: any token)."""
        rests: list[str] = []
        for skeleton, types in zip(self.skeletons, self.types, strict=True):
            forced = forced_rests(skeleton, text, types)
            if forced is None:
                return None
            rests += forced
        return None if not rests or "" in rests else rests

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        masked = scores.clone()
        for r in range(scores.shape[0]):  # each row of a batch is its own reply
            rests = self.rests(self.tokenizer.decode(input_ids[r, self.start :]))
            if rests is None:
                continue
            masked[r] = float("-inf")
            free = self.free.get(rests[0][:1])  # inside a value: a token it may hold, or the literal's start
            if free is not None:
                masked[r, free] = scores[r, free]
                rests = [rests[0][1:]]
            allowed = sorted(
                {i for rest in rests for k in range(1, len(rest) + 1) for i in self.pieces.get(rest[:k], ())}
            )
            masked[r, allowed] = scores[r, allowed]
        return masked


def token_pieces(tokenizer: Any, longest: int = 64) -> dict[str, list[int]]:
    """Each token's text (up to ``longest`` characters) -> the ids that spell exactly it, for :class:`CallShape`;
    under ``_UNQUOTED`` the tokens a string value may hold, under ``_NUMERIC`` those a number may."""
    pieces: dict[str, list[int]] = {_UNQUOTED: [], _NUMERIC: []}
    for i in range(len(tokenizer)):
        text = tokenizer.decode([i])
        if text and len(text) <= longest:
            pieces.setdefault(text, []).append(i)
        if '"' not in text and "\n" not in text and i != tokenizer.eos_token_id:
            pieces[_UNQUOTED].append(i)
        if _NUMBER_TEXT.match(text):
            pieces[_NUMERIC].append(i)
    return pieces


def tool_lines(tools: list[dict[str, Any]]) -> str:
    """The tools for the system prompt, one signature line each: ``name(key: type, ...) - description`` (the
    required keys first, an optional one marked ``?``)."""
    out = []
    for schema in tools:
        fn = schema.get("function", schema)
        parameters = fn.get("parameters") or {}
        properties, required = parameters.get("properties") or {}, parameters.get("required") or []
        keys = [k for k in required if k in properties] + [k for k in properties if k not in required]
        args = ", ".join(f"{k}{'' if k in required else '?'}: {(properties[k] or {}).get('type', 'any')}" for k in keys)
        out.append(f"{fn['name']}({args}) - {fn.get('description') or ''}".rstrip(" -"))
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


def _trimmed(tokenizer: Any, new: list[int], eos: int) -> list[int]:
    """A reply's own tokens from a batched ``generate``: up to its end of turn, or to the token that completed
    :data:`CALL_END` (the stop string); a row that finished before the others is padded after it."""
    end = new.index(eos) + 1 if eos in new else len(new)
    for j in range(end):
        if tokenizer.decode(new[: j + 1]).endswith(CALL_END):
            return new[: j + 1]
    return new[:end]


def play_group(
    model: Any,
    tokenizer: Any,
    pipe: Pipe,
    keys: list[str],
    task_id: str,
    seeds: list[int],
    args: Any,
    pieces: dict[str, list[int]] | None,
    shared: dict[str, Any],
) -> list[dict[str, Any]]:
    """One group: an episode per seed, generated together in one batch (decoding a 135M model on CPU costs about
    as much for 4 rows as for 1). Returns each episode's token ids, which of them the model wrote, its calls, the
    environment's answers and reward. With ``pieces`` (:func:`token_pieces`) each reply's shape is constrained
    (:class:`CallShape`). The batch is the rows' common prompt, its keys and values computed once, then each row's
    own tokens, each new block left-padded and its padding masked out (positions follow the attention mask), so a
    row's reply is sampled from exactly its own episode. The sampling seed is the group's, so a group plays the same
    whatever was played before it. ``shared`` holds what a run computes once: the stop criterion."""
    import torch
    from transformers import StoppingCriteriaList, StopStringCriteria

    if "stop" not in shared:  # building it scans the vocabulary (0.6 s): once per run, not per reply
        shared["stop"] = StoppingCriteriaList([StopStringCriteria(tokenizer, [CALL_END])])
    torch.manual_seed(zlib.crc32(f"{task_id}:{seeds}".encode()))
    eos = tokenizer.eos_token_id
    start = tokenizer(REPLY_START, add_special_tokens=False)["input_ids"]
    resets = [pipe.ask(op="reset", env=key, seed=seed, task_id=task_id) for key, seed in zip(keys, seeds, strict=True)]
    episodes = []
    for reset in resets:
        messages = [
            {"role": "system", "content": SYSTEM + tool_lines(reset["info"]["tools"])},
            {"role": "user", "content": reset["obs"]},
        ]
        ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        if not isinstance(ids, list):  # a BatchEncoding in some versions
            ids = list(ids["input_ids"])
        episodes.append({"ids": ids + start, "mask": [0] * (len(ids) + len(start)), "turns": [], "rewards": []})
    common = len(episodes[0]["ids"]) - 1  # the shared prompt but its last token (generate needs one to compute)
    for ep in episodes[1:]:
        common = next((i for i, (a, b) in enumerate(zip(episodes[0]["ids"], ep["ids"])) if a != b), common)
        common = min(common, len(ep["ids"]) - 1)
    prompt = episodes[0]["ids"][:common]
    with torch.no_grad():
        cache = model(torch.tensor([prompt]), use_cache=True).past_key_values
    cache.batch_repeat_interleave(len(episodes))
    rows = torch.tensor([prompt] * len(episodes)), torch.ones(len(episodes), common, dtype=torch.long)
    blocks = [ep["ids"][common:] for ep in episodes]
    live = list(range(len(episodes)))
    shape = CallShape(tokenizer, resets[0]["info"]["tools"], pieces) if pieces is not None else None
    for _ in range(args.turns):
        width = max(len(b) for b in blocks)
        block = torch.tensor([[eos] * (width - len(b)) + b for b in blocks])
        block_mask = torch.tensor([[0] * (width - len(b)) + [1] * len(b) for b in blocks])
        ids, attention = torch.cat([rows[0], block], 1), torch.cat([rows[1], block_mask], 1)
        with torch.no_grad():
            out = model.generate(
                ids,
                past_key_values=cache,
                return_dict_in_generate=True,
                attention_mask=attention,
                max_new_tokens=args.max_new_tokens,
                do_sample=True,
                temperature=args.temperature,
                top_p=1.0,
                pad_token_id=eos,
                logits_processor=[shape.at(ids.shape[1])] if shape else None,
                stopping_criteria=shared["stop"],
            )
        cache, generated = out.past_key_values, out.sequences[:, ids.shape[1] :]
        replies = [_trimmed(tokenizer, generated[r].tolist(), eos) for r in range(len(episodes))]
        reply_mask = torch.tensor([[1] * len(n) + [0] * (generated.shape[1] - len(n)) for n in replies])
        rows = out.sequences, torch.cat([attention, reply_mask], 1)
        blocks = [[] for _ in episodes]
        for r in list(live):
            ep, new = episodes[r], replies[r]
            ep["ids"], ep["mask"] = ep["ids"] + new, ep["mask"] + [1] * len(new)
            text = closed_call(REPLY_START + tokenizer.decode(new, skip_special_tokens=True))
            step = pipe.ask(op="step", env=keys[r], action=text)
            ep["rewards"].append(float(step["reward"]))
            ep["turns"].append(
                {"reply": text, "observation": step["obs"][:500], "reward": ep["rewards"][-1], "info": step["info"]}
            )
            if step["terminated"] or step["truncated"]:
                live.remove(r)
                continue
            env_ids = tokenizer(env_turn_text(tokenizer, step["obs"][:1500]), add_special_tokens=False)["input_ids"]
            if new and new[-1] == eos and env_ids and env_ids[0] == eos:
                env_ids = env_ids[1:]  # the model closed its turn itself
            blocks[r] = env_ids + start  # the next reply starts as the first did
            ep["ids"], ep["mask"] = ep["ids"] + blocks[r], ep["mask"] + [0] * len(blocks[r])
        if not live:  # a finished row goes on in the batch while others play, its new block empty
            break
    out_episodes = []
    for key, seed, ep in zip(keys, seeds, episodes, strict=True):
        final = pipe.ask(op="close", env=key)
        reward = ep["rewards"][-1] if ep["rewards"] else 0.0
        print(f"episode {key} ({task_id}, seed {seed}): {len(ep['turns'])} turns, reward {reward}", file=sys.stderr)
        out_episodes.append(
            {
                "task_id": task_id,
                "seed": seed,
                "ids": ep["ids"],
                "mask": ep["mask"],
                "turns": ep["turns"],
                "reward": reward,
                "step_rewards": ep["rewards"],
                "final_state": final["state"],
                "initial_state": final["initial"],
            }
        )
    sys.stderr.flush()
    return out_episodes


def advantages(rewards: list[float]) -> list[float]:
    """GRPO's group-normalised advantages: (r - mean) / (std + 1e-4) within one task's group."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    return [(r - mean) / (std + 1e-4) for r in rewards]


def grpo_step(model: Any, episodes: list[dict[str, Any]], lr: float) -> dict[str, Any]:
    """One policy-gradient step over ``episodes`` (each with ``advantage``): the token-level surrogate
    ``-A · exp(logp - logp_old)`` over the model's tokens, averaged per episode then over episodes; AdamW. An episode
    whose advantage is 0 adds nothing to the loss or the gradient, so it is not run; the others get logits only where
    the next token is the model's own (``logits_to_keep``)."""
    import torch

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    optimizer.zero_grad()
    total = 0.0
    for ep in episodes:
        kept = [t for t, own in enumerate(ep["mask"][1:]) if own]  # positions whose next token is the model's
        if not ep["advantage"] or not kept:
            continue
        ids = torch.tensor([ep["ids"]])
        positions = torch.tensor(kept)
        logits = model(ids, logits_to_keep=positions).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1).gather(1, ids[0, positions + 1, None])[:, 0]
        ratio = torch.exp(logp - logp.detach())  # 1 on-policy; its gradient is ∇logp
        loss = (-ep["advantage"] * ratio).sum() / len(kept) / len(episodes)
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
    parser.add_argument("--scenarios", type=int, default=1, help="builtin scenarios served per environment")
    parser.add_argument("--samples", type=int, default=4, help="episodes per task (the group)")
    parser.add_argument(
        "--resample",
        type=int,
        default=0,
        help="play a task's group again (new seeds, at most N times) while its rewards are all equal (DAPO's "
        "dynamic sampling: such a group's advantages are 0)",
    )
    parser.add_argument("--turns", type=int, default=3, help="turns per episode at most")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="new tokens per turn at most")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument(
        "--free-shape",
        dest="shape",
        action="store_false",
        help="let the model write any call (default: each call's name and first key are decoded from the task's tools)",
    )
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
    pieces = token_pieces(tokenizer) if args.shape else None
    pipe = Pipe(args.env_python, Path(__file__).resolve().parents[2], args.scenarios)
    shared: dict[str, Any] = {}
    try:
        episodes, dropped = [], []
        for t, task_id in enumerate(args.task):
            for attempt in range(args.resample + 1):
                seeds = [args.seed + attempt * args.samples + k for k in range(args.samples)]
                keys = [f"{t}-{s}" for s in seeds]
                group = play_group(model, tokenizer, pipe, keys, task_id, seeds, args, pieces, shared)
                rewards = [ep["reward"] for ep in group]
                if len(set(rewards)) > 1 or attempt == args.resample:
                    break
                dropped.append({"task_id": task_id, "seeds": seeds, "rewards": rewards})
            for ep, adv in zip(group, advantages(rewards), strict=True):
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
        "resampled": dropped,
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
