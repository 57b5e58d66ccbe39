"""Simulators behind one interface: any OpenAI-compatible chat endpoint (through ``openai``), and two
baselines that need no model: ``oracle`` (the executor's own answer — a harness self-check) and
``no_change`` (empty Δ, empty feedback). Each simulator is prompted with its spec's ``prompt`` template."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import openai

from pipeline.models import openai_client
from pipeline.core.fields import setting
from pipeline.core.protocol import TEMPLATES, answer, messages
from pipeline.envsimbench.export import reference_answer


@dataclass(frozen=True)
class SimulatorSpec:
    """A simulator to score: an OpenAI-compatible endpoint or a baseline."""

    name: str = setting(description="Name of the simulator in the results.")
    kind: Literal["openai", "oracle", "oracle_envsimbench", "no_change", "recorded"] = setting(
        "openai", "openai endpoint, or a baseline: oracle (our answer format), oracle_envsimbench "
                  "(the executor's answer in the reference SFT format), no_change; or recorded (answers generated "
                  "elsewhere, e.g. batched on a GPU node, read from `completions`).")
    prompt: Literal["envsim", "envsimbench"] = setting(
        "envsim", "Prompt template (pipeline.core.protocol.TEMPLATES): envsim (ours) or envsimbench (the reference "
                  "evaluation prompt: whole class, indent-2 state); recorded with every result.")
    model: str = setting("", "Model name at the endpoint.")
    base_url: str | None = setting(None, "OpenAI-compatible endpoint, e.g. http://host:8000/v1 (vLLM).")
    weights_id: str | None = setting(
        None, "Identity of the weights behind the endpoint: a checkpoint version (ckpt-…) or a hash of the weight "
              "files (sha256-…). With it, results are cached per weights (recorded with every result, part of the "
              "run id and results file); without it, per simulator name, model and base_url. The evaluation job "
              "sets it for the checkpoint it serves.")
    api_key_env: str = setting("OPENAI_API_KEY", "Environment variable holding the API key.")
    temperature: float = setting(0.0, "Sampling temperature.")
    max_tokens: int = setting(4096, "Most tokens per answer.")
    extra_body: dict[str, Any] = setting(factory=dict, description="Extra request fields, e.g. thinking switches.")
    concurrency: int = setting(8, "Requests in flight at once.")
    timeout_s: float = setting(120.0, "Timeout of one request, seconds.")
    max_retries: int = setting(4, "Retries with backoff on 429 / 5xx / timeouts / connection errors.")
    max_response_bytes: int = setting(
        1_000_000, "Cap on a response body: a larger one is refused at the HTTP layer, unread, and the sample is a "
                   "request failure.")
    completions: str | None = setting(
        None, "kind recorded: a JSON-lines file of {step_id, text[, prompt_tokens, completion_tokens, latency_s]} "
              "answers; a sample without a line is a request failure.")
    max_request_failure_share: float = setting(
        0.5, "Fail the run (after recording every result) when more than this share of a simulator's requests "
             "failed (timeouts, 5xx, malformed or oversized responses).")

    @property
    def results_name(self) -> str:
        """The name of this simulator's runs (``<results_name>@<split version>``) and results file: its
        ``name``, and its ``weights_id`` after a ``+`` unless the name already is or ends with ``-<weights_id>``
        (the evaluation job's default served name) — two checkpoints served under one name never share a run
        or a results file."""
        wid = self.weights_id
        if wid is None or self.name == wid or self.name.endswith(f"-{wid}"):
            return self.name
        return f"{self.name}+{wid}"

    def cache_identity(self) -> dict[str, str | None]:
        """What a recorded result must carry to count as this simulator's answer on a re-run: the weights
        when they are known (the endpoint may move: a served checkpoint gets a new port each job), else the
        model name and the endpoint. The simulator's name and prompt template are the results file's and
        the harness's own keys."""
        if self.weights_id is not None:
            return {"weights_id": self.weights_id}
        return {"weights_id": None, "model": self.model, "base_url": self.base_url}


@dataclass(frozen=True)
class Completion:
    text: str | None
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None  # the request failed (after retries, or a malformed / oversized response): the
    # endpoint's failure, not the model's; not scored, and the sample is asked again on a re-run


class EndpointError(RuntimeError):
    """The endpoint cannot serve this run at all (unreachable, 401, unknown model): fail clearly."""


class Simulator(Protocol):
    spec: SimulatorSpec

    async def complete(self, sample: dict[str, Any]) -> Completion: ...

    async def aclose(self) -> None: ...


class OracleSimulator:
    """Answers with the executor's labels: must score FM = CM = 100%."""

    def __init__(self, spec: SimulatorSpec) -> None:
        self.spec = spec

    async def complete(self, sample: dict[str, Any]) -> Completion:
        return Completion(answer(sample), 0.0)

    async def aclose(self) -> None:
        pass


class ReferenceOracleSimulator:
    """The executor's answer written the way the reference SFT data teaches (the observation string as
    feedback; dotted paths, added / removed / modified, before / after): a model trained on that data
    and perfectly right must score FM = CM = 100% too."""

    def __init__(self, spec: SimulatorSpec) -> None:
        self.spec = spec

    async def complete(self, sample: dict[str, Any]) -> Completion:

        return Completion(reference_answer(sample), 0.0)

    async def aclose(self) -> None:
        pass


class NoChangeSimulator:
    """Predicts that nothing changes and says nothing."""

    def __init__(self, spec: SimulatorSpec) -> None:
        self.spec = spec

    async def complete(self, sample: dict[str, Any]) -> Completion:
        return Completion(json.dumps({"feedback": "", "config_changes": []}), 0.0)

    async def aclose(self) -> None:
        pass


class RecordedSimulator:
    """Answers generated elsewhere (e.g. by batched generation on a GPU node with the same prompt protocol),
    read from ``spec.completions``; each is scored exactly like an endpoint's answer. A sample with no
    recorded answer is a request failure (``no recorded answer``), never a wrong answer."""

    def __init__(self, spec: SimulatorSpec) -> None:
        if not spec.completions:
            raise ValueError(f"{spec.name}: kind 'recorded' needs `completions` (a JSON-lines file of answers)")
        self.spec = spec
        self.answers: dict[str, dict[str, Any]] = {}
        with open(spec.completions, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    step_id, text = row["step_id"], row["text"]
                except (ValueError, KeyError, TypeError) as exc:
                    raise ValueError(f"{spec.completions}:{n}: not a recorded answer "
                                     f"({type(exc).__name__}: {exc}); each line needs step_id and text") from None
                if not isinstance(step_id, str) or not isinstance(text, str):
                    raise ValueError(f"{spec.completions}:{n}: step_id and text must be strings")
                self.answers[step_id] = row

    async def complete(self, sample: dict[str, Any]) -> Completion:
        row = self.answers.get(sample["step_id"])
        if row is None:
            return Completion(None, 0.0, error="no recorded answer")
        return Completion(row["text"], float(row.get("latency_s") or 0.0), row.get("prompt_tokens"),
                          row.get("completion_tokens"))

    async def aclose(self) -> None:
        pass


class OpenAISimulator:
    """An OpenAI-compatible chat endpoint. Retries with backoff on 429 / 5xx / timeouts / connection
    errors are the ``openai`` client's own (``max_retries``); the API key comes from the environment.
    Response bodies are capped at ``max_response_bytes`` at the HTTP layer (never read past the cap) and
    read strictly (:func:`pipeline.models.openai_client.read_completion`): an oversized or malformed response
    is a request failure with its reason, not an answer."""

    def __init__(self, spec: SimulatorSpec) -> None:
        if spec.prompt not in TEMPLATES:
            raise ValueError(f"{spec.name}: unknown prompt template {spec.prompt!r}; known: {', '.join(TEMPLATES)}")
        if spec.max_response_bytes < 1:
            raise ValueError(f"{spec.name}: max_response_bytes must be positive, not {spec.max_response_bytes}")
        self.spec = spec
        self.client = openai_client.async_client(spec.base_url, spec.api_key_env, spec.timeout_s, spec.max_retries,
                                                 spec.max_response_bytes)

    async def complete(self, sample: dict[str, Any]) -> Completion:
        started = time.perf_counter()
        try:
            raw = await self.client.chat.completions.with_raw_response.create(
                model=self.spec.model,
                messages=messages(sample, self.spec.prompt),
                temperature=self.spec.temperature,
                max_tokens=self.spec.max_tokens,
                extra_body=self.spec.extra_body or None,
            )
        except openai_client.ResponseTooLarge as exc:
            return Completion(None, time.perf_counter() - started, error=str(exc))
        except openai.AuthenticationError:
            raise EndpointError(f"{self.spec.name}: the endpoint rejected the API key from ${self.spec.api_key_env} (401)") from None
        except openai.PermissionDeniedError:
            raise EndpointError(f"{self.spec.name}: access denied (403)") from None
        except openai.NotFoundError:
            raise EndpointError(f"{self.spec.name}: model {self.spec.model!r} or route not found at {self.spec.base_url} (404)") from None
        except openai.APITimeoutError:
            return Completion(None, time.perf_counter() - started, error=f"timeout after {self.spec.timeout_s:g}s and {self.spec.max_retries} retries")
        except openai.APIConnectionError as exc:
            return Completion(None, time.perf_counter() - started, error=f"unreachable: {type(exc).__name__}")
        except openai.APIStatusError as exc:
            return Completion(None, time.perf_counter() - started,
                              error=f"HTTP {exc.status_code} after {self.spec.max_retries} retries: {_status_message(exc)}")
        try:
            text, prompt_tokens, completion_tokens = openai_client.read_completion(raw.content)
        except openai_client.MalformedResponse as exc:
            return Completion(None, time.perf_counter() - started, error=str(exc))
        return Completion(text, time.perf_counter() - started, prompt_tokens, completion_tokens)

    async def aclose(self) -> None:
        await self.client.close()


def _status_message(exc: Any) -> str:
    """The endpoint's own error message of an HTTP error (``{"error": {"message": …}}``), short."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str):
        message = getattr(exc, "message", None) or type(exc).__name__
    return message[:300]


def make_simulator(spec: SimulatorSpec) -> Simulator:
    kinds = {"openai": OpenAISimulator, "oracle": OracleSimulator, "oracle_envsimbench": ReferenceOracleSimulator,
             "no_change": NoChangeSimulator, "recorded": RecordedSimulator}
    if spec.kind not in kinds:
        raise ValueError(f"unknown simulator kind {spec.kind!r}; known: {sorted(kinds)}")
    return kinds[spec.kind](spec)
