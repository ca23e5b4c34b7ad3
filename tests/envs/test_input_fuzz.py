"""Hostile agent input against a real bwrap RepoEnv: ``step`` never raises on it.

Whatever the agent sends (random Unicode with lone surrogates and NUL bytes, huge or
non-ASCII numbers, deep nesting, huge payloads, wrong types, in any tool's arguments), the
answer is an observation: no exception, no ``infra_error``, and the env keeps working (a
normal command still runs afterwards). One env is reused for every example (reset per
test).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repogym.envs import RepoEnv
from repogym.envs.actions import MAX_ACTION_CHARS, TOOLS
from repogym.sandbox import Limits

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
ANY_CHAR = st.characters(codec=None, exclude_categories=())  # surrogates and NUL included
ALIVE = json.dumps({"tool": "bash", "args": {"command": "echo still-alive"}})


@pytest.fixture(scope="module")
def shared_env(retry_task):
    env = RepoEnv(retry_task, max_steps=100_000, limits=Limits(timeout_s=5, cpu_s=5))
    yield env
    env.close()


@pytest.fixture
def env(shared_env):
    """The shared env, reset (a few ms) so that one test's failure cannot end the next's."""
    shared_env.reset(seed=0)
    return shared_env


def json_string(text: str, ascii_only: bool) -> str:
    """``text`` as a JSON string; lone surrogates survive (escaped, or raw in the action)."""
    return json.dumps(text, ensure_ascii=ascii_only)


# Raw JSON fragments for argument values (built as text: json.dumps refuses 5000-digit ints).
def values() -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(json_string, st.text(ANY_CHAR, max_size=80), st.booleans()),
        st.builds(
            json_string,
            st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=8),
            st.booleans(),
        ),
        st.integers(1, 6000).map(lambda n: "9" * n),
        st.integers(1, 6000).map(lambda n: '"' + "7" * n + '"'),
        st.integers(-(10**30), 10**30).map(str),
        st.sampled_from(["true", "null", "1.5", "-0", "1e999", "NaN", "[]", "{}", '"  "']),
        st.integers(1, 3000).map(lambda d: "[" * d + "1" + "]" * d),
        st.integers(1, 3000).map(lambda d: '{"a": ' * d + "1" + "}" * d),
        st.integers(100_000, 300_000).map(lambda n: '"' + "x" * n + '"'),
    )


@st.composite
def tool_calls(draw: st.DrawFn) -> str:
    """A call of a real tool (submit aside) with hostile argument names and values."""
    tool = TOOLS[draw(st.sampled_from(["bash", "read", "write", "edit"]))]
    names = [a.name for a in tool.args] + draw(st.lists(st.text(ANY_CHAR, max_size=5), max_size=2))
    chosen = draw(st.lists(st.sampled_from(names), max_size=4, unique=True))
    body = ", ".join(f"{json_string(k, True)}: {draw(values())}" for k in chosen)
    args = "{" + body + "}"
    form = draw(st.sampled_from(["tool", "openai", "openai-string", "cut"]))
    if form == "tool":
        return f'{{"tool": "{tool.name}", "args": {args}}}'
    if form == "openai":
        return f'{{"name": "{tool.name}", "arguments": {args}}}'
    if form == "openai-string":
        return json.dumps({"name": tool.name, "arguments": args})
    text = f'{{"tool": "{tool.name}", "args": {args}}}'
    return text[: draw(st.integers(0, len(text)))]


def raw_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(ANY_CHAR, max_size=300),
        st.builds(
            lambda a, b: f"{a}\n```bash\n{b}\n```",
            st.text(ANY_CHAR, max_size=40),
            st.text(ANY_CHAR, max_size=120),
        ),
        st.builds(
            lambda n, c: c * n,
            st.integers(1, MAX_ACTION_CHARS + 10),
            st.sampled_from(["{", "[", '{"', "```\n", "\x00", "\ud800"]),
        ),
    )


def check_step(env: RepoEnv, action: str) -> None:
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and obs.encode("utf-8")  # no lone surrogate reaches the agent
    assert info["infra_error"] == "", info
    assert reward == 0.0 and not terminated and not truncated
    if info.get("action_error"):
        assert obs.startswith("Invalid action: ") and '{"tool": "bash"' in obs
    obs, *_, info = env.step(ALIVE)
    assert "still-alive" in obs and info["exit_code"] == 0


@FUZZ
@given(action=tool_calls())
def test_hostile_tool_arguments_are_observations(env, action):
    check_step(env, action)


@FUZZ
@given(action=raw_text())
def test_hostile_action_text_is_an_observation(env, action):
    check_step(env, action)


@pytest.mark.parametrize(
    "action",
    [
        '{"tool": "bash", "args": {"command": "printf \'a\\u0000b\'"}}',
        '{"tool": "bash", "args": {"command": "echo \\ud800"}}',
        '{"tool": "read", "args": {"path": "retry.py", "start": ' + "9" * 5000 + "}}",
        '{"tool": "read", "args": {"path": "retry.py", "start": "\u0661\u0662"}}',
        '{"tool": "read", "args": {"path": "retry.py", "start": 9, "end": 2}}',
        '{"tool": "write", "args": {"path": "a\\u0000b", "content": "x"}}',
        '{"tool": "write", "args": {"path": "' + "d/" * 3000 + 'f", "content": "x"}}',
        '{"tool": "bash", "args": {"command": "' + "x" * 200_000 + '"}}',
        '{"tool": "edit", "args": {"path": "retry.py", "old": "", "new": "x"}}',
        '{"tool": "edit", "args": {"path": "retry.py", "old": "\\ud800", "new": "x"}}',
    ],
)
def test_attack_inputs_from_the_report(env, action):
    """The inputs that made ``step`` raise (and so count as infra_error) before."""
    check_step(env, action)


def test_errors_are_clipped_like_any_observation(env):
    size = env.limits.output_bytes * 2  # the sandbox's failed read carries the partial output
    env.step(
        json.dumps(
            {
                "tool": "bash",
                "args": {"command": f"head -c {size} /dev/zero | tr '\\0' a > big.txt"},
            }
        )
    )
    obs, *_, info = env.step(json.dumps({"tool": "read", "args": {"path": "big.txt"}}))
    assert obs.startswith("Error: big.txt") and info["exit_code"] == 1
    assert len(obs) <= env.max_obs_chars + 100 and env.observation_space.contains(obs)


def test_files_with_nul_and_non_utf8_bytes_round_trip(env):
    env.step(json.dumps({"tool": "write", "args": {"path": "bin.dat", "content": "a\x00b\n"}}))
    obs, *_ = env.step(json.dumps({"tool": "read", "args": {"path": "bin.dat"}}))
    assert "a\x00b" in obs
    env.step(json.dumps({"tool": "bash", "args": {"command": "printf '\\xff\\xfe\\n' > raw"}}))
    obs, *_, info = env.step(json.dumps({"tool": "read", "args": {"path": "raw"}}))
    assert info["exit_code"] == 0 and "\ufffd" in obs and obs.encode("utf-8")


def obs_of(env: RepoEnv, tool: str, **args: object) -> tuple[str, dict]:
    obs, *_, info = env.step(json.dumps({"tool": tool, "args": args}))
    assert info["infra_error"] == ""
    return obs, info


def test_file_tool_mistakes_get_specific_messages(env):
    obs, info = obs_of(env, "read", path="retry.py", start=9, end=2)
    assert "start=9 after end=2" in obs and info["exit_code"] == 1
    obs, _ = obs_of(env, "read", path="retry.py", start=100_000)
    assert "is past the end" in obs and "lines" in obs
    obs_of(env, "bash", command=": > empty.txt")
    assert "empty.txt is empty (0 lines)" in obs_of(env, "read", path="empty.txt")[0]
    assert "is a folder, not a file" in obs_of(env, "read", path="tests")[0]
    obs, info = obs_of(env, "edit", path="retry.py", old="", new="x")
    assert "got an empty `old`" in obs and "write(path, content)" in obs and info["exit_code"] == 1
    assert "did not find `old`" in obs_of(env, "edit", path="retry.py", old="@@", new="x")[0]
    obs, *_, info = env.step(
        json.dumps({"tool": "bash", "args": {"command": "echo one"}})
        + json.dumps({"tool": "bash", "args": {"command": "echo two"}})
    )
    assert "one" in obs and "two" not in obs and "the others (bash) were ignored" in obs
