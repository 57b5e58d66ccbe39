"""Typed exploration: every generated argument validates against its JSON schema (unions, enums, nested
objects, arrays), mutations keep the type and are recorded."""

import jsonschema

from pipeline.execution.policy import ExplorationPolicy, PolicySettings

PARAMS = {
    "type": "object",
    "properties": {
        "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 50},
        "tags": {"type": ["array", "null"], "items": {"type": "string"}},
        "filters": {
            "type": ["object", "null"],
            "properties": {
                "min_price": {"type": "number"},
                "status": {"type": "string", "enum": ["open", "closed"]},
                "window": {
                    "type": "object",
                    "properties": {"from": {"type": "string", "format": "date"}, "days": {"type": "integer"}},
                    "required": ["from", "days"],
                },
            },
            "required": ["min_price", "status", "window"],
        },
        "mode": {"type": "string", "enum": ["fast", "safe"]},
        "amount": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "ref": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
        "user_ids": {"type": "array", "items": {"type": "integer"}},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
            },
        },
        "flag": {"type": "boolean"},
        "note": {"type": "string"},
    },
    "required": ["limit", "tags", "filters", "mode", "amount", "ref", "user_ids", "lines", "flag"],
}
TOOL = {"type": "function", "function": {"name": "search", "parameters": PARAMS}}
STATE = {
    "users": {"U1": {"name": "Ann", "age": 31}, "U2": {"name": "Bo", "age": 40}},
    "skus": {"SKU-1": {"stock": 3}},
    "user_ids": ["U1", "U2"],
}


def test_arguments_validate_against_the_schema_including_unions():
    policy = ExplorationPolicy([TOOL], PolicySettings(seed=11, mutate_rate=0.0, episode_length=400))
    seen_types = {name: set() for name in PARAMS["properties"]}
    validator = jsonschema.validators.validator_for(PARAMS)(PARAMS)  # what jsonschema.validate builds per call
    for i in range(400):
        action = policy.next_action(STATE, i)
        validator.validate(action.arguments)
        assert action.mutated_arg is None
        for name, value in action.arguments.items():
            seen_types[name].add(type(value).__name__)
    assert seen_types["limit"] == {"int"}  # required: never null, never a string
    assert seen_types["tags"] == {"list"} and seen_types["filters"] == {"dict"}
    assert seen_types["ref"] == {"int", "str"}  # both variants of the union are explored
    assert seen_types["user_ids"] == {"list"}


def test_optional_nullable_arguments_are_sometimes_null():
    params = {"type": "object", "properties": {"limit": {"type": ["integer", "null"]}}, "required": []}
    policy = ExplorationPolicy(
        [{"function": {"name": "f", "parameters": params}}],
        PolicySettings(seed=2, mutate_rate=0.0, optional_rate=1.0, episode_length=300),
    )
    values = [policy.next_action({}, i).arguments["limit"] for i in range(300)]
    assert None in values and any(isinstance(v, int) for v in values)
    assert all(v is None or isinstance(v, int) for v in values)


def test_mutations_keep_the_type_and_are_recorded():
    policy = ExplorationPolicy([TOOL], PolicySettings(seed=5, mutate_rate=1.0, episode_length=300))
    mutated = set()
    # a mutated value is still of a type the schema allows (bounds and enums may be broken on purpose)
    loose = {
        k: _strip({kk: vv for kk, vv in v.items() if kk not in ("minimum", "maximum", "enum", "format")})
        for k, v in PARAMS["properties"].items()
    }
    validators = {k: jsonschema.validators.validator_for(v)(v) for k, v in loose.items()}
    for i in range(300):
        action = policy.next_action(STATE, i)
        assert action.mutated_arg in action.arguments
        mutated.add(action.mutated_arg)
        name = action.mutated_arg
        validators[name].validate(action.arguments[name])
    assert len(mutated) >= 6


def _strip(schema):
    if isinstance(schema, dict):
        return {k: _strip(v) for k, v in schema.items() if k not in ("minimum", "maximum", "enum", "format")}
    if isinstance(schema, list):
        return [_strip(v) for v in schema]
    return schema


def test_same_seed_same_actions():
    a = ExplorationPolicy([TOOL], PolicySettings(seed=9))
    b = ExplorationPolicy([TOOL], PolicySettings(seed=9))
    assert [a.next_action(STATE, i) for i in range(10)] == [b.next_action(STATE, i) for i in range(10)]
