"""The persistent shell in the real bwrap sandbox: state, interrupts, restarts, framing.

Every command here is 'the agent'. The shell must keep its state across commands, stop
what a command started when it runs too long, come back (or be replaced, saying so) when
the command breaks it, and never let a command's output or fds confuse the host.
"""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from repogym.sandbox import Limits, SandboxError, SandboxSpec, make_sandbox
from repogym.sandbox.bwrap import sandbox_env
from repogym.sandbox.leases import collect_garbage
from repogym.sandbox.persistent import RECOVER_S
from repogym.sandbox.runtime import runtime
from repogym.sandbox.workspace import TemplateCache
from tests.conftest import scaled

FAKE_NONCE = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def template(retry_task):
    cache = TemplateCache()
    yield cache.get(retry_task.repo_dir)
    cache.close()


@pytest.fixture
def sandbox(template):
    """A bwrap sandbox over retry-zero (``sandbox(**limits)``), closed at the end."""
    made = []

    def _make(**limits: object):
        sb = make_sandbox("bwrap", SandboxSpec(template, Limits(**limits)))
        made.append(sb)
        return sb

    yield _make
    for sb in made:
        sb.close()


@pytest.fixture(scope="module")
def shared(template):
    """One shell for tests that leave it usable."""
    sb = make_sandbox("bwrap", SandboxSpec(template, Limits(timeout_s=2)))
    yield sb.shell()
    sb.close()


def _host_processes(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines() if marker in line]


def test_cd_exports_functions_and_aliases_persist(shared):
    assert (
        shared.run(
            'cd /tmp && export RG_X=41 && f() { echo "f:$1"; }; '
            "alias hi='echo hi-alias'; Y=local-var"
        ).exit_code
        == 0
    )
    res = shared.run("pwd; echo $((RG_X + 1)) $Y; f arg; hi; sh -c 'echo child:$RG_X'")
    assert res.stdout == "/tmp\n42 local-var\nf:arg\nhi-alias\nchild:41\n", res
    assert shared.run("cd /workspace; unset RG_X Y; unset -f f; unalias hi").exit_code == 0


def test_exit_codes_streams_and_odd_bytes(shared):
    res = shared.run("echo out; echo err >&2; (exit 3)")
    assert (res.stdout, res.stderr, res.exit_code) == ("out\nerr\n", "", 3)
    weird = "echo 'a'\"b\"\\c $'\\t\\x41' !x `echo tick` héllo \u2603 %s %% \r\x7f\\"
    expected = subprocess.run(["bash", "-c", weird], check=False, capture_output=True).stdout
    assert expected == "abc \tA !x tick héllo \u2603 %s %% \r\x7f\\\n".encode()
    assert shared.run(weird).stdout == expected.decode()
    assert shared.run("cat <<'EOF'\nline1\n  line2\nEOF").stdout == "line1\n  line2\n"
    assert shared.run("if true; then").exit_code == 2  # a syntax error is the command's own
    assert shared.run('read x; echo "rc=$?"').stdout == "rc=1\n"  # stdin is empty
    res = shared.run("echo a\x00b")
    assert res.exit_code == 2 and "NUL" in res.stderr


def test_runs_with_the_sandbox_isolation(shared):
    out = shared.run(
        "id -u; id -g; grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' "
        "/proc/self/status; env | cut -d= -f1 | sort | tr '\\n' ' '; echo; "
        "ls /proc | grep -c '^[0-9]'; unshare -U true 2>&1 | tail -1; "
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\" "
        "2>&1 | tail -1"
    ).stdout.splitlines()
    if os.geteuid() == 0:
        assert out[0] != "0" and int(out[0]) >= 2_000_000_000, out
    assert out[1] == "65534"
    status = dict(line.split(":\t") for line in out[2:9])
    assert {status[k] for k in status if k.startswith("Cap")} == {"0000000000000000"}
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
    names = set(out[9].split()) - {"OLDPWD"}  # bash's own, once a test has used cd
    assert names == {*sandbox_env(runtime()), "PWD", "SHLVL", "_"}, names
    assert int(out[10]) < 10  # only the sandbox's own processes are visible
    assert "Operation not permitted" in out[11] and "unreachable" in out[12], out


def test_fake_records_and_closed_fds_do_not_confuse_the_host(shared):
    fake = f"printf '%s 0\\n' {FAKE_NONCE}"
    res = shared.run(
        f"{fake}; for fd in /proc/$$/fd/*; do {fake} > $fd; done 2>/dev/null; "
        "sleep 0.3; exit_code_is=5; (exit 5)"
    )
    assert res.exit_code == 5 and not res.timed_out and res.duration_s >= 0.3, res
    spam = shared.run(f"(while :; do {fake} >&3; done) 2>/dev/null & sleep 0.2; echo ok")
    assert spam.stdout.endswith("ok\n") and spam.exit_code == 0
    assert shared.run("kill %1; wait; echo after").stdout.endswith("after\n")
    res = shared.run("exec 3>&- 1>/dev/null; echo hidden; exec 3>/dev/null; (exit 4)")
    assert res.exit_code == 4 and "hidden" not in res.stdout, res  # fd 3 comes back
    assert shared.run("exec 1>&2; echo back").stdout == "back\n"


def test_background_jobs_live_until_close(sandbox):
    sb = sandbox()
    sh = sb.shell()
    assert (
        sh.run("sleep 31337 & (setsid sleep 31338 >/dev/null 2>&1 &); echo started").exit_code == 0
    )
    assert "sleep 31337" in sh.run("ps -eo args").stdout
    assert len(_host_processes("sleep 3133")) == 2
    root = sb.workspace.path.parent
    assert root.exists() and str(root).startswith(("/dev/shm/repogym", "/tmp"))
    sb.close()
    sb.close()
    assert _host_processes("sleep 3133") == []
    assert not root.exists()
    with pytest.raises(SandboxError, match="closed"):
        sh.run("true")


def test_a_shell_outlives_the_thread_that_started_it(sandbox):
    """bwrap's --die-with-parent fires when the forking *thread* ends: a shell whose first
    command ran on a worker thread (a pool, a server's request thread) must not die with it."""
    sh = sandbox().shell()
    first: list = []
    worker = threading.Thread(target=lambda: first.append(sh.run("X=kept; echo started")))
    worker.start()
    worker.join()
    assert first[0].stdout.startswith("started"), first[0]
    time.sleep(0.3)  # the parent-death signal is immediate; give it time to land
    res = sh.run("echo $X")
    assert res.stdout.startswith("kept") and res.shell_reset is None, res


def test_timeout_stops_the_command_not_the_shell(sandbox):
    sh = sandbox(timeout_s=1).shell()
    sh.run("cd /tmp; export KEEP=yes; sleep 31339 &")
    res = sh.run("sleep 60; echo AFTER")
    assert res.timed_out and res.exit_code == 124 and res.shell_reset is None, res
    assert "AFTER" not in res.stdout and res.duration_s < 1 + RECOVER_S + 1
    res = sh.run(
        "python3 -c 'import time; print(\"up\", flush=True); time.sleep(60)'; echo AFTER",
        timeout_s=5,
    )  # time to start, even on a busy machine
    assert res.timed_out and "AFTER" not in res.stdout, res
    assert "KeyboardInterrupt" in res.stdout or "up" not in res.stdout  # it got Ctrl-C
    res = sh.run("while :; do :; done")  # a builtin loop: only SIGINT to the shell stops it
    assert res.timed_out and res.shell_reset is None
    res = sh.run("trap '' INT; sleep 60 & sleep 60; echo cont; trap - INT")
    assert res.timed_out and res.shell_reset is None
    out = sh.run("pwd; echo $KEEP; ps -eo args | grep -c '^sleep'").stdout
    assert out == "/tmp\nyes\n1\n", out  # the earlier job lives, the command's are gone


def test_a_shell_that_cannot_come_back_is_replaced(sandbox):
    sh = sandbox(timeout_s=1).shell()
    sh.run("cd /tmp; export GONE=1")
    res = sh.run("trap '' INT; while :; do :; done")
    assert res.timed_out and "did not answer" in res.shell_reset, res
    assert sh.run("pwd; echo ${GONE:-unset}").stdout == "/workspace\nunset\n"


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("exit 7", "exited (exit code 7)"),
        ("exec true", "exited (exit code 0)"),
        ("set -e; false", "exited (exit code 1)"),
        ("kill -9 $$", "killed (signal 9)"),
        ("exec python3 -c 'raise SystemExit(5)'", "exited (exit code 5)"),
    ],
)
def test_a_shell_that_ends_is_replaced_at_the_next_command(shared, command, reason):
    shared.run("cd /tmp; export GONE=1")
    res = shared.run(command)
    assert res.shell_reset and reason in res.shell_reset and not res.timed_out, res
    assert res.duration_s < RECOVER_S
    assert shared.run("pwd; echo ${GONE:-unset}").stdout == "/workspace\nunset\n"


def test_a_shell_killed_between_commands_is_replaced_and_said_so(shared):
    shared.run("cd /tmp; (sleep 0.2; kill -9 $$) >/dev/null 2>&1 &")
    time.sleep(1)
    res = shared.run("pwd")
    assert res.stdout == "/workspace\n" and res.exit_code == 0, res
    assert "had ended since the last command (the shell was killed (signal 9))" in res.shell_reset
    assert shared.run("echo ok").shell_reset is None


def test_output_cap_stops_the_command_and_keeps_the_shell(sandbox):
    sh = sandbox(output_bytes=100_000, timeout_s=20).shell()
    sh.run("export KEEP=1")
    res = sh.run("yes 0123456789")
    assert res.output_truncated and res.exit_code == 137 and len(res.stdout) == 100_000
    assert res.shell_reset is None and sh.run("echo $KEEP").stdout == "1\n"


def test_fork_bomb_is_contained(sandbox):
    sb = sandbox(timeout_s=5, pids=64)
    sh = sb.shell()
    res = sh.run(":(){ :|:& };: ; sleep 1; echo done")
    assert res.duration_s < 5 + RECOVER_S and res.shell_reset is None, res
    assert "alive\n" in sh.run("echo alive").stdout  # a builtin needs no fork; the bomb's
    if sb.cgroup is not None:  # the bomb lives on as a background job, held at the limit
        assert len(_cgroup_pids(sb)) <= 64
    assert "calm\n" in sh.run("kill -9 -1; sleep 0.2; echo calm").stdout  # messages show too
    assert sb.cgroup is None or len(_cgroup_pids(sb)) < 10


def _cgroup_pids(sb) -> list[str]:
    return Path(sb.cgroup.procs_files()[1]).read_text().split()


def test_memory_hog_is_reported_and_the_shell_survives(sandbox):
    sh = sandbox(memory_mb=256, timeout_s=20).shell()
    sh.run("export KEEP=1")
    res = sh.run("python3 -c 'b = bytearray(1 << 30); print(\"ALLOCATED\")'")
    assert "ALLOCATED" not in res.stdout and res.exit_code != 0
    if os.geteuid() == 0:  # a memory cgroup: the kernel's OOM kill is counted
        assert res.resource_exhausted == "memory", res
    assert sh.run("echo $KEEP").stdout == "1\n"


def test_fresh_commands_beside_the_shell_leave_it_alone(sandbox):
    sb = sandbox(timeout_s=1)
    sh = sb.shell()
    sh.run("cd /tmp; sleep 31340 &")
    assert sb.run("sleep 30").timed_out  # killing this command must spare the shell
    sb.write_file("new.txt", "x\n")
    assert sh.run("pwd; cat /workspace/new.txt; jobs | wc -l").stdout == "/tmp\nx\n1\n"
    other = sb.shell()
    assert other.run("pwd").stdout == "/workspace\n"
    other.close()
    assert sh.run("echo still").stdout == "still\n"


def test_interrupt_leaves_nothing_running(sandbox, sigint_handled):
    sb = sandbox(timeout_s=60)
    sh = sb.shell()
    sh.run("true")
    threading.Timer(0.5, _thread.interrupt_main).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sh.run("sleep 31341")
    assert time.monotonic() - start < scaled(30)
    assert _host_processes("sleep 31341") == []
    assert sh.run("echo next").stdout == "next\n"  # a new shell


_OWNER = """
import time
from repogym.sandbox import SandboxSpec, cleanup, make_sandbox
cleanup.install_signal_handlers()
from repogym.sandbox.workspace import TemplateCache
from repogym.scenarios.registry import registered_tasks
cache = TemplateCache()
sb = make_sandbox("bwrap", SandboxSpec(cache.get(registered_tasks()["retry-zero"].repo_dir)))
sh = sb.shell()
sh.run("sleep 31343 >/dev/null 2>&1 &")
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_owner_leaves_no_shell_behind(sig):
    """SIGTERM: the clean-up handler kills the shell; SIGKILL: the shell reads the end of
    its input and exits, and its PID namespace with it."""
    proc = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + scaled(10)  # the background job may not have exec'd sleep yet
        while not _host_processes("sleep 31343") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_host_processes("sleep 31343")) == 1
    finally:
        proc.send_signal(sig)
        proc.wait()
    deadline = time.monotonic() + scaled(10)
    while _host_processes("sleep 31343") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _host_processes("sleep 31343") == []
    collect_garbage()  # the lease folder a SIGKILLed owner leaves is `repogym gc`'s job


def test_a_timeout_stops_the_line_even_when_the_caller_ignores_sigint(tmp_path):
    """Started as under ``nohup`` (SIGINT and SIGQUIT ignored, which survives exec), the
    owner's shells still get SIGINT at its default: a timeout stops the command and drops
    the rest of the line (bash cannot un-ignore a signal ignored at its start)."""
    script = tmp_path / "owner.py"
    script.write_text(
        textwrap.dedent("""
        from repogym.sandbox import Limits, SandboxSpec, make_sandbox
        from repogym.sandbox.workspace import TemplateCache
        from repogym.scenarios.registry import registered_tasks
        cache = TemplateCache()
        sb = make_sandbox("bwrap", SandboxSpec(cache.get(registered_tasks()["retry-zero"].repo_dir),
                                               Limits(timeout_s=2)))
        res = sb.shell().run("sleep 30; echo AFTER")
        print("RESULT", res.exit_code, res.timed_out, "AFTER" in res.stdout)
        sb.close(); cache.close()
        """)
    )
    out = subprocess.run(
        ["bash", "-c", f'trap "" INT QUIT; exec "{sys.executable}" {script}'],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "RESULT 124 True False" in out.stdout, out.stdout + out.stderr
