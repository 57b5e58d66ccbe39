"""The call-shape grammar of the GRPO step (:mod:`pipeline.serve.grpo`): what a reply must continue with after
each prefix, for a tool with a string and a number argument and a tool with none (pure Python, no model)."""

from pipeline.serve.grpo import CallShape, call_skeletons

TOOLS = [
    {
        "function": {
            "name": "deposit",
            "parameters": {
                "properties": {"account_id": {"type": "string"}, "amount": {"type": "number"}},
                "required": ["account_id", "amount"],
            },
        }
    },
    {"function": {"name": "list_accounts", "parameters": {"properties": {}, "required": []}}},
]
CALL = 'deposit", "arguments": {'


def test_the_skeleton_holds_the_name_the_required_keys_and_the_end():
    assert call_skeletons(TOOLS) == [
        [CALL + '"account_id": "', '", "amount": ', "}}</tool_call>"],
        ['list_accounts", "arguments": {}}</tool_call>'],
    ]


def test_names_keys_and_the_end_are_forced_and_values_are_free():
    shape = CallShape(None, TOOLS, {"\0unquoted": []})
    assert shape.rests("dep") == ['osit", "arguments": {"account_id": "']
    assert shape.rests("") == [CALL + '"account_id": "', 'list_accounts", "arguments": {}}</tool_call>']
    assert shape.rests(CALL + '"account_id": "AC10') == ['\0", "amount": ']  # in a string: no quote but the literal's
    assert shape.rests(CALL + '"account_id": "AC1001"') == [', "amount": ']
    assert shape.rests(CALL + '"account_id": "AC1001", "amount": 10') is None  # a number may go on
    assert shape.rests(CALL + '"account_id": "AC1001", "amount": 10}') == ["}</tool_call>"]
    assert shape.rests(CALL + '"account_id": "AC1001", "amount": 10}}</tool_call>') is None  # done: free
    assert shape.rests(CALL + '"account_id": "AC1001", "amount": 10 xx') is None  # left the skeleton: free
