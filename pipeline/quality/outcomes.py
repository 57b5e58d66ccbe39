"""Are a corpus's outcome labels plausible? (docs/definitions.md §4.3)

Corpora refuse calls in their own conventions; a rule that does not know a corpus's convention labels
every refusal ``success`` and the failure cell stays empty, while a rule that matches too much labels
successes ``failure``. Neither breaks anything downstream, so it is checked here, per **corpus** — the
first component of the environment id: ``bfcl``, ``builtin``, or an EnvScaler corpus's ``prefix`` (one
per ``resources.sources.config.envscaler`` entry unless two share a prefix):

* at least :data:`MIN_STEPS` steps and no ``failure`` label at all, or
* more than :data:`MAX_FAILURE_SHARE` of its non-error steps labeled ``failure``

is a finding. Each names the corpus, its outcome rule and an example observation (for a corpus without
failures, the most frequent observation of exploration's deliberately mutated calls, the likeliest
refusals; else the most frequent one labeled ``failure``) and says how to declare the rule. The asset
check ``outcome_labels_plausible`` (WARN) and ``python -m pipeline summary`` report the same findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline.core.outcome import DEFAULT_RULE_ID
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout

#: the asset check's name (the run summary names it too)
CHECK = "outcome_labels_plausible"
#: a corpus with at least this many steps and no failure label is suspicious
MIN_STEPS = 200
#: a corpus with more than this share of its non-error steps labeled failure is suspicious
MAX_FAILURE_SHARE = 0.6
#: where a corpus declares its rule
HOW_TO_DECLARE = (
    "declare the corpus's convention as outcome_rule in its source config "
    "(resources.sources.config.envscaler[].outcome_rule, docs/environments.md)"
)

_EXAMPLE_CHARS = 200


@dataclass
class CorpusOutcomes:
    """The outcome labels of one corpus, and what is implausible about them (``problem``: None when nothing)."""

    corpus: str
    steps: int
    errors: int
    failures: int
    rules: list[str] = field(default_factory=list)
    problem: str | None = None
    example_step: str | None = None
    example: str | None = None

    @property
    def non_error(self) -> int:
        return self.steps - self.errors

    @property
    def share(self) -> float:
        """Failures among the non-error steps."""
        return self.failures / self.non_error if self.non_error else 0.0

    def rule_text(self) -> str:
        return " | ".join(r[:120] for r in self.rules) or DEFAULT_RULE_ID

    def warning(self) -> str | None:
        """The finding as one line (None when there is none)."""
        if self.problem is None:
            return None
        example = f"e.g. {self.example_step}: {self.example!r}" if self.example is not None else "no example"
        return (
            f"corpus {self.corpus!r}: {self.problem} (outcome rule: {self.rule_text()}) — {example}. Fix: {self._fix()}"
        )

    def _fix(self) -> str:
        if self.failures == 0:
            return f"if these are refusals, {HOW_TO_DECLARE}"
        return (
            "if these are successes, correct the corpus's outcome_rule (or set extends_default: false), "
            "docs/environments.md"
        )

    def row(self) -> dict[str, Any]:
        return {
            "corpus": self.corpus,
            "steps": self.steps,
            "errors": self.errors,
            "failures": self.failures,
            "failure_share": round(self.share, 3),
            "outcome_rule": self.rule_text(),
            "finding": self.problem or "",
            "example_step": self.example_step or "",
            "example_observation": self.example or "",
        }


@dataclass
class OutcomeReport:
    """Every corpus's outcome labels; ``ok`` when none is implausible."""

    corpora: list[CorpusOutcomes]
    min_steps: int = MIN_STEPS
    max_share: float = MAX_FAILURE_SHARE

    @property
    def findings(self) -> list[CorpusOutcomes]:
        return [c for c in self.corpora if c.problem is not None]

    @property
    def ok(self) -> bool:
        return not self.findings

    def warnings(self) -> list[str]:
        return [w for c in self.findings if (w := c.warning()) is not None]

    def headline(self) -> str:
        if self.ok:
            return (
                f"outcome labels plausible in all {len(self.corpora)} corpora (none with ≥ {self.min_steps} steps "
                f"and no failure, none above {self.max_share:.0%} failures)"
            )
        return f"{len(self.findings)} of {len(self.corpora)} corpora with implausible outcome labels: " + ", ".join(
            c.corpus for c in self.findings
        )


def _corpus_sql(parts: list[str], with_rule: bool) -> tuple[str, list[Any]]:
    rules = "list(DISTINCT outcome_rule ORDER BY outcome_rule)" if with_rule else "[]::VARCHAR[]"
    return (
        f"""SELECT split_part(env_id, '/', 1) AS corpus, count(*) AS steps,
                       count(*) FILTER (outcome = 'error') AS errors, count(*) FILTER (outcome = 'failure') AS failures,
                       {rules} AS rules
                FROM read_parquet(?, union_by_name = true) GROUP BY 1 ORDER BY 1""",
        [parts],
    )


def _example(con: duckdb.DuckDBPyConnection, parts: list[str], corpus: str, failures: bool) -> tuple[str, str] | None:
    """(step id, observation) of the corpus that shows the finding best (module docstring)."""
    wanted = "outcome = 'failure'" if failures else "outcome <> 'error'"
    row = con.execute(
        f"""SELECT min(step_id), raw_observation FROM read_parquet(?, union_by_name = true)
            WHERE split_part(env_id, '/', 1) = ? AND {wanted}
            GROUP BY raw_observation
            ORDER BY count(*) FILTER (mutated_arg IS NOT NULL) DESC, count(*) DESC, raw_observation LIMIT 1""",
        [parts, corpus],
    ).fetchone()
    if row is None:
        return None
    text = str(row[1])
    return str(row[0]), text if len(text) <= _EXAMPLE_CHARS else text[:_EXAMPLE_CHARS] + "…"


def check_outcomes(
    layout: DataLayout, min_steps: int = MIN_STEPS, max_share: float = MAX_FAILURE_SHARE
) -> OutcomeReport:
    """The outcome labels of every corpus of ``layout``'s steps, with the implausible ones named."""
    parts = layout.step_parts()
    report = OutcomeReport([], min_steps, max_share)
    if not parts:
        return report
    con = connect()
    try:
        try:
            rows = con.execute(*_corpus_sql(parts, with_rule=True)).fetchall()
        except duckdb.BinderException:  # steps labeled before the outcome_rule column: the default rule
            rows = con.execute(*_corpus_sql(parts, with_rule=False)).fetchall()
        for corpus, steps, errors, failures, rules in rows:
            found = CorpusOutcomes(str(corpus), int(steps), int(errors), int(failures), list(rules or []))
            if found.steps >= min_steps and found.failures == 0:
                found.problem = f"{found.steps} steps and not one labeled failure"
            elif found.non_error and found.share > max_share:
                found.problem = (
                    f"{found.failures} of {found.non_error} non-error steps ({found.share:.0%}) labeled "
                    f"failure, more than {max_share:.0%}"
                )
            if found.problem is not None:
                example = _example(con, parts, found.corpus, failures=found.failures > 0)
                if example is not None:
                    found.example_step, found.example = example
            report.corpora.append(found)
    finally:
        con.close()
    return report
