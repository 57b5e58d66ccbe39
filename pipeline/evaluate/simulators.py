"""Simulators behind one interface (``pipeline.evaluate.simulator_spec``): any OpenAI-compatible chat
endpoint (through ``openai``), baselines that need no model: ``oracle`` (the executor's own answer — a
harness self-check), ``oracle_envsimbench``, ``no_change`` (empty Δ, empty feedback), and ``recorded``
answers. Each simulator is prompted with its spec's ``prompt`` template.

``KINDS`` is the registry: a kind's name, how to make it, and what the stages ask of it (``asks_model``,
``baseline``). Adding a kind is a module with its ``Simulator`` class and one line in ``KINDS``, or, outside
the repository, a plugin package's entry point (docs/extending.md "Add a simulator kind")."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from pipeline.core.protocol import TEMPLATES, answer, messages
from pipeline.core.registry import Registry
from pipeline.envsimbench.export import reference_answer
from pipeline.evaluate.simulator_spec import (
    Completion,
    EndpointError,
    EndpointSettings,
    RecordedSettings,
    Simulator,
    SimulatorKind,
    SimulatorSpec,
)
from pipeline.models import openai_client
from pipeline.models.openai_client import openai


class OracleSimulator:
    """Answers with the executor's labels: must score FM = CM = 100%. The baselines below share its
    construction (no model, nothing to close) and differ in their answer."""

    def __init__(self, spec: SimulatorSpec) -> None:
        self.spec = spec

    async def complete(self, sample: dict[str, Any]) -> Completion:
        return Completion(answer(sample), 0.0)

    async def aclose(self) -> None:
        pass


class ReferenceOracleSimulator(OracleSimulator):
    """The executor's answer written the way the reference SFT data teaches (the observation string as
    feedback; dotted paths, added / removed / modified, before / after): a model trained on that data
    and perfectly right must score FM = CM = 100% too."""

    async def complete(self, sample: dict[str, Any]) -> Completion:
        return Completion(reference_answer(sample), 0.0)


class NoChangeSimulator(OracleSimulator):
    """Predicts that nothing changes and says nothing."""

    async def complete(self, sample: dict[str, Any]) -> Completion:
        return Completion(json.dumps({"feedback": "", "config_changes": []}), 0.0)


class RecordedSimulator:
    """Answers generated elsewhere (e.g. by batched generation on a GPU node with the same prompt protocol), read from
    its settings' ``completions`` (:class:`RecordedSettings`); each is scored exactly like an endpoint's answer. A
    sample with no recorded answer is a request failure (``no recorded answer``), never a wrong answer."""

    def __init__(self, spec: SimulatorSpec) -> None:
        completions = spec.settings_as(RecordedSettings).completions
        if not completions:
            raise ValueError(
                f"{spec.name}: kind 'recorded' needs `completions` (a JSON-lines file of answers) in its "
                "`recorded:` section"
            )
        self.spec = spec
        self.answers: dict[str, dict[str, Any]] = {}
        with open(completions, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    step_id, text = row["step_id"], row["text"]
                except (ValueError, KeyError, TypeError) as exc:
                    raise ValueError(
                        f"{completions}:{n}: not a recorded answer "
                        f"({type(exc).__name__}: {exc}); each line needs step_id and text"
                    ) from None
                if not isinstance(step_id, str) or not isinstance(text, str):
                    raise ValueError(f"{completions}:{n}: step_id and text must be strings")
                self.answers[step_id] = row

    async def complete(self, sample: dict[str, Any]) -> Completion:
        row = self.answers.get(sample["step_id"])
        if row is None:
            return Completion(None, 0.0, error="no recorded answer")
        return Completion(
            row["text"], float(row.get("latency_s") or 0.0), row.get("prompt_tokens"), row.get("completion_tokens")
        )

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
        ep = self.endpoint = spec.settings_as(EndpointSettings)
        if ep.max_response_bytes < 1:
            raise ValueError(f"{spec.name}: max_response_bytes must be positive, not {ep.max_response_bytes}")
        self.spec = spec
        self.client = openai_client.async_client(
            ep.base_url, ep.api_key_env, ep.timeout_s, ep.max_retries, ep.max_response_bytes
        )

    async def complete(self, sample: dict[str, Any]) -> Completion:
        started = time.perf_counter()
        ep = self.endpoint
        try:
            raw = await self.client.chat.completions.with_raw_response.create(
                model=ep.model,
                messages=messages(sample, self.spec.prompt),
                temperature=ep.temperature,
                max_tokens=ep.max_tokens,
                extra_body=ep.extra_body or None,
            )
            text, prompt_tokens, completion_tokens = openai_client.read_completion(raw.content)
        except (openai_client.ResponseTooLarge, openai_client.MalformedResponse) as exc:
            error = str(exc)
        except openai.AuthenticationError:
            raise EndpointError(
                f"{self.spec.name}: the endpoint rejected the API key from ${ep.api_key_env} (401)"
            ) from None
        except openai.PermissionDeniedError:
            raise EndpointError(f"{self.spec.name}: access denied (403)") from None
        except openai.NotFoundError:
            raise EndpointError(
                f"{self.spec.name}: model {ep.model!r} or route not found at {ep.base_url} (404)"
            ) from None
        except openai.APITimeoutError:
            error = f"timeout after {ep.timeout_s:g}s and {ep.max_retries} retries"
        except openai.APIConnectionError as exc:
            error = f"unreachable: {type(exc).__name__}"
        except openai.APIStatusError as exc:
            error = f"HTTP {exc.status_code} after {ep.max_retries} retries: {_status_message(exc)}"
        else:
            return Completion(text, time.perf_counter() - started, prompt_tokens, completion_tokens)
        return Completion(None, time.perf_counter() - started, error=error)

    async def aclose(self) -> None:
        await self.client.close()


def _status_message(exc: Any) -> str:
    """The endpoint's own error message of an HTTP error (``{"error": {"message": …}}``), short."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str):
        message = getattr(exc, "message", None) or type(exc).__name__
    return message[:300]


#: every simulator kind, by name: adding one is a module with its ``Simulator`` class and one line here; an
#: installed plugin package adds its kinds with ``envsim_forge.simulators`` entry points (``pipeline.core.registry``)
KINDS: Registry[SimulatorKind] = Registry(
    "simulator kind", "envsim_forge.simulators", check=lambda entry: isinstance(entry, SimulatorKind)
)
KINDS.register(SimulatorKind("openai", OpenAISimulator, asks_model=True, settings=EndpointSettings))
KINDS.register(SimulatorKind("oracle", OracleSimulator, baseline=True))
KINDS.register(SimulatorKind("oracle_envsimbench", ReferenceOracleSimulator, baseline=True))
KINDS.register(SimulatorKind("no_change", NoChangeSimulator, baseline=True))
KINDS.register(SimulatorKind("recorded", RecordedSimulator, settings=RecordedSettings))


def kind_of(spec: SimulatorSpec) -> SimulatorKind:
    """The kind of ``spec`` (``ValueError`` naming the known ones when there is none)."""
    kind = KINDS.find(spec.kind)
    if kind is None:
        raise ValueError(f"unknown simulator kind {spec.kind!r}; known: {sorted(KINDS)}")
    return kind


def make_simulator(spec: SimulatorSpec) -> Simulator:
    return kind_of(spec).make(spec)


_COMMON = tuple(f.name for f in dataclasses.fields(SimulatorSpec) if f.name != "settings")


def simulator_spec(**fields: Any) -> SimulatorSpec:
    """A :class:`SimulatorSpec` from its fields: the common ones, and the kind's own settings either in the section
    named after the kind (``openai={"model": …}``, as the Dagster config gives them) or flat beside the common ones
    (``model=…``). A field of another kind, or of none, is a ``ValueError`` naming where it belongs."""
    kind = kind_of(SimulatorSpec(name=fields.get("name", ""), kind=fields.get("kind", "openai")))
    name = fields.get("name", "?")
    given = {k: v for k, v in fields.items() if k not in _COMMON and k != "settings"}
    section = given.pop(kind.name, None) or {}
    if dataclasses.is_dataclass(section):  # the section as its settings value already
        section = {f.name: getattr(section, f.name) for f in dataclasses.fields(section)}
    own = {f.name for f in dataclasses.fields(kind.settings)} if kind.settings is not None else set()
    for key, value in list(given.items()):
        if key in KINDS and key != kind.name:
            if value is not None:
                raise ValueError(
                    f"simulator {name!r}: section `{key}` is for kind {key}, not {kind.name}: remove it "
                    f"or set kind: {key}"
                )
            given.pop(key)
        elif key not in own:
            owners = [
                k.name
                for k in KINDS.values()
                if k.settings is not None and key in {f.name for f in dataclasses.fields(k.settings)}
            ]
            where = f"a setting of kind {' / '.join(owners)}, not of {kind.name}" if owners else "not a simulator field"
            raise ValueError(
                f"simulator {name!r}: `{key}` is {where}"
                + (f"; {kind.name}'s settings: {', '.join(sorted(own))}" if own else "")
            )
    values = {**section, **given}
    settings = kind.settings(**values) if kind.settings is not None and values else fields.get("settings")
    return SimulatorSpec(**{k: v for k, v in fields.items() if k in _COMMON}, settings=settings)
