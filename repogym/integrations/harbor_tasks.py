"""Any Harbor task folder as a repogym task, graded by the task's own ``tests/test.sh``.

A Harbor task (``task.toml``, ``instruction.md``, ``environment/Dockerfile``,
``solution/solve.sh``, ``tests/test.sh``; see Harbor's TaskConfig) made outside repogym
imports like this:

- ``instruction.md`` is the statement; ``[task].name``, ``[metadata]`` tags, keywords and
  category become the id and tags;
- ``environment/Dockerfile`` is built on the docker backend's engine
  (:mod:`repogym.integrations.harbor_image`: offline, from the local base image when its
  ``FROM`` cannot be pulled); the task's working directory (``[environment].workdir``, else
  the Dockerfile's last ``WORKDIR``), as the image has it, is the repository (``repo/``);
  in the sandbox that directory is the workspace;
- ``solution/solve.sh`` is the oracle: it runs once at import time in a docker sandbox of
  that image, and what it changed in the working directory is ``solution.patch``;
- ``tests/`` (``test.sh`` and what it uses) are the hidden tests, with one generated
  pytest file, ``test_harbor_reward.py``, that runs ``bash /tests/test.sh`` in the working
  directory as Harbor's verifier does and reads the reward it writes
  (``/logs/verifier/reward.json``, else ``reward.txt``; only the files test.sh names, see
  :func:`reward_files`). Nothing test.sh's tree started outlives it (the generated test is
  the tree's subreaper and kills its orphans), and a test.sh killed or timed out scores 0:
  code test.sh runs, which imports the agent's, cannot plant a reward file test.sh does not
  write nor overwrite the one it wrote (docs/grading.md, "Imported tasks", says what it
  still can). Its test ``k`` passes when the reward is at least ``k/100``:
  ``reward_mode="partial"`` gives Harbor's reward to 1/100
  (partial rewards are kept), ``binary`` is 1 exactly when the reward is 1.

Grading needs the task's image: ``sandbox="docker"`` with ``sandbox_options={"image":
...}`` (:func:`sandbox_options`; the image's tag is in ``task.toml``'s ``[harbor]`` table).
What repogym cannot give a Harbor task is refused or reported by name, not guessed:
multi-step tasks, docker-compose environments, a separate verifier environment, Windows
tasks and a missing ``tests/test.sh`` are refused; what makes the oracle fail offline (a
``test.sh`` that downloads its tools, an ``[agent].user`` the sandbox does not have, an
entrypoint or healthcheck service, host variables such as API keys, GPUs) is listed in
``[harbor].missing`` and printed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from repogym.integrations import harbor_image
from repogym.scenarios.importing import check_file, check_id, copy_tree, staged_task
from repogym.scenarios.task import Task, TaskError, load_task

REWARD_FILE = "test_harbor_reward.py"
#: How finely the reward is kept: one generated test per 1/STEPS.
STEPS = 100
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE)
_NETWORK = re.compile(r"\b(curl|wget|apt-get|apt|apk|pip3?|uvx?|npm|npx|git clone)\b")


@dataclasses.dataclass
class HarborTask:
    """A Harbor task folder, read and checked.

    Attributes:
        path: The folder.
        task_id: The repogym id.
        config: ``task.toml`` as a dict.
        statement: ``instruction.md``.
        workdir: The working directory in the image.
        missing: What the offline sandbox cannot give this task (printed, stored).
    """

    path: Path
    task_id: str
    config: dict[str, Any]
    statement: str
    workdir: str
    missing: list[str]

    def table(self, key: str) -> dict[str, Any]:
        value = self.config.get(key) or {}
        return value if isinstance(value, dict) else {}


def _err(path: Path, problem: str, fix: str) -> TaskError:
    return TaskError(f"{path}: {problem}. Fix: {fix}")


def _read_toml(path: Path) -> dict[str, Any]:
    check_file(path)
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise _err(path, f"invalid TOML ({e})", "correct the syntax") from e


def _task_id(folder: Path, config: dict[str, Any]) -> str:
    name = str((config.get("task") or {}).get("name") or folder.name)
    short = name.rsplit("/", 1)[-1]
    cleaned = re.sub(r"[^a-z0-9._-]", "-", short.lower()).lstrip("._-")
    return check_id(cleaned or "harbor-task", f"{folder / 'task.toml'}: [task].name")


def _refuse_unsupported(folder: Path, config: dict[str, Any]) -> None:
    env = config.get("environment") or {}
    verifier = config.get("verifier") or {}
    checks = [
        (
            config.get("steps"),
            "task.toml",
            "a multi-step task ([[steps]])",
            "import single-step tasks; repogym grades one episode with one verifier",
        ),
        (
            (folder / "environment" / "docker-compose.yaml").exists()
            or (folder / "environment" / "docker-compose.yml").exists(),
            "environment/docker-compose.yaml",
            "a multi-container (docker-compose) environment",
            "import tasks whose environment is one Dockerfile",
        ),
        (
            verifier.get("environment") or verifier.get("environment_mode") == "separate",
            "task.toml",
            "a separate verifier environment ([verifier.environment])",
            "import tasks whose verifier runs in the agent's environment",
        ),
        (
            str(env.get("os", "linux")).lower() == "windows",
            "task.toml",
            "a Windows task ([environment].os)",
            "import Linux tasks",
        ),
        (
            not (folder / "tests" / "test.sh").is_file(),
            "tests/test.sh",
            "missing (repogym grades with it)",
            "add tests/test.sh, which writes /logs/verifier/reward.txt",
        ),
        (
            not (folder / "solution" / "solve.sh").is_file(),
            "solution/solve.sh",
            "missing (it is the oracle: its changes are the gold patch)",
            "add solution/solve.sh",
        ),
        (
            not (folder / "instruction.md").is_file(),
            "instruction.md",
            "missing",
            "add the statement the agent is given",
        ),
    ]
    for bad, name, problem, fix in checks:
        if bad:
            raise _err(folder / name, problem, fix)
    if not (folder / "environment" / "Dockerfile").is_file():
        image = env.get("docker_image")
        raise _err(
            folder / "environment" / "Dockerfile",
            "missing" + (f" (the task names docker_image {image!r} instead)" if image else ""),
            "add environment/Dockerfile (repogym builds the task's image from it, offline)",
        )


def _workdir(folder: Path, config: dict[str, Any]) -> str:
    workdir = (config.get("environment") or {}).get("workdir")
    if not workdir:
        for line in (folder / "environment" / "Dockerfile").read_text().splitlines():
            if m := _WORKDIR.match(line):
                workdir = m.group(1)
    if not workdir or not str(workdir).startswith("/") or workdir.rstrip("/") in ("", "/tmp"):
        raise _err(
            folder / "environment" / "Dockerfile",
            f"no usable working directory "
            f"({workdir!r}): the task's files must live in one folder, which becomes "
            "the workspace",
            "set WORKDIR in the Dockerfile or [environment].workdir",
        )
    if workdir.rstrip("/") != "/workspace" and workdir.startswith("/workspace/"):
        raise _err(
            folder / "task.toml",
            f"working directory {workdir} lies inside "
            "/workspace, where the sandbox mounts its workspace",
            "use a working directory outside /workspace",
        )
    return workdir.rstrip("/")


def _missing(folder: Path, config: dict[str, Any]) -> list[str]:
    """What an offline repogym sandbox cannot give this task (each with its file and key)."""
    env, agent, verifier = (config.get(k) or {} for k in ("environment", "agent", "verifier"))
    found = []
    tools = sorted(set(_NETWORK.findall((folder / "tests" / "test.sh").read_text())))
    if tools:
        found.append(
            f"tests/test.sh runs {', '.join(tools)}: it may download its tools at "
            "verify time, and grading is offline (no network)"
        )
    user = agent.get("user")
    if user not in (None, "root", 0):
        found.append(
            f"[agent].user = {user!r}: the sandbox runs the agent as its own "
            "unprivileged user, not that one"
        )
    if verifier.get("user") not in (None, "root", 0):
        found.append(
            f"[verifier].user = {verifier['user']!r}: the verifier runs as the sandbox user"
        )
    templated = sorted(
        k
        for k, v in {**(env.get("env") or {}), **(verifier.get("env") or {})}.items()
        if "${" in str(v)
    )
    if templated:
        found.append(
            f"host variables {templated} ([environment]/[verifier].env): no host "
            "variable reaches the sandbox"
        )
    if env.get("healthcheck"):
        found.append("[environment.healthcheck]: the sandbox starts no service of the image")
    if re.search(
        r"^\s*(ENTRYPOINT|CMD)\b",
        (folder / "environment" / "Dockerfile").read_text(),
        re.MULTILINE | re.IGNORECASE,
    ):
        found.append("environment/Dockerfile's ENTRYPOINT/CMD: the sandbox does not run it")
    if int(env.get("gpus") or 0) > 0:
        found.append(f"[environment].gpus = {env['gpus']}: the sandbox has no GPU")
    if env.get("mcp_servers"):
        found.append("[environment].mcp_servers: no MCP server is started for the agent")
    if env.get("skills_dir"):
        found.append(
            f"[environment].skills_dir = {env['skills_dir']!r}: repogym's agents get no skills"
        )
    return found


def read_harbor_task(folder: Path) -> HarborTask:
    """Read and check a Harbor task folder (nothing is built or written).

    Raises:
        TaskError: a refused or malformed task (the file, the cause and the fix named).
    """
    folder = Path(folder)
    config = _read_toml(folder / "task.toml")
    _refuse_unsupported(folder, config)
    check_file(folder / "instruction.md")
    statement = (folder / "instruction.md").read_text()
    if not statement.strip():
        raise _err(folder / "instruction.md", "empty", "write the task's instruction")
    return HarborTask(
        folder,
        _task_id(folder, config),
        config,
        statement,
        _workdir(folder, config),
        _missing(folder, config),
    )


# -- the generated verifier test ------------------------------------------------------------
_REWARD_TEMPLATE = '''\
"""Generated by `repogym import-harbor` for {name}.

Runs the task's own tests/test.sh as Harbor's verifier does (in the working directory,
with [verifier].env) and reads the reward it writes: only the reward files test.sh names
({names}), reward.json (its "reward", or its only value) before reward.txt. Test k passes
when the reward is at least k/{steps}. What test.sh runs (it imports the agent's code) may
not outlive the command that started it: this process is the subreaper of test.sh's tree,
every process orphaned in it is killed as soon as it is seen, and every one left once
test.sh exits; test.sh's output goes to a file (a process holding a pipe cannot delay the
reading); a test.sh killed by a signal or past its timeout scores 0. See
repogym.integrations.harbor_tasks.
"""

import ctypes
import functools
import json
import math
import os
import signal
import subprocess
import tempfile
import threading
import time

WORKDIR = {workdir}
ENV = {env}
TIMEOUT_S = {timeout}
IMAGE = {image}
NAMES = {names}
_PR_SET_CHILD_SUBREAPER = 36


def _children():
    """Pids whose parent is this process."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{{entry}}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me:
                out.add(int(entry))
    return out


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _run_test_sh():
    """Run test.sh; True when it finished by itself within its timeout."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    before = _children()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(["bash", "/tests/test.sh"], cwd=WORKDIR,
                                env={{**os.environ, **ENV}}, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        done = threading.Event()

        def reap_orphans():  # an orphan of test.sh's tree is re-parented here, and killed
            while not done.wait(0.002):
                _kill(_children() - before - {{proc.pid}})

        watcher = threading.Thread(target=reap_orphans, daemon=True)
        watcher.start()
        try:
            code = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
            print(f"tests/test.sh timed out after {{TIMEOUT_S}} s")
        finally:
            done.set()
            watcher.join()
            for _ in range(1000):  # what test.sh's tree left is killed before any reading
                left = _children() - before
                if not left:
                    break
                _kill(left)
                time.sleep(0.001)
        out.seek(0)
        print(out.read()[-20000:].decode(errors="replace"), f"exit code {{code}}")
    if code is None or code < 0:
        print("tests/test.sh did not finish by itself: its reward is not read")
        return False
    return True


def _reward():
    logs = "/logs/verifier"
    if not os.path.isdir("/tests"):
        raise RuntimeError(f"no /tests: this Harbor task runs in its own image. Fix: "
                           f"sandbox='docker', sandbox_options={{{{'image': {{IMAGE!r}}}}}}")
    for folder in (logs, "/logs/agent"):  # /logs links to a folder in the sandbox's /tmp
        os.makedirs(os.path.realpath(folder), exist_ok=True)
    for name in ("reward.json", "reward.txt"):
        if os.path.lexists(os.path.join(logs, name)):
            os.unlink(os.path.join(logs, name))
    if not _run_test_sh():
        return 0.0
    path = os.path.join(logs, "reward.json")
    if "reward.json" in NAMES and os.path.exists(path):
        value = json.load(open(path))
        if isinstance(value, dict):
            value = value["reward"] if "reward" in value or len(value) != 1 else \\
                next(iter(value.values()))
    elif "reward.txt" in NAMES and os.path.exists(os.path.join(logs, "reward.txt")):
        value = float(open(os.path.join(logs, "reward.txt")).read())
    else:
        print(f"tests/test.sh wrote no reward file ({{', '.join(NAMES)}})")
        return 0.0
    value = float(value)
    return value if math.isfinite(value) else 0.0


@functools.cache
def _percent():
    """The reward in whole percent, from one run of tests/test.sh (a failure scores 0)."""
    try:
        reward = _reward()
    except Exception as e:  # reported in the log, scored 0, and not run again
        print(f"repogym: reading the reward failed: {{type(e).__name__}}: {{e}}")
        return 0
    return max(0, min({steps}, math.floor(reward * {steps} + 1e-9)))
'''


def reward_files(test_sh: str) -> list[str]:
    """The reward files a ``test.sh`` names (``reward.json``, ``reward.txt``), in the order
    they are read; both when it names neither literally (a path it computes).

    Only these are read after it runs: a file it never writes could only have been written
    by code it ran (the agent's, say).
    """
    named = [n for n in ("reward.json", "reward.txt") if n in test_sh]
    return named or ["reward.json", "reward.txt"]


_ONES = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def _words(n: int) -> str:
    """``37`` -> ``thirty_seven`` (test names with words: the grader's renaming and
    canaries draw their names from a file's test-name vocabulary)."""
    if n == 100:
        return "one_hundred"
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"_{_ONES[ones]}" if ones else "")


def reward_tests(harbor: HarborTask, image: str) -> tuple[str, list[str]]:
    """The generated pytest file and its node ids (in the workspace)."""
    verifier = harbor.table("verifier")
    env = {str(k): str(v) for k, v in (verifier.get("env") or {}).items() if "${" not in str(v)}
    timeout = float(verifier.get("timeout_sec") or 600.0)
    text = _REWARD_TEMPLATE.format(
        name=harbor.config.get("task", {}).get("name") or harbor.task_id,
        workdir=json.dumps(harbor.workdir),
        env=json.dumps(env),
        timeout=timeout,
        image=json.dumps(image),
        steps=STEPS,
        names=json.dumps(reward_files((harbor.path / "tests" / "test.sh").read_text())),
    )
    ids = []
    for k in range(1, STEPS + 1):
        name = f"test_reward_at_least_{_words(k)}_percent"
        text += f"\n\ndef {name}():\n    assert min(_percent(), {k}) == {k}\n"
        ids.append(f"{harbor_image.TESTS_DEST}/{REWARD_FILE}::{name}")
    return text, ids


# -- import ---------------------------------------------------------------------------------
def _tag(harbor: HarborTask) -> str:
    digest = hashlib.sha256()
    for p in sorted((harbor.path / "environment").rglob("*")):
        if p.is_file() and not p.is_symlink():
            digest.update(str(p.relative_to(harbor.path)).encode() + b"\0" + p.read_bytes())
    return f"repogym-harbor/{harbor.task_id}:{digest.hexdigest()[:12]}"


_READ_REWARD = r"""
import json, math, os
value = None
for name in ("reward.json", "reward.txt"):
    path = os.path.join("/logs/verifier", name)
    if os.path.exists(path):
        try:
            raw = open(path).read()
            value = json.loads(raw) if name.endswith(".json") else float(raw)
            if isinstance(value, dict):
                value = value["reward"] if "reward" in value or len(value) != 1 else \
                    next(iter(value.values()))
            value = float(value) if math.isfinite(float(value)) else None
        except (ValueError, KeyError, TypeError):
            value = None
        break
print("REPOGYM_REWARD", json.dumps(value))
"""


@dataclasses.dataclass
class Probe:
    """What running the task at import time showed.

    Attributes:
        diff: What solution/solve.sh changed in the working directory (the gold patch).
        noop_reward: test.sh's reward on the unchanged repository (None: no reward file).
        oracle_reward: test.sh's reward after solve.sh, in the same sandbox (as in Harbor).
        notes: What went wrong, for ``[harbor].missing``.
    """

    diff: str
    noop_reward: float | None
    oracle_reward: float | None
    notes: list[str]


def _verify(sb: Any, harbor: HarborTask, tests: Path, timeout: float) -> float | None:
    """Run tests/test.sh as Harbor's verifier does in ``sb``; the reward it wrote."""
    env = " ".join(
        f"{k}={shlex.quote(str(v))}"
        for k, v in (harbor.table("verifier").get("env") or {}).items()
        if "${" not in str(v) and str(k).isidentifier()
    )
    command = (
        f"mkdir -p /workspace/.harbor && rm -rf /workspace/{harbor_image.TESTS_DEST} && "
        f'cp -R "$RG_TESTS" /workspace/{harbor_image.TESTS_DEST} && '
        "mkdir -p /tmp/harbor-logs/verifier /tmp/harbor-logs/agent && "
        "rm -f /tmp/harbor-logs/verifier/reward.json /tmp/harbor-logs/verifier/reward.txt"
        f" && (cd {shlex.quote(harbor.workdir)} && {env} bash /tests/test.sh "
        f">/dev/null 2>&1); python3 - <<'EOF'\n{_READ_REWARD}\nEOF"
    )
    run = sb.run_with_binds(command, ro={"tests": tests}, timeout_s=timeout)
    found = re.search(r"^REPOGYM_REWARD (.+)$", run.stdout, re.MULTILINE)
    return json.loads(found.group(1)) if found else None


def _probe(harbor: HarborTask, dest: Path, image: str, base_url: str | None) -> Probe:
    """Run test.sh on the unchanged repository, and solve.sh then test.sh, each in a docker
    sandbox of the task (see :class:`Probe`)."""
    from repogym.sandbox import Limits, SandboxSpec, make_sandbox
    from repogym.sandbox.workspace import TemplateCache

    agent_timeout = float(harbor.table("agent").get("timeout_sec") or 600.0)
    verify_timeout = float(harbor.table("verifier").get("timeout_sec") or 600.0)
    env = " ".join(
        f"{k}={shlex.quote(str(v))}"
        for k, v in (harbor.table("solution").get("env") or {}).items()
        if "${" not in str(v) and str(k).isidentifier()
    )
    solve = (
        'rm -rf /tmp/harbor-solution && cp -R "$RG_SOLUTION" /tmp/harbor-solution && '
        "mkdir -p /tmp/harbor-logs/agent /tmp/harbor-logs/verifier && "
        f"cd {shlex.quote(harbor.workdir)} && {env} bash /solution/solve.sh"
    )
    options: dict[str, Any] = {"image": image, **({"base_url": base_url} if base_url else {})}
    templates = TemplateCache()
    notes: list[str] = []
    try:
        spec = SandboxSpec(
            template=templates.get(dest / "repo"),
            limits=Limits(timeout_s=max(agent_timeout, verify_timeout)),
        )
        sb = make_sandbox("docker", spec, **options)
        try:
            noop = _verify(sb, harbor, harbor.path / "tests", verify_timeout)
        finally:
            sb.close()
        sb = make_sandbox("docker", spec, **options)
        try:
            run = sb.run_with_binds(
                solve, ro={"solution": harbor.path / "solution"}, timeout_s=agent_timeout
            )
            diff = sb.diff()
            oracle = _verify(sb, harbor, harbor.path / "tests", verify_timeout)
        finally:
            sb.close()
    finally:
        templates.close()
    if run.exit_code != 0:
        notes.append(
            f"solution/solve.sh exited {run.exit_code} in the sandbox: {run.output.strip()[-300:]}"
        )
    return Probe(diff, noop, oracle, notes + reward_notes(noop, oracle))


def reward_notes(noop: float | None, oracle: float | None) -> list[str]:
    """What the rewards test.sh wrote at import time say about the task (for
    ``[harbor].missing``): an oracle under 1.0, and a test.sh that wrote no reward file on
    the unchanged repository (code it runs could plant one that would stand)."""
    notes = []
    if oracle != 1.0:
        notes.append(
            f"the oracle (solve.sh, then tests/test.sh in the same sandbox) scores "
            f"{oracle} here, not 1.0"
            + ("" if oracle is not None else ": test.sh wrote no readable reward file")
        )
    if noop is None:
        notes.append(
            "tests/test.sh wrote no reward file on the unchanged repository: where "
            "it writes none, a reward file that code it runs (the agent's) wrote "
            "stands. Fix: make test.sh write its reward on every path (a 0 first)"
        )
    return notes


def _task_toml(
    harbor: HarborTask,
    image: harbor_image.TaskImage,
    ids: list[str],
    missing: list[str],
    split: str,
    probe: Probe,
) -> str:
    """task.toml: the thresholds the unchanged repository already reaches are pass_to_pass
    (they must keep passing), the others fail_to_pass."""

    def s(v: str) -> str:
        return json.dumps(v)

    meta = harbor.table("metadata")
    tags = [
        "harbor",
        *[str(t) for t in meta.get("tags") or []],
        *[str(t) for t in harbor.table("task").get("keywords") or []],
    ]
    if meta.get("category"):
        tags.append(str(meta["category"]))
    tags = list(dict.fromkeys(tags))
    timeout = float(harbor.table("verifier").get("timeout_sec") or 600.0) + 60.0
    done = max(0, min(STEPS, math.floor((probe.noop_reward or 0.0) * STEPS + 1e-9)))
    subst = ", ".join(f"{s(k)} = {s(v)}" for k, v in image.substituted.items())
    return (
        f"# Imported from the Harbor task {harbor.path.name} by `repogym import-harbor`.\n"
        f'id = {s(harbor.task_id)}\nversion = 0\nstatement_file = "STATEMENT.md"\n'
        f"split = {s(split)}\ntags = [{', '.join(map(s, tags))}]\nmax_steps = 50\n\n"
        f"[verifier]\ntests_dest = {s(harbor_image.TESTS_DEST)}\n"
        f"command = {s('python -m pytest -q -p no:cacheprovider ' + ids[0].split('::')[0])}"
        f"\ntimeout_s = {timeout}\nfail_to_pass = [{', '.join(map(s, ids[done:]))}]\n"
        f"pass_to_pass = [{', '.join(map(s, ids[:done]))}]\n\n"
        f"[harbor]\nname = {s(str(harbor.table('task').get('name') or harbor.path.name))}\n"
        f"image = {s(image.tag)}\nworkdir = {s(harbor.workdir)}\n"
        f"substituted = {{{subst}}}\nmissing = [{', '.join(map(s, missing))}]\n"
        f"noop_reward = {_number(probe.noop_reward)}\n"
        f"oracle_reward = {_number(probe.oracle_reward)}\n"
    )


def _number(value: float | None) -> str:
    """A TOML float (``nan``: no reward was read)."""
    return "nan" if value is None else repr(float(value))


def import_foreign(
    folder: Path,
    out: Path,
    *,
    split: str = "test",
    base_image: str | None = None,
    base_url: str | None = None,
) -> Task:
    """Import one Harbor task folder made outside repogym (see the module docstring).

    Args:
        folder: The Harbor task folder.
        out: Parent folder of the repogym task folder written.
        split: The task's split.
        base_image: Local image for an unavailable ``FROM`` (default: the docker backend's).
        base_url: The Docker engine (default: the docker backend's).

    Raises:
        TaskError: refused, or the image cannot be built (the missing piece named).
        FileExistsError: ``out/<id>`` exists.
    """
    from repogym.sandbox.docker_setup import DEFAULT_IMAGE

    harbor = read_harbor_task(folder)
    build_timeout = float(harbor.table("environment").get("build_timeout_sec") or 600.0)
    try:
        image = harbor_image.build_task_image(
            folder / "environment",
            _tag(harbor),
            harbor.workdir,
            base_image=base_image or DEFAULT_IMAGE,
            base_url=base_url,
            timeout_s=build_timeout,
        )
    except harbor_image.ImageError as e:
        raise harbor_image.ImageError(f"{folder}: {e}") from e
    missing = list(harbor.missing)
    missing += [
        f"environment/Dockerfile FROM {k}: not here and not pullable; built FROM {v}"
        for k, v in image.substituted.items()
    ]
    text, ids = reward_tests(harbor, image.tag)
    with staged_task(Path(out), harbor.task_id) as dest:
        dest.mkdir()
        harbor_image.extract_dir(image.base, harbor.workdir, dest / "repo", base_url=base_url)
        copy_tree(
            folder / "tests",
            dest / "tests",
            ignore=lambda name: name == "__pycache__" or name.endswith(".pyc"),
        )
        if (dest / "tests" / REWARD_FILE).exists():
            raise _err(
                folder / "tests" / REWARD_FILE,
                "this name is repogym's generated test",
                "rename the file",
            )
        (dest / "tests" / REWARD_FILE).write_text(text)
        (dest / "STATEMENT.md").write_text(harbor.statement)
        probe = _probe(harbor, dest, image.tag, base_url)
        missing += probe.notes
        (dest / "solution.patch").write_text(probe.diff)
        (dest / "task.toml").write_text(_task_toml(harbor, image, ids, missing, split, probe))
        load_task(dest)
    return load_task(Path(out) / harbor.task_id)


def sandbox_options(task: Task) -> dict[str, Any]:
    """The docker sandbox options an imported Harbor task runs with (``{"image": ...}``).

    Raises:
        TaskError: ``task`` is not an imported Harbor task.
    """
    meta = tomllib.loads((task.path / "task.toml").read_text()).get("harbor") or {}
    if not meta.get("image"):
        raise TaskError(
            f"{task.path / 'task.toml'}: no [harbor] image: not a task imported "
            "from a Harbor folder by `repogym import-harbor`"
        )
    return {"image": meta["image"]}


def harbor_meta(task: Task) -> dict[str, Any]:
    """The ``[harbor]`` table of an imported task ({} for any other task)."""
    return tomllib.loads((task.path / "task.toml").read_text()).get("harbor") or {}
