"""Are a corpus's outcome labels plausible? (docs/definitions.md §4.3; docs/environments.md "Is the rule right?")

Checked per **corpus** (the environment id's first component): at least :data:`MIN_STEPS` steps and no ``failure``
label, or more than :data:`MAX_FAILURE_SHARE` of its non-error steps labeled ``failure``, is a finding; and per
**explored environment** (one corpus may mix conventions): at least :data:`MIN_ENV_STEPS` steps and no failure label,
when another explored environment has failures or its success observations read like refusals (:data:`REFUSAL_WORDS`).
Each finding names the corpus or environment, its outcome rule and an example observation, and says how to declare the
rule; the asset check ``outcome_labels_plausible`` (WARN) and the run summary report them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline.core.outcome import DEFAULT_RULE_ID, raises_rule_hint
from pipeline.core.untrusted import md
from pipeline.report.tables import Facts, Markdown, Table
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
#: an explored environment with at least this many steps and no failure label is judged (module docstring)
MIN_ENV_STEPS = 100
#: words of an observation that read like a refusal (case-insensitive regular expression)
REFUSAL_WORDS = (
    r"\b(refused|refuses|refuse|denied|rejected|declined|forbidden|not allowed|not permitted|unauthori[sz]ed|"
    r"no such|not found|does not exist|already|insufficient|not enough|unable|cannot|can't|invalid)\b"
)


@dataclass
class CorpusOutcomes:
    """The outcome labels of one corpus (or, ``level="environment"``, of one environment: ``corpus`` is then its
    env id), and what is implausible about them (``problem``: None when nothing)."""

    corpus: str
    steps: int
    errors: int
    failures: int
    rules: list[str] = field(default_factory=list)
    problem: str | None = None
    example_step: str | None = None
    example: str | None = None
    level: str = "corpus"
    #: the exception type its error steps most often raise with a refusal-like message (REFUSAL_WORDS)
    refusing_raise: str | None = None

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
            f"{self.level} {self.corpus!r}: {self.problem} (outcome "
            f"rule: {self.rule_text()}) — {example}. Fix: {self._fix()}"
        )

    def _fix(self) -> str:
        if self.failures == 0 and self.refusing_raise is not None:
            return raises_rule_hint(self.refusing_raise)
        if self.failures == 0:
            return f"if these are refusals, {HOW_TO_DECLARE}"
        return (
            "if these are successes, correct the corpus's outcome_rule "
            "(or set extends_default: false), docs/environments.md"
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
    #: the explored environments, judged one by one (module docstring)
    environments: list[CorpusOutcomes] = field(default_factory=list)

    @property
    def findings(self) -> list[CorpusOutcomes]:
        return [c for c in [*self.corpora, *self.environments] if c.problem is not None]

    @property
    def ok(self) -> bool:
        return not self.findings

    def warnings(self) -> list[str]:
        return [w for c in self.findings if (w := c.warning()) is not None]

    def headline(self) -> str:
        if self.ok:
            return (
                f"outcome labels plausible in all {len(self.corpora)} corpora (none with ≥ {MIN_STEPS} steps "
                f"and no failure, none above {MAX_FAILURE_SHARE:.0%} failures)"
            )
        corpora = [c.corpus for c in self.findings if c.level == "corpus"]
        envs = [c.corpus for c in self.findings if c.level == "environment"]
        parts = [f"{len(corpora)} of {len(self.corpora)} corpora" + (f" ({', '.join(corpora)})" if corpora else "")]
        if envs:
            parts.append(f"{len(envs)} environment{'s' * (len(envs) != 1)} ({', '.join(envs)})")
        return " and ".join(parts) + " with implausible outcome labels"

    def facts(self) -> Facts:
        """What the check reports (its metadata): the headline, every corpus (with each explored environment judged
        implausible on its own), the findings (each also a warning) and the thresholds."""
        rows = [c.row() for c in [*self.corpora, *(e for e in self.environments if e.problem)]]
        return Facts(
            {
                "headline": self.headline(),
                "corpora": Table(rows, OUTCOME_COLUMNS),
                "findings": Markdown("\n".join(f"- {md(w)}" for w in self.warnings()) or "_none_"),
                "min_steps": MIN_STEPS,
                "max_failure_share": MAX_FAILURE_SHARE,
            },
            [f"{CHECK}: {line}" for line in self.warnings()],
        )


#: the columns of a corpus (:meth:`CorpusOutcomes.row`) in the check's metadata
OUTCOME_COLUMNS = ["corpus", "steps", "errors", "failures", "failure_share", "outcome_rule", "finding"]
OUTCOME_COLUMNS += ["example_step", "example_observation"]


def _corpus_sql(parts: list[str], with_rule: bool) -> tuple[str, list[Any]]:
    rules = "list(DISTINCT outcome_rule ORDER BY outcome_rule)" if with_rule else "[]::VARCHAR[]"
    return (
        f"""SELECT split_part(env_id, '/', 1) AS corpus, count(*) AS steps,
                       count(*) FILTER (outcome = 'error') AS errors, count(*) FILTER (outcome = 'failure') AS failures,
                       {rules} AS rules
                FROM read_parquet(?, union_by_name = true) GROUP BY 1 ORDER BY 1""",
        [parts],
    )


def _evidence(
    con: duckdb.DuckDBPyConnection,
    parts: list[str],
    found: CorpusOutcomes,
    where: str,
    wanted: str,
    refusal_first: bool,
) -> None:
    """A finding's example: the (step id, observation) of the most frequent observation of ``found``'s steps (``where``
    ``= ?`` names the corpus or environment) matching ``wanted``, deliberately mutated calls first (with
    ``refusal_first``: success observations that read like a refusal before them); and without failures but with
    errors, the exception its refusals raise (:func:`_refusing_raise`)."""
    first = "count(*) FILTER (regexp_matches(raw_observation, ?, 'i')) DESC, " if refusal_first else ""
    row = con.execute(
        f"""SELECT min(step_id), raw_observation FROM read_parquet(?, union_by_name = true)
            WHERE {where} = ? AND {wanted}
            GROUP BY raw_observation
            ORDER BY {first}count(*) FILTER (mutated_arg IS NOT NULL) DESC, count(*) DESC, raw_observation LIMIT 1""",
        [parts, found.corpus, *([REFUSAL_WORDS] if refusal_first else [])],
    ).fetchone()
    if row is not None:
        text = str(row[1])
        found.example_step = str(row[0])
        found.example = text if len(text) <= _EXAMPLE_CHARS else text[:_EXAMPLE_CHARS] + "…"
    if not found.failures and found.errors:
        found.refusing_raise = _refusing_raise(con, parts, where, found.corpus)


def _refusing_raise(con: duckdb.DuckDBPyConnection, parts: list[str], where: str, key: str) -> str | None:
    """The exception type that the error steps matching ``where`` (``= ?`` on ``key``) most often raise with a
    message that reads like a refusal; None when none does."""
    row = con.execute(
        f"""SELECT error_type FROM read_parquet(?, union_by_name = true)
            WHERE {where} = ? AND outcome = 'error' AND error_type IS NOT NULL
              AND regexp_matches(coalesce(error_message, ''), ?, 'i')
            GROUP BY error_type ORDER BY count(*) DESC, error_type LIMIT 1""",
        [parts, key, REFUSAL_WORDS],
    ).fetchone()
    return None if row is None else str(row[0])


def _env_sql(parts: list[str], with_rule: bool) -> tuple[str, list[Any]]:
    rules = "list(DISTINCT outcome_rule ORDER BY outcome_rule)" if with_rule else "[]::VARCHAR[]"
    return (
        f"""SELECT env_id, count(*) AS steps, count(*) FILTER (outcome = 'error') AS errors,
                       count(*) FILTER (outcome = 'failure') AS failures, {rules} AS rules,
                       count(*) FILTER (outcome = 'success' AND regexp_matches(raw_observation, ?, 'i')) AS refusal_like
                FROM read_parquet(?, union_by_name = true) GROUP BY 1
                HAVING count(*) FILTER (mutated_arg IS NOT NULL) > 0 ORDER BY 1""",
        [REFUSAL_WORDS, parts],
    )


def _judge_environments(
    con: duckdb.DuckDBPyConnection, parts: list[str], report: OutcomeReport, with_rule: bool
) -> None:
    """The explored environments, each judged on its own (module docstring)."""
    rows = con.execute(*_env_sql(parts, with_rule)).fetchall()
    failing = {str(env) for env, _, _, failures, _, _ in rows if failures}
    named = {c.corpus for c in report.corpora if c.problem is not None}
    for env, steps, errors, failures, rules, refusal_like in rows:
        found = CorpusOutcomes(str(env), int(steps), int(errors), int(failures), list(rules or []), level="environment")
        others = sorted(failing - {found.corpus})
        if found.steps >= MIN_ENV_STEPS and not found.failures and str(env).split("/")[0] not in named:
            if refusal_like:
                found.problem = (
                    f"{found.steps} steps and not one labeled failure, though {refusal_like} success observations "
                    "read like refusals"
                )
            elif others:
                found.problem = (
                    f"{found.steps} steps and not one labeled failure, while {len(others)} other explored "
                    f"environment{'s' * (len(others) != 1)} ({', '.join(others[:3])}{', …' * (len(others) > 3)}) "
                    "have failures"
                )
        if found.problem is not None:  # an environment without failures: its successes that read like refusals
            _evidence(con, parts, found, "env_id", "outcome = 'success'", refusal_first=True)
        report.environments.append(found)


def check_outcomes(layout: DataLayout) -> OutcomeReport:
    """The outcome labels of every corpus of ``layout``'s steps, with the implausible ones named."""
    parts = layout.step_parts()
    report = OutcomeReport([])
    if not parts:
        return report
    with connect() as con:
        with_rule = True
        try:
            rows = con.execute(*_corpus_sql(parts, with_rule=True)).fetchall()
        except duckdb.BinderException:  # steps labeled before the outcome_rule column: the default rule
            rows = con.execute(*_corpus_sql(parts, with_rule=False)).fetchall()
            with_rule = False
        for corpus, steps, errors, failures, rules in rows:
            found = CorpusOutcomes(str(corpus), int(steps), int(errors), int(failures), list(rules or []))
            if found.steps >= MIN_STEPS and found.failures == 0:
                found.problem = f"{found.steps} steps and not one labeled failure"
            elif found.non_error and found.share > MAX_FAILURE_SHARE:
                found.problem = (
                    f"{found.failures} of {found.non_error} non-error steps ({found.share:.0%}) labeled "
                    f"failure, more than {MAX_FAILURE_SHARE:.0%}"
                )
            if found.problem is not None:
                wanted = "outcome = 'failure'" if found.failures else "outcome <> 'error'"
                _evidence(con, parts, found, "split_part(env_id, '/', 1)", wanted, refusal_first=False)
            report.corpora.append(found)
        _judge_environments(con, parts, report, with_rule)
    return report
