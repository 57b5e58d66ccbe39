"""The ``echo`` simulator kind: answers every sample with the executor's own answer (as ``oracle`` does), or
with its own feedback text when its settings give one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipeline.core.fields import setting
from pipeline.core.protocol import answer
from pipeline.evaluate.simulator_spec import Completion, SimulatorKind, SimulatorSpec


@dataclass(frozen=True)
class EchoSettings:
    """The echo kind's own settings (its `echo:` section of a simulator's config)."""

    feedback: str | None = setting(None, "Feedback text of every answer (unset: the executor's own).")


class EchoSimulator:
    def __init__(self, spec: SimulatorSpec) -> None:
        self.spec = spec
        self.feedback = spec.settings_as(EchoSettings).feedback

    async def complete(self, sample: dict[str, Any]) -> Completion:
        text = answer(sample)
        if self.feedback is not None:
            text = json.dumps({**json.loads(text), "feedback": self.feedback}, sort_keys=True)
        return Completion(text, 0.0)

    async def aclose(self) -> None:
        pass


#: the kind, as its entry point names it: asks no model, is a reference point (a baseline), has its own settings
ECHO = SimulatorKind("echo", EchoSimulator, baseline=True, settings=EchoSettings)
