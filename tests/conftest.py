"""Shared fixtures. Sandbox tests run the real bwrap sandbox: `make test` installs it."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import pytest

import repogym
from repogym.scenarios.registry import registered_tasks


def pytest_report_header(config: pytest.Config) -> str:
    return f"repogym {repogym.__version__}; bwrap: {shutil.which('bwrap') or 'MISSING'}"


# -- scheduling -----------------------------------------------------------------------------
#: The test files that take longest (measured on the 2-core CI machine, December 2026: 289 s
#: down to 40 s of work each), longest first. `make test` runs whole files on two pytest-xdist
#: workers, each taking the next file when it is nearly done; files come in the order below,
#: then the others by how many tests they hold (xdist's own order). Longest first keeps a
#: long file from starting last while the other worker idles (a simulation over the
#: measured times: 1,311 s against 1,367 s for xdist's order). Only the order depends on it.
LONGEST_FILES = (
    "tests/scenarios/test_synth.py",
    "tests/adversarial/test_forgery.py",
    "tests/quality/test_builtin_valid.py",
    "tests/agents/test_train_cli.py",
    "tests/quality/test_synth_history.py",
    "tests/sandbox/test_docker_parity.py",
    "tests/scenarios/test_realpy.py",
    "tests/quality/test_sandboxed_tests.py",
    "tests/scenarios/test_suite_ray.py",
    "tests/agents/test_distributed.py",
    "tests/quality/test_synth_pypi.py",
    "tests/agents/test_async.py",
    "tests/adversarial/test_hostile_inputs.py",
    "tests/quality/test_validate.py",
    "tests/envs/test_multi.py",
    "tests/integrations/test_trl.py",
    "tests/quality/test_validate_mutation.py",
    "tests/integrations/test_harbor.py",
    "tests/harness/test_signals.py",
    "tests/agents/toy/test_sb3.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files in the order :data:`LONGEST_FILES` gives (a stable sort: each file's tests keep
    their order); `make test` turns xdist's own reordering off (``--no-loadscope-reorder``)."""
    rank = {f: i for i, f in enumerate(LONGEST_FILES)}
    file_of = {id(item): item.nodeid.split("::", 1)[0] for item in items}
    count = collections.Counter(file_of.values())
    items.sort(key=lambda item: (rank.get(f := file_of[id(item)], len(rank)), -count[f]))


# -- docker ---------------------------------------------------------------------------------
# The session fixture ``docker_engine`` uses :mod:`repogym.sandbox.docker_setup`: an engine
# that already answers is used as is; otherwise (as root) a private dockerd is started under
# ``/var/lib/repogym-docker`` and stopped again at the end of the session (set
# ``REPOGYM_KEEP_DOCKER=1`` to keep it). The image is built once with debootstrap and stays
# cached in the daemon's data root. Where no engine can be had, the docker tests skip with
# the reason (shown by ``-ra`` in the summary and printed right away).
#
# The set-up runs under a file lock, so that pytest processes started together (several
# runs on one machine, or pytest-xdist workers, each with its own session) do not start two
# daemons or build the image twice: one starts and builds, the others find them. A daemon
# an xdist worker started is stopped by the controller once every worker is done.
_DOCKER_LOCK = Path(tempfile.gettempdir()) / f"repogym-test-docker-{os.geteuid()}.lock"
#: Set by the controller of a run: a worker that started the private daemon writes
#: ``docker-started`` there.
_RUN_DIR = "REPOGYM_TEST_RUN_DIR"


@pytest.fixture(scope="session")
def docker_engine(request: pytest.FixtureRequest):
    """A ready engine (``docker_setup.Setup``), or a skip that says why there is none."""
    try:
        from repogym.sandbox import docker_setup

        with _DOCKER_LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            setup = docker_setup.ensure()
    except ImportError as e:
        reason = f"docker tests skipped: the docker SDK is missing ({e}); pip install docker"
    except Exception as e:  # any set-up failure becomes the printed skip reason
        reason = f"docker tests skipped: no Docker engine could be started: {e}"
    else:
        worker = hasattr(request.config, "workerinput")
        if setup.started and worker and os.environ.get(_RUN_DIR):
            (Path(os.environ[_RUN_DIR]) / "docker-started").touch()
        yield setup
        if setup.started and not worker and not os.environ.get("REPOGYM_KEEP_DOCKER"):
            docker_setup.stop_daemon()
        return
    print(f"\n{reason}", file=sys.__stderr__, flush=True)
    pytest.skip(reason)


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or a run without xdist) makes the run's folder; workers inherit it."""
    if not hasattr(config, "workerinput"):
        os.environ[_RUN_DIR] = tempfile.mkdtemp(prefix="repogym-test-run-")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller stops a private dockerd that one of its workers started."""
    if hasattr(config, "workerinput") or not os.environ.get(_RUN_DIR):
        return
    run_dir = Path(os.environ.pop(_RUN_DIR))
    if (run_dir / "docker-started").exists() and not os.environ.get("REPOGYM_KEEP_DOCKER"):
        from repogym.sandbox import docker_setup

        docker_setup.stop_daemon()
    shutil.rmtree(run_dir, ignore_errors=True)


def call(tool: str, **args: object) -> str:
    """A JSON tool-call action."""
    return json.dumps({"tool": tool, "args": args})


def apply_patch_actions(patch_text: str) -> list[str]:
    """Actions that apply a patch through the env's tools (as the oracle agent does)."""
    return [
        call("write", path="/tmp/fix.patch", content=patch_text),
        call("bash", command="git apply /tmp/fix.patch"),
    ]


def scaled(seconds: float) -> float:
    """A time bound for a test, stretched by the machine's load: with every core busy
    (other work, a CPU hog, parallel sessions), processes start and finish later. The factor
    is the 1-minute load per core (at least 1, at most 8), read when the bound is used;
    ``REPOGYM_TEST_SLOWDOWN`` fixes it."""
    fixed = os.environ.get("REPOGYM_TEST_SLOWDOWN")
    factor = float(fixed) if fixed else os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * min(max(factor, 1.0), 8.0)


@pytest.fixture
def sigint_handled():
    """For a test that delivers SIGINT to this process itself: Python's KeyboardInterrupt
    handler for its duration, whatever disposition the suite was started with (``nohup``
    and ``cmd &`` in a script start it with SIGINT ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.fixture(scope="session")
def retry_task() -> repogym.Task:
    return registered_tasks()["retry-zero"]


@pytest.fixture
def make_env():
    """gym.make that closes every env it made at the end of the test."""
    made: list[gym.Env] = []

    def _make(env_id: str = "repogym/retry-zero-v0", **kwargs: object) -> gym.Env:
        env = gym.make(env_id, **kwargs)
        made.append(env)
        return env

    yield _make
    for env in made:
        env.close()


def probe_network(run) -> str:
    """From inside a sandbox (``run(cmd) -> obs``), try the internet and a server listening on
    the host's loopback; prints ``blocked``/``OPEN`` per target, then the interface names."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def accept() -> None:
        try:
            server.accept()
        except OSError:  # closed at the end of the probe
            pass

    threading.Thread(target=accept, daemon=True).start()
    probe = (
        "import socket\n"
        "for host, port in [('1.1.1.1', 53), ('8.8.8.8', 443), "
        f"('127.0.0.1', {port})]:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2); print('OPEN', host)\n"
        "    except OSError as e: print('blocked', host, e.errno)\n"
        "print(*[name for _, name in socket.if_nameindex()])\n"
    )
    try:
        return run(f'python3 -c "{probe}"')
    finally:
        server.close()


@contextlib.contextmanager
def env_shell(**make_kwargs: object):
    """A retry-zero env kept open for many commands: ``run(cmd) -> obs`` (``run.env``)."""
    env = gym.make("repogym/retry-zero-v0", max_episode_steps=1000, **make_kwargs)
    try:
        env.reset(seed=0)

        def run(command: str) -> str:
            obs, *_ = env.step(call("bash", command=command))
            return obs

        run.env = env
        yield run
    finally:
        env.close()


@pytest.fixture(scope="module")
def shell():
    """One bwrap-sandboxed env for a module of isolation tests."""
    with env_shell() as run:
        yield run


def diff_of(repo_dir: Path, changes: dict[str, str | None], work: Path) -> str:
    """A real ``git diff`` of ``repo_dir`` after writing (or, for None, deleting) files."""
    import subprocess

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(repo_dir, work)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
        "HOME": str(work),
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True)
    for path, content in changes.items():
        target = work / path
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    subprocess.run(["git", "add", "-A"], cwd=work, env=env, check=True)
    out = subprocess.run(
        ["git", "diff", "--cached"], cwd=work, env=env, check=True, capture_output=True, text=True
    ).stdout
    shutil.rmtree(work)
    return out


def write_task(root: Path, task_id: str = "user-task") -> Path:
    """A task folder written by 'someone else' to the format of docs/authoring.md."""
    import subprocess

    d = root / task_id
    (d / "repo").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "alternatives").mkdir()
    (d / "decoys").mkdir()
    (d / "repo" / "clamp.py").write_text(
        'def clamp(x, lo, hi):\n    """Limit x to [lo, hi]."""\n'
        "    if x < lo:\n        return lo\n    if x > hi:\n        return x\n    return x\n"
    )
    (d / "tests" / "test_clamp.py").write_text(
        "from clamp import clamp\n\n\ndef test_above():\n    assert clamp(12, 0, 10) == 10\n\n\n"
        "def test_below():\n    assert clamp(-3, 0, 10) == 0\n\n\n"
        "def test_inside():\n    assert clamp(4, 0, 10) == 4\n\n\n"
        "def test_far_above():\n    assert clamp(10**9, 0, 10) == 10\n"
    )
    (d / "task.toml").write_text(
        f'id = "{task_id}"\nversion = 0\nstatement = "clamp(12, 0, 10) returns 12; it should '
        'return 10."\nsplit = "test"\ntags = ["user"]\nmax_steps = 10\n\n[verifier]\n'
        'tests_dest = "tests"\ncommand = "python -m pytest -q -p no:cacheprovider"\n'
        'timeout_s = 60\nfail_to_pass = ["tests/test_clamp.py::test_above", '
        '"tests/test_clamp.py::test_far_above"]\npass_to_pass = ["tests/test_clamp.py::test_below",'
        ' "tests/test_clamp.py::test_inside"]\n'
    )

    def patch(old: str, new: str) -> str:
        tmp = root / f".work-{task_id}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(d / "repo", tmp)
        env = {
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp),
        }
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
            subprocess.run(["git", *args], cwd=tmp, env=env, check=True)
        f = tmp / "clamp.py"
        f.write_text(f.read_text().replace(old, new))
        out = subprocess.run(
            ["git", "diff"], cwd=tmp, env=env, check=True, capture_output=True, text=True
        ).stdout
        shutil.rmtree(tmp)
        return out

    (d / "solution.patch").write_text(
        patch("        return x\n    return x", "        return hi\n    return x")
    )
    (d / "alternatives" / "minmax.patch").write_text(
        patch(
            "    if x < lo:\n        return lo\n    if x > hi:\n        return x\n    return x",
            "    return max(lo, min(x, hi))",
        )
    )
    (d / "decoys" / "overfit.patch").write_text(
        patch("    if x < lo:", "    if x == 12:\n        return 10\n    if x < lo:")
    )
    return d
