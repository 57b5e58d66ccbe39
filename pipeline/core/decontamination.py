"""Decontamination of an SFT mixture against a benchmark (docs/definitions.md §5): the named rules of the
:data:`DECONTAMINATION` registry (plugins: ``envsim_forge.decontamination`` entry points), the default first."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.registry import Registry


@dataclass(frozen=True)
class Decontamination:
    """A decontamination rule: a mixture step leaves the pool when its ``key`` column value is one of the
    benchmark's, or when its sample identity (``identity`` columns, e.g. (env_id, sample_hash)) is."""

    name: str
    key: str  # the column no mixture step may share with the benchmark
    identity: tuple[str, ...]  # the sample identity no mixture step may share with it
    #: how a report names the identity rule
    identity_label: str

    def conditions(self, bench_samples: str) -> list[tuple[str, str]]:
        """``(name, SQL condition)`` per rule over the strata table, against the benchmark samples file: the key
        rule first, then the sample identity rule (the order ``select_strata`` counts them in)."""
        ident = " || '|' || ".join(self.identity)
        rel = f"read_parquet('{bench_samples}')"
        return [
            ("key", f"{self.key} IN (SELECT {self.key} FROM {rel})"),
            ("hash", f"{ident} IN (SELECT {ident} FROM {rel})"),
        ]

    def exclude_sql(self, bench_samples: str) -> str:
        """The same rules as an ``AND NOT …`` filter (for selections that only need the rest)."""
        return "".join(f" AND NOT coalesce(({cond}), false)" for _, cond in self.conditions(bench_samples))


#: the decontamination rules by name, the default first: ``trajectory`` (no step of a benchmark episode, no benchmark
#: (env, s_t, a_t)), not ``task_id``, since exploration episodes share their scenario's task id; ``task_id`` and
#: ``env_id`` are the stricter options.
DECONTAMINATION: Registry[Decontamination] = Registry(
    "decontamination rule", "envsim_forge.decontamination", check=lambda entry: isinstance(entry, Decontamination)
)
DECONTAMINATION.register(Decontamination("trajectory", "trajectory_id", ("env_id", "sample_hash"), "(env, s_t, a_t)"))
DECONTAMINATION.register(Decontamination("task_id", "task_id", ("sample_hash",), "(s_t, a_t) hash"))
DECONTAMINATION.register(Decontamination("env_id", "env_id", ("sample_hash",), "(s_t, a_t) hash"))
DEFAULT_DECONTAMINATION = "trajectory"


def decontamination(name: str) -> Decontamination:
    """The rule ``name``; a mistyped one is a one-line ``ValueError`` listing the choices."""
    rule = DECONTAMINATION.find(name)
    if rule is None:
        raise ValueError(
            f"decontaminate must be one of {', '.join(DECONTAMINATION)} "
            f"(default {DEFAULT_DECONTAMINATION}), not {name!r}"
        )
    return rule
