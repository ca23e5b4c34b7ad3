"""The tool schema and the action parser (pure: no sandbox).

The schema is the one definition the parser's validation, the prompt's help and the OpenAI
tool list come from; the parser must turn any string into a ToolCall or an ActionError whose
message says what was wrong.
"""

from __future__ import annotations

import inspect
import json
import typing

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repogym.envs.actions import (
    MAX_ACTION_CHARS,
    MAX_COMMAND_BYTES,
    TOOL_HELP,
    TOOLS,
    ActionError,
    ToolCall,
    error_observation,
    ignored_note,
    openai_tools,
    parse_action,
    validate,
)

ANY_CHAR = st.characters(codec=None, exclude_categories=())  # surrogates and NUL included


def call(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


def error_of(text: str) -> str:
    with pytest.raises(ActionError) as e:
        parse_action(text)
    return str(e.value)


# -- one schema, three views -----------------------------------------------------------
def test_openai_tools_are_valid_json_schema_derived_from_tools():
    tools = openai_tools()
    assert [t["function"]["name"] for t in tools] == list(TOOLS)
    for entry, tool in zip(tools, TOOLS.values(), strict=True):
        params = entry["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert entry["function"]["description"] == tool.description
        assert list(params["properties"]) == [a.name for a in tool.args]
        assert params["required"] == [a.name for a in tool.args if a.required]
        jsonschema.validate(tool.example, params)  # the example in error messages is valid
        assert validate(ToolCall(tool.name, dict(tool.example))).args == tool.example


def test_tool_help_lists_every_signature_and_description():
    for tool in TOOLS.values():
        line = next(x for x in TOOL_HELP.splitlines() if x.strip().startswith(tool.signature))
        assert tool.description.rstrip(".")[1:] in line
    assert TOOLS["read"].signature == "read(path, start?, end?)"
    assert "only the first" in TOOL_HELP


def test_openai_agent_offers_the_schema():
    from repogym.harness.baselines.openai_compat import OpenAIAgent

    agent = OpenAIAgent(base_url="http://127.0.0.1:9/v1", model="m")
    agent.reset({})
    assert json.loads(agent._body())["tools"] == openai_tools()


def test_server_schema_and_trl_tool_methods_follow_the_schema():
    from repogym.integrations.trl import RepoGymToolEnv
    from repogym.server.schema import tool_specs

    assert [(s["name"], s["parameters"]) for s in tool_specs()] == [
        (t.name, t.parameters()) for t in TOOLS.values()
    ]
    for tool in TOOLS.values():
        method = getattr(RepoGymToolEnv, tool.name)
        params = list(inspect.signature(method).parameters.values())[1:]
        hints = typing.get_type_hints(method)
        assert [p.name for p in params] == [a.name for a in tool.args], tool.name
        for p, a in zip(params, tool.args, strict=True):
            assert (p.default is inspect.Parameter.empty) == a.required, (tool.name, a.name)
            assert hints[p.name] == (a.type if a.required else a.type | None)


_ARG_VALUES = {
    str: st.text(
        st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=30
    ).filter(str.strip),
    int: st.integers(1, 10**9),
}


@st.composite
def valid_calls(draw: st.DrawFn) -> tuple[str, dict]:
    tool = draw(st.sampled_from(list(TOOLS.values())))
    args = {
        a.name: draw(_ARG_VALUES[a.type]) for a in tool.args if a.required or draw(st.booleans())
    }
    return tool.name, args


@given(valid_calls())
def test_parser_and_json_schema_agree_on_valid_calls(named):
    name, args = named
    jsonschema.validate(args, openai_tools()[list(TOOLS).index(name)]["function"]["parameters"])
    assert parse_action(call(name, **args)) == ToolCall(name, args)
    openai = json.dumps({"name": name, "arguments": json.dumps(args)})
    assert parse_action(openai) == ToolCall(name, args)
    wrapped = json.dumps({"type": "function", "function": {"name": name, "arguments": args}})
    assert parse_action(f"Sure.\n```json\n{wrapped}\n```") == ToolCall(name, args)


@given(
    st.text(st.sampled_from('aé\\"\n\t\u2028\U0001f600'), min_size=1, max_size=40).map(
        lambda unit: unit * (6000 // len(unit))
    ),
    st.integers(0, 200),
    st.booleans(),
)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
def test_long_calls_decode_whatever_falls_on_the_window_edge(content, pad, ascii_only):
    """Escapes, keywords and numbers cut by the first decoding window still parse."""
    args = {"path": "a.txt", "content": content}
    for action in (
        " " * pad + json.dumps({"tool": "write", "args": args}, ensure_ascii=ascii_only),
        " " * pad
        + '{"tool": "read", "args": {"path": "'
        + "x" * max(0, 4080 - pad)
        + '", "start": 1234567, "end": 12345678}}',
    ):  # the numbers straddle the edge
        parsed = parse_action(action)
        assert parsed.args == (args if parsed.name == "write" else parsed.args)
        assert parsed.name == "write" or parsed.args["end"] == 12345678


@given(st.text(ANY_CHAR, max_size=400))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_text_gives_a_call_or_an_action_error(text):
    try:
        parsed = parse_action(text)
    except ActionError as e:
        obs = error_observation(e)
        obs.encode("utf-8")  # the observation is valid text for any tokenizer or API
        assert obs.startswith("Invalid action: ")
    else:
        assert parsed.name in TOOLS
        validate(parsed)


# -- the messages the issue lists ----------------------------------------------------------
@pytest.mark.parametrize("cut", [10, 30, 45, 60, 70])
def test_truncated_json_says_incomplete(cut):
    full = call("write", path="a.py", content="x = 1\n" * 5)
    assert "incomplete" in error_of(full[:cut]) and "max tokens" in error_of(full[:cut])


def test_missing_closing_brace_is_not_reported_as_a_missing_tool_key():
    msg = error_of('{"tool": "write", "args": {"path": "a", "content": "x"} and then')
    assert "not valid JSON" in msg and 'no "tool"' not in msg


def test_unclosed_bash_fence_says_it_was_cut():
    assert "not closed" in error_of("Let me look:\n```bash\nls -la")


def test_several_calls_run_the_first_and_name_the_others():
    parsed = parse_action(
        call("bash", command="ls") + "\n" + call("submit") + "\n```bash\npwd\n```"
    )
    assert parsed == ToolCall("bash", {"command": "ls"})
    assert parsed.ignored == ("submit", "bash")
    note = ignored_note(parsed)
    assert "3 tool calls" in note and "only the first (bash) ran" in note
    assert ignored_note(parse_action(call("submit"))) == ""
    fenced = parse_action("```bash\nls\n```\nthen\n```sh\npwd\n```")
    assert fenced.args == {"command": "ls"} and fenced.ignored == ("bash",)


def test_fences_inside_a_json_call_are_its_content():
    readme = "# Use\n```bash\npip install x\n```\n"
    raw = '{"tool": "write", "args": {"path": "README.md", "content": "' + readme + '"}}'
    for written in (call("write", path="README.md", content=readme), raw):  # raw line breaks
        parsed = parse_action(f"Writing it.\n{written}\n```bash\ncat README.md\n```")
        assert parsed.args["content"] == readme and parsed.ignored == ("bash",)


def test_first_call_malformed_runs_nothing():
    msg = error_of(call("bash") + call("submit"))
    assert "missing argument" in msg and "1 more tool call(s); none ran" in msg


def test_fence_pairing_and_json_in_a_plain_fence():
    # the closing fence of a python block must not open a bash block
    assert parse_action("```python\nx = 1\n```\nnote\n```bash\nls\n```").args == {"command": "ls"}
    assert parse_action('```\n{"tool": "submit"}\n```').name == "submit"
    # JSON inside a bash block is shell code, not a call
    shell = parse_action('```bash\necho \'{"tool": "submit"}\'\n```')
    assert shell.name == "bash" and not shell.ignored


def test_prose_json_before_a_fence_does_not_block_it():
    assert parse_action('The config is {"retries": 0}.\n```bash\nls\n```').name == "bash"
    assert 'no "tool"' in error_of('{"args": {"command": "ls"}}')


@pytest.mark.parametrize(
    "start, expect",
    [
        ('"²"', "digits 0-9"),
        ('"١٢"', "digits 0-9"),
        ("9" * 5000, "5000-digit number"),
        ('"' + "9" * 5000 + '"', "5000-digit number"),
        ("0", "at least 1"),
        ("-3", "at least 1"),
        ("1.5", "must be int"),
        ("true", "must be int"),
        ("[1]", "must be int"),
        ("1e999", "int"),
        ('"--5"', "digits 0-9"),
        ('"-"', "digits 0-9"),
        ('"+5"', "digits 0-9"),
    ],
)
def test_read_line_numbers(start, expect):
    assert expect in error_of('{"tool": "read", "args": {"path": "a", "start": ' + start + "}}")


def test_line_numbers_as_ascii_digit_strings_are_accepted():
    assert parse_action(call("read", path="a", start=" 12 ", end="40")).args == {
        "path": "a",
        "start": 12,
        "end": 40,
    }


@pytest.mark.parametrize(
    "args, expect",
    [
        ({"command": "a\x00b"}, "NUL byte at character 1"),
        ({"command": "echo \ud800"}, "lone surrogate (U+D800) at character 5"),
        ({"command": "x" * (MAX_COMMAND_BYTES + 1)}, "write the script to a file"),
        ({"command": ["ls"]}, "must be str, got list"),
        ({"command": None}, "must be str, got NoneType"),
    ],
)
def test_bash_arguments_the_sandbox_cannot_take(args, expect):
    assert expect in error_of(json.dumps({"tool": "bash", "args": args}))


def test_file_content_may_hold_nul_but_not_surrogates():
    assert parse_action(call("write", path="b.bin", content="a\x00b")).args["content"] == "a\x00b"
    assert "lone surrogate" in error_of(call("write", path="b", content="\udcff"))
    assert "cannot contain NUL" in error_of(call("write", path="a\x00", content=""))
    assert "is empty" in error_of(call("read", path="  "))


def test_deep_nesting_and_huge_payloads():
    deep = '{"tool": "bash", "args": {"command": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    assert "nested too deeply" in error_of(deep[:MAX_ACTION_CHARS])
    assert "the limit is" in error_of(call("write", path="a", content="x" * MAX_ACTION_CHARS))
    assert "nested too deeply" in error_of('{"tool": "bash", "args": ' + '{"a": ' * 40_000)


def test_arguments_string_errors():
    assert "incomplete JSON" in error_of('{"name": "bash", "arguments": "{\\"command\\": \\"l"}')
    assert "not valid JSON" in error_of('{"name": "bash", "arguments": "{not json}"}')
    assert "after its JSON" in error_of('{"name": "bash", "arguments": "{} {}"}')
    assert parse_action('{"name": "submit", "arguments": ""}').name == "submit"


def test_raw_line_breaks_inside_json_strings_are_read_as_meant():
    assert (
        parse_action('{"tool": "write", "args": {"path": "a", "content": "x\ny\n"}}').args[
            "content"
        ]
        == "x\ny\n"
    )


def test_unknown_tools_and_arguments_are_shown_safely():
    msg = error_of(json.dumps({"tool": "\x00" * 500, "args": {}}))
    assert "unknown tool" in msg and len(msg) < 400 and "\x00" not in msg
    assert "it is read(path, start?, end?)" in error_of(call("read", path="a", colour=1))
    assert "name must be a string, got dict" in error_of('{"tool": {"nested": 1}, "args": {}}')
    assert "name must be a string, got NoneType" in error_of('{"name": null, "args": {}}')
    assert "(did you mean 'bash'?)" in error_of(call("Bash", command="ls"))
    assert "(did you mean 'path'?)" in error_of(call("read", paht="a"))
    assert "json.dumps() of it" in str(
        pytest.raises(ActionError, parse_action, {"tool": "x"}).value
    )


@pytest.mark.parametrize(
    "text",
    [
        "{" * MAX_ACTION_CHARS,
        '{"' * (MAX_ACTION_CHARS // 2),
        '{"a":' * (MAX_ACTION_CHARS // 5),
        ('{"x":[' + "1," * 200) * 300 + "zz",
        "```\nx{\n```\n" * 20_000,
        '{"tool":"submit"}' * 15_000,
        '{"tool": bash}' * 18_000,
    ],
)
@pytest.mark.timeout(30)
def test_pathological_replies_are_parsed_quickly(text):
    """A hang guard: quadratic scanning took 15-90 s on these; bounded scanning < 0.5 s."""
    try:
        parse_action(text[:MAX_ACTION_CHARS])
    except ActionError:
        pass
