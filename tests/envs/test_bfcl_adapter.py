from collections import Counter

from pipeline.core.environment import Environment, EnvSpec
from pipeline.envs import bfcl
from pipeline.envs.bfcl_replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import default_task_files, iter_tasks
from pipeline.envs.registry import build


def test_pinned_version_installed():
    assert bfcl.installed_version() == bfcl.PINNED_VERSION


def test_all_eight_classes_with_tools_and_source():
    assert len(bfcl.CLASSES) == 8
    for name in bfcl.CLASSES:
        env = bfcl.BfclEnvironment([name])
        assert isinstance(env, Environment)
        assert env.tools, name
        for tool in env.tools:
            fn = tool["function"]
            assert fn["parameters"]["type"] == "object"
            assert f"def {fn['name']}(" in env.source_of(fn["name"])
        assert f"class {name}" in env.class_source()


def test_all_800_tasks_of_four_categories_parse():
    items = list(ground_truth_trajectories(iter_tasks(default_task_files())))
    assert len(items) == 800
    assert all(hasattr(t, "actions") for t in items), [t for t in items if not hasattr(t, "actions")][:3]
    assert Counter(t.category for t in items) == {c: 200 for c in bfcl.CATEGORIES}
    assert sum(len(t.actions) for t in items) == 4625
    # positional ground-truth arguments are bound to parameter names
    sort_calls = [a for t in items for a in t.actions if a.call.startswith("sort('")]
    assert sort_calls and all("file_name" in a.arguments for a in sort_calls)


def test_composite_state_is_public_attributes_keyed_by_class():
    task = next(t for t in iter_tasks(default_task_files(["base"])) if t.task_id == "multi_turn_base_0")
    env = build(
        EnvSpec(
            "bfcl",
            bfcl.env_id_for(task.involved_classes),
            task.initial_config,
            {"classes": task.involved_classes, "long_context": False},
        )
    )
    state = env.state()
    assert set(state) == set(task.involved_classes)
    fs = state["GorillaFileSystem"]
    assert all(not k.startswith("_") for k in fs)  # _current_dir etc. are private
    assert "parent" not in fs["root"]["contents"]["document"]  # back-pointer cut
    assert env.call("cd", {"folder": "document"}).value == {"current_working_directory": "document"}
    assert env.state() == state  # cd only moves the private working directory: public Δ = 0


def test_unknown_tool_is_not_a_tool():
    env = bfcl.BfclEnvironment(["MathAPI"])
    assert not env.has_tool("rm_rf")
    assert not env.has_tool("_load_scenario")
