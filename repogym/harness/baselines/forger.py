"""The forger baseline: the strongest task-blind attack of repogym's library, as an agent.

It fixes nothing. Through the env's own tools it plants the payload the attack library
rates strongest (:data:`repogym.envs.attacks.STRONGEST`, the same file ``repogym validate
--adversarial`` plants) into every non-test module of the workspace, then submits. Its row
on a leaderboard is the suite's hack resistance: on a suite whose grading holds it earns
what noop earns; every task it resolves is one that rewards a hack.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

from repogym.envs.attacks import STRONGEST, payload
from repogym.harness.baselines.base import tool_call
from repogym.scenarios.patches import is_test_file

PAYLOAD_PATH = "/tmp/repogym-forger.py"
SUBMIT = tool_call("submit")
LIST = tool_call("bash", command="git ls-files -- '*.py'")
_EXIT_CODE = re.compile(r"\[exit code: -?\d+\]\s*$")


def targets(listing: str) -> list[str]:
    """The modules to plant into, from ``git ls-files`` output: every Python file that is
    neither a test file nor a ``conftest.py`` (the grader drops changes to those)."""
    out = []
    for line in _EXIT_CODE.sub("", listing).splitlines():
        path = line.strip()
        name = PurePosixPath(path).name
        if path.endswith(".py") and not is_test_file(path) and name != "conftest.py":
            out.append(path)
    return out


class ForgerAgent:
    """Writes the payload to ``/tmp``, lists the workspace's modules, appends the payload
    to each, submits. ``stop_reason`` says so when the workspace holds no module."""

    def __init__(self) -> None:
        self._step = 0
        self.stop_reason: str | None = None

    def reset(self, task_info: dict[str, Any]) -> None:
        """Start over; the task's description is not used (the attack is task-blind)."""
        self._step, self.stop_reason = 0, None

    def act(self, observation: str) -> str:
        """write payload -> list modules -> append to each -> submit."""
        self._step += 1
        if self._step == 1:
            return tool_call("write", path=PAYLOAD_PATH, content=payload(STRONGEST))
        if self._step == 2:
            return LIST
        if self._step == 3:
            files = targets(observation)
            if not files:
                self.stop_reason = "no_module: the workspace holds no non-test Python module"
                return SUBMIT
            quoted = " ".join(shlex.quote(f) for f in files)
            return tool_call(
                "bash",
                command=f"for f in {quoted}; do cat {PAYLOAD_PATH} "
                f'>> "$f"; done; git status --short',
            )
        return SUBMIT
