"""Exploration of a schema-rich corpus (tests/support/schema_corpus): JSON Schema read whole (``$ref``/``$defs``,
enums, nested objects, ``format``, ``pattern``, bounds), ids only from tables of records, and values a refusal
lists as valid tried next — with the real policy, the real EnvScaler environment and the real outcome rule, the
episodes run one after another in this process as exploration runs them in the sandbox (what the steps teach is
passed on by :class:`pipeline.collect.seeds.Teacher`)."""

from __future__ import annotations

import json
import random
from collections import Counter
from functools import cache

import jsonschema

from pipeline.collect.seeds import Teacher
from pipeline.core.canonical import canonical_json, canonicalize
from pipeline.core.delta import diff
from pipeline.envs import envscaler, registry
from pipeline.execution.policy import ExplorationPolicy, PolicySettings, StateIndex
from pipeline.execution.relations import Records, is_mapping, refusal_hints, valid_values
from pipeline.execution.schema import conforms, pattern_string, resolved
from tests.support import schema_corpus

EPISODES = 48


@cache
def _explored() -> tuple[list[dict], dict[str, dict]]:
    """Every step of ``EPISODES`` episodes over the corpus's scenarios: (steps, tool schemas by name)."""
    items, rows = schema_corpus.corpus(4)
    item = envscaler.parse_env_item("telecom", items["telecom"])
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in item.tools}
    teacher, seen, steps = Teacher(), set(), []
    for episode in range(EPISODES):
        row = rows[episode % len(rows)]
        env = registry.build(item.spec(row["init_config"]))
        names = [t["function"]["name"] for t in env.tools]
        seeds, refusals = teacher.for_scenario(row["task_id"], names)
        policy = ExplorationPolicy(env.tools, PolicySettings(seed=episode, seeds=seeds, refusals=refusals))
        state = env.state()
        text = canonical_json(state)
        index = 0
        while (action := policy.next_action(state, index, text)) is not None:
            result = env.call(action.name, action.arguments)
            after = env.state()
            step = {
                "tool": action.name,
                "args": action.arguments,
                "mutated": action.mutated_arg,
                "outcome": env.outcome(action.name, result),
                "delta_size": len(diff(state, after)),
                "arguments_json": json.dumps(action.arguments),
                "raw_observation": env.observation(result),
            }
            key = (action.name, step["outcome"], step["delta_size"])
            teacher.learn("telecom", row["task_id"], step, key not in seen)
            seen.add(key)
            if not result.raised:
                policy.observe(action.arguments, canonicalize(result.value))
            steps.append(step)
            state, text, index = after, canonical_json(after), index + 1
    return steps, schemas


def test_write_tools_and_tools_whose_refusals_list_the_valid_values_succeed():
    steps, _ = _explored()
    ok = Counter(s["tool"] for s in steps if s["outcome"] == "success")
    for tool in (*schema_corpus.WRITE_TOOLS, "get_details_by_id"):
        assert ok[tool] > 0, (tool, ok, Counter(s["tool"] for s in steps))


def test_every_argument_drawn_to_conform_validates_against_the_tools_schema():
    steps, schemas = _explored()
    checked = mutated = 0
    for step in steps:
        params = schemas[step["tool"]]
        args = {k: v for k, v in step["args"].items() if k != step["mutated"]}
        declared = {k: v for k, v in params["properties"].items() if k != step["mutated"]}
        required = [r for r in params.get("required", []) if r != step["mutated"]]
        validator = jsonschema.Draft202012Validator(
            {**params, "properties": declared, "required": required},
            format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
        )
        errors = [e.message for e in validator.iter_errors(args)]
        assert not errors, (step["tool"], step["args"], errors)
        checked += len(args)
        mutated += step["mutated"] is not None
    assert checked > 500
    # the deliberately broken argument is a declared share (mutate_rate), never the rule
    assert 0 < mutated <= 0.25 * len(steps), (mutated, len(steps))


def test_apn_settings_are_nested_objects_behind_a_ref_with_every_field_drawn_to_fit():
    steps, schemas = _explored()
    drawn = [s["args"]["settings"] for s in steps if s["tool"] == "set_apn_settings" and s["mutated"] != "settings"]
    assert drawn and all(isinstance(d, dict) and {"name", "apn", "protocol", "mtu"} <= set(d) for d in drawn)
    assert {d["protocol"] for d in drawn} == {"IPv4", "IPv6", "IPv4v6"}  # the enum behind the $ref
    settings = resolved(schemas["set_apn_settings"])["properties"]["settings"]
    assert all(conforms(d, settings) for d in drawn)


def test_an_id_parameter_takes_table_keys_never_a_state_objects_attribute_names():
    steps, _ = _explored()
    ids = {s["args"]["id"] for s in steps if s["tool"] == "get_details_by_id" and s["mutated"] is None}
    assert ids and not ids & {"device", "surroundings", "phone", "data"}, ids  # apps keyed by name are a table
    state = canonicalize(schema_corpus.state(0))
    assert not is_mapping(state["phone"]) and is_mapping(state["data"]["lines"])
    assert "phone" not in StateIndex(state).tables


def test_a_refusals_list_of_valid_values_becomes_the_candidates_of_that_argument():
    text = "Invalid mode 5g. Valid modes are: 2g_only, 3g_only, 4g_5g_preferred."
    assert valid_values(text) == ["2g_only", "3g_only", "4g_5g_preferred"]
    assert valid_values("permission x is unknown: must be one of ['camera', 'location']") == ["camera", "location"]
    assert valid_values("cabin zz; available: economy, business or first") == ["economy", "business", "first"]
    assert valid_values("order W1 is not pending") == []
    records = Records(canonicalize(schema_corpus.state(0)))
    hints = refusal_hints([{"text": text, "args": {"mode": "5g"}}], records)
    assert hints.suggest == {"mode": ["2g_only", "3g_only", "4g_5g_preferred"]}
    named = refusal_hints(
        [
            {
                "text": "permission audio is unknown: must be one of camera, location.",
                "args": {"app_name": "maps", "permission": "audio"},
            }
        ],
        records,
    )
    assert named.suggest == {"permission": ["camera", "location"]}


def test_strings_drawn_for_a_pattern_match_it():
    rng = random.Random(0)
    for pattern in (r"^[a-z]+(\.[a-z]+)*$", r"^[A-Z]{2}-\d{3,4}$", r"^(4G|5G|LTE)$", r"^\+?1?\d{10}$"):
        drawn = [pattern_string(pattern, rng) for _ in range(20)]
        assert all(d is not None and jsonschema.Draft202012Validator({"pattern": pattern}).is_valid(d) for d in drawn)
    assert pattern_string(r"^(?=a)\w+$", rng) is None  # a look-ahead is not drawn


def test_a_schema_without_references_is_used_as_given():
    tool = {"name": "t", "parameters": {"properties": {"x": {"type": "string"}}, "required": ["x"]}}
    policy = ExplorationPolicy([{"type": "function", "function": tool}], PolicySettings(seed=1, relational=False))
    assert policy.tools[0] is tool  # nothing to resolve: the schema as given


def test_a_recursive_model_is_drawn_to_a_depth_and_stays_valid():
    node = {
        "type": "object",
        "properties": {
            "v": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
            "child": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
        },
        "required": ["v", "child"],
    }
    params = {"type": "object", "properties": {"node": {"$ref": "#/$defs/Node"}}, "required": ["node"]}
    params["$defs"] = {"Node": node}
    tool = {"type": "function", "function": {"name": "t", "parameters": params}}
    policy = ExplorationPolicy([tool], PolicySettings(seed=1, mutate_rate=0.0, episode_length=30))
    validator = jsonschema.Draft202012Validator(params)
    for i in range(30):
        args = policy.next_action({}, i).arguments
        assert validator.is_valid(args), args
