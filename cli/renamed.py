"""Config keys of earlier releases, one table: the old key's dotted path in the run config -> what to set now.
A run config that still sets one is refused before anything starts, in one line naming the new key
(:func:`cli.launch._describe_config_error`); a key that moves gets one row here, and nothing else."""

_SOURCES = "resources.sources.config"
_COMPOSITION = "resources.composition.config"

RENAMED: dict[str, str] = {
    f"{_SOURCES}.bfcl_files": f"{_SOURCES}.bfcl: {{categories, task_files}}",
    f"{_SOURCES}.bfcl_categories": f"{_SOURCES}.bfcl.categories",
    f"{_SOURCES}.bfcl_task_files": f"{_SOURCES}.bfcl.task_files",
    f"{_SOURCES}.bfcl_replay": f"{_SOURCES}.bfcl.replay",
    f"{_SOURCES}.bfcl_explore": f"{_SOURCES}.bfcl.explore",
    f"{_SOURCES}.builtin_scenarios_per_env": f"{_SOURCES}.builtin.scenarios_per_env",
    f"{_SOURCES}.builtin_seed": f"{_SOURCES}.builtin.seed",
    f"{_SOURCES}.explore_class_defaults": f"{_SOURCES}.envscaler[].explore_class_defaults",
    f"{_COMPOSITION}.strict": "resources.run_policy.config.strict",
    f"{_COMPOSITION}.explore_call_budget": "resources.run_policy.config.explore_call_budget",
    f"{_COMPOSITION}.on_shortfall": "resources.run_policy.config.on_shortfall",
}


def renamed(where: str, names: list[str]) -> str | None:
    """The one line for keys ``names`` under ``where`` that earlier releases had (None: none of them did)."""
    moved = [(n, RENAMED[f"{where}.{n}"]) for n in names if f"{where}.{n}" in RENAMED]
    if not moved:
        return None
    return "; ".join(f"config key {where}.{n} was renamed: set {new}" for n, new in moved)
