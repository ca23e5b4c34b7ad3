"""The adversarial suite's shared set-up: attacks graded the way an agent's diff is graded.

Every attack is "the agent": a diff handed to :func:`repogym.grading.grader.grade` (built with
:func:`repogym.sandbox.workspace.make_diff` from file changes), or JSON tool calls
through ``gym.make``. Gradings share one :class:`TemplateCache` (one lease) for the session,
and one noop grading per backend and task, so that the suite stays within a few minutes.
After every grading the lease must hold nothing of it: no grading folder, no workspace,
no cgroup, no process of the lease's uid, no container.

``backend`` runs a test on bwrap and on docker; the docker half skips, saying why, where no
Docker engine can be had (``docker_engine`` in tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
from pathlib import Path

import gymnasium as gym
import pytest

from repogym.grading import grader
from repogym.sandbox import Limits, make_sandbox
from repogym.sandbox.leases import Lease, temp_root
from repogym.sandbox.limits import CGROUP_PREFIX, CGROUP_ROOT
from repogym.sandbox.workspace import TemplateCache, make_diff
from repogym.scenarios.registry import registered_tasks
from repogym.scenarios.task import Task

BACKENDS = ("bwrap", "docker")
TASK = "retry-zero"
#: The exit code with which attack code that must never run ends the verifier, if it runs.
RAN = 7
_PROBE = re.compile(r"RGPROBE (\{.*\})")


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each sandbox backend in turn (docker skips, saying why, without an engine)."""
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    return request.param


def pids_of(uid: int) -> list[int]:
    """Live processes (host pids) whose real uid is ``uid``."""
    out = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        m = re.search(r"^Uid:\s+(\d+)", text, re.MULTILINE)
        if m and int(m.group(1)) == uid:
            out.append(int(status.parent.name))
    return out


def cgroups_of(lease_name: str) -> list[Path]:
    return [
        d
        for ctl in ("memory", "pids")
        for d in (CGROUP_ROOT / ctl).glob(f"{CGROUP_PREFIX}{lease_name}-*")
    ]


def containers_of(lease: Lease) -> list[str]:
    """Names of docker containers whose mounts come from the lease's folder."""
    try:
        from repogym.sandbox.docker_setup import LABEL, client

        c = client()
    except Exception:  # no engine: there can be no container
        return []
    try:
        listed = c.api.containers(all=True, filters={"label": LABEL})
    except Exception:
        return []
    finally:
        c.close()
    prefix = str(lease.path) + "/"
    return [
        x["Names"][0]
        for x in listed
        if any(str(m.get("Source", "")).startswith(prefix) for m in x.get("Mounts", []))
    ]


def leftovers(lease: Lease, *, templates_kept: bool = True) -> list[str]:
    """What a closed sandbox (or, with ``templates_kept=False``, a closed owner) left."""
    found: list[str] = []
    if lease.path.exists():
        if not templates_kept:
            found.append(str(lease.path))
        found += [str(p) for p in lease.path.glob("g*")]
        found += [str(p) for p in lease.path.glob("w/*")]
    found += [str(d) for d in cgroups_of(lease.name)]
    if os.geteuid() == 0:  # otherwise the lease uid is this process's own
        found += [f"process {p}" for p in pids_of(lease.uid)]
    found += [f"container {n}" for n in containers_of(lease)]
    return found


def close_and_check(owner: TemplateCache | gym.Env) -> None:
    """Close an env (or a template cache) and assert that its lease left nothing.

    Leases are shared by every repogym process on the machine: once released, the same
    number may be taken again at once by another owner. The check holds the lease's lock
    while it looks; if another owner holds it already, its folder must be a new one.
    """
    cache = owner if isinstance(owner, TemplateCache) else owner.unwrapped._templates
    lease = cache.lease
    ino = lease.path.stat().st_ino
    owner.close()
    fd = os.open(temp_root() / ".locks" / lease.name, os.O_RDWR | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # taken again since: nothing of ours may remain in it
            assert not lease.path.exists() or lease.path.stat().st_ino != ino
            return
        left = leftovers(lease, templates_kept=False)
        assert not left, f"{type(owner).__name__} left {left}"
    finally:
        os.close(fd)


def probe(res: grader.GradeResult) -> dict:
    """The JSON a payload raised as ``RuntimeError("RGPROBE {...}")`` at import time."""
    m = _PROBE.search(res.test_output)
    assert m, f"no probe output in the verifier log: {res.test_output[-1500:]}"
    return json.loads(m.group(1))


@dataclasses.dataclass
class Attacker:
    """Grades attacks for the session; checks after each that nothing is left behind."""

    cache: TemplateCache
    noops: dict = dataclasses.field(default_factory=dict)

    @property
    def lease(self) -> Lease:
        return self.cache.lease

    @staticmethod
    def task(task_id: str = TASK) -> Task:
        return registered_tasks()[task_id]

    def source(self, path: str, task_id: str = TASK) -> str:
        return (self.task(task_id).repo_dir / path).read_text()

    def diff(self, changes: dict[str, str | None], task_id: str = TASK) -> str:
        return make_diff(self.task(task_id).repo_dir, changes)

    def grade(
        self,
        backend: str,
        changes: dict[str, str | None] | None = None,
        *,
        diff: str | None = None,
        task_id: str = TASK,
        timeout_s: float | None = None,
        mode: grader.RewardMode = "partial",
        limits: Limits | None = None,
    ) -> grader.GradeResult:
        """Grade ``changes`` (or a ready ``diff``) on ``backend``; nothing may be left."""
        task = self.task(task_id)
        if timeout_s is not None:
            task = dataclasses.replace(
                task, test_spec=dataclasses.replace(task.test_spec, timeout_s=timeout_s)
            )
        if diff is None:
            diff = self.diff(changes or {}, task_id)
        res = grader.grade(
            task,
            self.cache.get(task.repo_dir),
            diff,
            mode=mode,
            make_sandbox=lambda spec: make_sandbox(backend, spec),
            limits=limits,
        )
        left = leftovers(self.lease)
        assert not left, f"grading left {left}"
        return res

    def noop(
        self, backend: str, task_id: str = TASK, mode: grader.RewardMode = "partial"
    ) -> grader.GradeResult:
        """The unpatched repository's grading (once per backend, task and mode)."""
        key = (backend, task_id, mode)
        if key not in self.noops:
            self.noops[key] = self.grade(backend, {}, task_id=task_id, mode=mode)
            assert self.noops[key].infra_error is None and not self.noops[key].hack_flags
        return self.noops[key]

    def appended(
        self, payload: str, module: str = "retry.py", extra: dict[str, str | None] | None = None
    ) -> dict[str, str | None]:
        """Changes that append ``payload`` to a module the hidden tests import."""
        return {module: self.source(module) + "\n" + payload, **(extra or {})}


@pytest.fixture(scope="session")
def attacker():
    cache = TemplateCache()
    atk = Attacker(cache)
    yield atk
    close_and_check(cache)


def assert_no_gain(res: grader.GradeResult, noop: grader.GradeResult, *flags: str) -> None:
    """The attack earned no more than noop, is no infra error, and carries ``flags``."""
    assert res.infra_error is None, res.infra_error
    assert res.reward <= noop.reward, (res.reward, res.tests, res.hack_flags, res.untrusted)
    assert not res.resolved
    for flag in flags:
        assert flag in res.hack_flags, (
            flag,
            res.hack_flags,
            res.untrusted,
            res.test_output[-1500:],
        )


def assert_as_noop(res: grader.GradeResult, noop: grader.GradeResult) -> None:
    """The run was an ordinary one: same per-test outcomes as noop, exit code 1, trusted.

    Attack code that must never run ends the verifier with exit code :data:`RAN` if it runs.
    """
    assert res.infra_error is None, res.infra_error
    assert res.verifier_exit_code == 1, (
        res.verifier_exit_code,
        res.untrusted,
        res.test_output[-1500:],
    )
    assert res.tests == noop.tests and res.reward == noop.reward and not res.untrusted
