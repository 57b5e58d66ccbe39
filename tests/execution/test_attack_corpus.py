"""Issue 24, "Done when": a corpus of new attacks of every family (tests/support/attack_corpus/), run as a user runs a
corpus — mixed with innocent victim environments, in the same sandbox workers, with child reuse on — is contained.

Oracle (per attack, one test id each):

* **containment (F1 child→worker/sibling, F2 writes outside, F3 dirty reuse, F5 bad frames)** — the victims are
  run alone (clean run) and then mixed with the attacker in two orders on ONE worker (so they share it, and
  reused children; the interleaved order also with a fresh child per trajectory wherever that can change what runs:
  corpus code always gets one, see ``orders``) with ``Limits(reuse_children=8)``. Every run starts with no
  environment instance alive (the runs share one sandbox, whose instances each run ends: ``Boxes``).
  Every victim's labels (initial state, observations, states, Δ, outcome, hashes, issues — everything but
  ``call_seconds``) must be byte-identical to the clean run. The victims import standard modules the worker has not
  preloaded, write and re-read their files, and report what they see of ``/tmp``, ``/dev/shm`` and their own file-size
  limit, so a planted module, a full ``/tmp``, a lowered limit, a killed or stopped sibling all show as a label
  difference. Attacks aimed at reuse have innocent scenarios of the *same* environment code as victims (``SAME_CODE``);
  they are compared with a clean run of those scenarios alone. No attacker output may contain the victims' secret.
  Attacks that leave work behind must leave the worker tree idle and single-threaded once the run is over.
* **bad frames and values (F5)** additionally: the run never raises; every step of the attacker either is an
  ``error`` step or names exactly the tool, arguments and turn of its action with a finite
  ``call_seconds``; everything stored is strict JSON (no NaN/Infinity) and encodable as UTF-8.
* **nondeterminism (F4)** — all F4 environments and the victims are collected, labeled and checked the way the
  Dagster assets do it (``collect`` → ``label`` → ``check_determinism`` with the asset's default sample size →
  ``verify_steps``/``quarantine``), among 63 innocent trajectories, as in a real corpus. ASSUMPTION (the issue leaves
  "quarantined" open): an environment is quarantined when its ``env_id`` appears in a findings parquet under
  ``<data_root>/determinism/`` (``nondeterministic-*`` or ``quarantine-*``, the files ``step_strata`` excludes). The
  victims must not be. A precondition test shows each F4 environment really is nondeterministic (two executions differ),
  so a failure means the check missed it, not that the environment happened to repeat itself.
* **poisoned names (F6) and the end-to-end run** (slow) — the whole corpus written as an EnvScaler corpus on
  disk, loaded through ``sources``/``env_items``, collected, labeled, checked, quarantined, stratified,
  selected, exported and summarised: the run completes, the victims' steps reach the strata un-excluded, and
  no raw ``<img``, ESC byte, forged line or raw ``|``-id is in the console summary, the Markdown tables or the
  dataset card. ASSUMPTION: "escaped" means the poisoned substring does not appear verbatim.

Many of these tests are EXPECTED TO FAIL before the fixes of issue 24 land; each failure message names what
escaped. ``test_control_*`` cases pass on the current code and prove the harness itself is sound.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pipeline.core.canonical import canonical_json, canonicalize
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import registry
from pipeline.envs.registry import sources_config
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from tests.support.attack_corpus import FAMILIES, Case, load_cases, write_corpus
from tests.support.attack_corpus import victims as V
from tests.support.procs import descendants

LIMITS = Limits(call_timeout_s=4, memory_mb=256, reuse_children=8, max_restarts=3, tmp_mb=256)
CASES = load_cases()
CONTAIN = [c for c in CASES if c.family in ("F1", "F2", "F3", "F5")]
F4 = [c for c in CASES if c.family == "F4"]
F6 = [c for c in CASES if c.family == "F6"]

BENIGN = Case(
    id="control_benign",
    family="F3",
    description="A well-behaved environment (control).",
    class_name="Calm",
    code='''
import uuid, random

class Calm:
    def __init__(self, init_config):
        self.n = int(init_config.get("n", 0))

    def step(self):
        """Count and draw a seeded id."""
        self.n += 1
        return {"success": True, "data": {"n": self.n, "id": str(uuid.uuid4()), "r": random.random()}}
''',
    actions=(("step", {}), ("step", {})),
    same_code=(({"n": 5}, (("step", {}), ("step", {}))),),
)


# -- helpers ------------------------------------------------------------------------------------------


def attack_spec(case: Case, init: dict[str, Any] | None = None):
    return V.spec(case.corpus_env_id, case.code, case.class_name, case.init if init is None else init)


def _substitute(args: dict[str, Any], own: str, nxt: str) -> dict[str, Any]:
    return {k: (nxt if v == "$NEXT" else own if v == "$SELF" else v) for k, v in args.items()}


def attacker(case: Case, trajectory_id: str, next_id: str) -> Trajectory:
    return Trajectory(
        trajectory_id,
        f"{case.id}-attack",
        attack_spec(case),
        tuple(Action(n, _substitute(a, trajectory_id, next_id), turn=i) for i, (n, a) in enumerate(case.actions)),
    )


def same_code_trajectories(case: Case) -> dict[str, Trajectory]:
    return {
        f"samecode/{case.id}/{k}": V.trajectory(f"samecode/{case.id}/{k}", attack_spec(case, cfg), acts)
        for k, (cfg, acts) in enumerate(case.same_code)
    }


def labels(result: dict[str, Any]) -> str:
    """Everything the pipeline stores of a result, but timing: as one comparable text."""
    steps = [{k: v for k, v in s.items() if k != "call_seconds"} for s in result["steps"]]
    return json.dumps({**result, "steps": steps}, sort_keys=True, default=repr)


class Boxes:
    """The sandbox the module's runs share: ``get`` gives a sandbox in which no environment instance is left of an
    earlier run, as a new one would be, without paying a new sandbox's start (its shared worker: every trajectory
    here is corpus code, run on its environment's own instance, so the shared worker runs nothing);
    ``done`` ends every instance the run started (a worker and zygote that only ever received that environment's
    code: a later run's instance of the same environment is a new one), or, after a crash, the whole sandbox."""

    def __init__(self) -> None:
        self._box: Sandbox | None = None

    def get(self, workers: int, limits: Limits) -> Sandbox:
        if self._box is not None and (self._box.workers, self._box.limits) != (workers, limits):
            self.close()
        if self._box is None:
            self._box = Sandbox(workers=workers, limits=limits).__enter__()
        assert not self._box.live_instances(), "harness: an environment instance of an earlier run is still alive"
        return self._box

    def done(self, box: Sandbox, crashed: bool) -> None:
        if crashed:  # batches of the run may still be in flight: end the sandbox with them
            self.close()
        else:
            box.end_instances()

    def close(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None


@pytest.fixture(scope="module")
def boxes():
    shared = Boxes()
    yield shared
    shared.close()


def run_all(
    trajectories: list[Trajectory],
    limits: Limits = LIMITS,
    workers: int = 1,
    idle_check: bool = False,
    fresh_children: bool = False,
    boxes: Boxes | None = None,
) -> tuple[list[tuple[Trajectory, dict[str, Any]]], str | None, list[str]]:
    """(results, crash, idle escapes): a crash of the run itself is returned, not raised. ``boxes``: run in the
    module's shared sandbox (:class:`Boxes`), else in a new one."""
    results: list[tuple[Trajectory, dict[str, Any]]] = []
    crash = None
    idle: list[str] = []
    with contextlib.ExitStack() as stack:
        box = boxes.get(workers, limits) if boxes else stack.enter_context(Sandbox(workers=workers, limits=limits))
        try:
            for traj, result in box.run(trajectories, fresh_children=fresh_children):
                results.append((traj, result))
        except Exception as exc:  # the run crashing is a finding
            crash = f"{type(exc).__name__}: {str(exc)[:500]}"
        try:
            if idle_check:
                idle = idle_escapes(box)
        finally:  # a failed probe leaves no instance to the next run
            if boxes:
                boxes.done(box, crashed=crash is not None)
    return results, crash, idle


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def idle_escapes(box: Sandbox) -> list[str]:
    """With no call in flight: no process of the worker tree keeps burning CPU or holds a second thread."""
    time.sleep(0.5)
    pids = [p for w in box._all for p in descendants(w.proc.pid)]
    before = {p: _cpu_ticks(p) for p in pids}
    time.sleep(1.0)
    hz = os.sysconf("SC_CLK_TCK")
    out = []
    for p in pids:
        used = (_cpu_ticks(p) - before[p]) / hz
        if used > 0.3:
            out.append(f"pid {p} burned {used:.2f}s of CPU in 1s with no call in flight")
        try:
            threads = int(
                next(
                    line.split()[1]
                    for line in Path(f"/proc/{p}/status").read_text().splitlines()
                    if line.startswith("Threads:")
                )
            )
        except (OSError, StopIteration):
            continue
        if threads > 1:
            out.append(f"pid {p} (idle sandbox process) still runs {threads} threads")
    return out


def _strict(value: Any, where: str, out: list[str]) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        out.append(f"{where}: non-finite float {value!r} stored")
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            out.append(f"{where}: text with a lone surrogate stored")
    elif isinstance(value, dict):
        for k, v in value.items():
            _strict(k, where, out)
            _strict(v, f"{where}.{k}", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _strict(v, f"{where}[{i}]", out)


def frame_escapes(traj: Trajectory, result: dict[str, Any]) -> list[str]:
    """F5: a step is an error step, or exactly the action that was called (tool, arguments, turn) with sane values."""
    out: list[str] = []
    for step in result["steps"]:
        i = step.get("step_index")
        where = f"{traj.trajectory_id}#{i}"
        if not isinstance(i, int) or not 0 <= i < len(traj.actions):
            out.append(f"{where}: a step for an action that does not exist")
            continue
        _strict(step, where, out)
        if step["outcome"] == "error":
            continue
        action = traj.actions[i]
        if step["tool"] != action.name or step["arguments_json"] != canonical_json(canonicalize(action.arguments)):
            out.append(
                f"{where}: stored as {step['tool']}({step['arguments_json'][:120]}) but {action.name} was called"
            )
        if step["turn"] != action.turn:
            out.append(f"{where}: turn {str(step['turn'])[:40]} stored for an action of turn {action.turn}")
        seconds = step.get("call_seconds")
        if seconds is not None and not (isinstance(seconds, float) and math.isfinite(seconds) and 0 <= seconds <= 3600):
            out.append(f"{where}: call_seconds {str(seconds)[:40]} stored")
    _strict(result.get("init"), f"{traj.trajectory_id}:init", out)
    return out


@pytest.fixture(scope="module")
def clean(boxes) -> dict[str, str]:
    """The victims' labels alone: the reference of every mixed run."""
    results, crash, _ = run_all(list(V.victim_trajectories().values()), boxes=boxes)
    assert crash is None, crash
    return {t.trajectory_id: labels(r) for t, r in results}


def orders(case: Case) -> dict[str, list[Trajectory]]:
    """Run orders: the attacker first; and interleaved between victims (the counter's code — with the secret —
    and the ledger's compiled constants are already in the worker when it attacks), once with reused children
    and once with a fresh child per trajectory (the determinism check's path, and ``reuse_children=1``).

    The fresh-children run is made only when a trajectory of the order may share a child
    (:func:`pipeline.envs.registry.reuse_key`): corpus code never does — the sandbox runs every corpus trajectory
    in a fresh child of its environment's own instance, with ``reuse_children=1``, whatever ``fresh_children``
    says — so for it that run would send the worker byte-identical requests to the "interleaved" one's."""
    v = V.victim_trajectories()
    same = list(same_code_trajectories(case).values())
    first_next = (same[0] if same else v["victim/ledger/0"]).trajectory_id
    a_first = [attacker(case, f"attack/{case.id}/0", first_next), *same, *v.values()]
    mid_next = (same[0] if same else v["victim/ledger/1"]).trajectory_id
    inter = [
        v["victim/counter/0"],
        v["victim/ledger/0"],
        attacker(case, f"attack/{case.id}/1", mid_next),
        *same,
        v["victim/ledger/1"],
        attacker(case, f"attack/{case.id}/2", "victim/none"),
    ]
    out = {"attacker-first": a_first, "interleaved": inter}
    if any(registry.reuse_key(t.env) is not None for t in inter):
        out["interleaved, fresh children"] = inter
    return out


def containment_escapes(case: Case, clean: dict[str, str], boxes: Boxes) -> list[str]:
    same = same_code_trajectories(case)
    reference = dict(clean)
    if same:
        results, crash, _ = run_all(list(same.values()), boxes=boxes)
        assert crash is None, f"harness: the same-code scenarios alone crashed: {crash}"
        reference.update({t.trajectory_id: labels(r) for t, r in results})
    escapes: list[str] = []
    for name, trajectories in orders(case).items():
        results, crash, idle = run_all(
            trajectories, idle_check=case.idle_cpu, fresh_children="fresh" in name, boxes=boxes
        )
        if crash:
            escapes.append(f"[{name}] the run crashed: {crash}")
        escapes += [f"[{name}] {e}" for e in idle]
        got = {t.trajectory_id: r for t, r in results}
        for tid, ref in reference.items():
            if tid not in got:
                escapes.append(f"[{name}] victim {tid}: no result")
                continue
            if labels(got[tid]) != ref:
                escapes.append(
                    f"[{name}] victim {tid}: labels differ from the clean run: {_first_difference(ref, got[tid])}"
                )
        attackers = [(t, r) for t, r in results if t.trajectory_id.startswith("attack/")]
        for t, r in attackers:
            if V.SECRET in json.dumps(r):
                escapes.append(
                    f"[{name}] {t.trajectory_id}: another environment's code (the victim's secret) is in its labels"
                )
            if case.family == "F5":
                escapes += [f"[{name}] {e}" for e in frame_escapes(t, r)]
        if case.check:
            escapes += [f"[{name}] {e}" for e in case.check([r for _, r in attackers], LIMITS)]
    return escapes


def _first_difference(reference: str, result: dict[str, Any]) -> str:
    ref = json.loads(reference)
    got = json.loads(labels(result))
    if (ref["init"] or {}).get("state_json") != (got["init"] or {}).get("state_json") or ref["init_error"] != got[
        "init_error"
    ]:
        return f"initial state/reset: {str(got['init'])[:200]} / {str(got['init_error'])[:300]}"
    for a, b in zip(ref["steps"], got["steps"]):
        if a != b:
            keys = [k for k in a if a.get(k) != b.get(k)]
            return (
                f"step {a['step_index']} ({a['tool']}): {', '.join(keys)}: "
                f"{str({k: b.get(k) for k in keys if k not in ('delta',)})[:400]}"
            )
    if len(ref["steps"]) != len(got["steps"]):
        return f"{len(got['steps'])} steps instead of {len(ref['steps'])}; issues {str(got['issues'])[:300]}"
    return f"issues {str(got['issues'])[:300]}"


# -- the corpus itself ----------------------------------------------------------------------------------


def test_control_corpus_covers_every_family():
    by_family = {f: [c.id for c in CASES if c.family == f] for f in FAMILIES}
    assert all(len(ids) >= 2 for ids in by_family.values()), by_family
    assert len({c.id for c in CASES}) == len(CASES)
    for case in CASES:
        compile(case.code, case.id, "exec")


def test_control_victims_label_identically_alone_and_again(clean):
    """The harness's reference is itself reproducible: the victims in another order, on two workers."""
    results, crash, _ = run_all(list(reversed(V.victim_trajectories().values())), workers=2)
    assert crash is None
    again = {t.trajectory_id: labels(r) for t, r in results}
    assert again == clean
    assert all(json.loads(text)["init"] is not None for text in clean.values())
    ledger = json.loads(clean["victim/ledger/0"])
    assert [s["outcome"] for s in ledger["steps"]] == ["success"] * len(V.LEDGER_ACTIONS)
    assert V.MARKER in ledger["steps"][4]["raw_observation"]


def test_control_a_benign_environment_mixed_with_victims_changes_nothing(clean, boxes):
    assert containment_escapes(BENIGN, clean, boxes) == []


# -- containment ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CONTAIN, ids=[c.id for c in CONTAIN])
def test_attack_is_contained(case: Case, clean, boxes):
    """See the module docstring: victims byte-identical to the clean run, nothing leaks, nothing crashes."""
    escapes = containment_escapes(case, clean, boxes)
    assert not escapes, f"{case.family} {case.id} ({case.description}) escaped:\n  " + "\n  ".join(escapes)


# -- nondeterminism: the determinism check must see it --------------------------------------------------------


def _f4_trajectories() -> list[Trajectory]:
    out = []
    for case in F4:
        for k in range(2):
            out.append(attacker(case, f"f4/{case.id}/{k}", "-"))
    out += list(V.victim_trajectories().values())
    # a corpus is mostly well-behaved trajectories: 60 more innocent ones (a check that re-executes only a
    # fixed-size sample, not one trajectory per environment, misses some nondeterministic environments)
    counter = V.victim_trajectories()["victim/counter/0"]
    out += [replace(counter, trajectory_id=f"victim/counter/bulk-{k}") for k in range(60)]
    return out


@pytest.fixture(scope="module")
def f4_run(tmp_path_factory):
    """F4 environments + victims, collected, labeled and checked as the assets do."""
    from pipeline.collect.collector import collect
    from pipeline.envs import envscaler
    from pipeline.envs.catalog import build_catalog
    from pipeline.labeling.determinism import check_determinism
    from pipeline.labeling.quarantine import quarantine
    from pipeline.labeling.steps import label
    from pipeline.store.layout import DataLayout
    from pipeline.store.reconstruct import verify_steps

    layout = DataLayout.at(tmp_path_factory.mktemp("f4"))
    items = [
        envscaler.parse_env_item(c.corpus_env_id, {"env_class_name": c.class_name, "env_class_code": c.code})
        for c in F4
    ]
    items += [
        envscaler.parse_env_item(env_id, {"env_class_name": cls, "env_class_code": code})
        for env_id, (cls, code) in V.VICTIM_CODE.items()
    ]
    build_catalog(layout, items, [], disabled=("bfcl",))
    with Sandbox(workers=2, limits=LIMITS) as box:
        collected = _Recording(box)
        collect(_f4_trajectories(), layout, collected)
        label(layout, box)
        report = check_determinism(layout, box)  # the asset's default sample size
        quarantine(layout, verify_steps(layout, max_problems=1_000_000))
    found: dict[str, set[str]] = {}
    for path in sorted(layout.determinism_dir.glob("*.parquet")):
        for row in pq.read_table(path, columns=["env_id", "reason"]).to_pylist():
            found.setdefault(row["env_id"], set()).add(row["reason"][:200])
    return layout, report, found, collected.results


class _Recording:
    """The sandbox as ``collect`` uses it, keeping what each trajectory it ran returned (its first execution)."""

    def __init__(self, box: Sandbox) -> None:
        self.box, self.limits = box, box.limits
        self.results: dict[str, tuple[Trajectory, dict[str, Any]]] = {}

    def run(self, trajectories, fresh_children: bool = False):
        for traj, result in self.box.run(trajectories, fresh_children=fresh_children):
            self.results[traj.trajectory_id] = (traj, result)
            yield traj, result


@pytest.fixture(scope="module")
def f4_differs(f4_run, boxes) -> dict[str, bool]:
    """Precondition: each F4 environment's labels differ between a reused child and a fresh one, or in time: the
    first execution is the collection's of ``f4_run`` (the trajectories as it ran them), the second a run of the
    same trajectories alone, with fresh children."""
    first = [f4_run[3][f"f4/{case.id}/{k}"] for case in F4 for k in range(2)]
    time.sleep(0.05)
    second, crash, _ = run_all([t for t, _ in first], fresh_children=True, boxes=boxes)
    assert crash is None, crash
    a = {t.trajectory_id: labels(r) for t, r in first}
    b = {t.trajectory_id: labels(r) for t, r in second}
    return {case.id: any(a[f"f4/{case.id}/{k}"] != b[f"f4/{case.id}/{k}"] for k in range(2)) for case in F4}


def test_control_the_harness_sees_nondeterminism(f4_differs):
    """At least the sources no sandbox can freeze (an object's address) differ between two runs: the
    precondition of the check below is real."""
    assert f4_differs["f4_object_identity"], "harness: object identity labeled identically twice"


@pytest.mark.parametrize("case", F4, ids=[c.id for c in F4])
def test_nondeterministic_environment_is_frozen_or_quarantined(case: Case, f4_run, f4_differs):
    """Contained means: the sandbox froze the source (two runs, reused and fresh children, label
    identically) or the determinism check quarantined the environment."""
    layout, report, found, _ = f4_run
    env_id = f"envscaler/{case.corpus_env_id}"
    assert not f4_differs[case.id] or env_id in found, (
        f"{case.id} ({case.description}) is nondeterministic but not in any determinism finding "
        f"(determinism report: {report.headline()}; {len(report.sampled)} trajectories re-executed; "
        f"environments flagged: {sorted(found)})"
    )


def test_control_f4_victims_are_not_quarantined(f4_run):
    _, _, found, _ = f4_run
    assert not [e for e in found if "victim_" in e], found


# -- end to end: the corpus on disk, every family at once, poisoned names ------------------------------------

POISON = {
    "f6_html_env_id": ["<img"],
    "f6_ansi_env_id": ["\x1b"],
    "f6_newline_env_id": ["\nFAILED CHECK nothing"],
    "f6_pipe_env_id": ["shelf|999|fake|cells"],
}


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    """The whole corpus, every family at once."""
    return _e2e(tmp_path_factory.mktemp("e2e"), CASES)


@pytest.fixture(scope="module")
def e2e_names(tmp_path_factory):
    """Only the poisoned names (and the victims): their reports exist whatever the other families do."""
    return _e2e(tmp_path_factory.mktemp("e2e-names"), F6)


def _e2e(root: Path, cases: list[Case]):
    """A corpus as a user has it (EnvScaler files configured as a source), run through every stage."""
    import contextlib
    import io

    from cli.summary import summary
    from pipeline.collect.collector import collect
    from pipeline.collect.sources import SourceConfig, env_items
    from pipeline.envs.catalog import build_catalog
    from pipeline.envs.config import EnvScalerCorpus
    from pipeline.export.hf_layout import export_split
    from pipeline.labeling.determinism import check_determinism
    from pipeline.labeling.quarantine import quarantine
    from pipeline.labeling.steps import label
    from pipeline.select.selection import build_benchmark
    from pipeline.select.stratify import stratify
    from pipeline.store.layout import DataLayout
    from pipeline.store.reconstruct import verify_steps
    from pipeline.store.versions import BENCHMARK

    env_file, scen_file = write_corpus(root / "corpus", cases)
    cfg = sources_config(
        bfcl={"categories": [], "replay": False},
        builtin={"enabled": False},
        envscaler=[EnvScalerCorpus(env_file, scen_file)],
    )
    items, issues = env_items(cfg)
    layout = DataLayout.at(root / "data")
    build_catalog(layout, items, issues, disabled=("bfcl",))
    by_env = {i.env_id: i for i in items}
    trajectories = []
    for case in cases:  # the attacks' own tool calls, on the specs built from the corpus files
        if case.corpus_env_id not in by_env:  # refused at ingestion (an unsafe id): its reason is reported instead
            assert any(case.corpus_env_id in i.task_id or case.corpus_env_id in i.reason for i in issues) or issues, (
                case.id
            )
            continue
        spec = by_env[case.corpus_env_id].spec(case.init)
        trajectories.append(
            Trajectory(
                f"e2e/{case.id}",
                f"{case.id}-attack",
                spec,
                tuple(
                    Action(n, _substitute(a, f"e2e/{case.id}", "-"), turn=i) for i, (n, a) in enumerate(case.actions)
                ),
            )
        )
    for env_id, t in V.victim_trajectories().items():
        item = by_env[t.env_id.split("/", 1)[1]]
        trajectories.append(replace(t, env=item.spec(t.env.init_config)))
    stages: dict[str, str] = {}
    out = io.StringIO()
    try:
        with Sandbox(workers=2, limits=LIMITS) as box:
            collect(trajectories, layout, box)
            stages["collect"] = "ok"
            label(layout, box)
            stages["label"] = "ok"
            check_determinism(layout, box)
            stages["determinism"] = "ok"
        quarantine(layout, verify_steps(layout, max_problems=1_000_000))
        stratify(layout)
        stages["stratify"] = "ok"
        bench = build_benchmark(layout, seed=0, on_shortfall="warn")
        stages["benchmark"] = "ok"
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            summary(layout)
        stages["summary"] = "ok"
        export_split(layout, BENCHMARK, bench.version, root / "export")
        stages["export"] = "ok"
    except Exception as exc:  # where the run stopped is the finding
        stages["failed"] = f"{type(exc).__name__}: {str(exc)[:600]}"
    texts = {"console summary": out.getvalue()}
    for path in [*(root / "export").rglob("*.md"), *layout.root.rglob("*.md")]:
        texts[str(path.relative_to(root))] = path.read_text(errors="replace")
    return layout, stages, texts


@pytest.mark.slow
def test_e2e_run_completes_for_the_well_behaved_environments(e2e):
    layout, stages, _ = e2e
    assert "failed" not in stages, f"the run stopped after {list(stages)[:-1]}: {stages['failed']}"
    strata = pq.read_table(layout.strata).to_pylist()
    victims = [r for r in strata if "victim_" in r["env_id"]]
    assert victims and not [r for r in victims if r["excluded"]], sorted(
        {(r["env_id"], r["excluded_reason"]) for r in victims if r["excluded"]}
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", F6, ids=[c.id for c in F6])
def test_poisoned_name_is_not_raw_in_any_report(case: Case, e2e_names):
    """ASSUMPTION: the reports are the console summary (``python -m pipeline summary``), every Markdown file
    under the data root and the exported dataset card (run with the F6 cases and the victims only)."""
    _, stages, texts = e2e_names
    assert "summary" in stages, f"harness: the run with poisoned names stopped before its reports: {stages}"
    raw = {where: [p for p in POISON[case.id] if p in text] for where, text in texts.items()}
    raw = {w: p for w, p in raw.items() if p}
    assert not raw, f"{case.id}: the raw poisoned name ({case.env_id!r}) is in: {raw} (stages: {stages})"
