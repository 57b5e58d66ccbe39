"""EnvScaler-format corpora (``SourceConfig.envscaler``): their environments and scenarios, built and
run by the ``envscaler`` adapter (:mod:`pipeline.envs.adapters.envscaler`), which the builtin pack shares."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pipeline.core.issues import TaskIssue
from pipeline.envs import envscaler
from pipeline.envs.config import EnvScalerCorpus, SourceConfig, SourceError
from pipeline.envs.download import downloaded_corpus
from pipeline.envs.records import FirstSeen, clip
from pipeline.envs.source import EnvironmentSource, SourceTask


class EnvScalerSource(EnvironmentSource):
    """Every configured corpus; an environment of the ``envscaler`` adapter that no other source's
    prefix claims is this source's (whatever the corpus's own prefix)."""

    name = envscaler.SOURCE
    adapter = envscaler.SOURCE
    settings = EnvScalerCorpus
    many = True

    def why_disabled(self, cfg: SourceConfig) -> str | None:
        return None if cfg.of(self) else "no EnvScaler corpus configured (resources.sources.envscaler is empty)"

    def at_root(self, value: list[EnvScalerCorpus] | None, root: Path) -> list[EnvScalerCorpus]:
        """The corpora as configured; unset (None): the corpus ``./forge download envscaler`` recorded under the data
        root, if any."""
        if value is not None:
            return value
        corpus = downloaded_corpus(root)
        if corpus is None:
            return []
        files = [Path(f) for f in corpus.get("scenarios") or []]
        return [
            EnvScalerCorpus(
                env_items=Path(corpus["env_items"]),
                scenarios=files[0] if files else None,
                more_scenarios=tuple(files[1:]),
                prefix=corpus.get("prefix", envscaler.SOURCE),
                license=corpus.get("license", ""),
            )
        ]

    def files(self, cfg: SourceConfig) -> list[tuple[str, Path]]:
        files: list[tuple[str, Path]] = []
        for i, corpus in enumerate(cfg.of(self)):
            files.append((f"envscaler[{i}].env_items", Path(corpus.env_items)))
            if corpus.scenarios is not None:
                files.append((f"envscaler[{i}].scenarios", Path(corpus.scenarios)))
            files += [(f"envscaler[{i}].more_scenarios[{j}]", Path(p)) for j, p in enumerate(corpus.more_scenarios)]
        return files

    def env_items(self, cfg: SourceConfig, ids: FirstSeen) -> tuple[list[envscaler.EnvItem], list[TaskIssue]]:
        items: list[envscaler.EnvItem] = []
        issues: list[TaskIssue] = []
        for index, corpus in enumerate(cfg.of(self)):
            before, first_issue = len(items), len(issues)
            rule = corpus.rule_id
            for result in envscaler.load_env_items(corpus.env_items, corpus.prefix, corpus.license):
                item, problems = envscaler.split_item(result)
                env_id = result.env_id if item is not None else result.task_id
                if item is not None or result.task_id != result.origin:  # a record (not a whole bad file) claims its id
                    qualified = f"{corpus.prefix}/{env_id}"
                    first = ids.seen(qualified, result.origin)
                    if first is not None:
                        why = ids.message("env id", qualified, result.origin, first)
                        issues.append(TaskIssue(env_id, "env", why, result.origin))
                        continue
                issues.extend(problems)
                if item is not None:
                    items.append(item if rule is None else dataclasses.replace(item, outcome_rule=rule))
            if len(items) == before:  # a configured corpus that gives nothing is a mistake, not a quiet run
                own = issues[first_issue:]
                why = (
                    f"{len(own)} problem(s), first: {clip(own[0].reason, 300)} ({own[0].origin})"
                    if own
                    else "it holds no env item"
                )
                raise SourceError(
                    f"resources.sources.envscaler[{index}].env_items: {corpus.env_items} yielded no usable "
                    f"environment ({why}): fix the file (EnvScaler's env-items format: JSON, JSON lines or "
                    "Parquet) or remove the entry"
                )
        return items, issues

    def scenarios(
        self, cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None
    ) -> tuple[list[SourceTask], list[TaskIssue]]:
        """Each corpus's scenario files; then, with its ``explore_class_defaults``, every corpus environment
        that no scenario names from its class defaults (init config ``{}``: the constructor's own state;
        a class that cannot be built so is reported as a reset issue). Those environments are appended
        to ``without`` (when given)."""
        by_id = {i.qualified_id: i for i in items}
        tasks: list[SourceTask] = []
        issues: list[TaskIssue] = []
        named: set[str] = set()
        task_ids = FirstSeen()  # (env, task id) given twice: the first scenario is kept
        for corpus in cfg.of(self):
            for path in corpus.scenario_files():
                for sc in envscaler.load_scenarios(path):
                    if isinstance(sc, TaskIssue):
                        issues.append(sc)
                        continue
                    item = by_id.get(f"{corpus.prefix}/{sc.env_id}")
                    if item is None:
                        why = f"unknown or unusable env_id {clip(repr(sc.env_id), 80)}"
                        issues.append(TaskIssue(sc.task_id, "parse", why, sc.origin))
                        continue
                    first = task_ids.seen((item.qualified_id, sc.task_id), sc.origin)
                    if first is not None:
                        why = task_ids.message(f"task id of {item.qualified_id}:", sc.task_id, sc.origin, first)
                        issues.append(TaskIssue(sc.task_id, "parse", why, sc.origin))
                        continue
                    named.add(item.qualified_id)
                    tasks.append(
                        SourceTask(
                            sc.task_id,
                            item.spec(sc.init_config),
                            (sc.task or "Complete the task.",),
                            text=sc.task,
                            reference=sc.reference,
                            checklist=sc.checklist,
                        )
                    )
            for item in items:
                if item.prefix == corpus.prefix and item.qualified_id not in named:  # its qualified id: <prefix>/…
                    if without is not None:
                        without.append(item.qualified_id)
                    if corpus.explore_class_defaults:
                        named.add(item.qualified_id)
                        text = "Explore the environment from its class defaults."
                        tasks.append(
                            SourceTask(
                                f"{item.env_id}/class-defaults",
                                item.spec({}),
                                (text,),
                                category="explore-defaults",
                                text=text,
                            )
                        )
        return tasks, issues
