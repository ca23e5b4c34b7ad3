"""The ``openai`` agent against a real HTTP server on 127.0.0.1 speaking chat completions."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import pytest

from repogym.harness.baselines import AgentConfigError, AgentError, make_agent
from repogym.harness.config import RunConfig
from repogym.harness.runner import run
from repogym.scenarios.registry import registered_tasks

from .conftest import TASKS, rows_of, run_cli


def _tool_reply(name: str, arguments: str, call_id: str) -> dict:
    return {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def _text_reply(text: str) -> dict:
    return {
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
    }


class ScriptedServer:
    """A chat-completions endpoint replaying ``(status, body)`` replies in order."""

    def __init__(self, replies: list[tuple[int, Any]]) -> None:
        self.replies, self.requests = list(replies), []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                status, reply = server.replies.pop(0)
                data = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RG_TEST_API_KEY", "sk-test-123")
    return "sk-test-123"


PREFLIGHT_OK = (200, _text_reply("OK"))


def _script() -> list[tuple[int, Any]]:
    return [
        (500, {"error": {"message": "overloaded"}}),  # retried
        (200, "this is {not json"),  # malformed body: retried
        (200, _tool_reply("bash", json.dumps({"command": "ls"}), "call_1")),
        (200, _tool_reply("edit", "{broken json", "call_2")),  # env explains the error
        (200, _text_reply("Let me look.\n```bash\ngit status --short\n```")),
        (200, _tool_reply("submit", "{}", "call_3")),
    ]


def test_episode_through_the_runner_records_tokens_and_survives_bad_replies(
    tmp_path: Path, api_key: str
) -> None:
    with ScriptedServer([PREFLIGHT_OK, *_script()]) as server:
        cfg = RunConfig(
            agent="openai",
            out=tmp_path / "o",
            task_ids=["retry-zero"],
            agent_args={
                "base_url": server.url,
                "model": "scripted",
                "api_key_env": "RG_TEST_API_KEY",
                "backoff_s": 0.01,
            },
        )
        (row,) = run(cfg)
    assert row["agent_error"] is None and row["infra_error"] is None
    assert row["steps"] == 4 and row["resolved"] is False
    assert row["usage"] == {
        "prompt_tokens": 350,
        "completion_tokens": 35,
        "requests": 6,
        "retries": 2,
    }
    assert row["tokens"] == 385
    preflight, *reqs = server.requests
    assert preflight["body"]["max_tokens"] == 1 and preflight["body"]["model"] == "scripted"
    assert preflight["body"]["tools"] == reqs[0]["body"]["tools"]  # the settings of the run
    assert all(r["path"] == "/v1/chat/completions" for r in server.requests)
    assert all(r["auth"] == f"Bearer {api_key}" for r in reqs)
    first = reqs[0]["body"]
    assert first["model"] == "scripted" and first["tools"][0]["function"]["name"] == "bash"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "retry" in first["messages"][1]["content"]  # the task statement
    last = reqs[-1]["body"]["messages"]
    # tool results answer their tool call; a text reply's observation is a user turn
    tool_msgs = [m for m in last if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_1", "call_2"]
    assert "Invalid action" in tool_msgs[1]["content"]
    assert last[-1]["role"] == "user" and "exit code: 0" in last[-1]["content"]
    traj = [json.loads(x) for x in (tmp_path / "o" / row["trajectory"]).read_text().splitlines()]
    assert [s["tool"] for s in traj if s["type"] == "step"] == ["bash", None, "bash", "submit"]


def test_client_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedServer([(401, {"error": {"message": "bad key"}})]) as server:
        agent = make_agent("openai", base_url=server.url, model="m", backoff_s=0.01)
        agent.reset({"id": "t"})
        with pytest.raises(AgentConfigError, match=r"HTTP 401.*bad key.*\$OPENAI_API_KEY"):
            agent.act("hello")
    assert len(server.requests) == 1 and server.requests[0]["auth"] is None


def test_gives_up_after_max_retries() -> None:
    with ScriptedServer([(503, "{}")] * 3) as server:
        agent = make_agent("openai", base_url=server.url, model="m", backoff_s=0.01, max_retries=2)
        agent.reset({"id": "t"})
        with pytest.raises(AgentError, match="gave up after 3 attempts"):
            agent.act("hello")
    assert agent.usage["retries"] == 2 and len(server.requests) == 3


def test_missing_base_url_says_how_to_fix() -> None:
    with pytest.raises(AgentError, match="--agent-arg base_url="):
        make_agent("openai", model="m")


def _openai_args(server: ScriptedServer, model: str = "scripted") -> dict[str, Any]:
    return {
        "base_url": server.url,
        "model": model,
        "api_key_env": "RG_TEST_API_KEY",
        "backoff_s": 0.01,
    }


def _cli_openai(server: ScriptedServer, model: str, out: Path, *extra: str) -> Any:
    args = [f"--agent-arg={k}={v}" for k, v in _openai_args(server, model).items()]
    return run_cli(
        "run",
        "--agent",
        "openai",
        *args,
        "--tasks",
        ",".join(TASKS),
        "--out",
        str(out),
        "--no-progress",
        *extra,
    )


def test_wrong_model_fails_fast_and_the_fixed_run_completes(tmp_path: Path, api_key: str) -> None:
    out = tmp_path / "run"
    missing = (
        404,
        {"error": {"message": "The model `nosuch` does not exist.", "code": "model_not_found"}},
    )
    with ScriptedServer([missing]) as server:
        proc = _cli_openai(server, "nosuch", out)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "`nosuch` does not exist" in proc.stdout and "model name" in proc.stdout
    assert len(server.requests) == 1  # the preflight only: no episode was spent
    assert not (out / "results.jsonl").exists()
    submit = (200, _tool_reply("submit", "{}", "c1"))
    with ScriptedServer([PREFLIGHT_OK, submit, submit]) as server:
        proc = _cli_openai(server, "scripted", out, "--retry-errors")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rows_of(out)
    assert sorted(r["task"] for r in rows) == TASKS
    assert all(r["agent_error"] is None and r["steps"] == 1 for r in rows)
    assert rows[0]["agent"] == "openai-scripted"  # the URL, key variable and retries are not in it


def test_auth_failure_mid_run_stops_the_run_and_records_nothing(
    tmp_path: Path, api_key: str
) -> None:
    with ScriptedServer([PREFLIGHT_OK, (401, {"error": {"message": "key revoked"}})]) as server:
        cfg = RunConfig(
            agent="openai", out=tmp_path / "o", task_ids=TASKS, agent_args=_openai_args(server)
        )
        with pytest.raises(AgentConfigError, match=r"HTTP 401: .*key revoked.*RG_TEST_API_KEY"):
            run(cfg)
    assert len(server.requests) == 2  # the second task never started
    assert rows_of(tmp_path / "o") == []


def test_a_rejected_request_mid_episode_is_that_episodes_agent_error(
    tmp_path: Path, api_key: str
) -> None:
    bad = (400, {"error": {"message": "temperature must be at most 2"}})
    with ScriptedServer([PREFLIGHT_OK, bad]) as server:
        (row,) = run(
            RunConfig(
                agent="openai",
                out=tmp_path / "o",
                task_ids=TASKS[:1],
                agent_args=_openai_args(server),
            )
        )
    assert "rejected the request: HTTP 400" in row["agent_error"]
    assert "repogym agents openai" in row["agent_error"]


def _fixed_file(task_id: str, name: str, tmp: Path) -> str:
    """The file as the task's gold patch leaves it."""
    task = registered_tasks()[task_id]
    work = tmp / "fixed"
    shutil.copytree(task.repo_dir, work)
    subprocess.run(["git", "apply", str(task.solution_patch)], cwd=work, check=True)
    return (work / name).read_text()


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 4096 tokens. However, you requested 5200 tokens",
        "prompt is too long: 210000 tokens > 200000 maximum",
    ],
)
def test_context_limit_submits_the_current_diff_and_it_is_graded(
    tmp_path: Path, api_key: str, message: str
) -> None:
    fixed = _fixed_file("retry-zero", "retry.py", tmp_path)
    write = _tool_reply("write", json.dumps({"path": "retry.py", "content": fixed}), "c1")
    too_long = (400, {"error": {"message": message, "code": "context_length_exceeded"}})
    with ScriptedServer([PREFLIGHT_OK, (200, write), too_long]) as server:
        (row,) = run(
            RunConfig(
                agent="openai",
                out=tmp_path / "o",
                task_ids=["retry-zero"],
                agent_args=_openai_args(server),
            )
        )
    assert row["agent_error"] is None and row["infra_error"] is None
    assert (
        row["stop_reason"].startswith("context_limit: HTTP 400") and message in row["stop_reason"]
    )
    assert row["steps"] == 2 and row["resolved"] is True and row["reward"] == 1.0
    traj = [json.loads(x) for x in (tmp_path / "o" / row["trajectory"]).read_text().splitlines()]
    assert [s["tool"] for s in traj if s["type"] == "step"] == ["write", "submit"]
    assert "retry.py" in traj[-1]["diff"]
