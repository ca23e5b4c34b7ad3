"""``repogym serve`` driven by openenv-core's own client, by RemoteEnv and by raw HTTP/WS."""

from __future__ import annotations

import json
import signal
import threading

import gymnasium as gym
import pytest
from openenv.core import GenericEnvClient
from websockets.sync.client import connect

import repogym
from repogym.envs.remote import ErrorCode, RemoteEnv, RemoteEnvError
from tests.conftest import apply_patch_actions, call
from tests.server.conftest import Server, alive, descendants, http, leftovers

TASK = "retry-zero"


def oracle_actions(task: repogym.Task) -> list[str]:
    return [*apply_patch_actions(task.solution_patch.read_text()), call("submit")]


def test_openenv_client_plays_oracle_to_1_and_noop_to_0(server, retry_task):
    with GenericEnvClient(base_url=server.url).sync() as env:
        first = env.reset(task=TASK, seed=0)
        assert not first.done and first.reward is None
        assert first.observation["text"].startswith(f"# Task: {TASK}")
        for action in oracle_actions(retry_task):
            result = env.step({"text": action})
        assert result.done and result.reward == 1.0
        assert result.observation["info"]["resolved"] is True
        state = env.state()
        assert state["step_count"] == 3 and state["task"] == retry_task.info()

        env.reset(task=TASK, seed=1)  # same connection, a new episode
        result = env.step({"tool": "submit", "args": {}})
        assert result.done and result.reward == 0.0
        assert set(result.observation["info"]["tests"].values()) >= {"failed"}


def test_remote_env_matches_the_local_env(server, retry_task):
    actions = [
        call("bash", command="ls; cat retry.py | head -3"),
        "not a tool call",
        call("read", path="retry.py", start=1, end=2),
        call("submit"),
    ]
    local = gym.make(retry_task.env_id)
    remote = gym.make(retry_task.env_id, remote=server.url)
    try:
        assert isinstance(remote.unwrapped, RemoteEnv)
        (lo, linfo), (ro, rinfo) = local.reset(seed=3), remote.reset(seed=3)
        assert lo == ro and linfo == rinfo
        for action in actions:
            lres, rres = local.step(action), remote.step(action)
            assert lres[:4] == rres[:4]
            assert lres[4].keys() == rres[4].keys()
        assert rres[4]["tests"] == lres[4]["tests"] and rres[4]["diff"] == lres[4]["diff"]
        with pytest.raises(gym.error.ResetNeeded):
            remote.step(call("submit"))
    finally:
        local.close()
        remote.close()


def test_max_steps_reaches_the_server_and_is_graded_there(server):
    env = gym.make(f"repogym/{TASK}-v0", remote=server.url, max_steps=2)
    try:
        env.reset(seed=0)
        assert env.step(call("bash", command="true"))[2:4] == (False, False)
        _, reward, terminated, truncated, info = env.step(call("bash", command="true"))
        assert (terminated, truncated, info["truncated_reason"], reward) == (
            False,
            True,
            "max_steps",
            0.0,
        )
        assert info["tests"], "the truncated episode was graded on the server"
    finally:
        env.close()


def test_make_vec_async_over_remote(server):
    vec = gym.make_vec(
        f"repogym/{TASK}-v0",
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={"context": "spawn"},
        remote=server.url,
    )
    try:
        obs, _ = vec.reset(seed=0)
        assert all(o.startswith(f"# Task: {TASK}") for o in obs)
        obs, *_ = vec.step([call("bash", command="echo été")] * 2)
        assert all("été" in o for o in obs)
        _, rewards, terminated, _, infos = vec.step([call("submit")] * 2)
        assert list(terminated) == [True, True] and list(rewards) == [0.0, 0.0]
        assert "tests" in infos
    finally:
        vec.close()
    server.wait_sessions(0)


def test_malformed_requests_get_4xx_with_a_fix(server):
    url = server.url
    assert http(url + "/reset", "POST", b"{not json")[0] == 400
    status, body, _ = http(url + "/reset", "POST", {"colour": "red"})
    assert status == 422 and "colour" in body["detail"] and body["code"] == "VALIDATION_ERROR"
    status, body, _ = http(url + "/reset", "POST", {"task": "no-such-task"})
    assert status == 422 and "GET /tasks" in body["detail"]
    status, body, _ = http(url + "/state", headers={"X-Session-Id": "nope"})
    assert status == 404 and "POST /reset" in body["detail"] and body["code"] == "SESSION_ERROR"

    status, body, headers = http(
        url + "/reset", "POST", {"task": TASK, "seed": 0}, {"X-Session-Id": "new"}
    )
    sid = {"X-Session-Id": headers["x-session-id"]}
    assert status == 200 and body["session_id"] == sid["X-Session-Id"]
    status, body, _ = http(url + "/step", "POST", {"action": {"text": "```python\nx\n```"}}, sid)
    assert status == 200 and "Invalid action" in body["observation"]["text"]  # agent's fault
    status, body, _ = http(url + "/step", "POST", {"action": {"txt": "ls"}}, sid)
    assert status == 422 and "txt" in body["detail"]
    status, body, _ = http(url + "/step", "POST", {"action": {"tool": "submit"}}, sid)
    assert status == 200 and body["done"] and body["reward"] == 0.0
    status, body, _ = http(url + "/step", "POST", {"action": {"tool": "submit"}}, sid)
    assert status == 409 and "reset" in body["detail"]
    assert http(url + "/close", "POST", headers=sid)[0] == 200
    server.wait_sessions(0)

    with connect(server.url.replace("http", "ws") + "/ws") as ws:
        for raw, code in (
            ("{oops", "INVALID_JSON"),
            ('{"type": "dance"}', "UNKNOWN_TYPE"),
            ('{"type": "step", "data": {"text": "ls"}}', "SESSION_ERROR"),
            ('{"type": "reset", "data": {"seed": -1}}', "VALIDATION_ERROR"),
        ):
            ws.send(raw)
            reply = json.loads(ws.recv(timeout=30))
            assert reply["type"] == "error" and reply["data"]["code"] == code, reply
        ws.send(json.dumps({"type": "reset", "data": {"task": TASK}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"  # still usable


def test_each_protocol_answers_in_its_own_terms(server):
    url = server.url
    # HTTP: a body of the wrong shape is shown the HTTP body, not the WebSocket message.
    status, body, _ = http(url + "/step", "POST", [1, 2])
    assert status == 422 and body["code"] == "VALIDATION_ERROR"
    assert body["detail"] == (
        "a JSON list, not an object. Fix: send e.g. POST /step "
        '{"action": {"tool": "bash", "args": {"command": "ls"}}}'
    )
    status, body, _ = http(url + "/step", "POST", {"action": {"tool": "bash", "args": [1]}})
    assert status == 422 and body["detail"].startswith(
        'action: "tool" must be a string and "args" an object. Fix: POST /step {"action": '
    )
    status, body, _ = http(url + "/reset", "POST", b"[]")
    assert status == 422 and "Fix: send e.g. POST /reset {" in body["detail"]
    # A 5,000-digit integer: the limit, not Python's advice to raise it.
    huge = b'{"seed": ' + b"9" * 5000 + b"}"
    status, body, _ = http(url + "/reset", "POST", huge)
    assert status == 400 and body == {
        "detail": "a number with more than 4300 digits. Fix: send numbers of at most 4300 digits",
        "code": "INVALID_JSON",
    }
    # WebSocket: its own message shape.
    with connect(url.replace("http", "ws") + "/ws") as ws:
        ws.send("[1, 2]")
        reply = json.loads(ws.recv(timeout=30))
        assert reply["data"]["message"] == (
            'a JSON list, not an object. Fix: send e.g. {"type": "step", "data": {"tool": '
            '"bash", "args": {"command": "ls"}}}'
        )
    # MCP: a bad argument is told the tool's arguments, not the text-action JSON.
    status, body, headers = http(
        url + f"/mcp?task={TASK}&seed=0",
        "POST",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-03-26",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
    )
    sid = {"Mcp-Session-Id": headers.get("mcp-session-id") or headers["Mcp-Session-Id"]}
    status, body, _ = http(
        url + "/mcp",
        "POST",
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": 5}},
        },
        sid,
    )
    [content] = body["result"]["content"]
    assert body["result"]["isError"] and content["text"] == (
        "Invalid arguments for tool bash: bash() argument 'command' must be str, got int. "
        'Fix: call bash with arguments like {"command": "ls"} (its inputSchema is in '
        "tools/list)"
    )
    assert '"tool"' not in content["text"] and "```" not in content["text"]
    status, body, _ = http(url + "/mcp", "POST", huge.replace(b'{"seed": ', b'{"id": '), sid)
    assert body["error"]["code"] == -32700 and "set_int_max_str_digits" not in str(body)
    assert http(url + "/mcp", "DELETE", headers=sid)[0] == 200
    server.wait_sessions(0)


#: Frames that once raised inside the server (the client saw a bare close): each must get
#: an error with its code, and the session must go on.
HOSTILE_FRAMES = [
    ("[" * 200_000 + "]" * 200_000, "INVALID_JSON"),
    ('{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}", "INVALID_JSON"),
    (b"\x00\x01binary", "INVALID_JSON"),
    ('{"type": "step", "data": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}", "VALIDATION_ERROR"),
    ("[1, 2, 3]", "VALIDATION_ERROR"),
    ('{"type": "step", "data": {"tool": "bash", "args": [1]}}', "VALIDATION_ERROR"),
    ('{"type": "mcp", "data": 7}', None),
]


def test_hostile_frames_get_an_error_code_and_the_session_lives_on(server, retry_task):
    with connect(server.url.replace("http", "ws") + "/ws", max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task": TASK, "seed": 0}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        for raw, code in HOSTILE_FRAMES:
            ws.send(raw)
            reply = json.loads(ws.recv(timeout=30))
            if code is None:  # a JSON-RPC request that is not an object: a JSON-RPC error
                assert reply["type"] == "mcp" and reply["data"]["error"]["code"] == -32600
            else:
                assert reply["type"] == "error" and reply["data"]["code"] == code, reply
        for action in oracle_actions(retry_task):  # the same episode goes on to its reward
            ws.send(json.dumps({"type": "step", "data": {"text": action}}))
            reply = json.loads(ws.recv(timeout=120))
        assert reply["data"]["reward"] == 1.0
    deep = "[" * 200_000 + "]" * 200_000
    status, body, _ = http(server.url + "/reset", "POST", deep.encode())
    assert status == 400 and body["code"] == "INVALID_JSON"
    status, body, _ = http(server.url + "/mcp", "POST", deep.encode())
    assert status == 200 and body["error"]["code"] == -32700
    server.wait_sessions(0)
    assert http(server.url + "/health")[1]["status"] == "healthy"


def test_stateless_http_routes_as_openenv_defines_them(server):
    """Without X-Session-Id every request gets a fresh env, closed once it is answered."""
    status, body, headers = http(server.url + "/reset", "POST", {"task": TASK, "seed": 0})
    assert status == 200 and body["observation"]["text"].startswith(f"# Task: {TASK}")
    assert "session_id" not in body and "x-session-id" not in headers
    status, body, _ = http(
        server.url + "/step",
        "POST",
        {"action": {"tool": "bash", "args": {"command": "echo fresh"}}},
    )
    assert status == 200 and "fresh" in body["observation"]["text"] and not body["done"]
    status, body, _ = http(server.url + "/state")
    assert status == 200 and body["step_count"] == 0 and body["session_id"] is None
    server.wait_sessions(0)  # nothing kept


def test_openenv_validate_passes(server):
    import subprocess
    import sys
    from pathlib import Path

    cli = Path(sys.executable).with_name("openenv")
    run = subprocess.run(
        [str(cli), "validate", server.url], capture_output=True, text=True, timeout=120, check=False
    )
    report = json.loads(run.stdout)
    assert run.returncode == 0 and report["passed"], report["summary"]
    assert report["summary"]["failed_criteria"] == [] and report["summary"]["total_count"] == 6
    assert report["standard_profile"] == "openenv-http/1.x"


def test_mcp_sdk_client_lists_and_calls_the_tools(server, retry_task):
    """The official MCP SDK over streamable HTTP: initialize (the statement comes as the
    server's instructions), tools/list with the env's schemas, tools/call to a reward."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from repogym.server.schema import tool_specs

    async def play() -> tuple:
        async with (
            streamable_http_client(f"{server.url}/mcp?task={TASK}&seed=0") as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            init = await session.initialize()
            tools = (await session.list_tools()).tools
            ls = await session.call_tool("bash", {"command": "ls"})
            bad = await session.call_tool("read", {"nope": 1})
            patch = retry_task.solution_patch.read_text()
            await session.call_tool("write", {"path": "/tmp/fix.patch", "content": patch})
            await session.call_tool("bash", {"command": "git apply /tmp/fix.patch"})
            done = await session.call_tool("submit", {})
            after = await session.call_tool("bash", {"command": "ls"})
            return init, tools, ls, bad, done, after

    init, tools, ls, bad, done, after = asyncio.run(play())
    assert init.server_info.name == "repogym" and init.instructions.startswith(f"# Task: {TASK}")
    assert {t.name: t.input_schema for t in tools} == {
        t["name"]: t["parameters"] for t in tool_specs()
    }
    assert "retry.py" in ls.content[0].text and not ls.is_error
    assert bad.is_error  # a malformed call is the agent's: an error result, not a crash
    assert done.structured_content["reward"] == 1.0 and done.structured_content["done"]
    assert after.is_error and "episode has ended" in after.content[0].text
    server.wait_sessions(0)  # the client's DELETE closed the session


def test_openenv_mcp_tool_client_over_ws_and_http(server):
    import asyncio

    from openenv.core.mcp_client import MCPToolClient

    async def play() -> tuple:
        async with MCPToolClient(base_url=server.url) as env:
            await env.reset(task=TASK, seed=0)
            ws_tools = [t.name for t in await env.list_tools()]
            ws_out = await env.call_tool("bash", command="echo over-ws")
        env = MCPToolClient(base_url=server.url)
        env.use_production_mode = True  # HTTP /mcp with openenv/session/create
        async with env:
            http_tools = [t.name for t in await env.list_tools()]
            http_out = await env.call_tool("bash", command="echo over-http")
        return ws_tools, ws_out, http_tools, http_out

    ws_tools, ws_out, http_tools, http_out = asyncio.run(play())
    assert ws_tools == http_tools == ["bash", "read", "write", "edit", "submit"]
    assert "over-ws" in ws_out["content"][0]["text"]
    assert "over-http" in http_out["content"][0]["text"]
    with connect(server.url.replace("http", "ws") + "/ws") as ws:
        ws.send(
            json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}})
        )
        reply = json.loads(ws.recv(timeout=30))
        assert reply["type"] == "mcp" and reply["data"]["id"] == 3
        assert len(reply["data"]["result"]["tools"]) == 5
    server.wait_sessions(0)


def test_only_what_the_agent_may_see_goes_over_the_wire(server, retry_task):
    secrets = [p.read_text().strip() for p in retry_task.tests_dir.rglob("*.py")]
    secrets.append(retry_task.solution_patch.read_text().strip())
    env = RemoteEnv(server.url, task=TASK)
    try:
        obs, _ = env.reset(seed=0)
        wire = [
            obs,
            json.dumps(env.state()),
            json.dumps(http(server.url + "/tasks")[1]),
            json.dumps(http(server.url + "/schema")[1]),
        ]
        wire.append(json.dumps(env.step(call("submit"))))
    finally:
        env.close()
    for text in wire:
        for secret in secrets:
            assert secret not in text
    assert http(server.url + "/tasks")[1][0].keys() == retry_task.info().keys()


def test_cap_answers_503_and_disconnects_free_sandboxes(server):
    server.wait_sessions(0)  # sessions of earlier tests count until their sandboxes are gone
    envs = [RemoteEnv(server.url, task=TASK) for _ in range(8)]
    try:
        threads = [threading.Thread(target=e.reset, kwargs={"seed": i}) for i, e in enumerate(envs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.health()["sessions"] == 8
        with pytest.raises(RemoteEnvError, match="503") as err:
            RemoteEnv(server.url, task=TASK).reset()
        assert err.value.code == ErrorCode.CAPACITY_REACHED
        status, body, headers = http(server.url + "/reset", "POST", {})  # stateless: a slot too
        assert status == 503 and "--max-sessions" in body["detail"] and headers["retry-after"]
    finally:
        for e in envs[:4]:
            e.close()
        for e in envs[4:]:  # dropped without a close message
            e._ws.socket.close()
    server.wait_sessions(0)
    assert leftovers(server.pid) == []


def test_token_and_ttl():
    srv = Server("--token", "s3cret", "--ttl", "1", "--task", TASK)
    try:
        assert http(srv.url + "/health")[0] == 200
        status, body, _ = http(srv.url + "/tasks")
        assert status == 401 and "Bearer" in body["detail"]
        with pytest.raises(RemoteEnvError, match="401"):
            RemoteEnv(srv.url).reset()
        auth = {"Authorization": "Bearer s3cret"}
        assert http(srv.url + "/tasks", headers=auth)[0] == 200
        env = RemoteEnv(srv.url, token="s3cret")
        assert env.reset(seed=0)[1]["task"] == TASK
        srv.wait_sessions(1)
        srv.wait_sessions(0, timeout=10)  # idle past the TTL: closed, sandbox deleted
        assert srv.health()["expired"] == 1
        assert leftovers(srv.pid) == []
        with pytest.raises(RemoteEnvError, match="expired"):
            env.step(call("bash", command="true"))
        assert env.reset(seed=0)[1]["task"] == TASK  # reset opens a new session
        env.close()
    finally:
        srv.stop()
    assert leftovers(srv.pid) == []


def test_sigterm_with_open_sessions_leaves_nothing_behind():
    srv = Server("--task", TASK)
    envs = [RemoteEnv(srv.url) for _ in range(3)]
    try:
        for env in envs:
            env.reset(seed=0)
            env.step(call("bash", command="echo hi > note.txt"))
        assert len(leftovers(srv.pid)) >= 3
        children = descendants(srv.pid)
        assert srv.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal when done
        assert leftovers(srv.pid) == [] and alive(children) == set()
        with pytest.raises(RemoteEnvError):
            envs[0].step(call("submit"))
    finally:
        for env in envs:
            env.close()


def test_openenv_manifest_and_container_entry_point(tmp_path):
    """openenv.yaml names an importable app; that app, run by plain uvicorn as the server
    Dockerfile's image would, is configured from REPOGYM_SERVE_* variables."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    import yaml

    from tests.server.conftest import free_port

    root = Path(__file__).resolve().parents[2]
    manifest = yaml.safe_load((root / "openenv.yaml").read_text())
    assert manifest["name"] == "repogym" and manifest["runtime"] == "fastapi"
    assert manifest["app"] == "repogym.server.asgi:app" and (root / "Dockerfile").is_file()
    port = free_port()
    env = {**os.environ, "REPOGYM_SERVE_TASKS": TASK, "REPOGYM_SERVE_MAX_SESSIONS": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", manifest["app"], "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if http(url + "/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        assert [t["id"] for t in http(url + "/tasks")[1]] == [TASK]
        assert http(url + "/health")[1]["max_sessions"] == 2
    finally:
        proc.terminate()
        proc.wait(60)
