"""The builtin environment pack: readable env classes in ``code/``, shipped as EnvScaler env items.

Every environment is a realistic domain with entity tables, business rules that reject bad calls
with informative errors, and batch operations that change many fields at once (so single calls
reach |Δ| 7–12). ``scenarios()`` draws seeded, distinct initial configs and tasks per domain.
"""

from __future__ import annotations

import ast
import json
import random
from functools import cache
from pathlib import Path
from typing import Any

from pipeline.envs import envscaler
from pipeline.envs.builtin.scenarios import GENERATORS, checklist

PREFIX = "builtin"
LICENSE = "Apache-2.0"
CODE_DIR = Path(__file__).parent / "code"
#: domain -> environment class name (in code/<domain>.py)
CLASSES = {
    "retail": "RetailStore",
    "airline": "AirlineBooking",
    "clinic": "ClinicScheduler",
    "university": "CourseEnrollment",
    "warehouse": "Warehouse",
    "payroll": "Payroll",
    "library": "Library",
    "banking": "Bank",
    "hotel": "HotelFrontDesk",
    "projects": "ProjectTracker",
}


def _introduction(code: str, class_name: str) -> str:
    node = next((n for n in ast.parse(code).body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    return (ast.get_docstring(node) if node else None) or ""


@cache
def env_items() -> dict[str, dict[str, Any]]:
    """The pack in EnvScaler's env-items format: ``{env_id: item}``."""
    items = {}
    for domain, class_name in CLASSES.items():
        code = (CODE_DIR / f"{domain}.py").read_text(encoding="utf-8")
        item = envscaler.parse_env_item(domain, {"env_class_name": class_name, "env_class_code": code})
        parsed, issues = envscaler.split_item(item)
        if parsed is None or issues:
            raise RuntimeError(f"builtin environment {domain} is invalid: {issues}")
        items[domain] = {
            "env_id": domain,
            "env_class_name": class_name,
            "env_class_code": code,
            "tools": parsed.tools,
            "environment_introduction": _introduction(code, class_name),
            "constraints_rules": "Calls that violate a business rule return {'success': False, 'error': ...} and "
            "change nothing.",
        }
    return items


def parsed_items() -> list[envscaler.EnvItem]:
    out = []
    for env_id, raw in env_items().items():
        item, _ = envscaler.split_item(envscaler.parse_env_item(env_id, raw, f"builtin:{env_id}", PREFIX, LICENSE))
        assert item is not None
        out.append(item)
    return out


def scenarios(per_env: int, seed: int = 0) -> list[dict[str, Any]]:
    """``per_env`` seeded scenario items per environment, interleaved across environments."""
    out = []
    for i in range(per_env):
        for domain, class_name in CLASSES.items():
            rng = random.Random(f"{seed}:{domain}:{i}")
            config, task = GENERATORS[domain](rng)
            out.append(
                {
                    "task_id": f"{PREFIX}-{domain}-s{seed}-{i:05d}",
                    "env_id": domain,
                    "env_class_name": class_name,
                    "init_config": config,
                    "task": task,
                    "checklist_with_func": checklist(domain, config, task),
                }
            )
    return out


def export(directory: str | Path, per_env: int = 50, seed: int = 0) -> tuple[Path, Path]:
    """Write the pack as ``builtin_env_metadata.json`` + ``builtin_scenarios.json`` (EnvScaler format) into
    ``directory`` (a path or a string; made when missing); returns the two files."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    envs = directory / "builtin_env_metadata.json"
    scen = directory / "builtin_scenarios.json"
    envs.write_text(json.dumps(env_items(), indent=1))
    scen.write_text(json.dumps(scenarios(per_env, seed), indent=1))
    return envs, scen
