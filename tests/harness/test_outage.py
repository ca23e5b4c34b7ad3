"""A dead or failing model endpoint is an outage, not the model's failure.

A real chat-completions stub on 127.0.0.1 (in this process) answers the ``openai`` agent with
scripted tool calls; the tests kill it, or make it answer 500, in the middle of a run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from repogym.harness.config import RunConfig
from repogym.harness.metrics import summarize
from repogym.harness.results import read_results
from repogym.harness.runner import EndpointOutage, run

from .conftest import cli_env, rows_of
from .test_openai_agent import _text_reply, _tool_reply

SUBMIT = _tool_reply("submit", "{}", "call_submit")
#: One tiny built-in task, several samples: each episode is one request (submit) and a grading.
TASK = "retry-zero"


class ChatStub:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint on 127.0.0.1.

    ``reply(n, body)`` gives ``(status, json)`` for the n-th episode request (the preflight,
    with ``max_tokens=1``, always gets "OK"); it may return None to drop the connection
    without an answer. ``start`` and ``kill`` may be called again and again on the same port.
    """

    def __init__(self, reply: Callable[[int, dict], tuple[int, Any] | None], port: int = 0) -> None:
        self.reply, self.port, self.episode_requests = reply, port, 0
        self.httpd: ThreadingHTTPServer | None = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if body.get("max_tokens") == 1:
                    answer: tuple[int, Any] | None = (200, _text_reply("OK"))
                else:
                    stub.episode_requests += 1
                    answer = stub.reply(stub.episode_requests, body)
                if answer is None:
                    self.close_connection = True
                    return  # no response at all: the client sees the connection drop
                data = json.dumps(answer[1]).encode()
                self.send_response(answer[0])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ChatStub:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def kill(self) -> None:
        """Stop listening: from now on connections are refused."""
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


def _cli(stub: ChatStub, out: Path, samples: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "repogym.cli",
        "run",
        "--agent",
        "openai",
        f"--agent-arg=base_url={stub.url}",
        "--agent-arg=model=stub-model",
        "--agent-arg=max_retries=1",
        "--agent-arg=backoff_s=0.01",
        "--tasks",
        TASK,
        "--samples",
        str(samples),
        "--out",
        str(out),
        *extra,
    ]


def test_a_killed_endpoint_stops_the_run_and_a_resume_completes_it(tmp_path: Path) -> None:
    out, samples = tmp_path / "run", 5
    third_request, killed = threading.Event(), threading.Event()

    def reply(n: int, body: dict) -> tuple[int, Any] | None:
        if n < 3:
            return 200, SUBMIT
        if n == 3:  # the third episode asks: the test kills the server under it
            third_request.set()
            killed.wait(30)
        return None

    stub = ChatStub(reply).start()
    proc = subprocess.Popen(
        _cli(stub, out, samples, "--max-endpoint-errors", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(),
    )
    try:
        assert third_request.wait(240), "the run never reached its third episode"
        stub.kill()
        killed.set()
        output, _ = proc.communicate(timeout=240)
    finally:
        proc.kill()
        stub.kill()
    assert proc.returncode == 3, output
    assert "the model endpoint failed 2 episodes in a row" in output
    assert "Connection refused" in output
    rows = rows_of(out)
    assert len(rows) == 4  # two scored episodes, then the two that hit the outage
    assert [bool(r["endpoint_error"]) for r in rows] == [False, False, True, True]
    assert all(r["agent_error"] is None and r["infra_error"] is None for r in rows)
    assert "Connection refused" in rows[-1]["endpoint_error"]
    s = summarize(rows)
    assert (s["scored"], s["endpoint_errors"], s["agent_errors"]) == (2, 2, 0)
    # plain progress lines while it ran (stdout is a pipe here), and how to resume
    assert "[1/5] retry-zero #0: failed" in output and "[4/5] retry-zero #3: endpoint" in output
    resume = next(line for line in output.splitlines() if line.startswith("repogym run"))
    assert "--max-endpoint-errors 2" in resume and f"--out {out}" in resume

    stub.reply = lambda n, body: (200, SUBMIT)  # the endpoint is back, on the same port
    stub.episode_requests = 0
    stub.start()
    try:
        done = subprocess.run(
            _cli(stub, out, samples, "--max-endpoint-errors", "2"),
            capture_output=True,
            text=True,
            timeout=300,
            env=cli_env(),
            check=False,
        )
    finally:
        stub.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 to run" in done.stdout and stub.episode_requests == 3
    final = read_results(out)
    assert sorted(r["sample"] for r in final) == list(range(samples))
    assert not any(r["endpoint_error"] for r in final)
    assert "agent errors: 0" in done.stdout


def test_a_persistent_500_stops_the_run_and_an_isolated_one_does_not(tmp_path: Path) -> None:
    """Episode 1 gets 500s (one endpoint error), episode 2 succeeds (the count starts again),
    then every answer is 500: the run stops after two more, with episode 5 never run."""

    def reply(n: int, body: dict) -> tuple[int, Any]:
        if n == 3:  # the first request of episode 2 (episode 1 made two: one retry)
            return 200, SUBMIT
        return 500, {"error": {"message": "internal error: the engine died"}}

    stub = ChatStub(reply).start()
    cfg = RunConfig(
        agent="openai",
        out=tmp_path / "o",
        task_ids=[TASK],
        samples=5,
        max_endpoint_errors=2,
        agent_args={
            "base_url": stub.url,
            "model": "stub-model",
            "max_retries": 1,
            "backoff_s": 0.01,
        },
    )
    try:
        with pytest.raises(EndpointOutage, match="failed 2 episodes in a row.*HTTP 500"):
            run(cfg)
    finally:
        stub.kill()
    rows = rows_of(tmp_path / "o")
    assert [r["sample"] for r in rows] == [0, 1, 2, 3]
    assert [bool(r["endpoint_error"]) for r in rows] == [True, False, True, True]
    assert "gave up after 2 attempts: HTTP 500" in rows[0]["endpoint_error"]
    assert rows[1]["steps"] == 1 and rows[1]["endpoint_error"] is None
    s = summarize(rows)
    assert (s["scored"], s["resolve_rate"], s["endpoint_errors"]) == (1, 0.0, 3)
    assert stub.episode_requests == 7  # 2 + 1 + 2 + 2: no request after the stop


def test_an_outage_stops_a_pool_of_workers(tmp_path: Path) -> None:
    """Two worker processes: the first two requests are answered, then only 503s; the run
    stops at the second endpoint error in a row, with the workers stopped."""
    stub = ChatStub(
        lambda n, body: (200, SUBMIT) if n <= 2 else (503, {"error": {"message": "no capacity"}})
    ).start()
    cfg = RunConfig(
        agent="openai",
        out=tmp_path / "o",
        task_ids=[TASK],
        samples=6,
        workers=2,
        max_endpoint_errors=2,
        agent_args={"base_url": stub.url, "model": "stub-model", "max_retries": 0},
    )
    try:
        with pytest.raises(EndpointOutage, match="HTTP 503"):
            run(cfg)
    finally:
        stub.kill()
    rows = rows_of(tmp_path / "o")  # in the order they finished, which varies
    assert 3 <= len(rows) < 6 and all(r["endpoint_error"] for r in rows[-2:])
    assert all("HTTP 503" in r["endpoint_error"] for r in rows if r["endpoint_error"])
    assert all(r["steps"] == 1 for r in rows if not r["endpoint_error"])


def test_time_is_not_spent_on_a_dead_endpoint_at_the_start(tmp_path: Path) -> None:
    """Down before the run starts: the preflight says so (exit 2), nothing is recorded."""
    stub = ChatStub(lambda n, body: (200, SUBMIT)).start()
    stub.kill()
    proc = subprocess.run(
        _cli(stub, tmp_path / "o", 2, "--no-progress"),
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(),
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Connection refused" in proc.stdout
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_plain_progress_says_it_is_alive_while_no_episode_finishes() -> None:
    """Off a terminal, a long episode still shows up in the log (a line per heartbeat)."""
    import io

    from rich.console import Console

    from repogym.cli.running import PlainProgress

    buf = io.StringIO()
    console = Console(file=buf, width=200)
    assert not console.is_terminal
    progress = PlainProgress(console, "m", 2)
    progress.heartbeat_s = 0.05
    with progress:
        progress.begin("out", 1)
        deadline = time.monotonic() + 30
        while "running: no episode finished" not in buf.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        progress.row({"task": "t", "sample": 0, "resolved": True, "steps": 2, "wall_s": 1.0})
    lines = buf.getvalue().splitlines()
    assert lines[0] == "m: 2 episode(s) to run, 1 worker(s), results in out"
    assert lines[1].startswith("[0/2] running: no episode finished in the last")
    assert any(
        line.startswith(
            "[1/2] t #0: solved (2 steps, 1.0 s) | resolved 1, agent errors 0, not scored 0 |"
        )
        for line in lines
    )
