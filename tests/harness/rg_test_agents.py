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


class HangAndReportAgent:
    """Writes the paths of its process's live workspaces/templates, then hangs in ``act``.

    The paths go to ``$RG_TEST_MARK_DIR/<pid>.json`` so a test can check, after Ctrl-C, that
    every one of them was removed and unmounted.
    """

    def reset(self, task_info: dict[str, Any]) -> None:
        pass

    def act(self, observation: str) -> str:
        from repogym.sandbox.workspace import TemplateCache, Workspace

        roots = [str(o._root) for o in gc.get_objects()
                 if isinstance(o, Workspace | TemplateCache) and o._root is not None]
        mark_dir = os.environ["RG_TEST_MARK_DIR"]
        tmp = os.path.join(mark_dir, f"{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(roots, f)
        os.rename(tmp, os.path.join(mark_dir, f"{os.getpid()}.json"))
        time.sleep(3600)
        return SUBMIT


class BrokenInit:
    """Not constructible with the arguments the test passes."""

    def __init__(self, required: str) -> None:
        self.required = required


class FlakyOracle:
    """The oracle, but ``act`` raises while ``$RG_TEST_FAIL`` is set (a transient bug)."""

    wants_gold_patch = True

    def __init__(self) -> None:
        from repogym.harness.agents.scripted import OracleAgent

        self.oracle = OracleAgent()

    def set_gold_patch(self, patch: str) -> None:
        self.oracle.set_gold_patch(patch)

    def reset(self, task_info: dict[str, Any]) -> None:
        self.oracle.reset(task_info)

    def act(self, observation: str) -> str:
        if os.environ.get("RG_TEST_FAIL"):
            raise RuntimeError("flaky failure")
        return self.oracle.act(observation)
