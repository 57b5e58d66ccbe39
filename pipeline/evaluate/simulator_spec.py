"""What every simulator kind shares: its spec (``SimulatorSpec``), the ``Simulator`` interface, what it
answers (``Completion``) and what a kind is (``SimulatorKind``). A kind's module imports these;
``pipeline.evaluate.simulators`` registers it (a plugin package's kind: its ``envsim_forge.simulators`` entry point)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from pipeline.core.fields import setting

_S = TypeVar("_S")


@dataclass(frozen=True)
class EndpointSettings:
    """The ``openai`` kind's settings: an OpenAI-compatible chat endpoint and how it is asked."""

    model: str = setting("", "Model name at the endpoint.")
    base_url: str | None = setting(None, "OpenAI-compatible endpoint, e.g. http://host:8000/v1 (vLLM).")
    api_key_env: str = setting(
        "OPENAI_API_KEY",
        "Environment variable holding the API key (empty: no key, for an endpoint the pipeline serves itself).",
    )
    temperature: float = setting(0.0, "Sampling temperature.")
    max_tokens: int = setting(4096, "Most tokens per answer.")
    extra_body: dict[str, Any] = setting(factory=dict, description="Extra request fields, e.g. thinking switches.")
    timeout_s: float = setting(120.0, "Timeout of one request, seconds.")
    max_retries: int = setting(4, "Retries with backoff on 429 / 5xx / timeouts / connection errors.")
    max_response_bytes: int = setting(
        1_000_000,
        "Cap on a response body: a larger one is refused at the "
        "HTTP layer, unread, and the sample is a request failure.",
    )


@dataclass(frozen=True)
class RecordedSettings:
    """The ``recorded`` kind's settings: answers generated elsewhere (e.g. batched on a GPU node)."""

    completions: str | None = setting(
        None,
        "A JSON-lines file of {step_id, text[, prompt_tokens, completion_tokens, latency_s]} answers; a sample "
        "without a line is a request failure.",
    )


@dataclass(frozen=True)
class SimulatorSpec:
    """A simulator to score: what every kind has, and its kind's own ``settings`` (the dataclass its
    :class:`SimulatorKind` declares: ``EndpointSettings`` for ``openai``, ``RecordedSettings`` for
    ``recorded``; None: that dataclass's defaults, or a kind without settings).
    ``pipeline.evaluate.simulators.simulator_spec`` builds one from flat or sectioned fields."""

    name: str = setting(description="Name of the simulator in the results.")
    kind: str = setting(
        "openai",
        "A kind of the simulator registry (pipeline.evaluate.simulators.KINDS, plugins included); its "
        "settings go in the section named after it.",
    )
    prompt: Literal["envsim", "envsimbench"] = setting(
        "envsim",
        "Prompt template (pipeline.core.protocol.TEMPLATES): envsim (ours) or envsimbench (the reference "
        "evaluation prompt: whole class, indent-2 state); recorded with every result.",
    )
    weights_id: str | None = setting(
        None,
        "Identity of the weights behind the simulator: a checkpoint version (ckpt-…) or a hash of the weight "
        "files (sha256-…). With it, results are cached per weights (recorded with every result, part of the "
        "run id and results file); without it, per simulator name, model and base_url. The evaluation job "
        "sets it for the checkpoint it serves.",
    )
    concurrency: int = setting(8, "Requests in flight at once.")
    max_request_failure_share: float = setting(
        0.5,
        "Fail the run (after recording every result) when more than this share of a simulator's requests "
        "failed (timeouts, 5xx, malformed or oversized responses).",
    )
    settings: Any = setting(
        None, "The kind's own settings (its SimulatorKind.settings dataclass); None: their defaults."
    )

    def settings_as(self, cls: type[_S]) -> _S:
        """This spec's settings as the kind's dataclass ``cls`` (its defaults when none were given)."""
        if self.settings is None:
            return cls()
        if not isinstance(self.settings, cls):
            raise TypeError(
                f"{self.name}: kind {self.kind!r} takes {cls.__name__} settings, not {type(self.settings).__name__}"
            )
        return self.settings

    @property
    def model(self) -> str:
        """The model it asks (its settings' ``model``; empty for a kind that asks none): recorded with each result."""
        return getattr(self.settings, "model", "") or ""

    @property
    def base_url(self) -> str | None:
        """The endpoint it asks (its settings' ``base_url``; None for a kind that asks none)."""
        return getattr(self.settings, "base_url", None)

    @property
    def results_name(self) -> str:
        """The name of this simulator's runs (``<results_name>@<split version>``) and results file: its ``name``, and
        its ``weights_id`` after a ``+`` unless the name already is or ends with ``-<weights_id>`` (the evaluation job's
        default served name) — two checkpoints served under one name never share a run or a results file."""
        wid = self.weights_id
        if wid is None or self.name == wid or self.name.endswith(f"-{wid}"):
            return self.name
        return f"{self.name}+{wid}"

    def cache_identity(self) -> dict[str, str | None]:
        """What a recorded result must carry to count as this simulator's answer on a re-run: the weights when they are
        known (the endpoint may move: a served checkpoint gets a new port each job), else the model name and the
        endpoint. The simulator's name and prompt template are the results file's and the harness's own keys."""
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


@dataclass(frozen=True)
class SimulatorKind:
    """What a simulator kind is: how to make one from its spec, and what the stages need to know of it."""

    name: str
    make: Callable[[SimulatorSpec], Simulator]
    #: it sends requests to a model while it answers (the rollout loop logs them and opens a client for it)
    asks_model: bool = False
    #: a reference point, not a simulator to learn from (rollout exports leave its rollouts out by default)
    baseline: bool = False
    #: its own settings: a dataclass of ``setting()`` fields (``SimulatorSpec.settings``, its config section); None:
    #: it has none
    settings: type | None = None
