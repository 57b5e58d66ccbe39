import pytest

from pipeline.envs.callparse import CallParseError, parse_call


def test_keyword_and_positional_literals():
    call = parse_call("mv(source='a.txt', destination=\"b\")")
    assert (call.name, call.args, call.kwargs) == ("mv", [], {"source": "a.txt", "destination": "b"})
    call = parse_call("sort('final_report.pdf')")
    assert call.args == ["final_report.pdf"]
    call = parse_call("f(x=[1, 2.5, {'k': (1, 2)}], y=None, z=-3, w=True)")
    assert call.kwargs == {"x": [1, 2.5, {"k": (1, 2)}], "y": None, "z": -3, "w": True}


@pytest.mark.parametrize(
    "text, message",
    [
        ("mv(source='a'", "syntax error"),
        ("x = 1", "syntax error"),
        ("a + b", "not a function call"),
        ("os.system('rm -rf /')", "plain tool name"),
        ("f(x=__import__('os'))", "not a literal"),
        ("f(x=open('/etc/passwd').read())", "not a literal"),
        ("f(*args)", "star-arguments"),
        ("f(**kw)", "**kwargs"),
        ("f(x=1, x=2)", "given twice"),
        ("f(g(1))", "not a literal"),
    ],
)
def test_rejects_everything_but_literal_calls(text, message):
    with pytest.raises(CallParseError, match=message.replace("*", r"\*")):
        parse_call(text)
