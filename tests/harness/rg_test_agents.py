"""Agents that misbehave on purpose, loaded by ``module:Class`` in the harness tests.

This folder is put on ``sys.path``/``PYTHONPATH`` by the tests, so worker processes (spawn)
and ``repogym run`` subprocesses import them as ``rg_test_agents:<Class>``.
"""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any

SUBMIT = json.dumps({"tool": "submit", "args": {}})


class FaultyAgent:
    """Raises on ``retry-zero``, hangs on ``paginate-off-by-one``, submits elsewhere."""

    def reset(self, task_info: dict[str, Any]) -> None:
        self.task = task_info["id"]

    def act(self, observation: str) -> str:
        if self.task == "retry-zero":
            raise RuntimeError("agent exploded")
        if self.task == "paginate-off-by-one":
            time.sleep(3600)
        return SUBMIT


def report_resources(mark_dir: str) -> None:
    """Write what this process holds to ``mark_dir/<pid>.json``: the folders of its live
    workspaces and leases, and the folders of its sandboxes' cgroups."""
    from repogym.sandbox.leases import Lease
    from repogym.sandbox.limits import Cgroup
    from repogym.sandbox.workspace import Workspace

    objs = gc.get_objects()
    held = {
        "paths": [str(o._root) for o in objs if isinstance(o, Workspace) and o._root]
        + [str(o.path) for o in objs if isinstance(o, Lease) and o.held],
        "cgroups": [str(d) for o in objs if isinstance(o, Cgroup) for d in o.dirs],
    }
    tmp = os.path.join(mark_dir, f"{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(held, f)
    os.rename(tmp, os.path.join(mark_dir, f"{os.getpid()}.json"))


class HangAndReportAgent:
    """Runs one command, reports its process's live sandbox resources
    (:func:`report_resources`), then hangs in ``act`` (or, with ``$RG_TEST_HANG=step``, in a
    ``sleep 600`` inside the sandbox), so a test can interrupt it and check that every one
    of them is removed."""

    def reset(self, task_info: dict[str, Any]) -> None:
        self.started = False

    def act(self, observation: str) -> str:
        if not self.started:
            self.started = True
            return json.dumps({"tool": "bash", "args": {"command": "echo started"}})
        report_resources(os.environ["RG_TEST_MARK_DIR"])
        if os.environ.get("RG_TEST_HANG") == "step":  # hang inside the sandbox instead
            return json.dumps({"tool": "bash", "args": {"command": "sleep 600"}})
        time.sleep(3600)
        return SUBMIT


class BrokenInit:
    """Not constructible with the arguments the test passes."""

    def __init__(self, required: str) -> None:
        self.required = required


class HangOrOracle(HangAndReportAgent):
    """:class:`HangAndReportAgent` while ``$RG_TEST_HANG`` is set, the oracle otherwise (so
    a resume with the same label completes the run)."""

    wants_gold_patch = True

    def __init__(self) -> None:
        from repogym.harness.baselines.scripted import OracleAgent

        self.oracle = OracleAgent()

    def set_gold_patch(self, patch: str) -> None:
        self.oracle.set_gold_patch(patch)

    def reset(self, task_info: dict[str, Any]) -> None:
        super().reset(task_info)
        self.oracle.reset(task_info)

    def act(self, observation: str) -> str:
        if os.environ.get("RG_TEST_HANG"):
            return super().act(observation)
        return self.oracle.act(observation)


class FlakyOracle:
    """The oracle, but ``act`` raises while ``$RG_TEST_FAIL`` is set (a transient bug)."""

    wants_gold_patch = True

    def __init__(self) -> None:
        from repogym.harness.baselines.scripted import OracleAgent

        self.oracle = OracleAgent()

    def set_gold_patch(self, patch: str) -> None:
        self.oracle.set_gold_patch(patch)

    def reset(self, task_info: dict[str, Any]) -> None:
        self.oracle.reset(task_info)

    def act(self, observation: str) -> str:
        if os.environ.get("RG_TEST_FAIL"):
            raise RuntimeError("flaky failure")
        return self.oracle.act(observation)
