"""A corpus of hostile EnvScaler-format environments (issue 24, "Done when"), kept as data.

One module per case (``f<family>_<name>.py``) with:

* ``FAMILY`` — F1 child→worker/sibling, F2 writes outside the own directory, F3 dirty reuse,
  F4 nondeterminism the check must see, F5 bad frames/values, F6 poisoned names;
* ``DESCRIPTION`` — one line;
* ``CLASS`` / ``CODE`` — the environment class, exactly as ``env_class_code`` of an EnvScaler item;
* ``ACTIONS`` — the attacker's tool calls ``[(tool, arguments), ...]``; the string ``"$NEXT"`` in an
  argument is replaced by the id of the trajectory that follows the attacker in the run order (an
  attacker that knows the ids of the next trajectories: they are derived from task ids in a real run);
* optional ``INIT`` (the attacker scenario's ``init_config``), ``SAME_CODE`` (a list of
  ``(init_config, actions)`` innocent scenarios of the *same* environment code: the victims of
  reuse attacks), ``IDLE_CPU`` (the attack leaves work running: the worker tree must be idle after the
  run), ``ENV_ID`` (F6: the poisoned environment id), ``check(attacker_results, limits)`` (extra,
  case-specific escapes, returned as strings).

The innocent "victim" environments are in :mod:`tests.support.attack_corpus.victims`. Written independently
of the tests of the fixes (tests/execution/test_isolation.py and friends hold the earlier, known cases).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

FAMILIES = {
    "F1": "child reaches its worker or a sibling",
    "F2": "writes outside the child's own directory",
    "F3": "dirty reuse of a child",
    "F4": "nondeterminism the determinism check must see",
    "F5": "bad frames and values",
    "F6": "poisoned names in reports",
}


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    description: str
    class_name: str
    code: str
    actions: tuple[tuple[str, dict[str, Any]], ...]
    init: dict[str, Any] = field(default_factory=dict)
    same_code: tuple[tuple[dict[str, Any], tuple[tuple[str, dict[str, Any]], ...]], ...] = ()
    idle_cpu: bool = False
    env_id: str | None = None
    check: Callable[..., list[str]] | None = None

    @property
    def corpus_env_id(self) -> str:
        return self.env_id or self.id


def _case(module: ModuleType) -> Case:
    name = module.__name__.rsplit(".", 1)[1]
    assert module.FAMILY in FAMILIES, (name, module.FAMILY)
    assert isinstance(module.DESCRIPTION, str) and "\n" not in module.DESCRIPTION, name
    return Case(
        id=name, family=module.FAMILY, description=module.DESCRIPTION, class_name=module.CLASS, code=module.CODE,
        actions=tuple((t, dict(a)) for t, a in module.ACTIONS), init=dict(getattr(module, "INIT", {})),
        same_code=tuple((dict(cfg), tuple((t, dict(a)) for t, a in acts)) for cfg, acts in getattr(module, "SAME_CODE", ())),
        idle_cpu=bool(getattr(module, "IDLE_CPU", False)), env_id=getattr(module, "ENV_ID", None),
        check=getattr(module, "check", None),
    )


def load_cases(family: str | None = None) -> list[Case]:
    cases = []
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.name[:1] == "f" and info.name[1:2].isdigit():
            case = _case(importlib.import_module(f"{__name__}.{info.name}"))
            if family is None or case.family == family:
                cases.append(case)
    return cases


def write_corpus(directory: Path, cases: list[Case], victims: bool = True) -> tuple[Path, Path]:
    """The cases (and the victims) as an EnvScaler corpus on disk: ``{env_id: item}`` + scenarios."""
    from tests.support.attack_corpus import victims as v

    directory.mkdir(parents=True, exist_ok=True)
    items: dict[str, Any] = {}
    scenarios: list[dict[str, Any]] = []
    for case in cases:
        items[case.corpus_env_id] = {"env_class_name": case.class_name, "env_class_code": case.code,
                                     "environment_introduction": case.description, "constraints_rules": ""}
        scenarios.append({"task_id": f"{case.id}-attack", "env_id": case.corpus_env_id, "env_class_name": case.class_name,
                          "init_config": case.init, "task": case.description})
    if victims:
        for env_id, (cls, code) in v.VICTIM_CODE.items():
            items[env_id] = {"env_class_name": cls, "env_class_code": code, "environment_introduction": "An innocent victim.",
                             "constraints_rules": ""}
            scenarios.append({"task_id": f"{env_id}-task", "env_id": env_id, "env_class_name": cls,
                              "init_config": v.VICTIM_INIT[env_id], "task": "Be labeled correctly."})
    env_file, scen_file = directory / "191_env_metadata.json", directory / "scenarios.json"
    env_file.write_text(json.dumps(items, indent=1))
    scen_file.write_text(json.dumps(scenarios, indent=1))
    return env_file, scen_file
