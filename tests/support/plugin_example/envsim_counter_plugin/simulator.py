"""The ``echo`` simulator kind: answers every sample with the executor's own answer (as ``oracle`` does)."""

from __future__ import annotations

from typing import Any

from pipeline.core.protocol import answer
from pipeline.evaluate.simulator_spec import Completion, SimulatorKind, SimulatorSpec


class EchoSimulator:
    def __init__(self, spec: SimulatorSpec) -> None:
        self.spec = spec

    async def complete(self, sample: dict[str, Any]) -> Completion:
        return Completion(answer(sample), 0.0)

    async def aclose(self) -> None:
        pass


#: the kind, as its entry point names it: asks no model, and is a reference point (a baseline)
ECHO = SimulatorKind("echo", EchoSimulator, baseline=True)
