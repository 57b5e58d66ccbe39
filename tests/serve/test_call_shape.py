"""The call-shape grammar of the GRPO step (:mod:`pipeline.serve.grpo`): what a reply must continue with after
each prefix, for a tool with a string and a number argument and a tool with none (pure Python, no model)."""

from pipeline.serve.grpo import MAX_NUMBER_CHARS, MAX_STRING_CHARS, CallShape, call_skeletons, value_types

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
    assert shape.rests(CALL + '"account_id": "AC1001", "amount": 10') == ["\1}}</tool_call>"]  # digits go on
    assert shape.rests(CALL + '"account_id": "AC1001", "amount": 10}') == ["}</tool_call>"]
    assert shape.rests(CALL + '"account_id": "AC1001", "amount": 10}}</tool_call>') is None  # done: free
    assert shape.rests(CALL + '"account_id": "AC1001", "amount": 10 xx') is None  # left the skeleton: free


def test_a_string_and_a_number_are_closed_once_they_reach_their_length():
    """A value is the model's own up to a length (a schema's ``maxLength``), then the call's next literal is forced:
    a small model otherwise writes on inside a value until its token limit and the call never closes."""
    assert value_types(TOOLS) == [["string", "number"], []]
    shape = CallShape(None, TOOLS, {"\0unquoted": []})
    long_id = "A" * MAX_STRING_CHARS
    assert shape.rests(CALL + '"account_id": "' + long_id[:-1]) == ['\0", "amount": ']
    assert shape.rests(CALL + '"account_id": "' + long_id) == ['", "amount": ']  # the closing quote, forced
    digits = "9" * MAX_NUMBER_CHARS
    assert shape.rests(CALL + '"account_id": "AC1", "amount": ' + digits) == ["}}</tool_call>"]
